/*
 * quant.h - what a quantized y (dtypes.h: i8, i8row, e4m3, e4m3row) holds, in exact arithmetic:
 * the verifier's reference of the kernels' rounding, saturation and scales.
 *
 * A kernel computes the fp32 y of the norm as for a float y, then stores the code of v = y / scale:
 *   int8:     NaN -> 0; else v clamped to [-128, 127] and rounded to nearest, ties to even.
 *   fp8 e4m3 (OCP): NaN -> the NaN code 0x7f (with v's sign); else |v| clamped to 448, the
 *             largest finite e4m3 (saturating: Inf too), and rounded to nearest e4m3, ties to
 *             even, subnormals (multiples of 2^-9) included.
 * The scale: static (i8, e4m3), the call's y_scale (> 0, finite); per row (i8row, e4m3row),
 * absmax / QMAX, with absmax the largest |y| of the row's fp32 y, NaN elements left out, and
 * QMAX 127 (int8) or 448 (e4m3). That scale is written out (fp32), and the row's codes are of
 * y * (QMAX / absmax), or of y * 0 where absmax is 0 or Inf (a row of zeros, or an infinite y).
 * A kernel multiplies by the fp32 reciprocal of the scale (or by QMAX / absmax): that differs
 * from the exact quotient by a rounding or two of fp32, which the verifier allows where v lies
 * that close to a rounding boundary, and nowhere else.
 */
#ifndef LNTUNE_QUANT_H
#define LNTUNE_QUANT_H

#include "dtypes.h"

#include <math.h>
#include <stdint.h>

/* The largest code's value: 127 for int8, 448 for e4m3. */
static inline double lntune_quant_max(int type) {
    return type == LNTUNE_TYPE_I8 || type == LNTUNE_TYPE_I8_ROW ? 127.0 : 448.0;
}

static inline int lntune_quant_is_e4m3(int type) {
    return type == LNTUNE_TYPE_E4M3 || type == LNTUNE_TYPE_E4M3_ROW;
}

/* The int8 code of v, exactly (rint rounds ties to even in the default rounding mode). */
static inline int8_t lntune_quant_i8(double v) {
    if (isnan(v)) return 0;
    v = v > 127.0 ? 127.0 : v < -128.0 ? -128.0 : v;
    return (int8_t)rint(v);
}

/* The e4m3 code of v, exactly. */
static inline uint8_t lntune_quant_e4m3(double v) {
    const uint8_t sign = signbit(v) ? 0x80 : 0;
    if (isnan(v)) return (uint8_t)(sign | 0x7f);
    double a = fabs(v);
    if (a > 448.0) a = 448.0;
    if (a < ldexp(1.0, -6)) /* subnormal: m * 2^-9, m = 0..8 (8 is the least normal, 2^-6) */
        return (uint8_t)(sign | (int)rint(ldexp(a, 9)));
    int e = 0;
    const double f = frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): a in [2^(e-1), 2^e) */
    int m = (int)rint((2.0 * f - 1.0) * 8.0);
    int E = e - 1;
    if (m == 8) m = 0, ++E; /* rounded up to the next power of two */
    return (uint8_t)(sign | (E + 7) << 3 | m);
}

/* The value of an e4m3 code. */
static inline double lntune_e4m3_value(uint8_t c) {
    const int e = c >> 3 & 15, m = c & 7;
    double v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m, -9);
    else
        v = ldexp(1.0 + m / 8.0, e - 7);
    return c & 0x80 ? -v : v;
}

/* The code of v in quantized type, and the value of a code. */
static inline unsigned lntune_quant_code(int type, double v) {
    return lntune_quant_is_e4m3(type) ? lntune_quant_e4m3(v) : (uint8_t)lntune_quant_i8(v);
}

static inline double lntune_quant_value(int type, unsigned code) {
    return lntune_quant_is_e4m3(type) ? lntune_e4m3_value((uint8_t)code)
                                      : (double)(int8_t)(uint8_t)code;
}

#endif /* LNTUNE_QUANT_H */
