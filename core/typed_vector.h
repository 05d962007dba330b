/*
 * typed_vector.h - 8 elements of fp32, fp16 or bf16 to and from an AVX2 vector of floats, with
 * the numerics of typed_kernel.h's conversions: widening exact, narrowing to nearest even with
 * any NaN quiet and its sign kept. For code compiled with AVX2 and F16C only: liblntune's AVX2
 * residual built-ins (builtin_residual_body.h) and, copied as text by `lntune export`, an
 * exported file's residual fallback under LNTUNE_KERNELS_AVX2. Include typed_kernel.h first
 * (its TYPED_* types and TYPED_INLINE).
 */
#ifndef LNTUNE_TYPED_VECTOR_H
#define LNTUNE_TYPED_VECTOR_H

#include <immintrin.h>

/* 8 elements of type at p (element alignment only) as floats. */
TYPED_INLINE __m256 typed_load8(int type, const void *p) {
    if (type == TYPED_F32) return _mm256_loadu_ps((const float *)p);
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (type == TYPED_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* v rounded to bf16 as lntune_f32_to_bf16 does. */
TYPED_INLINE __m128i typed_bf16_round8(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    const __m256i h = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* 8 floats stored as type at p; nt: non-temporal, p then aligned to the vector's bytes (32 for
 * fp32, 16 for a 16-bit type). F16C's conversion (to nearest even) keeps a NaN's sign and top
 * payload and sets its quiet bit, as lntune_f32_to_f16 does. */
TYPED_INLINE void typed_store8(int type, void *p, __m256 v, int nt) {
    if (type == TYPED_F32) {
        if (nt)
            _mm256_stream_ps((float *)p, v);
        else
            _mm256_storeu_ps((float *)p, v);
        return;
    }
    const __m128i h =
        type == TYPED_F16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : typed_bf16_round8(v);
    if (nt)
        _mm_stream_si128((__m128i *)p, h);
    else
        _mm_storeu_si128((__m128i *)p, h);
}

#endif /* LNTUNE_TYPED_VECTOR_H */
