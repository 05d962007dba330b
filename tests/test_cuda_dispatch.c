/*
 * test_cuda_dispatch.c - lntune_layernorm and lntune_rmsnorm on device memory give the float64
 * reference's answer on a real GPU, through the public API only.
 *
 * Built-in kernels (a database that does not exist): H in {1, 17, 768, 4096, 4097, 65536},
 * rows {1, 8, 300}, with and without gamma/beta, contiguous rows and x/y misaligned by 4 bytes
 * with row strides larger than H, on a stream the test created; y (with the gaps between rows
 * and a guard zone after it) and mean/rstd poisoned before each call, so an element never
 * written or written where it should not be is caught.
 *
 * Tuned kernels: one variant compiled here with NVRTC (cubin + PTX) is stored in a temporary
 * database as this GPU's best for H = 4096 and H = 65536; the handle must serve H = 4096 with
 * it (LNTUNE_LOG=debug says "tuned") and give the right answer, and H = 65536, beyond the
 * variant's max_h, with the built-in.
 *
 * bf16 Add & Norm: a bf16 LayerNorm variant fused with residual_out, compiled the same way, is
 * this GPU's best for H = 1024; the handle must serve a bf16 call with a residual and
 * residual_out at H = 1024 with it (y within the verifier's bf16 bound of the float64 reference
 * of the fp32 sum, residual_out that sum rounded to bf16 bit for bit), and H = 1000, 1 and 4097,
 * which nobody tuned, with the typed built-in compiled for bf16 at first use (the log names it).
 * With the stand-in driver (cuda_dispatch_mock) MOCK_CUDA_TYPES tells it the types.
 *
 * Quantized y and weight offset: an RMSNorm variant with int8 codes and a scale per row and
 * Gemma's offset (affine=offset) is this GPU's best for H = 1024 (its symbol names the op, for
 * the stand-in); the handle must serve such a call (weight_offset 1, y_scales given) with it,
 * codes and scales within the verifier's bounds of the float64 reference of y = z * (1 +
 * gamma), nothing written past the rows' scales. At H = 1000, 1 and 4097, which nobody tuned,
 * the typed built-in of int8 per row + offset serves it (compiled at first use; the log names
 * it), and so does that of a LayerNorm with fp8 e4m3 codes and a static scale, with gamma and
 * without the offset. Without NVRTC the untuned call is refused with a clear message.
 *
 * Exits 77 (skipped) when lntune_cuda_open finds no GPU. Labelled `cuda` in ctest.
 */
#include "best_record.h"
#include "cuda_driver.h"
#include "cuda_fingerprint.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "half_ref.h"
#include "hardware.h"
#include "lntune.h"
#include "nvrtc.h"
#include "reference.h"
#include "tuning_db.h"
#include "verify.h"
#include "verify_quant.h"

#include "device_test.h"
#include "log_lines.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int64_t test_h[] = {1, 17, 768, 4096, 4097, 65536};
static const int64_t test_rows[] = {1, 8, 300};
enum { GUARD = 64, PAD = 5 };               /* floats after y; extra floats per row */
static const uint32_t POISON = 0x7fa5a5a5u; /* a NaN no kernel computes */

static void *stream;
static int failures;

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

typedef struct {
    uint64_t x, y, gamma, beta, mean, rstd; /* device buffers */
    size_t floats;                          /* of x and y each */
} buffers;

/*
 * One call and its check; 0 when right. Strided: x and y start 4 bytes past a 256-byte boundary,
 * with row strides H + PAD and H + PAD + 2. stats: mean and rstd are asked for too.
 */
