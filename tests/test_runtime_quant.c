/*
 * test_runtime_quant.c - a quantized y (int8, fp8 e4m3) through the public API:
 *  - argument errors: a quantized x or gamma type, a static scale that is 0, negative,
 *    subnormal, Inf or NaN without y_scales (CUDA calls: test_cuda_dispatch, on device memory);
 *  - untuned calls (no database: the float built-in, then quantized) of both ops, int8 and
 *    e4m3, static and per-row scales, fp32 and bf16 x, with and without the fused residual,
 *    at odd and vector H: every code and scale as the float64 reference allows
 *    (lntune_quant_check_row), nothing written past a row;
 *  - a tuned kernel (RMSNorm, per-row int8, tuned here) serves its shape (the debug log says
 *    "tuned") with codes as right, and a batch-invariant handle gives every row the same bits
 *    alone and in the batch.
 *
 *   test_runtime_quant SCRATCH_DIR
 */
#define _GNU_SOURCE
#include "check.h"
#include "dtypes.h"
#include "half_ref.h"
#include "lntune.h"
#include "log_lines.h"
#include "randn.h"
#include "quant.h"
#include "reference.h"
#include "tune_once.h"
#include "verify_quant.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 9, PAD = 16 };

static uint64_t rng = 0x9e3779b97f4a7c15ULL; /* test_uniform's state */

static lntune_dtype public_of(int type) {
    return (lntune_dtype)(type + 1); /* fp32, fp16, bf16 */
}

/*
 * One call of op on ROWS x H random rows (x of type xt, gamma/beta fp32, a residual of x's type
 * when fused; y quantized as qtype: LNTUNE_TYPE_I8...E4M3_ROW), checked against the reference.
 * Returns 1 when every code and scale is right and nothing past a row was written.
 */
static int check_call(lntune *ctx, int ln, int xt, int qtype, int fused, int64_t H) {
    const size_t xs = lntune_type_size(xt), n = (size_t)(ROWS * H);
    unsigned char *x = malloc(n * xs), *res = malloc(n * xs), *y = malloc(n + PAD);
    float *xf = malloc(n * sizeof *xf), *gamma = malloc((size_t)H * sizeof *gamma),
          *beta = malloc((size_t)H * sizeof *beta), scales[ROWS + 1];
    double *z = malloc((size_t)H * sizeof *z), *yref = malloc((size_t)H * sizeof *yref),
           *unit = malloc((size_t)H * sizeof *unit);
    int ok = x && res && y && xf && gamma && beta && z && yref && unit;
    for (size_t i = 0; ok && i < n; ++i) {
        /* row 3: a large mean; the others spread about 0 */
        const float a = (float)(4.0 * test_uniform(&rng) - 2.0) +
                        (i / (size_t)H == 3 ? 500.0f : 0.0f),
                    b = fused ? (float)(2.0 * test_uniform(&rng) - 1.0) : 0.0f;
        lntune_ref_store(xt, x, (int64_t)i, a);
        lntune_ref_store(xt, res, (int64_t)i, b);
        /* what the kernel normalizes: the fp32 sum of the values as stored */
        xf[i] = (float)lntune_ref_load(xt, x, (int64_t)i) +
                (fused ? (float)lntune_ref_load(xt, res, (int64_t)i) : 0.0f);
    }
    for (int64_t i = 0; ok && i < H; ++i) {
        gamma[i] = (float)(0.5 + test_uniform(&rng));
        beta[i] = (float)(test_uniform(&rng) - 0.5);
    }
    if (!ok) {
        CHECK(0, "out of memory");
        goto done;
    }
    memset(y, 0x5a, n + PAD);
    for (int r = 0; r <= ROWS; ++r) scales[r] = NAN;
    lntune_args a = {0};
    a.rows = ROWS;
    a.H = H;
    a.dtype = public_of(xt);
    a.param_dtype = LNTUNE_F32;
    a.x = x;
    a.y = y;
    a.gamma = gamma;
    a.beta = ln ? beta : NULL;
    a.residual = fused ? res : NULL;
    a.y_dtype = lntune_quant_is_e4m3(qtype) ? LNTUNE_FP8_E4M3 : LNTUNE_I8;
    a.y_scale = (float)(3.0 / lntune_quant_max(qtype));
    a.y_scales = lntune_type_row_scaled(qtype) ? scales : NULL;
    const int rc = ln ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
    char what[160];
    snprintf(what, sizeof what, "%s x %s y %s%s H=%lld", ln ? "layernorm" : "rmsnorm",
             lntune_type_name(xt), lntune_type_name(qtype), fused ? " +residual" : "",
             (long long)H);
    if (rc != LNTUNE_OK) {
        CHECK(0, "%s: rc %d %s", what, rc, lntune_errmsg(ctx));
        ok = 0;
        goto done;
    }
    for (int r = 0; ok && r < ROWS; ++r) {
        double mean, rstd;
        lntune_reference_row(ln ? LNTUNE_OP_LAYERNORM : LNTUNE_OP_RMSNORM, xf + r * H, H, 1e-5, z,
                             &mean, &rstd);
        for (int64_t i = 0; i < H; ++i) {
            yref[i] = z[i] * gamma[i] + (ln ? beta[i] : 0.0);
            unit[i] =
                (fabs(mean) * rstd + fabs(z[i]) + 1.0) * gamma[i] + (ln ? fabs(beta[i]) : 0.0);
        }
        char msg[400];
        ok = lntune_quant_check_row(qtype, yref, unit, H, y + r * H, a.y_scale, scales + r, 0, msg,
                                    sizeof msg);
        if (!ok) CHECK(0, "%s, row %d: %s", what, r, msg);
    }
    int inside = isnan(scales[ROWS]);
    for (int k = 0; k < PAD; ++k) inside &= y[n + (size_t)k] == 0x5a;
    if (!inside) CHECK(0, "%s: wrote past the rows (y or the scales)", what);
    ok &= inside;
done:
    free(x);
    free(res);
    free(y);
    free(xf);
    free(gamma);
    free(beta);
    free(z);
    free(yref);
    free(unit);
    return ok;
}

