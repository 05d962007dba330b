/*
 * builtin_typed.c - the built-in kernels of every fp16/bf16 type tuple (x, y, gamma/beta), for
 * shapes no one tuned. fp32 keeps the generated, vectorized built-ins (builtin.c).
 *
 * The kernel ABI carries no types, so each (op, x, y, params) tuple is its own function: one
 * generic body, inlined with its types as constants, so that each instance's loads and stores
 * are straight-line conversions. Portable C (the runtime is built without -march).
 *
 * Numerics, those of the fp32 built-ins and the tuned kernels: inputs convert exactly to fp32;
 * LayerNorm sums x shifted by the row's first element, then squared deviations from the fp32
 * mean, variance over H; mean and rstd are fp32; y = (x - mean) * rstd * gamma + beta is
 * computed in fp32 and rounded once to y's type. Only the sums differ: all in double here,
 * where the fp32 built-ins add fp32 partial sums into double. One body serves every affine
 * kind, beta without gamma included.
 */
#include "builtin.h"

#include "half.h"
#include "registry.h"

#include <math.h>

/* The body must be inlined into each instance, or its types are no longer constants there. */
#define TYPED_INLINE static inline __attribute__((always_inline))

TYPED_INLINE size_t type_size(int type) {
    return type == LNTUNE_TYPE_F32 ? sizeof(float) : sizeof(uint16_t);
}

TYPED_INLINE float load(int type, const void *p, int64_t i) {
    if (type == LNTUNE_TYPE_F16) return lntune_f16_to_f32(((const uint16_t *)p)[i]);
    if (type == LNTUNE_TYPE_BF16) return lntune_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

TYPED_INLINE void store(int type, void *p, int64_t i, float v) {
    if (type == LNTUNE_TYPE_F16)
        ((uint16_t *)p)[i] = lntune_f32_to_f16(v);
    else if (type == LNTUNE_TYPE_BF16)
        ((uint16_t *)p)[i] = lntune_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

/* Four partial sums: independent additions, so the loop is not one long dependency chain. */
TYPED_INLINE void layernorm_stats(int xt, const void *x, int64_t H, float eps, float *mean,
                                  float *rstd) {
    const float k = load(xt, x, 0);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) {
        s0 += (double)load(xt, x, i) - k;
        s1 += (double)load(xt, x, i + 1) - k;
        s2 += (double)load(xt, x, i + 2) - k;
        s3 += (double)load(xt, x, i + 3) - k;
    }
    for (; i < H; ++i) s0 += (double)load(xt, x, i) - k;
    const float m = (float)(k + (s0 + s1 + s2 + s3) / (double)H);
    s0 = s1 = s2 = s3 = 0.0;
    for (i = 0; i + 4 <= H; i += 4) {
        const double d0 = (double)load(xt, x, i) - m, d1 = (double)load(xt, x, i + 1) - m;
        const double d2 = (double)load(xt, x, i + 2) - m, d3 = (double)load(xt, x, i + 3) - m;
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; i < H; ++i) {
        const double d = (double)load(xt, x, i) - m;
        s0 += d * d;
    }
    *mean = m;
    *rstd = (float)(1.0 / sqrt((s0 + s1 + s2 + s3) / (double)H + (double)eps));
}

TYPED_INLINE void rmsnorm_stats(int xt, const void *x, int64_t H, float eps, float *mean,
                                float *rstd) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) {
        const double v0 = load(xt, x, i), v1 = load(xt, x, i + 1);
        const double v2 = load(xt, x, i + 2), v3 = load(xt, x, i + 3);
        s0 += v0 * v0;
        s1 += v1 * v1;
        s2 += v2 * v2;
        s3 += v3 * v3;
    }
    for (; i < H; ++i) {
        const double v = load(xt, x, i);
        s0 += v * v;
    }
    *mean = 0.0f;
    *rstd = (float)(1.0 / sqrt((s0 + s1 + s2 + s3) / (double)H + (double)eps));
}

