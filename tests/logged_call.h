/*
 * logged_call.h - one call of the runtime through a new handle on a database, its debug log
 * captured: what the tests of loading tuned code (test_code_loading, test_wisdom_rebuild) make
 * before reading the log.
 */
#ifndef LNTUNE_TEST_LOGGED_CALL_H
#define LNTUNE_TEST_LOGGED_CALL_H

#include "lntune.h"
#include "log_lines.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* op (LNTUNE_OP_LAYERNORM or _RMSNORM) over rows x H with gamma, and beta when with_beta, through
 * a new handle on path, its stderr (the debug log) to log; 0 when the answer matches the float64
 * reference, else 1 (rc and the error printed). */
static int logged_call(const char *path, const char *log, int op, int64_t rows, int64_t H,
                       int with_beta) {
    float *x = malloc((size_t)(rows * H) * sizeof *x), *y = malloc((size_t)(rows * H) * sizeof *y);
    float *g = malloc((size_t)H * sizeof *g), *b = with_beta ? malloc((size_t)H * sizeof *b) : NULL;
    if (!x || !y || !g || (with_beta && !b)) exit(1);
    test_fill(x, rows * H, 10.0, 3.0);
    test_fill(g, H, 1.0, 0.2);
    if (b) test_fill(b, H, 0.0, 0.5);
    const int saved = log_capture_begin(log);
    lntune *ctx = NULL;
    int rc = lntune_open(path, &ctx);
    lntune_args a = {0};
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.gamma = g, a.beta = b;
    if (rc == LNTUNE_OK)
        rc = op == LNTUNE_OP_LAYERNORM ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
    lntune_close(ctx);
    if (saved >= 0) log_capture_end(saved);
    const double err = rc ? INFINITY : test_error(op, x, H, y, H, rows, H, g, b, 1e-5, NULL, NULL);
    const int bad = rc != LNTUNE_OK || !(err <= TOLERANCE);
    if (bad) printf("      rc %d, error %.3g\n", rc, err);
    free(x), free(y), free(g), free(b);
    return bad;
}

#endif /* LNTUNE_TEST_LOGGED_CALL_H */
