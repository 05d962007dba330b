/*
 * show.c - `lntune show`: the winners stored for this machine (or every machine), a short row
 * each by default (op, type, shape, time, GB/s, ratio to the copy with its spread, the copy's
 * GB/s it was measured against, a short variant id), every knob with --long, or JSON. Each
 * machine is named by its CPU or GPU model and fingerprint.
 */
#include "app_internal.h"

#include "best_list.h"
#include "lntune.h"
#include "reference.h"
#include "tuning_db.h"

#include <stdint.h>
#include <string.h>

/* A short id of a variant string: 8 hex digits of its 32-bit FNV-1a hash ("v" first, so that it
 * never reads as a number). The same string has the same id on every machine. */
static const char *variant_id(const char *variant, char buf[10]) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)variant; *p; ++p) h = (h ^ *p) * 16777619u;
    snprintf(buf, 10, "v%08x", h);
    return buf;
}

/* --op, --target, --shape: whether b is a row asked for (--op: of either direction and any
 * fusion; --shape: its H, and its rows' bucket when rows are given). */
static int keeps(const lnt_app_options *o, const app_shapes *s, const lntune_best_row *b) {
    const size_t n = o->op ? strlen(o->op) : 0;
    if (o->target && strcmp(b->target, o->target) != 0) return 0;
    if (o->op && (strncmp(b->op, o->op, n) != 0 || !strchr("_+", b->op[n]))) return 0;
    for (size_t i = 0; i < s->n; ++i)
        if (s->shapes[i].H == b->H &&
            (!s->shapes[i].rows ||
             lntune_rows_bucket(s->shapes[i].rows) == lntune_rows_bucket(b->rows)))
            return 1;
    return !s->n;
}

static void print_json_row(const lntune_best_list *l, const lntune_best_row *b, int first,
                           FILE *out) {
    const lntune_best_machine *m = b->machine >= 0 ? &l->hw[b->machine] : NULL;
    char id[10];
    fprintf(out, "%s\n {\"hardware_id\": %lld", first ? "" : ",", (long long)b->hardware_id);
    app_json_field(out, "machine", m ? m->model : NULL, 0);
    app_json_field(out, "fingerprint", m ? m->fingerprint : NULL, 0);
    app_json_field(out, "target", b->target, 0);
    app_json_field(out, "op", b->op, 0);
    app_json_field(out, "direction", b->direction, 0);
    app_json_field(out, "dtype", b->dtype, 0);
    fprintf(out, ", \"H\": %lld, \"rows\": %lld, \"affine\": %d", (long long)b->H,
            (long long)b->rows, b->affine);
    app_json_field(out, "variant", b->variant, 0);
    app_json_field(out, "variant_id", variant_id(b->variant, id), 0);
    fprintf(out, ", \"threads\": %d", b->threads);
    static const char *const keys[] = {"time_us", "gbps", "copy_gbps", "ratio_lo", "ratio_hi"};
    const double v[] = {b->time_us, b->gbps, b->copy_gbps, b->ratio_lo, b->ratio_hi};
    for (int k = 0; k < 5; ++k) {
        fprintf(out, ", \"%s\": ", keys[k]);
        app_json_number(out, "%.3f", v[k]);
    }
    app_json_field(out, "under_load", b->under_load, 0);
    fprintf(out,
            ", \"reach_lo\": %lld, \"reach_hi\": %lld, \"max_error\": ", (long long)b->reach_lo,
            (long long)b->reach_hi);
    app_json_number(out, "%.3g", b->max_error);
    if (b->twin_variant) { /* the kernel that serves other H in a fixed-H winner's place */
        app_json_field(out, "twin_variant", b->twin_variant, 0);
        fprintf(out, ", \"twin_time_us\": ");
        app_json_number(out, "%.3f", b->twin_time_us);
    }
    fprintf(out, "}");
}

