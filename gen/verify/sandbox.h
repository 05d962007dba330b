/*
 * sandbox.h - runs generated kernels where their faults cannot reach the tuner: verification and
 * timing happen in a forked worker process with a time limit. A kernel that crashes (SIGSEGV,
 * SIGFPE, SIGILL, SIGBUS, ...), hangs, or calls exit is reported as that kernel's fault with the
 * signal or the timeout, and the rest of the batch is run again in a fresh worker.
 *
 * The kernels are loaded by the parent (lntune_jit_load only maps code, it runs none of it), so
 * the worker inherits them with its copy of memory and never touches the JIT. It creates its own
 * thread pool, since a forked child has only the forking thread.
 *
 * Liveness: before every kernel call the verifier and the timer call lntune_heartbeat,
 * which bumps a counter in memory shared with the parent. A worker whose counter stands still
 * for the limit (LNTUNE_SANDBOX_TIMEOUT seconds, default 10, plus 1 s per 100 MB a call moves)
 * is killed. LNTUNE_SANDBOX=off runs everything in process instead (for debuggers).
 */
#ifndef LNTUNE_SANDBOX_H
#define LNTUNE_SANDBOX_H

#include "lntune_kernel.h"
#include "pool.h"
#include "timing.h"
#include "verify.h"
#include "verify_backward.h"

#include <stddef.h>
#include <stdint.h>

typedef enum lntune_sandbox_state {
    LNTUNE_SANDBOX_DONE = 0,    /* ran to the end; its own result stands */
    LNTUNE_SANDBOX_CRASHED = 1, /* killed the worker or hung: message says how */
    LNTUNE_SANDBOX_LOST = 2,    /* not run: the worker was interrupted (SIGINT/SIGTERM/SIGHUP) */
} lntune_sandbox_state;

typedef struct lntune_sandbox_outcome {
    lntune_sandbox_state state;
    char message[200]; /* e.g. "crashed with SIGSEGV (Segmentation fault) while verified" */
} lntune_sandbox_outcome;

/* One kernel to verify, with what lntune_verifier_check needs. */
typedef struct lntune_sandbox_check {
    lntune_kernel_fn fn;
    lntune_backward_kernel_fn backward; /* instead of fn, for lntune_sandbox_verify_backward */
    int affine;
    int64_t fixed_h;
    int threads;
    /* out, when the outcome is DONE */
    int rc; /* of lntune_verifier_check */
    lntune_verify_result result;
} lntune_sandbox_check;

/* 1 unless LNTUNE_SANDBOX is "off" or "0". */
int lntune_sandbox_enabled(void);

/*
 * lntune_verifier_check for each of c[0..n), in a worker whose own pool has as many threads as
 * pool (the parent's, used directly when the sandbox is off).
 */
void lntune_sandbox_verify(lntune_verifier *v, lntune_sandbox_check *c, size_t n, lntune_pool *pool,
                           lntune_sandbox_outcome *out);

/* The same for backward kernels (c[k].backward): lntune_backward_verifier_check. */
void lntune_sandbox_verify_backward(lntune_backward_verifier *v, lntune_sandbox_check *c, size_t n,
                                    lntune_pool *pool, lntune_sandbox_outcome *out);

/*
 * lntune_time_interleaved of c[0..n) in a worker. The worker times on its own copies of the
 * buffers of args (x: rows at x_stride, y: rows at y_stride, as floats); every pointer of a
 * candidate's own args or backward call that lies in them is moved to the copy, so a problem's
 * large buffers belong inside those two. A candidate that crashes is marked failed with
 * its outcome, and the others are timed again without it.
 */
void lntune_sandbox_time(lntune_timed *c, size_t n, const lntune_kernel_args *args,
                         lntune_pool *pool, int min_rounds, double budget_ns,
                         lntune_sandbox_outcome *out);

#endif /* LNTUNE_SANDBOX_H */
