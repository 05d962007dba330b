/*
 * dtypes.h - the element types of one call (x, y, gamma/beta), their names, sizes and the text
 * that keys them in the tuning database.
 *
 * Internally a type is LNTUNE_TYPE_* (0 = fp32), never the public lntune_dtype, whose zero means
 * "the default". A type tuple packs into one byte, 0 when every tensor is fp32, so that the
 * registry's descriptor and the database's "f32" key of fp32 calls are what they always were.
 */
#ifndef LNTUNE_DTYPES_H
#define LNTUNE_DTYPES_H

#include <stddef.h>
#include <stdint.h>

enum { LNTUNE_TYPE_F32 = 0, LNTUNE_TYPE_F16 = 1, LNTUNE_TYPE_BF16 = 2, LNTUNE_TYPE_COUNT = 3 };

typedef struct lntune_types {
    uint8_t x;      /* x (and, later, residual) */
    uint8_t y;      /* y */
    uint8_t params; /* gamma and beta */
} lntune_types;

static inline int lntune_types_packed(lntune_types t) {
    return t.x | t.y << 2 | t.params << 4;
}
static inline lntune_types lntune_types_unpacked(int packed) {
    lntune_types t = {(uint8_t)(packed & 3), (uint8_t)(packed >> 2 & 3),
                      (uint8_t)(packed >> 4 & 3)};
    return t;
}
static inline int lntune_types_all_f32(lntune_types t) {
    return lntune_types_packed(t) == 0;
}

/* Bytes per element: 4 or 2. Inline: every call's argument check sizes x and y by it. */
static inline size_t lntune_type_size(int type) {
    return type == LNTUNE_TYPE_F32 ? 4 : 2;
}

const char *lntune_type_name(int type);              /* "f32", "f16", "bf16"; "?" out of range */
int lntune_type_parse(const char *name, size_t len); /* -1 for an unknown name */

/*
 * Database and CLI text of a tuple: one name when x, y and gamma/beta share it ("f32", "bf16"),
 * else "x/y/params" ("bf16/f32/f32"). parse also takes "x/y" (params as x). Returns 0, or -1 on
 * unknown text.
 */
void lntune_types_format(lntune_types t, char *buf, size_t size);
int lntune_types_parse(const char *text, lntune_types *out);

#endif /* LNTUNE_DTYPES_H */
