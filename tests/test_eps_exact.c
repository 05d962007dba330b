/*
 * test_eps_exact.c - eps = 0 as ONNX and PyTorch allow it: with LNTUNE_EPS_EXACT in args.flags
 * the kernels get eps as given, 0 included; without the flag eps 0 still means 1e-5.
 *  - fp32 LayerNorm and RMSNorm, built in and tuned (a kernel tuned here, its calls counted):
 *    eps 0 with the flag gives y = (x - mean) / sqrt(var) (RMSNorm x / sqrt(mean square)) and
 *    rstd within the float64 reference's bound at eps 0, and is far from the eps 1e-5 result on
 *    rows of small variance, where eps matters; without the flag eps 0 gives the 1e-5 result
 *    bit for bit;
 *  - every other path (typed bf16 built-in, fused residual, weight offset, int8 y, and the
 *    backward with its statistics recomputed): eps 0 with the flag gives the bits of eps 1e-30
 *    without it (1e-30 vanishes beside these rows' variance, so the same kernel computes the
 *    same thing: eps reached it as given), and differs from eps 0 without the flag.
 *
 *   test_eps_exact SCRATCH_DIR
 */
#include "half.h"
#include "lntune.h"
#include "testutil.h"
#include "tunedb.h"

#include <string.h>

enum { ROWS = 8, H = 256 };

static float x[ROWS * H], res[ROWS * H], gamma_[H], beta_[H], y[ROWS * H], y2[ROWS * H];
static float mean[ROWS], rstd[ROWS];

static int call(lntune *ctx, int rms, lntune_args *a) {
    return rms ? lntune_rmsnorm(ctx, a) : lntune_layernorm(ctx, a);
}

static lntune_args args(int rms, void *out, float eps, unsigned flags) {
    lntune_args a = LNTUNE_ARGS_INIT;
    a.rows = ROWS, a.H = H, a.x = x, a.y = out, a.gamma = gamma_, a.beta = rms ? NULL : beta_;
    a.eps = eps, a.flags = flags, a.mean = mean, a.rstd = rstd;
    return a;
}

/* fp32 against the float64 reference at eps 0, and against the default without the flag. */
static void check_fp32(lntune *ctx, int rms, const char *where) {
    const char *op = rms ? "rmsnorm" : "layernorm";
    lntune_args a = args(rms, y, 0.0f, LNTUNE_EPS_EXACT);
    int rc = call(ctx, rms, &a);
    const double exact = rc ? INFINITY
                            : test_error((lntune_op)rms, x, H, y, H, ROWS, H, gamma_, a.beta, 0.0,
                                         rms ? NULL : mean, rstd);
    const double off =
        rc ? 0.0
           : test_error((lntune_op)rms, x, H, y, H, ROWS, H, gamma_, a.beta, 1e-5, NULL, NULL);
    test_case(rc == LNTUNE_OK && exact <= TOLERANCE && off > 1000 * TOLERANCE,
              "%s %s, eps 0 with LNTUNE_EPS_EXACT: error %.3g against the eps 0 reference, %.3g "
              "against eps 1e-5's",
              where, op, exact, off);
    a = args(rms, y, 0.0f, 0);
    rc = call(ctx, rms, &a);
    lntune_args d = args(rms, y2, 1e-5f, 0);
    const int rc2 = call(ctx, rms, &d);
    test_case(rc == LNTUNE_OK && rc2 == LNTUNE_OK && memcmp(y, y2, sizeof y) == 0,
              "%s %s, eps 0 without the flag: the bits of eps 1e-5", where, op);
}

/* eps 0 exact against eps 1e-30 without the flag (equal) and eps 0 without it (different). */
static void check_same(lntune *ctx, int rms, lntune_args a, size_t bytes, const char *what) {
    a.y = y, a.eps = 0.0f, a.flags = LNTUNE_EPS_EXACT;
    int rc = call(ctx, rms, &a);
    a.y = y2, a.eps = 1e-30f, a.flags = 0;
    if (rc == LNTUNE_OK) rc = call(ctx, rms, &a);
    const int same = memcmp(y, y2, bytes) == 0;
    a.eps = 0.0f;
    if (rc == LNTUNE_OK) rc = call(ctx, rms, &a);
    test_case(rc == LNTUNE_OK && same && memcmp(y, y2, bytes) != 0,
              "%s: eps 0 exact gives the bits of eps 1e-30, not those of eps 0 without the flag "
              "(rc %d %s)",
              what, rc, rc ? lntune_errmsg(ctx) : "");
}

