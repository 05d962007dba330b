/*
 * builtin_quant.c - the built-in path of a quantized y (see builtin_quant.h). The codes are
 * those of templates/cpu/convert.lua's f32_to_i8 and f32_to_e4m3 (core/quant.h), written as
 * loops a compiler vectorizes: selects instead of branches, rounding to nearest even by adding
 * and subtracting 1.5 * 2^23 (exact once |v| < 2^22, which the clamps ensure).
 */
#include "builtin_quant.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* fp32 y a task computes at a time: 64 KiB, a few rows of L2 at most. */
enum { BUFFER_FLOATS = 16384 };

static void to_i8(const float *y, int8_t *q, int64_t H, float inv) {
    for (int64_t i = 0; i < H; ++i) {
        float v = y[i] * inv;
        v = v == v ? v : 0.0f;
        v = v > 127.0f ? 127.0f : v;
        v = v < -128.0f ? -128.0f : v;
        q[i] = (int8_t)(int32_t)((v + 0x1.8p23f) - 0x1.8p23f);
    }
}

static void to_e4m3(const float *y, uint8_t *q, int64_t H, float inv) {
    for (int64_t i = 0; i < H; ++i) {
        const float v = y[i] * inv;
        uint32_t u;
        __builtin_memcpy(&u, &v, sizeof u);
        const uint32_t sign = u >> 24 & 0x80u;
        uint32_t a = u & 0x7fffffffu;
        const int nan = a > 0x7f800000u;
        a = a > 0x43e00000u ? 0x43e00000u : a; /* 448.0f: saturate */
        float f;
        __builtin_memcpy(&f, &a, sizeof f);
        const uint32_t sub = (uint32_t)(int32_t)((f * 512.0f + 0x1.8p23f) - 0x1.8p23f);
        const uint32_t normal = ((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u << 3);
        const uint32_t code = nan ? 0x7fu : a < 0x3c800000u ? sub : normal; /* 2^-6 */
        q[i] = (uint8_t)(code | sign);
    }
}

/* The largest |y| of a row, NaN left out (0 for none). */
static float absmax(const float *y, int64_t H) {
    float m = 0.0f;
    for (int64_t i = 0; i < H; ++i) {
        const float a = __builtin_fabsf(y[i]);
        m = a > m ? a : m;
    }
    return m;
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
    const int e4m3 = type == LNTUNE_TYPE_E4M3 || type == LNTUNE_TYPE_E4M3_ROW;
    const float qmax = e4m3 ? 448.0f : 127.0f;
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
