/*
 * pool.c - the persistent thread pool behind every multi-threaded kernel call.
 *
 * Work is published by bumping a generation counter; workers spin on it for a while (a kernel
 * call on a hot shape arrives every few microseconds) before sleeping on a condition variable.
 */
#include "pool.h"

#include "lntune.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { SPIN_ITERATIONS = 20000 };

struct lntune_pool {
    int threads;
    pthread_t *workers;
    pthread_mutex_t lock; /* guards sleeping and waking */
    pthread_cond_t wake;
    pthread_mutex_t busy; /* held by the caller whose work the pool runs */
    atomic_uint generation;
    atomic_int pending; /* workers that have not yet finished with the current generation */
    atomic_int stop;
    void (*task)(void *, int, int);
    void *arg;
    int n;
};

typedef struct {
    lntune_pool *pool;
    int index;
} worker_arg;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    lntune_pool *pool = wa->pool;
    int index = wa->index;
    free(wa);
    unsigned seen = 0; /* the generation at creation, even if work was posted before we ran */
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
               !atomic_load(&pool->stop)) {
            if (++spins < SPIN_ITERATIONS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pool->lock);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->wake, &pool->lock);
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load(&pool->stop)) return NULL;
        seen = gen;
        /* Every worker reports, not only the n that run a task: one that read n late could
         * otherwise read the next call's n and task before their generation, and run it twice. */
        if (index < pool->n) pool->task(pool->arg, index, pool->n);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
}

int lntune_pool_create(int threads, lntune_pool **out) {
    if (!out || threads < 1) return LNTUNE_EINVAL;
    *out = NULL;
    lntune_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return LNTUNE_ENOMEM;
    pool->threads = threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_mutex_init(&pool->busy, NULL);
    pthread_cond_init(&pool->wake, NULL);
    if (threads > 1 && !(pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers))) {
        lntune_pool_destroy(pool);
        return LNTUNE_ENOMEM;
    }
    for (int i = 1; i < threads; ++i) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (worker_arg){pool, i};
        if (!wa || pthread_create(&pool->workers[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            pool->threads = i; /* destroy joins the workers started so far */
            lntune_pool_destroy(pool);
            return LNTUNE_ERROR;
        }
    }
    *out = pool;
    return LNTUNE_OK;
}

void lntune_pool_destroy(lntune_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i < pool->threads; ++i) pthread_join(pool->workers[i - 1], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->busy);
    free(pool->workers);
    free(pool);
}

int lntune_pool_threads(const lntune_pool *pool) {
    return pool ? pool->threads : 1;
}

void lntune_pool_run(lntune_pool *pool, int n, void (*task)(void *arg, int i, int n), void *arg) {
    if (n > lntune_pool_threads(pool)) n = lntune_pool_threads(pool);
    if (n <= 1 || pthread_mutex_trylock(&pool->busy) != 0) {
        for (int i = 0; i < (n < 1 ? 1 : n); ++i) task(arg, i, n < 1 ? 1 : n);
        return;
    }
    pool->task = task;
    pool->arg = arg;
    pool->n = n;
    atomic_store(&pool->pending, pool->threads - 1); /* every worker acknowledges */
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    task(arg, 0, n);
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0) cpu_relax();
    pthread_mutex_unlock(&pool->busy);
}

typedef struct {
    lntune_kernel_fn kernel;
    const lntune_kernel_args *args;
    atomic_int rc;
} kernel_job;

static void kernel_task(void *p, int i, int n) {
    kernel_job *job = p;
    int64_t rows = job->args->rows;
    int64_t begin = rows * i / n, end = rows * (i + 1) / n;
    if (begin >= end) return;
    int rc = job->kernel(job->args, begin, end);
    if (rc != LNTUNE_KERNEL_OK) {
        int expected = LNTUNE_KERNEL_OK;
        atomic_compare_exchange_strong(&job->rc, &expected, rc);
    }
}

int lntune_pool_run_kernel(lntune_pool *pool, lntune_kernel_fn kernel,
                           const lntune_kernel_args *args, int threads) {
    if (threads <= 1 || !pool || args->rows < 2) return kernel(args, 0, args->rows);
    kernel_job job = {kernel, args, LNTUNE_KERNEL_OK};
    lntune_pool_run(pool, threads, kernel_task, &job);
    return atomic_load(&job.rc);
}