static int check_call(lntune *ctx, const buffers *b, lntune_op op, int64_t H, int64_t rows,
                      int affine, int strided, int stats) {
    const int64_t xs = strided ? H + PAD : H, ys = strided ? H + PAD + 2 : H;
    const int64_t off = strided ? 1 : 0; /* floats: 4 bytes past the 256-byte aligned buffer */
    const size_t xn = (size_t)((rows - 1) * xs + H), yn = (size_t)((rows - 1) * ys + H);
    if (off + yn + GUARD > b->floats || off + xn > b->floats) {
        printf("FAIL: test buffers too small\n");
        return 1;
    }
    float *x = malloc(xn * sizeof *x), *y = malloc((yn + GUARD) * sizeof *y);
    float *gamma = malloc((size_t)H * sizeof *gamma), *beta = malloc((size_t)H * sizeof *beta);
    float *mean = malloc((size_t)rows * sizeof *mean), *rstd = malloc((size_t)rows * sizeof *rstd);
    double *z = malloc((size_t)H * sizeof *z);
    if (!x || !y || !gamma || !beta || !mean || !rstd || !z) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    uint64_t seed = (uint64_t)(H * 1000003 + rows * 31 + affine * 7 + strided * 3 + op);
    /* Rows alternate a zero mean and a large one (1000 + noise): cancellation must not hurt. */
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < H; ++i)
            x[r * xs + i] = (r % 2 ? 1000.0f : 0.0f) + next_random(&seed);
    for (int64_t i = 0; i < H; ++i) {
        gamma[i] = 1.0f + 0.5f * next_random(&seed);
        beta[i] = next_random(&seed);
    }
    const uint64_t dx = b->x + (uint64_t)off * 4, dy = b->y + (uint64_t)off * 4;
    DEVICE(lntune_cuda_htod(cu, dx, x, xn * 4));
    DEVICE(lntune_cuda_fill32(cu, b->y, POISON, b->floats));
    DEVICE(lntune_cuda_fill32(cu, b->mean, POISON, (size_t)rows));
    DEVICE(lntune_cuda_fill32(cu, b->rstd, POISON, (size_t)rows));
    if (affine) {
        DEVICE(lntune_cuda_htod(cu, b->gamma, gamma, (size_t)H * 4));
        if (op == LNTUNE_OP_LAYERNORM) DEVICE(lntune_cuda_htod(cu, b->beta, beta, (size_t)H * 4));
    }
    /* The copies and fills ran on the legacy stream, which a non-blocking stream does not wait
     * for: finish them before the call. */
    DEVICE(lntune_cuda_sync(cu));

    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows;
    a.H = H;
    a.x = (const void *)(uintptr_t)dx;
    a.y = (void *)(uintptr_t)dy;
    a.x_stride = strided ? xs : 0;
    a.y_stride = strided ? ys : 0;
    a.gamma = affine ? (const void *)(uintptr_t)b->gamma : NULL;
    a.beta = affine && op == LNTUNE_OP_LAYERNORM ? (const void *)(uintptr_t)b->beta : NULL;
    a.mean = stats ? (float *)(uintptr_t)b->mean : NULL;
    a.rstd = stats ? (float *)(uintptr_t)b->rstd : NULL;
    a.device = LNTUNE_DEVICE_CUDA;
    a.device_index = 0;
    a.stream = stream;
    int rc = op == LNTUNE_OP_LAYERNORM ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
    char what[160];
    snprintf(what, sizeof what, "%s H=%lld rows=%lld %s %s%s", lntune_op_name(op), (long long)H,
             (long long)rows, affine ? "gamma/beta" : "plain",
             strided ? "misaligned+strided" : "contiguous", stats ? " mean/rstd" : "");
    int bad = 0;
    if (rc != LNTUNE_OK) {
        printf("FAIL %s: rc %d: %s\n", what, rc, lntune_errmsg(ctx));
        bad = 1;
    } else {
        DEVICE(lntune_cuda_stream_sync(cu, stream));
        DEVICE(lntune_cuda_dtoh(cu, y, dy, (yn + GUARD) * 4));
        DEVICE(lntune_cuda_dtoh(cu, mean, b->mean, (size_t)rows * 4));
        DEVICE(lntune_cuda_dtoh(cu, rstd, b->rstd, (size_t)rows * 4));
        double worst = 0.0;
        for (int64_t r = 0; r < rows && !bad; ++r) {
            double m, s;
            lntune_reference_row(op, x + r * xs, H, 1e-5, z, &m, &s);
            for (int64_t i = 0; i < H && !bad; ++i) {
                const double g = affine ? gamma[i] : 1.0;
                const double bt = affine && op == LNTUNE_OP_LAYERNORM ? beta[i] : 0.0;
                const double ref = z[i] * g + bt;
                /* verify.h's error unit and tolerance */
                const double unit = (fabs(m) * s + fabs(z[i]) + 1.0) * fabs(g) + fabs(bt);
                const double err = fabs((double)y[r * ys + i] - ref) / unit;
                if (!(err <= LNTUNE_VERIFY_TOLERANCE)) {
                    printf("FAIL %s: y[%lld][%lld] = %.9g, reference %.9g\n", what, (long long)r,
                           (long long)i, (double)y[r * ys + i], ref);
                    bad = 1;
                }
                if (err > worst) worst = err;
            }
            for (int64_t i = H; i < ys && r + 1 < rows && !bad; ++i)
                if (bits(y[r * ys + i]) != POISON) {
                    printf("FAIL %s: wrote the gap after row %lld\n", what, (long long)r);
                    bad = 1;
                }
            if (stats && !bad &&
                (fabs(mean[r] - m) > 1e-5 * (fabs(m) + 1.0) || fabs(rstd[r] - s) > 1e-5 * s)) {
                printf("FAIL %s: row %lld mean %.9g rstd %.9g, reference %.9g %.9g\n", what,
                       (long long)r, (double)mean[r], (double)rstd[r], m, s);
                bad = 1;
            }
        }
        for (size_t i = yn; i < yn + GUARD && !bad; ++i)
            if (bits(y[i]) != POISON) {
                printf("FAIL %s: wrote past the end of y\n", what);
                bad = 1;
            }
        if (!bad) printf("ok: %s, max error %.3g units of 2^-24\n", what, worst * (1 << 24));
    }
    free(x);
    free(y);
    free(gamma);
    free(beta);
    free(mean);
    free(rstd);
    free(z);
    failures += bad;
    return bad;
}

