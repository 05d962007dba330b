/*
 * verify_quant.c - the checks of a quantized y (see verify_quant.h).
 */
#include "verify_quant.h"

#include "fusion.h"
#include "half_ref.h"
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The error of y * (1 / scale) against y / scale, in fp32: the reciprocal and the product each
 * round once (and QMAX / absmax once more), well under 2^-21 relative. */
static const double FP32_QUOTIENT = 0x1p-21;

int lntune_quant_check_row(int type, const double *yref, const double *unit, int64_t H,
                           const unsigned char *q, float scale, const float *got_scale, int exact,
                           char *msg, size_t len) {
    const double qmax = lntune_quant_max(type);
    double s = (double)scale, rel = 0.0;
    if (lntune_type_row_scaled(type)) {
        double absmax = 0.0, umax = 0.0;
        for (int64_t i = 0; i < H; ++i) {
            if (!isnan(yref[i]) && fabs(yref[i]) > absmax) absmax = fabs(yref[i]);
            if (isfinite(unit[i]) && unit[i] > umax) umax = unit[i];
        }
        s = absmax / qmax;
        const double got = (double)*got_scale;
        /* absmax / QMAX rounds once in fp32 even where y is exact */
        const double tol = (exact ? 0.0 : LNTUNE_VERIFY_TOLERANCE * umax / qmax) + s * 0x1p-22;
        const int ok = isinf(s) ? isinf(got) && got > 0 : fabs(got - s) <= tol;
        if (!ok) {
            snprintf(msg, len,
                     "the row's scale is %.9g, reference %.9g (the largest |y| / %g; within %.3g)",
                     got, s, qmax, tol);
            return 0;
        }
        rel = s > 0.0 && isfinite(s) ? fabs(got - s) / s : 0.0;
    }
    /* A row scale of 0 or Inf multiplies y by 0 (quant.h): NaN codes where y is NaN or Inf. */
    const int times_zero = lntune_type_row_scaled(type) && !(s > 0.0 && isfinite(s));
    for (int64_t i = 0; i < H; ++i) {
        double lo, hi;
        if (times_zero) {
            lo = hi = yref[i] * 0.0;
        } else {
            const double v = yref[i] / s;
            const double e = exact || !isfinite(v) ? 0.0
                                                   : LNTUNE_VERIFY_TOLERANCE * unit[i] / s +
                                                         fabs(v) * (rel + FP32_QUOTIENT);
            lo = v - e;
            hi = v + e;
        }
        const double want_lo = lntune_quant_value(type, lntune_quant_code(type, lo));
        const double want_hi = lntune_quant_value(type, lntune_quant_code(type, hi));
        const double got = lntune_quant_value(type, q[i]);
        const int ok = isnan(want_lo) || isnan(want_hi) ? isnan(got) && isnan(want_lo)
                                                        : got >= want_lo && got <= want_hi;
        if (!ok) {
            if (want_lo == want_hi || (isnan(want_lo) && isnan(want_hi)))
                snprintf(msg, len,
                         "y[%lld] is code 0x%02x (%.9g), expected %.9g (reference y %.9g / scale "
                         "%.9g%s)",
                         (long long)i, q[i], got, want_lo, yref[i], s,
                         exact ? ", exact: ties round to even, values past the largest code "
                                 "saturate"
                               : "");
            else
                snprintf(msg, len,
                         "y[%lld] is code 0x%02x (%.9g), expected %.9g to %.9g (reference y "
                         "%.9g / scale %.9g)",
                         (long long)i, q[i], got, want_lo, want_hi, yref[i], s);
            return 0;
        }
    }
    return 1;
}

/* ---- probes ---- */

enum { PROBE_ROWS = 2 };

/*
 * Values of y / scale: ties of the codes first, then (static scales) values past the largest
 * code. Each is exact in fp32, bf16 and fp16, and twice each too (RMSNorm's gamma is 2y).
 */
static const double i8_ties[] = {0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -100.5, 126.5, -127.5};
static const double i8_past[] = {300.0, -300.0, 1000.0, -1000.0};
/* e4m3: 2.125 lies between 2 (even) and 2.25; 400 between 384 (even) and 416; 2^-10 between 0
 * and 2^-9; 5 * 2^-10 between 2 * 2^-9 (even) and 3 * 2^-9. Past: 460 would round to 480. */
static const double e4m3_ties[] = {2.125, -2.125, 400.0, -400.0, 0x1p-10, -0x1p-10, 5 * 0x1p-10};
static const double e4m3_past[] = {460.0, -460.0, 1000.0, -1000.0};

typedef struct {
    double values[32];
    int n;
} probe_values;

/* The probe's values of y / scale: for a scale per row QMAX first, which makes the scale 1. */
static probe_values values_of(int type) {
    probe_values p = {{0}, 0};
    const int e4m3 = lntune_quant_is_e4m3(type), row = lntune_type_row_scaled(type);
    const double *ties = e4m3 ? e4m3_ties : i8_ties, *past = e4m3 ? e4m3_past : i8_past;
    const int nties = e4m3 ? (int)(sizeof e4m3_ties / sizeof *e4m3_ties)
                           : (int)(sizeof i8_ties / sizeof *i8_ties);
    if (row) p.values[p.n++] = lntune_quant_max(type);
    for (int k = 0; k < nties; ++k) p.values[p.n++] = ties[k];
    for (int k = 0; !row && k < 4; ++k) p.values[p.n++] = past[k];
    return p;
}

