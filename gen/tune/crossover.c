/*
 * crossover.c - see crossover.h. Why measured: the last-level cache is the textbook threshold
 * (y written with plain stores stays in it for the next reader; past it, the write-allocate
 * reads of y are wasted), but the 2-core Xeon guest reports a 260 MiB L3 while its streaming
 * built-in wins from 64-128 MiB moved at 2 threads (a loop of 4096x1024 LayerNorms: plain 51
 * GB/s, streaming 47; 16384x1024: plain 23, streaming 46), so untuned 32768x4096 LayerNorms ran
 * plain at 0.6x of the streaming kernel's speed (issue 36). Both kernels are timed warm, until
 * their caches settle (timing.c): after one warm-up call only, this placed the crossover at
 * 8 MiB.
 * Rows whose starts break the non-temporal stores' alignment are measured too, because machines
 * differ there: on the Xeon, the streaming built-in ran 4096x777 (4-byte aligned rows) at
 * 0.70-0.75x of the plain one's speed; on a Zen 4, 2048x3000 (32-byte) at 1.4-1.7x and 2048x3001
 * (4-byte) at 1.4-1.8x (2 threads, past the crossover).
 */
#include "crossover.h"

#include "builtin.h"
#include "builtin_policy.h"
#include "lntune.h"
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 4096, SIZES = 10, MIN_ROUNDS = 5 };
static const int64_t SMALLEST = INT64_C(512) << 10; /* bytes of x and y; doubled SIZES - 1 times */
static const double BUDGET_NS = 60e6;               /* per size */
/* Streaming wins a size at this ratio of times or less: near the crossover both are within a
 * few percent, and two runs put 4 MiB on either side (0.94, then 1.10). */
static const double WIN = 0.97;
/* The row alignments (bytes) measured past the crossover, as H = 4096 + alignment / 4 floats. */
static const int ALIGNMENTS[] = {32, 16, 8, 4};
enum { NALIGN = sizeof ALIGNMENTS / sizeof ALIGNMENTS[0] };
/* Bytes of x and y a row-alignment measurement moves: past the crossover (twice it), at least. */
static const int64_t ALIGNMENT_BYTES = INT64_C(64) << 20;

/* Compiles and loads the level's fp32 LayerNorm built-in at threads. */
static int build(lntune_gen *g, lntune_jit *jit, const lntune_builtin_level *level, int threads,
                 const char *const *flags, lntune_jit_module **module, lntune_kernel_fn *fn,
                 char *err, size_t errlen) {
    lntune_shape shape = {
        .H = H, .rows = (SMALLEST << (SIZES - 1)) / (8 * H), .affine = LNTUNE_AFFINE_GAMMA};
    char *variant = NULL;
    lntune_source src = {0};
    lntune_jit_object obj = {0};
    int rc = lntune_builtin_run_variant(g, level, "layernorm", &shape, threads, &variant);
    if (rc == LNTUNE_OK) rc = lntune_gen_emit(g, "cpu", "layernorm", variant, &shape, NULL, &src);
    if (rc != LNTUNE_OK)
        snprintf(err, errlen, "the %s preset: %s", level->preset, lntune_gen_errmsg(g));
    else if ((rc = lntune_jit_compile(jit, src.text, flags, &obj)) != LNTUNE_OK ||
             (rc = lntune_jit_load(jit, obj.data, obj.len, "lntune_kernel", module, fn)) !=
                 LNTUNE_OK)
        snprintf(err, errlen, "the %s preset does not compile: %s", level->preset,
                 obj.diag ? obj.diag : lntune_jit_errmsg(jit));
    lntune_jit_object_free(&obj);
    lntune_source_free(&src);
    free(variant);
    return rc;
}

/* Times plain (c[0]) and streaming (c[1]) on rows x h of x and y as liblntune runs them; the
 * ratio of their medians, streaming / plain, or a negative value (err set) when one failed. */
static double streaming_ratio(lntune_timed *c, lntune_pool *pool, int threads, int64_t rows,
                              int64_t h, float *x, float *y, const float *gamma, char *err,
                              size_t errlen) {
    const lntune_kernel_args a = {.rows = rows,
                                  .H = h,
                                  .x_stride = h,
                                  .y_stride = h,
                                  .x = x,
                                  .y = y,
                                  .gamma = gamma,
                                  .eps = 1e-5f};
    c[0].failed = c[1].failed = 0;
    c[0].threads = c[1].threads = lntune_builtin_threads(rows, h, threads); /* a launch knob */
    lntune_time_interleaved(c, 2, &a, pool, MIN_ROUNDS, BUDGET_NS);
    if (c[0].failed || c[1].failed) {
        snprintf(err, errlen, "a built-in returned an error code at %lld x %lld", (long long)rows,
                 (long long)h);
        return -1.0;
    }
    return c[1].median_ns / c[0].median_ns;
}