/* Runs the whole built-in suite on ctx. */
static void builtin_suite(lntune *ctx, const buffers *b) {
    for (int op = 0; op < 2; ++op)
        for (size_t h = 0; h < sizeof test_h / sizeof test_h[0]; ++h)
            for (size_t r = 0; r < sizeof test_rows / sizeof test_rows[0]; ++r)
                for (int affine = 0; affine < 2; ++affine)
                    for (int strided = 0; strided < 2; ++strided)
                        check_call(ctx, b, (lntune_op)op, test_h[h], test_rows[r], affine, strided,
                                   affine == strided /* half of the cases ask for mean/rstd */);
}

static const char tuned_variant[] =
    "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=smem,stats=welford,h=runtime,"
    "affine=fused";

/*
 * Compiles variant of op for shape (its types and fusion) and stores it in db_path as this GPU's
 * best of (op_key, dtype) at each of hs (rows 64, gamma), artifact "test-" symbol. Returns 0, 1
 * on a failure (printed), -1 when there is no NVRTC to compile it.
 */
static int store_tuned(const char *db_path, const lntune_cuda_info *info, const char *op,
                       const char *op_key, const char *dtype, const lntune_shape *shape,
                       const char *variant, const char *symbol, const int64_t *hs, int nh) {
    lntune_gen *g = NULL;
    lntune_nvrtc *nv = NULL;
    if (lntune_gen_open(NULL, &g) || lntune_gen_set_cuda_arch(g, info->sm)) {
        printf("FAIL gen: %s\n", lntune_gen_errmsg(g));
        return 1;
    }
    if (lntune_nvrtc_open(&nv) != LNTUNE_OK) {
        printf("skipped, the tuned cases: no NVRTC to compile their kernels: %s\n",
               lntune_nvrtc_errmsg(nv));
        lntune_nvrtc_close(nv);
        lntune_gen_close(g);
        return -1;
    }
    lntune_source src;
    if (lntune_gen_emit(g, "cuda", op, variant, shape, symbol, &src)) {
        printf("FAIL emit %s: %s\n", variant, lntune_gen_errmsg(g));
        return 1;
    }
    lntune_nvrtc_output out;
    memset(&out, 0, sizeof out);
    if (lntune_nvrtc_compile(nv, src.text, "tuned.cu", info->sm, LNTUNE_NVRTC_CUBIN, NULL, &out)) {
        printf("FAIL compile: %s\n", out.message);
        return 1;
    }
    /* The fingerprint the runtime computes from the same driver facts. */
    lntune_gpu_info gi;
    lntune_cuda_gpu_info(info, &gi);
    lntune_db *db = NULL;
    int64_t hw = 0;
    char key_text[96];
    snprintf(key_text, sizeof key_text, "test-%s", symbol);
    int rc = lntune_db_open(db_path, 0, &db);
    if (rc == LNTUNE_OK) rc = lntune_db_put_gpu_hardware(db, &gi, lntune_nvrtc_describe(nv), &hw);
    lntune_artifact art = {key_text, src.text, "nvrtc", "",      symbol, out.data,
                           out.len,  NULL,     0,       out.ptx, NULL};
    if (rc == LNTUNE_OK) rc = lntune_db_put_artifact(db, &art);
    for (int i = 0; i < nh && rc == LNTUNE_OK; ++i) {
        lntune_db_key key = {hw, "cuda", op_key, dtype, hs[i], 64, 1};
        lntune_best best = test_best(variant, key_text, 1, 64, 1000.0, 0, 0, 0, 0);
        rc = lntune_db_set_best(db, &key, &best);
    }
    if (rc != LNTUNE_OK) printf("FAIL database: %s\n", lntune_db_errmsg(db));
    lntune_db_close(db);
    lntune_nvrtc_output_free(&out);
    lntune_source_free(&src);
    lntune_nvrtc_close(nv);
    lntune_gen_close(g);
    return rc != LNTUNE_OK;
}

/* db_path: this GPU, one tuned LayerNorm artifact, best for H = 4096 and 65536. */
static int make_tuned_db(const char *db_path, const lntune_cuda_info *info) {
    const lntune_shape shape = {.rows = 64, .H = 4096};
    const int64_t hs[2] = {4096, 65536};
    return store_tuned(db_path, info, "layernorm", "layernorm", "f32", &shape, tuned_variant,
                       "lntune_test_tuned", hs, 2);
}

static const char bf16_variant[] =
    "layout=block,tpr=32,cluster=1,block=128,pack=8,cache=smem,stats=twopass,h=runtime,"
    "affine=fused";

