/*
 * test_cuda_backward_dispatch.c - lntune_layernorm_backward and lntune_rmsnorm_backward on
 * device memory, through the public API: the built-in backward pair of each op and fusion,
 * compiled with NVRTC for the call's types at first use, its dgamma/dbeta workspace allocated on
 * the call's stream.
 *
 * Cases: both ops; fp32, bf16 and fp16 data with fp32 or 16-bit gamma; statistics saved and
 * recomputed; gamma NULL; dgamma and dbeta each asked for or not; the fused residual backward
 * (dresidual_out); H = 1, 1000, 4097 and 8192 at rows = 1000 (more row groups than the
 * workspace's cap, so the kernels stride). dx, dgamma and dbeta are poisoned with NaN before the
 * call and compared with the float64 reference (gen/verify/reference.c) of the same rounded inputs:
 * dx within its type's rounding plus 1e-4 of its size, dgamma and dbeta within their type's
 * rounding plus 1e-5 of the sum of their terms' magnitudes (the fp32 sums' order differs from
 * the reference's). Then: no NVRTC is LNTUNE_ENODEVICE naming NVRTC; device_index 63 is
 * LNTUNE_ENODEVICE; LNTUNE_LOG=debug names the built-in that served each call.
 *
 * On a GPU this checks the kernels and the dispatch; on the stand-in driver (cuda_backward_mock,
 * MOCK_CUDA_TYPES telling it the types) it checks the dispatch: the pair, its parameters, the
 * parts passed to the second kernel, the workspace. Exits 77 (skipped) without either.
 */
#include "check.h"
#include "cuda_driver.h"
#include "dtypes.h"
#include "half_ref.h"
#include "lntune.h"
#include "reference.h"

#include "device_test.h"
#include "log_lines.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    lntune_op op;
    const char *types; /* x (x, dy, dx, dresidual_out) / y (as x) / params */
    int64_t H, rows;
    int gamma, stats, dgamma, dbeta, fused;
} test_case;

static const test_case cases[] = {
    {LNTUNE_OP_LAYERNORM, "f32", 768, 300, 1, 1, 1, 1, 0},
    {LNTUNE_OP_LAYERNORM, "bf16/bf16/f32", 1000, 64, 1, 0, 1, 1, 0},
    {LNTUNE_OP_LAYERNORM, "f16", 1, 5, 0, 1, 0, 1, 0},
    {LNTUNE_OP_LAYERNORM, "bf16", 4097, 8, 1, 1, 1, 0, 1},
    {LNTUNE_OP_LAYERNORM, "f32", 8192, 1000, 1, 0, 1, 1, 0},
    {LNTUNE_OP_RMSNORM, "f32", 1000, 64, 1, 1, 1, 0, 1},
    {LNTUNE_OP_RMSNORM, "f16/f16/f32", 4097, 8, 1, 0, 1, 0, 0},
    {LNTUNE_OP_RMSNORM, "bf16", 768, 300, 0, 1, 0, 0, 0},
};

static void *stream;

/* Half the spacing of a type's numbers at 1: one rounding, relative. */
static double unit_of(int type) {
    return type == LNTUNE_TYPE_F32 ? 0x1p-24 : type == LNTUNE_TYPE_F16 ? 0x1p-11 : 0x1p-8;
}

/* A device buffer of n elements of type, filled from host (NULL: poisoned with NaN). */
static uint64_t upload(const void *host, size_t n, int type) {
    uint64_t d;
    const size_t bytes = n * lntune_type_size(type) + 4;
    DEVICE(lntune_cuda_alloc(cu, bytes, &d));
    DEVICE(lntune_cuda_fill32(cu, d, 0x7fc17fc1u, bytes / 4)); /* NaN as fp32, fp16 and bf16 */
    if (host) DEVICE(lntune_cuda_htod(cu, d, host, n * lntune_type_size(type)));
    return d;
}

static void *host_alloc(size_t n, int type) {
    void *p = malloc(n * lntune_type_size(type) + 4);
    if (!p) {
        printf("FAIL: out of host memory\n");
        exit(1);
    }
    return p;
}

