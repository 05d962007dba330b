/*
 * pool.h - a persistent thread pool, so that a multi-threaded kernel call never pays for thread
 * creation. Workers spin briefly for work, then sleep on a condition variable.
 */
#ifndef LNTUNE_POOL_H
#define LNTUNE_POOL_H

#include "lntune_kernel.h"

typedef struct lntune_pool lntune_pool;

/* A pool that runs up to threads tasks at once: the caller plus threads - 1 workers. */
int lntune_pool_create(int threads, lntune_pool **out);
void lntune_pool_destroy(lntune_pool *pool); /* NULL is a no-op */
int lntune_pool_threads(const lntune_pool *pool);

/*
 * Runs task(arg, i, n) for i in [0, n) with n <= the pool's threads, the caller taking i = 0,
 * and returns when all are done. A pool busy with another caller's work runs all n tasks on the
 * calling thread instead, so concurrent callers are correct, merely not parallel.
 */
void lntune_pool_run(lntune_pool *pool, int n, void (*task)(void *arg, int i, int n), void *arg);

/*
 * Runs kernel over all rows of args, split into threads contiguous row ranges (pool may be NULL
 * for threads == 1). Returns the first non-zero kernel code, else LNTUNE_KERNEL_OK.
 */
int lntune_pool_run_kernel(lntune_pool *pool, lntune_kernel_fn kernel,
                           const lntune_kernel_args *args, int threads);

#endif /* LNTUNE_POOL_H */