static void print_row(const lnt_app_options *o, const lntune_best_row *b, FILE *out) {
    char spread[32] = "-", id[10];
    if (b->ratio_lo > 0)
        snprintf(spread, sizeof spread, "%.2f-%.2f%s", b->ratio_lo, b->ratio_hi,
                 b->under_load ? "*" : "");
    fprintf(out, "%-4s %-18s %-4s %-14s %9.1fus %7.2f %5.2fx %-11s %7.2f  %s", b->target, b->op,
            b->dtype, b->shape, b->time_us, b->gbps, b->ratio_to_copy, spread, b->copy_gbps,
            o->long_rows ? b->variant : variant_id(b->variant, id));
    if (o->long_rows) {
        fprintf(out, "  (%d thread(s), max error %.2g", b->threads, b->max_error);
        if (b->reach_hi > 0)
            fprintf(out, ", serves H %lld-%lld", (long long)b->reach_lo, (long long)b->reach_hi);
        fprintf(out, ")");
    }
    if (b->twin_variant)
        fprintf(out, "  (other H: %s, %.1fus)",
                o->long_rows ? b->twin_variant : variant_id(b->twin_variant, id), b->twin_time_us);
    fprintf(out, "\n");
    if (b->under_load) fprintf(out, "     * measured under load: %s\n", b->under_load);
}

/* The kept rows of l, a heading before each machine's. */
static size_t print_rows(const lnt_app_options *o, const app_shapes *s, const lntune_best_list *l,
                         FILE *out) {
    size_t shown = 0;
    int machine = -2;
    for (size_t i = 0; i < l->n; ++i) {
        const lntune_best_row *b = &l->rows[i];
        if (!keeps(o, s, b)) continue;
        if (o->json) {
            print_json_row(l, b, shown == 0, out);
        } else {
            if (b->machine != machine) {
                const lntune_best_machine *m = b->machine >= 0 ? &l->hw[b->machine] : NULL;
                fprintf(out,
                        "%s%s %s, fingerprint %s:\n%-4s %-18s %-4s %-14s %11s %7s %6s %-11s "
                        "%7s  %s\n",
                        shown ? "\n" : "", m ? m->kind : "?", m ? m->model : "(unknown machine)",
                        m ? m->fingerprint : "?", "tgt", "op", "type", "shape", "time", "GB/s",
                        "/copy", "spread", "copy", o->long_rows ? "variant" : "variant id");
                machine = b->machine;
            }
            print_row(o, b, out);
        }
        shown++;
    }
    return shown;
}

int lnt_app_show(const lnt_app_options *o, FILE *out, FILE *err) {
    if (o->force) return app_usage(err, "%s", "--force applies to tuning; show never writes");
    if (o->op && lntune_op_parse(o->op) < 0)
        return app_usage(err, "unknown op '%s' (expected layernorm or rmsnorm)", o->op);
    if (o->target && strcmp(o->target, "cpu") != 0 && strcmp(o->target, "cuda") != 0)
        return app_usage(err, "unknown target '%s' (expected cpu or cuda)", o->target);
    app_shapes s;
    int rc = app_shapes_parse(o, err, &s);
    if (rc) return rc;
    lntune_best_list l;
    char msg[1024] = "";
    rc = lntune_best_list_read(o->db, o->all, &l, msg, sizeof msg);
    if (!l.opened) {
        fprintf(err, "lntune: %s\n", msg);
        app_shapes_free(&s);
        return app_db_exit(rc);
    }
    if (!o->all && !l.machines) {
        if (o->json)
            fprintf(out, "[]\n");
        else
            fprintf(out, "no tuning results for this machine (%s) in %s\n", l.fingerprint,
                    l.db_path);
    } else {
        if (o->json) fprintf(out, "[");
        const size_t shown = print_rows(o, &s, &l, out);
        if (o->json) fprintf(out, "\n]\n");
        if (!o->json && !shown && l.n)
            fprintf(out, "(no winner matches --op, --target or --shape)\n");
        if (!o->json && shown && !o->long_rows)
            fprintf(out, "(/copy: its speed against the copy of the same bytes, copy: that copy's "
                         "GB/s; show --long lists every knob)\n");
    }
    if (rc != LNTUNE_OK) fprintf(err, "lntune: %s\n", msg);
    lntune_best_list_free(&l);
    app_shapes_free(&s);
    return rc == LNTUNE_OK ? LNT_EXIT_OK : app_db_exit(rc);
}
