/*
 * test_half_ref.c - the verifier's fp16/bf16 conversions (gen/verify/half_ref.h), exhaustively:
 * every 16-bit value decodes exactly and encodes back to itself, each midpoint between neighbours
 * rounds to the even one and its float neighbours to the nearer one, overflow gives Inf, NaNs
 * stay quiet NaNs and never become the verifier's poison.
 */
#include "check.h"
#include "half_ref.h"
#include "verify.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

static float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t encode(int type, float f) {
    return type == LNTUNE_TYPE_F16 ? lntune_ref_f32_to_f16(f) : lntune_ref_f32_to_bf16(f);
}

static double decode(int type, uint16_t h) {
    return lntune_ref_load(type, &h, 0);
}

/*
 * For every positive finite h of type (both signs through -f): the round trip, and the rounding
 * of the midpoint to h + 1 (for the largest finite h, of max + half an ulp, to Inf) and of the
 * floats on either side of it. Returns the mismatches; prints the first.
 */
static int check_type(int type, uint16_t max_finite, double next_after_max) {
    int bad = 0;
    for (uint32_t h = 0; h <= max_finite; ++h) {
        const double lo = decode(type, (uint16_t)h);
        const double hi = h == max_finite ? next_after_max : decode(type, (uint16_t)(h + 1));
        const float mid = (float)((lo + hi) / 2); /* exact: one bit more than the type */
        const uint16_t even = (uint16_t)(h & 1 ? h + 1 : h);
        const struct {
            float f;
            uint16_t want;
        } c[] = {{(float)lo, (uint16_t)h},
                 {mid, even},
                 {nextafterf(mid, 0.0f), (uint16_t)h},
                 {nextafterf(mid, INFINITY), (uint16_t)(h + 1)}};
        for (size_t k = 0; k < sizeof c / sizeof c[0]; ++k)
            for (int s = 0; s < 2; ++s) {
                const float f = s ? -c[k].f : c[k].f;
                const uint16_t want = (uint16_t)(s ? c[k].want | 0x8000 : c[k].want);
                const uint16_t got = encode(type, f);
                if (got != want || (k == 0 && decode(type, got) != (double)f)) {
                    if (!bad++)
                        printf("  %s: %.9g encodes to 0x%04x, expected 0x%04x\n",
                               lntune_type_name(type), (double)f, got, want);
                }
            }
    }
    return bad;
}

/* NaN payloads, quiet and signalling, both signs: a quiet NaN, never the poison. */
static int check_nans(int type) {
    int bad = 0;
    const uint16_t poison = (uint16_t)lntune_verify_poison(type);
    const uint16_t quiet = type == LNTUNE_TYPE_F16 ? 0x7e00 : 0x7fc0;
    for (uint32_t m = 1; m < (1u << 23); m += 4099) /* payloads across the mantissa */
        for (int s = 0; s < 2; ++s) {
            const uint16_t got = encode(type, bits_to_float((s ? 0xff800000u : 0x7f800000u) | m));
            if ((got & quiet) != quiet || (got & 0x7fff) == poison || !isnan(decode(type, got)))
                if (!bad++)
                    printf("  %s: NaN 0x%x encodes to 0x%04x\n", lntune_type_name(type),
                           (unsigned)m, got);
        }
    return bad;
}

int main(void) {
    const int F16 = LNTUNE_TYPE_F16, BF16 = LNTUNE_TYPE_BF16;
    CHECK(check_type(F16, 0x7bff, 65536.0) == 0,
          "fp16: every value round-trips, ties go to even, neighbours to the nearer");
    CHECK(check_type(BF16, 0x7f7f, ldexp(1.0, 128)) == 0,
          "bf16: every value round-trips, ties go to even, neighbours to the nearer");
    CHECK(decode(F16, 0x0001) == ldexp(1.0, -24) && decode(F16, 0x03ff) == 1023 * ldexp(1.0, -24) &&
              decode(F16, 0x0400) == ldexp(1.0, -14) && decode(F16, 0x3c00) == 1.0 &&
              decode(F16, 0x7bff) == 65504.0 && decode(F16, 0xc000) == -2.0,
          "fp16 decodes subnormals, normals and the largest value");
    CHECK(decode(BF16, 0x3f80) == 1.0 && decode(BF16, 0x0001) == ldexp(1.0, -133) &&
              decode(BF16, 0x7f7f) == (double)bits_to_float(0x7f7f0000u),
          "bf16 decodes 1, the smallest subnormal and the largest value");
    CHECK(encode(F16, 65519.996f) == 0x7bff && encode(F16, 65520.0f) == 0x7c00 &&
              encode(F16, -1e6f) == 0xfc00 && encode(F16, INFINITY) == 0x7c00 &&
              encode(BF16, FLT_MAX) == 0x7f80 && encode(BF16, -INFINITY) == 0xff80,
          "overflow and infinities give Inf of the same sign");
    CHECK(encode(F16, ldexp(1.0f, -25)) == 0 && encode(F16, nextafterf(ldexp(1.0f, -25), 1)) == 1 &&
              encode(F16, -ldexp(1.0f, -26)) == 0x8000 && encode(F16, 1e-30f) == 0 &&
              encode(F16, bits_to_float(1)) == 0,
          "fp16 underflow: 2^-25 ties to 0, just above to the smallest subnormal, signed zero");
    CHECK(check_nans(F16) == 0 && check_nans(BF16) == 0,
          "NaNs stay quiet NaNs, never the verifier's poison");
    const uint16_t p16 = (uint16_t)lntune_verify_poison(F16),
                   pb = (uint16_t)lntune_verify_poison(BF16);
    CHECK(isnan(decode(F16, p16)) && !(p16 & 0x0200) && isnan(decode(BF16, pb)) && !(pb & 0x0040),
          "the poisons are signalling NaNs (0x%04x, 0x%04x)", p16, pb);
    return CHECK_SUMMARY();
}
