/*
 * backward.c - a backward kernel across threads: each row range adds into its own fp32 partials
 * (no atomics, no sharing), then one pass sums the partials in thread order (see backward.h).
 */
#include "backward.h"

#include "dtypes.h"
#include "half.h"

#include <stdatomic.h>
#include <string.h>

typedef struct {
    lntune_backward_kernel_fn kernel;
    const lntune_backward_kernel_args *args;
    float *dgamma, *dbeta;
    atomic_int rc;
} backward_job;

static void backward_task(void *p, int i, int n) {
    backward_job *job = p;
    const int64_t rows = job->args->rows, H = job->args->H;
    const int64_t begin = rows * i / n, end = rows * (i + 1) / n;
    if (begin >= end) return;
    int rc = job->kernel(job->args, begin, end, job->dgamma ? job->dgamma + i * H : NULL,
                         job->dbeta ? job->dbeta + i * H : NULL);
    if (rc != LNTUNE_KERNEL_OK) {
        int expected = LNTUNE_KERNEL_OK;
        atomic_compare_exchange_strong(&job->rc, &expected, rc);
    }
}

int lntune_backward_threads(const lntune_pool *pool, int threads, int64_t rows) {
    if (!pool || threads < 1) return 1;
    if (threads > lntune_pool_threads(pool)) threads = lntune_pool_threads(pool);
    if (threads > rows) threads = rows > 0 ? (int)rows : 1;
    return threads;
}

int lntune_backward_run(lntune_pool *pool, lntune_backward_kernel_fn kernel,
                        const lntune_backward_kernel_args *args, int threads, float *dgamma_parts,
                        float *dbeta_parts) {
    threads = lntune_backward_threads(pool, threads, args->rows);
    const size_t bytes = (size_t)threads * (size_t)args->H * sizeof(float);
    if (dgamma_parts) memset(dgamma_parts, 0, bytes);
    if (dbeta_parts) memset(dbeta_parts, 0, bytes);
    if (threads == 1) return kernel(args, 0, args->rows, dgamma_parts, dbeta_parts);
    backward_job job = {kernel, args, dgamma_parts, dbeta_parts, LNTUNE_KERNEL_OK};
    lntune_pool_run(pool, threads, backward_task, &job);
    return atomic_load(&job.rc);
}

void lntune_backward_reduce(const float *parts, int n, int64_t H, void *out, int type) {
    for (int64_t j = 0; j < H; ++j) {
        float s = parts[j];
        for (int t = 1; t < n; ++t) s += parts[(int64_t)t * H + j];
        typed_store(type, out, j, s);
    }
}
