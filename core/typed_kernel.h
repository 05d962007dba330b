/*
 * typed_kernel.h - fp16 (IEEE binary16) and bf16 to and from fp32 on the 16-bit patterns, and
 * the portable kernel body of every (op, x, y, gamma/beta) type tuple: what serves a call no one
 * tuned. liblntune includes it (builtin_typed.c, builtin_residual_body.h, half.h); `lntune export`
 * copies its text into the exported file (gen/export/export_typed.c), which compiles on its own: so
 * only <math.h>, <stdint.h>, <string.h> and lntune_kernel.h's types, nothing of liblntune.
 *
 * Conversions: 16 -> 32 is exact (every fp16 and bf16 value is a float; NaN payloads are kept).
 * 32 -> 16 rounds to nearest even, overflows to Inf of the value's sign, and turns any NaN into
 * a quiet NaN of the same sign (fp16: bit 0x0200, bf16: bit 0x0040), so that a result never
 * looks like a signalling NaN. Bit arithmetic only: no intrinsic, no dependence on the rounding
 * mode.
 *
 * Kernel numerics, those of the fp32 built-ins and the tuned kernels: inputs convert exactly to
 * fp32; LayerNorm sums x shifted by the row's first element, then squared deviations from the
 * fp32 mean, variance over H; mean and rstd are fp32; y = (x - mean) * rstd * gamma + beta is
 * computed in fp32, one operation a statement (no contraction into an FMA under any flags), and
 * rounded once to y's type. The sums are all in double. One body serves every affine kind, beta
 * without gamma included.
 */
#ifndef LNTUNE_TYPED_KERNEL_H
#define LNTUNE_TYPED_KERNEL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef LNTUNE_KERNEL_H /* the exported file carries lntune_kernel.h's text instead */
#include "lntune_kernel.h"
#endif

/* The body must be inlined into each instance, or its types are no longer constants there. */
#define TYPED_INLINE static inline __attribute__((always_inline))

/* Element types: the values of core/dtypes.h's LNTUNE_TYPE_*. */
enum { TYPED_F32 = 0, TYPED_F16 = 1, TYPED_BF16 = 2 };

TYPED_INLINE float lntune_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

TYPED_INLINE uint32_t lntune_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TYPED_INLINE float lntune_bf16_to_f32(uint16_t h) {
    return lntune_bits_to_f32((uint32_t)h << 16);
}

TYPED_INLINE uint16_t lntune_f32_to_bf16(float f) {
    uint32_t u = lntune_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040u);
    u += 0x7fffu + (u >> 16 & 1u); /* a carry into the exponent is the correct rounding */
    return (uint16_t)(u >> 16);
}

TYPED_INLINE float lntune_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = h >> 10 & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return lntune_bits_to_f32(sign | 0x7f800000u | man << 13);
    if (exp == 0) /* zero or subnormal: man * 2^-24, exact in float */
        return lntune_bits_to_f32(sign | lntune_f32_to_bits((float)man * 0x1p-24f));
    return lntune_bits_to_f32(sign | (exp + 112) << 23 | man << 13);
}

