/*
 * backward.h - running a backward kernel over all rows: per-thread fp32 partials of dgamma and
 * dbeta, then a second pass that sums them in a fixed order and writes them in their type.
 * Shared by the runtime, the verifier and the tuner, so that all three reduce alike.
 */
#ifndef LNTUNE_BACKWARD_H
#define LNTUNE_BACKWARD_H

#include "lntune_kernel_backward.h"
#include "pool.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Runs kernel over rows [0, args->rows) in threads contiguous ranges (pool may be NULL; threads
 * is capped at rows and at the pool's size). dgamma_parts / dbeta_parts: threads x H floats each
 * (or NULL: not wanted), zeroed here; range i adds into part i. Returns the first non-zero
 * kernel code, else LNTUNE_KERNEL_OK. The same threads give the same partials every run.
 */
int lntune_backward_run(lntune_pool *pool, lntune_backward_kernel_fn kernel,
                        const lntune_backward_kernel_args *args, int threads, float *dgamma_parts,
                        float *dbeta_parts);

/* The thread count lntune_backward_run uses for threads on rows with pool. */
int lntune_backward_threads(const lntune_pool *pool, int threads, int64_t rows);

/*
 * out[j] = parts[0][j] + parts[1][j] + ... + parts[n-1][j], summed in fp32 in that order and
 * stored as type (LNTUNE_TYPE_*, rounded to nearest even).
 */
void lntune_backward_reduce(const float *parts, int n, int64_t H, void *out, int type);

#endif /* LNTUNE_BACKWARD_H */
