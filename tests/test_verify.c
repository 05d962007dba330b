/*
 * test_verify.c - the verifier rejects what a wrong kernel does: a long fp32 accumulation chain,
 * an element left unwritten, a write between rows or past the end, NaN lost, an error code,
 * and passes a correct kernel. Without these the other tests could not fail.
 */
#include "lntune.h"
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

enum { CORRECT, NAIVE_FP32, SKIP_LAST, WRITE_GAP, WRITE_PAST_END, LOSE_NAN, RETURN_ERROR };
static int mode;

/* LayerNorm with double statistics (correct), or with one of the faults above. */
static int kernel(const lntune_kernel_args *a, int64_t r0, int64_t r1) {
    const int64_t H = a->H;
    if (mode == RETURN_ERROR) return LNTUNE_KERNEL_EUNSUPPORTED;
    for (int64_t r = r0; r < r1; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        float *y = (float *)a->y + r * a->y_stride;
        const float *g = a->gamma, *b = a->beta;
        double mean = 0, var = 0;
        float fsum = 0.0f, fsq = 0.0f;
        for (int64_t i = 0; i < H; ++i) {
            mean += x[i];
            fsum += x[i];
            fsq += x[i] * x[i];
        }
        mean /= (double)H;
        for (int64_t i = 0; i < H; ++i) var += (x[i] - mean) * (x[i] - mean);
        var /= (double)H;
        if (mode == NAIVE_FP32) { /* one fp32 chain, E[x^2] - mean^2 */
            mean = fsum / (float)H;
            var = fsq / (float)H - (float)mean * (float)mean;
        }
        if (mode == LOSE_NAN && isnan(var)) var = 1.0;
        if (mode == LOSE_NAN && isnan(mean)) mean = 0.0;
        float m = (float)mean, rs = (float)(1.0 / sqrt(var + a->eps));
        int64_t n = mode == SKIP_LAST && r == r1 - 1 ? H - 1 : H;
        for (int64_t i = 0; i < n; ++i)
            y[i] = (x[i] - m) * rs * (g ? g[i] : 1.0f) + (b ? b[i] : 0.0f);
        if (mode == WRITE_GAP && a->y_stride > H) y[H] = 0.0f;
        if (mode == WRITE_PAST_END && r == a->rows - 1) y[H] = 0.0f;
    }
    return LNTUNE_KERNEL_OK;
}

static void expect(lntune_verifier *v, int m, int want_ok, const char *want_text) {
    lntune_verify_result res;
    mode = m;
    int rc = lntune_verifier_check(v, kernel, 1, 0, 1, NULL, &res);
    int ok = rc == LNTUNE_OK;
    if (ok != want_ok || (!ok && !strstr(res.message, want_text))) {
        printf("FAIL mode %d: rc %d, message '%s' (expected '%s')\n", m, rc, res.message,
               want_text);
        failures++;
    } else {
        printf("ok: mode %d: %s\n", m, ok ? "passes" : res.message);
    }
}

int main(void) {
    const int64_t hs[] = {1, 17, 4096, 65536};
    lntune_verifier *v = NULL;
    if (lntune_verifier_create(LNTUNE_OP_LAYERNORM, hs, 4, 42, &v) != LNTUNE_OK) {
        printf("FAIL create\n");
        return 1;
    }
    expect(v, CORRECT, 1, "");
    expect(v, NAIVE_FP32, 0, "1000+randn");
    expect(v, SKIP_LAST, 0, "never wrote");
    expect(v, WRITE_GAP, 0, "wrote between rows");
    expect(v, WRITE_PAST_END, 0, "wrote past the end");
    expect(v, LOSE_NAN, 0, "NaN/Inf rows");
    expect(v, RETURN_ERROR, 0, "kernel returned 1");

    /* A fixed-H check needs inputs for that H; bad arguments are errors, not crashes. */
    lntune_verify_result res;
    mode = CORRECT;
    if (lntune_verifier_check(v, kernel, 1, 5, 1, NULL, &res) != LNTUNE_EINVAL) {
        printf("FAIL fixed H without inputs\n");
        failures++;
    }
    if (lntune_verifier_check(v, NULL, 1, 0, 1, NULL, &res) != LNTUNE_EINVAL ||
        lntune_verifier_create(LNTUNE_OP_LAYERNORM, hs, 0, 1, &v) != LNTUNE_EINVAL) {
        printf("FAIL bad arguments\n");
        failures++;
    }
    const int64_t zero = 0;
    lntune_verifier *bad = NULL;
    if (lntune_verifier_create(LNTUNE_OP_LAYERNORM, &zero, 1, 1, &bad) != LNTUNE_EINVAL) {
        printf("FAIL H=0 accepted\n");
        failures++;
    }
    lntune_verifier_destroy(v);
    lntune_verifier_destroy(NULL);
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
