/*
 * timing.c - interleaved median timing (see timing.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "timing.h"

#include "backward.h"
#include "heartbeat.h"

#include <stdlib.h>
#include <time.h>

enum { MAX_ROUNDS = 1000 };

double lntune_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double lntune_quantile(double *v, size_t n, double q) {
    qsort(v, n, sizeof *v, cmp_double);
    const double at = q * (double)(n - 1);
    const size_t lo = (size_t)at;
    return lo + 1 < n ? v[lo] + (at - (double)lo) * (v[lo + 1] - v[lo]) : v[lo];
}

void lntune_sample_stats(double *samples, size_t n, double *median, double *min, double *max) {
    qsort(samples, n, sizeof *samples, cmp_double);
    *min = samples[0];
    *max = samples[n - 1];
    *median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

int lntune_backward_call_run(lntune_pool *pool, lntune_backward_kernel_fn kernel,
                             const lntune_backward_call *call, int threads) {
    int rc = lntune_backward_run(pool, kernel, &call->args, threads, call->dgamma_parts,
                                 call->dbeta_parts);
    threads = lntune_backward_threads(pool, threads, call->args.rows);
    if (call->dgamma_parts)
        lntune_backward_reduce(call->dgamma_parts, threads, call->args.H, call->dgamma,
                               call->params_type);
    if (call->dbeta_parts)
        lntune_backward_reduce(call->dbeta_parts, threads, call->args.H, call->dbeta,
                               call->params_type);
    return rc;
}

/* One call of candidate c over every row. */
static int run(lntune_pool *pool, const lntune_timed *c, const lntune_kernel_args *args) {
    if (c->backward) return lntune_backward_call_run(pool, c->backward, c->call, c->threads);
    return lntune_pool_run_kernel(pool, c->fn, c->args ? c->args : args, c->threads);
}

/* The mean of sorted[0..n) without its lowest and highest tenth (none of them when n < 10). */
static double trimmed_mean(const double *sorted, size_t n) {
    const size_t cut = n / 10;
    double sum = 0.0;
    for (size_t k = cut; k < n - cut; ++k) sum += sorted[k];
    return sum / (double)(n - 2 * cut);
}

/* per_round[0..rounds) in round order, pooled into c's blocks (its median each); per_round is
 * left reordered within each block. */
static void keep_blocks(lntune_timed *c, double *per_round, int rounds) {
    const int nb = rounds < LNTUNE_TIMING_BLOCKS ? rounds : LNTUNE_TIMING_BLOCKS;
    for (int b = 0; b < nb; ++b) {
        const int lo = (int)((int64_t)b * rounds / nb), hi = (int)((int64_t)(b + 1) * rounds / nb);
        double med, mn, mx;
        lntune_sample_stats(per_round + lo, (size_t)(hi - lo), &med, &mn, &mx);
        c->blocks[b] = (float)med;
    }
    c->nblocks = nb;
}

void lntune_timing_figures(lntune_timed *c, size_t n, double *samples, size_t stride, int rounds) {
    size_t ref = n;
    for (size_t i = 0; i < n && ref == n; ++i)
        if (c[i].reference && !c[i].failed) ref = i;
    /* Ratios first: the stats below sort each candidate's samples out of round order. */
    double *ratio = ref < n ? malloc(sizeof(double) * 2 * n) : NULL; /* median, score */
    double *per_round = ratio ? malloc(sizeof(double) * (size_t)rounds) : NULL;
    for (size_t i = 0; i < n; ++i) c[i].nblocks = 0;
    for (size_t i = 0; per_round && i < n; ++i) {
        if (c[i].failed) continue;
        for (int r = 0; r < rounds; ++r)
            per_round[r] = samples[i * stride + (size_t)r] / samples[ref * stride + (size_t)r];
        keep_blocks(&c[i], per_round, rounds);
        if (i == ref) continue;
        double lo, hi;
        lntune_sample_stats(per_round, (size_t)rounds, &ratio[2 * i], &lo, &hi);
        ratio[2 * i + 1] = trimmed_mean(per_round, (size_t)rounds);
    }
    for (size_t i = 0; i < n; ++i) {
        if (c[i].failed) continue;
        lntune_sample_stats(samples + i * stride, (size_t)rounds, &c[i].median_ns, &c[i].min_ns,
                            &c[i].max_ns);
        if (!per_round) c[i].score_ns = trimmed_mean(samples + i * stride, (size_t)rounds);
    }
    for (size_t i = 0; per_round && i < n; ++i) {
        if (c[i].failed) continue;
        if (i == ref) {
            c[i].score_ns = c[i].median_ns; /* its ratio is 1 in every round */
            continue;
        }
        c[i].median_ns = ratio[2 * i] * c[ref].median_ns;
        c[i].score_ns = ratio[2 * i + 1] * c[ref].median_ns;
    }
    free(per_round);
    free(ratio);
}

