/*
 * half.h - fp16 (IEEE binary16) and bf16 to and from fp32, on the 16-bit patterns.
 *
 * 16 -> 32 is exact (every fp16 and bf16 value is a float; NaN payloads are kept). 32 -> 16
 * rounds to nearest even, overflows to Inf of the value's sign, and turns any NaN into a quiet
 * NaN of the same sign (fp16: bit 0x0200, bf16: bit 0x0040), so that a result never looks like
 * a signalling NaN. Bit arithmetic only: no intrinsic, no dependence on the rounding mode.
 */
#ifndef LNTUNE_HALF_H
#define LNTUNE_HALF_H

#include "dtypes.h"

#include <stdint.h>
#include <string.h>

static inline float lntune_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t lntune_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float lntune_bf16_to_f32(uint16_t h) {
    return lntune_bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t lntune_f32_to_bf16(float f) {
    uint32_t u = lntune_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040u);
    u += 0x7fffu + (u >> 16 & 1u); /* a carry into the exponent is the correct rounding */
    return (uint16_t)(u >> 16);
}

static inline float lntune_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = h >> 10 & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return lntune_bits_to_f32(sign | 0x7f800000u | man << 13);
    if (exp == 0) /* zero or subnormal: man * 2^-24, exact in float */
        return lntune_bits_to_f32(sign | lntune_f32_to_bits((float)man * 0x1p-24f));
    return lntune_bits_to_f32(sign | (exp + 112) << 23 | man << 13);
}

static inline uint16_t lntune_f32_to_f16(float f) {
    const uint32_t u = lntune_f32_to_bits(f), a = u & 0x7fffffffu;
    const uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to Inf */
    if (a >= 0x38800000u) { /* normal in fp16: rebias, round off 13 bits */
        const uint32_t r = a + 0xfffu + (a >> 13 & 1u);
        return (uint16_t)(sign | (r - (112u << 23)) >> 13);
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: the tie goes to the even zero */
    /* Subnormal: the value in units of 2^-24 is m >> shift; round the shifted-out bits. */
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - (a >> 23);
    const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    uint32_t h = m >> shift;
    if (rest > half || (rest == half && (h & 1u))) ++h; /* 0x400 is the smallest normal */
    return (uint16_t)(sign | h);
}

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
