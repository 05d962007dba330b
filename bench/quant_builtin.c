/*
 * quant_builtin.c - the untuned path of a quantized y (issue #56): RMSNorm of fp32 x into
 * per-row int8 (or e4m3) codes through the public API, beside the float built-in alone at the
 * same shape (fp32 y) and a memcpy of x's bytes.
 *
 *   LNTUNE_DB=/nonexistent quant_builtin [ROWS H [e4m3]]   (default 16 4096, int8)
 *
 * Run with no database so that only built-ins serve the calls; LNTUNE_NUM_THREADS and
 * LNTUNE_BUILTIN_ISA choose the threads and the built-ins' copy as for any app. Each figure is
 * the best of many rounds (a round: enough calls for about a millisecond), the three kinds
 * interleaved so that drift and other processes hit them alike.
 */
#define _POSIX_C_SOURCE 200809L
#include "lntune.h"
#include "clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROUNDS = 301 };

static void call_or_die(lntune *ctx, const lntune_args *a) {
    if (lntune_rmsnorm(ctx, a) != LNTUNE_OK) {
        fprintf(stderr, "lntune_rmsnorm: %s\n", lntune_errmsg(ctx));
        exit(1);
    }
}

int main(int argc, char **argv) {
    const int64_t rows = argc > 2 ? atoll(argv[1]) : 16, H = argc > 2 ? atoll(argv[2]) : 4096;
    const int e4m3 = argc > 3 && strcmp(argv[3], "e4m3") == 0;
    const size_t n = (size_t)(rows * H);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *gamma = malloc(H * sizeof *x),
          *scales = malloc((size_t)rows * sizeof *scales);
    int8_t *q = malloc(n);
    if (!x || !y || !gamma || !scales || !q) return 1;
    for (size_t i = 0; i < n; ++i) x[i] = (float)((i * 2654435761u) % 1000) / 250.0f - 2.0f;
    for (int64_t i = 0; i < H; ++i) gamma[i] = 0.5f + (float)(i % 7) / 7.0f;
    lntune *ctx;
    if (lntune_open(getenv("LNTUNE_DB"), &ctx) != LNTUNE_OK) {
        fprintf(stderr, "lntune_open failed\n");
        return 1;
    }
    lntune_args fa = {0};
    fa.rows = rows, fa.H = H, fa.x = x, fa.y = y, fa.gamma = gamma;
    lntune_args qa = fa;
    qa.y = q;
    qa.y_dtype = e4m3 ? LNTUNE_FP8_E4M3 : LNTUNE_I8;
    qa.y_scales = scales;
    call_or_die(ctx, &fa);
    call_or_die(ctx, &qa);
    /* calls per round: about a millisecond of the quantized call */
    double t0 = 1e9 * test_now_s();
    for (int i = 0; i < 10; ++i) call_or_die(ctx, &qa);
    const double once = (1e9 * test_now_s() - t0) / 10;
    const long calls = once > 1e6 ? 1 : (long)(1e6 / once) + 1;
    double best[3] = {1e300, 1e300, 1e300};
    for (int round = 0; round < ROUNDS; ++round) {
        for (int k = 0; k < 3; ++k) {
            t0 = 1e9 * test_now_s();
            for (long i = 0; i < calls; ++i) {
                if (k == 0)
                    lntune_rmsnorm(ctx, &qa);
                else if (k == 1)
                    lntune_rmsnorm(ctx, &fa);
                else {
                    memcpy(y, x, n * sizeof *x);
                    __asm__ volatile("" ::"r"(y) : "memory"); /* keep every copy */
                }
            }
            const double t = (1e9 * test_now_s() - t0) / (double)calls;
            if (t < best[k]) best[k] = t;
        }
    }
    printf("rows=%lld H=%lld isa=%s threads=%s: f32->%s %.2f us, f32->f32 %.2f us, memcpy of "
           "x (%zu B) %.2f us\n",
           (long long)rows, (long long)H, lntune_builtin_isa(),
           getenv("LNTUNE_NUM_THREADS") ? getenv("LNTUNE_NUM_THREADS") : "all",
           e4m3 ? "e4m3row" : "i8row", best[0] / 1e3, best[1] / 1e3, n * sizeof *x, best[2] / 1e3);
    lntune_close(ctx);
    free(x), free(y), free(gamma), free(scales), free(q);
    return 0;
}
