/*
 * dispatch_overhead.c - what lntune_layernorm costs over calling its kernel directly, at
 * rows = 1, H = 768 (one token of a small transformer: the call rate where overhead shows).
 *
 *   dispatch_overhead [CALLS]
 *
 * Both loops run the same built-in kernel on the same cached data; the difference per call is
 * the argument checks, the descriptor hash and the registry lookup. Each figure is the best of
 * many short rounds (2000 calls), alternating, so that interrupts, frequency ramps and other
 * processes (which come in bursts) do not count. Target: <= 50 ns.
 * Run with no database for this machine (e.g. LNTUNE_DB=/nonexistent) so that H = 768 takes
 * the built-in kernel that the direct loop calls.
 */
#define _POSIX_C_SOURCE 200809L
#include "lntune.h"
#include "lntune_kernel.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The built-in kernel liblntune dispatches H = 768 with gamma and beta to, when untuned (of the
 * level the process runs: runtime/builtin.h; op 0 LayerNorm, affine kind 1 gamma). */
lntune_kernel_fn lntune_builtin_kernel(int op, int affine);

enum { H = 768, ROUNDS = 501 };

/* Best-of-ROUNDS ns per call of the API and of the kernel directly, rounds interleaved so that
 * drift hits both alike. */
static void measure(lntune *ctx, int64_t h, long calls, double *api, double *direct) {
    static float x[H], y[H], gamma[H], beta[H];
    for (int i = 0; i < H; ++i) x[i] = (float)(i % 13) - 6.0f, gamma[i] = 1.0f, beta[i] = 0.0f;
    lntune_args a = {0};
    a.rows = 1, a.H = h, a.x = x, a.y = y, a.gamma = gamma, a.beta = beta;
    lntune_kernel_args ka = {0}; /* the same call, as the kernel takes it */
    ka.rows = 1, ka.H = h, ka.x_stride = ka.y_stride = h, ka.eps = 1e-5f;
    ka.x = x, ka.y = y, ka.gamma = gamma, ka.beta = beta;
    if (lntune_layernorm(ctx, &a) != LNTUNE_OK) { /* the first call resolves the shape */
        fprintf(stderr, "lntune_layernorm: %s\n", lntune_errmsg(ctx));
        exit(1);
    }
    const lntune_kernel_fn builtin = lntune_builtin_kernel(0, 1);
    *api = *direct = 1e300;
    for (int round = 0; round < ROUNDS; ++round) {
        double t0 = 1e9 * test_now_s();
        for (long i = 0; i < calls; ++i) lntune_layernorm(ctx, &a);
        double t1 = 1e9 * test_now_s();
        for (long i = 0; i < calls; ++i) builtin(&ka, 0, 1);
        double t2 = 1e9 * test_now_s();
        if ((t1 - t0) / calls < *api) *api = (t1 - t0) / calls;
        if ((t2 - t1) / calls < *direct) *direct = (t2 - t1) / calls;
    }
}

int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 2000;
    lntune *ctx = NULL;
    if (lntune_open(NULL, &ctx) != LNTUNE_OK) return 1;
    double api, direct;
    measure(ctx, H, calls, &api, &direct);
    printf("rows=1 H=%d, %ld calls x %d rounds (best round):\n", H, calls, ROUNDS);
    printf("  kernel called directly: %8.1f ns/call\n", direct);
    printf("  lntune_layernorm:       %8.1f ns/call\n", api);
    printf("  dispatch overhead:      %8.1f ns/call (target <= 50), ratio %.3f\n", api - direct,
           api / direct);
    /* The same at H = 1, where the kernel costs next to nothing and the overhead stands alone. */
    measure(ctx, 1, calls * 10, &api, &direct);
    printf("rows=1 H=1: direct %.1f ns, lntune_layernorm %.1f ns, overhead %.1f ns/call\n", direct,
           api, api - direct);
    lntune_close(ctx);
    return 0;
}
