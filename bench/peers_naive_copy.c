/*
 * peers_naive_copy.c - the floor and the ceiling: a naive two-pass LayerNorm/RMSNorm (plain
 * loops, float accumulators, as anyone would write it first; a 16-bit type converted element by
 * element with the runtime's conversions) and two copies of the same bytes,
 * with plain stores (memcpy) and with non-temporal stores. Built with -O3 -march=native so the
 * naive kernel gets everything a compiler gives for free. Rows are split among threads with
 * OpenMP, the runtime oneDNN uses too.
 */
#include "peers.h"

#include "lntune.h"
#include "typed_kernel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct {
    lntune_bench_problem p;
} state;

static int open_any(const lntune_bench_problem *p, void **out, char *note, size_t notelen) {
    (void)note, (void)notelen;
    state *s = malloc(sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    s->p = *p;
    *out = s;
    return LNTUNE_OK;
}

static void close_any(void *s) {
    free(s);
}

/* The type is a constant at each call (see naive_row): each instance gets its own loops, and
 * fp32 the plain ones it had. */
static inline __attribute__((always_inline)) void naive_layernorm_row(int t, const void *x, void *y,
                                                                      const void *g, const void *b,
                                                                      int64_t H, float eps) {
    float sum = 0.0f;
    for (int64_t i = 0; i < H; ++i) sum += typed_load(t, x, i);
    const float mean = sum / (float)H;
    float sq = 0.0f;
    for (int64_t i = 0; i < H; ++i)
        sq += (typed_load(t, x, i) - mean) * (typed_load(t, x, i) - mean);
    const float rstd = 1.0f / sqrtf(sq / (float)H + eps);
    for (int64_t i = 0; i < H; ++i)
        typed_store(t, y, i,
                    (typed_load(t, x, i) - mean) * rstd * typed_load(t, g, i) +
                        typed_load(t, b, i));
}

static inline __attribute__((always_inline)) void
naive_rmsnorm_row(int t, const void *x, void *y, const void *g, int64_t H, float eps) {
    float sq = 0.0f;
    for (int64_t i = 0; i < H; ++i) sq += typed_load(t, x, i) * typed_load(t, x, i);
    const float rstd = 1.0f / sqrtf(sq / (float)H + eps);
    for (int64_t i = 0; i < H; ++i)
        typed_store(t, y, i, typed_load(t, x, i) * rstd * typed_load(t, g, i));
}

/* Non-temporal stores need an aligned destination: the head up to alignment is copied plainly. */
static void nt_copy_row(const char *x, char *y, size_t bytes) {
    size_t i = 0;
#if defined(__AVX512F__)
    enum { W = 64 };
#elif defined(__AVX__)
    enum { W = 32 };
#elif defined(__x86_64__)
    enum { W = 16 };
#else
    enum { W = 1 };
#endif
#if defined(__x86_64__)
    const size_t head = (W - (uintptr_t)y % W) % W;
    memcpy(y, x, head < bytes ? head : bytes);
    for (i = head; i + W <= bytes; i += W) {
#if defined(__AVX512F__)
        _mm512_stream_si512((void *)(y + i), _mm512_loadu_si512(x + i));
#elif defined(__AVX__)
        _mm256_stream_si256((__m256i *)(y + i), _mm256_loadu_si256((const __m256i *)(x + i)));
#else
        _mm_stream_si128((__m128i *)(y + i), _mm_loadu_si128((const __m128i *)(x + i)));
#endif
    }
#endif
    if (i < bytes) memcpy(y + i, x + i, bytes - i);
}

/* One row of op (0 LayerNorm, 1 RMSNorm) on type t; t is a literal at each call in run_op, so each
 * type gets its own loops. */
static inline __attribute__((always_inline)) void
naive_row(int t, int op, const lntune_bench_problem *p, const char *x, char *y) {
    if (op == 0)
        naive_layernorm_row(t, x, y, p->gamma, p->beta, p->H, p->eps);
    else
        naive_rmsnorm_row(t, x, y, p->gamma, p->H, p->eps);
}

static int run_op(void *st, int op) {
    const lntune_bench_problem *p = &((state *)st)->p;
    const size_t bytes = (size_t)p->H * typed_size(p->type);
    /* One thread runs without entering a parallel region, as a single-threaded library would;
     * so does one row, which a second thread cannot share: at 1x4096 on 2 threads, forking the
     * region made the copy 0.96 us where the tuner's takes 0.25 us, the ratio 1.28 for 0.32. */
#pragma omp parallel for schedule(static) num_threads(p->threads) if (p->threads > 1 && p->rows > 1)
    for (int64_t r = 0; r < p->rows; ++r) {
        const char *x = (const char *)p->x + (size_t)r * bytes;
        char *y = (char *)p->y + (size_t)r * bytes;
        if (op == 2)
            memcpy(y, x, bytes);
        else if (op == 3)
            nt_copy_row(x, y, bytes);
        else if (p->type == TYPED_BF16)
            naive_row(TYPED_BF16, op, p, x, y);
        else if (p->type == TYPED_F16)
            naive_row(TYPED_F16, op, p, x, y);
        else
            naive_row(TYPED_F32, op, p, x, y);
    }
#if defined(__x86_64__)
    if (op == 3) _mm_sfence(); /* the streamed stores are globally visible before we return */
#endif
    return 0;
}

static int run_layernorm(void *s) {
    return run_op(s, 0);
}
static int run_rmsnorm(void *s) {
    return run_op(s, 1);
}
static int run_memcpy(void *s) {
    return run_op(s, 2);
}
static int run_nt(void *s) {
    return run_op(s, 3);
}

static const lntune_bench_peer peers[] = {
    {"naive", LNTUNE_BENCH_LAYERNORM, open_any, run_layernorm, close_any},
    {"naive", LNTUNE_BENCH_RMSNORM, open_any, run_rmsnorm, close_any},
    {"copy_memcpy", LNTUNE_BENCH_COPY, open_any, run_memcpy, close_any},
    {"copy_nt", LNTUNE_BENCH_COPY, open_any, run_nt, close_any},
};

const lntune_bench_family lntune_bench_naive_copy_family = {peers, sizeof peers / sizeof peers[0],
                                                            NULL, NULL};
