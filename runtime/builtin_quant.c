/*
 * builtin_quant.c - the built-in path of a quantized y (see builtin_quant.h): the rows split over
 * the pool's threads, each part through core/quant_rows.h (which lntune export's fallback shares),
 * its row pass in the widest vectors of the built-ins' copy that this process runs.
 */
#include "builtin_quant.h"

#include "builtin.h"
#include "quant.h"
#include "quant_rows.h"

#include <stdatomic.h>
#include <stdint.h>

void lntune_builtin_quant_pass_avx2(const float *y, void *q, int64_t H, float *scale, float inv,
                                    int e4m3);
void lntune_builtin_quant_pass_avx512(const float *y, void *q, int64_t H, float *scale, float inv,
                                      int e4m3);

/* The row pass of the forward built-ins' copy (builtin_isa.c): AVX-512's, AVX2's or the
 * baseline's. */
static lntune_quant_row_pass_fn row_pass(void) {
    switch (lntune_builtin_forward_copy(0)) {
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
    case LNTUNE_BUILTIN_AVX512:
        return lntune_builtin_quant_pass_avx512;
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    case LNTUNE_BUILTIN_AVX2:
        return lntune_builtin_quant_pass_avx2;
#endif
    default:
        return lntune_quant_row_pass;
    }
}

typedef struct {
    lntune_quant_row_pass_fn pass;
    lntune_kernel_fn kernel;
    const lntune_kernel_args *a;
    lntune_types types;
    _Atomic int rc;
} job;

static void task(void *arg, int i, int n) {
    job *j = arg;
    const int64_t rows = j->a->rows;
    const int rc = lntune_quant_rows_with(
        j->pass, j->kernel, j->a, rows * i / n, rows * (i + 1) / n, lntune_type_size(j->types.x),
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
    job j = {row_pass(), float_kernel, &b, types, LNTUNE_KERNEL_OK};
    if (threads > a->rows) threads = (int)a->rows;
    if (threads > 1 && pool)
        lntune_pool_run(pool, threads, task, &j);
    else
        task(&j, 0, 1);
    return atomic_load(&j.rc);
}
