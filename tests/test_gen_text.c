/*
 * test_gen_text.c - lntune_gen_text, which `lntune variants`, `params` and `emit` print.
 * Checks:
 *  - variants: one canonical string a line, every one of lntune_gen_variants' in its order;
 *    the shape's types reach the space; the CUDA space follows sm (clusters on sm_90, the
 *    default, and not on sm_80);
 *  - params: the knobs and what they do; emit: the source of the variant, with the symbol asked
 *    for, for the backward op too;
 *  - what the templates refuse is LNTUNE_EINVAL or LNTUNE_ENOTFOUND with the generator's message,
 *    and no text.
 */
#include "check.h"
#include "dtypes.h"
#include "gen_text.h"
#include "lntune.h"

#include <stdlib.h>
#include <string.h>

static size_t count_lines(const char *text, const char *with) {
    size_t n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') + 1) {
        const char *end = strchr(line, '\n');
        if (!end) return (size_t)-1; /* every line ends in a newline */
        n += !with || (strstr(line, with) && strstr(line, with) < end);
    }
    return n;
}

int main(void) {
    const lntune_shape h768 = {.H = 768};
    lntune_gen_text_request req = {"cpu", "layernorm", 0, &h768, NULL, NULL};
    char *text = NULL, err[1024] = "";
    int rc = lntune_gen_text(LNTUNE_GEN_TEXT_VARIANTS, &req, &text, err, sizeof err);
    lntune_gen *g = NULL;
    char **list = NULL;
    size_t n = 0, joined = 0;
    if (lntune_gen_open(NULL, &g) == LNTUNE_OK)
        lntune_gen_variants(g, "cpu", "layernorm", &h768, &list, &n);
    for (size_t i = 0; text && i < n; ++i) {
        const size_t k = strlen(list[i]);
        if (strncmp(text + joined, list[i], k) == 0 && text[joined + k] == '\n') joined += k + 1;
    }
    CHECK(rc == LNTUNE_OK && n > 100 && count_lines(text, NULL) == n && joined == strlen(text),
          "variants: %zu lines, lntune_gen_variants' %zu in order: %s", count_lines(text, NULL), n,
          err);
    lntune_gen_free_list(list, n);
    lntune_gen_close(g);

    lntune_shape bf16 = {.H = 768};
    lntune_types_parse("bf16", &bf16.types);
    req.shape = &bf16;
    char *text16 = NULL;
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_VARIANTS, &req, &text16, err, sizeof err);
    CHECK(rc == LNTUNE_OK && text && strcmp(text16, text) != 0 && count_lines(text16, NULL) > 0,
          "bf16 has its own space (%zu variants): %s", count_lines(text16, NULL), err);
    free(text16);
    free(text);

    const lntune_shape h16k = {.H = 16384};
    req = (lntune_gen_text_request){"cuda", "layernorm", 0, &h16k, NULL, NULL};
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_VARIANTS, &req, &text, err, sizeof err);
    const size_t sm90 = rc == LNTUNE_OK ? count_lines(text, "layout=cluster") : 0;
    free(text);
    req.sm = 80;
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_VARIANTS, &req, &text, err, sizeof err);
    const size_t sm80 = rc == LNTUNE_OK ? count_lines(text, "layout=cluster") : 99;
    CHECK(sm90 > 0 && sm80 == 0 && count_lines(text, "layout=") > 0,
          "CUDA: clusters on sm_90, the default (%zu), none on sm_80 (%zu): %s", sm90, sm80, err);
    free(text);

    req = (lntune_gen_text_request){"cpu", "rmsnorm_backward", 0, NULL, NULL, NULL};
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_PARAMS, &req, &text, err, sizeof err);
    CHECK(rc == LNTUNE_OK && strstr(text, "vec ") && strstr(text, "dgamma/dbeta"),
          "params of the backward: its knobs: %s", rc == LNTUNE_OK ? "" : err);
    free(text);
    req = (lntune_gen_text_request){"cpu", "rmsnorm", 0, &h768, "vec=4", "my_norm"};
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_SOURCE, &req, &text, err, sizeof err);
    CHECK(rc == LNTUNE_OK && strstr(text, "int my_norm(const lntune_kernel_args *a"),
          "emit: the variant's source under the symbol asked for: %s", err);
    free(text);

    req.variant = "lanes=8";
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_SOURCE, &req, &text, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && !text && strstr(err, "unknown parameter 'lanes'"),
          "an unknown parameter: rc %d, %s", rc, err);
    req.op = "batchnorm";
    rc = lntune_gen_text(LNTUNE_GEN_TEXT_PARAMS, &req, &text, err, sizeof err);
    CHECK((rc == LNTUNE_EINVAL || rc == LNTUNE_ENOTFOUND) && !text && strstr(err, "batchnorm"),
          "an unknown op: rc %d, %s", rc, err);
    return CHECK_SUMMARY();
}
