/*
 * builtin_quant.h - the built-in path of a quantized y (core/quant.h) for shapes never tuned:
 * the float built-in of the call's tuple writes a few rows of fp32 y into a buffer, which are
 * then stored as codes (and, with a scale per row, their scales).
 */
#ifndef LNTUNE_RUNTIME_BUILTIN_QUANT_H
#define LNTUNE_RUNTIME_BUILTIN_QUANT_H

#include "dtypes.h"
#include "lntune_kernel.h"
#include "pool.h"

/*
 * Normalizes every row of a (y of quantized type types.y) on threads threads of pool (NULL for
 * one): float_kernel, the built-in of types with an fp32 y, computes the rows (x, residual,
 * residual_out, mean and rstd as it always does), and each row's codes go to a->y, its scale to
 * a->y_scales where the type has one per row. Returns LNTUNE_KERNEL_OK, the first other code of
 * float_kernel, or LNTUNE_KERNEL_EUNSUPPORTED without a kernel or buffer.
 */
int lntune_builtin_quant_run(lntune_pool *pool, lntune_kernel_fn float_kernel,
                             const lntune_kernel_args *a, lntune_types types, int threads);

#endif /* LNTUNE_RUNTIME_BUILTIN_QUANT_H */
