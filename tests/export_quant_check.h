/*
 * export_quant_check.h - export_driver's part 2c: a quantized y through the exported
 * lntune_kernels_<op>_v2 (types.y LNTUNE_KERNELS_I8 or LNTUNE_KERNELS_FP8_E4M3), against the
 * float64 reference and core/quant.h's exact codes. Included by export_driver.c after its typed
 * helpers (put_random, fill_nan, tsize, type_names).
 *
 * Each call: rows of random data (every fifth row at mean 1000, and with 7 rows or more a NaN in
 * row 3), padded strides and y one byte past an aligned address; y's bytes poisoned first. Per row
 * with y_scales: the scale within the fp32 y's error of absmax / QMAX of the reference y. Each
 * code: between the exact codes of v - d and v + d, v = y / scale of the reference and d the fp32
 * y's error bound over the scale (one code where no boundary lies within d of v). Nothing written
 * outside the rows.
 */
#ifndef LNTUNE_EXPORT_QUANT_CHECK_H
#define LNTUNE_EXPORT_QUANT_CHECK_H

#include "quant.h"

enum { POISON_CODE = 0x5a };

/* The database's names of the quantized types, LNTUNE_TYPE_I8 on. */
static const char *const quant_names[] = {"i8", "i8row", "e4m3", "e4m3row"};

/* One call of op (x, gamma/beta of types t.x, t.params; y quantized as y_type, LNTUNE_TYPE_I8
 * .. E4M3_ROW), checked; 1 passes, else 0 with why set. fusion 1 adds an fp32 residual. */
