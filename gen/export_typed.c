/*
 * export_typed.c - the exported file's fallback for fp16/bf16 type tuples: what serves a call of
 * a tuple (x, y, gamma/beta) no exported winner covers, as runtime/builtin_typed.c does for
 * liblntune.
 *
 * The tuples the winners have get liblntune's built-ins for them (gen/builtin.c: the templates'
 * generic variants with the tuple's types), so an untuned H of a tuned tuple runs vectorized.
 * Every other tuple, and beta without gamma, gets one small portable body instantiated per (op,
 * tuple), serving every affine kind: all 104 generated kernels would be 0.9 MB of C that take gcc
 * 17 s at -O3 for every app, even one calling fp32 only. The body is runtime/typed_kernel.h,
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
                      "covers (runtime/typed_kernel.h) ---- */\n%s\n",
                      body ? body : "#error lntune was built without runtime/typed_kernel.h\n");
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

/* The residual fallback's fixed part: a row of s = x + residual in fp32 (as
 * runtime/builtin_residual_body.h forms it), rounded once into residual_out if given, then
 * normalized by the unfused generic kernel of an fp32 x with the call's y and gamma/beta types.
 * Only the element loops are instantiated per type (9 sums, 3 stores); the row loop is one
 * function, so the fallback adds little to an app's compile time. */
static const char residual_text[] =
    "/* ---- residual add fallback: all-bf16 calls with gamma or neither take the fused kernel\n"
    " * where there is one; others s = x + residual in fp32 a row at a time, rounded into\n"
    " * residual_out if given, then the unfused generic kernel on s\n"
    " * (runtime/builtin_residual_body.h) ---- */\n"
    "enum { RESIDUAL_STACK_FLOATS = 4096 };\n"
    "typedef void (*residual_sum_fn)(float *s, const void *x, const void *r, int64_t H);\n"
    "typedef void (*residual_store_fn)(void *out, const float *s, int64_t H, int nt);\n"
    "\n"
    "#define RESIDUAL_SUM(X, R)                                                              \\\n"
    "    static void residual_sum_##X##_##R(float *s, const void *x, const void *r, int64_t H) \\\n"
    "    {                                                                                   \\\n"
    "        int64_t i = 0;                                                                  \\\n"
    "        RESIDUAL_SUM8(X, R)                                                             \\\n"
    "        for (; i < H; ++i)                                                              \\\n"
    "            s[i] = typed_load(TYPED_##X, x, i) + typed_load(TYPED_##R, r, i);           \\\n"
    "    }\n"
    "#define RESIDUAL_SUMS(X) RESIDUAL_SUM(X, F32) RESIDUAL_SUM(X, F16) RESIDUAL_SUM(X, BF16)\n"
    "RESIDUAL_SUMS(F32)\nRESIDUAL_SUMS(F16)\nRESIDUAL_SUMS(BF16)\n"
    "#define RESIDUAL_STORE(R)                                                               \\\n"
    "    static void residual_store_##R(void *out, const float *s, int64_t H, int nt)        \\\n"
    "    {                                                                                   \\\n"
    "        int64_t i = 0;                                                                  \\\n"
    "        RESIDUAL_STORE8(R)                                                              \\\n"
    "        (void)nt;                                                                       \\\n"
    "        for (; i < H; ++i) typed_store(TYPED_##R, out, i, s[i]);                        \\\n"
    "    }\n"
    "RESIDUAL_STORE(F32)\nRESIDUAL_STORE(F16)\nRESIDUAL_STORE(BF16)\n"
    "static const residual_sum_fn residual_sums[3][3] = {\n"
    "    {residual_sum_F32_F32, residual_sum_F32_F16, residual_sum_F32_BF16},\n"
    "    {residual_sum_F16_F32, residual_sum_F16_F16, residual_sum_F16_BF16},\n"
    "    {residual_sum_BF16_F32, residual_sum_BF16_F16, residual_sum_BF16_BF16}};\n"
    "static const residual_store_fn residual_stores[3] = {residual_store_F32, residual_store_F16,\n"
    "                                                     residual_store_BF16};\n"
    "\n"
    "static const void *residual_row(const void *base, int64_t r, int64_t stride, int type)\n"
    "{\n"
    "    return (const unsigned char *)base + (size_t)(r * stride) * typed_size(type);\n"
    "}\n"
    "\n"
    "static int residual_norm(const lntune_kernel_args *a, int64_t begin, int64_t end, int op, "
    "int xt,\n"
    "                         int yt, int pt, int rt)\n"
    "{\n"
    "    const int affine = a->gamma ? 1 : a->beta ? 2 : 0;\n"
    "    const int64_t residual_bytes = (int64_t)typed_size(rt) * (a->residual_out ? 2 : 1);\n"
    "    const int streams =\n"
    "        streaming_call(a, (int64_t)(typed_size(xt) + typed_size(yt)) + residual_bytes);\n"
    "    if (xt == TYPED_BF16 && yt == xt && pt == xt && rt == xt && affine < 2) {\n"
    "        const int out = a->residual_out != NULL;\n"
    "        const lntune_kernel_fn fused = fused_bf16_generic(op, affine, out, streams);\n"
    "        if (fused) return fused(a, begin, end);\n"
    "    }\n"
    "    const lntune_kernel_fn inner = unfused_generic(op, affine, TYPED_F32, yt, pt, streams);\n"
    "    const int64_t H = a->H;\n"
    "    float stack[RESIDUAL_STACK_FLOATS];\n"
    "    float *s = H <= RESIDUAL_STACK_FLOATS ? stack : (float *)malloc((size_t)H * sizeof *s);\n"
    "    if (!s) return 2; /* out of memory for the row */\n"
    "    lntune_kernel_args one = *a;\n"
    "    one.rows = 1;\n"
    "    one.x_stride = one.y_stride = H;\n"
    "    one.residual = NULL;\n"
    "    one.residual_out = NULL;\n"
    "    one.x = s;\n"
    "    int rc = LNTUNE_KERNEL_OK;\n"
    "    for (int64_t r = begin; r < end && rc == LNTUNE_KERNEL_OK; ++r) {\n"
    "        residual_sums[xt][rt](s, residual_row(a->x, r, a->x_stride, xt),\n"
    "                              residual_row(a->residual, r, a->residual_stride, rt), H);\n"
    "        if (a->residual_out)\n"
    "            residual_stores[rt]((void *)residual_row(a->residual_out, r, "
    "a->residual_out_stride, rt),\n"
    "                                s, H, streams);\n"
    "        one.y = (void *)residual_row(a->y, r, a->y_stride, yt);\n"
    "        one.mean = a->mean ? a->mean + r : NULL;\n"
    "        one.rstd = a->rstd ? a->rstd + r : NULL;\n"
    "        rc = inner(&one, 0, 1);\n"
    "    }\n"
    "    if (streams && a->residual_out) RESIDUAL_FENCE(); /* residual_out's stores, as the "
    "inner's */\n"
    "    if (s != stack) free(s);\n"
    "    return rc;\n"
    "}\n\n";

