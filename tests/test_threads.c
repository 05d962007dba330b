/*
 * test_threads.c - 8 threads call one handle at once, each cycling through its own shapes, so
 * first calls (registry inserts), repeat calls (lock-free lookups), pool use and messages all
 * overlap. Every result is checked against the reference. Built a second time with
 * ThreadSanitizer (test_threads_tsan) to catch races that happen to give right answers.
 */
#include "lntune.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

enum { THREADS = 8, ROUNDS = 6 };

static lntune *ctx;
static atomic_int failures;

static void *worker(void *p) {
    int id = (int)(intptr_t)p;
    uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
    for (int round = 0; round < ROUNDS; ++round) {
        int64_t H = 64 * (id + 1) + round % 3;   /* per-thread shapes, some shared across rounds */
        int64_t rows = round % 2 ? 3 : 600 + id; /* 600 x H crosses the pool threshold */
        int op = (id + round) % 2;
        float *x = malloc((size_t)(rows * H) * sizeof *x), *y = malloc((size_t)(rows * H) * 4);
        float *gamma = malloc((size_t)H * sizeof *gamma);
        for (int64_t i = 0; i < rows * H; ++i) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = (float)((double)(rng >> 40) / (1 << 24) - 0.5) * 4.0f;
        }
        for (int64_t i = 0; i < H; ++i) gamma[i] = 1.0f + 0.01f * (float)(i % 7);
        lntune_args a = {0};
        a.rows = rows, a.H = H, a.x = x, a.y = y, a.gamma = round % 3 ? gamma : NULL;
        int rc = op ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
        double err =
            rc ? INFINITY
               : test_error((lntune_op)op, x, H, y, H, rows, H, a.gamma, NULL, 1e-5, NULL, NULL);
        if (rc != LNTUNE_OK || !(err <= TOLERANCE)) {
            atomic_fetch_add(&failures, 1);
            printf("FAIL: thread %d round %d: %s H=%lld rows=%lld: rc %d error %.3g\n", id, round,
                   op ? "rmsnorm" : "layernorm", (long long)H, (long long)rows, rc, err);
        }
        /* A bad call on every thread: messages must not race with each other. */
        a.H = -1;
        if (lntune_layernorm(ctx, &a) != LNTUNE_EINVAL) atomic_fetch_add(&failures, 1);
        free(x), free(y), free(gamma);
    }
    return NULL;
}

int main(void) {
    int rc = lntune_open(NULL, &ctx);
    if (!test_case(rc == LNTUNE_OK, "open: rc %d", rc)) return 1;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; ++i) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
    test_case(atomic_load(&failures) == 0,
              "%d threads x %d rounds of different shapes at once: %d wrong results", THREADS,
              ROUNDS, atomic_load(&failures));
    lntune_close(ctx);
    return test_summary();
}
