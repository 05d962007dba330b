/*
 * fusion.h - what a call fuses into the normalization, besides affine: nothing, a residual add
 * (y = Norm(x + residual)), or a residual add that also writes residual_out = x + residual.
 *
 * Fusion is a property of the call, like gamma/beta given or not: the registry's descriptor and
 * the generated variants are specialized for it. The tuning database keys it in the op text, so
 * no schema change was needed and rows of unfused calls keep their meaning:
 *   "layernorm" (none), "layernorm+residual" (residual, no residual_out),
 *   "layernorm+residual_out" (residual and residual_out); likewise "rmsnorm...".
 * Templates see it as shape.fusion = "residual" or "residual_out" (absent: none).
 * The backward ops use LNTUNE_FUSION_RESIDUAL for "dresidual_out given" (the gradient arriving
 * at the forward's residual_out, added to dx): "layernorm_backward+residual"; they have no
 * residual_out fusion.
 */
#ifndef LNTUNE_FUSION_H
#define LNTUNE_FUSION_H

#include "dtypes.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum {
    LNTUNE_FUSION_NONE = 0,
    LNTUNE_FUSION_RESIDUAL = 1,     /* residual read, no residual_out */
    LNTUNE_FUSION_RESIDUAL_OUT = 2, /* residual read, residual_out written */
    LNTUNE_FUSION_COUNT = 3
};

/* "none", "residual", "residual_out": the templates' shape.fusion and the CLI's words. */
static inline const char *lntune_fusion_name(int fusion) {
    return fusion == LNTUNE_FUSION_RESIDUAL       ? "residual"
           : fusion == LNTUNE_FUSION_RESIDUAL_OUT ? "residual_out"
                                                  : "none";
}

/* The database's op text: op itself without fusion, else "op+residual" / "op+residual_out". */
static inline void lntune_fusion_op_key(const char *op, int fusion, char *buf, size_t size) {
    if (fusion == LNTUNE_FUSION_NONE)
        snprintf(buf, size, "%s", op);
    else
        snprintf(buf, size, "%s+%s", op, lntune_fusion_name(fusion));
}

/*
 * Splits op text from the database into the op (copied to op, size bytes) and the fusion.
 * Returns 0, or -1 for a suffix this build does not know (a newer lntune's row).
 */
static inline int lntune_fusion_op_parse(const char *key, char *op, size_t size, int *fusion) {
    const char *plus = strchr(key, '+');
    const size_t n = plus ? (size_t)(plus - key) : strlen(key);
    snprintf(op, size, "%.*s", (int)n, key);
    *fusion = LNTUNE_FUSION_NONE;
    if (!plus) return 0;
    for (int f = LNTUNE_FUSION_RESIDUAL; f < LNTUNE_FUSION_COUNT; ++f)
        if (strcmp(plus + 1, lntune_fusion_name(f)) == 0) {
            *fusion = f;
            return 0;
        }
    return -1;
}

/*
 * The weight offset (lntune_args.weight_offset: y = norm(x) * (offset + gamma)) is keyed the same
 * way, as a last suffix: "rmsnorm+offset", "rmsnorm+residual_out+offset". Its templates'
 * shape.affine is "offset" (gen/template/generator.h: LNTUNE_AFFINE_OFFSET).
 */
static inline void lntune_op_key(const char *op, int fusion, int offset, char *buf, size_t size) {
    lntune_fusion_op_key(op, fusion, buf, size);
    if (offset) {
        const size_t n = strlen(buf);
        snprintf(buf + n, n < size ? size - n : 0, "+offset");
    }
}

/* lntune_fusion_op_parse of key less a last "+offset", which sets *offset (else 0). */
static inline int lntune_op_key_parse(const char *key, char *op, size_t size, int *fusion,
                                      int *offset) {
    static const char suffix[] = "+offset";
    const size_t n = strlen(key), s = sizeof suffix - 1;
    char base[64];
    *offset = n > s && strcmp(key + n - s, suffix) == 0;
    if (!*offset) return lntune_fusion_op_parse(key, op, size, fusion);
    if (n - s >= sizeof base) return -1;
    snprintf(base, sizeof base, "%.*s", (int)(n - s), key);
    return lntune_fusion_op_parse(base, op, size, fusion);
}

/*
 * Bytes a forward call moves per element of a row: x read and y written, plus with a residual
 * residual read and residual_out written, each in its type. gamma/beta are not counted (H
 * elements, not rows x H). The tuner's bytes and copy, and liblntune's streaming choice.
 */
static inline int64_t lntune_fusion_bytes_per_element(lntune_types types, int fusion) {
    const int64_t r = (int64_t)lntune_type_size(lntune_types_residual(types));
    return (int64_t)(lntune_type_size(types.x) + lntune_type_size(types.y)) +
           (fusion != LNTUNE_FUSION_NONE ? r : 0) + (fusion == LNTUNE_FUSION_RESIDUAL_OUT ? r : 0);
}

#endif /* LNTUNE_FUSION_H */
