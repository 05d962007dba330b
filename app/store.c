/*
 * store.c - the commands about what lntune keeps: `lntune doctor` (whether liblntune loads the
 * database's code), `cache` (the JIT's compiled objects) and `export` (the winners as static C).
 */
#include "app_internal.h"

#include "export.h"
#include "lntune.h"
#include "object_cache.h"
#include "tuning_db.h"

#include <string.h>

int lnt_app_doctor(const lnt_app_options *o, FILE *out, FILE *err) {
    (void)err;
    lntune_db_health h;
    const int rc = lntune_db_doctor(o->db, &h);
    fprintf(out, "database: %s\n", h.path);
    if (!h.opened) {
        fprintf(out, "problem: liblntune cannot open it: %s\n", h.open_error);
        return LNT_EXIT_FAIL;
    }
    int problems = 0;
    if (h.trusted) {
        fprintf(out, "ok: it and its folder are this user's and nobody else may write them\n");
    } else {
        fprintf(out, "problem: liblntune loads no code from it: %s\n", h.why);
        problems++;
    }
    if (h.machine_known)
        fprintf(out, "ok: it holds results of this machine (%s)\n", h.fingerprint);
    else
        fprintf(out,
                "note: it holds no results of this machine (%s): every CPU shape runs a "
                "built-in\n",
                h.fingerprint);
    if (rc != LNTUNE_OK) {
        fprintf(out, "problem: reading its artifacts: %s\n", h.open_error);
        return LNT_EXIT_FAIL;
    }
    if (h.intact == h.artifacts) {
        fprintf(out,
                "ok: all %lld artifact(s) hash to the digest recorded when lntune stored them\n",
                h.artifacts);
    } else {
        fprintf(out,
                "problem: %lld of %lld artifact(s) are not loaded (altered, or stored without a "
                "digest); the first: %s\n",
                h.artifacts - h.intact, h.artifacts, h.first_altered);
        problems++;
    }
    fprintf(out, "%s: %lld winner(s) of this machine, %lld loadable%s%s\n",
            h.loadable == h.winners ? "ok" : "problem", h.winners, h.loadable,
            h.first_unloadable[0] ? "; the first that is not: " : "", h.first_unloadable);
    if (h.loadable != h.winners) {
        fprintf(
            out,
            "  (liblntune runs a built-in kernel there; lntune --shape of it tunes it again)\n");
        problems++;
    }
    return problems ? LNT_EXIT_FAIL : LNT_EXIT_OK;
}

/* lntune cache [clean]: the JIT's object cache (object_cache.h). */
int lnt_app_cache(const lnt_app_options *o, FILE *out, FILE *err) {
    const char *a = o->action ? o->action : "";
    const int clean = strcmp(a, "clean") == 0;
    if (*a && !clean) return app_usage(err, "lntune cache: '%s' is not clean", a);
    if (o->nfiles) return app_usage(err, "lntune cache takes no FILE: '%s'", o->files[0]);
    char dir[4096];
    if (lntune_object_cache_dir(dir, sizeof dir) != LNTUNE_OK) {
        fprintf(err, "lntune: no object cache: neither XDG_CACHE_HOME nor HOME is set\n");
        return LNT_EXIT_FAIL;
    }
    lntune_object_cache_stats st;
    const int rc = lntune_object_cache_scan(dir, clean, &st);
    if (o->json) {
        fprintf(out, "{");
        app_json_field(out, "dir", dir, 1);
        fprintf(out, ", \"%s\": %ld, \"bytes\": %lld}\n", clean ? "removed" : "objects", st.files,
                st.bytes);
    } else {
        fprintf(out, "%s %s: %ld compiled object(s), %.1f MB%s\n",
                clean ? "removed from" : "objects in", dir, st.files, (double)st.bytes / 1e6,
                clean ? ""
                      : " (lntune cache clean removes them; a tune compiles what it needs again)");
    }
    if (rc != LNTUNE_OK) {
        fprintf(err, "lntune: cache: cannot %s %s\n", clean ? "empty" : "read", dir);
        return LNT_EXIT_FAIL;
    }
    return LNT_EXIT_OK;
}

int lnt_app_export(const lnt_app_options *o, FILE *out, FILE *err) {
    if (!o->out_dir) return app_usage(err, "%s", "--out DIR is required");
    if (o->generic_only && (o->db || o->gpu))
        return app_usage(err, "%s", "--generic-only reads no database: drop --db and --gpu");
    const lntune_export_config c = {o->out_dir, o->db, o->cmake, err, o->gpu, o->generic_only};
    lntune_export_report r;
    const int rc = lntune_export(&c, &r);
    if (rc != LNTUNE_OK) {
        fprintf(err, "lntune: export: %s\n", r.message[0] ? r.message : lntune_errstr(rc));
        return rc == LNTUNE_EINVAL ? LNT_EXIT_USAGE : app_db_exit(rc);
    }
    fprintf(out,
            "wrote %s/lntune_kernels.c and lntune_kernels.h%s: %d tuned kernel(s) of machine %s%s,"
            " plus the generic kernels\n",
            o->out_dir, o->cmake ? " and CMakeLists.txt" : "", r.tuned, r.fingerprint,
            r.skipped ? " (winners left out: see the warnings)" : "");
    if (r.cuda_written)
        fprintf(out,
                "wrote %s/lntune_kernels.cu and lntune_kernels_cuda.h: %d tuned CUDA kernel(s) "
                "of %d GPU(s)%s, plus the generic CUDA kernels\n",
                o->out_dir, r.cuda_tuned, r.cuda_gpus,
                r.cuda_skipped ? " (winners left out: see the warnings)" : "");
    return LNT_EXIT_OK;
}
