/*
 * cuda_compile_test.h - the frame of the CUDA compile tests that take a fixed sample
 * (test_cuda_compile_dtypes, _residual, _backward and test_cuda_builtin_typed): NVRTC opened
 * (the test skipped, 77, without it), the samples collected from the generator for each compute
 * capability, compiled in one batch per capability, each checked and, on a GPU, verified there
 * (cuda_device.h); and the helpers their collectors share. Its includer defines _GNU_SOURCE
 * (memmem, in nvrtc_check.h) before any include.
 */
#ifndef LNTUNE_TEST_CUDA_COMPILE_TEST_H
#define LNTUNE_TEST_CUDA_COMPILE_TEST_H

#include "check.h"
#include "cuda_device.h"
#include "generator.h"
#include "knob_coverage.h"
#include "lntune.h"
#include "nvrtc.h"
#include "nvrtc_check.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct compile_test {
    const char *what; /* "residual variants": for the closing line */
    int sms[2];       /* the compute capabilities, collected and compiled in this order; 0 ends */
    /* collect[k] adds the samples for sms[k], the compute capability g is set to. */
    void (*collect[2])(lntune_gen *g);
    /* Then (may be NULL): checks of the sample as a whole, and of NVRTC alone. */
    void (*collected)(const lntune_nvrtc *nv);
    /* Sample i's job when the sample is for sm, else NULL. */
    lntune_nvrtc_job *(*job)(size_t i, int sm);
    /* Checks sample i's compile (its job's rc, out) and, when it compiled, runs it on d. */
    void (*compiled)(size_t i, device_suite *d);
    const size_t *nsamples; /* the samples collected ... */
    size_t want;            /* ... which must be this many */
} compile_test;

/* Room for one more sample of at most max; a failure counted when there is none. */
static inline int compile_test_room(size_t n, size_t max) {
    EXPECT(n < max, "more samples than %zu", max);
    return n < max;
}

/* op's variant for shape as symbol into *src; 0, a failure counted, when it does not emit. */
static inline int compile_test_emit(lntune_gen *g, const char *op, const char *variant,
                                    const lntune_shape *shape, const char *symbol, const char *what,
                                    lntune_source *src) {
    const int rc = lntune_gen_emit(g, "cuda", op, variant, shape, symbol, src);
    EXPECT(rc == LNTUNE_OK, "emit %s: %s", what, lntune_gen_errmsg(g));
    return rc == LNTUNE_OK;
}

/* Hands src's text to job (freed after the compile) and frees the rest of src. */
static inline void compile_test_take(lntune_nvrtc_job *job, lntune_source *src) {
    job->source = src->text;
    src->text = NULL;
    lntune_source_free(src);
}

/* The variants of op for shape, which must be those for ref, named ref_name in a failure, but
 * for any that contain extra (NULL: none), counted in *nextra; NULL, a failure counted, when
 * shape has none. */
static inline char **compile_test_variants(lntune_gen *g, const char *op, const lntune_shape *shape,
                                           const lntune_shape *ref, const char *ref_name,
                                           const char *extra, size_t *n, size_t *nextra) {
    char **list = NULL, **want = NULL;
    size_t nwant = 0, k = 0, more = 0;
    *n = 0;
    const int rc = lntune_gen_variants(g, "cuda", op, shape, &list, n);
    EXPECT(rc == LNTUNE_OK && *n > 0, "variants of %s: %s", op, lntune_gen_errmsg(g));
    if (rc != LNTUNE_OK || *n == 0) {
        if (rc == LNTUNE_OK) lntune_gen_free_list(list, *n);
        *n = 0;
        return NULL;
    }
    if (lntune_gen_variants(g, "cuda", op, ref, &want, &nwant) == LNTUNE_OK) {
        int same = 1;
        for (size_t i = 0; i < *n; ++i) {
            if (extra && strstr(list[i], extra))
                ++more;
            else if (same)
                same = k < nwant && strcmp(want[k++], list[i]) == 0;
        }
        EXPECT(same && k == nwant, "%s: %zu variants (%zu of %s), %zu %s", op, *n, more,
               extra ? extra : "none", nwant, ref_name);
        lntune_gen_free_list(want, nwant);
    }
    if (nextra) *nextra = more;
    return list;
}

/* The h=fixed variants of list (pointers into it), at most cap; their count. */
static inline size_t compile_test_fixed(char **list, size_t n, char **out, size_t cap) {
    size_t nf = 0;
    for (size_t i = 0; list && i < n && nf < cap; ++i)
        if (strstr(list[i], "h=fixed")) out[nf++] = list[i];
    return nf;
}

/* The h=fixed variant of list[0..n) (op's, at H) with the most knob values new to c, the first
 * such from the start-th h=fixed one on; NULL, a failure counted, when there is none. */
