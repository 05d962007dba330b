/*
 * peers_naive_copy.c - the floor and the ceiling: a naive two-pass LayerNorm/RMSNorm (plain
 * loops, float accumulators, as anyone would write it first) and two copies of the same bytes,
 * with plain stores (memcpy) and with non-temporal stores. Built with -O3 -march=native so the
 * naive kernel gets everything a compiler gives for free. Rows are split among threads with
 * OpenMP, the runtime oneDNN uses too.
 */
#include "peers.h"

#include "lntune.h"

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

static void naive_layernorm_row(const float *x, float *y, const float *g, const float *b, int64_t H,
                                float eps) {
    float sum = 0.0f;
    for (int64_t i = 0; i < H; ++i) sum += x[i];
    const float mean = sum / (float)H;
    float sq = 0.0f;
    for (int64_t i = 0; i < H; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.0f / sqrtf(sq / (float)H + eps);
    for (int64_t i = 0; i < H; ++i) y[i] = (x[i] - mean) * rstd * g[i] + b[i];
}

static void naive_rmsnorm_row(const float *x, float *y, const float *g, int64_t H, float eps) {
    float sq = 0.0f;
    for (int64_t i = 0; i < H; ++i) sq += x[i] * x[i];
    const float rstd = 1.0f / sqrtf(sq / (float)H + eps);
    for (int64_t i = 0; i < H; ++i) y[i] = x[i] * rstd * g[i];
}

/* Non-temporal stores need an aligned destination: the head up to alignment is copied plainly. */
static void nt_copy_row(const float *x, float *y, int64_t H) {
    int64_t i = 0;
#if defined(__AVX512F__)
    enum { W = 16 };
#elif defined(__AVX__)
    enum { W = 8 };
#elif defined(__x86_64__)
    enum { W = 4 };
#else
    enum { W = 1 };
#endif
#if defined(__x86_64__)
    for (; i < H && ((uintptr_t)(y + i) & (W * 4 - 1)); ++i) y[i] = x[i];
    for (; i + W <= H; i += W) {
#if defined(__AVX512F__)
        _mm512_stream_ps(y + i, _mm512_loadu_ps(x + i));
#elif defined(__AVX__)
        _mm256_stream_ps(y + i, _mm256_loadu_ps(x + i));
#else
        _mm_stream_ps(y + i, _mm_loadu_ps(x + i));
#endif
    }
#endif
    for (; i < H; ++i) y[i] = x[i];
}

static int run_op(void *st, int op) {
    const lntune_bench_problem *p = &((state *)st)->p;
    const int64_t H = p->H;
    /* One thread runs without entering a parallel region, as a single-threaded library would. */
#pragma omp parallel for schedule(static) num_threads(p->threads) if (p->threads > 1)
    for (int64_t r = 0; r < p->rows; ++r) {
        const float *x = p->x + r * H;
        float *y = p->y + r * H;
        switch (op) {
        case 0:
            naive_layernorm_row(x, y, p->gamma, p->beta, H, p->eps);
            break;
        case 1:
            naive_rmsnorm_row(x, y, p->gamma, H, p->eps);
            break;
        case 2:
            memcpy(y, x, (size_t)H * sizeof(float));
            break;
        default:
            nt_copy_row(x, y, H);
            break;
        }
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
