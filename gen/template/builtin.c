/*
 * builtin.c - the generic kernels: which ones there are, and their generation into one source.
 *
 * Their knob values are the templates' presets (lntune_gen_preset): "builtin" and, on x86-64,
 * "builtin_avx2" (chosen at run time) and "builtin_avx2_streaming" in templates/cpu/norm.lua
 * and norm_backward.lua; "builtin" and "builtin_warp" in templates/cuda/norm.lua, "builtin" in
 * norm_backward.lua. Here are only the kernels' names, the
 * calls they serve (op, affine kind, types, fusion) and the tables that index them.
 */
#include "builtin.h"
#include "builtin_policy.h"

#include "dtypes.h"
#include "fusion.h"
#include "hardware.h"
#include "lntune.h"
#include "nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const lntune_builtin_variant lntune_builtin_variants[] = {
    {"layernorm", 1},
    {"layernorm", 0},
    {"rmsnorm", 1},
    {"rmsnorm", 0},
};
const size_t lntune_builtin_variant_count =
    sizeof lntune_builtin_variants / sizeof lntune_builtin_variants[0];

/* CUDA: the templates' preset "builtin" (lntune export's fallback, the runtime's for any H). */
const lntune_builtin_variant lntune_builtin_cuda_variants[] = {
    {"layernorm", 1},
    {"layernorm", 0},
    {"rmsnorm", 1},
    {"rmsnorm", 0},
};
const size_t lntune_builtin_cuda_variant_count =
    sizeof lntune_builtin_cuda_variants / sizeof lntune_builtin_cuda_variants[0];

/* The CUDA backward (runtime's built-in), preset "builtin", one kernel for calls with and without
 * gamma. */
const lntune_builtin_variant lntune_builtin_cuda_backward_variants[] = {
    {"layernorm_backward", 1},
    {"rmsnorm_backward", 1},
};
const size_t lntune_builtin_cuda_backward_variant_count =
    sizeof lntune_builtin_cuda_backward_variants / sizeof lntune_builtin_cuda_backward_variants[0];

/* Generic: what the build host's compiler makes of plain C vectors without -march. */
const lntune_builtin_level lntune_builtin_generic = {"generic", "builtin", 0};
/* x86-64 with AVX2, FMA and F16C (x86-64-v3 less BMI and MOVBE, which kernels have no use for):
 * every x86-64 CPU sold since 2013-2015. Its features are given so that the build host's own
 * do not matter: the copy is the same wherever it is built. */
#define AVX2_ISA                                                                                   \
    (LNTUNE_ISA_SSE | LNTUNE_ISA_SSE2 | LNTUNE_ISA_SSE4_2 | LNTUNE_ISA_AVX | LNTUNE_ISA_AVX2 |     \
     LNTUNE_ISA_FMA | LNTUNE_ISA_F16C)
const lntune_builtin_level lntune_builtin_avx2 = {"avx2", "builtin_avx2", AVX2_ISA};
const lntune_builtin_level lntune_builtin_avx2_streaming = {"avx2", "builtin_avx2_streaming",
                                                            AVX2_ISA};
/* AVX-512 F, BW and VL on top (Skylake-SP and later, Zen 4): the forward kernels at 16 lanes. */
#define AVX512_ISA (AVX2_ISA | LNTUNE_ISA_AVX512F | LNTUNE_ISA_AVX512BW | LNTUNE_ISA_AVX512VL)
const lntune_builtin_level lntune_builtin_avx512 = {"avx512", "builtin_avx512", AVX512_ISA};
const lntune_builtin_level lntune_builtin_avx512_streaming = {"avx512", "builtin_avx512_streaming",
                                                              AVX512_ISA};

/* The template's preset of target/op for a call of that affine kind (LNTUNE_AFFINE_*) and shape's
 * types and fusion (NULL: fp32, unfused), on the host as set: its variant, malloc'd. */
static int preset_variant(lntune_gen *g, const char *target, const char *op, const char *preset,
                          int affine, const lntune_shape *shape, char **variant) {
    lntune_shape call = shape ? *shape : (lntune_shape){0};
    call.affine = affine;
    return lntune_gen_preset(g, target, op, preset, &call, variant);
}

