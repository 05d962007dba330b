/*
 * builtin_quant.c - the built-in path of a quantized y (see builtin_quant.h): the rows split over
 * the pool's threads, each part through core/quant_rows.h (which lntune export's fallback shares).
 */
#include "builtin_quant.h"

#include "quant.h"
#include "quant_rows.h"

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    lntune_kernel_fn kernel;
    const lntune_kernel_args *a;
    lntune_types types;
    _Atomic int rc;
} job;

static void task(void *arg, int i, int n) {
    job *j = arg;
    const int64_t rows = j->a->rows;
    const int rc = lntune_quant_rows(
        j->kernel, j->a, rows * i / n, rows * (i + 1) / n, lntune_type_size(j->types.x),
        lntune_type_size(lntune_types_residual(j->types)), lntune_quant_is_e4m3(j->types.y));
    int ok = LNTUNE_KERNEL_OK;
    if (rc != LNTUNE_KERNEL_OK) atomic_compare_exchange_strong(&j->rc, &ok, rc);
}

int lntune_builtin_quant_run(lntune_pool *pool, lntune_kernel_fn float_kernel,
                             const lntune_kernel_args *a, lntune_types types, int threads) {
    if (!float_kernel || !lntune_type_quantized(types.y)) return LNTUNE_KERNEL_EUNSUPPORTED;
    if (lntune_type_row_scaled(types.y) && !a->y_scales) return LNTUNE_KERNEL_EUNSUPPORTED;
    lntune_kernel_args b = *a; /* quant_rows.h: a scale per row where y_scales is given */
    if (!lntune_type_row_scaled(types.y)) b.y_scales = NULL;
    job j = {float_kernel, &b, types, LNTUNE_KERNEL_OK};
    if (threads > a->rows) threads = (int)a->rows;
    if (threads > 1 && pool)
        lntune_pool_run(pool, threads, task, &j);
    else
        task(&j, 0, 1);
    return atomic_load(&j.rc);
}
