/*
 * half.h - fp16 (IEEE binary16) and bf16 to and from fp32, on the 16-bit patterns: the
 * conversions of typed_kernel.h (lntune_f16_to_f32, lntune_f32_to_f16, lntune_bf16_to_f32,
 * lntune_f32_to_bf16; their rounding is described there), and rounding a buffer in place.
 */
#ifndef LNTUNE_HALF_H
#define LNTUNE_HALF_H

#include "dtypes.h"
#include "typed_kernel.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Rounds the n floats at p to type (LNTUNE_TYPE_*) in place, packed from the start of
 * p: a 16-bit type fills the first half of the bytes (element i is written after float i was
 * read). fp32 is left as it is.
 */
static inline void lntune_narrow_in_place(float *p, size_t n, int type) {
    uint16_t *h = (uint16_t *)p;
    for (size_t i = 0; type != LNTUNE_TYPE_F32 && i < n; ++i) {
        const float f = p[i];
        h[i] = type == LNTUNE_TYPE_BF16 ? lntune_f32_to_bf16(f) : lntune_f32_to_f16(f);
    }
}

#endif /* LNTUNE_HALF_H */