/* Generates that preset as symbol, for shape as lntune_gen_emit takes it. */
static int emit_preset(lntune_gen *g, const char *target, const char *op, const char *preset,
                       int affine, const lntune_shape *shape, const char *symbol,
                       lntune_source *src) {
    char *variant = NULL;
    int rc = preset_variant(g, target, op, preset, affine, shape, &variant);
    if (rc == LNTUNE_OK) rc = lntune_gen_emit(g, target, op, variant, shape, symbol, src);
    free(variant);
    return rc;
}

static int affine_kind(const lntune_builtin_variant *v) {
    return v->affine ? LNTUNE_AFFINE_GAMMA : LNTUNE_AFFINE_NONE;
}

int lntune_builtin_variant_string(lntune_gen *g, const lntune_builtin_level *level, size_t i,
                                  char **variant) {
    const lntune_builtin_variant *v = &lntune_builtin_variants[i];
    lntune_gen_set_isa(g, level->isa);
    const int rc = preset_variant(g, "cpu", v->op, level->preset, affine_kind(v), NULL, variant);
    lntune_gen_set_isa(g, 0);
    return rc;
}

const lntune_builtin_level *lntune_builtin_level_for(uint32_t isa, int forward_unfused,
                                                     int streaming) {
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
    if (forward_unfused && lntune_builtin_avx512_usable(isa))
        return streaming ? &lntune_builtin_avx512_streaming : &lntune_builtin_avx512;
#else
    (void)forward_unfused;
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    if (lntune_builtin_avx2_usable(isa))
        return streaming ? &lntune_builtin_avx2_streaming : &lntune_builtin_avx2;
#endif
    (void)isa, (void)streaming;
    return &lntune_builtin_generic; /* no streaming copy: liblntune runs the plain one */
}

int lntune_builtin_run_variant(lntune_gen *g, const lntune_builtin_level *level, const char *op,
                               const lntune_shape *shape, int threads, char **variant) {
    char *preset = NULL;
    *variant = NULL;
    int rc = lntune_gen_preset(g, "cpu", op, level->preset, shape, &preset);
    if (rc != LNTUNE_OK) return rc;
    /* A preset is written for one thread; threads is a launch knob, the canonical text's last. */
    const char *knob = strstr(preset, "threads=");
    const size_t size = strlen(preset) + 16;
    if (!knob || strchr(knob, ',')) {
        rc = LNTUNE_ETEMPLATE;
    } else if (!(*variant = malloc(size))) {
        rc = LNTUNE_ENOMEM;
    } else {
        snprintf(*variant, size, "%.*sthreads=%d", (int)(knob - preset), preset, threads);
    }
    free(preset);
    return rc;
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
        const lntune_builtin_variant *v = &lntune_builtin_variants[i];
        char symbol[128];
        lntune_builtin_symbol(prefix, i, symbol, sizeof symbol);
        lntune_source src;
        rc = emit_preset(g, "cpu", v->op, level->preset, affine_kind(v), NULL, symbol, &src);
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
 * The forward built-ins of the tuples with fp16 or bf16 in them: the fp32 built-ins' preset,
 * emitted for each (x, y, gamma/beta) tuple with its types as constants, so that an untuned
 * 16-bit call gets the same vectorized loops as an fp32 one (core/typed_kernel.h's generic
 * body, which they replace there, converts and sums one element at a time). The preset picks
 * the tuple's layout and conversions (all-bf16: the even/odd layout).
 */
void lntune_builtin_typed_symbol(const char *prefix, size_t i, lntune_types t, char *buf,
                                 size_t size) {
    const lntune_builtin_variant *v = &lntune_builtin_variants[i];
    snprintf(buf, size, "%s_%s_%s_%s_%s_%s", prefix, v->op, v->affine ? "affine" : "plain",
             lntune_type_name(t.x), lntune_type_name(t.y), lntune_type_name(t.params));
}

int lntune_builtin_emit_typed_one(lntune_gen *g, const lntune_builtin_level *level, size_t i,
                                  lntune_types t, const char *symbol, lntune_source *src) {
    const lntune_builtin_variant *v = &lntune_builtin_variants[i];
    lntune_shape shape = {0};
    shape.types = t;
    shape.types.residual = 0;
    lntune_gen_set_isa(g, level->isa);
    const int rc = emit_preset(g, "cpu", v->op, level->preset, affine_kind(v), &shape, symbol, src);
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
 * fp32 built-ins' preset for that tuple and fusion (the even/odd layout; at the streaming level
 * the residual's next row prefetched too). The runtime's residual built-in for other tuples sums
 * x + residual into an fp32 row and normalizes that with the unfused built-in
 * (runtime/builtin_residual_body.h); for all-bf16 that path narrows y and residual_out with lane
 * shuffles and was slower than a separate add and LayerNorm.
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
        fprintf(t, "    [%d][%d] = {", strcmp(v->op, "layernorm") != 0, v->affine);
        for (size_t k = 0; k < 2 && rc == LNTUNE_OK; ++k) {
            const int fusion = fused_bf16_fusions[k];
            char symbol[160];
            snprintf(symbol, sizeof symbol, "%s_%s_%s_bf16_%s", prefix, v->op,
                     v->affine ? "affine" : "plain", lntune_fusion_name(fusion));
            shape.fusion = fusion;
            lntune_source src;
            rc = emit_preset(g, "cpu", v->op, level->preset, affine_kind(v), &shape, symbol, &src);
            if (rc != LNTUNE_OK) break;
            fprintf(f, "%s\n", src.text);
            lntune_source_free(&src);
            fprintf(t, "%s%s", k ? ", " : "", symbol);
        }
        fprintf(t, "},\n");
    }
    lntune_gen_set_isa(g, 0);
    return close_with_table(f, text, t, &table, prefix, "_fused_bf16[2][2][2]", rc);
}

