/*
 * export_typed.c - the exported file's fallback for fp16/bf16 type tuples: what serves a call of
 * a tuple (x, y, gamma/beta) no exported winner covers, as runtime/builtin_typed.c does for
 * liblntune.
 *
 * The tuples the winners have get liblntune's built-ins for them (gen/template/builtin.c: the
 * templates' generic variants with the tuple's types), so an untuned H of a tuned tuple runs
 * vectorized. Every other tuple, and beta without gamma, gets one small portable body instantiated
 * per (op, tuple), serving every affine kind: all 104 generated kernels would be 0.9 MB of C that
 * take gcc 17 s at -O3 for every app, even one calling fp32 only. The body is core/typed_kernel.h,
 * copied in as text (it needs nothing of liblntune).
 */
#include "export_internal.h"

#include "builtin.h"
#include "dtypes.h"
#include "lntune.h"

#include <stdlib.h>

static const char *const type_enum[LNTUNE_TYPE_COUNT] = {"TYPED_F32", "TYPED_F16", "TYPED_BF16"};

int lntune_export_put_typed_fallback(lntune_export_buf *b, lntune_gen *g,
                                     const unsigned char used[64], int avx2) {
    const char *body = lntune_export_embedded("typed_kernel.h");
    lntune_export_put(b,
                      "/* ---- fp16/bf16 fallback: portable kernels for every type tuple no winner "
                      "covers (core/typed_kernel.h) ---- */\n%s\n",
                      body ? body : "#error lntune was built without core/typed_kernel.h\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 1; t < LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT; ++t) {
            const int x = t / 9, y = t / 3 % 3, p = t % 3;
            lntune_export_put(
                b,
                "static int typed_%s_%s_%s_%s(const lntune_kernel_args *a, int64_t "
                "b, int64_t e)\n{\n    return typed_norm(a, b, e, %d, %s, %s, %s);\n}\n",
                lntune_export_ops[op].name, lntune_type_name(x), lntune_type_name(y),
                lntune_type_name(p), lntune_export_ops[op].centered, type_enum[x], type_enum[y],
                type_enum[p]);
        }
    lntune_export_put(b, "\n/* [op][x][y][params]; all-fp32 is served by the fp32 generics. */\n"
                         "static const lntune_kernel_fn typed_generic[][3][3][3] = {\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 1; t < LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT; ++t) {
            const int x = t / 9, y = t / 3 % 3, p = t % 3;
            lntune_export_put(b, "    [%zu][%d][%d][%d] = typed_%s_%s_%s_%s,\n", op, x, y, p,
                              lntune_export_ops[op].name, lntune_type_name(x), lntune_type_name(y),
                              lntune_type_name(p));
        }
    lntune_export_put(b, "};\n\n");

    /* The winners' tuples: liblntune's generated built-ins, by op and affine kind (with avx2, the
     * copy with non-temporal stores too). */
    lntune_export_buf table = {0}, streaming_table = {0};
    for (int packed = 1; packed < 64; ++packed) {
        if (!used[packed]) continue;
        const lntune_types t = lntune_types_unpacked(packed);
        for (size_t i = 0; i < lntune_builtin_variant_count; ++i) {
            const int op = lntune_export_op_find(lntune_builtin_variants[i].op);
            char symbol[160];
            lntune_builtin_typed_symbol("lntune_kernels_generic", i, t, symbol, sizeof symbol);
            char streaming_symbol[160];
            lntune_builtin_typed_symbol("lntune_kernels_streaming", i, t, streaming_symbol,
                                        sizeof streaming_symbol);
            lntune_source src = {0}, wide = {0}, streaming = {0};
            int rc = op < 0 ? LNTUNE_ERROR
                            : lntune_builtin_emit_typed_one(g, &lntune_builtin_generic, i, t,
                                                            symbol, &src);
            if (rc == LNTUNE_OK && avx2 &&
                (rc = lntune_builtin_emit_typed_one(g, &lntune_builtin_avx2, i, t, symbol,
                                                    &wide)) == LNTUNE_OK)
                rc = lntune_builtin_emit_typed_one(g, &lntune_builtin_avx2_streaming, i, t,
                                                   streaming_symbol, &streaming);
            if (rc == LNTUNE_OK) {
                lntune_export_put_levels(b, wide.text, src.text);
                if (streaming.text)
                    lntune_export_put(b, "#if LNTUNE_KERNELS_AVX2\n%s\n#endif\n", streaming.text);
            }
            lntune_source_free(&src);
            lntune_source_free(&wide);
            lntune_source_free(&streaming);
            if (rc != LNTUNE_OK) {
                free(table.s);
                free(streaming_table.s);
                return rc;
            }
            const int affine = lntune_builtin_variants[i].affine;
            lntune_export_put(&table, "    [%d][%d][%d][%d][%d] = %s,\n", op, affine, t.x, t.y,
                              t.params, symbol);
            if (avx2)
                lntune_export_put(&streaming_table, "    [%d][%d][%d][%d][%d] = %s,\n", op, affine,
                                  t.x, t.y, t.params, streaming_symbol);
        }
    }
    lntune_export_put(b,
                      "/* [op][affine: 0 neither, 1 gamma][x][y][params]: the generated generic "
                      "kernels of the\n * winners' tuples; NULL: typed_generic serves. */\n"
                      "static const lntune_kernel_fn typed_builtin[%zu][2][3][3][3]%s%s%s;\n\n",
                      lntune_export_op_count, table.s ? " = {\n" : "", table.s ? table.s : "",
                      table.s ? "}" : "");
    free(table.s);
    lntune_export_put(b,
                      "/* typed_builtin's copies with non-temporal stores; NULL: none. */\n"
                      "static const lntune_kernel_fn typed_streaming[%zu][2][3][3][3]",
                      lntune_export_op_count);
    if (streaming_table.s)
        lntune_export_put(b, "\n#if LNTUNE_KERNELS_AVX2\n    = {\n%s}\n#endif\n",
                          streaming_table.s);
    lntune_export_put(b, ";\n\n");
    free(streaming_table.s);
    return b->oom ? LNTUNE_ENOMEM : LNTUNE_OK;
}

