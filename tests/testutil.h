/*
 * testutil.h - what every runtime test needs: random data, the float64 reference check in the
 * verifier's error unit (see gen/verify/verify.h), and a case counter that prints each case.
 */
#ifndef LNTUNE_TESTUTIL_H
#define LNTUNE_TESTUTIL_H

#include "randn.h"
#include "reference.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TOLERANCE (1.0 / (1 << 20))

static int test_failures, test_cases;

/* Prints one case and its outcome; returns ok so callers can chain. */
static int test_case(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int test_case(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    ++test_cases;
    if (!ok) ++test_failures;
    fflush(stdout);
    return ok;
}

static int test_summary(void) __attribute__((unused));
static int test_summary(void) {
    printf("%d cases, %d failed\n", test_cases, test_failures);
    return test_failures ? 1 : 0;
}

/* The runtime tests' draws (randn.h's generator on one state for the program). */
static uint64_t test_rng = 0x1234567887654321ULL;

/* n floats of offset + spread * N(0, 1). */
static void test_fill(float *p, int64_t n, double offset, double spread) __attribute__((unused));
static void test_fill(float *p, int64_t n, double offset, double spread) {
    for (int64_t i = 0; i < n; ++i) p[i] = (float)(offset + spread * test_randn(&test_rng));
}

/*
 * The largest error of y against the reference over rows x H (strides in elements), in units of
 * the output's rounding terms; mean/rstd (may be NULL) are checked relative to their size.
 * Returns INFINITY for any non-finite output.
 */
static double test_error(lntune_op op, const float *x, int64_t xs, const float *y, int64_t ys,
                         int64_t rows, int64_t H, const float *gamma, const float *beta, double eps,
                         const float *mean, const float *rstd) __attribute__((unused));
static double test_error(lntune_op op, const float *x, int64_t xs, const float *y, int64_t ys,
                         int64_t rows, int64_t H, const float *gamma, const float *beta, double eps,
                         const float *mean, const float *rstd) {
    double *z = malloc((size_t)H * sizeof *z), worst = 0.0;
    if (!z) return INFINITY;
    for (int64_t r = 0; r < rows; ++r) {
        double m, rs;
        lntune_reference_row(op, x + r * xs, H, eps, z, &m, &rs);
        for (int64_t i = 0; i < H; ++i) {
            double g = gamma ? gamma[i] : 1.0, b = beta ? beta[i] : 0.0;
            double want = z[i] * g + b, got = y[r * ys + i];
            double unit = (fabs(m) * rs + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
            double err = isfinite(got) ? fabs(got - want) / unit : INFINITY;
            if (!(err <= worst)) worst = err;
        }
        if (mean && fabs(mean[r] - m) > 1e-5 * (fabs(m) + 1.0 / rs)) worst = INFINITY;
        if (rstd && fabs(rstd[r] - rs) > 1e-5 * rs) worst = INFINITY;
    }
    free(z);
    return worst;
}

/* The threads of this process (/proc/self/task), -1 where it cannot tell. */
static int test_thread_count(void) __attribute__((unused));
static int test_thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

#endif /* LNTUNE_TESTUTIL_H */
