/*
 * residual_add.h - the unfused baseline of bench_residual: s = x + residual, the residual add a
 * framework runs before its LayerNorm, as vectorized C (-O3 -march=native). Both inputs are
 * widened exactly, added once in fp32 and rounded once to the type (to nearest even): the
 * numerics of lntune's fused add, so the two paths compute the same s.
 */
#ifndef LNTUNE_BENCH_RESIDUAL_ADD_H
#define LNTUNE_BENCH_RESIDUAL_ADD_H

#include <stdint.h>

typedef struct residual_add_variant {
    int type; /* of x, residual and s: LNTUNE_TYPE_* (core/dtypes.h): fp32, fp16 or bf16 */
    int nt;   /* non-temporal stores of s */
    int threads;
} residual_add_variant;

/* s[i] = x[i] + r[i] for n elements (n a multiple of 64, buffers 64-byte aligned). */
void residual_add(const residual_add_variant *v, const void *x, const void *r, void *s, int64_t n);

#endif /* LNTUNE_BENCH_RESIDUAL_ADD_H */
