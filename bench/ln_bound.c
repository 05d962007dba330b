/*
 * ln_bound.c - how close can a fp32 LayerNorm (H = 4096 unless told) come to the copy here?
 * Hand-written AVX-512 schedules, each a step from the copy towards the LayerNorm lntune tunes
 * (two-pass statistics, then normalize with non-temporal stores while the next row is
 * prefetched into L2), timed interleaved (fresh order each round) on ROWS x H floats over
 * THREADS threads. The steps say where the time goes: issue #3's ">= 0.9x copy" gap.
 *
 *   ln_bound [THREADS [ROWS [H]]]  the table (default 2 threads, 2048 rows, H = 4096: 64 MiB,
 *                               past a 32 MiB L3 but not a 260 MiB one; H a multiple of 256)
 *   ln_bound --drift            how much a batch median of 5 rounds varies, raw and as a
 *                               ratio to a copy timed in the same rounds (gen/common/timing.h)
 *
 * Not a test and not the tuner's code: the template (templates/cpu/norm.lua) is the real thing.
 */
#define _GNU_SOURCE
#include "busy.h"
#include "clock.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROUNDS = 30, DRIFT_ROUNDS = 400, BATCH = 5, SMALL = 256 /* floats: 1 KiB */ };

static int rows = 2048, threads = 2, H = 4096;
static float *X, *Y, *G, *B; /* x and y: rows x H; gamma and beta: H */
static volatile float sink;

typedef void schedule(int r0, int r1);

static float sum(const float *x) {
    __m512 s = _mm512_setzero_ps(), t = s;
    for (int i = 0; i < H; i += 32) s += _mm512_load_ps(x + i), t += _mm512_load_ps(x + i + 16);
    return _mm512_reduce_add_ps(s + t) / H;
}

static float squared_deviations(const float *x, float mean) {
    const __m512 m = _mm512_set1_ps(mean);
    __m512 s = _mm512_setzero_ps(), t = s;
    for (int i = 0; i < H; i += 32) {
        const __m512 a = _mm512_load_ps(x + i) - m, b = _mm512_load_ps(x + i + 16) - m;
        s = _mm512_fmadd_ps(a, a, s), t = _mm512_fmadd_ps(b, b, t);
    }
    return _mm512_reduce_add_ps(s + t) / H;
}

/* y = (x - mean) * rstd [* gamma + beta], streamed; next (if any) prefetched into L2. */
static void normalize(const float *x, float *y, float mean, float rstd, int affine,
                      const float *next) {
    const __m512 m = _mm512_set1_ps(mean), r = _mm512_set1_ps(rstd);
    for (int i = 0; i < H; i += 16) {
        if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T1);
        __m512 v = (_mm512_load_ps(x + i) - m) * r;
        if (affine) v = _mm512_fmadd_ps(v, _mm512_load_ps(G + i), _mm512_load_ps(B + i));
        _mm512_stream_ps(y + i, v);
    }
}

static void copy_nt(int r0, int r1) {
    for (size_t i = (size_t)r0 * H; i < (size_t)r1 * H; i += 16)
        _mm512_stream_ps(Y + i, _mm512_load_ps(X + i));
}

static void copy_nt_prefetch(int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
        const float *x = X + (size_t)r * H, *next = r + 1 < r1 ? x + H : NULL;
        float *y = Y + (size_t)r * H;
        for (int i = 0; i < H; i += 16) {
            if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T1);
            _mm512_stream_ps(y + i, _mm512_load_ps(x + i));
        }
    }
}

static void read_only(int r0, int r1) {
    __m512 s = _mm512_setzero_ps();
    for (size_t i = (size_t)r0 * H; i < (size_t)r1 * H; i += 16) s += _mm512_load_ps(X + i);
    sink = _mm512_reduce_add_ps(s);
}

static void write_only_nt(int r0, int r1) {
    for (size_t i = (size_t)r0 * H; i < (size_t)r1 * H; i += 16)
        _mm512_stream_ps(Y + i, _mm512_set1_ps(1.0f));
}

/* The normalize pass alone (statistics free): the bound for any statistics scheme. */
static void scale_only(int r0, int r1) {
    for (int r = r0; r < r1; ++r)
        normalize(X + (size_t)r * H, Y + (size_t)r * H, 0.5f, 2.0f, 0,
                  r + 1 < r1 ? X + (size_t)(r + 1) * H : NULL);
}

static void normalize_only(int r0, int r1) {
    for (int r = r0; r < r1; ++r)
        normalize(X + (size_t)r * H, Y + (size_t)r * H, 0.5f, 2.0f, 1,
                  r + 1 < r1 ? X + (size_t)(r + 1) * H : NULL);
}

static void layernorm(int r0, int r1, int prefetch) {
    for (int r = r0; r < r1; ++r) {
        const float *x = X + (size_t)r * H;
        const float mean = sum(x), rstd = 1.0f / sqrtf(squared_deviations(x, mean) + 1e-5f);
        normalize(x, Y + (size_t)r * H, mean, rstd, 1, prefetch && r + 1 < r1 ? x + H : NULL);
    }
}
static void layernorm_no_prefetch(int r0, int r1) {
    layernorm(r0, r1, 0);
}
static void layernorm_prefetch(int r0, int r1) {
    layernorm(r0, r1, 1);
}