int lntune_builtin_emit_offset(lntune_gen *g, const lntune_builtin_level *level, const char *prefix,
                               char **text) {
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    *text = NULL;
    char *table = NULL;
    size_t len = 0, table_len = 0;
    FILE *f = open_memstream(text, &len), *t = open_memstream(&table, &table_len);
    int rc = f && t ? LNTUNE_OK : LNTUNE_ENOMEM;
    lntune_gen_set_isa(g, level->isa);
    for (int op = 0; op < 2 && rc == LNTUNE_OK; ++op) {
        fprintf(t, "    [%d] = {", op);
        for (int type = 0; type < LNTUNE_TYPE_COUNT && rc == LNTUNE_OK; ++type) {
            char symbol[160];
            snprintf(symbol, sizeof symbol, "%s_%s_offset_%s", prefix, ops[op],
                     lntune_type_name(type));
            lntune_shape shape = {0};
            shape.types = (lntune_types){(uint8_t)type, (uint8_t)type, (uint8_t)type, 0};
            shape.affine = LNTUNE_AFFINE_OFFSET; /* the only space with affine=offset */
            lntune_source src;
            rc = emit_preset(g, "cpu", ops[op], level->preset, LNTUNE_AFFINE_OFFSET, &shape, symbol,
                             &src);
            if (rc != LNTUNE_OK) break;
            fprintf(f, "%s\n", src.text);
            lntune_source_free(&src);
            fprintf(t, "%s%s", type ? ", " : "", symbol);
        }
        fprintf(t, "},\n");
    }
    lntune_gen_set_isa(g, 0);
    return close_with_table(f, text, t, &table, prefix, "_offset[2][3]", rc);
}

/* The backward built-ins: the level's preset of the backward templates. Each (op, x type, params
 * type) comes unfused and fused (dresidual_out added to dx, fusion.h's "residual"), the table's
 * second index. */
int lntune_builtin_emit_backward(lntune_gen *g, const lntune_builtin_level *level,
                                 const char *prefix, char **text) {
    static const char *const ops[] = {"layernorm_backward", "rmsnorm_backward"};
    *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) return LNTUNE_ENOMEM;
    int rc = LNTUNE_OK;
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
                    rc = emit_preset(g, "cpu", ops[op], level->preset, LNTUNE_AFFINE_ANY, &shape,
                                     symbol, &src);
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

/* The runtime's built-ins for short rows, tried before the generic ones above: the templates'
 * preset "builtin_warp", a warp per row, for rows of up to 1024 floats. */
