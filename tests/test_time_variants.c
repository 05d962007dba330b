/*
 * test_time_variants.c - lntune_time_variants, which `lntune time` prints: variants verified,
 * then timed side by side with the fastest copies. Checks:
 *  - two real RMSNorm variants at 16x64: each timed, GB/s = bytes / median, the copy timed from
 *    the copy variants, the rows and op text as asked;
 *  - with the test templates (tests/templates/tuner), a wrong variant is reported wrong with the
 *    verifier's message and nothing is timed; a right one alone is timed;
 *  - a value the template refuses is LNTUNE_EINVAL with its message; no variant, or more than
 *    LNTUNE_TIME_MAX_VARIANTS, is refused.
 *
 *   test_time_variants TEST_TEMPLATE_PATH (tests/templates/tuner:tests/templates/common)
 */
#include "check.h"
#include "lntune.h"
#include "time_variants.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_time_variants TEST_TEMPLATE_DIR\n");
        return 2;
    }
    char err[1024] = "";
    lntune_time_result r;
    const char *pair[] = {"vec=4", "vec=8,acc=2"};
    lntune_time_config c = {.op = "rmsnorm",
                            .shape = {.rows = 16, .H = 64},
                            .variants = pair,
                            .nvariants = 2,
                            .seconds = 0.5};
    int rc = lntune_time_variants(&c, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK, "two RMSNorm variants timed: rc %d %s", rc, err);
    CHECK(r.rows == 16 && strcmp(r.op_key, "rmsnorm") == 0 && r.bytes == 2.0 * 16 * 64 * 4,
          "rows %lld, op %s, %.0f bytes (x read and y written)", (long long)r.rows, r.op_key,
          r.bytes);
    CHECK(r.ncopy_variants > 1 && isfinite(r.copy_ns) && r.copy_ns > 0,
          "the better copy of %zu copy variants: %.1f ns", r.ncopy_variants, r.copy_ns);
    for (int i = 0; i < 2; ++i)
        CHECK(!r.v[i].wrong && r.v[i].median_ns > 0 && isfinite(r.v[i].score_ns) &&
                  fabs(r.v[i].gbps - r.bytes / r.v[i].median_ns) < 1e-9 * r.v[i].gbps,
              "%s: %.1f ns, score %.1f ns, %.2f GB/s", pair[i], r.v[i].median_ns, r.v[i].score_ns,
              r.v[i].gbps);

    const char *bad[] = {"vec=3"};
    c.variants = bad, c.nvariants = 1;
    rc = lntune_time_variants(&c, &r, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "'vec' = '3'"), "vec=3 refused: rc %d, %s", rc, err);
    c.nvariants = 0;
    CHECK(lntune_time_variants(&c, &r, err, sizeof err) == LNTUNE_EINVAL, "no variant: %s", err);
    c.nvariants = LNTUNE_TIME_MAX_VARIANTS + 1;
    CHECK(lntune_time_variants(&c, &r, err, sizeof err) == LNTUNE_EINVAL, "17 variants: %s", err);

    setenv("LNTUNE_TEMPLATE_DIR", argv[1], 1);
    const char *mixed[] = {"quality=wrong,threads=1", "quality=right,threads=1"};
    c = (lntune_time_config){.op = "layernorm",
                             .shape = {.rows = 16, .H = 64},
                             .variants = mixed,
                             .nvariants = 2,
                             .seconds = 0.5};
    rc = lntune_time_variants(&c, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK && r.v[0].wrong && strstr(r.v[0].message, "reference") && !r.v[1].wrong &&
              isnan(r.v[0].median_ns) && isnan(r.v[1].median_ns),
          "a wrong variant is reported (%s) and nothing is timed: rc %d", r.v[0].message, rc);
    c.variants = mixed + 1, c.nvariants = 1;
    rc = lntune_time_variants(&c, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK && !r.v[0].wrong && r.v[0].median_ns > 0,
          "the right one alone is timed: rc %d, %.1f ns", rc, r.v[0].median_ns);
    return CHECK_SUMMARY();
}