int lntune_crossover_streaming(lntune_gen *g, lntune_jit *jit, lntune_pool *pool,
                               const lntune_cpu_info *cpu, const char *const *flags, int64_t *bytes,
                               int64_t *row_alignment, char *err, size_t errlen) {
    const lntune_builtin_level *plain = lntune_builtin_level_for(cpu->isa, 1, 0),
                               *streaming = lntune_builtin_level_for(cpu->isa, 1, 1);
    if (streaming == plain) { /* the generic level: no streaming copy */
        snprintf(err, errlen, "no streaming built-in on this CPU (it lacks AVX2, FMA or F16C)");
        return LNTUNE_EUNSUPPORTED;
    }
    const int threads = lntune_pool_threads(pool);
    lntune_jit_module *modules[2] = {NULL, NULL};
    lntune_timed c[2] = {{.threads = threads}, {.threads = threads}}; /* plain, streaming */
    int rc = build(g, jit, plain, threads, flags, &modules[0], &c[0].fn, err, errlen);
    if (rc == LNTUNE_OK)
        rc = build(g, jit, streaming, threads, flags, &modules[1], &c[1].fn, err, errlen);
    const int64_t largest = SMALLEST << (SIZES - 1), max_rows = largest / (8 * H);
    float *x = rc ? NULL : aligned_alloc(64, (size_t)(max_rows * H) * sizeof(float));
    float *y = rc ? NULL : aligned_alloc(64, (size_t)(max_rows * H) * sizeof(float));
    float *gamma = rc ? NULL : aligned_alloc(64, (H + 64) * sizeof(float));
    if (rc == LNTUNE_OK && (!x || !y || !gamma)) {
        snprintf(err, errlen, "out of memory for %lld MiB of buffers", (long long)(largest >> 20));
        rc = LNTUNE_ENOMEM;
    }
    double ratio[SIZES]; /* streaming / plain */
    for (int64_t i = 0; rc == LNTUNE_OK && i < max_rows * H; ++i) {
        x[i] = (float)(i % 97) * 0.25f - 12.0f; /* every page touched before timing */
        y[i] = 0.0f;
    }
    for (int i = 0; rc == LNTUNE_OK && i < H + 64; ++i) gamma[i] = 1.0f;
    for (int k = 0; rc == LNTUNE_OK && k < SIZES; ++k)
        if ((ratio[k] = streaming_ratio(c, pool, threads, (SMALLEST << k) / (8 * H), H, x, y, gamma,
                                        err, errlen)) < 0.0)
            rc = LNTUNE_ERROR;
    if (rc == LNTUNE_OK) {
        int first = SIZES; /* the smallest size from which streaming wins at every size */
        while (first > 0 && ratio[first - 1] < WIN) --first;
        *bytes = first == SIZES ? 2 * largest : SMALLEST << first;
    }
    /* The least row alignment from which streaming wins at every alignment above it, measured
     * where it wins on aligned rows; 64 (aligned rows only) where it never wins. */
    *row_alignment = 64;
    const int64_t moved = rc != LNTUNE_OK                ? 0
                          : 2 * *bytes > ALIGNMENT_BYTES ? 2 * *bytes
                                                         : ALIGNMENT_BYTES;
    for (int k = 0; rc == LNTUNE_OK && moved <= largest && k < NALIGN; ++k) {
        const int64_t h = H + ALIGNMENTS[k] / (int64_t)sizeof(float);
        const double r =
            streaming_ratio(c, pool, threads, moved / (8 * h), h, x, y, gamma, err, errlen);
        if (r < 0.0) rc = LNTUNE_ERROR;
        if (rc != LNTUNE_OK || !(r < WIN)) break;
        *row_alignment = ALIGNMENTS[k];
    }
    free(x);
    free(y);
    free(gamma);
    lntune_jit_unload(modules[0]);
    lntune_jit_unload(modules[1]);
    return rc;
}
