/*
 * residual_check.h - one fused residual call through liblntune checked against the float64
 * reference: residual_out equals the fp32 sum x + residual rounded to its type bit for bit, y
 * is within the verifier's tolerance of the reference of that sum (rounded to y's type), mean
 * and rstd match, and nothing is written between rows (poisoned). Rows are padded by strides and
 * residual sits one element off its alignment. Used by test_runtime_residual (built-ins) and
 * test_tuned_residual (tuned kernels).
 */
#ifndef LNTUNE_TEST_RESIDUAL_CHECK_H
#define LNTUNE_TEST_RESIDUAL_CHECK_H

#include "dtypes.h"
#include "half_ref.h"
#include "lntune.h"
#include "testutil.h"
#include "verify.h"

#include <string.h>

enum { ROWS_MAX = 64, PAD = 3, MAXH = 4097 };

static inline size_t tsize(int t) {
    return t == LNTUNE_TYPE_F32 ? 4 : 2;
}

/* Fills n elements of type t at p with offset + spread * N(0, 1), rounded to t; returns them. */
static inline void fill_typed(int t, void *p, float *v, int64_t n, double offset, double spread) {
    test_fill(v, n, offset, spread);
    for (int64_t i = 0; i < n; ++i) {
        lntune_ref_store(t, p, i, v[i]);
        v[i] = (float)lntune_ref_load(t, p, i);
    }
}

static inline void poison(int t, void *p, int64_t n) {
    const uint32_t bits = lntune_verify_poison(t);
    const uint16_t b16 = (uint16_t)bits;
    for (int64_t i = 0; i < n; ++i)
        memcpy((unsigned char *)p + (size_t)i * tsize(t), t ? (const void *)&b16 : &bits, tsize(t));
}

static inline uint32_t bits_at(int t, const void *p, int64_t i) {
    if (t == LNTUNE_TYPE_F32) {
        uint32_t u;
        memcpy(&u, (const unsigned char *)p + 4 * i, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, (const unsigned char *)p + 2 * i, 2);
    return h;
}

/*
 * One call of rows (<= ROWS_MAX) rows; returns 1 when every check passes (the first failure is
 * printed through test_case).
 */
static inline int check_call(lntune *ctx, lntune_op op, lntune_types t, int with_out, int affine,
                             int64_t rows, int64_t H, int in_place) {
    static unsigned char xb[ROWS_MAX * (MAXH + PAD) * 4 + 8], rb[ROWS_MAX * (MAXH + PAD) * 4 + 8],
        ob[ROWS_MAX * (MAXH + PAD) * 4 + 8], yb[ROWS_MAX * (MAXH + PAD) * 4 + 8], gb[MAXH * 4],
        bb[MAXH * 4];
    static float xv[ROWS_MAX * (MAXH + PAD)], rv[ROWS_MAX * (MAXH + PAD)], gv[MAXH], bv[MAXH];
    static float s[MAXH];
    static double z[MAXH];
    const int rt = lntune_types_residual(t);
    const int64_t stride = H + PAD, n = rows * stride;
    /* residual one element past its buffer's alignment */
    unsigned char *res = rb + tsize(rt), *out = in_place ? res : ob;
    fill_typed(t.x, xb, xv, n, 1000.0, 1.0);
    fill_typed(rt, res, rv, n, -1000.0, 1.0);
    fill_typed(t.params, gb, gv, H, 1.0, 0.3);
    fill_typed(t.params, bb, bv, H, 0.0, 0.5);
    poison(t.y, yb, n);
    if (!in_place) poison(rt, ob, n);
    float mean[ROWS_MAX], rstd[ROWS_MAX];
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = xb, a.y = yb, a.x_stride = a.y_stride = stride;
    a.dtype = (lntune_dtype)(t.x + 1), a.y_dtype = (lntune_dtype)(t.y + 1);
    a.param_dtype = (lntune_dtype)(t.params + 1), a.residual_dtype = (lntune_dtype)(rt + 1);
    a.residual = res, a.residual_stride = stride;
    if (with_out) a.residual_out = out, a.residual_out_stride = stride;
    if (affine) a.gamma = gb, a.beta = op == LNTUNE_OP_LAYERNORM ? bb : NULL;
    a.mean = mean, a.rstd = rstd;
    char what[160], types[32];
    lntune_types_format(t, types, sizeof types);
    snprintf(what, sizeof what, "%s %s %s H=%lld %s%s", lntune_op_name(op), types,
             with_out ? "residual_out" : "residual", (long long)H, affine ? "gamma/beta" : "plain",
             in_place ? " in place" : "");
    const int rc = op == LNTUNE_OP_LAYERNORM ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
    if (rc != LNTUNE_OK) return test_case(0, "%s: rc %d: %s", what, rc, lntune_errmsg(ctx));
    for (int r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < H; ++i) s[i] = xv[r * stride + i] + rv[r * stride + i];
        double m, rs;
        lntune_reference_row(op, s, H, 1e-5, z, &m, &rs);
        if (!(fabs(mean[r] - m) * rs <= TOLERANCE * (fabs(m) * rs + 1.0)) ||
            !(fabs(rstd[r] - rs) <= TOLERANCE * rs))
            return test_case(0, "%s: row %d mean %g rstd %g, reference %g %g", what, r,
                             (double)mean[r], (double)rstd[r], m, rs);
        for (int64_t i = 0; i < stride; ++i) {
            const int64_t at = r * stride + i;
            if (i >= H) {
                if (bits_at(t.y, yb, at) != lntune_verify_poison(t.y) ||
                    (with_out && !in_place && bits_at(rt, ob, at) != lntune_verify_poison(rt)))
                    return test_case(0, "%s: wrote between rows (row %d col %lld)", what, r,
                                     (long long)i);
                continue;
            }
            if (with_out) {
                unsigned char want[4];
                lntune_ref_store(rt, want, 0, s[i]);
                if (bits_at(rt, out, at) != bits_at(rt, want, 0))
                    return test_case(0, "%s: residual_out[%d][%lld] = %g, want %g", what, r,
                                     (long long)i, lntune_ref_load(rt, out, at), (double)s[i]);
            }
            const double g = affine ? gv[i] : 1.0;
            const double b = affine && op == LNTUNE_OP_LAYERNORM ? bv[i] : 0.0;
            const double ref = z[i] * g + b, got = lntune_ref_load(t.y, yb, at);
            const double unit = (fabs(m) * rs + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
            double err;
            if (!lntune_verify_element(t.y, ref, got, unit, &err))
                return test_case(0, "%s: y[%d][%lld] = %g, reference %g", what, r, (long long)i,
                                 got, ref);
        }
    }
    return 1;
}

#endif /* LNTUNE_TEST_RESIDUAL_CHECK_H */
