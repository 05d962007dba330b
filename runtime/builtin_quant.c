/*
 * builtin_quant.c - the built-in path of a quantized y (see builtin_quant.h). The codes are
 * those of templates/cpu/convert.lua's f32_to_i8 and f32_to_e4m3 (core/quant.h), in GCC
 * vectors: selects instead of branches, rounding to nearest even by adding and subtracting
 * 1.5 * 2^23 (exact once |v| < 2^22, which the clamps ensure). Scalar loops of the same did not
 * vectorize at -O2 ("control flow in loop"): untuned 2048x4096 f32 -> i8row took 11.6 ms.
 */
#include "builtin_quant.h"

#include "quant.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* fp32 y a task computes at a time: 64 KiB, a few rows of L2 at most. */
enum { BUFFER_FLOATS = 16384 };

/* Four lanes (SSE2 or NEON width: the library is built without -march), as the template's
 * portable vector code at vec=4. */
typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef int8_t v4c __attribute__((vector_size(4)));
typedef uint8_t v4b __attribute__((vector_size(4)));

static inline v4f pick(v4u mask, v4f a, v4f b) { /* a where mask, else b */
    v4u ua, ub;
    __builtin_memcpy(&ua, &a, sizeof ua);
    __builtin_memcpy(&ub, &b, sizeof ub);
    ua = (ua & mask) | (ub & ~mask);
    __builtin_memcpy(&a, &ua, sizeof a);
    return a;
}

/* Four y times inv. */
static inline v4f scaled(const float *y, float inv) {
    v4f v;
    __builtin_memcpy(&v, y, sizeof v);
    return v * inv;
}

/* v with NaN lanes 0 and all above 127 (+Inf too) 127: what is left to clamp is below -128. */
static inline v4f i8_clamped_above(v4f v) {
    const v4f zero = {0}, hi = zero + 127.0f;
    v = pick((v4u)(v == v), v, zero);
    return pick((v4u)(v > hi), hi, v);
}

static inline v4u e4m3_of(v4u u) { /* the codes of four fp32 (as bits) in the low bytes */
    const v4u sign = u >> 24 & 0x80u;
    v4u a = u & 0x7fffffffu;
    const v4u nan = (v4u)(a > 0x7f800000u), big = (v4u)(a > 0x43e00000u);
    a = (a & ~big) | (0x43e00000u & big); /* 448.0f: saturate */
    v4f f;
    __builtin_memcpy(&f, &a, sizeof f);
    const v4u sub = (v4u) __builtin_convertvector((f * 512.0f + 0x1.8p23f) - 0x1.8p23f, v4i);
    const v4u normal = ((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u << 3);
    const v4u small = (v4u)(a < 0x3c800000u); /* 2^-6 */
    v4u o = (normal & ~small) | (sub & small);
    o = (o & ~nan) | (0x7fu & nan);
    return o | sign;
}

/* The e4m3 codes of four y times inv, one a lane. */
static inline v4u e4m3_lanes(const float *y, float inv) {
    const v4f v = scaled(y, inv);
    v4u u;
    __builtin_memcpy(&u, &v, sizeof u);
    return e4m3_of(u);
}

#if defined(__SSE2__)
/* x86: 16 codes at a time, narrowed by saturating packs (__builtin_convertvector narrowed lane
 * by lane: half the time of the whole call). cvtps2dq rounds to nearest even (the default MXCSR)
 * and gives INT_MIN for NaN and past 2^31, so those are zeroed and clamped first; the packs
 * saturate the rest. */
typedef short v8s __attribute__((vector_size(16)));
typedef char v16c __attribute__((vector_size(16)));

static inline v4i i8_lanes(const float *y, float inv) {
    return __builtin_ia32_cvtps2dq(i8_clamped_above(scaled(y, inv)));
}

static int64_t to_i8_16(const float *y, int8_t *q, int64_t H, float inv) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) {
        const v8s lo = __builtin_ia32_packssdw128(i8_lanes(y + i, inv), i8_lanes(y + i + 4, inv));
        const v8s hi =
            __builtin_ia32_packssdw128(i8_lanes(y + i + 8, inv), i8_lanes(y + i + 12, inv));
        const v16c c = __builtin_ia32_packsswb128(lo, hi);
        __builtin_memcpy(q + i, &c, sizeof c);
    }
    return i;
}

static int64_t to_e4m3_16(const float *y, uint8_t *q, int64_t H, float inv) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) { /* codes 0..255: signed 16-bit packs, unsigned 8-bit ones */
        const v8s lo = __builtin_ia32_packssdw128((v4i)e4m3_lanes(y + i, inv),
                                                  (v4i)e4m3_lanes(y + i + 4, inv));
        const v8s hi = __builtin_ia32_packssdw128((v4i)e4m3_lanes(y + i + 8, inv),
                                                  (v4i)e4m3_lanes(y + i + 12, inv));
        const v16c c = __builtin_ia32_packuswb128(lo, hi);
        __builtin_memcpy(q + i, &c, sizeof c);
    }
    return i;
}
#else
static int64_t to_i8_16(const float *y, int8_t *q, int64_t H, float inv) {
    (void)y, (void)q, (void)H, (void)inv;
    return 0;
}
static int64_t to_e4m3_16(const float *y, uint8_t *q, int64_t H, float inv) {
    (void)y, (void)q, (void)H, (void)inv;
    return 0;
}
#endif

