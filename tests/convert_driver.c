/*
 * convert_driver.c - the CPU template's fp16 vector conversions (templates/cpu/convert.lua,
 * convert=portable) against the verifier's own (gen/verify/half_ref.h), lane for lane:
 *   widening (load_x): every one of the 65536 fp16 patterns, bit for bit (NaN payloads too);
 *   narrowing (narrow_y): every float in fp16's subnormal range and the step below it (both
 *   signs), the floats at and next to every rounding midpoint of the normal range, the edges of
 *   overflow, and every 97th float pattern of all 2^32.
 * test_convert.sh compiles it with KERNEL naming a source from `lntune emit --dtype f16` (its
 * functions are static) under each compiler, at several vector widths.
 */
#include <stdio.h>
#include <string.h>

#include KERNEL

#include "half_ref.h"

static long failures;

static void check_widen(uint32_t first) {
    uint16_t h[LANES];
    for (int j = 0; j < LANES; ++j) h[j] = (uint16_t)(first + (uint32_t)j);
    const vf v = load_x(h);
    for (int j = 0; j < LANES; ++j) {
        const float got = v[j];
        const double want = lntune_ref_f16_decode(h[j]);
        uint32_t bits, scalar_bits;
        const float scalar = f16_to_f32(h[j]);
        memcpy(&bits, &got, sizeof bits);
        memcpy(&scalar_bits, &scalar, sizeof scalar_bits);
        const int ok = want == want ? (double)got == want && bits == scalar_bits
                                    : got != got && bits == scalar_bits;
        if (!ok && failures++ < 10)
            printf("FAIL widen 0x%04x: 0x%08x, scalar 0x%08x, want %g\n", h[j], bits, scalar_bits,
                   want);
    }
}

/* Narrows LANES floats from patterns p[0..LANES). */
static void check_narrow(const uint32_t *p) {
    vf v;
    for (int j = 0; j < LANES; ++j) {
        float f;
        memcpy(&f, &p[j], sizeof f);
        v[j] = f;
    }
    const vh o = narrow_y(v);
    for (int j = 0; j < LANES; ++j) {
        float f;
        memcpy(&f, &p[j], sizeof f);
        const uint16_t want = lntune_ref_f32_to_f16(f);
        /* Any quiet NaN of the right sign is right (the reference keeps payload bits). */
        const int nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu);
        const int ok = nan ? (o[j] & 0xfe00u) == (want & 0x8000u) + 0x7e00u : o[j] == want;
        if ((!ok || o[j] != f32_to_f16(f)) && failures++ < 10)
            printf("FAIL narrow 0x%08x: 0x%04x, scalar 0x%04x, want 0x%04x\n", p[j], o[j],
                   f32_to_f16(f), want);
    }
}

static uint32_t pending[LANES];
static int npending;

static void narrow(uint32_t pattern) {
    pending[npending++] = pattern;
    if (npending == LANES) check_narrow(pending), npending = 0;
}

int main(void) {
    for (uint32_t h = 0; h < 65536; h += LANES) check_widen(h);
    for (uint32_t s = 0; s < 2; ++s) {
        const uint32_t sign = s << 31;
        /* Below 2^-14: every pattern from 2^-26 (which rounds to zero) up. */
        for (uint32_t u = 0x32800000u; u < 0x38800000u; ++u) narrow(sign | u);
        /* Each normal fp16 value's midpoint to the next, and its neighbours. */
        for (uint32_t k = 0x0400u; k < 0x7c00u; ++k) {
            const uint32_t mid = ((k + 112u * 1024u) << 13) + 0x1000u;
            for (int d = -2; d <= 2; ++d) narrow(sign | (mid + (uint32_t)d));
        }
        /* Overflow: 65504, its midpoint to "65536" (65520), Inf, NaNs. */
        const uint32_t edges[] = {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u,
                                  0x47800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
                                  0x7fc00000u, 0x7fffffffu, 0x00000000u, 0x00000001u};
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; ++i) narrow(sign | edges[i]);
    }
    for (uint64_t u = 0; u < (UINT64_C(1) << 32); u += 97) narrow((uint32_t)u);
    while (npending) narrow(0);
    if (failures) {
        printf("%ld mismatches (LANES %d)\n", failures, LANES);
        return 1;
    }
    printf("fp16 conversions of %d lanes: every check agrees\n", LANES);
    return 0;
}