/* db_path: a bf16 LayerNorm+residual_out variant as this GPU's best for H. */
static int make_bf16_db(const char *db_path, const lntune_cuda_info *info, int64_t H) {
    lntune_shape shape = {.rows = 64, .H = H, .fusion = LNTUNE_FUSION_RESIDUAL_OUT};
    lntune_types_parse("bf16", &shape.types);
    return store_tuned(db_path, info, "layernorm", "layernorm+residual_out", "bf16", &shape,
                       bf16_variant, "lntune_test_bf16", &H, 1);
}

/* A bf16 Add & Norm call through the API at H, on freshly drawn inputs; returns the call's code
 * and counts the elements that fail (y beyond its bound, residual_out not the rounded sum). */
static int bf16_call(lntune *ctx, int64_t H, int64_t rows, int *bad) {
    const size_t n = (size_t)(rows * H);
    uint16_t *hx = malloc(n * 2), *hr = malloc(n * 2), *hy = malloc(n * 2), *ho = malloc(n * 2);
    uint16_t *hg = malloc((size_t)H * 2), *hb = malloc((size_t)H * 2);
    float *s = malloc((size_t)H * sizeof *s);
    double *z = malloc((size_t)H * sizeof *z);
    uint64_t seed = 0x5eed;
    for (size_t i = 0; i < n; ++i) {
        lntune_ref_store(LNTUNE_TYPE_BF16, hx, (int64_t)i, 3.0f + next_random(&seed));
        lntune_ref_store(LNTUNE_TYPE_BF16, hr, (int64_t)i, next_random(&seed));
    }
    for (int64_t i = 0; i < H; ++i) {
        lntune_ref_store(LNTUNE_TYPE_BF16, hg, i, 1.0f + 0.5f * next_random(&seed));
        lntune_ref_store(LNTUNE_TYPE_BF16, hb, i, next_random(&seed));
    }
    uint64_t dx, dr, dy, dout, dg, db;
    DEVICE(lntune_cuda_alloc(cu, n * 2, &dx));
    DEVICE(lntune_cuda_alloc(cu, n * 2, &dr));
    DEVICE(lntune_cuda_alloc(cu, n * 2, &dy));
    DEVICE(lntune_cuda_alloc(cu, n * 2, &dout));
    DEVICE(lntune_cuda_alloc(cu, (size_t)H * 2, &dg));
    DEVICE(lntune_cuda_alloc(cu, (size_t)H * 2, &db));
    DEVICE(lntune_cuda_htod(cu, dx, hx, n * 2));
    DEVICE(lntune_cuda_htod(cu, dr, hr, n * 2));
    DEVICE(lntune_cuda_htod(cu, dg, hg, (size_t)H * 2));
    DEVICE(lntune_cuda_htod(cu, db, hb, (size_t)H * 2));
    DEVICE(lntune_cuda_fill32(cu, dy, 0x7f857f85u, n / 2)); /* bf16 signalling NaNs */
    DEVICE(lntune_cuda_fill32(cu, dout, 0x7f857f85u, n / 2));
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.dtype = LNTUNE_BF16;
    a.x = (const void *)(uintptr_t)dx, a.y = (void *)(uintptr_t)dy;
    a.residual = (const void *)(uintptr_t)dr, a.residual_out = (void *)(uintptr_t)dout;
    a.gamma = (const void *)(uintptr_t)dg, a.beta = (const void *)(uintptr_t)db;
    a.device = LNTUNE_DEVICE_CUDA, a.stream = stream;
    const int rc = lntune_layernorm(ctx, &a);
    *bad = 0;
    if (rc == LNTUNE_OK) {
        DEVICE(lntune_cuda_stream_sync(cu, stream));
        DEVICE(lntune_cuda_dtoh(cu, hy, dy, n * 2));
        DEVICE(lntune_cuda_dtoh(cu, ho, dout, n * 2));
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < H; ++i) { /* the one fp32 addition of the widened inputs */
                s[i] = (float)lntune_ref_load(LNTUNE_TYPE_BF16, hx, r * H + i) +
                       (float)lntune_ref_load(LNTUNE_TYPE_BF16, hr, r * H + i);
                uint16_t want;
                lntune_ref_store(LNTUNE_TYPE_BF16, &want, 0, s[i]);
                *bad += ho[r * H + i] != want;
            }
            double mean, rstd;
            lntune_reference_row(LNTUNE_OP_LAYERNORM, s, H, 1e-5, z, &mean, &rstd);
            for (int64_t i = 0; i < H; ++i) {
                const double g = lntune_ref_load(LNTUNE_TYPE_BF16, hg, i);
                const double b = lntune_ref_load(LNTUNE_TYPE_BF16, hb, i);
                const double unit = (fabs(mean) * rstd + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
                double err;
                *bad += !lntune_verify_element(LNTUNE_TYPE_BF16, z[i] * g + b,
                                               lntune_ref_load(LNTUNE_TYPE_BF16, hy, r * H + i),
                                               unit, &err);
            }
        }
    }
    lntune_cuda_free(cu, dx), lntune_cuda_free(cu, dr), lntune_cuda_free(cu, dy);
    lntune_cuda_free(cu, dout), lntune_cuda_free(cu, dg), lntune_cuda_free(cu, db);
    free(hx), free(hr), free(hy), free(ho), free(hg), free(hb), free(s), free(z);
    return rc;
}