static void check_errors(lntune *ctx) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, scales[1];
    int8_t y[8];
    lntune_args a = {0};
    a.rows = 1;
    a.H = 8;
    a.x = x;
    a.y = y;
    a.y_dtype = LNTUNE_I8;
    const float bad[] = {0.0f, -1.0f, 1e-40f, INFINITY, NAN};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; ++k) {
        a.y_scale = bad[k];
        const int rc = lntune_rmsnorm(ctx, &a);
        CHECK(rc == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "y_scale"),
              "static scale %g refused: rc %d, %s", (double)bad[k], rc, lntune_errmsg(ctx));
    }
    a.y_scales = scales; /* a scale per row: y_scale not read */
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_OK, "y_scale 0 with y_scales: a scale per row");
    a.y_scale = 1.0f;
    a.y_scales = NULL;
    a.dtype = LNTUNE_I8;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_EINVAL, "a quantized x refused: %s",
          lntune_errmsg(ctx));
    a.dtype = LNTUNE_F32;
    a.param_dtype = LNTUNE_FP8_E4M3;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_EINVAL, "quantized gamma refused: %s",
          lntune_errmsg(ctx));
    a.param_dtype = 0;
    a.y_dtype = (lntune_dtype)6;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_EINVAL, "y_dtype 6 refused: %s", lntune_errmsg(ctx));
    a.y_dtype = LNTUNE_FP8_E4M3;
}

