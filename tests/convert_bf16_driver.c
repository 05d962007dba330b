/*
 * convert_bf16_driver.c - the CPU template's bf16 vector narrowing (templates/cpu/convert.lua
 * and cpu/norm.lua, portable or convert=native) against the verifier's (gen/verify/half_ref.h),
 * lane for lane: the floats at and next to every rounding midpoint between two bf16 (both signs),
 * every 61st float of fp32's subnormal range, zeros, the overflow edge, Inf and NaNs, and every
 * 97th float pattern of all 2^32.
 * test_convert.sh compiles it with KERNEL naming a source from `lntune emit --dtype bf16`
 * (store=plain) and, for layout=evenodd, EVENODD defined: store_y2 merges an even and an odd
 * vector; store_y stores one vector in memory order.
 * Where the kernel's AVX512-BF16 code is compiled in (NATIVE, convert=native), an fp32 subnormal
 * must come out as a zero of its sign, the one documented difference (the instructions flush
 * them).
 */
#include <stdio.h>
#include <string.h>

#include KERNEL

#include "half_ref.h"

#if defined(NATIVE) && defined(__AVX512BF16__) && defined(__AVX512VL__)
enum { NATIVE_CODE = 1 };
#else
enum { NATIVE_CODE = 0 };
#endif

static long failures, flushed;

static float as_float(uint32_t pattern) {
    float f;
    memcpy(&f, &pattern, sizeof f);
    return f;
}

static uint16_t expected(uint32_t pattern) {
    const int subnormal = (pattern & 0x7f800000u) == 0 && (pattern & 0x007fffffu) != 0;
    if (NATIVE_CODE && subnormal) {
        ++flushed;
        return (uint16_t)(pattern >> 16 & 0x8000u);
    }
    return lntune_ref_f32_to_bf16(as_float(pattern));
}

#ifdef EVENODD
enum { BATCH = 2 * LANES }; /* a store_y2 call: LANES even and LANES odd elements */
#else
enum { BATCH = LANES };
#endif

/* Narrows BATCH floats from patterns p[0..BATCH) in memory order. */
static void check(const uint32_t *p) {
    uint16_t out[BATCH];
    memset(out, 0xa5, sizeof out); /* poison: every element must be written */
#ifdef EVENODD
    vf even, odd;
    for (int j = 0; j < LANES; ++j) even[j] = as_float(p[2 * j]), odd[j] = as_float(p[2 * j + 1]);
    store_y2(out, even, odd);
#else
    vf v;
    for (int j = 0; j < LANES; ++j) v[j] = as_float(p[j]);
    store_y(out, v);
#endif
    for (int j = 0; j < BATCH; ++j) {
        const uint16_t want = expected(p[j]);
        if (out[j] != want && failures++ < 10)
            printf("FAIL 0x%08x -> 0x%04x, want 0x%04x\n", p[j], out[j], want);
    }
}

static uint32_t pending[BATCH];
static int npending;

static void narrow(uint32_t pattern) {
#ifdef EVENODD
    /* The portable even/odd rounding takes NaNs as fp32 arithmetic on widened bf16 makes them:
     * quiet, low halves zero (see its comment in cpu/norm.lua). */
    if (!NATIVE_CODE && (pattern & 0x7fffffffu) > 0x7f800000u)
        pattern = (pattern | 0x00400000u) & 0xffff0000u;
#endif
    pending[npending++] = pattern;
    if (npending == BATCH) check(pending), npending = 0;
}

int main(void) {
    for (uint32_t s = 0; s < 2; ++s) {
        const uint32_t sign = s << 31;
        /* The midpoint above each finite bf16 and its neighbours (ties go to the even one). */
        for (uint32_t k = 0; k < 0x7f80u; ++k) {
            const uint32_t mid = (k << 16) + 0x8000u;
            for (int d = -2; d <= 2; ++d) narrow(sign | (mid + (uint32_t)d));
        }
        for (uint32_t u = 1; u < 0x00800000u; u += 61) narrow(sign | u);
        const uint32_t edges[] = {0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u,
                                  0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u,
                                  0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0x7fbfffffu};
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; ++i) narrow(sign | edges[i]);
    }
    for (uint64_t u = 0; u < (UINT64_C(1) << 32); u += 97) narrow((uint32_t)u);
    while (npending) narrow(0x3f800000u);
    if (failures) {
        printf("%ld mismatches (LANES %d)\n", failures, LANES);
        return 1;
    }
    printf("bf16 narrowing of %d lanes%s: every check agrees%s\n", BATCH,
           BATCH > LANES ? " (even/odd)" : "",
           NATIVE_CODE ? (flushed ? " (subnormals flushed to zero, as documented)"
                                  : " (no subnormal reached: the test is broken)")
                       : "");
    return NATIVE_CODE && !flushed;
}
