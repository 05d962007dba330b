/*
 * exported/cpu/pool.c - the thread pool of the file `lntune export` writes (lntune_kernels.c),
 * copied there after the kernels and the tables. It needs <pthread.h>, <stdatomic.h>,
 * lntune_kernel.h and LNTUNE_KERNELS_MAX_THREADS, which the file defines before it.
 */
/* A persistent pool: workers start on the first multi-threaded call. Between calls they
 * spin on the generation counter for a while (the next call of a hot shape comes within
 * microseconds, and waking a sleeping thread costs tens of them), then sleep on a condition
 * variable, as liblntune's pool does. A call that finds the pool busy runs on its own
 * thread. A job is split in n parts; part i runs on worker i (part 0 on the caller). Every
 * started worker acknowledges every call, so that none reads the next call's job as this
 * one's. */
typedef int (*part_fn)(const void *job, int i, int n);
enum { POOL_SPINS = 20000 };

static struct {
    pthread_mutex_t lock, busy; /* lock: sleeping and waking; busy: held by the caller */
    pthread_cond_t work;
    atomic_uint generation;
    atomic_int pending, rc;
    int started, n; /* started: written only by the caller holding busy */
    part_fn part;
    const void *job;
    unsigned born[LNTUNE_KERNELS_MAX_THREADS];
} pool = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          0,
          0,
          0,
          0,
          0,
          NULL,
          NULL,
          {0}};

static void pool_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The generation after seen: spins on the counter a while, then sleeps until it moves (it
 * moves once more only after this worker has acknowledged). */
static unsigned next_generation(unsigned seen) {
    for (int spins = 0; spins < POOL_SPINS; ++spins) {
        const unsigned g = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (g != seen) return g;
        pool_relax();
    }
    pthread_mutex_lock(&pool.lock);
    while (atomic_load(&pool.generation) == seen) pthread_cond_wait(&pool.work, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    return atomic_load_explicit(&pool.generation, memory_order_acquire);
}

static void *worker(void *p) {
    const int index = (int)(intptr_t)p;
    unsigned seen = pool.born[index];
    for (;;) {
        seen = next_generation(seen);
        if (index < pool.n) {
            int rc = pool.part(pool.job, index, pool.n), ok = LNTUNE_KERNEL_OK;
            if (rc != LNTUNE_KERNEL_OK) atomic_compare_exchange_strong(&pool.rc, &ok, rc);
        }
        atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_release);
    }
    return NULL;
}

/* Runs job in up to threads parts (at most rows); *used: the parts it ran in. */
static int run_parts(part_fn part, const void *job, int threads, int64_t rows, int *used) {
    if (threads > LNTUNE_KERNELS_MAX_THREADS) threads = LNTUNE_KERNELS_MAX_THREADS;
    if (threads > rows) threads = rows > 0 ? (int)rows : 1;
    if (threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        *used = 1;
        return part(job, 0, 1);
    }
    while (pool.started < threads - 1) {
        pthread_t t;
        const int index = pool.started + 1;
        pool.born[index] = atomic_load(&pool.generation);
        if (pthread_create(&t, NULL, worker, (void *)(intptr_t)index) != 0) break;
        pthread_detach(t);
        ++pool.started;
    }
    if (threads > pool.started + 1) threads = pool.started + 1;
    pool.part = part, pool.job = job, pool.n = threads;
    atomic_store(&pool.rc, LNTUNE_KERNEL_OK);
    atomic_store(&pool.pending, pool.started);
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    int rc = part(job, 0, threads);
    while (atomic_load_explicit(&pool.pending, memory_order_acquire) > 0) pool_relax();
    if (rc == LNTUNE_KERNEL_OK) rc = atomic_load(&pool.rc);
    pthread_mutex_unlock(&pool.busy);
    *used = threads;
    return rc;
}