/* normalize with gamma and beta from a 1 KiB window: their share of L1 taken away */
static void normalize_small_params(int r0, int r1) {
    const __m512 m = _mm512_set1_ps(0.5f), s = _mm512_set1_ps(2.0f);
    for (int r = r0; r < r1; ++r) {
        const float *x = X + (size_t)r * H, *next = r + 1 < r1 ? x + H : NULL;
        float *y = Y + (size_t)r * H;
        for (int i = 0; i < H; i += 16) {
            if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T1);
            const int k = i % SMALL;
            const __m512 v = (_mm512_load_ps(x + i) - m) * s;
            _mm512_stream_ps(y + i,
                             _mm512_fmadd_ps(v, _mm512_load_ps(G + k), _mm512_load_ps(B + k)));
        }
    }
}

/*
 * Row r normalized in the loop that sums row r + 1 (shifted by its first element) and its
 * squares, row r + 2 prefetched into L2: x streams in while y streams out (overlap=1). With
 * zigzag, every other row runs last element to first, so that a row starts on the lines of x,
 * gamma and beta the previous one touched last.
 */
static void layernorm_overlap(int r0, int r1, int zigzag) {
    float mean = sum(X + (size_t)r0 * H);
    float rstd = 1.0f / sqrtf(squared_deviations(X + (size_t)r0 * H, mean) + 1e-5f);
    for (int r = r0; r < r1; ++r) {
        const float *x = X + (size_t)r * H, *nx = r + 1 < r1 ? x + H : x;
        const float *after = r + 2 < r1 ? x + 2 * (size_t)H : nx;
        float *y = Y + (size_t)r * H;
        const __m512 m = _mm512_set1_ps(mean), q = _mm512_set1_ps(rstd);
        const __m512 shift = _mm512_set1_ps(nx[0]);
        __m512 s = _mm512_setzero_ps(), ss = s;
        const int back = zigzag && ((r - r0) & 1);
        for (int k = 0; k < H; k += 16) {
            const int i = back ? H - 16 - k : k;
            _mm_prefetch((const char *)(after + i), _MM_HINT_T1);
            const __m512 d = _mm512_load_ps(nx + i) - shift;
            s += d, ss = _mm512_fmadd_ps(d, d, ss);
            const __m512 v = (_mm512_load_ps(x + i) - m) * q;
            _mm512_stream_ps(y + i,
                             _mm512_fmadd_ps(v, _mm512_load_ps(G + i), _mm512_load_ps(B + i)));
        }
        const float c = _mm512_reduce_add_ps(s) / H;
        mean = nx[0] + c, rstd = 1.0f / sqrtf(_mm512_reduce_add_ps(ss) / H - c * c + 1e-5f);
    }
}
static void layernorm_overlap_forward(int r0, int r1) {
    layernorm_overlap(r0, r1, 0);
}
static void layernorm_overlap_zigzag(int r0, int r1) {
    layernorm_overlap(r0, r1, 1);
}

static schedule *current;
static void *worker(void *arg) {
    const long t = (long)arg;
    const int per = rows / threads;
    current((int)t * per, t == threads - 1 ? rows : (int)(t + 1) * per);
    return NULL;
}