/* The residual fallback's element loops take 8 elements at a time where the file is compiled for
 * AVX2 and F16C: runtime/typed_vector.h, as liblntune's AVX2 residual built-ins do. */
static const char residual_vector_macros[] =
    "#define RESIDUAL_SUM8(X, R)                                                             \\\n"
    "    for (; i + 8 <= H; i += 8)                                                          \\\n"
    "        _mm256_storeu_ps(s + i,                                                         \\\n"
    "                         _mm256_add_ps(typed_load8(TYPED_##X, (const char *)x + i *      \\\n"
    "                                                   typed_size(TYPED_##X)),               \\\n"
    "                                       typed_load8(TYPED_##R, (const char *)r + i *      \\\n"
    "                                                   typed_size(TYPED_##R))));\n"
    "/* nt: non-temporal stores, which need out aligned to the vector: scalars until it is */\n"
    "#define RESIDUAL_STORE8(R)                                                              \\\n"
    "    const uintptr_t align = 8 * typed_size(TYPED_##R) - 1;                              \\\n"
    "    if (nt)                                                                             \\\n"
    "        for (; i < H && (((uintptr_t)out + i * typed_size(TYPED_##R)) & align) != 0; ++i) \\\n"
    "            typed_store(TYPED_##R, out, i, s[i]);                                       \\\n"
    "    for (; i + 8 <= H; i += 8)                                                          \\\n"
    "        typed_store8(TYPED_##R, (char *)out + i * typed_size(TYPED_##R),                \\\n"
    "                     _mm256_loadu_ps(s + i), nt);\n"
    "#define RESIDUAL_FENCE() _mm_sfence()\n";

