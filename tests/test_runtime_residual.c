/*
 * test_runtime_residual.c - the fused residual add through liblntune on the CPU, built-in kernels
 * (no database): every (x, y, gamma/beta, residual) type tuple x fusion (residual; residual and
 * residual_out) x op, with gamma and beta and without, at H = 1, 17 and 4097, rows padded by
 * strides, residual one element off its alignment, x = 1000 + noise with residual = -1000 +
 * noise. Checked: residual_out equals the fp32 sum rounded to its type bit for bit, every element
 * of y within the verifier's tolerance of the float64 reference of that sum (rounded to y's
 * type), mean and rstd, and no write outside the rows (poisoned). Then residual_out = residual
 * (in place) gives the same y and residual_out as separate buffers.
 *
 *   test_runtime_residual SCRATCH_DIR
 */
#include "residual_check.h"

int main(void) {
    lntune *ctx = NULL;
    if (!test_case(lntune_open(NULL, &ctx) == LNTUNE_OK, "open (no database: built-ins)")) return 1;
    const int64_t hs[] = {1, 17, MAXH};
    for (int packed = 0; packed < 256; ++packed) {
        const lntune_types t = lntune_types_unpacked(packed);
        const int rt = lntune_types_residual(t);
        if (t.x >= LNTUNE_TYPE_COUNT || t.y >= LNTUNE_TYPE_COUNT || t.params >= LNTUNE_TYPE_COUNT ||
            rt >= LNTUNE_TYPE_COUNT || (t.residual && rt == t.x))
            continue; /* not a canonical tuple */
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
    lntune_close(ctx);
    return test_summary();
}
