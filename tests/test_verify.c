/*
 * test_verify.c - the verifier rejects what a wrong kernel does: a long fp32 accumulation chain,
 * an element left unwritten, a write between rows or past the end, NaN lost, an error code,
 * and passes a correct kernel. Without these the other tests could not fail. The same for
 * kernels of fp16/bf16 type tuples: truncation instead of rounding, a 16-bit mean, fp32 written
 * into a 16-bit y, an element skipped, misalignment ignored. And a kernel whose rows' bits depend
 * on the rows that share the call (batch invariance).
 */
#include "half_ref.h"
#include "lntune.h"
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

enum {
    CORRECT,
    NAIVE_FP32,
    SKIP_LAST,
    WRITE_GAP,
    WRITE_PAST_END,
    LOSE_NAN,
    RETURN_ERROR,
    BATCH_DEPENDENT
};
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
        /* BATCH_DEPENDENT: the odd rows of each call scale by rs * gamma, rounded once more
         * or less than the others: within an ulp, but other bits for a row in another call. */
        const int regroup = mode == BATCH_DEPENDENT && (r - r0) % 2 == 1;
        for (int64_t i = 0; i < n; ++i)
            y[i] = regroup ? (x[i] - m) * (rs * (g ? g[i] : 1.0f)) + (b ? b[i] : 0.0f)
                           : (x[i] - m) * rs * (g ? g[i] : 1.0f) + (b ? b[i] : 0.0f);
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

/* The typed verifier with all-fp32 types gives the same results as the fp32 one, fault by fault. */
static void expect_same(lntune_verifier *v, lntune_verifier *typed_f32, int m) {
    lntune_verify_result a, b;
    mode = m;
    int ra = lntune_verifier_check(v, kernel, 1, 0, 1, NULL, &a);
    int rb = lntune_verifier_check(typed_f32, kernel, 1, 0, 1, NULL, &b);
    if (ra != rb || a.max_error != b.max_error || a.worst_h != b.worst_h || a.cases != b.cases ||
        strcmp(a.worst, b.worst) != 0 || strcmp(a.message, b.message) != 0) {
        printf("FAIL mode %d: fp32 verifier rc %d, %.17g, '%s'; typed f32/f32/f32 rc %d, %.17g, "
               "'%s'\n",
               m, ra, a.max_error, a.message, rb, b.max_error, b.message);
        failures++;
    } else {
        printf("ok: mode %d: typed f32 verifier agrees (rc %d, max error %.3g)\n", m, ra,
               a.max_error);
    }
}

/* --- kernels of other type tuples --- */

enum { T_CORRECT, T_TRUNCATE, T_MEAN_16, T_FP32_INTO_16, T_SKIP, T_IGNORE_MISALIGN, T_SPY };
static int tmode;
/* T_SPY: per whole call (case), the fewest distinct x values in a row, counted up to 8. */
static int spy_calls, spy_distinct[64];
static lntune_types ktypes; /* the tuple the typed kernel is built for */
static lntune_op kop;

/* Round toward zero: the correctly rounded value, one step nearer zero when it is farther out. */
static uint16_t truncated(int type, float v) {
    uint16_t h = type == LNTUNE_TYPE_F16 ? lntune_ref_f32_to_f16(v) : lntune_ref_f32_to_bf16(v);
    if (isfinite(v) && (h & 0x7fff) && fabs(lntune_ref_load(type, &h, 0)) > fabs((double)v)) --h;
    return h;
}

/* v rounded to bf16 when type is bf16, else to fp16. */
static double rounded_to_16(int type, double v) {
    const int t = type == LNTUNE_TYPE_BF16 ? LNTUNE_TYPE_BF16 : LNTUNE_TYPE_F16;
    uint16_t h;
    lntune_ref_store(t, &h, 0, (float)v);
    return lntune_ref_load(t, &h, 0);
}