/* The fused Add & Norm built-ins of all-bf16 calls (gen/template/builtin.c) with the level's text:
 * the AVX2 and streaming copies where the file is compiled for AVX2, else the generic one. */
static int put_fused_bf16_levels(lntune_export_buf *b, lntune_gen *g, int avx2) {
    char *generic = NULL, *wide = NULL, *streaming = NULL;
    int rc = lntune_builtin_emit_fused_bf16(g, &lntune_builtin_generic, "lntune_kernels_generic",
                                            &generic);
    if (rc == LNTUNE_OK && avx2 &&
        (rc = lntune_builtin_emit_fused_bf16(g, &lntune_builtin_avx2, "lntune_kernels_generic",
                                             &wide)) == LNTUNE_OK)
        rc = lntune_builtin_emit_fused_bf16(g, &lntune_builtin_avx2_streaming,
                                            "lntune_kernels_streaming", &streaming);
    if (rc == LNTUNE_OK) { /* as the typed fallback's: the level's copy, then the streaming one */
        lntune_export_put_levels(b, wide, generic);
        if (streaming) lntune_export_put(b, "#if LNTUNE_KERNELS_AVX2\n%s\n#endif\n", streaming);
    }
    free(generic);
    free(wide);
    free(streaming);
    return rc;
}

int lntune_export_put_fused_bf16(lntune_export_buf *b, lntune_gen *g, int used, int avx2) {
    /* The built-ins' table is [0 layernorm, 1 rmsnorm][affine][residual_out]: the export's op
     * indices must be those. */
    used = used && lntune_export_op_find("layernorm") == 0 && lntune_export_op_find("rmsnorm") == 1;
    if (used) {
        lntune_export_put(b, "/* ---- all-bf16 Add & Norm: liblntune's fused built-ins (a winner "
                             "is all-bf16 fused) ---- */\n");
        int rc = put_fused_bf16_levels(b, g, avx2);
        if (rc != LNTUNE_OK) return rc;
    }
    lntune_export_put(b,
                      "/* The fused kernel of an all-bf16 call of op (affine: 0 neither, 1 gamma; "
                      "out: whether\n * residual_out is written), or NULL: then the fp32 row "
                      "path. */\n"
                      "static lntune_kernel_fn fused_bf16_generic(int op, int affine, int out, int "
                      "streams)\n{\n");
    if (!used)
        lntune_export_put(b, "    (void)op, (void)affine, (void)out, (void)streams;\n"
                             "    return NULL; /* no winner is all-bf16 fused */\n}\n\n");
    else
        lntune_export_put(b,
                          "%s    return lntune_kernels_generic_fused_bf16[op][affine][out];\n}\n\n",
                          avx2 ? "#if LNTUNE_KERNELS_AVX2\n    if (streams) return "
                                 "lntune_kernels_streaming_fused_bf16[op][affine][out];\n"
                                 "#endif\n    (void)streams;\n"
                               : "    (void)streams;\n");
    return LNTUNE_OK;
}