TYPED_INLINE uint16_t lntune_f32_to_f16(float f) {
    const uint32_t u = lntune_f32_to_bits(f), a = u & 0x7fffffffu;
    const uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to Inf */
    if (a >= 0x38800000u) { /* normal in fp16: rebias, round off 13 bits */
        const uint32_t r = a + 0xfffu + (a >> 13 & 1u);
        return (uint16_t)(sign | (r - (112u << 23)) >> 13);
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: the tie goes to the even zero */
    /* Subnormal: the value in units of 2^-24 is m >> shift; round the shifted-out bits. */
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - (a >> 23);
    const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    uint32_t h = m >> shift;
    if (rest > half || (rest == half && (h & 1u))) ++h; /* 0x400 is the smallest normal */
    return (uint16_t)(sign | h);
}

TYPED_INLINE size_t typed_size(int type) {
    return type == TYPED_F32 ? sizeof(float) : sizeof(uint16_t);
}

TYPED_INLINE float typed_load(int type, const void *p, int64_t i) {
    if (type == TYPED_F16) return lntune_f16_to_f32(((const uint16_t *)p)[i]);
    if (type == TYPED_BF16) return lntune_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

TYPED_INLINE void typed_store(int type, void *p, int64_t i, float v) {
    if (type == TYPED_F16)
        ((uint16_t *)p)[i] = lntune_f32_to_f16(v);
    else if (type == TYPED_BF16)
        ((uint16_t *)p)[i] = lntune_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

/* centered (LayerNorm): sums of x shifted by its first element, then of squared deviations from
 * the fp32 mean; else (RMSNorm, mean 0) the sum of squares. Four partial sums: independent
 * additions, so the loop is not one long dependency chain. */
TYPED_INLINE void typed_stats(int xt, int centered, const void *x, int64_t H, float eps,
                              float *mean, float *rstd) {
    float m = 0.0f;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    if (centered) {
        const float k = typed_load(xt, x, 0);
        for (; i + 4 <= H; i += 4) {
            s0 += (double)typed_load(xt, x, i) - k;
            s1 += (double)typed_load(xt, x, i + 1) - k;
            s2 += (double)typed_load(xt, x, i + 2) - k;
            s3 += (double)typed_load(xt, x, i + 3) - k;
        }
        for (; i < H; ++i) s0 += (double)typed_load(xt, x, i) - k;
        m = (float)(k + (s0 + s1 + s2 + s3) / (double)H);
        s0 = s1 = s2 = s3 = 0.0;
    }
    for (i = 0; i + 4 <= H; i += 4) {
        const double d0 = (double)typed_load(xt, x, i) - m;
        const double d1 = (double)typed_load(xt, x, i + 1) - m;
        const double d2 = (double)typed_load(xt, x, i + 2) - m;
        const double d3 = (double)typed_load(xt, x, i + 3) - m;
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; i < H; ++i) {
        const double d = (double)typed_load(xt, x, i) - m;
        s0 += d * d;
    }
    *mean = m;
    *rstd = (float)(1.0 / sqrt((s0 + s1 + s2 + s3) / (double)H + (double)eps));
}

/* One row of y = (x - mean) * rstd [* gamma] [+ beta]; inlined with gamma and beta NULL or not,
 * so that each affine kind is its own loop with no test in it. */
TYPED_INLINE void typed_normalize_row(int xt, int yt, int pt, const void *x, void *y,
                                      const void *gamma, const void *beta, int64_t H, float mean,
                                      float rstd) {
    for (int64_t i = 0; i < H; ++i) {
        float v = (typed_load(xt, x, i) - mean) * rstd;
        if (gamma) v *= typed_load(pt, gamma, i);
        if (beta) v += typed_load(pt, beta, i);
        typed_store(yt, y, i, v);
    }
}

/* Rows [row_begin, row_end) of a call without a residual, each rounded once to y's type. */
TYPED_INLINE int typed_norm(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end,
                            int centered, int xt, int yt, int pt) {
    if (a->residual || a->residual_out) return LNTUNE_KERNEL_EUNSUPPORTED;
    const int64_t H = a->H;
    const void *gamma = a->gamma, *beta = a->beta;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const void *x = (const unsigned char *)a->x + (size_t)(r * a->x_stride) * typed_size(xt);
        void *y = (unsigned char *)a->y + (size_t)(r * a->y_stride) * typed_size(yt);
        float mean, rstd;
        typed_stats(xt, centered, x, H, a->eps, &mean, &rstd);
        if (gamma && beta)
            typed_normalize_row(xt, yt, pt, x, y, gamma, beta, H, mean, rstd);
        else if (gamma)
            typed_normalize_row(xt, yt, pt, x, y, gamma, NULL, H, mean, rstd);
        else if (beta)
            typed_normalize_row(xt, yt, pt, x, y, NULL, beta, H, mean, rstd);
        else
            typed_normalize_row(xt, yt, pt, x, y, NULL, NULL, H, mean, rstd);
        if (a->mean) a->mean[r] = mean;
        if (a->rstd) a->rstd[r] = rstd;
    }
    return LNTUNE_KERNEL_OK;
}

#endif /* LNTUNE_TYPED_KERNEL_H */
