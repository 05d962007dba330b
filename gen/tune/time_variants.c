/*
 * time_variants.c - `lntune time` (see time_variants.h).
 */
#include "time_variants.h"

#include "build.h"
#include "fusion.h"
#include "generator.h"
#include "hardware.h"
#include "lntune.h"
#include "pool.h"
#include "problem.h"
#include "timing.h"
#include "tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_COPIES = 64, MAX = LNTUNE_TIME_MAX_VARIANTS + MAX_COPIES, MIN_ROUNDS = 15 };

/* The sources of the variants, then of every copy variant; *n how many. */
static int emit(const lntune_time_config *c, const lntune_shape *shape, int cores,
                lntune_source *src, char names[][64], size_t *n, char *err, size_t errlen) {
    lntune_gen *g = NULL;
    char **copies = NULL;
    size_t ncopies = 0;
    const lntune_shape any = {.affine = LNTUNE_AFFINE_ANY};
    int rc = lntune_gen_open(NULL, &g);
    if (rc == LNTUNE_OK) {
        lntune_gen_set_cores(g, cores);
        rc = lntune_gen_variants(g, "cpu", "copy", &any, &copies, &ncopies);
    }
    for (size_t i = 0; rc == LNTUNE_OK && i < c->nvariants + ncopies && *n < MAX; ++i) {
        snprintf(names[*n], 64, "lntune_time_%zu", *n);
        rc = i < c->nvariants
                 ? lntune_gen_emit(g, "cpu", c->op, c->variants[i], shape, names[*n], &src[*n])
                 : lntune_gen_emit(g, "cpu", "copy", copies[i - c->nvariants], &any, names[*n],
                                   &src[*n]);
        if (rc == LNTUNE_OK) ++*n;
    }
    if (rc) snprintf(err, errlen, "%s", g ? lntune_gen_errmsg(g) : lntune_errstr(rc));
    lntune_gen_free_list(copies, ncopies);
    lntune_gen_close(g);
    return rc;
}

/* Verifies the variants (not the copies); returns how many are wrong. */
static int verify(const lntune_time_config *c, lntune_problem *prob, lntune_library *lib,
                  const lntune_source *src, char names[][64], lntune_pool *pool,
                  lntune_time_result *r, lntune_timed *t) {
    void *v = NULL;
    int wrong = 0;
    if (lntune_problem_verifier(prob, &v) != LNTUNE_OK) return -1;
    for (size_t i = 0; i < c->nvariants; ++i) {
        lntune_kernel_fn fn = lntune_library_kernel(lib, names[i]);
        t[i] = prob->dir->candidate(prob, fn, src[i].threads);
        lntune_verify_result res;
        if (prob->dir->check(v, fn, &src[i], src[i].threads, pool, &res)) {
            r->v[i].wrong = 1;
            snprintf(r->v[i].message, sizeof r->v[i].message, "%s", res.message);
            ++wrong;
        }
    }
    prob->dir->verifier_destroy(v);
    return wrong;
}

