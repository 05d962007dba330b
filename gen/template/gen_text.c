/*
 * gen_text.c - the generator's answers as text (see gen_text.h).
 */
#include "gen_text.h"

#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The list's strings, each followed by a newline, in one malloc'd string (NULL: out of memory). */
static char *join_lines(char **list, size_t n) {
    size_t len = 1;
    for (size_t i = 0; i < n; ++i) len += strlen(list[i]) + 1;
    char *text = malloc(len), *end = text;
    for (size_t i = 0; text && i < n; ++i) {
        const size_t k = strlen(list[i]);
        memcpy(end, list[i], k);
        end[k] = '\n';
        end += k + 1;
    }
    if (text) *end = '\0';
    return text;
}

int lntune_gen_text(lntune_gen_text_kind kind, const lntune_gen_text_request *req, char **text,
                    char *err, size_t errlen) {
    *text = NULL;
    lntune_gen *g = NULL;
    int rc = lntune_gen_open(NULL, &g), joined = 1;
    if (rc == LNTUNE_OK && req->target && strcmp(req->target, "cuda") == 0)
        rc = lntune_gen_set_cuda_arch(g, req->sm ? req->sm : 90);
    if (rc == LNTUNE_OK && kind == LNTUNE_GEN_TEXT_VARIANTS) {
        char **list;
        size_t n;
        rc = lntune_gen_variants(g, req->target, req->op, req->shape, &list, &n);
        if (rc == LNTUNE_OK) {
            if (!(*text = join_lines(list, n))) joined = 0, rc = LNTUNE_ENOMEM;
            lntune_gen_free_list(list, n);
        }
    } else if (rc == LNTUNE_OK && kind == LNTUNE_GEN_TEXT_PARAMS) {
        rc = lntune_gen_describe(g, req->target, req->op, text);
    } else if (rc == LNTUNE_OK) {
        lntune_source src;
        rc = lntune_gen_emit(g, req->target, req->op, req->variant, req->shape, req->symbol, &src);
        if (rc == LNTUNE_OK) {
            *text = src.text;
            src.text = NULL;
            lntune_source_free(&src);
        }
    }
    if (rc != LNTUNE_OK)
        snprintf(err, errlen, "%s", g && joined ? lntune_gen_errmsg(g) : lntune_errstr(rc));
    lntune_gen_close(g);
    return rc;
}
