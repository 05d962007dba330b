/*
 * builtin.c - the parameters of the generic kernels and their generation into one source.
 *
 * The choice is a heuristic, not a measurement: 4-lane GCC vectors (SSE2 or NEON width, so the
 * code runs on any x86-64 or aarch64 without -march), 2 accumulators, sampled statistics for
 * LayerNorm (one pass where the shift allows, else two: 19% faster than two passes at 256 x 4096
 * on one core) and blocked fp32-into-double sums for RMSNorm (both exact to a few ulps at any
 * H), H read at run time, plain stores. Threads are the caller's business. On x86-64 the same
 * variants come a second time at 8 lanes for AVX2 (lntune_builtin_avx2), chosen at run time.
 */
#include "builtin.h"

#include "dtypes.h"
#include "fusion.h"
#include "hardware.h"
#include "lntune.h"
#include "nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMON "vec=4,acc=2,rows=1,h=runtime,store=plain,prefetch=0,threads=1"

const lntune_builtin_variant lntune_builtin_variants[] = {
    {"layernorm", 1, "stats=sampled,affine=fused," COMMON},
    {"layernorm", 0, "stats=sampled,affine=none," COMMON},
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

/* The CUDA backward (runtime's built-in): a block per row re-reading x and dy, any H; dgamma and
 * dbeta from per-row-group fp32 partials summed in order, so every run gives the same bits. */
#define CUDA_BACKWARD "layout=uncached,tpr=32,block=256,pack=4,cache=none,h=runtime,dgamma=partials"
const lntune_builtin_variant lntune_builtin_cuda_backward_variants[] = {
    {"layernorm_backward", 1, CUDA_BACKWARD},
    {"rmsnorm_backward", 1, CUDA_BACKWARD},
};
const size_t lntune_builtin_cuda_backward_variant_count =
    sizeof lntune_builtin_cuda_backward_variants / sizeof lntune_builtin_cuda_backward_variants[0];

/* Generic: what the build host's compiler makes of plain C vectors without -march. */
const lntune_builtin_level lntune_builtin_generic = {"generic", 4, 0, 0, 0};
/* x86-64 with AVX2, FMA and F16C (x86-64-v3 less BMI and MOVBE, which kernels have no use for):
 * every x86-64 CPU sold since 2013-2015. Its features are given so that the build host's own
 * do not matter: the copy is the same wherever it is built. */
#define AVX2_ISA                                                                                   \
    (LNTUNE_ISA_SSE | LNTUNE_ISA_SSE2 | LNTUNE_ISA_SSE4_2 | LNTUNE_ISA_AVX | LNTUNE_ISA_AVX2 |     \
     LNTUNE_ISA_FMA | LNTUNE_ISA_F16C)
const lntune_builtin_level lntune_builtin_avx2 = {"avx2", 8, 1, 0, AVX2_ISA};
const lntune_builtin_level lntune_builtin_avx2_streaming = {"avx2", 8, 1, 1, AVX2_ISA};

/* base (one of the variant strings here: all have "vec=4", the forward ones
 * "store=plain,prefetch=0") at level, with native fp16 conversions when f16 and the level has
 * them. Streaming prefetches each line 4 times (the template's first pdensity): 8.7% faster
 * than once at 2048 x 4096 fp32, both ops (Zen 4). */
static void level_variant(const char *base, const lntune_builtin_level *level, int f16, char *buf,
                          size_t size) {
    static const char plain[] = "store=plain,prefetch=0";
    const char *native = f16 && level->native_f16 ? ",convert=native" : "";
    char widened[256];
    const char *vec = strstr(base, "vec=4");
    snprintf(widened, sizeof widened, "%.*svec=%d%s", (int)(vec - base), base, level->vec, vec + 5);
    const char *stores = level->streaming ? strstr(widened, plain) : NULL;
    if (stores)
        snprintf(buf, size, "%.*sstore=nt,prefetch=2%s%s", (int)(stores - widened), widened,
                 stores + sizeof plain - 1, native);
    else
        snprintf(buf, size, "%s%s", widened, native);
}

void lntune_builtin_symbol(const char *prefix, size_t i, char *buf, size_t size) {
    const lntune_builtin_variant *v = &lntune_builtin_variants[i];
    snprintf(buf, size, "%s_%s_%s", prefix, v->op, v->affine ? "affine" : "plain");
}

int lntune_builtin_emit(lntune_gen *g, const lntune_builtin_level *level, const char *prefix,
                        char **text) {
    *text = NULL;
    char *all = NULL;
    size_t len = 0;
    lntune_gen_set_isa(g, level->isa);
    int rc = LNTUNE_OK;
    for (size_t i = 0; i < lntune_builtin_variant_count && rc == LNTUNE_OK; ++i) {
        char symbol[128], variant[256];
        lntune_builtin_symbol(prefix, i, symbol, sizeof symbol);
        level_variant(lntune_builtin_variants[i].variant, level, 0, variant, sizeof variant);
        lntune_source src;
        rc = lntune_gen_emit(g, "cpu", lntune_builtin_variants[i].op, variant, NULL, symbol, &src);
        if (rc != LNTUNE_OK) break;
        size_t n = strlen(src.text);
        char *grown = realloc(all, len + n + 2);
        if (!grown) {
            lntune_source_free(&src);
            rc = LNTUNE_ENOMEM;
            break;
        }
        all = grown;
        memcpy(all + len, src.text, n);
        len += n;
        all[len++] = '\n';
        all[len] = '\0';
        lntune_source_free(&src);
    }
    lntune_gen_set_isa(g, 0);
    if (rc != LNTUNE_OK) {
        free(all);
        return rc;
    }
    *text = all;
    return LNTUNE_OK;
}

/*
 * The forward built-ins of the tuples with fp16 or bf16 in them: the fp32 built-ins' parameters,
 * emitted for each (x, y, gamma/beta) tuple with its types as constants, so that an untuned
 * 16-bit call gets the same vectorized loops as an fp32 one (core/typed_kernel.h's generic
 * body, which they replace there, converts and sums one element at a time). All-bf16 calls take
 * the even/odd layout: bf16 widened by a shift or a mask, with no lane shuffles.
 */
void lntune_builtin_typed_symbol(const char *prefix, size_t i, lntune_types t, char *buf,
                                 size_t size) {
    const lntune_builtin_variant *v = &lntune_builtin_variants[i];
    snprintf(buf, size, "%s_%s_%s_%s_%s_%s", prefix, v->op, v->affine ? "affine" : "plain",
             lntune_type_name(t.x), lntune_type_name(t.y), lntune_type_name(t.params));
}

int lntune_builtin_emit_typed_one(lntune_gen *g, const lntune_builtin_level *level, size_t i,
                                  lntune_types t, const char *symbol, lntune_source *src) {
    const int evenodd = t.x == LNTUNE_TYPE_BF16 && t.y == t.x && t.params == t.x;
    const int f16 = t.x == LNTUNE_TYPE_F16 || t.y == LNTUNE_TYPE_F16 || t.params == LNTUNE_TYPE_F16;
    char base[256], variant[300];
    snprintf(base, sizeof base, "%s%s", lntune_builtin_variants[i].variant,
             evenodd ? ",layout=evenodd" : "");
    level_variant(base, level, f16, variant, sizeof variant);
    lntune_shape shape = {0};
    shape.types = t;
    shape.types.residual = 0;
    lntune_gen_set_isa(g, level->isa);
    const int rc =
        lntune_gen_emit(g, "cpu", lntune_builtin_variants[i].op, variant, &shape, symbol, src);
    lntune_gen_set_isa(g, 0);
    return rc;
}

/*
 * Closes an emitter's two streams: t (the table's entries, into *table) and f (the kernels, into
 * *text), after appending "const lntune_kernel_fn <prefix><declarator> = {<entries>};" to the
 * kernels. Returns rc, or LNTUNE_ENOMEM where a stream failed; on failure *text is NULL.
 */
static int close_with_table(FILE *f, char **text, FILE *t, char **table, const char *prefix,
                            const char *declarator, int rc) {
    if (t && fclose(t) != 0 && rc == LNTUNE_OK) rc = LNTUNE_ENOMEM;
    if (rc == LNTUNE_OK)
        fprintf(f, "const lntune_kernel_fn %s%s = {\n%s};\n", prefix, declarator, *table);
    free(*table);
    if (f && fclose(f) != 0 && rc == LNTUNE_OK) rc = LNTUNE_ENOMEM;
    if (rc != LNTUNE_OK) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

int lntune_builtin_emit_typed(lntune_gen *g, const lntune_builtin_level *level, const char *prefix,
                              char **text) {
    *text = NULL;
    char *table = NULL;
    size_t len = 0, table_len = 0;
    FILE *f = open_memstream(text, &len), *t = open_memstream(&table, &table_len);
    int rc = f && t ? LNTUNE_OK : LNTUNE_ENOMEM;
    for (size_t i = 0; i < lntune_builtin_variant_count && rc == LNTUNE_OK; ++i) {
        const lntune_builtin_variant *v = &lntune_builtin_variants[i];
        /* tuple 0, all fp32, is lntune_builtin_emit's */
        for (int packed = 1; packed < 64 && rc == LNTUNE_OK; ++packed) {
            const lntune_types tt = lntune_types_unpacked(packed);
            if (tt.x >= LNTUNE_TYPE_COUNT || tt.y >= LNTUNE_TYPE_COUNT ||
                tt.params >= LNTUNE_TYPE_COUNT)
                continue;
            char symbol[160];
            lntune_builtin_typed_symbol(prefix, i, tt, symbol, sizeof symbol);
            lntune_source src;
            if ((rc = lntune_builtin_emit_typed_one(g, level, i, tt, symbol, &src)) != LNTUNE_OK)
                break;
            fprintf(f, "%s\n", src.text);
            lntune_source_free(&src);
            fprintf(t, "    [%d][%d][%d][%d][%d] = %s,\n", strcmp(v->op, "layernorm") != 0,
                    v->affine, tt.x, tt.y, tt.params, symbol);
        }
    }
    return close_with_table(f, text, t, &table, prefix, "_typed[2][2][3][3][3]", rc);
}

/*
 * The fused Add & Norm built-ins of the all-bf16 tuple (x, residual, y and gamma/beta bf16), the
 * fp32 built-ins' parameters in the even/odd layout. The runtime's residual built-in for other
 * tuples sums x + residual into an fp32 row and normalizes that with the unfused built-in
 * (runtime/builtin_residual_body.h); for all-bf16 that path narrows y and residual_out with lane
 * shuffles and was slower than a separate add and LayerNorm. The streaming level stores y
 * non-temporally and residual_out plainly (rstore=plain): on a Zen 3, non-temporal residual_out
 * was 2-9% faster at H = 1024-4096 but 1.4-1.6x slower at H = 768 and 776. It prefetches the
 * next rows of x and of the residual (prefetch=2, rprefetch=1).
 */
static const int fused_bf16_fusions[] = {LNTUNE_FUSION_RESIDUAL, LNTUNE_FUSION_RESIDUAL_OUT};

int lntune_builtin_emit_fused_bf16(lntune_gen *g, const lntune_builtin_level *level,
                                   const char *prefix, char **text) {
    *text = NULL;
    char *table = NULL;
    size_t len = 0, table_len = 0;
    FILE *f = open_memstream(text, &len), *t = open_memstream(&table, &table_len);
    int rc = f && t ? LNTUNE_OK : LNTUNE_ENOMEM;
    lntune_shape shape = {0};
    shape.types = (lntune_types){LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0};
    lntune_gen_set_isa(g, level->isa);
    for (size_t i = 0; i < lntune_builtin_variant_count && rc == LNTUNE_OK; ++i) {
        const lntune_builtin_variant *v = &lntune_builtin_variants[i];
        char base[300], variant[320];
        snprintf(base, sizeof base, "%s,layout=evenodd", v->variant);
        level_variant(base, level, 0, variant, sizeof variant);
        if (level->streaming) /* the residual's next row too: 10-58% for bf16 Add & Norm (Zen 4) */
            snprintf(variant + strlen(variant), sizeof variant - strlen(variant), ",rprefetch=1");
        fprintf(t, "    [%d][%d] = {", strcmp(v->op, "layernorm") != 0, v->affine);
        for (size_t k = 0; k < 2 && rc == LNTUNE_OK; ++k) {
            const int fusion = fused_bf16_fusions[k];
            char symbol[160];
            snprintf(symbol, sizeof symbol, "%s_%s_%s_bf16_%s", prefix, v->op,
                     v->affine ? "affine" : "plain", lntune_fusion_name(fusion));
            shape.fusion = fusion;
            lntune_source src;
            if ((rc = lntune_gen_emit(g, "cpu", v->op, variant, &shape, symbol, &src)) != LNTUNE_OK)
                break;
            fprintf(f, "%s\n", src.text);
            lntune_source_free(&src);
            fprintf(t, "%s%s", k ? ", " : "", symbol);
        }
        fprintf(t, "},\n");
    }
    lntune_gen_set_isa(g, 0);
    return close_with_table(f, text, t, &table, prefix, "_fused_bf16[2][2][2]", rc);
}

/* The backward built-ins: the forward's heuristic (4-lane portable vectors, 2 accumulators),
 * one row at a time. Their row sums flush fp32 lanes into double, as the forward's do. Each
 * (op, x type, params type) comes unfused and fused (dresidual_out added to dx, fusion.h's
 * "residual"), the table's second index. */
const char lntune_builtin_backward_variant[] = "vec=4,acc=2,rows=1,h=runtime,store=plain,threads=1";

int lntune_builtin_emit_backward(lntune_gen *g, const lntune_builtin_level *level,
                                 const char *prefix, char **text) {
    static const char *const ops[] = {"layernorm_backward", "rmsnorm_backward"};
    *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) return LNTUNE_ENOMEM;
    int rc = LNTUNE_OK;
    char variant[256];
    level_variant(lntune_builtin_backward_variant, level, 0, variant, sizeof variant);
    lntune_gen_set_isa(g, level->isa);
    char table[8192] = "";
    size_t at = 0;
    for (int op = 0; op < 2 && rc == LNTUNE_OK; ++op) {
        at += (size_t)snprintf(table + at, sizeof table - at, "    {\n");
        for (int fused = 0; fused < 2 && rc == LNTUNE_OK; ++fused) {
            at += (size_t)snprintf(table + at, sizeof table - at, "        {\n");
            for (int x = 0; x < LNTUNE_TYPE_COUNT && rc == LNTUNE_OK; ++x) {
                at += (size_t)snprintf(table + at, sizeof table - at, "            {");
                for (int p = 0; p < LNTUNE_TYPE_COUNT && rc == LNTUNE_OK; ++p) {
                    char symbol[128];
                    snprintf(symbol, sizeof symbol, "%s_%s%s_%s_%s", prefix, ops[op],
                             fused ? "_residual" : "", lntune_type_name(x), lntune_type_name(p));
                    lntune_shape shape = {0};
                    shape.types =
                        (lntune_types){.x = (uint8_t)x, .y = (uint8_t)x, .params = (uint8_t)p};
                    shape.fusion = fused ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE;
                    lntune_source src;
                    rc = lntune_gen_emit(g, "cpu", ops[op], variant, &shape, symbol, &src);
                    if (rc != LNTUNE_OK) break;
                    fprintf(f, "%s\n", src.text);
                    lntune_source_free(&src);
                    at += (size_t)snprintf(table + at, sizeof table - at, "%s%s", p ? ", " : "",
                                           symbol);
                }
                at += (size_t)snprintf(table + at, sizeof table - at, "},\n");
            }
            at += (size_t)snprintf(table + at, sizeof table - at, "        },\n");
        }
        at += (size_t)snprintf(table + at, sizeof table - at, "    },\n");
    }
    lntune_gen_set_isa(g, 0);
    if (rc == LNTUNE_OK && at >= sizeof table) rc = LNTUNE_ERROR; /* the table was cut short */
    if (rc == LNTUNE_OK)
        fprintf(f, "const lntune_backward_kernel_fn %s_backward[2][2][3][3] = {\n%s};\n", prefix,
                table);
    if (fclose(f) != 0 && rc == LNTUNE_OK) rc = LNTUNE_ENOMEM;
    if (rc != LNTUNE_OK) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

/* The runtime's built-ins for short rows, tried before the generic ones above: a warp per row
 * (rows of up to 1024 floats; measured on an H200 near the best with H read at run time). */
#define CUDA_WARP "layout=warp,tpr=32,cluster=1,block=256,pack=4,cache=none,h=runtime"
const lntune_builtin_cuda_variant lntune_builtin_cuda_short_variants[] = {
    {"layernorm", 1, 1024, "warp", CUDA_WARP ",stats=twopass,affine=fused"},
    {"layernorm", 0, 1024, "warp", CUDA_WARP ",stats=twopass,affine=none"},
    {"rmsnorm", 1, 1024, "warp", CUDA_WARP ",stats=sumsq,affine=fused"},
    {"rmsnorm", 0, 1024, "warp", CUDA_WARP ",stats=sumsq,affine=none"},
};
const size_t lntune_builtin_cuda_short_variant_count =
    sizeof lntune_builtin_cuda_short_variants / sizeof lntune_builtin_cuda_short_variants[0];

static const int builtin_cuda_fusions[] = {LNTUNE_FUSION_NONE, LNTUNE_FUSION_RESIDUAL,
                                           LNTUNE_FUSION_RESIDUAL_OUT};

void lntune_builtin_cuda_typed_symbol(const char *prefix, size_t i, int fusion, char *symbol,
                                      size_t size) {
    const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
    snprintf(symbol, size, "%s_cuda_%s_%s_typed%s%s", prefix, v->op, v->affine ? "affine" : "plain",
             fusion ? "_" : "", fusion ? lntune_fusion_name(fusion) : "");
}

int lntune_builtin_emit_cuda_typed(lntune_gen *g, size_t i, int fusion, const char *symbol,
                                   lntune_source *src) {
    const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
    const lntune_shape shape = {.fusion = fusion, .generic_types = 1};
    return lntune_gen_emit(g, "cuda", v->op, v->variant, &shape, symbol, src);
}

void lntune_builtin_cuda_backward_symbol(const char *prefix, size_t i, int fusion, char *symbol,
                                         size_t size) {
    snprintf(symbol, size, "%s_cuda_%s_typed%s%s", prefix,
             lntune_builtin_cuda_backward_variants[i].op, fusion ? "_" : "",
             fusion ? lntune_fusion_name(fusion) : "");
}

int lntune_builtin_emit_cuda_backward(lntune_gen *g, size_t i, int fusion, const char *symbol,
                                      lntune_source *src) {
    const lntune_builtin_variant *v = &lntune_builtin_cuda_backward_variants[i];
    const lntune_shape shape = {.fusion = fusion, .generic_types = 1};
    return lntune_gen_emit(g, "cuda", v->op, v->variant, &shape, symbol, src);
}

/* Writes text as a C string literal, one source line per line of text. */
static void put_literal(FILE *f, const char *text) {
    if (!text) {
        fputs("NULL", f);
        return;
    }
    fputs("\n    \"", f);
    for (const unsigned char *p = (const unsigned char *)text; *p; ++p) {
        if (*p == '\n')
            fputs(p[1] ? "\\n\"\n    \"" : "\\n", f);
        else if (*p == '\\' || *p == '"')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            fprintf(f, "\\%03o", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

int lntune_builtin_emit_cuda(lntune_gen *g, const lntune_nvrtc *nv, const char *prefix, char **text,
                             char **message) {
    *text = *message = NULL;
    enum { SM = 80 }; /* PTX for compute_80 runs on every GPU the templates target */
    int rc = lntune_gen_set_cuda_arch(g, SM);
    if (rc != LNTUNE_OK) return rc;
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) return LNTUNE_ENOMEM;
    fprintf(f, "#include \"builtin.h\"\n\nconst lntune_builtin_cuda_kernel %s_cuda[] = {\n",
            prefix);
    const size_t nshort = lntune_builtin_cuda_short_variant_count;
    for (size_t i = 0; i < nshort + lntune_builtin_cuda_variant_count && rc == LNTUNE_OK; ++i) {
        /* The short-row ones first (the runtime takes the first that admits H), then the
         * generic ones lntune export uses too, for any H. */
        lntune_builtin_cuda_variant generic;
        if (i >= nshort) {
            const lntune_builtin_variant *c = &lntune_builtin_cuda_variants[i - nshort];
            generic = (lntune_builtin_cuda_variant){c->op, c->affine, 0, "generic", c->variant};
        }
        const lntune_builtin_cuda_variant *v =
            i < nshort ? &lntune_builtin_cuda_short_variants[i] : &generic;
        char symbol[128];
        snprintf(symbol, sizeof symbol, "%s_cuda_%s_%s_%s", prefix, v->op,
                 v->affine ? "affine" : "plain", v->name);
        lntune_source src;
        if ((rc = lntune_gen_emit(g, "cuda", v->op, v->variant, NULL, symbol, &src)) != LNTUNE_OK)
            break;
        lntune_nvrtc_output out = {0};
        if (nv && (rc = lntune_nvrtc_compile(nv, src.text, symbol, SM, LNTUNE_NVRTC_PTX, NULL,
                                             &out)) != LNTUNE_OK) {
            *message = out.message;
            out.message = NULL;
        } else {
            fprintf(f, "    {%d, %d, %lld, \"%s\", \"%s\",", strcmp(v->op, "rmsnorm") == 0,
                    v->affine, (long long)v->max_h, symbol, src.variant);
            put_literal(f, src.text);
            fputc(',', f);
            put_literal(f, nv ? (const char *)out.data : NULL);
            fputs(", 0, 0},\n", f);
        }
        lntune_nvrtc_output_free(&out);
        lntune_source_free(&src);
    }
    for (size_t i = 0; i < lntune_builtin_cuda_variant_count * 3 && rc == LNTUNE_OK; ++i) {
        const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i / 3];
        const int fusion = builtin_cuda_fusions[i % 3];
        char symbol[128];
        lntune_source src;
        lntune_builtin_cuda_typed_symbol(prefix, i / 3, fusion, symbol, sizeof symbol);
        if ((rc = lntune_builtin_emit_cuda_typed(g, i / 3, fusion, symbol, &src)) != LNTUNE_OK)
            break;
        fprintf(f, "    {%d, %d, 0, \"%s\", \"%s\",", strcmp(v->op, "rmsnorm") == 0, v->affine,
                symbol, src.variant);
        put_literal(f, src.text);
        fprintf(f, ", NULL, 1, %d},\n", fusion);
        lntune_source_free(&src);
    }
    /* The backward: op LNTUNE_DESC_*_BACKWARD, one kernel for calls with and without gamma. */
    for (size_t i = 0; i < lntune_builtin_cuda_backward_variant_count * 2 && rc == LNTUNE_OK; ++i) {
        const int fusion = i % 2 ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE;
        char symbol[128];
        lntune_source src;
        lntune_builtin_cuda_backward_symbol(prefix, i / 2, fusion, symbol, sizeof symbol);
        if ((rc = lntune_builtin_emit_cuda_backward(g, i / 2, fusion, symbol, &src)) != LNTUNE_OK)
            break;
        fprintf(f, "    {%d, 1, 0, \"%s\", \"%s\",", 2 + (int)(i / 2), symbol, src.variant);
        put_literal(f, src.text);
        fprintf(f, ", NULL, 1, %d},\n", fusion);
        lntune_source_free(&src);
    }
    fprintf(f, "};\nconst size_t %s_cuda_count = sizeof %s_cuda / sizeof %s_cuda[0];\n", prefix,
            prefix, prefix);
    if (fclose(f) != 0 && rc == LNTUNE_OK) rc = LNTUNE_ENOMEM;
    if (rc != LNTUNE_OK) {
        free(*text);
        *text = NULL;
    }
    return rc;
}
