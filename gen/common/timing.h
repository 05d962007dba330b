/*
 * timing.h - interleaved, repeated timing of kernels on the same buffers: every round runs each
 * candidate once (in a fresh random order each round), so that drift in clock speed or machine
 * load, and the cache state one kernel leaves the next, hit all candidates alike; each
 * candidate's figure is its median over rounds. With a reference candidate (a copy of the same
 * bytes, or another kernel), a figure is instead the median of the candidate's per-round ratios to
 * the reference, times the reference's median: the memory bandwidth a shared machine lends drifts
 * by tens of percent within seconds, and the ratio cancels it (batch medians of a LayerNorm kernel
 * over 5 rounds varied by 5.5-11% raw, 2.4-3.9% as ratios:
 * docs/notes/2026-11-30-tuner-drift-and-copy-gap.md).
 */
#ifndef LNTUNE_TIMING_H
#define LNTUNE_TIMING_H

#include "lntune_kernel.h"
#include "lntune_kernel_backward.h"
#include "pool.h"

#include <stddef.h>
#include <stdint.h>

/*
 * What a backward kernel's call costs the runtime (api_backward.c): the kernel over every row on
 * per-thread fp32 partials (zeroed first), then the partials summed into dgamma (and dbeta) in
 * their type. The buffers of one call are shared by all candidates: they run one after another.
 */
typedef struct lntune_backward_call {
    lntune_backward_kernel_args args;
    float *dgamma_parts, *dbeta_parts; /* (most threads) x H each; dbeta NULL for RMSNorm */
    void *dgamma, *dbeta;              /* H elements of params_type each */
    int params_type;                   /* LNTUNE_TYPE_* */
} lntune_backward_call;

/* One backward call of kernel on threads threads of pool; the kernel's code. */
int lntune_backward_call_run(lntune_pool *pool, lntune_backward_kernel_fn kernel,
                             const lntune_backward_call *call, int threads);

/* Paired blocks a timed run keeps per candidate (lntune_timed.blocks). */
enum { LNTUNE_TIMING_BLOCKS = 32 };

typedef struct lntune_timed {
    lntune_kernel_fn fn;
    int threads;
    /* out */
    double median_ns, min_ns, max_ns;
    /* The mean of the middle 80% of the per-round figures (ratios, as the median's), on the same
     * scale as median_ns: what a stream of calls costs. A shared host slows a kernel's core for
     * a second or so at a time; the median scores a variant by the phase most rounds saw, this
     * by all of them (the tuner ranks its retimed leaders by it: lntune_tune_choose). */
    double score_ns;
    /* The candidate's per-round ratios to the reference in round order, pooled into nblocks
     * consecutive blocks (each its block's median) that every candidate of the run shares: two
     * candidates' blocks pair round for round, so their ratio cancels the drift both saw
     * (decide.h compares candidates by them). nblocks 0: no reference, or not timed. */
    float blocks[LNTUNE_TIMING_BLOCKS];
    int nblocks;
    int failed;    /* the kernel returned an error code */
    int reference; /* the drift reference (see above); the first one that did not fail counts */
    /* The candidate's own problem (same x and y buffers, another shape: a copy of the same
     * bytes as a 16-bit kernel moves); NULL: the args shared by all. */
    const lntune_kernel_args *args;
    /* A backward candidate: backward (fn NULL) run on call by lntune_backward_call_run. */
    lntune_backward_kernel_fn backward;
    const lntune_backward_call *call;
} lntune_timed;

/* Monotonic nanoseconds. */
double lntune_now_ns(void);

/*
 * Sorts samples[0..n) (n >= 1) and gives their median (the mean of the middle two when n is
 * even), minimum and maximum.
 */
void lntune_sample_stats(double *samples, size_t n, double *median, double *min, double *max);

/* The q-quantile (0 to 1, linear between neighbours: 0.5 is lntune_sample_stats's median) of
 * v[0..n), n >= 1; sorts v. */
double lntune_quantile(double *v, size_t n, double q);

/*
 * The figures of c[0..n) from samples (candidate i's round r at samples[i * stride + r], for
 * rounds >= 1 rounds; the order within each candidate's row is lost): median, min and max of
 * each candidate that did not fail, the median (and score) by the reference when there is one
 * (above).
 */
void lntune_timing_figures(lntune_timed *c, size_t n, double *samples, size_t stride, int rounds);

/*
 * Untimed calls of call(ud) until one takes at most 1.10 times *fastest (the fastest call seen
 * so far, which it updates), at most 8: the caches settle into the state a loop of this call
 * leaves them in (after another kernel's non-temporal writes to y that took 3-5 calls; timing.c).
 * The tuner and bench/ both time a sample only after it. Returns the calls' OR of results.
 */
int lntune_settle(int (*call)(void *ud), void *ud, double *fastest);

/*
 * Times each of c[0..n) on args: two calls each (the second sets how it is sampled), then at
 * least min_rounds rounds, more while the total stays under budget_ns (at most 1000). pool serves
 * threads > 1. A candidate whose call takes under 5 ms is timed warm: each sample follows
 * untimed calls of it (until one is within 10% of its fastest, at most 8), as in a loop of
 * calls; one under 20 us is timed on a burst of calls lasting 20 us, its sample the mean per call.
 */
void lntune_time_interleaved(lntune_timed *c, size_t n, const lntune_kernel_args *args,
                             lntune_pool *pool, int min_rounds, double budget_ns);

#endif /* LNTUNE_TIMING_H */