/* Norm of ktypes with double statistics and an fp32 y rounded once to y's type, or a fault. */
static int typed_kernel(const lntune_kernel_args *a, int64_t r0, int64_t r1) {
    const lntune_types t = ktypes;
    const int64_t H = a->H;
    const size_t xsize = lntune_type_size(t.x);
    const size_t ysize = tmode == T_FP32_INTO_16 ? 4 : lntune_type_size(t.y);
    const unsigned char *xb = a->x;
    unsigned char *yb = a->y;
    if (tmode == T_IGNORE_MISALIGN) { /* as if x and y were 16-byte aligned */
        xb = (const unsigned char *)((uintptr_t)xb & ~(uintptr_t)15);
        yb = (unsigned char *)((uintptr_t)yb & ~(uintptr_t)15);
    }
    for (int64_t r = r0; r < r1; ++r) {
        const void *x = xb + r * a->x_stride * (int64_t)xsize;
        void *y = yb + r * a->y_stride * (int64_t)ysize;
        double mean = 0, var = 0;
        if (kop == LNTUNE_OP_LAYERNORM) {
            for (int64_t i = 0; i < H; ++i) mean += lntune_ref_load(t.x, x, i);
            mean /= (double)H;
        }
        if (tmode == T_MEAN_16) mean = rounded_to_16(t.x, mean);
        /* Whole calls only: the batch-invariance check's calls of some rows repeat a case. */
        if (tmode == T_SPY && spy_calls < 64 && r0 == 0 && r1 == a->rows) {
            double seen[8];
            int n = 0;
            for (int64_t i = 0; i < H && n < 8; ++i) {
                const double xi = lntune_ref_load(t.x, x, i);
                int k = 0;
                while (k < n && seen[k] != xi) ++k;
                if (k == n) seen[n++] = xi;
            }
            if (r == r0 || n < spy_distinct[spy_calls]) spy_distinct[spy_calls] = n;
        }
        for (int64_t i = 0; i < H; ++i) {
            const double d = lntune_ref_load(t.x, x, i) - mean;
            var += d * d;
        }
        var /= (double)H;
        const float m = (float)mean, rs = (float)(1.0 / sqrt(var + a->eps));
        for (int64_t i = 0; i < H; ++i) {
            if (tmode == T_SKIP && r == r1 - 1 && i == H / 2) continue;
            const float g = a->gamma ? (float)lntune_ref_load(t.params, a->gamma, i) : 1.0f;
            const float b = a->beta ? (float)lntune_ref_load(t.params, a->beta, i) : 0.0f;
            const float v = ((float)lntune_ref_load(t.x, x, i) - m) * rs * g + b;
            if (tmode == T_FP32_INTO_16)
                ((float *)y)[i] = v;
            else if (tmode == T_TRUNCATE && t.y != LNTUNE_TYPE_F32)
                ((uint16_t *)y)[i] = truncated(t.y, v);
            else
                lntune_ref_store(t.y, y, i, v);
        }
    }
    if (tmode == T_SPY && r0 == 0 && r1 == a->rows) spy_calls++;
    return LNTUNE_KERNEL_OK;
}

/*
 * Rounded to a 16-bit x, the large-mean data sets (1 and 2, cases 3..8 of an H) must keep a
 * spread: at H = 4096 every row at least 4 distinct values (bf16 with fp32's spreads keeps 2 or 3).
 */
static void datasets_keep_spread(lntune_types t) {
    const int64_t h = 4096;
    char name[32];
    lntune_types_format(t, name, sizeof name);
    lntune_verifier *v = NULL;
    lntune_verify_result res;
    ktypes = t;
    kop = LNTUNE_OP_LAYERNORM;
    tmode = T_SPY;
    spy_calls = 0;
    int rc = lntune_verifier_create_typed(LNTUNE_OP_LAYERNORM, t, &h, 1, 42, &v);
    if (!rc) rc = lntune_verifier_check(v, typed_kernel, 1, 0, 1, NULL, &res);
    lntune_verifier_destroy(v);
    int fewest = 8;
    for (int c = 3; c < 9 && c < spy_calls; ++c)
        if (spy_distinct[c] < fewest) fewest = spy_distinct[c];
    if (rc || spy_calls != 15 || fewest < 4) {
        printf("FAIL %s spread: rc %d, %d cases, a row of %d distinct values\n", name, rc,
               spy_calls, fewest);
        failures++;
    } else {
        printf("ok: %s: large-mean rows keep >= %d distinct values\n", name, fewest);
    }
}