/* The fused Add & Norm built-ins of all-bf16 calls (gen/builtin.c) with the level's text: the
 * AVX2 and streaming copies where the file is compiled for AVX2, else the generic one. */
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
    if (vector)
        lntune_export_put(b, "#if LNTUNE_KERNELS_AVX2\n%s\n%s#else\n", vector,
                          residual_vector_macros);
    lntune_export_put(b,
                      "#define RESIDUAL_SUM8(X, R)\n#define RESIDUAL_STORE8(R)\n"
                      "#define RESIDUAL_FENCE() ((void)0)\n%s",
                      vector ? "#endif\n" : "");
    lntune_export_put(b, "%s", residual_text);
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
 * would triple an app's compile time for a path only untuned shapes take. */
static const char backward_text[] =
    "/* ---- backward fallback: every (op, fused, x, params) no winner covers ---- */\n"
    "TYPED_INLINE const void *backward_row(const void *base, int64_t r, int64_t stride, int "
    "type)\n"
    "{\n"
    "    return (const unsigned char *)base + (size_t)(r * stride) * typed_size(type);\n"
    "}\n"
    "\n"
    "TYPED_INLINE int typed_backward(const lntune_backward_kernel_args *a, int64_t begin, int64_t "
    "end,\n"
    "                                float *dgp, float *dbp, int centered, int fused, int xt, int "
    "pt)\n"
    "{\n"
    "    if (fused != (a->dresidual_out != NULL) || (!centered && dbp))\n"
    "        return LNTUNE_KERNEL_EUNSUPPORTED;\n"
    "    const int64_t H = a->H;\n"
    "    const int saved = a->rstd && (!centered || a->mean);\n"
    "    for (int64_t r = begin; r < end; ++r) {\n"
    "        const void *x = backward_row(a->x, r, a->x_stride, xt);\n"
    "        const void *dy = backward_row(a->dy, r, a->dy_stride, xt);\n"
    "        void *dx = (void *)backward_row(a->dx, r, a->dx_stride, xt);\n"
    "        float mean = 0.0f, rstd;\n"
    "        if (saved)\n"
    "            mean = centered ? a->mean[r] : 0.0f, rstd = a->rstd[r];\n"
    "        else\n"
    "            typed_stats(xt, centered, x, H, a->eps, &mean, &rstd);\n"
    "        double sg = 0.0, sq = 0.0; /* sum g, sum g * xhat; g = dy * gamma */\n"
    "        for (int64_t i = 0; i < H; ++i) {\n"
    "            const float g = typed_load(xt, dy, i) * (a->gamma ? typed_load(pt, a->gamma, i) "
    ": 1.0f);\n"
    "            sg += g;\n"
    "            sq += (double)g * ((typed_load(xt, x, i) - mean) * rstd);\n"
    "        }\n"
    "        const float mg = centered ? (float)(sg / (double)H) : 0.0f, mq = (float)(sq / "
    "(double)H);\n"
    "        const void *dres = fused ? backward_row(a->dresidual_out, r, "
    "a->dresidual_out_stride, xt) : NULL;\n"
    "        for (int64_t i = 0; i < H; ++i) {\n"
    "            const float d = typed_load(xt, dy, i), xh = (typed_load(xt, x, i) - mean) * "
    "rstd;\n"
    "            const float g = d * (a->gamma ? typed_load(pt, a->gamma, i) : 1.0f);\n"
    "            float v = rstd * (g - mg - xh * mq);\n"
    "            if (dres) v += typed_load(xt, dres, i);\n"
    "            typed_store(xt, dx, i, v);\n"
    "            if (dgp) dgp[i] += d * xh;\n"
    "            if (dbp) dbp[i] += d;\n"
    "        }\n"
    "    }\n"
    "    return LNTUNE_KERNEL_OK;\n"
    "}\n\n";

void lntune_export_put_backward_fallback(lntune_export_buf *b) {
    enum { N = 2 * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT };
    lntune_export_put(b, "%s", backward_text);
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
