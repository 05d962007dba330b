/*
 * builtin.c - the table of built-in kernels. The kernels themselves are generated at build time
 * by tools/emit_builtin.c from the templates (see gen/builtin.c for their parameters) into
 * lntune_builtin_kernels.c in the build directory; only their names appear here.
 *
 * The templates have no LayerNorm variant for beta without gamma (the tuner never measures
 * one), so that case is the plain kernel followed by adding beta: one extra pass over y, for
 * a combination that real models do not use.
 */
#include "builtin.h"

#include "registry.h"

#include <stddef.h>

/* Generated; names follow lntune_builtin_symbol("lntune_builtin", i). */
int lntune_builtin_layernorm_affine(const lntune_kernel_args *a, int64_t begin, int64_t end);
int lntune_builtin_layernorm_plain(const lntune_kernel_args *a, int64_t begin, int64_t end);
int lntune_builtin_rmsnorm_affine(const lntune_kernel_args *a, int64_t begin, int64_t end);
int lntune_builtin_rmsnorm_plain(const lntune_kernel_args *a, int64_t begin, int64_t end);

static int layernorm_beta_only(const lntune_kernel_args *a, int64_t begin, int64_t end) {
    lntune_kernel_args plain = *a;
    plain.beta = NULL;
    int rc = lntune_builtin_layernorm_plain(&plain, begin, end);
    if (rc != LNTUNE_KERNEL_OK) return rc;
    const float *beta = a->beta;
    for (int64_t r = begin; r < end; ++r) {
        float *y = (float *)a->y + r * a->y_stride;
        for (int64_t i = 0; i < a->H; ++i) y[i] += beta[i];
    }
    return LNTUNE_KERNEL_OK;
}

lntune_kernel_fn lntune_builtin_kernel(int op, int affine) {
    if (op == LNTUNE_DESC_RMSNORM)
        return affine == LNTUNE_DESC_GAMMA       ? lntune_builtin_rmsnorm_affine
               : affine == LNTUNE_DESC_NO_AFFINE ? lntune_builtin_rmsnorm_plain
                                                 : NULL;
    return affine == LNTUNE_DESC_GAMMA       ? lntune_builtin_layernorm_affine
           : affine == LNTUNE_DESC_NO_AFFINE ? lntune_builtin_layernorm_plain
                                             : layernorm_beta_only;
}
