/*
 * test_timing.c - the figures of an interleaved timing (gen/common/timing.c), from made-up samples:
 *  - without a reference, each candidate's median, min and max of its own samples;
 *  - with one, the median of the per-round ratios times the reference's median: a drift that
 *    scales every candidate of a round alike (here up to 3x) leaves the ratios exact, and a
 *    candidate's own slowdown in most rounds still shows;
 *  - the score: the mean of the middle 80% of the same per-round figures, which counts a phase
 *    of slow rounds that the median does not see, and drops a lone outlier that a mean would keep;
 *  - a failed candidate is left alone; a failed reference means raw medians for the others.
 */
#include "check.h"
#include "timing.h"

#include <math.h>
#include <string.h>

enum { N = 3, ROUNDS = 9 };

/* Round r of a machine whose speed drifts: slowdown 1, 3, 1.5, 2.5, ... */
static double drift(int r) {
    static const double d[ROUNDS] = {1.0, 3.0, 1.5, 2.5, 1.2, 2.8, 1.1, 2.0, 1.7};
    return d[r];
}

/* Candidate i's samples: base[i] ns on a quiet machine, times the round's drift. */
static void fill(double *samples, const double *base) {
    for (int i = 0; i < N; ++i)
        for (int r = 0; r < ROUNDS; ++r) samples[i * ROUNDS + r] = base[i] * drift(r);
}

static int near(double a, double b) {
    return fabs(a - b) <= 1e-9 * fabs(b);
}

/*
 * 20 rounds at a steady speed, the reference 1000 ns. Candidate 1 runs at 0.9 of it but at 1.8 in
 * a phase of 6 rounds: its median stays 0.9, its score (the middle 16) is (12 x 0.9 + 4 x 1.8) / 16
 * = 1.125. Candidate 2, also at 0.9, has one round at 10: dropped from the score.
 */
static void score_counts_phases(void) {
    enum { R = 20 };
    double s[3 * R];
    lntune_timed t[3];
    memset(t, 0, sizeof t);
    t[0].reference = 1;
    for (int r = 0; r < R; ++r) {
        s[r] = 1000.0;
        s[R + r] = (r >= 7 && r < 13 ? 1.8 : 0.9) * 1000.0;
        s[2 * R + r] = (r == 4 ? 10.0 : 0.9) * 1000.0;
    }
    lntune_timing_figures(t, 3, s, R, R);
    CHECK(near(t[1].median_ns, 900.0) && near(t[1].score_ns, 1125.0),
          "a slow phase: median %.1f (want 900), score %.1f (want 1125)", t[1].median_ns,
          t[1].score_ns);
    CHECK(near(t[2].median_ns, 900.0) && near(t[2].score_ns, 900.0),
          "a lone outlier: median %.1f, score %.1f (want 900 both)", t[2].median_ns, t[2].score_ns);
}

int main(void) {
    const double base[N] = {1000.0, 900.0, 1500.0}; /* candidate 0: the reference */
    double samples[N * ROUNDS];
    lntune_timed c[N];

    /* No reference: plain medians (sorted drift: median 1.7). */
    fill(samples, base);
    memset(c, 0, sizeof c);
    lntune_timing_figures(c, N, samples, ROUNDS, ROUNDS);
    for (int i = 0; i < N; ++i)
        CHECK(near(c[i].median_ns, base[i] * 1.7) && near(c[i].min_ns, base[i]) &&
                  near(c[i].max_ns, base[i] * 3.0),
              "no reference: candidate %d median %.1f min %.1f max %.1f (want %.1f, %.1f, %.1f)", i,
              c[i].median_ns, c[i].min_ns, c[i].max_ns, base[i] * 1.7, base[i], base[i] * 3.0);
    for (int i = 0; i < N; ++i) /* 9 rounds: nothing trimmed, the mean drift is 16.8 / 9 */
        CHECK(near(c[i].score_ns, base[i] * 16.8 / 9.0), "no reference: candidate %d score %.1f", i,
              c[i].score_ns);

    fill(samples, base);
    memset(c, 0, sizeof c);
    c[0].reference = 1;
    lntune_timing_figures(c, N, samples, ROUNDS, ROUNDS);
    CHECK(near(c[0].median_ns, base[0] * 1.7), "the reference keeps its own median (%.1f)",
          c[0].median_ns);
    for (int i = 1; i < N; ++i)
        CHECK(near(c[i].median_ns, base[i] / base[0] * c[0].median_ns) &&
                  near(c[i].min_ns, base[i]) && near(c[i].max_ns, base[i] * 3.0),
              "reference: candidate %d median %.1f = its ratio %.2f x the reference's median; "
              "min and max stay raw",
              i, c[i].median_ns, base[i] / base[0]);

    CHECK(near(c[0].score_ns, c[0].median_ns), "the reference's score is its median (%.1f)",
          c[0].score_ns);
    for (int i = 1; i < N; ++i)
        CHECK(near(c[i].score_ns, base[i] / base[0] * c[0].median_ns),
              "reference: candidate %d score %.1f = its ratio %.2f x the reference's median", i,
              c[i].score_ns, base[i] / base[0]);

    /* A real difference is kept: candidate 1 twice as slow as its base in 5 of 9 rounds
     * (ratios 1.8 there, 0.9 elsewhere) reads 1.8 x the reference's median. */
    for (int r = 0; r < ROUNDS; ++r)
        if (r % 2 == 0) samples[1 * ROUNDS + r] *= 2.0;
    memset(c, 0, sizeof c);
    c[0].reference = 1;
    lntune_timing_figures(c, N, samples, ROUNDS, ROUNDS);
    CHECK(near(c[1].median_ns, 1.8 * c[0].median_ns),
          "a slowdown of its own in most rounds shows (%.1f = 1.8 x %.1f)", c[1].median_ns,
          c[0].median_ns);

    score_counts_phases();

    /* A failed candidate is skipped; a failed reference leaves raw medians. */
    fill(samples, base);
    memset(c, 0, sizeof c);
    c[0].reference = 1;
    c[2].failed = 1;
    c[2].median_ns = -1.0;
    lntune_timing_figures(c, N, samples, ROUNDS, ROUNDS);
    CHECK(c[2].median_ns == -1.0, "a failed candidate's figures are not touched");
    fill(samples, base);
    memset(c, 0, sizeof c);
    c[0].reference = 1;
    c[0].failed = 1;
    c[1].reference = 1; /* the first reference that did not fail counts */
    lntune_timing_figures(c, N, samples, ROUNDS, ROUNDS);
    CHECK(near(c[2].median_ns, base[2] / base[1] * c[1].median_ns),
          "the next reference counts when the first failed (%.1f)", c[2].median_ns);
    return CHECK_SUMMARY();
}