/* z = (x - mean) * rstd, or x * rstd for RMSNorm (mean is 0 there, and x - 0 is x). */
TYPED_INLINE int typed_norm(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end, int op,
                            int xt, int yt, int pt) {
    if (a->residual || a->residual_out) return LNTUNE_KERNEL_EUNSUPPORTED;
    const int64_t H = a->H;
    const void *gamma = a->gamma, *beta = a->beta;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const void *x = (const unsigned char *)a->x + (size_t)(r * a->x_stride) * type_size(xt);
        void *y = (unsigned char *)a->y + (size_t)(r * a->y_stride) * type_size(yt);
        float mean, rstd;
        if (op == LNTUNE_DESC_LAYERNORM)
            layernorm_stats(xt, x, H, a->eps, &mean, &rstd);
        else
            rmsnorm_stats(xt, x, H, a->eps, &mean, &rstd);
        if (gamma && beta)
            for (int64_t i = 0; i < H; ++i)
                store(yt, y, i,
                      (load(xt, x, i) - mean) * rstd * load(pt, gamma, i) + load(pt, beta, i));
        else if (gamma)
            for (int64_t i = 0; i < H; ++i)
                store(yt, y, i, (load(xt, x, i) - mean) * rstd * load(pt, gamma, i));
        else if (beta)
            for (int64_t i = 0; i < H; ++i)
                store(yt, y, i, (load(xt, x, i) - mean) * rstd + load(pt, beta, i));
        else
            for (int64_t i = 0; i < H; ++i) store(yt, y, i, (load(xt, x, i) - mean) * rstd);
        if (a->mean) a->mean[r] = mean;
        if (a->rstd) a->rstd[r] = rstd;
    }
    return LNTUNE_KERNEL_OK;
}

/* Every tuple but all-fp32, as (x, y, params). */
#define TYPED_TUPLES(M)                                                                            \
    M(F32, F32, F16)                                                                               \
    M(F32, F32, BF16)                                                                              \
    M(F32, F16, F32)                                                                               \
    M(F32, F16, F16)                                                                               \
    M(F32, F16, BF16)                                                                              \
    M(F32, BF16, F32)                                                                              \
    M(F32, BF16, F16)                                                                              \
    M(F32, BF16, BF16)                                                                             \
    M(F16, F32, F32)                                                                               \
    M(F16, F32, F16)                                                                               \
    M(F16, F32, BF16)                                                                              \
    M(F16, F16, F32)                                                                               \
    M(F16, F16, F16)                                                                               \
    M(F16, F16, BF16)                                                                              \
    M(F16, BF16, F32)                                                                              \
    M(F16, BF16, F16)                                                                              \
    M(F16, BF16, BF16)                                                                             \
    M(BF16, F32, F32)                                                                              \
    M(BF16, F32, F16)                                                                              \
    M(BF16, F32, BF16)                                                                             \
    M(BF16, F16, F32)                                                                              \
    M(BF16, F16, F16)                                                                              \
    M(BF16, F16, BF16)                                                                             \
    M(BF16, BF16, F32)                                                                             \
    M(BF16, BF16, F16)                                                                             \
    M(BF16, BF16, BF16)

#define DEFINE_KERNELS(X, Y, P)                                                                    \
    static int layernorm_##X##_##Y##_##P(const lntune_kernel_args *a, int64_t b, int64_t e) {      \
        return typed_norm(a, b, e, LNTUNE_DESC_LAYERNORM, LNTUNE_TYPE_##X, LNTUNE_TYPE_##Y,        \
                          LNTUNE_TYPE_##P);                                                        \
    }                                                                                              \
    static int rmsnorm_##X##_##Y##_##P(const lntune_kernel_args *a, int64_t b, int64_t e) {        \
        return typed_norm(a, b, e, LNTUNE_DESC_RMSNORM, LNTUNE_TYPE_##X, LNTUNE_TYPE_##Y,          \
                          LNTUNE_TYPE_##P);                                                        \
    }
TYPED_TUPLES(DEFINE_KERNELS)

#define TABLE_ENTRIES(X, Y, P)                                                                     \
    [LNTUNE_DESC_LAYERNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P] =                   \
        layernorm_##X##_##Y##_##P,                                                                 \
    [LNTUNE_DESC_RMSNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P] =                     \
        rmsnorm_##X##_##Y##_##P,
static const lntune_kernel_fn typed_kernels[2][LNTUNE_TYPE_COUNT][LNTUNE_TYPE_COUNT]
                                           [LNTUNE_TYPE_COUNT] = {TYPED_TUPLES(TABLE_ENTRIES)};

lntune_kernel_fn lntune_builtin_typed_kernel(int op, lntune_types t) {
    if ((op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) || t.x >= LNTUNE_TYPE_COUNT ||
        t.y >= LNTUNE_TYPE_COUNT || t.params >= LNTUNE_TYPE_COUNT)
        return NULL;
    return typed_kernels[op][t.x][t.y][t.params];
}
