/*
 * quant_rows.h - rows of a quantized y (core/quant.h's codes and scales) from the float kernel
 * of the same call: the path of a quantized y that no tuned kernel serves. liblntune includes it
 * (runtime/builtin_quant.c); `lntune export` copies its text into the exported file
 * (exported/cpu/quant_fallback.c calls it), which compiles on its own: so only the C library and
 * lntune_kernel.h's types, nothing of liblntune.
 *
 * The float kernel writes a few rows of fp32 y into a buffer; each row's codes (and its scale)
 * are then stored. The codes are those of templates/cpu/convert.lua's f32_to_i8 and f32_to_e4m3,
 * in four-lane GCC vectors (SSE2 or NEON width: built without -march): selects instead of
 * branches, rounding to nearest even by adding and subtracting 1.5 * 2^23 (exact once
 * |v| < 2^22, which the clamps ensure). Scalar loops of the same did not vectorize at -O2
 * ("control flow in loop"): untuned 2048x4096 f32 -> i8row took 11.6 ms.
 */
#ifndef LNTUNE_QUANT_ROWS_H
#define LNTUNE_QUANT_ROWS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef LNTUNE_KERNEL_H /* the exported file carries lntune_kernel.h's text instead */
#include "lntune_kernel.h"
#endif

typedef float lntune_q4f __attribute__((vector_size(16)));
typedef uint32_t lntune_q4u __attribute__((vector_size(16)));
typedef int32_t lntune_q4i __attribute__((vector_size(16)));
typedef int8_t lntune_q4c __attribute__((vector_size(4)));
typedef uint8_t lntune_q4b __attribute__((vector_size(4)));

static inline lntune_q4f lntune_q4_pick(lntune_q4u mask, lntune_q4f a, lntune_q4f b) {
    lntune_q4u ua, ub; /* a where mask, else b */
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & mask) | (ub & ~mask);
    memcpy(&a, &ua, sizeof a);
    return a;
}

/* Four y times inv. */
static inline lntune_q4f lntune_q4_scaled(const float *y, float inv) {
    lntune_q4f v;
    memcpy(&v, y, sizeof v);
    return v * inv;
}

/* v with NaN lanes 0 and all above 127 (+Inf too) 127: what is left to clamp is below -128. */
static inline lntune_q4f lntune_q4_i8_clamped_above(lntune_q4f v) {
    const lntune_q4f zero = {0}, hi = zero + 127.0f;
    v = lntune_q4_pick((lntune_q4u)(v == v), v, zero);
    return lntune_q4_pick((lntune_q4u)(v > hi), hi, v);
}

/* The int8 codes of four y times inv, one a lane. */
static inline lntune_q4i lntune_q4_i8_lanes(const float *y, float inv) {
    const lntune_q4f zero = {0}, lo = zero - 128.0f;
    lntune_q4f v = lntune_q4_i8_clamped_above(lntune_q4_scaled(y, inv));
    v = lntune_q4_pick((lntune_q4u)(v < lo), lo, v);
    v = (v + 0x1.8p23f) - 0x1.8p23f;
    return __builtin_convertvector(v, lntune_q4i);
}

/* The e4m3 codes of four fp32 (as bits) in the low bytes. */
static inline lntune_q4u lntune_q4_e4m3_of(lntune_q4u u) {
    const lntune_q4u sign = u >> 24 & 0x80u;
    lntune_q4u a = u & 0x7fffffffu;
    const lntune_q4u nan = (lntune_q4u)(a > 0x7f800000u), big = (lntune_q4u)(a > 0x43e00000u);
    a = (a & ~big) | (0x43e00000u & big); /* 448.0f: saturate */
    lntune_q4f f;
    memcpy(&f, &a, sizeof f);
    const lntune_q4u sub =
        (lntune_q4u) __builtin_convertvector((f * 512.0f + 0x1.8p23f) - 0x1.8p23f, lntune_q4i);
    const lntune_q4u normal = ((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u << 3);
    const lntune_q4u small = (lntune_q4u)(a < 0x3c800000u); /* 2^-6 */
    lntune_q4u o = (normal & ~small) | (sub & small);
    o = (o & ~nan) | (0x7fu & nan);
    return o | sign;
}

/* The e4m3 codes of four y times inv, one a lane. */
static inline lntune_q4u lntune_q4_e4m3_lanes(const float *y, float inv) {
    const lntune_q4f v = lntune_q4_scaled(y, inv);
    lntune_q4u u;
    memcpy(&u, &v, sizeof u);
    return lntune_q4_e4m3_of(u);
}

#if defined(__SSE2__)
/* x86: 16 codes at a time, narrowed by saturating packs (__builtin_convertvector narrowed lane
 * by lane: half the time of the whole call). cvtps2dq rounds to nearest even (the default MXCSR)
 * and gives INT_MIN for NaN and past 2^31, so those are zeroed and clamped first; the packs
 * saturate the rest. */
typedef short lntune_q8s __attribute__((vector_size(16)));
typedef char lntune_q16c __attribute__((vector_size(16)));

static inline lntune_q4i lntune_q4_i8_packable(const float *y, float inv) {
    return __builtin_ia32_cvtps2dq(lntune_q4_i8_clamped_above(lntune_q4_scaled(y, inv)));
}

static inline int64_t lntune_q16_i8(const float *y, int8_t *q, int64_t H, float inv) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) {
        const lntune_q8s lo = __builtin_ia32_packssdw128(lntune_q4_i8_packable(y + i, inv),
                                                         lntune_q4_i8_packable(y + i + 4, inv));
        const lntune_q8s hi = __builtin_ia32_packssdw128(lntune_q4_i8_packable(y + i + 8, inv),
                                                         lntune_q4_i8_packable(y + i + 12, inv));
        const lntune_q16c c = __builtin_ia32_packsswb128(lo, hi);
        memcpy(q + i, &c, sizeof c);
    }
    return i;
}