static void bf16_suite(const char *scratch, const lntune_cuda_info *info) {
    char path[4096], log_path[4096];
    snprintf(path, sizeof path, "%s/cuda_dispatch_bf16.db", scratch);
    snprintf(log_path, sizeof log_path, "%s/cuda_dispatch_bf16.log", scratch);
    unlink(path);
    lntune *ctx = NULL;
    if (make_bf16_db(path, info, 1024) != 0) {
        printf("FAIL: the bf16 database\n");
        ++failures;
        return;
    }
    setenv("MOCK_CUDA_TYPES", "bf16", 1); /* the stand-in's kernels; a real GPU ignores it */
    const int saved_stderr = log_capture_begin(log_path);
    if (saved_stderr < 0) return;
    /* H = 1024 tuned; 1000, 1 and 4097 never tuned: the typed built-in, compiled for bf16. */
    static const int64_t hs[] = {1024, 1000, 1, 4097}, rows[] = {64, 8, 5, 3};
    int rcs[4] = {LNTUNE_ERROR, LNTUNE_ERROR, LNTUNE_ERROR, LNTUNE_ERROR}, bad[4] = {0};
    if (lntune_open(path, &ctx) == LNTUNE_OK)
        for (int i = 0; i < 4; ++i) rcs[i] = bf16_call(ctx, hs[i], rows[i], &bad[i]);
    log_capture_end(saved_stderr);
    unsetenv("MOCK_CUDA_TYPES");
    for (int i = 0; i < 4; ++i) {
        char at[64];
        snprintf(at, sizeof at, "H=%lld rows=%lld ", (long long)hs[i], (long long)rows[i]);
        const int served = log_lines(
            log_path, at,
            i == 0 ? "on CUDA device 0: tuned"
                   : "built-in lntune_builtin_cuda_layernorm_affine_typed_residual_out/bf16",
            0);
        const int ok = rcs[i] == LNTUNE_OK && bad[i] == 0 && served == 1;
        printf("%s: bf16 Add & Norm at H = %lld, %s: rc %d (%s), %d element(s) wrong, %d log "
               "line\n",
               ok ? "ok" : "FAIL", (long long)hs[i], i == 0 ? "tuned" : "never tuned", rcs[i],
               rcs[i] && ctx ? lntune_errmsg(ctx) : "-", bad[i], served);
        failures += !ok;
    }
    if (failures) log_lines(log_path, "", "", 1);
    lntune_close(ctx);
    /* Without NVRTC an untuned bf16 call has no kernel: a clear error, no crash. */
    setenv("LNTUNE_NVRTC", "/nonexistent/libnvrtc.so", 1);
    int bad_none = 0, rc = LNTUNE_ERROR;
    if (lntune_open(path, &ctx) == LNTUNE_OK) rc = bf16_call(ctx, 1000, 8, &bad_none);
    unsetenv("LNTUNE_NVRTC");
    const char *msg = ctx ? lntune_errmsg(ctx) : "";
    const int refused =
        rc == LNTUNE_ENODEVICE && strstr(msg, "libnvrtc") && strstr(msg, "lntune --target cuda");
    printf("%s: bf16 at H = 1000 without NVRTC: rc %d, %s\n", refused ? "ok" : "FAIL", rc, msg);
    failures += !refused;
    lntune_close(ctx);
    unlink(path);
}

static const char quant_variant[] =
    "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=smem,stats=sumsq,h=runtime,"
    "affine=offset";

/* A call of op with fp32 x and gamma and y of quantized type ytype (a static scale, or one per
 * row), weight offset 1 or none, at H through the API, on freshly drawn inputs; returns the
 * call's code and counts the rows that fail. */