const lntune_builtin_cuda_variant lntune_builtin_cuda_short_variants[] = {
    {"layernorm", 1, 1024, "warp", "builtin_warp"},
    {"layernorm", 0, 1024, "warp", "builtin_warp"},
    {"rmsnorm", 1, 1024, "warp", "builtin_warp"},
    {"rmsnorm", 0, 1024, "warp", "builtin_warp"},
};
const size_t lntune_builtin_cuda_short_variant_count =
    sizeof lntune_builtin_cuda_short_variants / sizeof lntune_builtin_cuda_short_variants[0];

static const int builtin_cuda_fusions[] = {LNTUNE_FUSION_NONE, LNTUNE_FUSION_RESIDUAL,
                                           LNTUNE_FUSION_RESIDUAL_OUT};

const char *lntune_builtin_affine_name(int affine) {
    return affine == LNTUNE_AFFINE_OFFSET  ? "offset"
           : affine == LNTUNE_AFFINE_GAMMA ? "affine"
                                           : "plain";
}

void lntune_builtin_cuda_kind_symbol(const char *prefix, const char *op, int affine, int y,
                                     int fusion, char *symbol, size_t size) {
    snprintf(symbol, size, "%s_cuda_%s_%s_%s%s%s", prefix, op, lntune_builtin_affine_name(affine),
             y == LNTUNE_TYPE_F32 ? "typed" : lntune_type_name(y), fusion ? "_" : "",
             fusion ? lntune_fusion_name(fusion) : "");
}

int lntune_builtin_emit_cuda_generic(lntune_gen *g, size_t i, const char *symbol,
                                     lntune_source *src) {
    const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
    return emit_preset(g, "cuda", v->op, "builtin", affine_kind(v), NULL, symbol, src);
}

