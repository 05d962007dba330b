/*
 * template_mutant.h - a copy of one of the source tree's templates with one piece of text
 * changed, written where LNTUNE_TEMPLATE_DIR can point: the tests that show the verifier refuses
 * a wrong kernel (test_quant, test_offset_kernels). The includer defines LNTUNE_SOURCE_TEMPLATES.
 */
#ifndef LNTUNE_TEST_TEMPLATE_MUTANT_H
#define LNTUNE_TEST_TEMPLATE_MUTANT_H

#include <stdio.h>
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

#endif /* LNTUNE_TEST_TEMPLATE_MUTANT_H */
