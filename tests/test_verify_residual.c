/*
 * test_verify_residual.c - the verifier of fused residual kernels (y = Norm(x + residual),
 * residual_out = x + residual) passes a correct kernel of every fusion and a sample of type
 * tuples, and rejects each fault a fused kernel can make: the residual ignored, residual_out
 * holding x, truncated instead of rounded, an element of it unwritten, a write between its rows,
 * residual overwritten, a wrong mean.
 */
#include "fusion.h"
#include "half_ref.h"
#include "lntune.h"
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

enum {
    CORRECT,
    IGNORE_RESIDUAL,
    OUT_IS_X,
    OUT_TRUNCATED,
    OUT_SKIP_LAST,
    OUT_GAP,
    CLOBBER_RESIDUAL,
    WRONG_MEAN
};
static const char *const mode_names[] = {
    "correct",        "ignores residual",        "residual_out = x",    "residual_out truncated",
    "skips the last", "writes between its rows", "overwrites residual", "mean off by 1e-3"};
static int mode;
static lntune_types ktypes;
static lntune_op kop;

static int kernel(const lntune_kernel_args *a, int64_t r0, int64_t r1) {
    const int64_t H = a->H;
    const int xt = ktypes.x, yt = ktypes.y, pt = ktypes.params, rt = lntune_types_residual(ktypes);
    const size_t xs = xt ? 2 : 4, ys = yt ? 2 : 4, rs = rt ? 2 : 4;
    float s[4096];
    if (H > 4096) return LNTUNE_KERNEL_EUNSUPPORTED;
    for (int64_t r = r0; r < r1; ++r) {
        const unsigned char *x = (const unsigned char *)a->x + r * a->x_stride * (int64_t)xs;
        const unsigned char *res =
            (const unsigned char *)a->residual + r * a->residual_stride * (int64_t)rs;
        unsigned char *y = (unsigned char *)a->y + r * a->y_stride * (int64_t)ys;
        for (int64_t i = 0; i < H; ++i)
            s[i] = (float)lntune_ref_load(xt, x, i) +
                   (mode == IGNORE_RESIDUAL ? 0.0f : (float)lntune_ref_load(rt, res, i));
        if (a->residual_out) {
            unsigned char *o =
                (unsigned char *)a->residual_out + r * a->residual_out_stride * (int64_t)rs;
            const int64_t n = mode == OUT_SKIP_LAST && r == r1 - 1 ? H - 1 : H;
            for (int64_t i = 0; i < n; ++i) {
                float v = mode == OUT_IS_X ? (float)lntune_ref_load(xt, x, i) : s[i];
                if (mode == OUT_TRUNCATED && rt == LNTUNE_TYPE_BF16) {
                    uint32_t u;
                    memcpy(&u, &v, 4);
                    u &= 0xffff0000u; /* truncation, not rounding */
                    memcpy(&v, &u, 4);
                }
                lntune_ref_store(rt, o, i, v);
            }
            if (mode == OUT_GAP && a->residual_out_stride > H) lntune_ref_store(rt, o, H, 0.0f);
        }
        if (mode == CLOBBER_RESIDUAL) lntune_ref_store(rt, (void *)res, 0, 0.0f);
        double mean = 0.0, var = 0.0;
        if (kop == LNTUNE_OP_LAYERNORM) {
            for (int64_t i = 0; i < H; ++i) mean += s[i];
            mean /= (double)H;
        }
        for (int64_t i = 0; i < H; ++i) var += (s[i] - mean) * (s[i] - mean);
        const float m = (float)mean, rstd = (float)(1.0 / sqrt(var / (double)H + a->eps));
        for (int64_t i = 0; i < H; ++i) {
            float v = (s[i] - m) * rstd;
            if (a->gamma) v *= (float)lntune_ref_load(pt, a->gamma, i);
            if (a->beta) v += (float)lntune_ref_load(pt, a->beta, i);
            lntune_ref_store(yt, y, i, v);
        }
        if (a->mean) a->mean[r] = mode == WRONG_MEAN ? m + 1e-3f : m;
        if (a->rstd) a->rstd[r] = rstd;
    }
    return LNTUNE_KERNEL_OK;
}

static void expect(lntune_op op, lntune_types t, int fusion, int m, int want_ok,
                   const char *want_text) {
    static const int64_t hs[] = {1, 17, 768};
    lntune_verifier *v = NULL;
    char types[32];
    lntune_types_format(t, types, sizeof types);
    if (lntune_verifier_create_fused(op, t, fusion, hs, 3, 42, &v) != LNTUNE_OK) {
        printf("FAIL: cannot create the %s verifier\n", types);
        failures++;
        return;
    }
    lntune_verify_result res;
    mode = m;
    ktypes = t;
    kop = op;
    const int ok = lntune_verifier_check(v, kernel, 1, 0, 1, NULL, &res) == LNTUNE_OK;
    const int pass = ok == want_ok && (ok || strstr(res.message, want_text));
    printf("%s: %s %s %s, a kernel that %s: %s%s\n", pass ? "ok  " : "FAIL", lntune_op_name(op),
           lntune_fusion_name(fusion), types, mode_names[m],
           ok ? "passes" : "fails: ", ok ? "" : res.message);
    if (!pass) failures++;
    lntune_verifier_destroy(v);
}

int main(void) {
    enum { F32 = LNTUNE_TYPE_F32, F16 = LNTUNE_TYPE_F16, BF16 = LNTUNE_TYPE_BF16 };
    lntune_types tuples[4] = {
        {F32, F32, F32, 0}, {BF16, BF16, BF16, 0}, {F16, F32, BF16, 0}, {BF16, BF16, F32, 0}};
    lntune_types_set_residual(&tuples[2], BF16); /* f16 x, bf16 residual */
    lntune_types_set_residual(&tuples[3], F32);  /* bf16 x, fp32 residual stream */
    for (int op = 0; op < 2; ++op)
        for (int k = 0; k < 4; ++k)
            for (int f = LNTUNE_FUSION_RESIDUAL; f < LNTUNE_FUSION_COUNT; ++f)
                expect((lntune_op)op, tuples[k], f, CORRECT, 1, "");
    const lntune_types bf16 = tuples[1];
    const int out = LNTUNE_FUSION_RESIDUAL_OUT;
    expect(LNTUNE_OP_LAYERNORM, tuples[0], LNTUNE_FUSION_RESIDUAL, IGNORE_RESIDUAL, 0, "reference");
    expect(LNTUNE_OP_RMSNORM, bf16, out, IGNORE_RESIDUAL, 0, "residual_out");
    expect(LNTUNE_OP_LAYERNORM, tuples[0], out, OUT_IS_X, 0, "wrong residual_out");
    expect(LNTUNE_OP_LAYERNORM, bf16, out, OUT_TRUNCATED, 0, "wrong residual_out");
    expect(LNTUNE_OP_RMSNORM, tuples[3], out, OUT_SKIP_LAST, 0, "never wrote residual_out");
    expect(LNTUNE_OP_LAYERNORM, tuples[2], out, OUT_GAP, 0, "wrote residual_out between rows");
    expect(LNTUNE_OP_LAYERNORM, bf16, LNTUNE_FUSION_RESIDUAL, CLOBBER_RESIDUAL, 0,
           "wrote into residual");
    expect(LNTUNE_OP_LAYERNORM, tuples[0], out, WRONG_MEAN, 0, "mean[");
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
