/*
 * dtypes.h - the element types of one call (x, y, gamma/beta, residual), their names, sizes and
 * the text that keys them in the tuning database.
 *
 * Internally a type is LNTUNE_TYPE_* (0 = fp32), never the public lntune_dtype, whose zero means
 * "the default". A type tuple packs into one byte, 0 when every tensor is fp32, so that the
 * registry's descriptor and the database's "f32" key of fp32 calls are what they always were.
 * The residual type (of residual and residual_out) is stored relative to x: 0 means "as x", so
 * every tuple of a call without a residual, or with one of x's type, packs and prints as before.
 */
#ifndef LNTUNE_DTYPES_H
#define LNTUNE_DTYPES_H

#include <stddef.h>
#include <stdint.h>

enum { LNTUNE_TYPE_F32 = 0, LNTUNE_TYPE_F16 = 1, LNTUNE_TYPE_BF16 = 2, LNTUNE_TYPE_COUNT = 3 };

/*
 * Quantized types, of y only (quant.h has their semantics): int8 (symmetric, saturating to
 * [-128, 127]) and OCP fp8 e4m3 (saturating to +-448), each with one static scale for the call
 * ("i8", "e4m3") or one dynamic scale per row, written out ("i8row", "e4m3row"). The scale kind
 * is part of the type so that the database's type text keys it. LNTUNE_TYPE_COUNT stays the
 * count of float types, which every other tensor has.
 */
enum {
    LNTUNE_TYPE_I8 = LNTUNE_TYPE_COUNT,
    LNTUNE_TYPE_I8_ROW,
    LNTUNE_TYPE_E4M3,
    LNTUNE_TYPE_E4M3_ROW,
    LNTUNE_TYPE_Y_COUNT
};

/* 1 for the quantized types above. */
static inline int lntune_type_quantized(int type) {
    return type >= LNTUNE_TYPE_I8 && type < LNTUNE_TYPE_Y_COUNT;
}
/* 1 for the quantized types with a scale per row. */
static inline int lntune_type_row_scaled(int type) {
    return type == LNTUNE_TYPE_I8_ROW || type == LNTUNE_TYPE_E4M3_ROW;
}

typedef struct lntune_types {
    uint8_t x;        /* x */
    uint8_t y;        /* y */
    uint8_t params;   /* gamma and beta */
    uint8_t residual; /* residual and residual_out: 0 as x, else LNTUNE_TYPE_* + 1 (canonical:
                         never x's own type + 1; use the two functions below) */
} lntune_types;

/* The type of residual and residual_out. */
static inline int lntune_types_residual(lntune_types t) {
    return t.residual ? t.residual - 1 : t.x;
}
/* Sets the residual type, canonically (0 when it is x's). */
static inline void lntune_types_set_residual(lntune_types *t, int type) {
    t->residual = (uint8_t)(type == t->x ? 0 : type + 1);
}

/* 1 when every type is a float type in range and the residual type is stored canonically (as
 * the function above stores it): the float tuples a call can have (a quantized y aside). */
static inline int lntune_types_canonical(lntune_types t) {
    const int rt = lntune_types_residual(t);
    return t.x < LNTUNE_TYPE_COUNT && t.y < LNTUNE_TYPE_COUNT && t.params < LNTUNE_TYPE_COUNT &&
           rt < LNTUNE_TYPE_COUNT && !(t.residual && rt == t.x);
}

/*
 * A tuple in 10 bits: 2 per type, and a quantized y as y's field 3 with its kind (0..3) in bits
 * 8-9, so that every tuple of float types packs below 256 as it always did (the exported
 * dispatch tables compute those values themselves).
 */
static inline int lntune_types_packed(lntune_types t) {
    const int q = lntune_type_quantized(t.y);
    return t.x | (q ? 3 : t.y) << 2 | t.params << 4 | t.residual << 6 |
           (q ? t.y - LNTUNE_TYPE_I8 : 0) << 8;
}
static inline lntune_types lntune_types_unpacked(int packed) {
    const int y = packed >> 2 & 3;
    lntune_types t = {(uint8_t)(packed & 3),
                      (uint8_t)(y == 3 ? LNTUNE_TYPE_I8 + (packed >> 8 & 3) : y),
                      (uint8_t)(packed >> 4 & 3), (uint8_t)(packed >> 6 & 3)};
    return t;
}
static inline int lntune_types_all_f32(lntune_types t) {
    return lntune_types_packed(t) == 0;
}

/* Bytes per element: 4, 2 or 1. Inline: every call's argument check sizes x and y by it. */
static inline size_t lntune_type_size(int type) {
    return type == LNTUNE_TYPE_F32 ? 4 : lntune_type_quantized(type) ? 1 : 2;
}

/* "f32", "f16", "bf16", "i8", "i8row", "e4m3", "e4m3row"; "?" out of range */
const char *lntune_type_name(int type);
int lntune_type_parse(const char *name, size_t len); /* -1 for an unknown name */

/*
 * Database and CLI text of a tuple: one name when x, y and gamma/beta share it ("f32", "bf16"),
 * else "x/y/params" ("bf16/f32/f32"); a residual type other than x's adds a fourth name,
 * "x/y/params/residual" ("bf16/bf16/bf16/f32"). parse also takes "x/y" (params as x); a missing
 * residual is x's type. Returns 0, or -1 on unknown text.
 */
void lntune_types_format(lntune_types t, char *buf, size_t size);
int lntune_types_parse(const char *text, lntune_types *out);

#endif /* LNTUNE_DTYPES_H */
