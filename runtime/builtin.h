/*
 * builtin.h - the kernels liblntune carries for every shape no one tuned.
 */
#ifndef LNTUNE_RUNTIME_BUILTIN_H
#define LNTUNE_RUNTIME_BUILTIN_H

#include "lntune_kernel.h"

/* The built-in kernel of op for an LNTUNE_DESC_* affine kind; NULL for RMSNorm with beta only. */
lntune_kernel_fn lntune_builtin_kernel(int op, int affine); /* LNTUNE_DESC_* op */

#endif /* LNTUNE_RUNTIME_BUILTIN_H */
