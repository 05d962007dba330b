/*
 * builtin_residual.c - the generic copy of the residual built-ins (builtin_residual_body.h),
 * and the lookup of every copy: the level this process runs, and its non-temporal copy for
 * calls larger than the cache.
 */
#include "builtin_residual_body.h"

RESIDUAL_COPY(GENERIC, lntune_builtin_residual_generic)

/* [copy: LNTUNE_BUILTIN_*] */
static const lntune_builtin_residual_table *const residual_tables[] = {
    &lntune_builtin_residual_generic,
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    &lntune_builtin_residual_avx2,
    &lntune_builtin_residual_avx2_nt,
#endif
};
enum { COPIES = sizeof residual_tables / sizeof residual_tables[0] };

static lntune_kernel_fn residual_kernel(int copy, int op, lntune_types t) {
    const int rt = lntune_types_residual(t);
    if (copy < 0 || copy >= COPIES || (op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) ||
        t.x >= LNTUNE_TYPE_COUNT || t.y >= LNTUNE_TYPE_COUNT || t.params >= LNTUNE_TYPE_COUNT ||
        rt >= LNTUNE_TYPE_COUNT)
        return NULL;
    return (*residual_tables[copy])[op][t.x][t.y][t.params][rt];
}

lntune_kernel_fn lntune_builtin_residual_kernel(int op, lntune_types t) {
    return residual_kernel(lntune_builtin_level(), op, t);
}

lntune_kernel_fn lntune_builtin_residual_streaming_kernel(int op, lntune_types t) {
    return lntune_builtin_level() == LNTUNE_BUILTIN_AVX2
               ? residual_kernel(LNTUNE_BUILTIN_AVX2_NT, op, t)
               : NULL;
}
