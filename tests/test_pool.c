/*
 * test_pool.c - the thread pool under concurrent callers (also built with ThreadSanitizer in CI,
 * LNTUNE_TSAN=ON):
 *  - every row of a call is run exactly once, whatever the thread count of the call (1 .. the
 *    pool's), including calls that use fewer threads than the pool has, whose idle workers must
 *    not run a later call's work twice;
 *  - four threads calling one pool at once all get their own rows done (a busy pool runs a call
 *    on its caller);
 *  - a kernel's error code comes back; pools are created and destroyed many times.
 * test_pool_tsan runs it under ThreadSanitizer, which reports the race of an idle worker reading
 * the next call's task (fixed in pool.c) on every run.
 */
#include "lntune.h"
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 96, CALLERS = 4, POOL = 4 };
static int calls = 3000; /* argv[1] overrides: fewer under ThreadSanitizer */

static int failures;

/* Counts each row it is given; y points at the caller's counters. */
static int count_rows(const lntune_kernel_args *a, int64_t begin, int64_t end) {
    atomic_int *seen = a->y;
    for (int64_t r = begin; r < end; ++r) atomic_fetch_add(&seen[r], 1);
    return a->H == 13 && begin == 0 ? LNTUNE_KERNEL_EUNSUPPORTED : LNTUNE_KERNEL_OK;
}

typedef struct {
    lntune_pool *pool;
    int id, bad;
} caller;

static void *call_many(void *p) {
    caller *c = p;
    atomic_int seen[ROWS];
    for (int i = 0; i < calls; ++i) {
        for (int r = 0; r < ROWS; ++r) atomic_init(&seen[r], 0);
        lntune_kernel_args a;
        memset(&a, 0, sizeof a);
        a.rows = ROWS;
        a.H = 1;
        a.y = seen;
        int threads = 1 + (i + c->id) % POOL;
        if (lntune_pool_run_kernel(c->pool, count_rows, &a, threads) != LNTUNE_KERNEL_OK) c->bad++;
        for (int r = 0; r < ROWS; ++r)
            if (atomic_load(&seen[r]) != 1) {
                c->bad++;
                break;
            }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && atoi(argv[1]) > 0) calls = atoi(argv[1]);
    lntune_pool *pool = NULL;
    if (lntune_pool_create(POOL, &pool) != LNTUNE_OK) return 1;

    caller one = {pool, 0, 0};
    call_many(&one);
    printf("%s: one caller, %d calls of 1..%d threads: every row once (%d bad)\n",
           one.bad ? "FAIL" : "ok", calls, POOL, one.bad);
    failures += one.bad != 0;

    pthread_t t[CALLERS];
    caller c[CALLERS];
    for (int i = 0; i < CALLERS; ++i) {
        c[i] = (caller){pool, i, 0};
        pthread_create(&t[i], NULL, call_many, &c[i]);
    }
    int bad = 0;
    for (int i = 0; i < CALLERS; ++i) {
        pthread_join(t[i], NULL);
        bad += c[i].bad;
    }
    printf("%s: %d callers at once: every row once (%d bad)\n", bad ? "FAIL" : "ok", CALLERS, bad);
    failures += bad != 0;

    atomic_int seen[ROWS];
    for (int r = 0; r < ROWS; ++r) atomic_init(&seen[r], 0);
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = ROWS;
    a.H = 13; /* count_rows fails on its first row range */
    a.y = seen;
    int rc = lntune_pool_run_kernel(pool, count_rows, &a, POOL);
    printf("%s: a kernel's error code comes back (%d)\n",
           rc == LNTUNE_KERNEL_EUNSUPPORTED ? "ok" : "FAIL", rc);
    failures += rc != LNTUNE_KERNEL_EUNSUPPORTED;
    lntune_pool_destroy(pool);

    for (int i = 0; i < 50; ++i) {
        lntune_pool *p = NULL;
        if (lntune_pool_create(1 + i % POOL, &p) != LNTUNE_OK) failures++;
        lntune_pool_destroy(p);
    }
    lntune_pool_destroy(NULL);
    printf("ok: 50 pools created and destroyed\n");
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