/*
 * How candidate i is timed, from its fastest first calls (plan_sample): calls shorter than
 * WARM_CALL_NS are timed warm, after untimed calls of the same kernel, so that each sample sees
 * the caches as a loop of calls leaves them (bench/ and an app see that, not what the previous
 * candidate left: one with non-temporal stores leaves y out of the caches, and its stores still
 * draining, which once made a plain-store copy of one row of 4096 floats time 1.4 us after it
 * against 0.09 us after itself, and a LayerNorm "1.57x" faster than the copy). A sample is a burst
 * of back-to-back calls lasting at least BURST_NS: one call of a short shape is too short for
 * the clock and the loop around it.
 *
 * One warm-up call is not always enough. After a non-temporal write of y, a plain-store
 * LayerNorm of 4096x1024 (32 MiB moved, 2 threads, Xeon) took 1280, 1141, 793, 657 and 646 us
 * in its next five calls, 650 us in a loop of itself; at 8192x1024 three calls were still 1.3x
 * slow. The caches take several passes over y to settle, so a single warm-up call timed plain
 * stores 1.7x slow and made the tuner (and the streaming crossover) choose non-temporal stores
 * at 8-64 MiB, where plain stores win in a loop. So warm-up calls go on, up to MAX_WARM, while
 * a call takes over SETTLED times the fastest warm-up call this candidate has made.
 */
static const double WARM_CALL_NS = 5e6;
static const double BURST_NS = 20e3;
static const double SETTLED = 1.10; /* see lntune_settle in timing.h */
enum { MAX_BURST = 4096, MAX_WARM = 8 };

static void plan_sample(double call_ns, unsigned char *warm, int *burst) {
    *warm = call_ns < WARM_CALL_NS;
    const double calls = call_ns > 1.0 ? BURST_NS / call_ns : MAX_BURST;
    *burst = calls <= 1.0 ? 1 : calls >= MAX_BURST ? MAX_BURST : (int)calls + 1;
}

int lntune_settle(int (*call)(void *ud), void *ud, double *fastest) {
    int rc = 0;
    for (int w = 0; w < MAX_WARM; ++w) {
        const double t0 = lntune_now_ns();
        rc |= call(ud);
        const double t = lntune_now_ns() - t0;
        const int settled = t <= SETTLED * *fastest;
        if (t < *fastest) *fastest = t;
        if (settled || rc) break;
    }
    return rc;
}

typedef struct {
    lntune_pool *pool;
    const lntune_timed *c;
    const lntune_kernel_args *args;
} run_call;

static int run_once(void *ud) {
    const run_call *r = ud;
    return run(r->pool, r->c, r->args);
}

void lntune_time_interleaved(lntune_timed *c, size_t n, const lntune_kernel_args *args,
                             lntune_pool *pool, int min_rounds, double budget_ns) {
    if (n == 0) return;
    double *samples = malloc(sizeof(double) * n * MAX_ROUNDS);
    unsigned char *warm = calloc(n, 1);
    int *burst = calloc(n, sizeof *burst);
    double *fastest = malloc(sizeof *fastest * n); /* each candidate's fastest warm-up call */
    size_t *order = malloc(sizeof *order * n);
    if (!samples || !warm || !burst || !fastest || !order) {
        for (size_t i = 0; i < n; ++i) c[i].failed = 1;
        goto done;
    }
    for (size_t i = 0; i < n; ++i) {
        lntune_heartbeat((int64_t)i); /* names the candidate a crash or hang is blamed on */
        c[i].failed = run(pool, &c[i], args) != 0;
        /* Calls until one is not 3% faster than the one before: fastest[i] is then settled. */
        double prev = 0.0;
        fastest[i] = 0.0;
        for (int k = 0; k < MAX_WARM && !c[i].failed; ++k) {
            const double t0 = lntune_now_ns();
            c[i].failed |= run(pool, &c[i], args) != 0;
            const double t = lntune_now_ns() - t0;
            if (k == 0 || t < fastest[i]) fastest[i] = t;
            if (k > 0 && t > 0.97 * prev) break;
            prev = t;
            if (t >= WARM_CALL_NS) break; /* timed cold: its state after a call does not matter */
        }
        plan_sample(fastest[i], &warm[i], &burst[i]);
    }
    /*
     * Each round visits the candidates in a fresh random order, so that drift and what one
     * candidate leaves the next (in a cold sample) hit all alike: with a fixed cyclic order every
     * candidate would always follow the same predecessor and carry its cost (the same variant
     * listed twice was seen 33% apart that way).
     */
    for (size_t i = 0; i < n; ++i) order[i] = i;
    uint64_t rng = 0x9e3779b97f4a7c15ULL; /* fixed: the same run twice visits alike */
    const double start = lntune_now_ns();
    int rounds = 0;
    while (rounds < MAX_ROUNDS && (rounds < min_rounds || lntune_now_ns() - start < budget_ns)) {
        for (size_t k = n; k > 1; --k) { /* Fisher-Yates */
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            const size_t j = (size_t)(rng % k), tmp = order[k - 1];
            order[k - 1] = order[j];
            order[j] = tmp;
        }
        for (size_t k = 0; k < n; ++k) {
            size_t i = order[k];
            if (c[i].failed) continue;
            lntune_heartbeat((int64_t)i);
            run_call one = {pool, &c[i], args};
            int rc = warm[i] ? lntune_settle(run_once, &one, &fastest[i]) : 0;
            const double t0 = lntune_now_ns();
            for (int b = 0; b < burst[i]; ++b) rc |= run(pool, &c[i], args);
            samples[i * MAX_ROUNDS + (size_t)rounds] = (lntune_now_ns() - t0) / burst[i];
            if (rc) c[i].failed = 1;
        }
        rounds++;
    }
    lntune_timing_figures(c, n, samples, MAX_ROUNDS, rounds);
done:
    free(fastest);
    free(burst);
    free(warm);
    free(order);
    free(samples);
}