/* lntune_verify_element's rule at its edges (verify.h), with unit 1 unless said. */
static void element_rule(void) {
    const int F32 = LNTUNE_TYPE_F32, F16 = LNTUNE_TYPE_F16, BF16 = LNTUNE_TYPE_BF16;
    const double tol = LNTUNE_VERIFY_TOLERANCE, step = 1.0 / 128; /* bf16's ulp at 1 */
    struct {
        int type;
        double ref, got, unit;
        int ok;
        const char *what;
    } cases[] = {
        {F32, 1.0, 1.0 + tol / 2, 1.0, 1, "fp32: within 2^-20 of the unit"},
        {F32, 1.0, 1.0 + tol * 2, 1.0, 0, "fp32: beyond 2^-20 of the unit"},
        {F32, 1e38, INFINITY, 1.0, 0, "fp32: Inf for a finite reference"},
        {BF16, 1.0 + step / 2, 1.0, 1.0, 1, "bf16: a tie, rounded down"},
        {BF16, 1.0 + step / 2, 1.0 + step, 1.0, 1, "bf16: a tie, rounded up"},
        {BF16, 1.0 + step * 0.75, 1.0, 1.0, 0, "bf16: truncated by 3/4 ulp"},
        {BF16, 1.0 + step * 0.75, 1.0 + step, 1.0, 1, "bf16: rounded to nearest"},
        {BF16, 1.0 - step / 8, 1.0 + step, 1.0, 0, "bf16: one ulp above the binade"},
        {F16, 70000.0, INFINITY, 1.0, 1, "fp16: past 65520, Inf"},
        {F16, 70000.0, 65504.0, 1.0, 0, "fp16: past 65520, 65504"},
        {F16, 70000.0, -INFINITY, 1.0, 0, "fp16: past 65520, -Inf"},
        {F16, -70000.0, -INFINITY, 1.0, 1, "fp16: past -65520, -Inf"},
        {F16, 65530.0, 65504.0, 1.0, 0, "fp16: 65530 must overflow"},
        {F16, 65510.0, INFINITY, 1.0, 1, "fp16: 65510 may overflow"},
        {F16, 65510.0, 65504.0, 1.0, 1, "fp16: 65510 may give 65504"},
        {F16, 65500.0, INFINITY, 1.0, 0, "fp16: 65500 must not overflow"},
        {F16, 65500.0, 65504.0, 1.0, 1, "fp16: 65500 gives 65504"},
        {F16, 1.5 / 16777216, 1.0 / 16777216, 1e-12, 1, "fp16: subnormal tie"},
        {F16, 1.5 / 16777216, 0.0, 1e-12, 0, "fp16: subnormal off by 1.5 steps"},
        {F16, NAN, NAN, 1.0, 1, "fp16: NaN for NaN"},
        {F16, NAN, 0.0, 1.0, 0, "fp16: a number for NaN"},
        {F16, -INFINITY, -INFINITY, 1.0, 1, "fp16: -Inf for -Inf"},
        {F16, -INFINITY, -65504.0, 1.0, 0, "fp16: -65504 for -Inf"},
        {F16, 1.0, NAN, 1.0, 0, "fp16: NaN for a number"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        double err = -1.0;
        int ok =
            lntune_verify_element(cases[k].type, cases[k].ref, cases[k].got, cases[k].unit, &err);
        /* The reported error passes exactly when the element does (finite values). */
        int err_agrees = !isfinite(cases[k].got) || !isfinite(cases[k].ref) || ok == (err <= tol);
        if (ok != cases[k].ok || !err_agrees) {
            printf("FAIL element rule, %s: %d, error %.3g\n", cases[k].what, ok, err);
            failures++;
        } else {
            printf("ok: element rule, %s: %s (error %.3g)\n", cases[k].what,
                   ok ? "passes" : "fails", err);
        }
    }
}

/* One verifier per op and tuple, made on first use (inputs take longer to make than to check). */
static lntune_verifier *typed_verifiers[2][64];

static lntune_verifier *typed_verifier(lntune_op op, lntune_types t) {
    static const int64_t hs[] = {1, 17, 4096, 65536};
    lntune_verifier **v = &typed_verifiers[op][lntune_types_packed(t)];
    if (!*v && lntune_verifier_create_typed(op, t, hs, 4, 42, v) != LNTUNE_OK) *v = NULL;
    return *v;
}

static void expect_typed(lntune_op op, lntune_types t, int m, int want_ok, const char *want_text) {
    char name[32];
    lntune_types_format(t, name, sizeof name);
    lntune_verifier *v = typed_verifier(op, t);
    if (!v) {
        printf("FAIL create %s\n", name);
        failures++;
        return;
    }
    lntune_verify_result res;
    ktypes = t;
    kop = op;
    tmode = m;
    int rc = lntune_verifier_check(v, typed_kernel, 1, 0, 1, NULL, &res);
    int ok = rc == LNTUNE_OK;
    if (ok != want_ok || (!ok && !strstr(res.message, want_text))) {
        printf("FAIL %s %s mode %d: rc %d, message '%s' (expected '%s')\n", lntune_op_name(op),
               name, m, rc, res.message, want_text);
        failures++;
    } else {
        printf("ok: %s %s mode %d: %s (max error %.3g)\n", lntune_op_name(op), name, m,
               ok ? "passes" : res.message, res.max_error);
    }
}

static void typed_kernels(void) {
    const lntune_op ln = LNTUNE_OP_LAYERNORM;
    const uint8_t F32 = LNTUNE_TYPE_F32, F16 = LNTUNE_TYPE_F16, BF16 = LNTUNE_TYPE_BF16;
    const lntune_types bf16 = {BF16, BF16, BF16, 0}, f16_f32 = {F16, F32, F32, 0};
    const lntune_types f32_bf16 = {F32, BF16, F32, 0}, f16 = {F16, F16, F16, 0};
    const lntune_types tuples[] = {bf16, f16_f32, f32_bf16, f16};
    for (size_t k = 0; k < sizeof tuples / sizeof tuples[0]; ++k) {
        expect_typed(ln, tuples[k], T_CORRECT, 1, "");
        expect_typed(LNTUNE_OP_RMSNORM, tuples[k], T_CORRECT, 1, "");
        expect_typed(ln, tuples[k], T_SKIP, 0, "never wrote y[6]");
        expect_typed(ln, tuples[k], T_IGNORE_MISALIGN, 0, "misaligned by");
        datasets_keep_spread(tuples[k]);
    }
    /* Truncating instead of rounding to nearest even (off by up to a whole ulp): wrong values. */
    expect_typed(ln, bf16, T_TRUNCATE, 0, ", reference ");
    expect_typed(ln, f32_bf16, T_TRUNCATE, 0, ", reference ");
    expect_typed(ln, f16, T_TRUNCATE, 0, ", reference ");
    /* The mean rounded to the 16-bit input type: wrong values. */
    expect_typed(ln, bf16, T_MEAN_16, 0, ", reference ");
    expect_typed(ln, f16_f32, T_MEAN_16, 0, ", reference ");
    expect_typed(ln, f16, T_MEAN_16, 0, ", reference ");
    /* fp32 written into a 16-bit y runs past its end. */
    expect_typed(ln, bf16, T_FP32_INTO_16, 0, "wrote past the end of y");
    expect_typed(ln, f32_bf16, T_FP32_INTO_16, 0, "wrote past the end of y");
    expect_typed(ln, f16, T_FP32_INTO_16, 0, "wrote past the end of y");
    /* The misaligned layout moves each tensor by one element of its own type. */
    expect_typed(ln, f16_f32, T_IGNORE_MISALIGN, 0, "x misaligned by 2 bytes, y by 4");
    expect_typed(ln, bf16, T_IGNORE_MISALIGN, 0, "x and y misaligned by 2 bytes");
    for (int o = 0; o < 2; ++o)
        for (int k = 0; k < 64; ++k) lntune_verifier_destroy(typed_verifiers[o][k]);
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
    expect(v, BATCH_DEPENDENT, 0, "batch invariance");

    const lntune_types all_f32 = {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0};
    lntune_verifier *typed_f32 = NULL;
    if (lntune_verifier_create_typed(LNTUNE_OP_LAYERNORM, all_f32, hs, 4, 42, &typed_f32)) {
        printf("FAIL create typed f32\n");
        return 1;
    }
    for (int m = CORRECT; m <= RETURN_ERROR; ++m) expect_same(v, typed_f32, m);
    lntune_verifier_destroy(typed_f32);

    typed_kernels();
    element_rule();

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
    const lntune_types unknown = {LNTUNE_TYPE_F32, LNTUNE_TYPE_Y_COUNT, LNTUNE_TYPE_F32, 0};
    if (lntune_verifier_create_typed(LNTUNE_OP_LAYERNORM, unknown, hs, 1, 1, &bad) !=
        LNTUNE_EINVAL) {
        printf("FAIL unknown y type accepted\n");
        failures++;
    }
    lntune_verifier_destroy(v);
    lntune_verifier_destroy(NULL);
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