static int quant_call(lntune *ctx, lntune_op op, int ytype, int offset, int64_t H, int64_t rows,
                      int *bad) {
    const size_t n = (size_t)(rows * H);
    const int row_scaled = lntune_type_row_scaled(ytype);
    const float scale = row_scaled ? 0.0f : lntune_quant_test_scale(ytype);
    float *hx = malloc(n * 4), *hg = malloc((size_t)H * 4), *s = malloc((size_t)H * 4);
    float *scales = malloc(((size_t)rows + 1) * 4);
    unsigned char *hy = malloc(n + 64);
    double *z = malloc((size_t)H * 8), *yref = malloc((size_t)H * 8), *unit = malloc((size_t)H * 8);
    uint64_t seed = 0x9e37 + (uint64_t)H;
    for (size_t i = 0; i < n; ++i) hx[i] = 2.0f * next_random(&seed) + (op ? 0.0f : 100.0f);
    for (int64_t i = 0; i < H; ++i) hg[i] = 0.5f * next_random(&seed);
    uint64_t dx, dy, dg, ds;
    DEVICE(lntune_cuda_alloc(cu, n * 4, &dx));
    const size_t ywords = (n + 64 + 3) / 4; /* the codes and a guard of at least 64 bytes */
    DEVICE(lntune_cuda_alloc(cu, ywords * 4, &dy));
    DEVICE(lntune_cuda_alloc(cu, (size_t)H * 4, &dg));
    DEVICE(lntune_cuda_alloc(cu, ((size_t)rows + 1) * 4, &ds));
    DEVICE(lntune_cuda_htod(cu, dx, hx, n * 4));
    DEVICE(lntune_cuda_htod(cu, dg, hg, (size_t)H * 4));
    DEVICE(lntune_cuda_fill32(cu, dy, 0xa5a5a5a5u, ywords));
    DEVICE(lntune_cuda_fill32(cu, ds, POISON, (size_t)rows + 1));
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H,
    a.y_dtype =
        ytype == LNTUNE_TYPE_I8 || ytype == LNTUNE_TYPE_I8_ROW ? LNTUNE_I8 : LNTUNE_FP8_E4M3;
    a.x = (const void *)(uintptr_t)dx, a.y = (void *)(uintptr_t)dy;
    a.gamma = (const void *)(uintptr_t)dg, a.weight_offset = offset ? 1.0f : 0.0f;
    if (row_scaled)
        a.y_scales = (float *)(uintptr_t)ds;
    else
        a.y_scale = scale;
    a.device = LNTUNE_DEVICE_CUDA, a.stream = stream;
    const int rc = op ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
    *bad = 0;
    if (rc == LNTUNE_OK) {
        DEVICE(lntune_cuda_stream_sync(cu, stream));
        DEVICE(lntune_cuda_dtoh(cu, hy, dy, n + 64));
        DEVICE(lntune_cuda_dtoh(cu, scales, ds, ((size_t)rows + 1) * 4));
        /* past the last row's scale (all of them, with a static scale), past the last code */
        for (int64_t r = row_scaled ? rows : 0; r <= rows; ++r) *bad += bits(scales[r]) != POISON;
        for (size_t i = n; i < n + 64; ++i) *bad += hy[i] != 0xa5;
        for (int64_t r = 0; r < rows; ++r) {
            double mean, rstd;
            for (int64_t i = 0; i < H; ++i) s[i] = hx[r * H + i];
            lntune_reference_row(op, s, H, 1e-5, z, &mean, &rstd);
            for (int64_t i = 0; i < H; ++i) { /* gamma + 1 in fp32, as the kernels add it */
                const double g = (double)(offset ? hg[i] + 1.0f : hg[i]);
                yref[i] = z[i] * g;
                unit[i] = (fabs(z[i]) + 1.0) * fabs(g);
            }
            char msg[400];
            if (!lntune_quant_check_row(ytype, yref, unit, H, hy + r * H, scale,
                                        row_scaled ? scales + r : NULL, 0, msg, sizeof msg)) {
                if (*bad < 3) printf("  row %lld: %s\n", (long long)r, msg);
                ++*bad;
            }
        }
    }
    lntune_cuda_free(cu, dx), lntune_cuda_free(cu, dy), lntune_cuda_free(cu, dg);
    lntune_cuda_free(cu, ds);
    free(hx), free(hg), free(s), free(scales), free(hy), free(z), free(yref), free(unit);
    return rc;
}

/* The quant suite's calls: the op, y, offset and types the stand-in is told, the H and rows, and
 * who must serve it (a log line's text). */
typedef struct {
    lntune_op op;
    int ytype, offset;
    const char *types;
    int64_t H, rows;
    const char *served_by;
} quant_case;

