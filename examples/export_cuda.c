/*
 * export_cuda.c - an app using the CUDA kernels of `lntune export` (no liblntune): LayerNorm and
 * RMSNorm on the GPU, in fp32, fp16 and bf16, with and without a fused residual add, each
 * checked against a float64 reference on the CPU. The shapes include those of
 * tests/export_cuda_makedb.c's winners, so with that database every kind of tuned kernel runs
 * (register cache, shared memory, cluster, warp, 16-bit types, Add & Norm), and some that no
 * winner covers (the generic kernels). Then the backward (dx, dgamma, dbeta; the generic pairs)
 * in fp32 and bf16, with and without dresidual_out.
 *
 *   lntune export --out out --db tuned.db
 *   nvcc -std=c++17 -arch=sm_90 -c out/lntune_kernels.cu -o lntune_kernels.o
 *   cc -std=c11 -Iout -I/usr/local/cuda/include examples/export_cuda.c lntune_kernels.o \
 *      -L/usr/local/cuda/lib64 -lcudart -lstdc++ -lm
 *
 * Exits 0 when every case matches, 1 on a mismatch or failure, 77 without a usable GPU.
 */
#include "lntune_kernels_cuda.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F32 = LNTUNE_KERNELS_F32, F16 = LNTUNE_KERNELS_F16, BF16 = LNTUNE_KERNELS_BF16 };

typedef struct {
    int rms;
    long long rows, H;
    int gamma, beta, stats;
    int fusion;                 /* 0 none, 1 residual, 2 residual and residual_out */
    lntune_kernels_types types; /* all 0: the fp32 entry points */
} test_case;

static const test_case cases[] = {
    {0, 64, 768, 1, 1, 1, 0, {0}},     /* tuned: fixed-H registers, gamma and beta, mean/rstd */
    {0, 40, 768, 1, 0, 0, 0, {0}},     /* same kernel, gamma only */
    {1, 4096, 4096, 0, 0, 1, 0, {0}},  /* tuned: shared memory cache */
    {0, 1024, 16384, 1, 1, 0, 0, {0}}, /* tuned: 4-block cluster */
    {0, 70000, 256, 0, 0, 0, 0, {0}},  /* tuned: warp layout, 8 rows per block */
    {1, 300, 1024, 1, 0, 0, 0, {0}},   /* an A100 winner: generic here */
    {0, 3, 1000, 1, 1, 1, 0, {0}},     /* untuned: generic, scalar accesses (H % 4 != 0) */
    {1, 5, 65536, 0, 0, 0, 0, {0}},    /* untuned: long rows */
    /* tuned: bf16 Add & Norm writing residual_out */
    {0, 5000, 4096, 1, 1, 1, 2, {BF16, 0, 0, 0}},
    {1, 1000, 1024, 1, 0, 1, 0, {F16, F16, F32, 0}}, /* tuned: fp16 data, fp32 gamma */
    /* tuned: bf16 data with an fp32 residual, no residual_out */
    {0, 600, 2048, 0, 0, 0, 1, {BF16, BF16, BF16, F32}},
    {0, 7, 1000, 1, 1, 1, 2, {BF16, 0, 0, 0}},     /* untuned H: the generic kernel of the tuple */
    {1, 9, 333, 1, 0, 0, 1, {0}},                  /* fp32 Add & Norm: always exported */
    {0, 11, 64, 1, 1, 0, 2, {F32, F32, F32, F32}}, /* the same, through _v2 */
};

static int type_of(int t, int dflt) {
    return t ? t : dflt;
}
static size_t type_size(int t) {
    return t == F32 ? 4 : 2;
}
/* Half the spacing of t's numbers near 1: the rounding of one store, relative. */
static double type_unit(int t) {
    return t == F32 ? 6e-8 : t == F16 ? 0x1p-11 : 0x1p-8;
}

