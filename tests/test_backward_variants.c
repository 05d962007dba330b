/*
 * test_backward_variants.c - a bounded sample of the CPU backward variant space compiles with
 * -Wall -Wextra -Werror under the compiler named on the command line and passes the backward
 * verifier, for both ops and every (x/dy/dx, params) type tuple.
 *
 *   test_backward_variants COMPILER
 *
 * Each (op, tuple) takes every 61st variant of its runtime-H list at H = 4096 plus one fixed-H
 * variant, from an offset that moves with the tuple so the tuples together cover the knobs;
 * runtime-H variants are verified at H = 1, 3, 17, 768, 4097 on their thread count, fixed-H
 * ones at 4096. Every third (op, tuple) pair also takes the fused residual backward
 * (dresidual_out added to dx), its offset moved by 30, verified with dresidual_out (the
 * built-ins already compile the fused kernel of every tuple at build time).
 */
#include "build.h"
#include "check.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"
#include "verify_backward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ops[] = {"layernorm_backward", "rmsnorm_backward"};

static void check_tuple(lntune_gen *g, const char *cc, int op, lntune_types types, int fusion,
                        int offset, lntune_pool *pool) {
    lntune_shape shape = {0};
    shape.H = 4096;
    shape.types = types;
    shape.fusion = fusion;
    char **list;
    size_t n;
    char tuple[48];
    lntune_types_format(types, tuple, sizeof tuple);
    if (fusion) strncat(tuple, " +residual", sizeof tuple - strlen(tuple) - 1);
    if (lntune_gen_variants(g, "cpu", ops[op], &shape, &list, &n) != LNTUNE_OK) {
        CHECK(0, "%s %s variants: %s", ops[op], tuple, lntune_gen_errmsg(g));
        return;
    }
    enum { MAX = 64 };
    lntune_source srcs[MAX];
    const char *texts[MAX];
    size_t k = 0;
    int fixed_taken = 0;
    for (size_t i = (size_t)offset % 61; i < n && k < MAX; ++i) {
        const int fixed = strstr(list[i], "h=fixed") != NULL;
        if (fixed ? fixed_taken || (i % 7) != 0 : (i % 61) != (size_t)offset % 61) continue;
        char symbol[32];
        snprintf(symbol, sizeof symbol, "bwd_%zu", k);
        if (lntune_gen_emit(g, "cpu", ops[op], list[i], &shape, symbol, &srcs[k]) != LNTUNE_OK) {
            CHECK(0, "emit %s %s: %s", ops[op], list[i], lntune_gen_errmsg(g));
            continue;
        }
        fixed_taken |= fixed;
        texts[k] = srcs[k].text;
        ++k;
    }
    lntune_gen_free_list(list, n);
    const char *const werror[] = {"-Wall", "-Wextra", "-Werror", NULL};
    lntune_library *lib = NULL;
    char *diag = NULL;
    int rc = lntune_build_library(cc, werror, texts, k, 2, &lib, &diag);
    CHECK(rc == LNTUNE_OK, "%s %s: %zu variants compile with %s -Wall -Wextra -Werror%s%s", ops[op],
          tuple, k, cc, diag ? ": " : "", diag ? diag : "");
    free(diag);
    const int64_t hs[] = {1, 3, 17, 768, 4096, 4097};
    lntune_backward_verifier *v = NULL;
    lntune_backward_verifier_create_fused((lntune_op)op, types, fusion, hs, 6, 0, &v);
    int failed = 0;
    for (size_t i = 0; lib && i < k; ++i) {
        char symbol[32];
        snprintf(symbol, sizeof symbol, "bwd_%zu", i);
        lntune_kernel_fn f = lntune_library_kernel(lib, symbol);
        lntune_backward_kernel_fn kernel;
        memcpy(&kernel, &f, sizeof f); /* the symbol has the backward ABI */
        lntune_verify_result res;
        const int64_t fixed = srcs[i].fixed_h;
        rc = kernel ? lntune_backward_verifier_check(v, kernel, fixed, srcs[i].threads, pool, &res)
                    : LNTUNE_ENOTFOUND;
        if (rc != LNTUNE_OK) {
            printf("FAIL %s %s %s: %s\n", ops[op], tuple, srcs[i].variant,
                   kernel ? res.message : "no symbol");
            failed++;
        }
    }
    check_failures += failed;
    printf("%s: %s %s: %zu variants verified (%d wrong)\n", failed ? "FAIL" : "ok", ops[op], tuple,
           k, failed);
    lntune_backward_verifier_destroy(v);
    lntune_library_close(lib);
    for (size_t i = 0; i < k; ++i) lntune_source_free(&srcs[i]);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_backward_variants COMPILER\n");
        return 2;
    }
    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) != LNTUNE_OK) {
        printf("FAIL gen: %s\n", lntune_gen_errmsg(g));
        return 1;
    }
    lntune_pool *pool = NULL;
    lntune_pool_create(4, &pool);
    lntune_gen_set_cores(g, 4); /* thread counts 1, 2, 4 whatever the machine */
    int offset = 0;
    for (int op = 0; op < 2; ++op)
        for (int x = 0; x < LNTUNE_TYPE_COUNT; ++x)
            for (int p = 0; p < LNTUNE_TYPE_COUNT; ++p) {
                lntune_types t = {.x = (uint8_t)x, .y = (uint8_t)x, .params = (uint8_t)p};
                check_tuple(g, argv[1], op, t, LNTUNE_FUSION_NONE, offset, pool);
                if (offset % 3 == 0) /* gcc's time stays under 3 min on a loaded machine */
                    check_tuple(g, argv[1], op, t, LNTUNE_FUSION_RESIDUAL, offset + 30, pool);
                ++offset;
            }
    lntune_pool_destroy(pool);
    lntune_gen_close(g);
    return CHECK_SUMMARY();
}
