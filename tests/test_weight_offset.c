/*
 * test_weight_offset.c - the weight offset (Gemma's y = norm(x) * (offset + gamma)) through the
 * public API:
 *  - argument errors: an offset that is NaN or Inf, an offset without gamma (CUDA calls:
 *    test_cuda_dispatch, on device memory); an offset of 0 or -0 is a call without one (the
 *    struct's size: test_args);
 *  - untuned calls (no database: the built-in on fp32 offset + gamma) of both ops, fp32, fp16
 *    and bf16 x, y and gamma/beta, with and without the fused residual, offsets 1 and -0.25, at
 *    odd and vector H: every element within the verifier's bound of the float64 reference,
 *    nothing written past a row; a quantized y: the codes of the same call with fp32 offset +
 *    gamma as its gamma;
 *  - a kernel tuned with the offset (RMSNorm bf16, tuned here) serves its shape (the debug log
 *    says "tuned"), as right, while the same shape without an offset stays on the built-in;
 *    a batch-invariant handle gives every row the same bits alone and in the batch.
 *
 *   test_weight_offset SCRATCH_DIR
 */
#define _GNU_SOURCE
#include "check.h"
#include "dtypes.h"
#include "half_ref.h"
#include "lntune.h"
#include "log_lines.h"
#include "randn.h"
#include "reference.h"
#include "tune_once.h"
#include "verify.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 7, PAD = 16 };

static uint64_t rng = 0x2545f4914f6cdd1dULL; /* test_uniform's state */

static lntune_dtype public_of(int type) {
    return (lntune_dtype)(type + 1); /* fp32, fp16, bf16 */
}

/* The inputs of one call: ROWS x H rows of x (row 3 with a large mean) and, when fused, of a
 * residual (x's type); gamma about 0 (Gemma's zero-centred weights) and beta, of type pt. */
typedef struct {
    int ln, xt, yt, pt, fused;
    int64_t H;
    unsigned char *x, *res, *gamma, *beta;
    float *xf; /* what the kernel normalizes: the fp32 sum of x and residual as stored */
} inputs;

static int inputs_make(inputs *in, int ln, int xt, int yt, int pt, int fused, int64_t H) {
    *in = (inputs){ln, xt, yt, pt, fused, H, NULL, NULL, NULL, NULL, NULL};
    const size_t n = (size_t)(ROWS * H), xs = lntune_type_size(xt), ps = lntune_type_size(pt);
    in->x = malloc(n * xs);
    in->res = malloc(n * xs);
    in->gamma = malloc((size_t)H * ps);
    in->beta = malloc((size_t)H * ps);
    in->xf = malloc(n * sizeof *in->xf);
    if (!in->x || !in->res || !in->gamma || !in->beta || !in->xf) return 0;
    for (size_t i = 0; i < n; ++i) {
        const float a =
            (float)(4.0 * test_uniform(&rng) - 2.0) + (i / (size_t)H == 3 ? 500.0f : 0.0f);
        lntune_ref_store(xt, in->x, (int64_t)i, a);
        lntune_ref_store(xt, in->res, (int64_t)i, (float)(2.0 * test_uniform(&rng) - 1.0));
        in->xf[i] = (float)lntune_ref_load(xt, in->x, (int64_t)i) +
                    (fused ? (float)lntune_ref_load(xt, in->res, (int64_t)i) : 0.0f);
    }
    for (int64_t i = 0; i < H; ++i) {
        lntune_ref_store(pt, in->gamma, i, (float)(test_uniform(&rng) - 0.5));
        lntune_ref_store(pt, in->beta, i, (float)(test_uniform(&rng) - 0.5));
    }
    return 1;
}

static void inputs_free(inputs *in) {
    free(in->x), free(in->res), free(in->gamma), free(in->beta), free(in->xf);
}

