/*
 * target.h - what the planner (tuner.c) asks of a target: this CPU (cpu_target.c) or a CUDA
 * device (cuda_target.c). The planner owns everything a tuning run decides - the search and its
 * rigor, which measurements are reused, the re-timing of the leaders, the finalists, the tie rule,
 * the records and the winner - and is one source for both targets. A target only lists an op x
 * shape's variants, compiles and verifies them, times them against its copy of the same bytes,
 * and hands over the winner's artifact.
 *
 * Calls for one op x shape: code_hash, then (unless the database already holds the winner)
 * variants, prepare, any number of check and time, artifact for the winner; end always.
 */
#ifndef LNTUNE_TARGET_H
#define LNTUNE_TARGET_H

#include "problem.h"
#include "timing.h"
#include "tuner.h"
#include "tuning_db.h"

#include <stddef.h>
#include <stdint.h>

/* What the dispatcher must know of a stored kernel (tuning_db.h's lntune_best). */
typedef struct lntune_kernel_traits {
    int threads;       /* threads it splits rows across */
    int any_h;         /* it reads H at run time: it may serve other H untuned */
    int any_alignment; /* as fast on rows of any alignment (plain stores): it may serve an H of
                        * less aligned rows than its own */
} lntune_kernel_traits;

typedef struct lntune_plan lntune_plan; /* the planner's op x shape (tuner.c) */

/* What became of one variant in a check or a time. */
typedef enum lntune_outcome_state {
    LNTUNE_OUTCOME_OK = 0,
    LNTUNE_OUTCOME_WRONG,  /* ran and gave a wrong answer: recorded "wrong" */
    LNTUNE_OUTCOME_FAILED, /* did not emit, compile or load, crashed, hung or returned an error */
    LNTUNE_OUTCOME_LOST,   /* never ran (the run is stopping): nothing is recorded */
} lntune_outcome_state;

typedef struct lntune_outcome {
    lntune_outcome_state state;
    int crashed;      /* of failed: crashed or hung in a sandbox (sandbox.h) */
    double max_error; /* the verifier's, once checked */
    double compile_ms;
    char artifact_key[64]; /* the compiled object's, if the target has one ("" if not); a copy:
                            * the planner keeps outcomes while the target's objects move */
    lntune_timed t;        /* time: median_ns, min_ns, max_ns, score_ns */
    char message[512];
} lntune_outcome;

/* How a time call runs (rounds and budget are the target's). */
typedef enum lntune_time_mode {
    LNTUNE_TIME_BATCH, /* a search batch: short, figures scaled by the target's drift reference */
    LNTUNE_TIME_FINAL, /* leaders or finalists with the copy, one long interleaved run */
    LNTUNE_TIME_ALONE, /* the naive kernel with the copy, on the last FINAL run's copy scale */
} lntune_time_mode;

typedef struct lntune_target {
    const char *name; /* the database's target: "cpu", "cuda" */
    int top;          /* leaders the search hands to the re-time */
    int by_h;         /* tune shapes in order of H (their row counts share compiled sources) */
    /* Store a fixed-H winner's h=runtime twin, which the target's dispatch serves other H by
     * (tuner.c: store_twin). */
    int twins;
    /* Take a second look at each choice after the run's other shapes (tuner.c: recheck). */
    int recheck;
    /* The row count tuned when a shape gives none. */
    int64_t (*default_rows)(int64_t H);
    /* Writes the hardware row of this machine and the target's toolchain; its id to *hw. */
    int (*hardware)(void *state, lntune_db *db, int64_t *hw, char *err, size_t errlen);
    /* The template hash and toolchain of op: measurements hold only for these. */
    int (*code_hash)(void *state, lntune_plan *p, char *out, size_t size);
    /* The op x shape's variants, valid until end; index naive_index is the naive baseline and
     * builtin_index the kernel liblntune runs for the shape untuned (n: none for this shape).
     * The built-in is always a finalist, so that a tuned shape is never served slower. */
    int (*variants)(void *state, lntune_plan *p, const char *const **list, size_t *n,
                    size_t *naive_index, size_t *builtin_index);
    /* Buffers, verifier and copy of the shape, before its first check; *bytes: what one call
     * reads and writes (and the copy moves). */
    int (*prepare)(void *state, lntune_plan *p, double *bytes);
    /* Emits, compiles, loads and verifies variants v[0..n) (those already checked: as before). */
    void (*check)(void *state, lntune_plan *p, const size_t *v, size_t n, lntune_outcome *out);
    /* Times the checked-correct variants v[0..n) interleaved with the copy of the same bytes;
     * *copy_ns (FINAL) the copy's median in that run, NAN when it failed. */
    void (*time)(void *state, lntune_plan *p, const size_t *v, size_t n, lntune_time_mode mode,
                 lntune_outcome *out, double *copy_ns);
    /* Variant v's artifact (art's strings and bytes valid until the next artifact call or end)
     * and what the dispatcher must know of its kernel. */
    int (*artifact)(void *state, lntune_plan *p, size_t v, lntune_artifact *art,
                    lntune_kernel_traits *traits);
    void (*end)(void *state, lntune_plan *p);
    /* The template's family knobs of the op, comma-separated (malloc'd; generator.h's
     * lntune_gen_families); NULL: the target has none. */
    int (*families)(void *state, lntune_plan *p, char **csv);
    /* Times the checked run-time-H variants v[0] and v[1] interleaved on rows x H instead of the
     * shape's (the same op, types and fusion); *ratio: v[0]'s median over v[1]'s. NULL: the
     * target measures no reach (tuner.c: store_reach). */
    int (*time_at)(void *state, lntune_plan *p, const size_t v[2], int64_t rows, int64_t H,
                   double *ratio);
} lntune_target;

/*
 * Tunes every op x shape of cfg on target t, whose functions take state: the one tuning loop of
 * both targets. Returns as lntune_tune (tuner.h).
 */
int lntune_plan_run(const lntune_tune_config *cfg, const lntune_target *t, void *state,
                    lntune_tune_result **results, size_t *n, char *err, size_t errlen);

/* For targets: the op x shape at hand. */
const char *lntune_plan_op(const lntune_plan *p);            /* "layernorm_backward" */
const char *lntune_plan_op_key(const lntune_plan *p);        /* with the fusion */
const lntune_shape *lntune_plan_shape(const lntune_plan *p); /* rows set, affine gamma */
const lntune_tune_config *lntune_plan_config(const lntune_plan *p);
lntune_tune_result *lntune_plan_result(lntune_plan *p); /* counters: compiled, verified, ... */
/* Reports a stage ("compile", "verify", "time", ...) to the run's progress callback. */
void lntune_plan_progress(lntune_plan *p, const char *stage);
/* Stops the run with rc and a message (the first one stands). */
void lntune_plan_fail(lntune_plan *p, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A signal asked to stop, or the run failed. */
int lntune_plan_stopped(const lntune_plan *p);

#endif /* LNTUNE_TARGET_H */
