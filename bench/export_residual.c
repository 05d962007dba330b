/*
 * export_residual.c - times an exported file's all-bf16 Add & Norm call (lntune_kernels_*_v2
 * with a bf16 residual, bf16 y and gamma/beta) at one shape: the median of 31 calls, in ms.
 * bench/export_residual.sh links it against two builds of one exported file.
 *
 *   export_residual ROWS H OUT   (OUT 1: residual_out written too, Pre-LN; 0: Post-LN)
 */
#define _POSIX_C_SOURCE 200809L
#include "lntune_kernels.h"
#include "clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CALLS = 31 };

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4 || atoll(argv[1]) <= 0 || atoll(argv[2]) <= 0) {
        fprintf(stderr, "usage: export_residual ROWS H OUT\n");
        return 2;
    }
    const int64_t rows = atoll(argv[1]), H = atoll(argv[2]);
    const size_t n = (size_t)(rows * H);
    uint16_t *x = malloc(n * 2), *res = malloc(n * 2), *y = malloc(n * 2), *out = malloc(n * 2);
    uint16_t *gamma = malloc((size_t)H * 2), *beta = malloc((size_t)H * 2);
    if (!x || !res || !y || !out || !gamma || !beta) return 2;
    for (size_t i = 0; i < n; ++i) /* bf16 values in [1, 2) and [0.5, 1) */
        x[i] = (uint16_t)(0x3f80 + i * 7 % 97), res[i] = (uint16_t)(0x3f00 + i * 13 % 89);
    for (int64_t i = 0; i < H; ++i) gamma[i] = 0x3f80, beta[i] = 0x3e00;
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.residual = res, a.gamma = gamma, a.beta = beta;
    a.eps = 1e-5f;
    if (atoi(argv[3])) a.residual_out = out;
    const lntune_kernels_types bf16 = {LNTUNE_KERNELS_BF16, LNTUNE_KERNELS_BF16,
                                       LNTUNE_KERNELS_BF16, LNTUNE_KERNELS_BF16};
    double ms[CALLS];
    for (int k = 0; k < CALLS; ++k) {
        const double t0 = 1e3 * test_now_s();
        if (lntune_kernels_layernorm_v2(&a, bf16) != LNTUNE_KERNEL_OK) {
            fprintf(stderr, "export_residual: the call failed\n");
            return 1;
        }
        ms[k] = 1e3 * test_now_s() - t0;
    }
    qsort(ms, CALLS, sizeof ms[0], by_value);
    printf("%.3f\n", ms[CALLS / 2]);
    free(x), free(res), free(y), free(out), free(gamma), free(beta);
    return 0;
}