int lntune_time_variants(const lntune_time_config *c, lntune_time_result *r, char *err,
                         size_t errlen) {
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < LNTUNE_TIME_MAX_VARIANTS; ++i)
        r->v[i].median_ns = r->v[i].score_ns = r->v[i].gbps = r->v[i].ratio_to_copy = NAN;
    r->copy_gbps = r->spread = r->score_spread = NAN;
    if (!c || !c->op || c->nvariants < 1 || c->nvariants > LNTUNE_TIME_MAX_VARIANTS) {
        snprintf(err, errlen, "time takes 1 to %d variants", LNTUNE_TIME_MAX_VARIANTS);
        return LNTUNE_EINVAL;
    }
    lntune_shape shape = c->shape;
    if (shape.rows <= 0) shape.rows = lntune_tune_default_rows(shape.H);
    if (shape.affine != LNTUNE_AFFINE_OFFSET) shape.affine = LNTUNE_AFFINE_GAMMA;
    r->rows = shape.rows;
    lntune_op_key(c->op, shape.fusion, shape.affine == LNTUNE_AFFINE_OFFSET, r->op_key,
                  sizeof r->op_key);
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);

    lntune_source src[MAX];
    char names[MAX][64];
    size_t n = 0;
    lntune_library *lib = NULL;
    lntune_pool *pool = NULL;
    lntune_problem prob;
    memset(&prob, 0, sizeof prob);
    int rc = emit(c, &shape, cpu.cores, src, names, &n, err, errlen);
    if (rc == LNTUNE_OK) {
        const char *texts[MAX];
        char *diag = NULL;
        for (size_t i = 0; i < n; ++i) texts[i] = src[i].text;
        rc =
            lntune_build_library(lntune_default_compiler(), NULL, texts, n, cpu.cores, &lib, &diag);
        if (rc) snprintf(err, errlen, "%s", diag ? diag : lntune_errstr(rc));
        free(diag);
    }
    if (rc == LNTUNE_OK && (lntune_pool_create(cpu.cores, &pool) ||
                            lntune_problem_init(&prob, c->op, shape.types, shape.fusion, shape.rows,
                                                shape.H, cpu.cores))) {
        rc = LNTUNE_ENOMEM;
        snprintf(err, errlen, "out of memory for %s at %lldx%lld", c->op, (long long)shape.rows,
                 (long long)shape.H);
    }
    lntune_timed t[MAX];
    const size_t nv = c->nvariants;
    int wrong = 0;
    if (rc == LNTUNE_OK && (wrong = verify(c, &prob, lib, src, names, pool, r, t)) < 0) {
        rc = LNTUNE_ENOMEM;
        snprintf(err, errlen, "cannot prepare the %s verifier", c->op);
    }
    if (rc == LNTUNE_OK && wrong == 0) {
        for (size_t i = nv; i < n; ++i)
            t[i] = (lntune_timed){.fn = lntune_library_kernel(lib, names[i]),
                                  .threads = src[i].threads,
                                  .args = &prob.copy_args};
        lntune_time_interleaved(t + nv, n - nv, &prob.args, pool, MIN_ROUNDS, 1e9);
        r->ncopy_variants = n - nv;
        const size_t nt = nv + lntune_tune_copy_finalists(t + nv, n - nv, LNTUNE_COPY_FINALISTS);
        t[nv].reference = nt > nv;
        lntune_time_interleaved(t, nt, &prob.args, pool, MIN_ROUNDS,
                                (c->seconds > 0 ? c->seconds : 3.0) * 1e9);
        r->copy_ns = INFINITY;
        for (size_t i = nv; i < nt; ++i)
            if (!t[i].failed && t[i].median_ns < r->copy_ns) r->copy_ns = t[i].median_ns;
        r->bytes = prob.bytes;
        r->copy_gbps = prob.bytes / r->copy_ns;
        double lo = INFINITY, hi = 0.0, slo = INFINITY, shi = 0.0;
        for (size_t i = 0; i < nv; ++i) {
            r->v[i].median_ns = t[i].median_ns;
            r->v[i].score_ns = t[i].score_ns;
            r->v[i].gbps = prob.bytes / t[i].median_ns;
            r->v[i].ratio_to_copy = r->copy_ns / t[i].median_ns;
            lo = fmin(lo, t[i].median_ns), hi = fmax(hi, t[i].median_ns);
            slo = fmin(slo, t[i].score_ns), shi = fmax(shi, t[i].score_ns);
        }
        r->spread = hi / lo - 1.0;
        r->score_spread = shi / slo - 1.0;
    }
    r->wrong = wrong > 0 ? wrong : 0;
    for (size_t i = 0; i < n; ++i) lntune_source_free(&src[i]);
    lntune_problem_free(&prob);
    lntune_pool_destroy(pool);
    lntune_library_close(lib);
    return rc;
}
