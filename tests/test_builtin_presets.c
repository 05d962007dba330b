/*
 * test_builtin_presets.c - the built-in kernels are the templates' presets, and those generate
 * byte for byte the kernels gen/template/builtin.c generated from its own variant strings before
 * the presets existed. The old strings are made here by a copy of the old rule (old_variant), for
 * every built-in, level, type tuple and fusion, CPU and CUDA, forward and backward; each kernel of
 * that string must be the built-in's (the same source, the same canonical variant). And the CUDA
 * templates' "naive" presets are the variants the CUDA tuner took as naive before
 * (gen/tune/cuda_target.c's is_naive, copied as old_is_naive).
 */
#include "builtin.h"
#include "check.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The old rule (gen/template/builtin.c before the presets) ---- */

#define COMMON "vec=4,acc=2,rows=1,h=runtime,store=plain,prefetch=0,threads=1"
static const char *const old_cpu[] = {
    "stats=sampled,affine=fused," COMMON,
    "stats=sampled,affine=none," COMMON,
    "stats=blocked,affine=fused," COMMON,
    "stats=blocked,affine=none," COMMON,
};
static const char old_backward[] = "vec=4,acc=2,rows=1,h=runtime,store=plain,threads=1";
#define CUDA_COMMON "layout=uncached,tpr=32,cluster=1,block=256,pack=4,cache=none,h=runtime"
#define CUDA_WARP "layout=warp,tpr=32,cluster=1,block=256,pack=4,cache=none,h=runtime"
static const char *const old_cuda[] = {
    CUDA_COMMON ",stats=twopass,affine=fused",
    CUDA_COMMON ",stats=twopass,affine=none",
    CUDA_COMMON ",stats=sumsq,affine=fused",
    CUDA_COMMON ",stats=sumsq,affine=none",
};
static const char *const old_cuda_warp[] = {
    CUDA_WARP ",stats=twopass,affine=fused",
    CUDA_WARP ",stats=twopass,affine=none",
    CUDA_WARP ",stats=sumsq,affine=fused",
    CUDA_WARP ",stats=sumsq,affine=none",
};
static const char old_cuda_backward[] =
    "layout=uncached,tpr=32,block=256,pack=4,cache=none,h=runtime,dgamma=partials";

/* The levels as they were: vector width, native fp16 conversions, streaming stores. */
typedef struct {
    const lntune_builtin_level *level;
    int vec, native_f16, streaming;
    int forward_only; /* the AVX-512 copy: no fused all-bf16 and no backward kernels */
} old_level;
static const old_level levels[] = {
    {&lntune_builtin_generic, 4, 0, 0, 0},
    {&lntune_builtin_avx2, 8, 1, 0, 0},
    {&lntune_builtin_avx2_streaming, 8, 1, 1, 0},
    /* The old rule at AVX-512's width: the same presets, 16 lanes. */
    {&lntune_builtin_avx512, 16, 1, 0, 1},
    {&lntune_builtin_avx512_streaming, 16, 1, 1, 1},
};

/* The old level_variant: base at level, native conversions when f16 and the level has them. Since
 * 2026-12-06 every copy prefetches the next row once per line and overlaps the statistics with
 * the normalize (prefetch=1,pdensity=1,overlap=1), but LayerNorm's streaming copy, which prefetches
 * in halves (prefetch=2,pdensity=1): templates/cpu/norm.lua's measurements. */
static void old_variant(const char *base, const old_level *level, int f16, char *buf, size_t size) {
    static const char plain[] = "store=plain,prefetch=0";
    const char *native = f16 && level->native_f16 ? ",convert=native" : "";
    const int halves = level->streaming && strstr(base, "stats=sampled") != NULL;
    char widened[256];
    const char *vec = strstr(base, "vec=4");
    snprintf(widened, sizeof widened, "%.*svec=%d%s", (int)(vec - base), base, level->vec, vec + 5);
    const char *stores = strstr(widened, plain); /* NULL: a backward variant, no such knobs */
    if (!stores)
        snprintf(buf, size, "%s%s", widened, native);
    else
        snprintf(buf, size, "%.*sstore=%s,prefetch=%s%s%s", (int)(stores - widened), widened,
                 level->streaming ? "nt" : "plain",
                 halves ? "2,pdensity=1" : "1,pdensity=1,overlap=1", stores + sizeof plain - 1,
                 native);
}

