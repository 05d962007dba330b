/*
 * builtin_quant_wide.h - core/quant_rows.h's row pass (a row's largest |y|, its scale and its
 * codes) in 8-lane AVX2 or 16-lane AVX-512 vectors, for liblntune's copies of the built-ins
 * compiled for those (builtin_quant_avx2.c, builtin_quant_avx512.c; builtin_isa.c picks one).
 * The baseline build's 4-lane pass took most of an untuned quantized call (issue #56).
 *
 * The codes are quant_rows.h's, bit for bit: y times the same inv, NaN lanes zeroed and lanes
 * above 127 clamped before cvtps2dq (which rounds to nearest even and gives INT_MIN below
 * -2^31), the rest saturated by the narrowing; e4m3 by the same integer steps. The last
 * H % lanes elements go through quant_rows.h's own pass. The including file defines
 * QUANT_WIDE_PASS, the name of its pass, and is compiled with -mavx2 (and -mavx512f/bw/vl).
 */
#include "quant_rows.h"

#include <immintrin.h>
#include <stdint.h>

void QUANT_WIDE_PASS(const float *y, void *q, int64_t H, float *scale, float inv, int e4m3);

#ifdef __AVX512F__
enum { LANES = 16 };
typedef __m512 vf;
typedef __m512i vi;
#define V(op) _mm512_##op
#define VI(op) _mm512_##op##_si512 /* the whole-register integer ops and casts */
#define TO_INT _mm512_castps_si512
#define TO_FLOAT _mm512_castsi512_ps
#else
enum { LANES = 8 };
typedef __m256 vf;
typedef __m256i vi;
#define V(op) _mm256_##op
#define VI(op) _mm256_##op##_si256
#define TO_INT _mm256_castps_si256
#define TO_FLOAT _mm256_castsi256_ps
#endif

/* The e4m3 codes of y times inv (quant_rows.h's lntune_q4_e4m3_of), one a 32-bit lane. */
static inline vi e4m3_lanes(const float *y, vf vinv) {
    const vi u = TO_INT(V(mul_ps)(V(loadu_ps)(y), vinv));
    const vi sign = VI(and)(V(srli_epi32)(u, 24), V(set1_epi32)(0x80));
    /* |u|, at most 448.0f (saturation): as signed ints, for both the min and the compares */
    const vi abs = VI(and)(u, V(set1_epi32)(0x7fffffff));
    const vi a = V(min_epi32)(abs, V(set1_epi32)(0x43e00000));
    const vf magic = V(set1_ps)(0x1.8p23f);
    const vi sub = V(cvtps_epi32)(
        V(sub_ps)(V(add_ps)(V(mul_ps)(TO_FLOAT(a), V(set1_ps)(512.0f)), magic), magic));
    const vi odd = VI(and)(V(srli_epi32)(a, 20), V(set1_epi32)(1));
    const vi normal =
        V(sub_epi32)(V(srli_epi32)(V(add_epi32)(V(add_epi32)(a, V(set1_epi32)(0x7ffff)), odd), 20),
                     V(set1_epi32)(120 << 3));
#ifdef __AVX512F__
    const __mmask16 small = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(0x3c800000)),
                    nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
    vi o = _mm512_mask_blend_epi32(small, normal, sub);
    o = _mm512_mask_blend_epi32(nan, o, _mm512_set1_epi32(0x7f));
#else
    const vi small = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), a),
             nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    vi o = _mm256_blendv_epi8(normal, sub, small);
    o = _mm256_blendv_epi8(o, _mm256_set1_epi32(0x7f), nan);
#endif
    return VI(or)(o, sign);
}

/* The int8 codes of y times inv before narrowing: NaN 0, above 127 127, then rounded. */
static inline vi i8_lanes(const float *y, vf vinv) {
    const vf v = V(mul_ps)(V(loadu_ps)(y), vinv);
#ifdef __AVX512F__
    const __mmask16 ordered = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    return _mm512_cvtps_epi32(_mm512_maskz_min_ps(ordered, v, _mm512_set1_ps(127.0f)));
#else
    const vf ordered = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
    return _mm256_cvtps_epi32(_mm256_and_ps(_mm256_min_ps(v, _mm256_set1_ps(127.0f)), ordered));
#endif
}

/* The codes of y[0, i) for the largest i a multiple of the block; returns i. */
static int64_t wide_codes(const float *y, unsigned char *q, int64_t H, float inv, int e4m3) {
    const vf vinv = V(set1_ps)(inv);
    int64_t i = 0;
#ifdef __AVX512F__
    /* vpmovsdb saturates int32 to int8; e4m3 codes are 0..255, so vpmovdb's truncation */
    if (e4m3)
        for (; i + LANES <= H; i += LANES)
            _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(e4m3_lanes(y + i, vinv)));
    else
        for (; i + LANES <= H; i += LANES)
            _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtsepi32_epi8(i8_lanes(y + i, vinv)));
#else
    /* 32 codes: the packs work within 128-bit halves, so the dwords come out as a0 b0 c0 d0 a1
     * b1 c1 d1 (4 codes each) and are put in order. Signed 16-bit packs keep e4m3's 0..255,
     * unsigned 8-bit ones store them. */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; i + 4 * LANES <= H; i += 4 * LANES) {
        __m256i c;
        if (e4m3) {
            const __m256i ab = _mm256_packs_epi32(e4m3_lanes(y + i, vinv),
                                                  e4m3_lanes(y + i + LANES, vinv)),
                          cd = _mm256_packs_epi32(e4m3_lanes(y + i + 2 * LANES, vinv),
                                                  e4m3_lanes(y + i + 3 * LANES, vinv));
            c = _mm256_packus_epi16(ab, cd);
        } else {
            const __m256i ab = _mm256_packs_epi32(i8_lanes(y + i, vinv),
                                                  i8_lanes(y + i + LANES, vinv)),
                          cd = _mm256_packs_epi32(i8_lanes(y + i + 2 * LANES, vinv),
                                                  i8_lanes(y + i + 3 * LANES, vinv));
            c = _mm256_packs_epi16(ab, cd);
        }
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(c, order));
    }
#endif
    return i;
}

/* The largest |y| of a row, NaN left out (maxps returns its second operand for a NaN). */
static float wide_absmax(const float *y, int64_t H) {
    const vi magnitude = V(set1_epi32)(0x7fffffff); /* integer and: AVX-512F has no andps */
    vf m = V(setzero_ps)();
    int64_t i = 0;
    for (; i + LANES <= H; i += LANES)
        m = V(max_ps)(TO_FLOAT(VI(and)(TO_INT(V(loadu_ps)(y + i)), magnitude)), m);
    float lanes[LANES];
    V(storeu_ps)(lanes, m);
    float r = lntune_quant_row_absmax(y + i, H - i);
    for (int j = 0; j < LANES; ++j) r = lanes[j] > r ? lanes[j] : r;
    return r;
}

void QUANT_WIDE_PASS(const float *y, void *q, int64_t H, float *scale, float inv, int e4m3) {
    if (scale) inv = lntune_quant_row_inv(wide_absmax(y, H), e4m3, scale);
    const int64_t i = wide_codes(y, q, H, inv, e4m3);
    lntune_quant_row(y + i, (unsigned char *)q + i, H - i, inv, e4m3);
}
