/*
 * typed_bits.h - the element types' bits for the tests that check typed outputs element by
 * element (test_runtime_dtypes through liblntune, export_driver through the exported files):
 * each type's precision and smallest normal exponent, the signalling NaN a test fills its
 * buffers with, raw bits in and out, and the spacing of values.
 */
#ifndef LNTUNE_TEST_TYPED_BITS_H
#define LNTUNE_TEST_TYPED_BITS_H

#include "dtypes.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static const int type_bits[LNTUNE_TYPE_COUNT] = {24, 11, 8}; /* significand, with the hidden 1 */
static const int type_emin[LNTUNE_TYPE_COUNT] = {-126, -14, -126}; /* smallest normal: 2^emin */
/* Signalling NaNs: no kernel output is ever one, so any left after a call was never written. */
static const uint32_t poison[LNTUNE_TYPE_COUNT] = {0x7fa5a5a5u, 0x7d5au, 0x7f85u};

static inline size_t tsize(int t) {
    return t == LNTUNE_TYPE_F32 ? 4 : 2;
}

static inline uint32_t raw(int t, const void *p, int64_t i) {
    return t == LNTUNE_TYPE_F32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}

static inline void set_raw(int t, void *p, int64_t i, uint32_t bits) {
    if (t == LNTUNE_TYPE_F32)
        ((uint32_t *)p)[i] = bits;
    else
        ((uint16_t *)p)[i] = (uint16_t)bits;
}

/* The spacing of type t's values at magnitude v (subnormal spacing below 2^emin). */
static inline double ulp_of(int t, double v) {
    int e = v > 0.0 && isfinite(v) ? ilogb(v) : type_emin[t];
    if (e < type_emin[t]) e = type_emin[t];
    return ldexp(1.0, e - type_bits[t] + 1);
}

#endif /* LNTUNE_TEST_TYPED_BITS_H */