/* is_naive of gen/tune/cuda_target.c, where the naive preset is to replace it. */
static int old_is_naive(const char *variant, int backward, int layernorm) {
    const char *how = backward ? "dgamma=partials" : layernorm ? "stats=twopass" : "stats=";
    return strstr(variant, "layout=uncached,") && strstr(variant, "block=256,") &&
           strstr(variant, "pack=1,") && strstr(variant, how);
}

/* ---- Checks ---- */

static int kernels; /* kernels compared */

/* Emits the old variant as symbol into *src (isa: the level's, or 0 for CUDA). */
static int emit_old(lntune_gen *g, const char *target, const char *op, const char *variant,
                    const lntune_shape *shape, const char *symbol, uint32_t isa,
                    lntune_source *src) {
    lntune_gen_set_isa(g, isa);
    const int rc = lntune_gen_emit(g, target, op, variant, shape, symbol, src);
    lntune_gen_set_isa(g, 0);
    EXPECT(rc == LNTUNE_OK, "%s %s: %s", op, variant, lntune_gen_errmsg(g));
    return rc;
}

/* The old variant's kernel, symbol, is in the built-ins' translation unit text. */
static void expect_in(lntune_gen *g, const char *text, const char *op, const char *variant,
                      const lntune_shape *shape, const char *symbol, uint32_t isa) {
    lntune_source old;
    if (emit_old(g, "cpu", op, variant, shape, symbol, isa, &old) != LNTUNE_OK) return;
    EXPECT(strstr(text, old.text) != NULL, "%s: the built-in is not the kernel of %s", symbol,
           variant);
    ++kernels;
    lntune_source_free(&old);
}

/* The old variant's kernel and the built-in's are the same. */
static void expect_same(lntune_gen *g, const char *target, const char *op, const char *variant,
                        const lntune_shape *shape, uint32_t isa, const char *symbol, int rc,
                        lntune_source *got) {
    EXPECT(rc == LNTUNE_OK, "%s: %s", symbol, lntune_gen_errmsg(g));
    lntune_source old;
    if (rc != LNTUNE_OK || emit_old(g, target, op, variant, shape, symbol, isa, &old) != 0) return;
    EXPECT(strcmp(old.text, got->text) == 0 && strcmp(old.variant, got->variant) == 0,
           "%s: the built-in (%s) is not the kernel of %s (%s)", symbol, got->variant, variant,
           old.variant);
    ++kernels;
    lntune_source_free(&old);
    lntune_source_free(got);
}

/* fp32 forward: the translation unit and lntune_builtin_variant_string. */
static void check_fp32(lntune_gen *g, const old_level *l) {
    char *text = NULL;
    int rc = lntune_builtin_emit(g, l->level, "p", &text);
    CHECK(rc == LNTUNE_OK, "%s fp32 built-ins: %s", l->level->preset, lntune_gen_errmsg(g));
    for (size_t i = 0; i < lntune_builtin_variant_count && text; ++i) {
        char variant[256], symbol[128];
        old_variant(old_cpu[i], l, 0, variant, sizeof variant);
        lntune_builtin_symbol("p", i, symbol, sizeof symbol);
        expect_in(g, text, lntune_builtin_variants[i].op, variant, NULL, symbol, l->level->isa);
        char *now = NULL;
        lntune_source old;
        if (lntune_builtin_variant_string(g, l->level, i, &now) != LNTUNE_OK ||
            emit_old(g, "cpu", lntune_builtin_variants[i].op, variant, NULL, NULL, l->level->isa,
                     &old) != LNTUNE_OK) {
            CHECK(0, "%s: %s", symbol, lntune_gen_errmsg(g));
            continue;
        }
        CHECK(strcmp(now, old.variant) == 0, "%s %s: %s", l->level->preset, symbol, now);
        free(now);
        lntune_source_free(&old);
    }
    free(text);
}