/* Compares the call's outputs with the float64 reference; counts the elements that fail. */
static int compare(const test_case *c, lntune_types t, const void *x, const void *dy,
                   const void *dres, const void *gamma, const float *mean, const float *rstd,
                   const void *dx, const void *dgamma, const void *dbeta) {
    const int64_t H = c->H;
    double *buf = calloc((size_t)H * 9, sizeof *buf);
    float *xf = malloc((size_t)H * sizeof *xf);
    if (!buf || !xf) exit(1);
    double *xd = buf, *dyd = xd + H, *dr = dyd + H, *g = dr + H, *dxr = g + H, *dg = dxr + H,
           *db = dg + H, *dg_mag = db + H, *db_mag = dg_mag + H;
    int bad = 0;
    for (int64_t r = 0; r < c->rows; ++r) {
        for (int64_t i = 0; i < H; ++i) {
            xd[i] = lntune_ref_load(t.x, x, r * H + i);
            xf[i] = (float)xd[i];
            dyd[i] = lntune_ref_load(t.x, dy, r * H + i);
            dr[i] = dres ? lntune_ref_load(t.x, dres, r * H + i) : 0.0;
            g[i] = gamma ? lntune_ref_load(t.params, gamma, i) : 1.0;
        }
        double m, s;
        lntune_reference_row(c->op, xf, H, 1e-5, dxr, &m, &s);
        if (mean) m = mean[r];
        if (rstd) s = rstd[r];
        lntune_reference_backward_row(c->op, xd, dyd, dres ? dr : NULL, g, H, m, s, dxr, dg, db);
        for (int64_t i = 0; i < H; ++i) {
            const double got = lntune_ref_load(t.x, dx, r * H + i);
            const double tol = unit_of(t.x) * fabs(dxr[i]) + 1e-4 * (1.0 + fabs(dxr[i]));
            if (!(fabs(got - dxr[i]) <= tol)) {
                if (bad < 3)
                    printf("  dx[%lld][%lld] = %.9g, reference %.9g\n", (long long)r, (long long)i,
                           got, dxr[i]);
                ++bad;
            }
            const double xhat = (xd[i] - (c->op == LNTUNE_OP_LAYERNORM ? m : 0.0)) * s;
            dg_mag[i] += fabs(dyd[i] * xhat);
            db_mag[i] += fabs(dyd[i]);
        }
    }
    for (int k = 0; k < 2; ++k) {
        const void *out = k ? dbeta : dgamma;
        const double *ref = k ? db : dg, *mag = k ? db_mag : dg_mag;
        for (int64_t i = 0; out && i < H; ++i) {
            const double got = lntune_ref_load(t.params, out, i);
            if (!(fabs(got - ref[i]) <= unit_of(t.params) * fabs(ref[i]) + 1e-5 * mag[i])) {
                if (bad < 3)
                    printf("  %s[%lld] = %.9g, reference %.9g\n", k ? "dbeta" : "dgamma",
                           (long long)i, got, ref[i]);
                ++bad;
            }
        }
    }
    free(buf), free(xf);
    return bad;
}

