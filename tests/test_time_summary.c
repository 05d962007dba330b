/*
 * test_time_summary.c - the figures lntune_time_variants computes for `lntune time` to print
 * beside each variant's times (test_time_variants checks the times). Checks: the better copy's
 * GB/s is bytes / its median; each variant's ratio to the copy is the copy's median / its own;
 * the spreads are the slowest / the fastest - 1 by median and by score, 0 for one variant; with
 * the test templates (LNTUNE_TEST_TEMPLATES: tests/templates/tuner and common) a wrong variant
 * is counted, and the figures of what was not timed are NAN.
 */
#include "check.h"
#include "lntune.h"
#include "time_variants.h"

#include <math.h>
#include <stdlib.h>

static int near(double a, double b) {
    return fabs(a - b) <= 1e-12 * fabs(b);
}

int main(void) {
    const char *pair[] = {"vec=4", "vec=8,acc=2"};
    lntune_time_result r;
    char err[1024] = "";
    lntune_time_config c = {"rmsnorm", {.rows = 16, .H = 64}, pair, 2, 0.3};
    int rc = lntune_time_variants(&c, &r, err, sizeof err);
    const lntune_time_entry *a = &r.v[0], *b = &r.v[1];
    CHECK(rc == LNTUNE_OK && r.wrong == 0 && near(r.copy_gbps, r.bytes / r.copy_ns) &&
              near(a->ratio_to_copy, r.copy_ns / a->median_ns) &&
              near(b->ratio_to_copy, r.copy_ns / b->median_ns),
          "copy %.2f GB/s; ratios %.2fx %.2fx: %s", r.copy_gbps, a->ratio_to_copy, b->ratio_to_copy,
          err);
    CHECK(
        near(r.spread + 1.0, fmax(a->median_ns, b->median_ns) / fmin(a->median_ns, b->median_ns)) &&
            near(r.score_spread + 1.0,
                 fmax(a->score_ns, b->score_ns) / fmin(a->score_ns, b->score_ns)) &&
            r.spread >= 0 && r.score_spread >= 0,
        "spread %.3f, by score %.3f", r.spread, r.score_spread);
    c.nvariants = 1;
    rc = lntune_time_variants(&c, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK && r.spread == 0.0 && r.score_spread == 0.0, "one variant: no spread");

    setenv("LNTUNE_TEMPLATE_DIR", LNTUNE_TEST_TEMPLATES, 1);
    const char *mixed[] = {"quality=wrong,threads=1", "quality=right,threads=1"};
    c = (lntune_time_config){"layernorm", {.rows = 16, .H = 64}, mixed, 2, 0.3};
    rc = lntune_time_variants(&c, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK && r.wrong == 1 && isnan(r.copy_gbps) && isnan(r.spread) &&
              isnan(r.score_spread) && isnan(r.v[0].ratio_to_copy) && isnan(r.v[1].ratio_to_copy),
          "a wrong variant: %d counted, nothing timed", r.wrong);
    return CHECK_SUMMARY();
}