/* Every typed tuple (all but all-fp32), one kernel at a time. */
static void check_typed(lntune_gen *g, const old_level *l) {
    const int before = kernels;
    for (size_t i = 0; i < lntune_builtin_variant_count; ++i)
        for (int packed = 1; packed < 64; ++packed) {
            const lntune_types t = lntune_types_unpacked(packed);
            if (t.x >= LNTUNE_TYPE_COUNT || t.y >= LNTUNE_TYPE_COUNT ||
                t.params >= LNTUNE_TYPE_COUNT)
                continue;
            const int evenodd = t.x == LNTUNE_TYPE_BF16 && t.y == t.x && t.params == t.x;
            const int f16 =
                t.x == LNTUNE_TYPE_F16 || t.y == LNTUNE_TYPE_F16 || t.params == LNTUNE_TYPE_F16;
            char base[256], variant[300], symbol[160];
            snprintf(base, sizeof base, "%s%s", old_cpu[i], evenodd ? ",layout=evenodd" : "");
            old_variant(base, l, f16, variant, sizeof variant);
            lntune_builtin_typed_symbol("p", i, t, symbol, sizeof symbol);
            lntune_shape shape = {.types = t};
            shape.types.residual = 0;
            lntune_source got;
            const int rc = lntune_builtin_emit_typed_one(g, l->level, i, t, symbol, &got);
            expect_same(g, "cpu", lntune_builtin_variants[i].op, variant, &shape, l->level->isa,
                        symbol, rc, &got);
        }
    CHECK(kernels - before == 4 * 26, "%s: %d typed built-ins as before", l->level->preset,
          kernels - before);
}

/* The fused all-bf16 Add & Norm built-ins. */
static void check_fused_bf16(lntune_gen *g, const old_level *l) {
    char *text = NULL;
    int rc = lntune_builtin_emit_fused_bf16(g, l->level, "p", &text);
    CHECK(rc == LNTUNE_OK, "%s fused bf16 built-ins: %s", l->level->preset, lntune_gen_errmsg(g));
    const int before = kernels;
    static const int fusions[] = {LNTUNE_FUSION_RESIDUAL, LNTUNE_FUSION_RESIDUAL_OUT};
    for (size_t i = 0; i < lntune_builtin_variant_count && text; ++i) {
        const lntune_builtin_variant *v = &lntune_builtin_variants[i];
        char base[300], variant[320];
        snprintf(base, sizeof base, "%s,layout=evenodd", old_cpu[i]);
        old_variant(base, l, 0, variant, sizeof variant);
        if (l->streaming)
            snprintf(variant + strlen(variant), sizeof variant - strlen(variant), ",rprefetch=1");
        for (int k = 0; k < 2; ++k) {
            char symbol[160];
            snprintf(symbol, sizeof symbol, "p_%s_%s_bf16_%s", v->op,
                     v->affine ? "affine" : "plain", lntune_fusion_name(fusions[k]));
            lntune_shape shape = {.fusion = fusions[k]};
            shape.types = (lntune_types){LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0};
            expect_in(g, text, v->op, variant, &shape, symbol, l->level->isa);
        }
    }
    CHECK(kernels - before == 8, "%s: %d fused bf16 built-ins as before", l->level->preset,
          kernels - before);
    free(text);
}

/* The backward built-ins: both ops, fused or not, every (x, params) type. */
static void check_backward(lntune_gen *g, const old_level *l) {
    static const char *const ops[] = {"layernorm_backward", "rmsnorm_backward"};
    char *text = NULL;
    int rc = lntune_builtin_emit_backward(g, l->level, "p", &text);
    CHECK(rc == LNTUNE_OK, "%s backward built-ins: %s", l->level->preset, lntune_gen_errmsg(g));
    char variant[256];
    old_variant(old_backward, l, 0, variant, sizeof variant);
    const int before = kernels;
    for (int op = 0; op < 2 && text; ++op)
        for (int fused = 0; fused < 2; ++fused)
            for (int x = 0; x < LNTUNE_TYPE_COUNT; ++x)
                for (int p = 0; p < LNTUNE_TYPE_COUNT; ++p) {
                    char symbol[128];
                    snprintf(symbol, sizeof symbol, "p_%s%s_%s_%s", ops[op],
                             fused ? "_residual" : "", lntune_type_name(x), lntune_type_name(p));
                    lntune_shape shape = {.fusion =
                                              fused ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE};
                    shape.types =
                        (lntune_types){.x = (uint8_t)x, .y = (uint8_t)x, .params = (uint8_t)p};
                    expect_in(g, text, ops[op], variant, &shape, symbol, l->level->isa);
                }
    CHECK(kernels - before == 36, "%s: %d backward built-ins as before", l->level->preset,
          kernels - before);
    free(text);
}

