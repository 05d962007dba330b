/*
 * template_mutant.h - a copy of one of the source tree's templates with one piece of text
 * changed, written where LNTUNE_TEMPLATE_DIR can point: the tests that show the verifier refuses
 * a wrong kernel (test_quant, test_offset_kernels). The includer defines LNTUNE_SOURCE_TEMPLATES.
 */
#ifndef LNTUNE_TEST_TEMPLATE_MUTANT_H
#define LNTUNE_TEST_TEMPLATE_MUTANT_H

#include "check.h"
#include "verify_variant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* templates/cpu/NAME with its first from replaced by to, written to dir/cpu/NAME (the other
 * templates stay the built-in ones); 0 when from is not there or a file fails. */
static int write_mutant(const char *dir, const char *name, const char *from, const char *to) {
    char path[600];
    snprintf(path, sizeof path, "%s/cpu/%s", LNTUNE_SOURCE_TEMPLATES, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char text[1 << 17], out[1 << 17];
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *at = strstr(text, from);
    if (!at || n == sizeof text - 1) return 0;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    snprintf(path, sizeof path, "%s/cpu", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/cpu/%s", dir, name);
    f = fopen(path, "wb");
    if (!f) return 0;
    fputs(out, f);
    return fclose(f) == 0;
}

/* write_mutant, a failure counted (what names the mutant) when the text is not there. */
static int write_mutant_checked(const char *dir, const char *name, const char *from, const char *to,
                                const char *what) {
    const int written = write_mutant(dir, name, from, to);
    CHECK(written, "%s: the line to change is in %s", what, name);
    return written;
}

/* The verifier refuses op's variant for shape s with the templates of dir found first on
 * LNTUNE_TEMPLATE_DIR, its message containing want; what names the mutant. */
static void mutant_refused(const char *dir, const char *what, const char *op, const char *variant,
                           const lntune_shape *s, const char *want) {
    lntune_verify_variant_result r;
    char err[1024] = "";
    setenv("LNTUNE_TEMPLATE_DIR", dir, 1);
    const int rc = lntune_verify_variant(op, variant, s, &r, err, sizeof err);
    unsetenv("LNTUNE_TEMPLATE_DIR");
    CHECK(rc == LNTUNE_EVERIFY && strstr(r.check.message, want), "%s, %s: refused (rc %d): %s %s",
          what, op, rc, r.check.message, err);
}

#endif /* LNTUNE_TEST_TEMPLATE_MUTANT_H */