void lntune_export_put_residual_fallback(lntune_export_buf *b, int avx2) {
    enum { N = LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT };
    const char *vector = avx2 ? lntune_export_embedded("typed_vector.h") : NULL;
    if (vector) {
        lntune_export_put(b, "#if LNTUNE_KERNELS_AVX2\n%s\n", vector);
        lntune_export_put_code(b, "cpu/residual_vector_macros.h");
        lntune_export_put(b, "#else\n");
    }
    lntune_export_put(b,
                      "#define RESIDUAL_SUM8(X, R)\n#define RESIDUAL_STORE8(R)\n"
                      "#define RESIDUAL_FENCE() ((void)0)\n%s",
                      vector ? "#endif\n" : "");
    lntune_export_put_code(b, "cpu/residual_fallback.c");
    /* The kernel ABI carries no types: one small function per (op, x, y, params, residual). */
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 0; t < N; ++t) {
            const int x = t / 27, y = t / 9 % 3, p = t / 3 % 3, r = t % 3;
            lntune_export_put(b,
                              "static int residual_%s_%d%d%d%d(const lntune_kernel_args *a, "
                              "int64_t b, int64_t e)\n{\n"
                              "    return residual_norm(a, b, e, %zu, %s, %s, %s, %s);\n}\n",
                              lntune_export_ops[op].name, x, y, p, r, op, type_enum[x],
                              type_enum[y], type_enum[p], type_enum[r]);
        }
    lntune_export_put(b, "\n/* [op][x][y][params][residual] */\n"
                         "static const lntune_kernel_fn residual_generic[][3][3][3][3] = {\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 0; t < N; ++t) {
            const int x = t / 27, y = t / 9 % 3, p = t / 3 % 3, r = t % 3;
            lntune_export_put(b, "    [%zu][%d][%d][%d][%d] = residual_%s_%d%d%d%d,\n", op, x, y, p,
                              r, lntune_export_ops[op].name, x, y, p, r);
        }
    lntune_export_put(b, "};\n\n");
}

/* The backward fallback: one portable body (the statistics are typed_kernel.h's when not saved),
 * sums of a row in double, dx rounded once, dgamma/dbeta terms into the caller's fp32 partials,
 * instantiated per (x, params). Lighter than the templates' backward built-ins, whose 36 kernels
 * would triple an app's compile time for a path only untuned shapes take
 * (exported/cpu/backward_generic.c). */
void lntune_export_put_backward_fallback(lntune_export_buf *b) {
    enum { N = 2 * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT };
    lntune_export_put_code(b, "cpu/backward_generic.c");
    /* The body inlined once per (x, params), the types constant there; op and fusion stay
     * arguments, so the fallback adds about a second to an app's compile. */
    for (int t = 0; t < LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT; ++t)
        lntune_export_put(
            b,
            "static int backward_%s_%s(const lntune_backward_kernel_args *a, int64_t "
            "b, int64_t e,\n    float *dg, float *db, int centered, int fused)\n{\n"
            "    return typed_backward(a, b, e, dg, db, centered, fused, %s, %s);\n}\n",
            lntune_type_name(t / 3), lntune_type_name(t % 3), type_enum[t / 3], type_enum[t % 3]);
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 0; t < N; ++t) {
            const int fused = t / 9, x = t / 3 % 3, p = t % 3;
            lntune_export_put(b,
                              "static int backward_%s_%d%d%d(const lntune_backward_kernel_args *a, "
                              "int64_t b, int64_t e,\n    float *dg, float *db)\n{\n"
                              "    return backward_%s_%s(a, b, e, dg, db, %d, %d);\n}\n",
                              lntune_export_ops[op].name, fused, x, p, lntune_type_name(x),
                              lntune_type_name(p), lntune_export_ops[op].centered, fused);
        }
    lntune_export_put(b,
                      "\n/* [op][fused][x][params] */\n"
                      "static const lntune_backward_kernel_fn generic_backward[][2][3][3] = {\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 0; t < N; ++t) {
            const int fused = t / 9, x = t / 3 % 3, p = t % 3;
            lntune_export_put(b, "    [%zu][%d][%d][%d] = backward_%s_%d%d%d,\n", op, fused, x, p,
                              lntune_export_ops[op].name, fused, x, p);
        }
    lntune_export_put(b, "};\n\n");
}
