/*
 * half_ref.h - the verifier's own fp16 and bf16 conversions: fp32 to fp16/bf16 rounded to
 * nearest even, and fp16/bf16 to double exactly. Written for clarity, not speed; kernels and the
 * runtime have their own (a kernel is checked against these, not against itself).
 */
#ifndef LNTUNE_HALF_REF_H
#define LNTUNE_HALF_REF_H

#include "dtypes.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t lntune_ref_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Round to nearest even; overflow gives Inf, a NaN stays a (quiet) NaN of the same sign. */
static inline uint16_t lntune_ref_f32_to_bf16(float f) {
    const uint32_t u = lntune_ref_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* Round to nearest even, subnormals included; 65520 and above give Inf; NaN stays quiet NaN. */
static inline uint16_t lntune_ref_f32_to_f16(float f) {
    const uint32_t all = lntune_ref_f32_bits(f);
    const uint16_t sign = (uint16_t)(all >> 16 & 0x8000u);
    const uint32_t u = all & 0x7fffffffu;
    if (u > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (u >> 13 & 0x3ffu));
    if (u >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: Inf */
    if (u >= 0x38800000u) {                                  /* >= 2^-14: normal */
        const uint32_t r = u + 0xfffu + (u >> 13 & 1u);
        return (uint16_t)(sign | (r - 0x38000000u) >> 13);
    }
    if (u <= 0x33000000u) return sign; /* <= 2^-25 (the tie goes to the even zero) */
    /* Subnormal: the value in units of 2^-24 is mant * 2^(e - 126), shifted right by s >= 14. */
    const uint32_t mant = (u & 0x7fffffu) | 0x800000u, s = 126u - (u >> 23);
    uint32_t q = mant >> s;
    const uint32_t rem = mant & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return (uint16_t)(sign | q); /* q = 0x400 is the smallest normal, which is right */
}

static inline double lntune_ref_bf16_decode(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

static inline double lntune_ref_f16_decode(uint16_t h) {
    const int e = h >> 10 & 0x1f, m = h & 0x3ff;
    const double v = e == 0    ? ldexp((double)m, -24)
                     : e == 31 ? (m ? NAN : INFINITY)
                               : ldexp((double)(m | 0x400), e - 25);
    return h & 0x8000u ? -v : v;
}

/* Element i of an array of type (LNTUNE_TYPE_*), exactly. */
static inline double lntune_ref_load(int type, const void *p, int64_t i) {
    if (type == LNTUNE_TYPE_F32) return (double)((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return type == LNTUNE_TYPE_F16 ? lntune_ref_f16_decode(h) : lntune_ref_bf16_decode(h);
}

/* Stores v into element i of an array of type, rounded to nearest even. */
static inline void lntune_ref_store(int type, void *p, int64_t i, float v) {
    if (type == LNTUNE_TYPE_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] =
            type == LNTUNE_TYPE_F16 ? lntune_ref_f32_to_f16(v) : lntune_ref_f32_to_bf16(v);
}

#endif /* LNTUNE_HALF_REF_H */