/* Rows computed alone give the bits of the whole batch (a batch-invariant handle). */
static void check_invariance(lntune *ctx, int64_t H) {
    enum { R = 12 };
    float *x = malloc(R * H * sizeof *x), *gamma = malloc(H * sizeof *gamma), all_s[R], one_s[R];
    int8_t *all = malloc(R * H), *one = malloc(R * H);
    for (int64_t i = 0; i < R * H; ++i) x[i] = (float)(4.0 * test_uniform(&rng) - 2.0);
    for (int64_t i = 0; i < H; ++i) gamma[i] = (float)(0.5 + test_uniform(&rng));
    lntune_args a = {0};
    a.rows = R, a.H = H, a.x = x, a.y = all, a.gamma = gamma, a.y_dtype = LNTUNE_I8;
    a.y_scales = all_s;
    int rc = lntune_rmsnorm(ctx, &a);
    for (int r = 0; rc == LNTUNE_OK && r < R; ++r) {
        a.rows = 1, a.x = x + r * H, a.y = one + r * H, a.y_scales = one_s + r;
        rc = lntune_rmsnorm(ctx, &a);
    }
    CHECK(rc == LNTUNE_OK && memcmp(all, one, R * H) == 0 &&
              memcmp(all_s, one_s, sizeof all_s) == 0,
          "batch-invariant handle: %d rows alone and in one call, the same codes and scales", R);
    free(x), free(gamma), free(all), free(one);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    lntune *ctx = NULL;
    CHECK(lntune_open(NULL, &ctx) == LNTUNE_OK, "open (no database: built-in kernels)");
    check_errors(ctx);
    static const int64_t hs[] = {1, 17, 1000, 4096};
    int right = 0, calls = 0;
    for (int ln = 0; ln < 2; ++ln)
        for (int q = LNTUNE_TYPE_I8; q < LNTUNE_TYPE_Y_COUNT; ++q)
            for (int xt = 0; xt < LNTUNE_TYPE_COUNT; xt += 2) /* fp32, bf16 */
                for (int fused = 0; fused < 2; ++fused)
                    for (size_t h = 0; h < sizeof hs / sizeof *hs; ++h, ++calls)
                        right += check_call(ctx, ln, xt, q, fused, hs[h]);
    CHECK(right == calls, "untuned: %d of %d calls right", right, calls);
    lntune_close(ctx);

    /* A tuned kernel: RMSNorm, fp32 x, int8 y with a scale per row. */
    char db[4096], log_path[4096];
    tune_test_files(argv[1], "runtime_quant", db, log_path, sizeof db);
    enum { TH = 96, TROWS = 64 };
    lntune_shape shape = {.rows = TROWS, .H = TH};
    CHECK(lntune_types_parse("f32/i8row", &shape.types) == 0, "f32/i8row parses");
    int rc;
    lntune_tune_result r = tune_once(db, "rmsnorm", shape, LNTUNE_RIGOR_QUICK, 2, 0, &rc);
    CHECK(rc == LNTUNE_OK && r.variant[0] && strcmp(r.dtype, "f32/i8row/f32") == 0 && r.wrong == 0,
          "rmsnorm %s %dx%d tuned: %s, %.2f us", r.dtype, TROWS, TH, r.variant, r.median_ns * 1e-3);
    const int saved = log_capture_begin(log_path);
    rc = lntune_open(db, &ctx);
    int tuned_right = 0;
    for (int k = 0; rc == LNTUNE_OK && k < 4; ++k)
        tuned_right += check_call(ctx, 0, 0, LNTUNE_TYPE_I8_ROW, 0, TH);
    lntune_close(ctx);
    log_capture_end(saved);
    CHECK(tuned_right == 4, "tuned calls right (%d of 4)", tuned_right);
    const int served = log_lines(log_path, "f32/i8row/f32 H=96", ": tuned ", 0);
    CHECK(served == 1, "served by the tuned kernel (%d log lines)", served);
    if (served != 1) log_lines(log_path, "", "", 1);

    CHECK(lntune_open_flags(db, LNTUNE_OPEN_BATCH_INVARIANT, &ctx) == LNTUNE_OK,
          "a batch-invariant handle");
    check_invariance(ctx, TH);
    check_invariance(ctx, 1000); /* untuned: the float built-in, then quantized */
    lntune_close(ctx);
    return CHECK_SUMMARY();
}
