/*
 * kernel.c - the commands about single variants: `lntune variants`, `params` and `emit` (the
 * generator's text), `verify` (one variant against the reference) and `time` (variants timed in
 * one interleaved run with the copies).
 */
#include "app_internal.h"

#include "gen_text.h"
#include "lntune.h"
#include "time_variants.h"
#include "verify.h"
#include "verify_variant.h"

#include <stdlib.h>
#include <string.h>

/* variants, params and emit: the generator's text for --op and --target. */
static int gen_text(const lnt_app_options *o, lntune_gen_text_kind kind, FILE *out, FILE *err) {
    app_shapes s;
    int rc = app_shapes_parse(o, err, &s);
    if (!rc) rc = app_check_op_target(o, &s, kind == LNTUNE_GEN_TEXT_SOURCE, err);
    if (rc) {
        app_shapes_free(&s);
        return rc;
    }
    const lntune_gen_text_request req = {o->target,         app_op_text(o), o->sm,
                                         app_the_shape(&s), o->variants[0], o->symbol};
    char *text = NULL, msg[1024] = "";
    rc = lntune_gen_text(kind, &req, &text, msg, sizeof msg);
    if (rc == LNTUNE_OK)
        fputs(text, out);
    else
        fprintf(err, "lntune: %s\n", msg);
    free(text);
    app_shapes_free(&s);
    return rc == LNTUNE_OK ? LNT_EXIT_OK : app_gen_exit(rc);
}

int lnt_app_variants(const lnt_app_options *o, FILE *out, FILE *err) {
    return gen_text(o, LNTUNE_GEN_TEXT_VARIANTS, out, err);
}

int lnt_app_params(const lnt_app_options *o, FILE *out, FILE *err) {
    return gen_text(o, LNTUNE_GEN_TEXT_PARAMS, out, err);
}

int lnt_app_emit(const lnt_app_options *o, FILE *out, FILE *err) {
    return gen_text(o, LNTUNE_GEN_TEXT_SOURCE, out, err);
}

int lnt_app_verify(const lnt_app_options *o, FILE *out, FILE *err) {
    app_shapes s;
    int rc = app_shapes_parse(o, err, &s);
    if (!rc) rc = app_check_op_target(o, &s, 1, err);
    if (!rc && strcmp(o->target, "cuda") == 0)
        rc = app_usage(err, "%s",
                       "verify runs CPU variants here; CUDA variants are verified on the GPU by "
                       "'lntune --target cuda --shape ...'");
    if (rc) {
        app_shapes_free(&s);
        return rc;
    }
    lntune_verify_variant_result r;
    char msg[1024] = "";
    rc = lntune_verify_variant(app_op_text(o), o->variants[0], app_the_shape(&s), &r, msg,
                               sizeof msg);
    if (rc == LNTUNE_OK)
        fprintf(out, "ok: %s: %d cases, max error %.3g (tolerance %.3g) at %s\n", r.variant,
                r.check.cases, r.check.max_error, LNTUNE_VERIFY_TOLERANCE, r.check.worst);
    else if (rc == LNTUNE_EVERIFY)
        fprintf(err, "lntune: %s: %s\n", r.variant, r.check.message);
    else
        fprintf(err, "lntune: %s\n", msg);
    app_shapes_free(&s);
    return rc == LNTUNE_OK ? LNT_EXIT_OK : app_gen_exit(rc);
}

/* The figures of one interleaved run (lntune_time_variants). */
static void print_times(const lnt_app_options *o, const lntune_time_result *r, int64_t H,
                        FILE *out) {
    fprintf(out,
            "%s %lldx%lld, one interleaved run; the better copy (best of %zu copy variants): "
            "%.1f us, %.2f GB/s\n%10s %10s %8s %7s  %s\n",
            r->op_key, (long long)r->rows, (long long)H, r->ncopy_variants, r->copy_ns * 1e-3,
            r->copy_gbps, "time", "score", "GB/s", "/copy", "variant");
    for (int i = 0; i < o->nvariants; ++i)
        fprintf(out, "%8.1fus %8.1fus %8.2f %6.2fx  %s\n", r->v[i].median_ns * 1e-3,
                r->v[i].score_ns * 1e-3, r->v[i].gbps, r->v[i].ratio_to_copy, o->variants[i]);
    if (o->nvariants > 1)
        fprintf(out, "spread: the slowest is %.1f%% slower than the fastest (score: %.1f%%)\n",
                r->spread * 100.0, r->score_spread * 100.0);
}

/*
 * lntune time: the given variants, each verified first, timed in one interleaved run together
 * with every copy variant, on the shape's rows x H; the figures of a tuning run, for variants
 * the user names (e.g. the winners of several runs, or measure's against exhaustive's).
 */
int lnt_app_time(const lnt_app_options *o, FILE *out, FILE *err) {
    app_shapes s;
    int rc = app_shapes_parse(o, err, &s);
    if (!rc) rc = app_check_op_target(o, &s, 1, err);
    if (!rc && strcmp(o->target, "cpu") != 0)
        rc = app_usage(err, "%s", "time runs CPU variants (CUDA: lntune --target cuda)");
    if (!rc && !s.n) rc = app_usage(err, "%s", "--shape is required, e.g. --shape H=4096");
    if (rc) {
        app_shapes_free(&s);
        return rc;
    }
    const lntune_time_config c = {app_op_text(o), s.shapes[0], o->variants, (size_t)o->nvariants,
                                  o->seconds};
    lntune_time_result r;
    char msg[1024] = "";
    rc = lntune_time_variants(&c, &r, msg, sizeof msg);
    app_shapes_free(&s);
    if (rc != LNTUNE_OK) {
        fprintf(err, "lntune: %s\n", msg);
        return app_gen_exit(rc);
    }
    for (int i = 0; i < o->nvariants; ++i)
        if (r.v[i].wrong)
            fprintf(err, "lntune: %s is wrong, not timed: %s\n", o->variants[i], r.v[i].message);
    if (r.wrong) return LNT_EXIT_FAIL;
    print_times(o, &r, c.shape.H, out);
    return LNT_EXIT_OK;
}
