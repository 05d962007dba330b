/*
 * basic.c - the smallest app using liblntune: LayerNorm over a 4 x 768 batch with gamma and
 * beta, then RMSNorm in place. Tuned kernels are used where `lntune tune` measured this machine;
 * any other shape runs the built-in kernels (LNTUNE_LOG=debug says which).
 */
#include <lntune.h>

#include <math.h>
#include <stdio.h>

enum { ROWS = 4, H = 768 };

int main(void) {
    static float x[ROWS * H], y[ROWS * H], gamma[H], beta[H];
    for (int i = 0; i < ROWS * H; ++i) x[i] = (float)sin(0.01 * i) * 3.0f + 1.0f;
    for (int i = 0; i < H; ++i) gamma[i] = 1.0f, beta[i] = 0.5f;

    lntune *ctx = NULL;
    int rc = lntune_open(NULL, &ctx); /* $LNTUNE_DB, else ~/.cache/lntune/tune.db */
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune_open: %s\n", lntune_errstr(rc));
        return 1;
    }
    lntune_args a = {.rows = ROWS, .H = H, .x = x, .y = y, .gamma = gamma, .beta = beta};
    if ((rc = lntune_layernorm(ctx, &a)) != LNTUNE_OK) {
        fprintf(stderr, "lntune_layernorm: %s\n", lntune_errmsg(ctx));
        lntune_close(ctx);
        return 1;
    }
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < H; ++i) mean += y[i];
    mean /= H;
    for (int i = 0; i < H; ++i) var += (y[i] - mean) * (y[i] - mean);
    var /= H;
    printf("layernorm row 0: mean %.4f (want 0.5), variance %.4f (want 1)\n", mean, var);

    a.x = y; /* RMSNorm in place, no affine */
    a.gamma = a.beta = NULL;
    if ((rc = lntune_rmsnorm(ctx, &a)) != LNTUNE_OK) {
        fprintf(stderr, "lntune_rmsnorm: %s\n", lntune_errmsg(ctx));
        lntune_close(ctx);
        return 1;
    }
    double ms = 0.0;
    for (int i = 0; i < H; ++i) ms += (double)y[i] * y[i];
    printf("rmsnorm row 0: mean square %.4f (want 1)\n", ms / H);
    lntune_close(ctx);
    int ok = fabs(mean - 0.5) < 1e-3 && fabs(var - 1.0) < 1e-2 && fabs(ms / H - 1.0) < 1e-2;
    printf("%s (lntune %s)\n", ok ? "ok" : "WRONG", lntune_version());
    return ok ? 0 : 1;
}
