/*
 * wisdom.c - `lntune db export|import|merge`: tuning wisdom between machines
 * (core/tuning_db/db_wisdom.c), and this machine's winners built from it (rebuild.h).
 */
#include "app_internal.h"

#include "lntune.h"
#include "rebuild.h"
#include "tuning_db.h"

#include <string.h>
#include <unistd.h>

int lnt_app_db(const lnt_app_options *o, FILE *out, FILE *err) {
    const char *a = o->action ? o->action : "";
    if (strcmp(a, "export") == 0) return lnt_app_db_export(o, out, err);
    if (strcmp(a, "import") == 0) return lnt_app_db_import(o, out, err);
    if (strcmp(a, "merge") == 0) return lnt_app_db_merge(o, out, err);
    return app_usage(err, "lntune db: '%s' is not export, import or merge", a);
}

/* Opens path (NULL: the default database); LNT_EXIT_OK, else the exit code, said on err. */
static int open_db(const char *path, int flags, lntune_db **db, FILE *err) {
    const int rc = lntune_db_open(path, flags, db);
    if (rc == LNTUNE_OK) return LNT_EXIT_OK;
    fprintf(err, "lntune: %s\n", *db ? lntune_db_errmsg(*db) : lntune_errstr(rc));
    lntune_db_close(*db);
    *db = NULL;
    return app_db_exit(rc);
}

int lnt_app_db_export(const lnt_app_options *o, FILE *out, FILE *err) {
    if (o->nfiles != 1) return app_usage(err, "%s", "lntune db export takes one FILE");
    if (o->threads) return app_usage(err, "%s", "lntune db export builds no code: drop --threads");
    lntune_db *db = NULL;
    int rc = open_db(o->db, LNTUNE_DB_READONLY, &db, err);
    if (rc) return rc;
    const int to_out = strcmp(o->files[0], "-") == 0;
    FILE *f = to_out ? out : fopen(o->files[0], "w");
    int machines = 0;
    rc = f ? lntune_db_wisdom_export(db, f, &machines) : LNTUNE_EIO;
    if (f && !to_out && fclose(f) != 0) rc = LNTUNE_EIO;
    if (rc == LNTUNE_OK)
        fprintf(err, "lntune: %d machine(s) of %s written to %s (no machine code)\n", machines,
                lntune_db_path(db), o->files[0]);
    else
        fprintf(err, "lntune: db export: %s\n",
                f ? lntune_db_errmsg(db) : "cannot open the output file");
    lntune_db_close(db);
    return rc == LNTUNE_OK ? LNT_EXIT_OK : app_db_exit(rc);
}

/* After db import or merge: this CPU's winners in db get their code compiled and verified here
 * (rebuild.h), since wisdom carries none. */
static int rebuild_imported(const lnt_app_options *o, const char *db, FILE *out, FILE *err) {
    lntune_rebuild_report r;
    char msg[1024] = "";
    const int rc = lntune_rebuild_imported(db, o->threads, &r, msg, sizeof msg);
    if (rc != LNTUNE_OK) {
        fprintf(err, "lntune: db %s: the records are in, building their code failed: %s\n",
                o->action, msg);
        return rc;
    }
    if (r.considered > 0)
        fprintf(out,
                "this machine: %d winner(s) compiled and verified here from the local templates, "
                "%d stale (measured by another template or toolchain), %d not valid or wrong here"
                "%s%s%s\n",
                r.rebuilt, r.stale, r.failed, r.first_stale[0] ? " (first: " : "", r.first_stale,
                r.first_stale[0] ? "; lntune --shape tunes it again)" : "");
    if (r.other > 0)
        fprintf(out,
                "%d GPU winner(s) without code: lntune --target cuda --shape ... builds them on "
                "the device\n",
                r.other);
    return LNTUNE_OK;
}

/* Imports files[first..] (wisdom files, or with merge databases) into path, one transaction
 * each; a database this created is removed again when it fails (issue 57, item 11). */
static int import_into(const lnt_app_options *o, const char *path, int first, int merge, FILE *out,
                       FILE *err) {
    char file[4096] = "";
    if (path)
        snprintf(file, sizeof file, "%s", path);
    else if (lntune_db_default_path(file, sizeof file) != LNTUNE_OK)
        file[0] = '\0';
    const int created = file[0] && access(file, F_OK) != 0;
    lntune_db *db = NULL;
    const int code = open_db(path, 0, &db, err);
    if (code) return code;
    int rc = LNTUNE_OK;
    for (int i = first; i < o->nfiles && rc == LNTUNE_OK; ++i) {
        lntune_wisdom_report r;
        FILE *f = merge ? NULL : fopen(o->files[i], "r");
        if (!merge && !f) {
            fprintf(err, "lntune: cannot read %s\n", o->files[i]);
            rc = LNTUNE_EIO;
            break;
        }
        rc = merge ? lntune_db_wisdom_merge(db, o->files[i], &r)
                   : lntune_db_wisdom_import(db, f, &r);
        if (f) fclose(f);
        if (rc != LNTUNE_OK) {
            fprintf(err, "lntune: db %s %s: %s (nothing of it imported)\n", o->action, o->files[i],
                    lntune_db_errmsg(db));
            break;
        }
        fprintf(out,
                "%s: %ld machine(s) (%ld new), %ld measurement(s), %ld winner(s), %ld "
                "crossover(s) added or updated%s\n",
                o->files[i], r.machines, r.machines_new, r.measurements, r.best, r.crossovers,
                r.ignored ? "; records of unknown kinds ignored" : "");
    }
    lntune_db_close(db);
    if (created && rc != LNTUNE_OK) {
        static const char *const suffixes[] = {"", "-wal", "-shm"};
        for (int k = 0; k < 3; ++k) {
            char p[4200];
            snprintf(p, sizeof p, "%s%s", file, suffixes[k]);
            unlink(p);
        }
        fprintf(err, "lntune: %s removed (this command created it)\n", file);
    }
    if (rc == LNTUNE_OK) rc = rebuild_imported(o, path, out, err);
    return rc == LNTUNE_OK ? LNT_EXIT_OK : app_db_exit(rc);
}

int lnt_app_db_import(const lnt_app_options *o, FILE *out, FILE *err) {
    if (o->nfiles != 1) return app_usage(err, "%s", "lntune db import takes one FILE");
    lnt_app_options a = *o;
    a.action = "import";
    return import_into(&a, o->db, 0, 0, out, err);
}

int lnt_app_db_merge(const lnt_app_options *o, FILE *out, FILE *err) {
    if (o->nfiles < 2)
        return app_usage(err, "%s",
                         "lntune db merge takes OUT.db and at least one database to merge");
    if (o->db) return app_usage(err, "%s", "lntune db merge writes OUT.db: drop --db");
    lnt_app_options a = *o;
    a.action = "merge";
    return import_into(&a, o->files[0], 1, 1, out, err);
}