static const quant_case quant_cases[] = {
    {LNTUNE_OP_RMSNORM, LNTUNE_TYPE_I8_ROW, 1, "f32/i8row", 1024, 64, "on CUDA device 0: tuned"},
    {LNTUNE_OP_RMSNORM, LNTUNE_TYPE_I8_ROW, 1, "f32/i8row", 1000, 8,
     "built-in lntune_builtin_cuda_rmsnorm_offset_i8row/f32/i8row/f32"},
    {LNTUNE_OP_RMSNORM, LNTUNE_TYPE_I8_ROW, 1, "f32/i8row", 1, 5,
     "built-in lntune_builtin_cuda_rmsnorm_offset_i8row/f32/i8row/f32"},
    {LNTUNE_OP_RMSNORM, LNTUNE_TYPE_I8_ROW, 1, "f32/i8row", 4097, 3,
     "built-in lntune_builtin_cuda_rmsnorm_offset_i8row/f32/i8row/f32"},
    {LNTUNE_OP_LAYERNORM, LNTUNE_TYPE_E4M3, 0, "f32/e4m3", 1000, 8,
     "built-in lntune_builtin_cuda_layernorm_affine_e4m3/f32/e4m3/f32"},
    {LNTUNE_OP_LAYERNORM, LNTUNE_TYPE_E4M3, 0, "f32/e4m3", 4097, 3,
     "built-in lntune_builtin_cuda_layernorm_affine_e4m3/f32/e4m3/f32"},
};
enum { QUANT_CASES = sizeof quant_cases / sizeof quant_cases[0] };