/* The CUDA built-ins: the runtime's table (its canonical variants), and each kernel alone. */
static void check_cuda(lntune_gen *g) {
    char *text = NULL, *message = NULL;
    int rc = lntune_builtin_emit_cuda(g, NULL, "p", &text, &message);
    CHECK(rc == LNTUNE_OK, "CUDA built-ins: %s", message ? message : lntune_gen_errmsg(g));
    free(message);
    const int before = kernels;
    for (size_t i = 0; i < 2 * lntune_builtin_cuda_variant_count && text; ++i) {
        const int warp = i < lntune_builtin_cuda_variant_count;
        const size_t k = i % lntune_builtin_cuda_variant_count;
        const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[k];
        const char *variant = warp ? old_cuda_warp[k] : old_cuda[k];
        char symbol[128], record[512];
        snprintf(symbol, sizeof symbol, "p_cuda_%s_%s_%s", v->op, v->affine ? "affine" : "plain",
                 warp ? "warp" : "generic");
        lntune_source old;
        if (emit_old(g, "cuda", v->op, variant, NULL, symbol, 0, &old) != LNTUNE_OK) continue;
        snprintf(record, sizeof record, "\"%s\", \"%s\",", symbol, old.variant);
        EXPECT(strstr(text, record) != NULL, "%s: no record %s", symbol, record);
        ++kernels;
        lntune_source_free(&old);
        if (!warp) {
            lntune_source got;
            rc = lntune_builtin_emit_cuda_generic(g, k, symbol, &got);
            expect_same(g, "cuda", v->op, variant, NULL, 0, symbol, rc, &got);
        }
    }
    free(text);
    static const int fusions[] = {LNTUNE_FUSION_NONE, LNTUNE_FUSION_RESIDUAL,
                                  LNTUNE_FUSION_RESIDUAL_OUT};
    for (size_t i = 0; i < lntune_builtin_cuda_variant_count; ++i)
        for (int f = 0; f < 3; ++f) {
            const lntune_shape shape = {.fusion = fusions[f], .generic_types = 1};
            const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
            const int affine = v->affine ? LNTUNE_AFFINE_GAMMA : LNTUNE_AFFINE_NONE;
            char symbol[128];
            lntune_builtin_cuda_kind_symbol("p", v->op, affine, LNTUNE_TYPE_F32, fusions[f], symbol,
                                            sizeof symbol);
            lntune_source got;
            rc = lntune_builtin_emit_cuda_kind(g, v->op, affine, LNTUNE_TYPE_F32, fusions[f],
                                               symbol, &got);
            expect_same(g, "cuda", v->op, old_cuda[i], &shape, 0, symbol, rc, &got);
        }
    for (size_t i = 0; i < lntune_builtin_cuda_backward_variant_count; ++i)
        for (int fused = 0; fused < 2; ++fused) {
            const int fusion = fused ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE;
            const lntune_shape shape = {.fusion = fusion, .generic_types = 1};
            char symbol[128];
            lntune_builtin_cuda_backward_symbol("p", i, fusion, symbol, sizeof symbol);
            lntune_source got;
            rc = lntune_builtin_emit_cuda_backward(g, i, fusion, symbol, &got);
            expect_same(g, "cuda", lntune_builtin_cuda_backward_variants[i].op, old_cuda_backward,
                        &shape, 0, symbol, rc, &got);
        }
    CHECK(kernels - before == 8 + 4 + 12 + 4, "CUDA: %d built-ins as before", kernels - before);
}

