/*
 * export_typed.c - the exported file's fallback for fp16/bf16 type tuples: what serves a call of
 * a tuple (x, y, gamma/beta) no exported winner covers, as runtime/builtin_typed.c does for
 * liblntune.
 *
 * Why fixed text rather than the templates' generic variants (as fp32 has): those are one kernel
 * per (op, tuple, affine kind), 104 kernels and 0.9 MB of C that take gcc 17 s at -O3 for every
 * app, even one calling fp32 only; and none of them takes beta without gamma. This is one small
 * portable body, instantiated per (op, tuple) with the types as constants, serving every affine
 * kind. The body is runtime/typed_kernel.h, the one builtin_typed.c includes, copied in as text
 * (it needs nothing of liblntune), so the numerics are the built-ins' to the bit.
 */
#include "export_internal.h"

#include "dtypes.h"

static const char *const type_enum[LNTUNE_TYPE_COUNT] = {"TYPED_F32", "TYPED_F16", "TYPED_BF16"};

void lntune_export_put_typed_fallback(lntune_export_buf *b) {
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
}
