/*
 * cuda_codes_driver.c - the CUDA template's codes of a quantized y (templates/cuda/convert.lua:
 * f32_to_i8, f32_to_e4m3) against core/quant.h's exact ones, on the host: test_cuda_codes.sh cuts
 * the two device functions out of `lntune emit --target cuda` sources into the file CODES names,
 * and this driver compiles them with host definitions of the four CUDA intrinsics they call,
 * each the same IEEE operation (a product rounded to nearest even; a float rounded to the nearest
 * integer, ties to even). Checked, both signs: every float within 4 ulps of each rounding
 * midpoint between neighbouring codes and of the saturation edges, zeros, subnormals, Inf,
 * NaNs, and every 61st float pattern of all 2^32.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define LN_INLINE static inline

static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline int __float2int_rn(float f) {
    return (int)rintf(f); /* the default rounding mode: to nearest, ties to even */
}

static inline float __fmul_rn(float a, float b) {
    return a * b;
}

#include CODES

#include "quant.h"

static long checked, failures;

static void check(float v) {
    const unsigned char i8 = f32_to_i8(v), e4 = f32_to_e4m3(v);
    const unsigned want_i8 = lntune_quant_code(LNTUNE_TYPE_I8, (double)v);
    const unsigned want_e4 = lntune_quant_code(LNTUNE_TYPE_E4M3, (double)v);
    ++checked;
    if (i8 != want_i8 && failures++ < 10)
        printf("FAIL i8 of %a (0x%08x): 0x%02x, want 0x%02x\n", (double)v, __float_as_uint(v), i8,
               want_i8);
    if (e4 != want_e4 && failures++ < 10)
        printf("FAIL e4m3 of %a (0x%08x): 0x%02x, want 0x%02x\n", (double)v, __float_as_uint(v), e4,
               want_e4);
}

/* v and the floats within 4 ulps of it, both signs. */
static void around(double v) {
    const float f = (float)v;
    const unsigned u = __float_as_uint(fabsf(f));
    for (unsigned d = 0; d <= 8; ++d) {
        if (u + d < 4) continue;
        const float g = __uint_as_float(u + d - 4);
        check(g);
        check(-g);
    }
}

int main(void) {
    for (int k = -128; k < 128; ++k) around(k + 0.5); /* int8 ties */
    around(127.0), around(128.0), around(-128.0), around(-129.0);
    for (unsigned c = 0; c < 0x7e; ++c) { /* e4m3 ties: between each code and the next */
        const double lo = lntune_e4m3_value((uint8_t)c), hi = lntune_e4m3_value((uint8_t)(c + 1));
        around(lo), around((lo + hi) / 2);
    }
    around(448.0), around(464.0), around(480.0), around(0x1p-6), around(0x1p-10);
    check(0.0f), check(-0.0f), check(INFINITY), check(-INFINITY);
    check(__uint_as_float(0x7fc00000u)), check(__uint_as_float(0xffc00001u));
    check(__uint_as_float(0x7f800001u)), check(__uint_as_float(1u)); /* sNaN, least subnormal */
    for (uint64_t p = 0; p < (1ull << 32); p += 61) check(__uint_as_float((unsigned)p));
    printf("%ld floats, %ld wrong codes\n", checked, failures);
    return failures != 0;
}
