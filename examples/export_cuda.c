/*
 * export_cuda.c - an app using the CUDA kernels of `lntune export` (no liblntune): LayerNorm and
 * RMSNorm on the GPU, each checked against a float64 reference on the CPU. The shapes include
 * those of tests/export_cuda_makedb.c's winners, so with that database every kind of tuned
 * kernel runs (register cache, shared memory, cluster, warp), and some that no winner covers.
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
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int rms;
    long long rows, H;
    int gamma, beta, stats;
} test_case;

static const test_case cases[] = {
    {0, 64, 768, 1, 1, 1},     /* tuned: fixed-H registers, gamma and beta, mean/rstd */
    {0, 40, 768, 1, 0, 0},     /* same kernel, gamma only */
    {1, 4096, 4096, 0, 0, 1},  /* tuned: shared memory cache */
    {0, 1024, 16384, 1, 1, 0}, /* tuned: 4-block cluster */
    {0, 70000, 256, 0, 0, 0},  /* tuned: warp layout, 8 rows per block */
    {1, 300, 1024, 1, 0, 0},   /* an A100 winner: generic here */
    {0, 3, 1000, 1, 1, 1},     /* untuned: generic, scalar accesses (H % 4 != 0) */
    {1, 5, 65536, 0, 0, 0},    /* untuned: long rows */
};

/* The float64 reference of one row; returns the largest error relative to max(1, |ref|). */
static double check_row(const test_case *c, const float *x, const float *y, const float *g,
                        const float *b, float mean, float rstd) {
    double mu = 0.0, var = 0.0;
    if (!c->rms) {
        for (long long i = 0; i < c->H; ++i) mu += x[i];
        mu /= (double)c->H;
    }
    for (long long i = 0; i < c->H; ++i) var += (x[i] - mu) * (x[i] - mu);
    const double r = 1.0 / sqrt(var / (double)c->H + 1e-5);
    double err = 0.0;
    for (long long i = 0; i < c->H; ++i) {
        double ref = (x[i] - mu) * r * (g ? g[i] : 1.0) + (b ? b[i] : 0.0);
        double e = fabs(y[i] - ref) / (fabs(ref) > 1.0 ? fabs(ref) : 1.0);
        if (e > err) err = e;
    }
    if (c->stats) {
        double e = fabs(rstd - r) / r + fabs(mean - (c->rms ? 0.0 : mu)) / (1.0 + fabs(mu));
        if (e > err) err = e;
    }
    return err;
}

static int run_case(const test_case *c) {
    const size_t n = (size_t)(c->rows * c->H);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    float *g = malloc((size_t)c->H * sizeof *g), *b = malloc((size_t)c->H * sizeof *b);
    float *mean = malloc((size_t)c->rows * sizeof *mean), *rstd = malloc((size_t)c->rows * 4);
    float *dx = NULL, *dy = NULL, *dg = NULL, *db = NULL, *dmean = NULL, *drstd = NULL;
    int failed = 1;
    if (!x || !y || !g || !b || !mean || !rstd) goto out;
    srand(7);
    for (size_t i = 0; i < n; ++i) x[i] = 3.0f + (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    for (long long i = 0; i < c->H; ++i) g[i] = 0.5f + (float)i / (float)c->H, b[i] = 0.25f;
    if (cudaMalloc((void **)&dx, n * 4) || cudaMalloc((void **)&dy, n * 4) ||
        cudaMalloc((void **)&dg, (size_t)c->H * 4) || cudaMalloc((void **)&db, (size_t)c->H * 4) ||
        cudaMalloc((void **)&dmean, (size_t)c->rows * 4) ||
        cudaMalloc((void **)&drstd, (size_t)c->rows * 4)) {
        fprintf(stderr, "cudaMalloc failed\n");
        goto out;
    }
    cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dg, g, (size_t)c->H * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, (size_t)c->H * 4, cudaMemcpyHostToDevice);
    lntune_kernel_args a = {0};
    a.rows = c->rows;
    a.H = c->H;
    a.x = dx;
    a.y = dy;
    a.gamma = c->gamma ? dg : NULL;
    a.beta = c->beta ? db : NULL;
    a.mean = c->stats ? dmean : NULL;
    a.rstd = c->stats ? drstd : NULL;
    int rc = c->rms ? lntune_kernels_cuda_rmsnorm(&a, 0) : lntune_kernels_cuda_layernorm(&a, 0);
    if (rc == LNTUNE_ENODEVICE) {
        printf("skip: %s\n", lntune_kernels_cuda_errmsg());
        failed = 77;
        goto out;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != LNTUNE_OK || e != cudaSuccess) {
        printf("FAIL: rc %d (%s), %s\n", rc, lntune_kernels_cuda_errmsg(), cudaGetErrorString(e));
        goto out;
    }
    cudaMemcpy(y, dy, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(mean, dmean, (size_t)c->rows * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(rstd, drstd, (size_t)c->rows * 4, cudaMemcpyDeviceToHost);
    double err = 0.0;
    for (long long r = 0; r < c->rows; ++r) {
        double er = check_row(c, x + r * c->H, y + r * c->H, c->gamma ? g : NULL,
                              c->beta ? b : NULL, mean[r], rstd[r]);
        if (er > err) err = er;
    }
    failed = !(err < 1e-5);
    printf("%s: %s rows=%lld H=%lld gamma=%d beta=%d: max error %.3g\n", failed ? "FAIL" : "ok  ",
           c->rms ? "rmsnorm  " : "layernorm", c->rows, c->H, c->gamma, c->beta, err);
out:
    cudaFree(dx), cudaFree(dy), cudaFree(dg), cudaFree(db), cudaFree(dmean), cudaFree(drstd);
    free(x), free(y), free(g), free(b), free(mean), free(rstd);
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
    /* Arguments no kernel serves are refused with a code, not launched. */
    lntune_kernel_args a = {0};
    a.rows = 1, a.H = 8, a.x = (void *)16, a.y = (void *)16, a.beta = (void *)16;
    if (lntune_kernels_cuda_rmsnorm(&a, 0) != LNTUNE_EINVAL) ++bad, printf("FAIL: rms beta\n");
    if (lntune_kernels_cuda_layernorm(&a, 0) != LNTUNE_EUNSUPPORTED)
        ++bad, printf("FAIL: beta without gamma\n");
    a.beta = NULL, a.H = 0;
    if (lntune_kernels_cuda_layernorm(&a, 0) != LNTUNE_EINVAL) ++bad, printf("FAIL: H = 0\n");
    printf("%s\n", bad ? "FAIL" : "ok: every case matches the reference");
    return bad ? 1 : 0;
}
