/*
 * tuner.h - the main job: for each op and shape, generate the variants, compile them, verify each
 * against the float64 reference, time the correct ones against the memory copy of the same bytes,
 * and store every measurement, the winner's artifact and the winner in the tuning database.
 *
 * One planner (tuner.c) makes every decision for both targets: the CPU (cpu_target.c, lntune_tune
 * here) and a CUDA device (cuda_target.c, cuda_tuner.h); target.h is what it asks of them.
 */
#ifndef LNTUNE_TUNER_H
#define LNTUNE_TUNER_H

#include "generator.h"
#include "lntune_kernel.h"
#include "problem.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Planner rigor, as FFTW's: how much of the variant space is compiled and timed. */
typedef enum lntune_rigor {
    LNTUNE_RIGOR_QUICK = 0,      /* one coordinate sweep from the naive variant: seconds */
    LNTUNE_RIGOR_MEASURE = 1,    /* beam search over the knobs (the default) */
    LNTUNE_RIGOR_EXHAUSTIVE = 2, /* every variant */
} lntune_rigor;

typedef struct lntune_tune_progress {
    const char *op;
    int64_t rows, H;
    const char *stage;  /* "copy", "compile", "verify", "time", "retime", "final", "wait" */
    size_t done, total; /* variants evaluated, and the estimate of how many will be */
    double elapsed_s;
    const char *detail; /* why the stage waits ("wait": the load seen), else NULL */
} lntune_tune_progress;

/* The largest H tuned (lntune --shape refuses more); a winner's reach goes no further. */
#define LNTUNE_TUNE_MAX_H (INT64_C(1) << 26)

typedef struct lntune_tune_config {
    const char *db_path;    /* NULL: the default path */
    const char *const *ops; /* op texts: "layernorm", "rmsnorm_backward" (problem.h) */
    size_t nops;
    const lntune_shape *shapes; /* rows 0: lntune_tune_default_rows(H) */
    size_t nshapes;
    int max_threads; /* 0: every core */
    lntune_rigor rigor;
    int retune; /* measure again even what the database already holds */
    void (*progress)(void *ud, const lntune_tune_progress *p);
    void *progress_ud;
    /* Non-zero *stop (set by a signal handler): finish the write in hand, record nothing more,
     * return LNTUNE_OK with what was done. May be NULL. */
    const volatile sig_atomic_t *stop;
    int force; /* open the database with LNTUNE_DB_FORCE (tuning_db.h) */
    /* Only build the stored winners' missing code (wisdom imported: lntune db import): never
     * search; a shape whose winner is stale (another template or toolchain) or absent is left
     * as it is, for a tune to measure again. */
    int rebuild_only;
    /* A database of other machines' records (lntune --seed-from): their fastest variants for
     * an op x shape start a short search (lntune_search_from) instead of the rigor's. NULL:
     * none. */
    const char *seed_db;
    /* While other processes hold a core during a final run (load.h), wait up to this many
     * seconds per op x shape for quiet and measure the run again; past it the winner is stored
     * marked as measured under load. 0: never wait (mark only). */
    double max_wait_s;
    /* Seconds between the final runs of an op x shape (not at --rigor quick), so that they see
     * more than one phase of a shared host (decide.h). 0: back to back. */
    double final_gap_s;
    /* The share of the CPU target's timing budgets each batch and final run gets (0: all;
     * tune_job: $LNTUNE_TIME_SCALE). The tests, which judge no speed, time a tenth. */
    double time_scale;
} lntune_tune_config;

typedef struct lntune_tune_result {
    char target[8]; /* "cpu", "cuda" */
    char op[32];    /* the op text: "layernorm", "rmsnorm_backward", "layernorm+residual_out" */
    char dtype[24]; /* "f32", "bf16", "f16/f32/f32": lntune_types_format */
    int64_t rows, H;
    char variant[256]; /* the winner */
    double median_ns, gbps, copy_gbps, naive_ns, max_error;
    int compiled, cache_hits, reused, verified, wrong, failed, timed;
    int crashed; /* of the failed: crashed or hung in the sandbox (sandbox.h) */
    int saved;   /* measurements written to the database by this run */
    int from_db; /* the winner came from an earlier run; nothing was measured */
    int rebuilt; /* of from_db: its code was missing (imported wisdom), and was compiled and
                  * verified here and stored */
    int64_t reach_lo, reach_hi; /* the H its run-time-H kernel serves (tuning_db.h); 0: none */
    int stale; /* a winner is stored, but measured by another template or toolchain or at
                * other rows: it was (or, rebuild_only, is to be) tuned again */
    int seeds; /* the seed database's variants the search started from (0: a full search) */
    /* The spread of the winner's speed against the copy over its final runs' paired blocks
     * (first and third quartile of copy time / its time); 0 when not measured here. */
    double ratio_lo, ratio_hi;
    char under_load[128]; /* "" measured quietly; else what held the machine (load.h) */
    char why[160];        /* why the winner won (decide.h) */
    int rechecked; /* a second look after the run's other shapes (tuner.c: recheck): 1 kept the
                    * winner, 2 found the built-in faster twice and stored it instead */
} lntune_tune_result;