static int run_quant(int op, tuple t, int y_type, int64_t H, int64_t rows, int affine, int fusion,
                     float offset, float static_scale, char *why, size_t len) {
    enum { PAD = 1, TAIL = 8 };
    const int64_t xs = H + 5, ys = H + 3, yn = rows * ys + PAD + TAIL, rs = H + 7;
    const int per_row = lntune_type_row_scaled(y_type), has_beta = affine >= 2;
    const double qmax = lntune_quant_max(y_type);
    unsigned char *xb = malloc((size_t)(rows * xs + PAD) * tsize(t.x));
    unsigned char *yb = malloc((size_t)yn);
    unsigned char *gb = malloc((size_t)(H + PAD) * tsize(t.params));
    unsigned char *bb = malloc((size_t)(H + PAD) * tsize(t.params));
    float *rb = malloc((size_t)(rows * rs) * sizeof *rb);
    float *xf = malloc((size_t)(rows * H) * sizeof *xf);
    float *scales = malloc((size_t)(rows + 1) * sizeof *scales);
    double *z = malloc((size_t)H * sizeof *z), *yref = malloc((size_t)H * sizeof *yref);
    double *unit = malloc((size_t)H * sizeof *unit);
    void *x = xb + PAD * tsize(t.x), *gamma = gb + PAD * tsize(t.params);
    void *beta = bb + PAD * tsize(t.params);
    unsigned char *y = yb + PAD;
    fill_nan(t.x, xb, rows * xs + PAD);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < H; ++i)
            put_random(t.x, x, r * xs + i, r % 5 == 1 ? 1000.0 : 0.0, 1.0);
        if (rows >= 7 && r == 3) lntune_ref_store(t.x, x, r * xs + H / 2, NAN);
        for (int64_t i = 0; fusion && i < H; ++i)
            rb[r * rs + i] = (float)(test_uniform(&test_rng) - 0.5);
        for (int64_t i = 0; i < H; ++i)
            xf[r * H + i] =
                (float)lntune_ref_load(t.x, x, r * xs + i) + (fusion ? rb[r * rs + i] : 0.0f);
    }
    for (int64_t i = 0; i < H; ++i) {
        put_random(t.params, gamma, i, 1.0, 0.5);
        put_random(t.params, beta, i, 0.0, 1.0);
    }
    memset(yb, POISON_CODE, (size_t)yn);
    for (int64_t r = 0; r <= rows; ++r) scales[r] = -1.0f;

    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.x_stride = xs, a.y_stride = ys;
    a.gamma = affine == 1 || affine == 2 ? gamma : NULL;
    a.beta = has_beta ? beta : NULL;
    a.weight_offset = offset;
    if (fusion) a.residual = rb, a.residual_stride = rs;
    if (per_row)
        a.y_scales = scales;
    else
        a.y_scale = static_scale;
    lntune_kernels_types types = {.x = t.x + 1,
                                  .y = lntune_quant_is_e4m3(y_type) ? LNTUNE_KERNELS_FP8_E4M3
                                                                    : LNTUNE_KERNELS_I8,
                                  .params = t.params + 1,
                                  .residual = LNTUNE_KERNELS_F32};
    const int rc =
        op ? lntune_kernels_rmsnorm_v2(&a, types) : lntune_kernels_layernorm_v2(&a, types);
    int ok = rc == LNTUNE_KERNEL_OK;
    if (!ok) snprintf(why, len, "rc %d", rc);
    for (int64_t r = 0; r < rows && ok; ++r) {
        double m, rstd, absmax = 0.0, err_max = 0.0;
        lntune_reference_row((lntune_op)op, xf + r * H, H, 1e-5f, z, &m, &rstd);
        for (int64_t i = 0; i < H; ++i) {
            const double g = a.gamma ? offset + lntune_ref_load(t.params, gamma, i) : 1.0;
            const double b = has_beta ? lntune_ref_load(t.params, beta, i) : 0.0;
            yref[i] = z[i] * g + b;
            /* the fp32 y's error bound (test_runtime_dtypes's 2^-20 of the terms) */
            unit[i] = 0x1p-20 * ((fabs(m) * rstd + fabs(z[i]) + 1.0) * fabs(g) + fabs(b));
            if (!isnan(yref[i]))
                absmax = fmax(absmax, fabs(yref[i])), err_max = fmax(err_max, unit[i]);
        }
        double scale = static_scale;
        if (per_row) {
            scale = absmax / qmax;
            if (!(fabs(scales[r] - scale) <= err_max / qmax + 1e-6 * scale)) {
                snprintf(why, len, "row %lld: scale %a, want %a", (long long)r, (double)scales[r],
                         scale);
                ok = 0;
                break;
            }
            scale = scales[r]; /* the codes are of y / the scale written */
        }
        for (int64_t i = 0; i < H && ok; ++i) {
            const unsigned got = y[r * ys + i];
            if (isnan(yref[i])) { /* int8 0, e4m3 the NaN code of either sign */
                ok = lntune_quant_is_e4m3(y_type) ? (got & 0x7f) == 0x7f : got == 0;
            } else {
                /* rounding is monotonic: the codes of v - d and v + d bound every code the
                 * fp32 y may give */
                const double v = yref[i] / scale, d = unit[i] / scale + fabs(v) * 0x1p-20;
                const double got_v = lntune_quant_value(y_type, got);
                ok = got_v >= lntune_quant_value(y_type, lntune_quant_code(y_type, v - d)) &&
                     got_v <= lntune_quant_value(y_type, lntune_quant_code(y_type, v + d));
            }
            if (!ok)
                snprintf(why, len, "y[%lld][%lld] is code %#x, want %#x (v %.9g)", (long long)r,
                         (long long)i, got, lntune_quant_code(y_type, yref[i] / scale),
                         yref[i] / scale);
        }
    }
    for (int64_t i = 0; i < yn && ok; ++i) {
        const int64_t at = i - PAD, r = at / ys;
        if (at >= 0 && r < rows && at % ys < H) continue;
        if (yb[i] != POISON_CODE) {
            snprintf(why, len, "y byte %lld (outside the rows) written", (long long)at);
            ok = 0;
        }
    }
    if (ok && scales[rows] != -1.0f) snprintf(why, len, "a scale written past rows"), ok = 0;
    if (ok && !per_row && scales[0] != -1.0f) snprintf(why, len, "a scale written"), ok = 0;
    free(xb), free(yb), free(gb), free(bb), free(rb), free(xf), free(scales), free(z), free(yref);
    free(unit);
    return ok;
}