/* One case through the API; returns the call's code, *bad the elements that fail. */
static int run_case(lntune *ctx, const test_case *c, int *bad) {
    lntune_types t;
    if (lntune_types_parse(c->types, &t) != 0) exit(1);
    setenv("MOCK_CUDA_TYPES", c->types, 1); /* the stand-in's kernels; a real GPU ignores it */
    const int64_t H = c->H;
    const size_t n = (size_t)(c->rows * H);
    void *x = host_alloc(n, t.x), *dy = host_alloc(n, t.x), *dres = host_alloc(n, t.x);
    void *dx = host_alloc(n, t.x), *gamma = host_alloc((size_t)H, t.params);
    void *dgamma = host_alloc((size_t)H, t.params), *dbeta = host_alloc((size_t)H, t.params);
    float *mean = host_alloc((size_t)c->rows, LNTUNE_TYPE_F32);
    float *rstd = host_alloc((size_t)c->rows, LNTUNE_TYPE_F32);
    uint64_t seed = 0x5eed + (uint64_t)H;
    float *row = host_alloc((size_t)H, LNTUNE_TYPE_F32);
    double *z = malloc((size_t)H * sizeof *z);
    if (!z) exit(1);
    for (int64_t r = 0; r < c->rows; ++r) {
        for (int64_t i = 0; i < H; ++i) {
            lntune_ref_store(t.x, x, r * H + i, 3.0f + next_random(&seed));
            lntune_ref_store(t.x, dy, r * H + i, next_random(&seed));
            lntune_ref_store(t.x, dres, r * H + i, 0.5f * next_random(&seed));
            row[i] = (float)lntune_ref_load(t.x, x, r * H + i);
        }
        double m, s; /* the forward's fp32 statistics, as a forward would save them */
        lntune_reference_row(c->op, row, H, 1e-5, z, &m, &s);
        mean[r] = (float)m, rstd[r] = (float)s;
    }
    for (int64_t i = 0; i < H; ++i)
        lntune_ref_store(t.params, gamma, i, 1.0f + 0.5f * next_random(&seed));
    const uint64_t d_x = upload(x, n, t.x), d_dy = upload(dy, n, t.x),
                   d_dres = upload(dres, n, t.x);
    const uint64_t d_dx = upload(NULL, n, t.x), d_gamma = upload(gamma, (size_t)H, t.params);
    const uint64_t d_dg = upload(NULL, (size_t)H, t.params),
                   d_db = upload(NULL, (size_t)H, t.params);
    const uint64_t d_mean = upload(mean, (size_t)c->rows, LNTUNE_TYPE_F32);
    const uint64_t d_rstd = upload(rstd, (size_t)c->rows, LNTUNE_TYPE_F32);

    lntune_backward_args a;
    memset(&a, 0, sizeof a);
    a.rows = c->rows, a.H = H;
    a.dtype = (lntune_dtype)(t.x + 1), a.param_dtype = (lntune_dtype)(t.params + 1);
    a.x = (const void *)(uintptr_t)d_x, a.dy = (const void *)(uintptr_t)d_dy;
    a.dx = (void *)(uintptr_t)d_dx;
    a.gamma = c->gamma ? (const void *)(uintptr_t)d_gamma : NULL;
    if (c->stats) {
        a.mean = c->op == LNTUNE_OP_LAYERNORM ? (const float *)(uintptr_t)d_mean : NULL;
        a.rstd = (const float *)(uintptr_t)d_rstd;
    }
    a.dgamma = c->dgamma ? (void *)(uintptr_t)d_dg : NULL;
    a.dbeta = c->dbeta ? (void *)(uintptr_t)d_db : NULL;
    a.dresidual_out = c->fused ? (const void *)(uintptr_t)d_dres : NULL;
    a.device = LNTUNE_DEVICE_CUDA, a.stream = stream;
    const int rc = c->op == LNTUNE_OP_LAYERNORM ? lntune_layernorm_backward(ctx, &a)
                                                : lntune_rmsnorm_backward(ctx, &a);
    *bad = 0;
    if (rc == LNTUNE_OK) {
        DEVICE(lntune_cuda_stream_sync(cu, stream));
        DEVICE(lntune_cuda_dtoh(cu, dx, d_dx, n * lntune_type_size(t.x)));
        DEVICE(lntune_cuda_dtoh(cu, dgamma, d_dg, (size_t)H * lntune_type_size(t.params)));
        DEVICE(lntune_cuda_dtoh(cu, dbeta, d_db, (size_t)H * lntune_type_size(t.params)));
        *bad = compare(c, t, x, dy, c->fused ? dres : NULL, c->gamma ? gamma : NULL,
                       c->stats ? mean : NULL, c->stats ? rstd : NULL, dx,
                       c->dgamma ? dgamma : NULL, c->dbeta ? dbeta : NULL);
    }
    const uint64_t all[] = {d_x, d_dy, d_dres, d_dx, d_gamma, d_dg, d_db, d_mean, d_rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) lntune_cuda_free(cu, all[i]);
    free(x), free(dy), free(dres), free(dx), free(gamma), free(dgamma), free(dbeta);
    free(mean), free(rstd), free(row), free(z);
    unsetenv("MOCK_CUDA_TYPES");
    return rc;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *scratch = argc > 1 ? argv[1] : "/tmp";
    int rc = device_test_open();
    if (rc != 0) return rc;
    printf("%s\n", lntune_cuda_get_info(cu)->name);
    DEVICE(lntune_cuda_stream_create(cu, &stream));
    char db[4096], log_path[4096];
    snprintf(db, sizeof db, "%s/cuda_backward_none.db", scratch);
    snprintf(log_path, sizeof log_path, "%s/cuda_backward.log", scratch);
    unlink(db);

    const int saved_stderr = log_capture_begin(log_path);
    if (saved_stderr < 0) return 1;
    lntune *ctx = NULL;
    enum { N = sizeof cases / sizeof cases[0] };
    int rcs[N], bad[N];
    rc = lntune_open(db, &ctx);
    for (size_t i = 0; i < N; ++i)
        rcs[i] = rc == LNTUNE_OK ? run_case(ctx, &cases[i], &bad[i]) : rc;
    log_capture_end(saved_stderr);
    for (size_t i = 0; i < N; ++i) {
        const test_case *c = &cases[i];
        char at[64], served[128];
        snprintf(at, sizeof at, "H=%lld rows=%lld ", (long long)c->H, (long long)c->rows);
        snprintf(served, sizeof served, "built-in lntune_builtin_cuda_%s_backward_typed%s/",
                 c->op == LNTUNE_OP_LAYERNORM ? "layernorm" : "rmsnorm",
                 c->fused ? "_residual" : "");
        const int lines = log_lines(log_path, at, served, 0);
        CHECK(rcs[i] == LNTUNE_OK && bad[i] == 0 && lines == 1,
              "%s backward %s H=%lld rows=%lld gamma=%d stats=%d dgamma=%d dbeta=%d fused=%d: rc "
              "%d (%s), %d element(s) wrong, %d log line(s) naming %s",
              c->op == LNTUNE_OP_LAYERNORM ? "layernorm" : "rmsnorm", c->types, (long long)c->H,
              (long long)c->rows, c->gamma, c->stats, c->dgamma, c->dbeta, c->fused, rcs[i],
              rcs[i] && ctx ? lntune_errmsg(ctx) : "-", rcs[i] ? 0 : bad[i], lines, served);
    }

    /* A device that does not exist: a message, no crash. */
    lntune_backward_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4, a.x = (const void *)16, a.dy = (const void *)32, a.dx = (void *)48;
    a.device = LNTUNE_DEVICE_CUDA, a.device_index = 63;
    rc = lntune_layernorm_backward(ctx, &a);
    CHECK(rc == LNTUNE_ENODEVICE, "device_index 63: rc %d, %s", rc, lntune_errmsg(ctx));
    lntune_close(ctx);

    /* Without NVRTC the built-in backward cannot be compiled: a clear error. */
    setenv("LNTUNE_NVRTC", "/nonexistent/libnvrtc.so", 1);
    ctx = NULL;
    int none_bad = 0;
    rc = lntune_open(db, &ctx);
    if (rc == LNTUNE_OK) rc = run_case(ctx, &cases[0], &none_bad);
    unsetenv("LNTUNE_NVRTC");
    const char *msg = ctx ? lntune_errmsg(ctx) : "";
    CHECK(rc == LNTUNE_ENODEVICE && strstr(msg, "libnvrtc") && strstr(msg, "backward"),
          "without NVRTC: rc %d, %s", rc, msg);
    lntune_close(ctx);
    unlink(db);
    lntune_cuda_stream_destroy(cu, stream);
    lntune_cuda_close(cu);
    return CHECK_SUMMARY();
}