static double run(schedule *s) {
    pthread_t th[64];
    current = s;
    const double t0 = test_now_s();
    for (long t = 1; t < threads; ++t) pthread_create(&th[t], NULL, worker, (void *)t);
    worker(0);
    for (int t = 1; t < threads; ++t) pthread_join(th[t], NULL);
    return test_now_s() - t0;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

typedef struct {
    const char *name, *what;
    schedule *fn;
    double bytes_per_element; /* moved through memory */
} step;

static const step steps[] = {
    {"copy", "load x, stream y", copy_nt, 8},
    {"copy, prefetch", "the same, next row prefetched into L2", copy_nt_prefetch, 8},
    {"read only", "sum of x", read_only, 4},
    {"write only", "stream y", write_only_nt, 4},
    {"scale", "(x - m) * r, next row prefetched", scale_only, 8},
    {"normalize", "the same with gamma and beta", normalize_only, 8},
    {"layernorm, no prefetch", "two statistics passes, then normalize", layernorm_no_prefetch, 8},
    {"layernorm", "the same, next row prefetched into L2", layernorm_prefetch, 8},
    {"normalize, 1 KiB gamma/beta", "normalize, gamma and beta from a 1 KiB window",
     normalize_small_params, 8},
    {"layernorm, overlap", "next row's sums in this row's normalize loop",
     layernorm_overlap_forward, 8},
    {"layernorm, overlap zigzag", "the same, every other row backwards", layernorm_overlap_zigzag,
     8},
};
enum { STEPS = sizeof steps / sizeof steps[0] };

/* Each round runs every step once in a fresh order; samples[step][round]. */
static void time_rounds(int nsteps, const int *which, int nrounds, double *samples) {
    unsigned rng = 12345;
    int order[STEPS];
    for (int k = 0; k < nsteps; ++k) order[k] = k;
    for (int r = 0; r < nrounds; ++r) {
        for (int k = nsteps - 1; k > 0; --k) {
            rng = rng * 1103515245u + 12345u;
            const int j = (int)((rng >> 8) % (unsigned)(k + 1)), t = order[k];
            order[k] = order[j], order[j] = t;
        }
        for (int k = 0; k < nsteps; ++k)
            samples[order[k] * nrounds + r] = run(steps[which[order[k]]].fn);
    }
}

static void table(void) {
    static double samples[STEPS * ROUNDS];
    int all[STEPS];
    for (int k = 0; k < STEPS; ++k) all[k] = k;
    lntune_busy_sample b0, b1;
    lntune_busy_sample_now(&b0);
    time_rounds(STEPS, all, ROUNDS, samples);
    lntune_busy_sample_now(&b1);
    double gbps[STEPS], copy = 0.0;
    for (int k = 0; k < STEPS; ++k)
        gbps[k] =
            steps[k].bytes_per_element * rows * H / median(samples + k * ROUNDS, ROUNDS) / 1e9;
    copy = gbps[0] > gbps[1] ? gbps[0] : gbps[1]; /* the better copy, as lntune reports */
    printf("%dx%d fp32, %d thread(s), median of %d interleaved rounds; other processes took %.2f "
           "cores\n\n| step | what | GB/s | / better copy |\n|---|---|---:|---:|\n",
           rows, H, threads, ROUNDS, lntune_busy_other_cores(&b0, &b1));
    for (int k = 0; k < STEPS; ++k)
        printf("| %s | %s | %.1f | %.2fx |\n", steps[k].name, steps[k].what, gbps[k],
               gbps[k] / copy);
}

/* The index of the step that runs fn. */
static int step_of(schedule *fn) {
    int k = 0;
    while (k < STEPS - 1 && steps[k].fn != fn) ++k;
    return k;
}

/* Coefficient of variation of batch medians (BATCH rounds each) of LayerNorm, raw and as ratios. */
static void drift(void) {
    static double samples[2 * DRIFT_ROUNDS];
    const int which[2] = {step_of(copy_nt_prefetch), step_of(layernorm_prefetch)};
    time_rounds(2, which, DRIFT_ROUNDS, samples);
    enum { NB = DRIFT_ROUNDS / BATCH };
    double raw[NB], ratio[NB];
    for (int b = 0; b < NB; ++b) {
        double a[BATCH], q[BATCH];
        for (int k = 0; k < BATCH; ++k) {
            const int r = b * BATCH + k;
            a[k] = samples[DRIFT_ROUNDS + r];
            q[k] = samples[DRIFT_ROUNDS + r] / samples[r];
        }
        raw[b] = median(a, BATCH), ratio[b] = median(q, BATCH);
    }
    const double *v[2] = {raw, ratio};
    for (int s = 0; s < 2; ++s) {
        double m = 0.0, var = 0.0;
        for (int b = 0; b < NB; ++b) m += v[s][b] / NB;
        for (int b = 0; b < NB; ++b) var += (v[s][b] - m) * (v[s][b] - m) / NB;
        printf("layernorm, batch medians of %d rounds (%d batches), %s: CV %.2f%%\n", BATCH, NB,
               s ? "ratio to the copy of the same round" : "raw", 100.0 * sqrt(var) / m);
    }
}

int main(int argc, char **argv) {
    if (!__builtin_cpu_supports("avx512f")) {
        fprintf(stderr, "ln_bound: this CPU has no AVX-512F\n");
        return 1;
    }
    const int drift_mode = argc > 1 && strcmp(argv[1], "--drift") == 0;
    if (!drift_mode && argc > 1) threads = atoi(argv[1]);
    if (!drift_mode && argc > 2) rows = atoi(argv[2]);
    if (!drift_mode && argc > 3) H = atoi(argv[3]);
    if (threads < 1 || threads > 64 || rows < threads || rows % threads || H < SMALL || H % SMALL) {
        fprintf(stderr, "usage: ln_bound [THREADS (1-64) [ROWS (a multiple of THREADS) [H (a "
                        "multiple of 256)]]] | --drift\n");
        return 2;
    }
    const size_t n = (size_t)rows * H;
    X = aligned_alloc(64, n * sizeof *X), Y = aligned_alloc(64, n * sizeof *Y);
    G = aligned_alloc(64, H * sizeof *G), B = aligned_alloc(64, H * sizeof *B);
    if (!X || !Y || !G || !B) return 1;
    srand(1);
    for (size_t i = 0; i < n; ++i) X[i] = 100.0f + (float)rand() / (float)RAND_MAX, Y[i] = 0.0f;
    for (int i = 0; i < H; ++i) G[i] = 1.0f + (float)i * 1e-4f, B[i] = 0.1f;
    if (drift_mode)
        drift();
    else
        table();
    free(X), free(Y), free(G), free(B);
    return 0;
}
