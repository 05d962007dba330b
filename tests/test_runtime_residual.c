/*
 * test_runtime_residual.c - the fused residual add through liblntune on the CPU, built-in kernels
 * (no database): every (x, y, gamma/beta, residual) type tuple x fusion (residual; residual and
 * residual_out) x op, with gamma and beta and without, at H = 1, 17 and 4097, rows padded by
 * strides, residual one element off its alignment, x = 1000 + noise with residual = -1000 +
 * noise. Checked: residual_out equals the fp32 sum rounded to its type bit for bit, every element
 * of y within the verifier's tolerance of the float64 reference of that sum (rounded to y's
 * type), mean and rstd, and no write outside the rows (poisoned). Then residual_out = residual
 * (in place) gives the same y and residual_out as separate buffers. Last, rows with a NaN in x
 * and an Inf in residual: residual_out still bit for bit, the NaN row's y all NaN, the clean
 * row's y finite.
 *
 *   test_runtime_residual SCRATCH_DIR
 */
#include "residual_check.h"

/* Stores a signalling NaN with a payload in every bit the type has, negative, at element i of p
 * (of type t); v[i] receives its exact fp32 widening. A sum that quiets it then carries low
 * payload bits that a rounding add would carry into the exponent. */
static void store_signalling_nan(int t, void *p, int64_t i, float *v) {
    const uint32_t wide = t == LNTUNE_TYPE_F32   ? 0xffbfffffu
                          : t == LNTUNE_TYPE_F16 ? 0xffbfe000u  /* 0xfdff widened */
                                                 : 0xffbf0000u; /* bf16 0xffbf widened */
    memcpy(&v[i], &wide, 4);
    if (t == LNTUNE_TYPE_F32) {
        memcpy((unsigned char *)p + 4 * i, &wide, 4);
        return;
    }
    const uint16_t h = t == LNTUNE_TYPE_F16 ? 0xfdff : 0xffbf;
    memcpy((unsigned char *)p + 2 * i, &h, 2);
}

/* Three rows of H = 37 (vector body and scalar tail): clean, x[1][5] NaN, residual[2][30] +Inf. */
static int check_nonfinite(lntune *ctx, lntune_op op, lntune_types t) {
    enum { ROWS = 3, H = 37, N = ROWS * H };
    static unsigned char xb[N * 4], rb[N * 4], ob[N * 4], yb[N * 4], gb[H * 4], bb[H * 4];
    static float xv[N], rv[N], gv[H], bv[H];
    const int rt = lntune_types_residual(t);
    fill_typed(t.x, xb, xv, N, 3.0, 1.0);
    fill_typed(rt, rb, rv, N, -1.0, 1.0);
    fill_typed(t.params, gb, gv, H, 1.0, 0.3);
    fill_typed(t.params, bb, bv, H, 0.0, 0.5);
    store_signalling_nan(t.x, xb, H + 5, xv);
    lntune_ref_store(rt, rb, 2 * H + 30, INFINITY);
    rv[2 * H + 30] = INFINITY;
    poison(t.y, yb, N);
    poison(rt, ob, N);
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = ROWS, a.H = H, a.x = xb, a.y = yb, a.residual = rb, a.residual_out = ob;
    a.dtype = (lntune_dtype)(t.x + 1), a.y_dtype = (lntune_dtype)(t.y + 1);
    a.param_dtype = (lntune_dtype)(t.params + 1), a.residual_dtype = (lntune_dtype)(rt + 1);
    a.gamma = gb, a.beta = op == LNTUNE_OP_LAYERNORM ? bb : NULL;
    char types[32];
    lntune_types_format(t, types, sizeof types);
    const int rc = op == LNTUNE_OP_LAYERNORM ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
    if (rc != LNTUNE_OK)
        return test_case(0, "%s %s NaN/Inf: rc %d: %s", lntune_op_name(op), types, rc,
                         lntune_errmsg(ctx));
    for (int64_t i = 0; i < N; ++i) {
        unsigned char want[4];
        lntune_ref_store(rt, want, 0, xv[i] + rv[i]);
        if (bits_at(rt, ob, i) != bits_at(rt, want, 0))
            return test_case(0, "%s %s NaN/Inf: residual_out[%lld] bits %#x, want %#x",
                             lntune_op_name(op), types, (long long)i, bits_at(rt, ob, i),
                             bits_at(rt, want, 0));
        const double y = lntune_ref_load(t.y, yb, i);
        if ((i < H && !isfinite(y)) || (i / H == 1 && !isnan(y)))
            return test_case(0, "%s %s NaN/Inf: y[%lld][%lld] = %g", lntune_op_name(op), types,
                             (long long)(i / H), (long long)(i % H), y);
    }
    return 1;
}

int main(void) {
    lntune *ctx = NULL;
    if (!test_case(lntune_open(NULL, &ctx) == LNTUNE_OK, "open (no database: built-ins)")) return 1;
    const int64_t hs[] = {1, 17, MAXH};
    for (int packed = 0; packed < 256; ++packed) {
        const lntune_types t = lntune_types_unpacked(packed);
        if (!lntune_types_canonical(t)) continue;
        char types[32];
        lntune_types_format(t, types, sizeof types);
        int ok = 1, calls = 0;
        for (int op = 0; op < 2; ++op)
            for (int with_out = 0; with_out < 2; ++with_out)
                for (int affine = 0; affine < 2; ++affine)
                    for (size_t k = 0; k < sizeof hs / sizeof hs[0]; ++k, ++calls)
                        ok &= check_call(ctx, (lntune_op)op, t, with_out, affine, 3, hs[k], 0);
        test_case(ok,
                  "%s: %d calls (2 ops x residual, residual_out x affine, plain x H 1, 17, "
                  "4097) match the reference",
                  types, calls);
    }
    int ok = 1;
    for (int op = 0; op < 2; ++op) {
        lntune_types bf16 = {LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0};
        lntune_types f32 = {0, 0, 0, 0};
        lntune_types_set_residual(&bf16, LNTUNE_TYPE_F32);
        ok &= check_call(ctx, (lntune_op)op, f32, 1, 1, 3, 4097, 1);
        ok &= check_call(ctx, (lntune_op)op, bf16, 1, 1, 3, 17, 1);
    }
    test_case(ok, "residual_out = residual (in place) matches the reference");
    ok = 1;
    int tuples = 0;
    for (int packed = 0; packed < 256; ++packed) {
        const lntune_types t = lntune_types_unpacked(packed);
        if (!lntune_types_canonical(t)) continue;
        ++tuples;
        ok &= check_nonfinite(ctx, LNTUNE_OP_LAYERNORM, t) &
              check_nonfinite(ctx, LNTUNE_OP_RMSNORM, t);
    }
    test_case(ok,
              "NaN in x and Inf in residual, %d tuples x 2 ops: residual_out bit for bit, the "
              "NaN row all NaN",
              tuples);
    lntune_close(ctx);
    return test_summary();
}