int lntune_builtin_emit_cuda_kind(lntune_gen *g, const char *op, int affine, int y, int fusion,
                                  const char *symbol, lntune_source *src) {
    lntune_shape shape = {.fusion = fusion, .generic_types = 1};
    shape.types.y = (uint8_t)y; /* kept by the template only when quantized */
    if (affine == LNTUNE_AFFINE_OFFSET) shape.affine = affine; /* the only space with it */
    return emit_preset(g, "cuda", op, "builtin", affine, &shape, symbol, src);
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
    return emit_preset(g, "cuda", v->op, "builtin", LNTUNE_AFFINE_ANY, &shape, symbol, src);
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

/* One record of the table lntune_builtin_emit_cuda writes (runtime/builtin.h's
 * lntune_builtin_cuda_kernel): op and affine as C expressions, src's symbol, variant and text, the
 * PTX (NULL for typed ones, compiled at first use), the fusion and a quantized y (0: none). */
static void put_record(FILE *f, const char *op, const char *affine, int64_t max_h,
                       const lntune_source *src, const char *symbol, const char *ptx, int typed,
                       int fusion, int y) {
    fprintf(f, "    {%s, %s, %lld, \"%s\", \"%s\",", op, affine, (long long)max_h, symbol,
            src->variant);
    put_literal(f, src->text);
    fputc(',', f);
    put_literal(f, ptx);
    fprintf(f, ", %d, %d, %d},\n", typed, fusion, y);
}

static const char *desc_op(const char *op) {
    return strcmp(op, "rmsnorm") == 0 ? "LNTUNE_DESC_RMSNORM" : "LNTUNE_DESC_LAYERNORM";
}

static const char *desc_affine(int affine) {
    return affine == LNTUNE_AFFINE_OFFSET  ? "LNTUNE_DESC_GAMMA_OFFSET"
           : affine == LNTUNE_AFFINE_GAMMA ? "LNTUNE_DESC_GAMMA"
                                           : "LNTUNE_DESC_NO_AFFINE";
}

/* The typed forward built-ins: op x affine kind (with the weight offset's) x y (left to its
 * macro, or each quantized type) x fusion, lntune_builtin_emit_cuda_kind's sources. */
static const int kind_affines[] = {LNTUNE_AFFINE_NONE, LNTUNE_AFFINE_GAMMA, LNTUNE_AFFINE_OFFSET};
static const int kind_ys[] = {LNTUNE_TYPE_F32, LNTUNE_TYPE_I8, LNTUNE_TYPE_I8_ROW, LNTUNE_TYPE_E4M3,
                              LNTUNE_TYPE_E4M3_ROW};

static int emit_cuda_kinds(lntune_gen *g, FILE *f, const char *prefix) {
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    for (size_t i = 0; i < 2 * 3 * 5 * 3; ++i) {
        const char *op = ops[i / 45];
        const int affine = kind_affines[i / 15 % 3], type = kind_ys[i / 3 % 5];
        const int fusion = builtin_cuda_fusions[i % 3];
        char symbol[160];
        lntune_source src;
        lntune_builtin_cuda_kind_symbol(prefix, op, affine, type, fusion, symbol, sizeof symbol);
        const int rc = lntune_builtin_emit_cuda_kind(g, op, affine, type, fusion, symbol, &src);
        if (rc != LNTUNE_OK) return rc;
        put_record(f, desc_op(op), desc_affine(affine), 0, &src, symbol, NULL, 1, fusion,
                   type == LNTUNE_TYPE_F32 ? 0 : type);
        lntune_source_free(&src);
    }
    return LNTUNE_OK;
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
    fprintf(f,
            "#include \"builtin.h\"\n#include \"registry.h\"\n\n"
            "const lntune_builtin_cuda_kernel %s_cuda[] = {\n",
            prefix);
    const size_t nshort = lntune_builtin_cuda_short_variant_count;
    for (size_t i = 0; i < nshort + lntune_builtin_cuda_variant_count && rc == LNTUNE_OK; ++i) {
        /* The short-row ones first (the runtime takes the first that admits H), then the
         * generic ones lntune export uses too, for any H. */
        lntune_builtin_cuda_variant generic;
        if (i >= nshort) {
            const lntune_builtin_variant *c = &lntune_builtin_cuda_variants[i - nshort];
            generic = (lntune_builtin_cuda_variant){c->op, c->affine, 0, "generic", "builtin"};
        }
        const lntune_builtin_cuda_variant *v =
            i < nshort ? &lntune_builtin_cuda_short_variants[i] : &generic;
        char symbol[128];
        snprintf(symbol, sizeof symbol, "%s_cuda_%s_%s_%s", prefix, v->op,
                 v->affine ? "affine" : "plain", v->name);
        const int affine = v->affine ? LNTUNE_AFFINE_GAMMA : LNTUNE_AFFINE_NONE;
        lntune_source src;
        rc = emit_preset(g, "cuda", v->op, v->preset, affine, NULL, symbol, &src);
        if (rc != LNTUNE_OK) break;
        lntune_nvrtc_output out = {0};
        if (nv && (rc = lntune_nvrtc_compile(nv, src.text, symbol, SM, LNTUNE_NVRTC_PTX, NULL,
                                             &out)) != LNTUNE_OK) {
            *message = out.message;
            out.message = NULL;
        } else {
            put_record(f, desc_op(v->op), desc_affine(affine), v->max_h, &src, symbol,
                       nv ? (const char *)out.data : NULL, 0, 0, 0);
        }
        lntune_nvrtc_output_free(&out);
        lntune_source_free(&src);
    }
    if (rc == LNTUNE_OK) rc = emit_cuda_kinds(g, f, prefix);
    /* The backward: op LNTUNE_DESC_*_BACKWARD, one kernel for calls with and without gamma. */
    for (size_t i = 0; i < lntune_builtin_cuda_backward_variant_count * 2 && rc == LNTUNE_OK; ++i) {
        const int fusion = i % 2 ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE;
        char symbol[128];
        lntune_source src;
        lntune_builtin_cuda_backward_symbol(prefix, i / 2, fusion, symbol, sizeof symbol);
        if ((rc = lntune_builtin_emit_cuda_backward(g, i / 2, fusion, symbol, &src)) != LNTUNE_OK)
            break;
        put_record(f, i / 2 ? "LNTUNE_DESC_RMSNORM_BACKWARD" : "LNTUNE_DESC_LAYERNORM_BACKWARD",
                   "LNTUNE_DESC_GAMMA", 0, &src, symbol, NULL, 1, fusion, 0);
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