/* The args of a call on in's rows [r0, r0 + rows) into y (residual_out into out when fused). */
static lntune_args args_of(const inputs *in, int64_t r0, int64_t rows, void *y, void *out,
                           float offset) {
    const size_t xs = lntune_type_size(in->xt);
    lntune_args a = {0};
    a.rows = rows;
    a.H = in->H;
    a.dtype = public_of(in->xt);
    a.y_dtype = public_of(in->yt);
    a.param_dtype = public_of(in->pt);
    a.x = in->x + (size_t)(r0 * in->H) * xs;
    a.y = y;
    a.gamma = in->gamma;
    a.beta = in->ln ? in->beta : NULL;
    if (in->fused) {
        a.residual = in->res + (size_t)(r0 * in->H) * xs;
        a.residual_out = out;
    }
    a.weight_offset = offset;
    return a;
}

static int call(lntune *ctx, int ln, const lntune_args *a) {
    return ln ? lntune_layernorm(ctx, a) : lntune_rmsnorm(ctx, a);
}

/* One call with offset; every y within the bound of the float64 reference of
 * z * (offset + gamma) + beta, nothing written past the rows. Returns 1 when right. */
static int check_call(lntune *ctx, const inputs *in, float offset) {
    const int64_t H = in->H;
    const size_t n = (size_t)(ROWS * H), ys = lntune_type_size(in->yt);
    unsigned char *y = malloc(n * ys + PAD), *out = malloc(n * lntune_type_size(in->xt));
    double *z = malloc((size_t)H * sizeof *z);
    char what[160];
    snprintf(what, sizeof what, "%s x %s y %s gamma %s%s H=%lld offset %g",
             in->ln ? "layernorm" : "rmsnorm", lntune_type_name(in->xt), lntune_type_name(in->yt),
             lntune_type_name(in->pt), in->fused ? " +residual" : "", (long long)H, (double)offset);
    int ok = y && out && z;
    if (!ok) {
        CHECK(0, "out of memory");
        goto done;
    }
    memset(y, 0x5a, n * ys + PAD);
    const lntune_args a = args_of(in, 0, ROWS, y, out, offset);
    const int rc = call(ctx, in->ln, &a);
    if (rc != LNTUNE_OK) {
        CHECK(0, "%s: rc %d %s", what, rc, lntune_errmsg(ctx));
        ok = 0;
        goto done;
    }
    for (int r = 0; ok && r < ROWS; ++r) {
        double mean, rstd;
        lntune_reference_row(in->ln ? LNTUNE_OP_LAYERNORM : LNTUNE_OP_RMSNORM, in->xf + r * H, H,
                             1e-5, z, &mean, &rstd);
        for (int64_t i = 0; ok && i < H; ++i) {
            const double g = offset + lntune_ref_load(in->pt, in->gamma, i);
            const double b = in->ln ? lntune_ref_load(in->pt, in->beta, i) : 0.0;
            const double ref = z[i] * g + b,
                         unit = (fabs(mean) * rstd + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
            const double got = lntune_ref_load(in->yt, y, r * H + i);
            double err;
            if (!lntune_verify_element(in->yt, ref, got, unit, &err)) {
                CHECK(0, "%s: y[%d][%lld] = %.9g, reference %.9g", what, r, (long long)i, got, ref);
                ok = 0;
            }
        }
    }
    for (int k = 0; ok && k < PAD; ++k)
        if (y[n * ys + (size_t)k] != 0x5a) {
            CHECK(0, "%s: wrote past the rows", what);
            ok = 0;
        }
done:
    free(y);
    free(out);
    free(z);
    return ok;
}

/* A quantized y (int8 with a scale per row): the codes and scales of the same call with fp32
 * offset + gamma (and beta) as gamma and no offset, which the offset is defined to be. */
static int check_quant(lntune *ctx, int ln, int64_t H, float offset) {
    inputs in;
    int ok = inputs_make(&in, ln, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, LNTUNE_TYPE_BF16, 0, H);
    float *g = malloc((size_t)H * sizeof *g), *b = malloc((size_t)H * sizeof *b);
    int8_t *y1 = malloc((size_t)(ROWS * H)), *y2 = malloc((size_t)(ROWS * H));
    float s1[ROWS], s2[ROWS];
    ok = ok && g && b && y1 && y2;
    for (int64_t i = 0; ok && i < H; ++i) {
        g[i] = offset + (float)lntune_ref_load(in.pt, in.gamma, i);
        b[i] = (float)lntune_ref_load(in.pt, in.beta, i);
    }
    if (ok) {
        lntune_args a = args_of(&in, 0, ROWS, y1, NULL, offset);
        a.y_dtype = LNTUNE_I8;
        a.y_scales = s1;
        int rc = call(ctx, ln, &a);
        a.y = y2;
        a.y_scales = s2;
        a.gamma = g;
        a.beta = ln ? b : NULL;
        a.param_dtype = LNTUNE_F32;
        a.weight_offset = 0.0f;
        if (rc == LNTUNE_OK) rc = call(ctx, ln, &a);
        ok = rc == LNTUNE_OK && memcmp(y1, y2, (size_t)(ROWS * H)) == 0 &&
             memcmp(s1, s2, sizeof s1) == 0;
        CHECK(ok,
              "%s bf16 -> int8 per row, H=%lld, offset %g: the codes of fp32 offset + gamma "
              "(rc %d)",
              ln ? "layernorm" : "rmsnorm", (long long)H, (double)offset, rc);
    }
    inputs_free(&in);
    free(g);
    free(b);
    free(y1);
    free(y2);
    return ok;
}

static void check_errors(lntune *ctx) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, gamma[8] = {0}, y[8], y0[8];
    lntune_args a = {0};
    a.rows = 1;
    a.H = 8;
    a.x = x;
    a.y = y;
    a.gamma = gamma;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; ++k) {
        a.weight_offset = bad[k];
        const int rc = lntune_rmsnorm(ctx, &a);
        CHECK(rc == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "weight_offset"),
              "offset %g refused: rc %d, %s", (double)bad[k], rc, lntune_errmsg(ctx));
    }
    a.weight_offset = 1.0f;
    a.gamma = NULL;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "gamma"),
          "an offset without gamma refused: %s", lntune_errmsg(ctx));
    a.gamma = gamma;
    a.device = LNTUNE_DEVICE_CPU;

    /* gamma 0: y is x * rstd * offset, so the offset shows in every element */
    a.y = y0;
    a.weight_offset = 0.0f;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_OK, "no offset: gamma 0 gives y 0");
    a.y = y;
    a.weight_offset = 1.0f;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_OK && y[7] > 1.0f && y0[7] == 0.0f,
          "offset 1 over gamma 0: y[7] = %g (x * rstd), without it %g", (double)y[7],
          (double)y0[7]);
    a.weight_offset = -0.0f;
    CHECK(lntune_rmsnorm(ctx, &a) == LNTUNE_OK && memcmp(y, y0, sizeof y) == 0,
          "offset -0 is no offset");
}

