/*
 * test_verify_variant.c - lntune_verify_variant, which `lntune verify` prints. Checks: a right
 * forward and a right backward variant pass with their canonical string and a max error within
 * the tolerance; with the test templates (tests/templates/tuner) a wrong one is LNTUNE_EVERIFY
 * with the verifier's message; a value the template refuses and an unknown op are LNTUNE_EINVAL.
 *
 *   test_verify_variant TEST_TEMPLATE_PATH (tests/templates/tuner:tests/templates/common)
 */
#include "check.h"
#include "lntune.h"
#include "verify_variant.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_verify_variant TEST_TEMPLATE_DIR\n");
        return 2;
    }
    lntune_verify_variant_result r;
    char err[1024] = "";
    const lntune_shape h768 = {.H = 768};
    int rc = lntune_verify_variant("layernorm", "vec=4,acc=2", &h768, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK && strncmp(r.variant, "vec=4,acc=2,", 12) == 0 && r.check.cases > 0 &&
              r.check.max_error <= LNTUNE_VERIFY_TOLERANCE,
          "layernorm %s: rc %d, %d cases, max error %.3g %s", r.variant, rc, r.check.cases,
          r.check.max_error, err);
    rc = lntune_verify_variant("rmsnorm_backward", "vec=4", NULL, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK && strncmp(r.variant, "vec=4,", 6) == 0 && r.check.cases > 0,
          "rmsnorm_backward %s: rc %d, %d cases %s", r.variant, rc, r.check.cases, err);
    rc = lntune_verify_variant("layernorm", "vec=3", NULL, &r, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "'vec' = '3'"), "vec=3 refused: rc %d, %s", rc, err);
    rc = lntune_verify_variant("batchnorm", "vec=4", NULL, &r, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "batchnorm"), "an unknown op: rc %d, %s", rc, err);

    setenv("LNTUNE_TEMPLATE_DIR", argv[1], 1);
    rc = lntune_verify_variant("layernorm", "quality=wrong,threads=1", NULL, &r, err, sizeof err);
    CHECK(rc == LNTUNE_EVERIFY && strstr(r.check.message, "reference"),
          "a wrong variant: rc %d, %s", rc, r.check.message);
    rc = lntune_verify_variant("layernorm", "quality=right,threads=1", NULL, &r, err, sizeof err);
    CHECK(rc == LNTUNE_OK, "the right one passes: rc %d %s", rc, err);
    return CHECK_SUMMARY();
}