static void check_paths(lntune *ctx) {
    static uint16_t bx[ROWS * H];
    for (int i = 0; i < ROWS * H; ++i) bx[i] = lntune_f32_to_bf16(x[i]);
    lntune_args a = args(0, y, 0, 0);
    a.x = bx, a.dtype = LNTUNE_BF16, a.param_dtype = LNTUNE_F32;
    check_same(ctx, 0, a, ROWS * H * 2, "built-in layernorm bf16/bf16/f32");
    a = args(0, y, 0, 0);
    a.residual = res;
    check_same(ctx, 0, a, sizeof y, "built-in layernorm with residual");
    a = args(1, y, 0, 0);
    a.weight_offset = 1.0f;
    check_same(ctx, 1, a, sizeof y, "built-in rmsnorm with weight offset 1");
    a = args(1, y, 0, 0);
    a.y_dtype = LNTUNE_I8, a.y_scale = 0.02f;
    check_same(ctx, 1, a, ROWS * H, "built-in rmsnorm, int8 y with a static scale");

    static float dy[ROWS * H], dx[ROWS * H], dx2[ROWS * H], dg[H], dg2[H];
    test_fill(dy, ROWS * H, 0.0, 1.0);
    for (int rms = 0; rms < 2; ++rms) {
        lntune_backward_args b = LNTUNE_BACKWARD_ARGS_INIT;
        b.rows = ROWS, b.H = H, b.x = x, b.dy = dy, b.gamma = gamma_, b.dgamma = dg;
        b.dx = dx, b.flags = LNTUNE_EPS_EXACT; /* eps 0; mean and rstd recomputed */
        int rc = rms ? lntune_rmsnorm_backward(ctx, &b) : lntune_layernorm_backward(ctx, &b);
        b.dx = dx2, b.dgamma = dg2, b.flags = 0, b.eps = 1e-30f;
        if (rc == LNTUNE_OK)
            rc = rms ? lntune_rmsnorm_backward(ctx, &b) : lntune_layernorm_backward(ctx, &b);
        const int same = memcmp(dx, dx2, sizeof dx) == 0 && memcmp(dg, dg2, sizeof dg) == 0;
        b.eps = 0.0f;
        if (rc == LNTUNE_OK)
            rc = rms ? lntune_rmsnorm_backward(ctx, &b) : lntune_layernorm_backward(ctx, &b);
        test_case(rc == LNTUNE_OK && same && memcmp(dx, dx2, sizeof dx) != 0,
                  "built-in %s backward: eps 0 exact gives the bits of eps 1e-30, not those of "
                  "eps 0 without the flag (rc %d)",
                  rms ? "rmsnorm" : "layernorm", rc);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    /* rows of small variance (about 1e-4: eps 1e-5 moves rstd by some 5%) */
    test_fill(x, ROWS * H, 0.0, 0.02);
    test_fill(res, ROWS * H, 0.0, 0.001);
    test_fill(gamma_, H, 1.0, 0.2);
    test_fill(beta_, H, 0.0, 0.5);

    lntune *ctx = NULL;
    int rc = lntune_open(NULL, &ctx); /* $LNTUNE_DB from ctest: a path with no database */
    if (!test_case(rc == LNTUNE_OK, "open without a database: rc %d", rc)) return 1;
    for (int rms = 0; rms < 2; ++rms) check_fp32(ctx, rms, "built-in");
    check_paths(ctx);
    lntune_close(ctx);

    tunedb_file t;
    rc = tunedb_create(&t, argv[1], "eps_exact.db");
    int ok = rc == LNTUNE_OK &&
             put_tuned(t.db, t.hw, "layernorm", "vec=8,acc=2,stats=twopass,affine=fused,threads=1",
                       H, ROWS, 1, 1, TUNED_RUNS) == 0 &&
             put_tuned(t.db, t.hw, "rmsnorm", "vec=4,stats=wide,affine=fused,threads=1", H, ROWS, 1,
                       1, TUNED_RUNS) == 0;
    lntune_db_close(t.db);
    if (!test_case(ok, "a database with LayerNorm and RMSNorm tuned at %dx%d", ROWS, H))
        return test_summary();
    if (!test_case(lntune_open(t.path, &ctx) == LNTUNE_OK, "open it")) return test_summary();
    for (int rms = 0; rms < 2; ++rms) {
        const int before = lntune_test_tuned_calls;
        check_fp32(ctx, rms, "tuned");
        test_case(lntune_test_tuned_calls - before == 3, "  the tuned kernel ran all 3 calls (%d)",
                  lntune_test_tuned_calls - before);
    }
    lntune_close(ctx);
    return test_summary();
}