/* "naive" is the first variant of the tuner's space that the old is_naive took. */
static void check_naive(lntune_gen *g) {
    static const struct {
        const char *op;
        int backward, layernorm;
    } ops[] = {{"layernorm", 0, 1},
               {"rmsnorm", 0, 0},
               {"layernorm_backward", 1, 1},
               {"rmsnorm_backward", 1, 0}};
    static const int sms[] = {80, 90};
    static const int64_t hs[] = {768, 4096, 65536};
    const lntune_types bf16 = {LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0};
    int compared = 0;
    for (size_t o = 0; o < 4; ++o)
        for (size_t s = 0; s < 2; ++s)
            for (size_t h = 0; h < 3; ++h)
                for (int typed = 0; typed < 2; ++typed) {
                    lntune_gen_set_cuda_arch(g, sms[s]);
                    const lntune_shape shape = {.rows = 4096,
                                                .H = hs[h],
                                                .affine = LNTUNE_AFFINE_GAMMA,
                                                .types = typed ? bf16 : (lntune_types){0}};
                    char **list = NULL, *naive = NULL;
                    size_t n = 0;
                    int rc = lntune_gen_variants(g, "cuda", ops[o].op, &shape, &list, &n);
                    EXPECT(rc == LNTUNE_OK, "%s variants: %s", ops[o].op, lntune_gen_errmsg(g));
                    const char *want = NULL;
                    for (size_t i = 0; i < n && !want; ++i)
                        if (old_is_naive(list[i], ops[o].backward, ops[o].layernorm))
                            want = list[i];
                    rc = lntune_gen_preset(g, "cuda", ops[o].op, "naive", &shape, &naive);
                    EXPECT(rc == LNTUNE_OK && want && strcmp(naive, want) == 0,
                           "%s sm_%d H=%lld: naive %s, the tuner's %s", ops[o].op, sms[s],
                           (long long)hs[h], rc ? lntune_gen_errmsg(g) : naive,
                           want ? want : "(none)");
                    compared += rc == LNTUNE_OK && want && strcmp(naive, want) == 0;
                    free(naive);
                    lntune_gen_free_list(list, n);
                }
    CHECK(compared == 4 * 2 * 3 * 2, "%d naive presets are the tuner's naive variants", compared);
    char *naive = NULL;
    const lntune_shape any = {.affine = LNTUNE_AFFINE_GAMMA};
    CHECK(lntune_gen_preset(g, "cuda", "layernorm", "naive", &any, &naive) == LNTUNE_OK &&
              strcmp(naive, "layout=uncached,tpr=32,cluster=1,block=256,pack=1,cache=none,"
                            "stats=twopass,h=runtime,affine=fused") == 0,
          "CUDA LayerNorm naive: %s", naive ? naive : lntune_gen_errmsg(g));
    free(naive);
    naive = NULL;
    CHECK(lntune_gen_preset(g, "cuda", "rmsnorm_backward", "naive", NULL, &naive) == LNTUNE_OK &&
              strcmp(naive, "layout=uncached,tpr=32,block=256,pack=1,cache=none,h=runtime,"
                            "dgamma=partials") == 0,
          "CUDA RMSNorm backward naive: %s", naive ? naive : lntune_gen_errmsg(g));
    free(naive);
    naive = NULL;
    /* Rows shorter than the naive block's threads have no naive variant. */
    const lntune_shape short_rows = {.H = 100};
    CHECK(lntune_gen_preset(g, "cuda", "rmsnorm", "naive", &short_rows, &naive) == LNTUNE_EINVAL &&
              !naive && strstr(lntune_gen_errmsg(g), "more threads than columns"),
          "no naive variant at H = 100: %s", lntune_gen_errmsg(g));
    lntune_gen_set_cuda_arch(g, 0);
}

int main(void) {
    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) != LNTUNE_OK) {
        printf("FAIL open: %s\n", lntune_gen_errmsg(g));
        return 1;
    }
    for (size_t l = 0; l < sizeof levels / sizeof levels[0]; ++l) {
        check_fp32(g, &levels[l]);
        check_typed(g, &levels[l]);
        if (levels[l].forward_only) continue;
        check_fused_bf16(g, &levels[l]);
        check_backward(g, &levels[l]);
    }
    check_cuda(g);
    check_naive(g);
    printf("%d built-in kernels compared with the old rule's\n", kernels);
    lntune_gen_close(g);
    return CHECK_SUMMARY();
}