static inline int64_t lntune_q16_e4m3(const float *y, uint8_t *q, int64_t H, float inv) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) { /* codes 0..255: signed 16-bit packs, unsigned 8-bit ones */
        const lntune_q8s lo =
            __builtin_ia32_packssdw128((lntune_q4i)lntune_q4_e4m3_lanes(y + i, inv),
                                       (lntune_q4i)lntune_q4_e4m3_lanes(y + i + 4, inv));
        const lntune_q8s hi =
            __builtin_ia32_packssdw128((lntune_q4i)lntune_q4_e4m3_lanes(y + i + 8, inv),
                                       (lntune_q4i)lntune_q4_e4m3_lanes(y + i + 12, inv));
        const lntune_q16c c = __builtin_ia32_packuswb128(lo, hi);
        memcpy(q + i, &c, sizeof c);
    }
    return i;
}
#else
static inline int64_t lntune_q16_i8(const float *y, int8_t *q, int64_t H, float inv) {
    (void)y, (void)q, (void)H, (void)inv;
    return 0;
}
static inline int64_t lntune_q16_e4m3(const float *y, uint8_t *q, int64_t H, float inv) {
    (void)y, (void)q, (void)H, (void)inv;
    return 0;
}
#endif

/* The codes of the row y (H elements) times inv: int8, or e4m3. The last one to three elements
 * go through a zero-padded copy, so every element takes the same vector code. */
static inline void lntune_quant_row(const float *y, void *q, int64_t H, float inv, int e4m3) {
    int64_t i = e4m3 ? lntune_q16_e4m3(y, q, H, inv) : lntune_q16_i8(y, q, H, inv);
    float last[4] = {0};
    for (; i < H; i += 4) {
        const int64_t n = H - i < 4 ? H - i : 4;
        const float *at = y + i;
        if (n < 4) at = memcpy(last, y + i, (size_t)n * sizeof *y);
        unsigned char codes[4];
        if (e4m3) {
            const lntune_q4b c = __builtin_convertvector(lntune_q4_e4m3_lanes(at, inv), lntune_q4b);
            memcpy(codes, &c, sizeof codes);
        } else {
            const lntune_q4c c = __builtin_convertvector(lntune_q4_i8_lanes(at, inv), lntune_q4c);
            memcpy(codes, &c, sizeof codes);
        }
        memcpy((unsigned char *)q + i, codes, (size_t)n);
    }
}

/* The largest |y| of a row, NaN left out (0 for none). */
static inline float lntune_quant_row_absmax(const float *y, int64_t H) {
    lntune_q4f m = {0};
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) {
        lntune_q4f v;
        memcpy(&v, y + i, sizeof v);
        lntune_q4u u;
        memcpy(&u, &v, sizeof u);
        u &= 0x7fffffffu;
        memcpy(&v, &u, sizeof v);
#if defined(__SSE2__)
        m = __builtin_ia32_maxps(v, m); /* maxps returns its second operand for a NaN */
#else
        m = lntune_q4_pick((lntune_q4u)(v > m), v, m);
#endif
    }
    float r = 0.0f;
    for (int j = 0; j < 4; ++j) r = m[j] > r ? m[j] : r;
    for (; i < H; ++i) {
        const float a = __builtin_fabsf(y[i]);
        r = a > r ? a : r;
    }
    return r;
}

/* The factor a row's y is multiplied by before its codes are taken, given its largest |y| m:
 * quant.h's QMAX / m (QMAX 127, or 448 with e4m3), 0 where m is 0 or Inf; *scale gets m / QMAX. */
static inline float lntune_quant_row_inv(float m, int e4m3, float *scale) {
    const float qmax = e4m3 ? 448.0f : 127.0f;
    *scale = m / qmax;
    return m > 0.0f ? qmax / m : 0.0f;
}