static float load(int t, const void *p, size_t i) {
    if (t == F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    uint32_t u;
    if (t == BF16) {
        u = (uint32_t)h << 16;
    } else { /* fp16: the values here are normal numbers */
        const uint32_t e = h >> 10 & 0x1f, m = h & 0x3ff;
        u = (uint32_t)(h & 0x8000) << 16 | (e ? (e - 15 + 127) << 23 | m << 13 : 0);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Stores f rounded to nearest even (finite, normal values only: what this program makes). */
static void store(int t, void *p, size_t i, float f) {
    if (t == F32) {
        ((float *)p)[i] = f;
        return;
    }
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t h;
    if (t == BF16) {
        h = (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
    } else {
        const int32_t e = (int32_t)(u >> 23 & 0xff) - 127 + 15;
        const uint32_t m = u & 0x7fffffu, rest = m & 0x1fffu;
        uint32_t v = (u >> 16 & 0x8000u) | (e > 0 ? (uint32_t)e << 10 | m >> 13 : 0);
        if (e > 0 && (rest > 0x1000u || (rest == 0x1000u && (v & 1u)))) ++v;
        h = (uint16_t)v;
    }
    ((uint16_t *)p)[i] = h;
}

/* Host and device copies of one tensor of n elements of type t. */
typedef struct {
    int t;
    size_t n;
    void *host, *dev;
} tensor;

static int tensor_make(tensor *x, int t, size_t n) {
    x->t = t, x->n = n;
    x->host = malloc(n * type_size(t));
    x->dev = NULL;
    return !x->host || cudaMalloc(&x->dev, n * type_size(t)) != cudaSuccess;
}
static void tensor_free(tensor *x) {
    free(x->host);
    cudaFree(x->dev);
}
static void to_device(tensor *x) {
    cudaMemcpy(x->dev, x->host, x->n * type_size(x->t), cudaMemcpyHostToDevice);
}
static void to_host(tensor *x) {
    cudaMemcpy(x->host, x->dev, x->n * type_size(x->t), cudaMemcpyDeviceToHost);
}

/* Checks one row against float64; returns the largest error relative to max(1, |ref|), in
 * units of the allowed error (a pass is < 1). */
static double check_row(const test_case *c, const tensor *x, const tensor *res, const tensor *out,
                        const tensor *y, const tensor *g, const tensor *b, const float *mean,
                        const float *rstd, long long row) {
    const long long H = c->H;
    const size_t o = (size_t)(row * H);
    double *s = malloc((size_t)H * sizeof *s), mu = 0.0, var = 0.0, worst = 0.0;
    if (!s) return 1e9;
    for (long long i = 0; i < H; ++i) {
        /* the kernels add in fp32, then round residual_out once to its type */
        const float sum =
            load(x->t, x->host, o + i) + (c->fusion ? load(res->t, res->host, o + i) : 0.0f);
        s[i] = sum;
        if (c->fusion == 2) {
            const double e = fabs(load(out->t, out->host, o + i) - sum) / fmax(1.0, fabs(sum));
            worst = fmax(worst, e / (type_unit(out->t) * 1.01 + 1e-7));
        }
        mu += s[i];
    }
    mu = c->rms ? 0.0 : mu / (double)H;
    for (long long i = 0; i < H; ++i) var += (s[i] - mu) * (s[i] - mu);
    const double r = 1.0 / sqrt(var / (double)H + 1e-5);
    /* y rounds once to its type after fp32 arithmetic (about 1e-6 relative) */
    const double tol = type_unit(y->t) * 1.01 + 2e-6;
    for (long long i = 0; i < H; ++i) {
        const double gi = c->gamma ? load(g->t, g->host, (size_t)i) : 1.0;
        const double bi = c->beta ? load(b->t, b->host, (size_t)i) : 0.0;
        const double ref = (s[i] - mu) * r * gi + bi;
        const double e = fabs(load(y->t, y->host, o + i) - ref) / fmax(1.0, fabs(ref));
        worst = fmax(worst, e / tol);
    }
    if (c->stats) {
        double e = fabs(rstd[row] - r) / r + fabs(mean[row] - mu) / (1.0 + fabs(mu));
        worst = fmax(worst, e / 1e-5);
    }
    free(s);
    return worst;
}

static int run_case(const test_case *c) {
    const lntune_kernels_types t = c->types;
    const int xt = type_of(t.x, F32), yt = type_of(t.y, xt), pt = type_of(t.params, xt),
              rt = type_of(t.residual, xt);
    const size_t n = (size_t)(c->rows * c->H), H = (size_t)c->H, rows = (size_t)c->rows;
    tensor x, res, out, y, g, b, mean, rstd;
    int failed = 1;
    int bad = tensor_make(&x, xt, n) | tensor_make(&res, rt, n) | tensor_make(&out, rt, n) |
              tensor_make(&y, yt, n) | tensor_make(&g, pt, H) | tensor_make(&b, pt, H) |
              tensor_make(&mean, F32, rows) | tensor_make(&rstd, F32, rows);
    if (bad) {
        fprintf(stderr, "out of host or device memory\n");
        goto out;
    }
    srand(7);
    for (size_t i = 0; i < n; ++i) {
        store(xt, x.host, i, 3.0f + (float)rand() / (float)RAND_MAX * 2.0f - 1.0f);
        store(rt, res.host, i, (float)rand() / (float)RAND_MAX - 0.5f);
    }
    for (size_t i = 0; i < H; ++i) {
        store(pt, g.host, i, 0.5f + (float)i / (float)H);
        store(pt, b.host, i, 0.25f);
    }
    to_device(&x), to_device(&res), to_device(&g), to_device(&b);
    lntune_kernel_args a = {0};
    a.rows = c->rows;
    a.H = c->H;
    a.x = x.dev;
    a.y = y.dev;
    a.residual = c->fusion ? res.dev : NULL;
    a.residual_out = c->fusion == 2 ? out.dev : NULL;
    a.gamma = c->gamma ? g.dev : NULL;
    a.beta = c->beta ? b.dev : NULL;
    a.mean = c->stats ? mean.dev : NULL;
    a.rstd = c->stats ? rstd.dev : NULL;
    const int v2 = t.x || t.y || t.params || t.residual;
    int rc = c->rms ? (v2 ? lntune_kernels_cuda_rmsnorm_v2(&a, t, 0)
                          : lntune_kernels_cuda_rmsnorm(&a, 0))
                    : (v2 ? lntune_kernels_cuda_layernorm_v2(&a, t, 0)
                          : lntune_kernels_cuda_layernorm(&a, 0));
    if (rc == LNTUNE_ENODEVICE) {
        printf("skip: %s\n", lntune_kernels_cuda_errmsg());
        failed = 77;
        goto out;
    }
    if (rc == LNTUNE_EUNSUPPORTED && !(xt == F32 && yt == F32 && pt == F32 && rt == F32)) {
        /* another database than tests/export_cuda_makedb.c's: that tuple had no winner */
        printf("skip: %s\n", lntune_kernels_cuda_errmsg());
        failed = 0;
        goto out;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != LNTUNE_OK || e != cudaSuccess) {
        printf("FAIL: rc %d (%s), %s\n", rc, lntune_kernels_cuda_errmsg(), cudaGetErrorString(e));
        goto out;
    }
    to_host(&y), to_host(&out), to_host(&mean), to_host(&rstd);
    double worst = 0.0;
    for (long long r = 0; r < c->rows; ++r)
        worst = fmax(worst, check_row(c, &x, &res, &out, &y, &g, &b, mean.host, rstd.host, r));
    failed = !(worst < 1.0);
    static const char *const names[] = {"", "f32", "f16", "bf16"};
    printf("%s: %s %s/%s/%s%s%s rows=%lld H=%lld gamma=%d beta=%d: max error %.3g of allowed\n",
           failed ? "FAIL" : "ok  ", c->rms ? "rmsnorm  " : "layernorm", names[xt], names[yt],
           names[pt], c->fusion ? " residual " : "", c->fusion ? names[rt] : "", c->rows, c->H,
           c->gamma, c->beta, worst);
out:
    tensor_free(&x), tensor_free(&res), tensor_free(&out), tensor_free(&y);
    tensor_free(&g), tensor_free(&b), tensor_free(&mean), tensor_free(&rstd);
    return failed;
}

typedef struct {
    int rms;
    long long rows, H;
    int fused; /* dresidual_out given */
    lntune_kernels_types types;
} backward_case;

static const backward_case backward_cases[] = {
    {0, 300, 768, 0, {0}},
    {1, 64, 1000, 1, {BF16, 0, 0, 0}},
    {0, 7, 4097, 1, {F16, F16, F32, 0}},
};

/* The float64 gradients of all rows; the largest error in units of the allowed one. */
static double check_backward(const backward_case *c, const tensor *x, const tensor *dy,
                             const tensor *dres, const tensor *g, const tensor *dx,
                             const tensor *dg, const tensor *db) {
    const long long H = c->H;
    double *sum_g = calloc((size_t)H * 4, sizeof *sum_g), worst = 0.0;
    if (!sum_g) return 1e9;
    double *sum_b = sum_g + H, *mag_g = sum_b + H, *mag_b = mag_g + H;
    for (long long r = 0; r < c->rows; ++r) {
        const size_t o = (size_t)(r * H);
        double mu = 0.0, var = 0.0, mg = 0.0, mgx = 0.0;
        for (long long i = 0; i < H && !c->rms; ++i) mu += load(x->t, x->host, o + i);
        mu /= (double)H;
        for (long long i = 0; i < H; ++i) {
            const double d = load(x->t, x->host, o + i) - mu;
            var += d * d;
        }
        const double rs = 1.0 / sqrt(var / (double)H + 1e-5);
        for (long long i = 0; i < H; ++i) {
            const double xhat = (load(x->t, x->host, o + i) - mu) * rs;
            const double gi = load(dy->t, dy->host, o + i) * load(g->t, g->host, (size_t)i);
            mg += gi / (double)H, mgx += gi * xhat / (double)H;
        }
        for (long long i = 0; i < H; ++i) {
            const double dyi = load(dy->t, dy->host, o + i);
            const double xhat = (load(x->t, x->host, o + i) - mu) * rs;
            const double gi = dyi * load(g->t, g->host, (size_t)i);
            double ref = rs * (gi - (c->rms ? 0.0 : mg) - xhat * mgx);
            if (c->fused) ref += load(dres->t, dres->host, o + i);
            const double e = fabs(load(dx->t, dx->host, o + i) - ref) /
                             (type_unit(dx->t) * fabs(ref) + 1e-4 * (1.0 + fabs(ref)));
            worst = fmax(worst, e);
            sum_g[i] += dyi * xhat, mag_g[i] += fabs(dyi * xhat);
            sum_b[i] += dyi, mag_b[i] += fabs(dyi);
        }
    }
    for (long long i = 0; i < H; ++i) {
        double e = fabs(load(dg->t, dg->host, (size_t)i) - sum_g[i]) /
                   (type_unit(dg->t) * fabs(sum_g[i]) + 1e-5 * mag_g[i] + 1e-30);
        if (!c->rms)
            e = fmax(e, fabs(load(db->t, db->host, (size_t)i) - sum_b[i]) /
                            (type_unit(db->t) * fabs(sum_b[i]) + 1e-5 * mag_b[i] + 1e-30));
        worst = fmax(worst, e);
    }
    free(sum_g);
    return worst;
}

static int run_backward_case(const backward_case *c) {
    const lntune_kernels_types t = c->types;
    const int xt = type_of(t.x, F32), pt = type_of(t.params, xt);
    const size_t n = (size_t)(c->rows * c->H), H = (size_t)c->H;
    tensor x, dy, dres, dx, g, dg, db;
    int failed = 1;
    int bad = tensor_make(&x, xt, n) | tensor_make(&dy, xt, n) | tensor_make(&dres, xt, n) |
              tensor_make(&dx, xt, n) | tensor_make(&g, pt, H) | tensor_make(&dg, pt, H) |
              tensor_make(&db, pt, H);
    if (bad) {
        fprintf(stderr, "out of host or device memory\n");
        goto out;
    }
    srand(11);
    for (size_t i = 0; i < n; ++i) {
        store(xt, x.host, i, 3.0f + (float)rand() / (float)RAND_MAX * 2.0f - 1.0f);
        store(xt, dy.host, i, (float)rand() / (float)RAND_MAX - 0.5f);
        store(xt, dres.host, i, (float)rand() / (float)RAND_MAX - 0.5f);
    }
    for (size_t i = 0; i < H; ++i) store(pt, g.host, i, 0.5f + (float)i / (float)H);
    to_device(&x), to_device(&dy), to_device(&dres), to_device(&g);
    lntune_backward_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = c->rows, a.H = c->H;
    a.x = x.dev, a.dy = dy.dev, a.dx = dx.dev, a.gamma = g.dev;
    a.dresidual_out = c->fused ? dres.dev : NULL;
    const int rc = c->rms ? lntune_kernels_cuda_rmsnorm_backward(&a, t, dg.dev, NULL, 0)
                          : lntune_kernels_cuda_layernorm_backward(&a, t, dg.dev, db.dev, 0);
    if (rc == LNTUNE_EUNSUPPORTED && xt != F32) { /* another database: that tuple had no winner */
        printf("skip: %s\n", lntune_kernels_cuda_errmsg());
        failed = 0;
        goto out;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != LNTUNE_OK || e != cudaSuccess) {
        printf("FAIL: backward rc %d (%s), %s\n", rc, lntune_kernels_cuda_errmsg(),
               cudaGetErrorString(e));
        goto out;
    }
    to_host(&dx), to_host(&dg), to_host(&db);
    const double worst = check_backward(c, &x, &dy, &dres, &g, &dx, &dg, &db);
    failed = !(worst < 1.0);
    static const char *const names[] = {"", "f32", "f16", "bf16"};
    printf("%s: %s backward x %s gamma %s%s rows=%lld H=%lld: max error %.3g of allowed\n",
           failed ? "FAIL" : "ok  ", c->rms ? "rmsnorm  " : "layernorm", names[xt], names[pt],
           c->fused ? " dresidual_out" : "", c->rows, c->H, worst);
out:
    tensor_free(&x), tensor_free(&dy), tensor_free(&dres), tensor_free(&dx);
    tensor_free(&g), tensor_free(&dg), tensor_free(&db);
    return failed;
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("skip: no CUDA device\n");
        return 77;
    }
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        int rc = run_case(&cases[i]);
        if (rc == 77) return 77;
        bad += rc != 0;
    }
    for (size_t i = 0; i < sizeof backward_cases / sizeof backward_cases[0]; ++i)
        bad += run_backward_case(&backward_cases[i]) != 0;
    /* Arguments no kernel serves are refused with a code, not launched. */
    lntune_kernel_args a = {0};
    a.rows = 1, a.H = 8, a.x = (void *)16, a.y = (void *)16, a.beta = (void *)16;
    if (lntune_kernels_cuda_rmsnorm(&a, 0) != LNTUNE_EINVAL) ++bad, printf("FAIL: rms beta\n");
    if (lntune_kernels_cuda_layernorm(&a, 0) != LNTUNE_EUNSUPPORTED)
        ++bad, printf("FAIL: beta without gamma\n");
    a.beta = NULL, a.H = 0;
    if (lntune_kernels_cuda_layernorm(&a, 0) != LNTUNE_EINVAL) ++bad, printf("FAIL: H = 0\n");
    a.H = 8, a.residual_out = (void *)16;
    if (lntune_kernels_cuda_layernorm(&a, 0) != LNTUNE_EINVAL)
        ++bad, printf("FAIL: residual_out without residual\n");
    a.residual_out = NULL;
    const lntune_kernels_types bad_type = {7, 0, 0, 0}, unexported = {F16, BF16, F32, 0};
    if (lntune_kernels_cuda_layernorm_v2(&a, bad_type, 0) != LNTUNE_EINVAL)
        ++bad, printf("FAIL: type 7\n");
    /* fp16 in, bf16 out: no winner had this tuple, so no kernel of it was exported */
    if (lntune_kernels_cuda_layernorm_v2(&a, unexported, 0) != LNTUNE_EUNSUPPORTED ||
        !strstr(lntune_kernels_cuda_errmsg(), "--dtype f16/bf16/f32"))
        ++bad, printf("FAIL: unexported tuple: %s\n", lntune_kernels_cuda_errmsg());
    printf("%s\n", bad ? "FAIL" : "ok: every case matches the reference");
    return bad ? 1 : 0;
}
