/*
 * export_driver.c - runs the kernels of an `lntune export` (lntune_kernels.h) against the float64
 * reference: the tuned shapes, untuned ones, every affine kind, one and many rows (the
 * multi-threaded winner and the generic kernels' pool), padded strides, and declined arguments.
 * Compiled by test_export.sh with each compiler together with the exported file.
 */
#include "lntune_kernels.h"
#include "testutil.h"

#include <string.h>

int main(void) {
    static const int64_t hs[] = {768, 4096, 1, 17, 1000};
    static const int64_t rows_list[] = {1, 40, 4096};
    for (int op = 0; op < 2; ++op)
        for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; ++hi)
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri)
                for (int affine = 0; affine < 4; ++affine) {
                    if (op == 1 && affine >= 2) continue;
                    int64_t H = hs[hi], rows = rows_list[ri], xs = H + (int64_t)(affine & 1) * 3;
                    float *x = malloc((size_t)(rows * xs) * 4), *y = malloc((size_t)(rows * H) * 4);
                    float *g = malloc((size_t)H * 4), *b = malloc((size_t)H * 4);
                    test_fill(x, rows * xs, 5.0, 2.0);
                    test_fill(g, H, 1.0, 0.2);
                    test_fill(b, H, 0.0, 0.5);
                    lntune_kernel_args a;
                    memset(&a, 0, sizeof a);
                    a.rows = rows, a.H = H, a.x = x, a.y = y, a.x_stride = xs;
                    a.gamma = affine == 1 || affine == 2 ? g : NULL;
                    a.beta = affine >= 2 ? b : NULL;
                    int rc = op ? lntune_kernels_rmsnorm(&a) : lntune_kernels_layernorm(&a);
                    double err = rc ? INFINITY
                                    : test_error((lntune_op)op, x, xs, y, H, rows, H, a.gamma,
                                                 a.beta, 1e-5, NULL, NULL);
                    test_case(rc == LNTUNE_KERNEL_OK && err <= TOLERANCE,
                              "%s H=%lld rows=%lld affine=%d x_stride=%lld: rc %d, error %.3g",
                              op ? "rmsnorm" : "layernorm", (long long)H, (long long)rows, affine,
                              (long long)xs, rc, err);
                    free(x), free(y), free(g), free(b);
                }
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4;
    test_case(lntune_kernels_layernorm(&a) == LNTUNE_KERNEL_EUNSUPPORTED,
              "NULL x and y are declined");
    return test_summary();
}