/* One row's pass: the codes of y (H elements) at q, int8 or e4m3. With scale (a scale per row)
 * its scale is stored there and y is multiplied by lntune_quant_row_inv's factor; else by inv.
 * liblntune has wider copies of it for the CPUs that have them (runtime/builtin_quant_wide.h). */
typedef void (*lntune_quant_row_pass_fn)(const float *y, void *q, int64_t H, float *scale,
                                         float inv, int e4m3);

static inline void lntune_quant_row_pass(const float *y, void *q, int64_t H, float *scale,
                                         float inv, int e4m3) {
    if (scale) inv = lntune_quant_row_inv(lntune_quant_row_absmax(y, H), e4m3, scale);
    lntune_quant_row(y, q, H, inv, e4m3);
}

/* fp32 y computed at a time: 16 KiB, which stays in L1 while the row pass reads it twice (64 KiB,
 * in L2, took a fifth longer at 512 x 4096 f32 -> i8row). */
enum { LNTUNE_QUANT_BUFFER_FLOATS = 4096 };

/*
 * lntune_quant_rows with the row pass pass (lntune_quant_row_pass or a copy of it for a wider
 * vector ISA).
 */
static inline int lntune_quant_rows_with(lntune_quant_row_pass_fn pass,
                                         lntune_kernel_fn float_kernel, const lntune_kernel_args *a,
                                         int64_t r0, int64_t r1, size_t x_bytes,
                                         size_t residual_bytes, int e4m3) {
    const int64_t H = a->H;
    const int64_t per = H >= LNTUNE_QUANT_BUFFER_FLOATS ? 1 : LNTUNE_QUANT_BUFFER_FLOATS / H;
    if (r0 >= r1) return LNTUNE_KERNEL_OK;
    float *buf = malloc((size_t)((per < r1 - r0 ? per : r1 - r0) * H) * sizeof(float));
    if (!buf) return LNTUNE_KERNEL_EUNSUPPORTED;
    const float inv = a->y_scales ? 0.0f : 1.0f / a->y_scale;
    int rc = LNTUNE_KERNEL_OK;
    for (int64_t r = r0; r < r1 && rc == LNTUNE_KERNEL_OK; r += per) {
        const int64_t n = r1 - r < per ? r1 - r : per;
        /* The float kernel on rows [r, r + n) as a call of its own, y in the buffer. */
        lntune_kernel_args b = *a;
        b.rows = n;
        b.x = (const unsigned char *)a->x + (size_t)(r * a->x_stride) * x_bytes;
        b.y = buf;
        b.y_stride = H;
        if (a->residual)
            b.residual = (const unsigned char *)a->residual +
                         (size_t)(r * a->residual_stride) * residual_bytes;
        if (a->residual_out)
            b.residual_out = (unsigned char *)a->residual_out +
                             (size_t)(r * a->residual_out_stride) * residual_bytes;
        if (a->mean) b.mean = a->mean + r;
        if (a->rstd) b.rstd = a->rstd + r;
        b.y_scale = 0.0f;
        b.y_scales = NULL;
        if ((rc = float_kernel(&b, 0, n)) != LNTUNE_KERNEL_OK) break;
        for (int64_t k = 0; k < n; ++k)
            pass(buf + k * H, (unsigned char *)a->y + (size_t)((r + k) * a->y_stride), H,
                 a->y_scales ? a->y_scales + r + k : NULL, inv, e4m3);
    }
    free(buf);
    return rc;
}

/*
 * Rows [r0, r1) of the call a (y quantized: int8, or e4m3 with e4m3): float_kernel, the kernel of
 * the call's tuple with an fp32 y, computes a few rows at a time into a buffer (x, residual,
 * residual_out, mean and rstd as it always does; x_bytes and residual_bytes are the sizes of
 * their elements), then each row's codes go to a->y. With a->y_scales, a scale per row: absmax /
 * QMAX there (QMAX 127 or 448), the codes of y * QMAX / absmax (y * 0 where absmax is 0 or Inf);
 * else the static scale, the codes of y * (1 / a->y_scale). a's strides must be complete (not 0).
 * Returns LNTUNE_KERNEL_OK, the first other code of float_kernel, or LNTUNE_KERNEL_EUNSUPPORTED
 * when the buffer cannot be had.
 */
static inline int lntune_quant_rows(lntune_kernel_fn float_kernel, const lntune_kernel_args *a,
                                    int64_t r0, int64_t r1, size_t x_bytes, size_t residual_bytes,
                                    int e4m3) {
    return lntune_quant_rows_with(lntune_quant_row_pass, float_kernel, a, r0, r1, x_bytes,
                                  residual_bytes, e4m3);
}

#endif /* LNTUNE_QUANT_ROWS_H */