/* The tails (under four elements) take core/quant.h's exact codes of the same fp32 product. */
static void to_i8(const float *y, int8_t *q, int64_t H, float inv) {
    int64_t i = to_i8_16(y, q, H, inv);
    for (; i + 4 <= H; i += 4) {
        const v4f zero = {0}, lo = zero - 128.0f;
        v4f v = i8_clamped_above(scaled(y + i, inv));
        v = pick((v4u)(v < lo), lo, v);
        v = (v + 0x1.8p23f) - 0x1.8p23f;
        const v4c c = __builtin_convertvector(__builtin_convertvector(v, v4i), v4c);
        __builtin_memcpy(q + i, &c, sizeof c);
    }
    for (; i < H; ++i) q[i] = lntune_quant_i8((double)(y[i] * inv));
}

static void to_e4m3(const float *y, uint8_t *q, int64_t H, float inv) {
    int64_t i = to_e4m3_16(y, q, H, inv);
    for (; i + 4 <= H; i += 4) {
        const v4b c = __builtin_convertvector(e4m3_lanes(y + i, inv), v4b);
        __builtin_memcpy(q + i, &c, sizeof c);
    }
    for (; i < H; ++i) q[i] = lntune_quant_e4m3((double)(y[i] * inv));
}

/* The largest |y| of a row, NaN left out (0 for none). */
static float absmax(const float *y, int64_t H) {
    v4f m = {0};
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) {
        v4f v;
        __builtin_memcpy(&v, y + i, sizeof v);
        v4u u;
        __builtin_memcpy(&u, &v, sizeof u);
        u &= 0x7fffffffu;
        __builtin_memcpy(&v, &u, sizeof v);
#if defined(__SSE2__)
        m = __builtin_ia32_maxps(v, m); /* maxps returns its second operand for a NaN */
#else
        m = pick((v4u)(v > m), v, m);
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

typedef struct {
    lntune_kernel_fn kernel;
    const lntune_kernel_args *a;
    lntune_types types;
    _Atomic int rc;
} job;

/* Rows [r0, r1) of j: a few at a time through the buffer. */
static int run_rows(const job *j, int64_t r0, int64_t r1) {
    const lntune_kernel_args *a = j->a;
    const int64_t H = a->H, per = H >= BUFFER_FLOATS ? 1 : BUFFER_FLOATS / H;
    float *buf = malloc((size_t)((per < r1 - r0 ? per : r1 - r0) * H) * sizeof(float));
    if (!buf) return LNTUNE_KERNEL_EUNSUPPORTED;
    const size_t xs = lntune_type_size(j->types.x),
                 rs = lntune_type_size(lntune_types_residual(j->types));
    const int type = j->types.y, row = lntune_type_row_scaled(type);
    const int e4m3 = lntune_quant_is_e4m3(type);
    const float qmax = (float)lntune_quant_max(type);
    int rc = LNTUNE_KERNEL_OK;
    for (int64_t r = r0; r < r1 && rc == LNTUNE_KERNEL_OK; r += per) {
        const int64_t n = r1 - r < per ? r1 - r : per;
        /* The float kernel on rows [r, r + n) as a call of its own, y in the buffer. */
        lntune_kernel_args b = *a;
        b.rows = n;
        b.x = (const unsigned char *)a->x + (size_t)(r * a->x_stride) * xs;
        b.y = buf;
        b.y_stride = H;
        if (a->residual)
            b.residual = (const unsigned char *)a->residual + (size_t)(r * a->residual_stride) * rs;
        if (a->residual_out)
            b.residual_out =
                (unsigned char *)a->residual_out + (size_t)(r * a->residual_out_stride) * rs;
        if (a->mean) b.mean = a->mean + r;
        if (a->rstd) b.rstd = a->rstd + r;
        b.y_scale = 0.0f;
        b.y_scales = NULL;
        if ((rc = j->kernel(&b, 0, n)) != LNTUNE_KERNEL_OK) break;
        for (int64_t k = 0; k < n; ++k) {
            const float *y = buf + k * H;
            float inv;
            if (row) { /* quant.h: QMAX / absmax, 0 where absmax is 0 or Inf */
                const float m = absmax(y, H);
                a->y_scales[r + k] = m / qmax;
                inv = m > 0.0f ? qmax / m : 0.0f;
            } else {
                inv = 1.0f / a->y_scale;
            }
            unsigned char *q = (unsigned char *)a->y + (size_t)((r + k) * a->y_stride);
            if (e4m3)
                to_e4m3(y, q, H, inv);
            else
                to_i8(y, (int8_t *)q, H, inv);
        }
    }
    free(buf);
    return rc;
}

static void task(void *arg, int i, int n) {
    job *j = arg;
    const int64_t rows = j->a->rows;
    const int rc = run_rows(j, rows * i / n, rows * (i + 1) / n);
    int ok = LNTUNE_KERNEL_OK;
    if (rc != LNTUNE_KERNEL_OK) atomic_compare_exchange_strong(&j->rc, &ok, rc);
}

int lntune_builtin_quant_run(lntune_pool *pool, lntune_kernel_fn float_kernel,
                             const lntune_kernel_args *a, lntune_types types, int threads) {
    if (!float_kernel || !lntune_type_quantized(types.y)) return LNTUNE_KERNEL_EUNSUPPORTED;
    if (lntune_type_row_scaled(types.y) && !a->y_scales) return LNTUNE_KERNEL_EUNSUPPORTED;
    job j = {float_kernel, a, types, LNTUNE_KERNEL_OK};
    if (threads > a->rows) threads = (int)a->rows;
    if (threads > 1 && pool)
        lntune_pool_run(pool, threads, task, &j);
    else
        task(&j, 0, 1);
    return atomic_load(&j.rc);
}
