/*
 * test_num_threads.c - LNTUNE_NUM_THREADS: a handle opened with it set to 1 runs large forward
 * and backward calls (past the built-ins' parallel threshold) without starting a thread, and
 * gets right answers; unset, or set to something that is not a positive integer, the same calls
 * start the pool where the machine has more than one core, and pinned to one CPU they do not.
 * Threads are counted in /proc/self/task.
 */
#define _GNU_SOURCE
#include "lntune.h"
#include "testutil.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

enum { ROWS = 600, H = 1024 }; /* 614400 elements: past the 2^18 where built-ins go parallel */

/* Opens a handle with LNTUNE_NUM_THREADS as given (NULL: unset), runs one large LayerNorm forward
 * and backward; returns the threads the process gained, or -1 if a result was wrong. */
static int threads_started(const char *setting) {
    if (setting)
        setenv("LNTUNE_NUM_THREADS", setting, 1);
    else
        unsetenv("LNTUNE_NUM_THREADS");
    const int before = test_thread_count();
    lntune *ctx = NULL;
    if (lntune_open(NULL, &ctx) != LNTUNE_OK) return -1;
    float *x = malloc(sizeof(float) * ROWS * H), *y = malloc(sizeof(float) * ROWS * H);
    float *dy = malloc(sizeof(float) * ROWS * H), *dx = malloc(sizeof(float) * ROWS * H);
    float *g = malloc(sizeof(float) * H), *dg = malloc(sizeof(float) * H);
    test_fill(x, (int64_t)ROWS * H, 3.0, 1.0);
    test_fill(dy, (int64_t)ROWS * H, 0.0, 1.0);
    test_fill(g, H, 1.0, 0.2);
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = ROWS, a.H = H, a.x = x, a.y = y, a.gamma = g;
    int ok = lntune_layernorm(ctx, &a) == LNTUNE_OK &&
             test_error(LNTUNE_OP_LAYERNORM, x, H, y, H, ROWS, H, g, NULL, 1e-5, NULL, NULL) <=
                 TOLERANCE;
    lntune_backward_args b;
    memset(&b, 0, sizeof b);
    b.rows = ROWS, b.H = H, b.x = x, b.dy = dy, b.gamma = g, b.dx = dx, b.dgamma = dg;
    for (int64_t i = 0; i < (int64_t)ROWS * H; ++i) dx[i] = NAN;
    ok = ok && lntune_layernorm_backward(ctx, &b) == LNTUNE_OK;
    for (int64_t i = 0; ok && i < (int64_t)ROWS * H; ++i) ok = isfinite(dx[i]);
    const int gained = test_thread_count() - before;
    lntune_close(ctx);
    free(x), free(y), free(dy), free(dx), free(g), free(dg);
    return ok ? gained : -1;
}

int main(void) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = threads_started("1");
    test_case(n == 0, "LNTUNE_NUM_THREADS=1: right results, %d thread(s) started (want 0)", n);
    if (cores > 1) {
        n = threads_started(NULL);
        test_case(n > 0, "unset, %ld cores: right results, %d thread(s) started (want > 0)", cores,
                  n);
        n = threads_started("0");
        test_case(n > 0, "LNTUNE_NUM_THREADS=0 is ignored: %d thread(s) started (want > 0)", n);
        n = threads_started("2x");
        test_case(n > 0, "LNTUNE_NUM_THREADS=2x is ignored: %d thread(s) started (want > 0)", n);
        /* Last: the process pinned to one CPU (taskset, a container's cpuset) runs on that CPU
         * alone, unset as it is: two threads there would share it (0.56-0.63x of the copy). */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
        if (sched_setaffinity(0, sizeof one, &one) == 0) {
            n = threads_started(NULL);
            test_case(n == 0, "pinned to one CPU, unset: %d thread(s) started (want 0)", n);
        } else {
            printf("cannot pin this process to one CPU: that case not run\n");
        }
    } else {
        printf("one core: the uncapped cases need two\n");
    }
    return test_summary();
}
