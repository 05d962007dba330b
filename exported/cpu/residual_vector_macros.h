/*
 * exported/cpu/residual_vector_macros.h - the generic fused Add & Norm's element loops in
 * lntune_kernels.c take 8 elements at a time where the file is compiled for AVX2 and F16C, with
 * core/typed_vector.h's conversions, as liblntune's AVX2 residual built-ins do. Copied after
 * typed_vector.h, under LNTUNE_KERNELS_AVX2.
 */
#define RESIDUAL_SUM8(X, R)                                                                        \
    for (; i + 8 <= H; i += 8)                                                                     \
        _mm256_storeu_ps(                                                                          \
            s + i,                                                                                 \
            _mm256_add_ps(typed_load8(TYPED_##X, (const char *)x + i * typed_size(TYPED_##X)),     \
                          typed_load8(TYPED_##R, (const char *)r + i * typed_size(TYPED_##R))));
/* nt: non-temporal stores, which need out aligned to the vector: scalars until it is */
#define RESIDUAL_STORE8(R)                                                                         \
    const uintptr_t align = 8 * typed_size(TYPED_##R) - 1;                                         \
    if (nt)                                                                                        \
        for (; i < H && (((uintptr_t)out + i * typed_size(TYPED_##R)) & align) != 0; ++i)          \
            typed_store(TYPED_##R, out, i, s[i]);                                                  \
    for (; i + 8 <= H; i += 8)                                                                     \
        typed_store8(TYPED_##R, (char *)out + i * typed_size(TYPED_##R), _mm256_loadu_ps(s + i),   \
                     nt);
#define RESIDUAL_FENCE() _mm_sfence()
