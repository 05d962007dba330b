/*
 * test_abi64.c - kernels index with 64 bits: rows of x and y 2^31 + a few elements apart, so that
 * any 32-bit offset arithmetic lands on the wrong row. The buffers are sparse mappings: only the
 * pages of the rows themselves are ever touched.
 */
#define _GNU_SOURCE
#include "build.h"
#include "generator.h"
#include "lntune.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { ROWS = 3, H = 1000 };
static const int64_t X_STRIDE = (INT64_C(1) << 31) + 17, Y_STRIDE = (INT64_C(1) << 31) + 5;

static void *sparse(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int main(void) {
    const char *variants[][2] = {
        {"layernorm", "vec=8,acc=2,stats=twopass,rows=2"},
        {"layernorm", "vec=8,acc=4,stats=welford,store=nt"},
        {"layernorm", "vec=1,stats=onepass,rows=4,prefetch=1"},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=2"},
        {"rmsnorm", "vec=4,acc=2,stats=blocked,rows=2"},
        {"rmsnorm", "vec=8,stats=wide,prefetch=2"},
    };
    const size_t nv = sizeof variants / sizeof variants[0];
    size_t xbytes = (size_t)((ROWS - 1) * X_STRIDE + H) * sizeof(float);
    size_t ybytes = (size_t)((ROWS - 1) * Y_STRIDE + H) * sizeof(float);
    float *x = sparse(xbytes), *y = sparse(ybytes);
    if (!x || !y) {
        printf("FAIL: cannot map %zu + %zu bytes of address space\n", xbytes, ybytes);
        return 1;
    }
    float gamma[H], beta[H];
    for (int i = 0; i < H; ++i) {
        gamma[i] = 1.0f + 0.001f * (float)i;
        beta[i] = 0.5f - 0.001f * (float)i;
    }
    for (int r = 0; r < ROWS; ++r)
        for (int i = 0; i < H; ++i)
            x[r * X_STRIDE + i] = (float)(r + 1) * sinf((float)i) + 10.0f * (float)r;

    lntune_gen *g = NULL;
    lntune_source src[8];
    const char *texts[8];
    if (lntune_gen_open(NULL, &g) != LNTUNE_OK) return 1;
    for (size_t v = 0; v < nv; ++v) {
        char symbol[16];
        snprintf(symbol, sizeof symbol, "k%zu", v);
        if (lntune_gen_emit(g, "cpu", variants[v][0], variants[v][1], NULL, symbol, &src[v])) {
            printf("FAIL emit: %s\n", lntune_gen_errmsg(g));
            return 1;
        }
        texts[v] = src[v].text;
    }
    lntune_gen_close(g);
    lntune_library *lib = NULL;
    char *diag = NULL;
    if (lntune_build_library(lntune_default_compiler(), NULL, texts, nv, 2, &lib, &diag)) {
        printf("FAIL build: %s\n", diag);
        return 1;
    }
    int failures = 0;
    for (size_t v = 0; v < nv; ++v) {
        char symbol[16];
        snprintf(symbol, sizeof symbol, "k%zu", v);
        int ln = strcmp(variants[v][0], "layernorm") == 0;
        lntune_kernel_args a = {.rows = ROWS, .H = H, .x_stride = X_STRIDE, .y_stride = Y_STRIDE};
        a.x = x, a.y = y, a.gamma = gamma, a.beta = ln ? beta : NULL, a.eps = 1e-5f;
        int rc = lntune_library_kernel(lib, symbol)(&a, 0, ROWS);
        double worst = 0.0;
        for (int r = 0; r < ROWS; ++r) {
            double z[H], mean, rstd;
            lntune_reference_row(ln ? LNTUNE_OP_LAYERNORM : LNTUNE_OP_RMSNORM, x + r * X_STRIDE, H,
                                 1e-5, z, &mean, &rstd);
            for (int i = 0; i < H; ++i) {
                double ref = z[i] * gamma[i] + (ln ? beta[i] : 0.0);
                double err = fabs(y[r * Y_STRIDE + i] - ref) / (fabs(ref) + 1.0);
                if (err > worst || isnan(err)) worst = isnan(err) ? INFINITY : err;
            }
        }
        int ok = rc == 0 && worst < 1e-5;
        failures += !ok;
        printf("%s: %s %s: max error %.3g over rows 2^31 elements apart\n", ok ? "ok" : "FAIL",
               variants[v][0], src[v].variant, worst);
        /* NaN-fill the rows, so that stale outputs cannot pass the next variant. */
        for (int r = 0; r < ROWS; ++r) memset(y + r * Y_STRIDE, 0xff, H * sizeof(float));
        lntune_source_free(&src[v]);
    }
    lntune_library_close(lib);
    munmap(x, xbytes);
    munmap(y, ybytes);
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