static void quant_suite(const char *scratch, const lntune_cuda_info *info) {
    char path[4096], log_path[4096], dtype[32];
    snprintf(path, sizeof path, "%s/cuda_dispatch_quant.db", scratch);
    snprintf(log_path, sizeof log_path, "%s/cuda_dispatch_quant.log", scratch);
    unlink(path);
    lntune_shape shape = {.rows = 64, .H = 1024, .affine = LNTUNE_AFFINE_OFFSET};
    lntune_types_parse("f32/i8row", &shape.types);
    lntune_types_format(shape.types, dtype, sizeof dtype); /* the key's text */
    const int64_t H = 1024;
    if (store_tuned(path, info, "rmsnorm", "rmsnorm+offset", dtype, &shape, quant_variant,
                    "lntune_test_quant_rmsnorm", &H, 1) != 0) {
        printf("FAIL: the quantized-y database\n");
        ++failures;
        return;
    }
    const int saved_stderr = log_capture_begin(log_path);
    if (saved_stderr < 0) return;
    lntune *ctx = NULL;
    int rcs[QUANT_CASES], bad[QUANT_CASES] = {0};
    for (int i = 0; i < QUANT_CASES; ++i) rcs[i] = LNTUNE_ERROR;
    if (lntune_open(path, &ctx) == LNTUNE_OK)
        for (int i = 0; i < QUANT_CASES; ++i) {
            const quant_case *c = &quant_cases[i];
            setenv("MOCK_CUDA_TYPES", c->types, 1); /* the stand-in's kernels; a GPU ignores it */
            rcs[i] = quant_call(ctx, c->op, c->ytype, c->offset, c->H, c->rows, &bad[i]);
        }
    log_capture_end(saved_stderr);
    unsetenv("MOCK_CUDA_TYPES");
    int failed = 0;
    for (int i = 0; i < QUANT_CASES; ++i) {
        const quant_case *c = &quant_cases[i];
        char at[64];
        snprintf(at, sizeof at, "H=%lld rows=%lld ", (long long)c->H, (long long)c->rows);
        const int served = log_lines(log_path, at, c->served_by, 0);
        const int ok = rcs[i] == LNTUNE_OK && bad[i] == 0 && served == 1;
        printf("%s: %s %s%s at H = %lld: rc %d (%s), %d row(s) wrong, %d log line\n",
               ok ? "ok" : "FAIL", c->op ? "rmsnorm" : "layernorm", lntune_type_name(c->ytype),
               c->offset ? " + offset" : "", (long long)c->H, rcs[i],
               rcs[i] && ctx ? lntune_errmsg(ctx) : "-", bad[i], served);
        failed += !ok;
    }
    failures += failed;
    if (failed) log_lines(log_path, "", "", 1);
    lntune_close(ctx);
    /* Without NVRTC an untuned quantized call has no kernel: a clear error, no crash. */
    setenv("LNTUNE_NVRTC", "/nonexistent/libnvrtc.so", 1);
    setenv("MOCK_CUDA_TYPES", "f32/i8row", 1);
    int bad_none = 0, rc = LNTUNE_ERROR;
    ctx = NULL;
    if (lntune_open(path, &ctx) == LNTUNE_OK)
        rc = quant_call(ctx, LNTUNE_OP_RMSNORM, LNTUNE_TYPE_I8_ROW, 1, 1000, 8, &bad_none);
    unsetenv("LNTUNE_NVRTC");
    unsetenv("MOCK_CUDA_TYPES");
    const char *msg = ctx ? lntune_errmsg(ctx) : "";
    const int refused = rc == LNTUNE_ENODEVICE && strstr(msg, "libnvrtc") &&
                        strstr(msg, "lntune --target cuda") && strstr(msg, "--weight-offset");
    printf("%s: int8 per row + offset at H = 1000 without NVRTC: rc %d, %s\n",
           refused ? "ok" : "FAIL", rc, msg);
    failures += !refused;
    lntune_close(ctx);
    unlink(path);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *scratch = argc > 1 ? argv[1] : "/tmp";
    int rc = device_test_open();
    if (rc != 0) return rc;
    const lntune_cuda_info *info = lntune_cuda_get_info(cu);
    printf("%s, sm_%d, %d SMs, driver %d\n", info->name, info->sm, info->multiprocessors,
           info->driver_version);
    buffers b;
    b.floats = (size_t)299 * (65536 + PAD + 2) + 65536 + GUARD + 16;
    DEVICE(lntune_cuda_alloc(cu, b.floats * 4, &b.x));
    DEVICE(lntune_cuda_alloc(cu, b.floats * 4, &b.y));
    DEVICE(lntune_cuda_alloc(cu, 65536 * 4, &b.gamma));
    DEVICE(lntune_cuda_alloc(cu, 65536 * 4, &b.beta));
    DEVICE(lntune_cuda_alloc(cu, 300 * 4, &b.mean));
    DEVICE(lntune_cuda_alloc(cu, 300 * 4, &b.rstd));
    DEVICE(lntune_cuda_stream_create(cu, &stream));

    /* Built-in kernels: no database. */
    char path[4096];
    snprintf(path, sizeof path, "%s/cuda_dispatch_none.db", scratch);
    unlink(path);
    lntune *ctx = NULL;
    if ((rc = lntune_open(path, &ctx)) != LNTUNE_OK) {
        printf("FAIL open: %s\n", lntune_errstr(rc));
        return 1;
    }
    builtin_suite(ctx, &b);
    /* A device that does not exist: a message, no crash; the good device still works after. */
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1;
    a.H = 4;
    a.x = (const void *)(uintptr_t)b.x;
    a.y = (void *)(uintptr_t)b.y;
    a.device = LNTUNE_DEVICE_CUDA;
    a.device_index = 63;
    rc = lntune_layernorm(ctx, &a);
    printf("%s: device_index 63: rc %d, %s\n", rc == LNTUNE_ENODEVICE ? "ok" : "FAIL", rc,
           lntune_errmsg(ctx));
    failures += rc != LNTUNE_ENODEVICE;
    check_call(ctx, &b, LNTUNE_OP_LAYERNORM, 768, 8, 1, 1, 1);
    lntune_close(ctx);
    unlink(path);

    /* Tuned: the handle logs (LNTUNE_LOG=debug, stderr) to a file we read back. */
    snprintf(path, sizeof path, "%s/cuda_dispatch_tuned.db", scratch);
    unlink(path);
    if ((rc = make_tuned_db(path, info)) != 0) {
        lntune_cuda_close(cu);
        return rc < 0 ? (failures ? 1 : 0) : 1;
    }
    char log_path[4096];
    snprintf(log_path, sizeof log_path, "%s/cuda_dispatch.log", scratch);
    const int saved_stderr = log_capture_begin(log_path);
    if (saved_stderr < 0) return 1;
    rc = lntune_open(path, &ctx);
    if (rc == LNTUNE_OK) {
        check_call(ctx, &b, LNTUNE_OP_LAYERNORM, 4096, 64, 1, 0, 1);
        check_call(ctx, &b, LNTUNE_OP_LAYERNORM, 4096, 64, 1, 1, 0);
        check_call(ctx, &b, LNTUNE_OP_LAYERNORM, 65536, 64, 1, 0, 1);
        lntune_close(ctx);
    }
    log_capture_end(saved_stderr);
    if (rc != LNTUNE_OK) {
        printf("FAIL open tuned: %s\n", lntune_errstr(rc));
        return 1;
    }
    char at4096[64], at65536[64];
    snprintf(at4096, sizeof at4096, "H=4096 rows=64 (bucket %d), gamma", lntune_rows_bucket(64));
    snprintf(at65536, sizeof at65536, "H=65536 rows=64 (bucket %d), gamma", lntune_rows_bucket(64));
    int tuned = log_lines(log_path, at4096, "on CUDA device 0: tuned", 1);
    int fallback = log_lines(log_path, at65536, "on CUDA device 0: built-in", 0);
    printf("%s: H=4096 served by the tuned kernel (%d log line)\n", tuned == 1 ? "ok" : "FAIL",
           tuned);
    printf("%s: H=65536, past the tuned variant's max_h, served by the built-in (%d log line)\n",
           fallback == 1 ? "ok" : "FAIL", fallback);
    failures += (tuned != 1) + (fallback != 1);
    unlink(path);
    bf16_suite(scratch, info);
    quant_suite(scratch, info);

    lntune_cuda_stream_destroy(cu, stream);
    lntune_cuda_free(cu, b.x);
    lntune_cuda_free(cu, b.y);
    lntune_cuda_free(cu, b.gamma);
    lntune_cuda_free(cu, b.beta);
    lntune_cuda_free(cu, b.mean);
    lntune_cuda_free(cu, b.rstd);
    lntune_cuda_close(cu);
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
