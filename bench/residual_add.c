/*
 * residual_add.c - the residual add kernels of bench_residual (residual_add.h). Threads are
 * started per call: at rows=4096, H=4096 a call moves 100-200 MB (tens of ms), against tens of
 * microseconds to start and join a thread.
 */
#include "residual_add.h"

#include "dtypes.h"
#include "typed_kernel.h"
#if defined(__AVX2__) && defined(__F16C__)
#include "typed_vector.h"
#endif

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* to nearest even; inputs finite */
}

static inline float from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* 16 elements of s at once: the unit of a non-temporal store (64 bytes fp32, 32 bytes bf16). */
static void add_f32(const float *x, const float *r, float *s, int64_t n, int nt) {
    if (!nt) {
        for (int64_t i = 0; i < n; ++i) s[i] = x[i] + r[i];
        return;
    }
    for (int64_t i = 0; i < n; i += 16) {
#ifdef __AVX512F__
        _mm512_stream_ps(s + i, _mm512_add_ps(_mm512_load_ps(x + i), _mm512_load_ps(r + i)));
#else
        for (int k = 0; k < 16; k += 8)
            _mm256_stream_ps(s + i + k,
                             _mm256_add_ps(_mm256_load_ps(x + i + k), _mm256_load_ps(r + i + k)));
#endif
    }
    _mm_sfence();
}

static void add_bf16(const uint16_t *x, const uint16_t *r, uint16_t *s, int64_t n, int nt) {
    if (!nt) {
        for (int64_t i = 0; i < n; ++i) s[i] = to_bf16(from_bf16(x[i]) + from_bf16(r[i]));
        return;
    }
    for (int64_t i = 0; i < n; i += 16) {
        uint16_t block[16] __attribute__((aligned(32)));
        for (int k = 0; k < 16; ++k) block[k] = to_bf16(from_bf16(x[i + k]) + from_bf16(r[i + k]));
        _mm256_stream_si256((__m256i *)(s + i), _mm256_load_si256((const __m256i *)block));
    }
    _mm_sfence();
}

/* fp16 through core/typed_vector.h (F16C) where the compiler targets AVX2 and F16C
 * (-march=native), else the runtime's portable conversions; both round to nearest even. */
static void add_f16(const uint16_t *x, const uint16_t *r, uint16_t *s, int64_t n, int nt) {
    int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        typed_store8(TYPED_F16, s + i,
                     _mm256_add_ps(typed_load8(TYPED_F16, x + i), typed_load8(TYPED_F16, r + i)),
                     nt);
#endif
    for (; i < n; ++i) s[i] = lntune_f32_to_f16(lntune_f16_to_f32(x[i]) + lntune_f16_to_f32(r[i]));
    if (nt) _mm_sfence();
}

typedef struct {
    const residual_add_variant *v;
    const void *x, *r;
    void *s;
    int64_t begin, end;
} part;

static void *run_part(void *arg) {
    const part *p = arg;
    const int64_t size = (int64_t)lntune_type_size(p->v->type), n = p->end - p->begin;
    const char *x = (const char *)p->x + p->begin * size, *r = (const char *)p->r + p->begin * size;
    char *s = (char *)p->s + p->begin * size;
    if (p->v->type == LNTUNE_TYPE_BF16)
        add_bf16((const uint16_t *)x, (const uint16_t *)r, (uint16_t *)s, n, p->v->nt);
    else if (p->v->type == LNTUNE_TYPE_F16)
        add_f16((const uint16_t *)x, (const uint16_t *)r, (uint16_t *)s, n, p->v->nt);
    else
        add_f32((const float *)x, (const float *)r, (float *)s, n, p->v->nt);
    return NULL;
}

void residual_add(const residual_add_variant *v, const void *x, const void *r, void *s, int64_t n) {
    enum { MAX_THREADS = 256 };
    const int t = v->threads < 1 ? 1 : v->threads > MAX_THREADS ? MAX_THREADS : v->threads;
    part parts[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int k = 0; k < t; ++k) { /* split at multiples of 64 elements: aligned NT stores */
        parts[k] = (part){v, x, r, s, n / 64 * k / t * 64, n / 64 * (k + 1) / t * 64};
        if (k == t - 1) parts[k].end = n;
    }
    for (int k = 1; k < t; ++k)
        if (!(started[k] = pthread_create(&ids[k], NULL, run_part, &parts[k]) == 0))
            run_part(&parts[k]);
    run_part(&parts[0]);
    for (int k = 1; k < t; ++k)
        if (started[k]) pthread_join(ids[k], NULL);
}