static inline const char *compile_test_pick_fixed(char **list, size_t n, const knob_coverage *c,
                                                  size_t start, const char *op, int64_t H) {
    char *fl[512];
    const size_t nf = compile_test_fixed(list, n, fl, 512);
    EXPECT(nf > 0, "%s H=%lld: no h=fixed variant", op, (long long)H);
    return nf ? knob_coverage_pick(c, fl, nf, start) : NULL;
}

/* A test's sample maker and variant lister (its add and variants). */
typedef void compile_test_add_fn(lntune_gen *g, int sm, const char *op, const char *variant,
                                 const lntune_shape *shape);
typedef char **compile_test_list_fn(lntune_gen *g, const char *op, const lntune_shape *shape,
                                    size_t *n);

/* Group k's fixed-H sample for sm_90: op at any's types, fusion and affine kind at H 1000, 4096
 * or 16384 in turn, the variant c picks from seed, added with add. */
static inline void compile_test_add_fixed(lntune_gen *g, const char *op, const lntune_shape *any,
                                          int k, const knob_coverage *c, size_t seed,
                                          compile_test_list_fn *variants,
                                          compile_test_add_fn *add) {
    static const int64_t fixed_h[] = {1000, 4096, 16384};
    lntune_shape fixed = *any;
    fixed.H = fixed_h[k % 3];
    size_t n = 0;
    char **list = variants(g, op, &fixed, &n);
    const char *v = compile_test_pick_fixed(list, n, c, seed, op, fixed.H);
    if (v) add(g, 90, op, v, &fixed);
    lntune_gen_free_list(list, n);
}

/* Every knob value of the lists c saw came up in its sample (name: whose sample). */
static inline void compile_test_covered(const knob_coverage *c, const char *name) {
    const char *missing = knob_coverage_missing(c);
    EXPECT(!missing && !c->overflow, "%s: knob value %s is in no sample", name,
           missing ? missing : "(too many to count)");
    printf("%s: %zu knob values covered\n", name, c->n);
}

/* Compiles t's samples for sm in one batch, checks (and runs on d) each, then frees its output
 * and source; returns the NVRTC milliseconds and, in *count, how many there were. */
static inline double compile_test_batch(const compile_test *t, const lntune_nvrtc *nv, int sm,
                                        device_suite *d, size_t *count) {
    const size_t total = *t->nsamples;
    lntune_nvrtc_job *jobs = calloc(total + 1, sizeof *jobs);
    size_t *idx = calloc(total + 1, sizeof *idx), n = 0;
    if (!jobs || !idx) {
        EXPECT(0, "out of memory for %zu jobs", total);
        free(jobs);
        free(idx);
        *count = 0;
        return 0;
    }
    for (size_t i = 0; i < total; ++i) {
        const lntune_nvrtc_job *job = t->job(i, sm);
        if (job) {
            idx[n] = i;
            jobs[n++] = *job;
        }
    }
    const int rc = lntune_nvrtc_compile_many(nv, sm, LNTUNE_NVRTC_CUBIN, jobs, n, 0);
    EXPECT(rc == LNTUNE_OK, "compile_many sm_%d: rc %d", sm, rc);
    double ms = 0;
    for (size_t j = 0; j < n; ++j) {
        lntune_nvrtc_job *job = t->job(idx[j], sm);
        *job = jobs[j];
        if (rc == LNTUNE_OK) t->compiled(idx[j], d);
        ms += job->out.compile_ms;
        lntune_nvrtc_output_free(&job->out);
        free((char *)job->source);
        job->source = NULL;
    }
    free(jobs);
    free(idx);
    *count = n;
    return ms;
}

/* The whole test: its exit code. */
static inline int compile_test_main(const compile_test *t) {
    lntune_nvrtc *nv = NULL;
    const int skip = nvrtc_check_open(&nv);
    if (skip) return skip;
    lntune_gen *g = NULL;
    const int rc = lntune_gen_open(NULL, &g);
    EXPECT(rc == LNTUNE_OK, "gen open: %s", lntune_gen_errmsg(g));
    for (size_t k = 0; rc == LNTUNE_OK && k < 2 && t->sms[k]; ++k) {
        lntune_gen_set_cuda_arch(g, t->sms[k]);
        t->collect[k](g);
    }
    lntune_gen_close(g);
    if (t->collected) t->collected(nv);

    device_suite dev;
    device_open(&dev);
    const double t0 = test_now_s();
    double ms = 0;
    for (size_t k = 0; k < 2 && t->sms[k]; ++k) {
        size_t n = 0;
        ms += compile_test_batch(t, nv, t->sms[k], &dev, &n);
        printf("%zu %s compiled for sm_%d\n", n, t->what, t->sms[k]);
    }
    printf("%zu %s compiled (those for the GPU run on it, if any) in %.1f s wall (NVRTC %.1f s)\n",
           *t->nsamples, t->what, test_now_s() - t0, ms / 1e3);
    EXPECT(*t->nsamples == t->want, "%zu samples", *t->nsamples);
    device_close(&dev);
    lntune_nvrtc_close(nv);
    return nvrtc_check_exit();
}

#endif /* LNTUNE_TEST_CUDA_COMPILE_TEST_H */