/* Rows computed alone give the bits of the whole batch (a batch-invariant handle). */
static void check_invariance(lntune *ctx, int64_t H) {
    inputs in;
    uint16_t *all = malloc((size_t)(ROWS * H) * 2), *one = malloc((size_t)(ROWS * H) * 2);
    int ok = inputs_make(&in, 0, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0, H) &&
             all && one;
    lntune_args a = args_of(&in, 0, ROWS, all, NULL, 1.0f);
    int rc = ok ? lntune_rmsnorm(ctx, &a) : LNTUNE_ENOMEM;
    for (int r = 0; rc == LNTUNE_OK && r < ROWS; ++r) {
        a = args_of(&in, r, 1, one + r * H, NULL, 1.0f);
        rc = lntune_rmsnorm(ctx, &a);
    }
    CHECK(rc == LNTUNE_OK && memcmp(all, one, (size_t)(ROWS * H) * 2) == 0,
          "batch-invariant handle, H=%lld: %d rows alone and in one call, the same bits",
          (long long)H, ROWS);
    inputs_free(&in);
    free(all), free(one);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    lntune *ctx = NULL;
    CHECK(lntune_open(NULL, &ctx) == LNTUNE_OK, "open (no database: built-in kernels)");
    check_errors(ctx);
    static const int64_t hs[] = {1, 17, 1000, 4096};
    static const float offsets[] = {1.0f, -0.25f};
    static const int tuples[][3] = {/* x, y, gamma/beta */
                                    {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32},
                                    {LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16},
                                    {LNTUNE_TYPE_F16, LNTUNE_TYPE_F16, LNTUNE_TYPE_F32},
                                    {LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, LNTUNE_TYPE_F16}};
    int right = 0, calls = 0;
    for (int ln = 0; ln < 2; ++ln)
        for (size_t t = 0; t < sizeof tuples / sizeof *tuples; ++t)
            for (int fused = 0; fused < 2; ++fused)
                for (size_t h = 0; h < sizeof hs / sizeof *hs; ++h) {
                    inputs in;
                    if (!inputs_make(&in, ln, tuples[t][0], tuples[t][1], tuples[t][2], fused,
                                     hs[h])) {
                        CHECK(0, "out of memory");
                        inputs_free(&in);
                        continue;
                    }
                    for (int o = 0; o < 2; ++o, ++calls)
                        right += check_call(ctx, &in, offsets[(h + (size_t)o) % 2]);
                    inputs_free(&in);
                }
    CHECK(right == calls, "untuned: %d of %d calls right", right, calls);
    for (int ln = 0; ln < 2; ++ln) check_quant(ctx, ln, 1000, 1.0f);
    lntune_close(ctx);

    /* A tuned kernel: RMSNorm, bf16, with the offset. */
    char db[4096], log_path[4096];
    tune_test_files(argv[1], "weight_offset", db, log_path, sizeof db);
    enum { TH = 96, TROWS = 64 };
    lntune_shape shape = {.rows = TROWS, .H = TH, .affine = LNTUNE_AFFINE_OFFSET};
    CHECK(lntune_types_parse("bf16", &shape.types) == 0, "bf16 parses");
    int rc;
    lntune_tune_result r = tune_once(db, "rmsnorm", shape, LNTUNE_RIGOR_QUICK, 2, 0, &rc);
    CHECK(rc == LNTUNE_OK && strstr(r.variant, "affine=offset") &&
              strcmp(r.op, "rmsnorm+offset") == 0 && r.wrong == 0,
          "%s %s %dx%d tuned: %s, %.2f us", r.op, r.dtype, TROWS, TH, r.variant,
          r.median_ns * 1e-3);
    const int saved = log_capture_begin(log_path);
    rc = lntune_open(db, &ctx);
    int tuned_right = 0;
    inputs in;
    if (inputs_make(&in, 0, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0, TH))
        for (int k = 0; rc == LNTUNE_OK && k < 4; ++k)
            tuned_right += check_call(ctx, &in, k % 2 ? 1.0f : -0.25f);
    const int plain_right = rc == LNTUNE_OK && check_call(ctx, &in, 0.0f);
    inputs_free(&in);
    lntune_close(ctx);
    log_capture_end(saved);
    CHECK(tuned_right == 4 && plain_right, "tuned calls right (%d of 4), without offset %d",
          tuned_right, plain_right);
    const int served = log_lines(log_path, "rmsnorm+offset bf16 H=96", ": tuned ", 0);
    const int plain = log_lines(log_path, "rmsnorm bf16 H=96", ": built-in", 0);
    CHECK(served == 1 && plain == 1,
          "the offset's calls by the tuned kernel (%d log lines), the plain call's by the "
          "built-in (%d)",
          served, plain);
    if (served != 1 || plain != 1) log_lines(log_path, "", "", 1);

    CHECK(lntune_open_flags(db, LNTUNE_OPEN_BATCH_INVARIANT, &ctx) == LNTUNE_OK,
          "a batch-invariant handle");
    check_invariance(ctx, TH);
    check_invariance(ctx, 1000); /* untuned: the built-in on fp32 offset + gamma */
    lntune_close(ctx);
    return CHECK_SUMMARY();
}