/*
 * The row count tuned when a shape gives none: 8 Mi elements / H (at least 1), so that x and y
 * together are 64 MiB of fp32 - more than the last-level cache of the machines lntune targets,
 * the regime of a Transformer layer over a long batch of tokens. H=4096 -> 2048 rows.
 */
int64_t lntune_tune_default_rows(int64_t H);

/*
 * Tunes every op x shape. *results (malloc'd, *n entries) holds one entry per op x shape.
 * Returns LNTUNE_OK, or a code with a message in err. A variant that fails to compile or
 * verify, crashes or hangs (verification and timing run in a sandbox: sandbox.h) is recorded and
 * skipped; tuning goes on. A measurement that cannot be written (disk full, read-only file)
 * stops the run with LNTUNE_EDB: what was written stays, and a rerun resumes from it.
 */
int lntune_tune(const lntune_tune_config *cfg, lntune_tune_result **results, size_t *n, char *err,
                size_t errlen);

/* The planner's rules, public for their tests. */

/* Calls cfg's progress callback (if any) for op x shape; estimate is raised to done. */
void lntune_tune_report(const lntune_tune_config *cfg, const char *op, const lntune_shape *shape,
                        const char *stage, size_t done, size_t estimate, double start_ns);

/* Fills r from a winner read back from the database (r->from_db = 1). */
struct lntune_best;
void lntune_tune_result_from_best(lntune_tune_result *r, const struct lntune_best *b);

/*
 * The finalists among n re-timed leaders t[0..n): the best (core + 1) / 2 by score_ns, then the
 * best by median_ns of the others, up to core; then, up to max in all, one at a time, the leader
 * with the best median of those that hold a knob value no finalist holds, while that median lies
 * within 15% of the best leader's. Never a failed one. values[k * nknobs + j] is leader k's value
 * (rank) of knob j; NULL leaves the finalists at core. Their indices to out; returns how many.
 */
size_t lntune_tune_finalists(const lntune_timed *t, size_t n, const int *values, size_t nknobs,
                             size_t core, size_t *out, size_t max);

/*
 * The rule the planner chose by before decide.h, one final run's figures; test_decide measures
 * the paired decision against it (it is no longer called in a tuning run).
 * The winner among n re-timed finalists t[0..n) (at least one not failed): the best score_ns, or
 * the simplest (lowest complexity, then first variant name) of those within noise (a fraction)
 * of it. The score, not the median: timing.h. Then t[builtin] (the kernel liblntune runs
 * untuned; builtin >= n: none) instead, unless that winner's score is under its by more than
 * margin (a fraction), or it failed.
 */
size_t lntune_tune_choose(const lntune_timed *t, size_t n, const int *complexity,
                          const char *const *variant, double noise, size_t builtin, double margin);

/*
 * Sorts copies[0..n) (timed alone, interleaved) fastest first and moves the fastest one-thread
 * copy up to second place; returns how many of the first max are finalists (not failed), to be
 * re-timed with the leaders. Among copies alone the pool's workers spin between back-to-back
 * calls; among one-thread leaders each multi-threaded call waits for a sleeping worker to wake.
 * On a loaded 2-core machine that made two-thread finalists 10-20x slower than alone (340 us for
 * 1.5 MB) and a fused kernel read 3.7-4.3x "the copy"; a one-thread finalist keeps a copy in the
 * regime the one-thread kernels are timed in.
 */
size_t lntune_tune_copy_finalists(lntune_timed *copies, size_t n, size_t max);

/* How many copy finalists the tuner re-times with its leaders (and `lntune time` with its
 * variants). */
enum { LNTUNE_COPY_FINALISTS = 3 };

/* The most a stored figure may exceed the copy of the same bytes by (tuner.c's best_ratio): a
 * final run above it is timed again, three times at most, then the shape fails unstored. */
#define LNTUNE_MAX_COPY_RATIO 1.05

/* The copy's median may move this much (a factor) between a shape's final runs before the result
 * says so in its why (the host lent its memory unevenly). */
#define LNTUNE_MAX_COPY_DRIFT 1.30

#endif /* LNTUNE_TUNER_H */