/* One probe at H: 1 passed, 0 failed (res->message set), -1 out of memory. */
static int probe_at(lntune_op op, lntune_types types, int fusion, lntune_kernel_fn kernel,
                    int affine, int64_t H, int threads, lntune_pool *pool,
                    lntune_verify_result *res) {
    const int ln = op == LNTUNE_OP_LAYERNORM, type = types.y;
    const int e4m3 = lntune_quant_is_e4m3(type), row = lntune_type_row_scaled(type);
    /* Without gamma y is +-1/2 (x = +-1, eps = 3: rstd exactly 1/2): a tie of int8 at scale 1,
     * of e4m3 at scale 2^9 (2^-10); LayerNorm needs H even for a mean of exactly 0. */
    if (!affine && ln && H % 2) return 1;
    const size_t xs = lntune_type_size(types.x), ps = lntune_type_size(types.params);
    const int rtype = lntune_types_residual(types);
    const size_t rs = lntune_type_size(rtype), n = (size_t)(PROBE_ROWS * H);
    unsigned char *x = malloc(n * xs), *res_in = malloc(n * rs), *res_out = malloc(n * rs);
    unsigned char *gamma = malloc((size_t)H * ps), *beta = malloc((size_t)H * ps);
    unsigned char *y = malloc(n);
    double *yref = malloc((size_t)H * sizeof *yref), *unit = calloc((size_t)H, sizeof *unit);
    int ok = -1;
    if (!x || !res_in || !res_out || !gamma || !beta || !y || !yref || !unit) goto done;
    const probe_values pv = values_of(type);
    for (int64_t i = 0; i < H; ++i) {
        const double want = pv.values[i % pv.n];
        /* LayerNorm with gamma: gamma 0 and y = beta exactly, whatever the statistics.
         * RMSNorm with gamma: x = 1, rstd 1/2, y = gamma / 2. Without: x = +-1. */
        lntune_ref_store(types.params, gamma, i, affine && ln ? 0.0f : (float)(2.0 * want));
        lntune_ref_store(types.params, beta, i, (float)want);
        for (int r = 0; r < PROBE_ROWS; ++r) {
            const float xv = affine ? (ln ? (float)(i % 7) - 3.0f : 1.0f) : (i % 2 ? -1.0f : 1.0f);
            lntune_ref_store(types.x, x, r * H + i, xv);
            lntune_ref_store(rtype, res_in, r * H + i, 0.0f);
        }
    }
    float mean[PROBE_ROWS], rstd[PROBE_ROWS], scales[PROBE_ROWS];
    lntune_kernel_args a = {0};
    a.rows = PROBE_ROWS;
    a.H = a.x_stride = a.y_stride = H;
    a.x = x;
    a.y = y;
    a.eps = affine && ln ? 1e-5f : 3.0f;
    a.gamma = affine ? gamma : NULL;
    a.beta = affine && ln ? beta : NULL;
    a.mean = mean;
    a.rstd = rstd;
    a.y_scale = affine || !e4m3 ? 1.0f : 512.0f;
    a.y_scales = row ? scales : NULL;
    if (fusion) {
        a.residual = res_in;
        a.residual_stride = H;
        if (fusion == LNTUNE_FUSION_RESIDUAL_OUT) {
            a.residual_out = res_out;
            a.residual_out_stride = H;
        }
    }
    memset(y, 0x5a, n);
    const int rc = lntune_pool_run_kernel(pool, kernel, &a, threads);
    if (rc != LNTUNE_KERNEL_OK) {
        snprintf(res->message, sizeof res->message,
                 "H=%lld, quantization probe: kernel returned %d", (long long)H, rc);
        ok = 0;
        goto done;
    }
    ok = 1;
    for (int r = 0; ok && r < PROBE_ROWS; ++r) {
        /* Exact only where the statistics came out as designed (fp32 y = yref). */
        const int exact = (affine && ln) || (rstd[r] == 0.5f && (!ln || mean[r] == 0.0f));
        for (int64_t i = 0; i < H; ++i) {
            const double xv = lntune_ref_load(types.x, x, r * H + i);
            yref[i] = affine ? (ln ? lntune_ref_load(types.params, beta, i)
                                   : 0.5 * lntune_ref_load(types.params, gamma, i))
                             : 0.5 * xv;
            unit[i] = fabs(yref[i]) + 1.0;
        }
        char msg[400];
        if (!lntune_quant_check_row(type, yref, unit, H, y + r * H, a.y_scale, scales + r, exact,
                                    msg, sizeof msg)) {
            snprintf(res->message, sizeof res->message,
                     "H=%lld, quantization probe%s, row %d: %.400s", (long long)H,
                     exact ? " (exact y)" : "", r, msg);
            ok = 0;
        }
    }
done:
    free(x);
    free(res_in);
    free(res_out);
    free(gamma);
    free(beta);
    free(y);
    free(yref);
    free(unit);
    if (ok < 0) snprintf(res->message, sizeof res->message, "quantization probe: out of memory");
    return ok;
}

int lntune_quant_probes(lntune_op op, lntune_types types, int fusion, lntune_kernel_fn kernel,
                        int affine, int64_t fixed_h, int threads, lntune_pool *pool,
                        lntune_verify_result *res) {
    /* Sizes below, at and past one vector loop step, so that tails see the probes too. */
    static const int64_t sizes[] = {40, 200, 1030};
    const size_t nsizes = fixed_h ? 1 : sizeof sizes / sizeof *sizes;
    for (size_t k = 0; k < nsizes; ++k)
        if (probe_at(op, types, fusion, kernel, affine, fixed_h ? fixed_h : sizes[k], threads, pool,
                     res) != 1)
            return 0;
    return 1;
}