static void test_quant(void) {
    enum { F32 = LNTUNE_TYPE_F32, F16 = LNTUNE_TYPE_F16, BF16 = LNTUNE_TYPE_BF16 };
    enum { I8 = LNTUNE_TYPE_I8, I8ROW = LNTUNE_TYPE_I8_ROW, E4M3 = LNTUNE_TYPE_E4M3 };
    enum { E4M3ROW = LNTUNE_TYPE_E4M3_ROW };
    static const struct {
        tuple t;
        int op, y_type, affine, fusion;
        float offset;
        int64_t H, rows;
        const char *what;
    } cases[] = {
        /* export_makedb's winners at their shapes */
        {{BF16, 0, BF16}, 1, I8ROW, 1, 0, 0.0f, 768, 40, "tuned"},
        {{F32, 0, F32}, 0, E4M3, 1, 1, 0.0f, 1000, 40, "tuned"},
        /* the fallback: untuned H, a static scale, no winner's tuple, many rows (threads), beta,
         * the residual, a weight offset */
        {{BF16, 0, BF16}, 1, I8ROW, 1, 0, 0.0f, 17, 7, "untuned"},
        {{BF16, 0, BF16}, 1, I8, 0, 0, 0.0f, 768, 40, "untuned"},
        {{F32, 0, F32}, 0, E4M3ROW, 1, 1, 0.0f, 1000, 40, "untuned"},
        {{F16, 0, F32}, 0, E4M3ROW, 2, 0, 0.0f, 4096, 600, "untuned"},
        {{F16, 0, F32}, 0, I8, 2, 1, 0.0f, 1, 7, "untuned"},
        {{BF16, 0, BF16}, 1, I8ROW, 1, 0, 1.0f, 768, 40, "offset"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        char why[256] = "";
        const tuple t = cases[k].t;
        const int ok =
            run_quant(cases[k].op, t, cases[k].y_type, cases[k].H, cases[k].rows, cases[k].affine,
                      cases[k].fusion, cases[k].offset, 0.02f, why, sizeof why);
        test_case(ok,
                  "quantized y %s: %s %s/%s/%s H=%lld rows=%lld affine=%d fusion %d offset %g%s%s",
                  cases[k].what, cases[k].op ? "rmsnorm" : "layernorm", type_names[t.x],
                  quant_names[cases[k].y_type - LNTUNE_TYPE_I8], type_names[t.params],
                  (long long)cases[k].H, (long long)cases[k].rows, cases[k].affine, cases[k].fusion,
                  (double)cases[k].offset, why[0] ? ": " : "", why);
    }
    float x[4] = {1, 2, 3, 4};
    unsigned char y[4];
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4, a.x = x, a.y = y;
    const lntune_kernels_types i8 = {.y = LNTUNE_KERNELS_I8},
                               bad = {.y = LNTUNE_KERNELS_FP8_E4M3 + 1};
    const float bad_scales[] = {0.0f, -1.0f, NAN, INFINITY, 1e-40f};
    int declined = 1;
    for (size_t i = 0; i < sizeof bad_scales / sizeof bad_scales[0]; ++i) {
        a.y_scale = bad_scales[i];
        declined &= lntune_kernels_rmsnorm_v2(&a, i8) == LNTUNE_KERNEL_EUNSUPPORTED;
    }
    a.y_scale = 1.0f;
    declined &= lntune_kernels_layernorm_v2(&a, bad) == LNTUNE_KERNEL_EUNSUPPORTED;
    const lntune_kernels_types quant_x = {.x = LNTUNE_KERNELS_I8};
    declined &= lntune_kernels_layernorm_v2(&a, quant_x) == LNTUNE_KERNEL_EUNSUPPORTED;
    test_case(declined, "a static scale of 0, -1, NaN, Inf or below FLT_MIN, a y type past 5 and a "
                        "quantized x are declined");
}

#endif /* LNTUNE_EXPORT_QUANT_CHECK_H */
