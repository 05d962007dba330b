/*
 * builtin.c - the parameters of the generic kernels and their generation into one source.
 *
 * The choice is a heuristic, not a measurement: 4-lane GCC vectors (SSE2 or NEON width, so the
 * code runs on any x86-64 or aarch64 without -march), 2 accumulators, two-pass statistics for
 * LayerNorm and blocked fp32-into-double sums for RMSNorm (both exact to a few ulps at any H),
 * H read at run time, plain stores. Threads are the caller's business.
 */
#include "builtin.h"

#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMON "vec=4,acc=2,rows=1,h=runtime,store=plain,prefetch=0,threads=1"

const lntune_builtin_variant lntune_builtin_variants[] = {
    {"layernorm", 1, "stats=twopass,affine=fused," COMMON},
    {"layernorm", 0, "stats=twopass,affine=none," COMMON},
    {"rmsnorm", 1, "stats=blocked,affine=fused," COMMON},
    {"rmsnorm", 0, "stats=blocked,affine=none," COMMON},
};
const size_t lntune_builtin_variant_count =
    sizeof lntune_builtin_variants / sizeof lntune_builtin_variants[0];

/* CUDA (lntune export's fallback): a 256-thread block per row re-reading x, 16-byte accesses
 * where aligned; any H, no shared memory, any compute capability. */
#define CUDA_COMMON "layout=uncached,tpr=32,cluster=1,block=256,pack=4,cache=none,h=runtime"

const lntune_builtin_variant lntune_builtin_cuda_variants[] = {
    {"layernorm", 1, CUDA_COMMON ",stats=twopass,affine=fused"},
    {"layernorm", 0, CUDA_COMMON ",stats=twopass,affine=none"},
    {"rmsnorm", 1, CUDA_COMMON ",stats=sumsq,affine=fused"},
    {"rmsnorm", 0, CUDA_COMMON ",stats=sumsq,affine=none"},
};
const size_t lntune_builtin_cuda_variant_count =
    sizeof lntune_builtin_cuda_variants / sizeof lntune_builtin_cuda_variants[0];

void lntune_builtin_symbol(const char *prefix, size_t i, char *buf, size_t size) {
    const lntune_builtin_variant *v = &lntune_builtin_variants[i];
    snprintf(buf, size, "%s_%s_%s", prefix, v->op, v->affine ? "affine" : "plain");
}

int lntune_builtin_emit(lntune_gen *g, const char *prefix, char **text) {
    *text = NULL;
    char *all = NULL;
    size_t len = 0;
    for (size_t i = 0; i < lntune_builtin_variant_count; ++i) {
        char symbol[128];
        lntune_builtin_symbol(prefix, i, symbol, sizeof symbol);
        lntune_source src;
        int rc = lntune_gen_emit(g, "cpu", lntune_builtin_variants[i].op,
                                 lntune_builtin_variants[i].variant, NULL, symbol, &src);
        if (rc != LNTUNE_OK) {
            free(all);
            return rc;
        }
        size_t n = strlen(src.text);
        char *grown = realloc(all, len + n + 2);
        if (!grown) {
            lntune_source_free(&src);
            free(all);
            return LNTUNE_ENOMEM;
        }
        all = grown;
        memcpy(all + len, src.text, n);
        len += n;
        all[len++] = '\n';
        all[len] = '\0';
        lntune_source_free(&src);
    }
    *text = all;
    return LNTUNE_OK;
}
