/*
 * tune_job.h - `lntune [tune]`: what the command line asks for (op, target, rigor, shapes,
 * direction) made into the tuner's job, and run. Bad usage is refused here, before anything is
 * opened: an unknown op, target or rigor, H above 2^26, or a CPU shape whose buffers would take
 * over half of the memory. The job tunes the CPU, then CUDA device `device` (with no target:
 * when that device is found), into one result list, and the rows printed of each result are
 * computed here, so that the command line only prints them.
 */
#ifndef LNTUNE_TUNE_JOB_H
#define LNTUNE_TUNE_JOB_H

#include "tuner.h"

#include <signal.h>
#include <stddef.h>

/* The pause a job puts between a shape's final runs (lntune_tune_config's final_gap_s), unless
 * $LNTUNE_FINAL_GAP_S names another (0 to 60 s). */
#define LNTUNE_FINAL_GAP_S 1.0

struct lntune_job_progress;

typedef struct lntune_tune_request {
    const char *db_path;        /* NULL: the default database */
    const char *op;             /* "layernorm" or "rmsnorm"; NULL: both */
    const char *target;         /* "cpu" or "cuda"; NULL: the CPU, and CUDA when found */
    const char *rigor;          /* "quick", "measure" or "exhaustive"; NULL: measure */
    const lntune_shape *shapes; /* with their types and fusion; rows 0: the default */
    size_t nshapes;
    int backward; /* the gradients' ops ("rmsnorm_backward") */
    int device;   /* the CUDA device index */
    int threads;  /* 0: every core */
    int retune, force;
    /* The job's progress reports (lntune_job_progress; may be NULL), and a flag that stops the
     * run, as lntune_tune_config's (may be NULL; lntune_tune_stop_on_signals) */
    void (*progress)(void *ud, const struct lntune_job_progress *p);
    void *progress_ud;
    const volatile sig_atomic_t *stop;
    double memory_bytes; /* what the CPU's buffers may take half of; 0: this machine's memory */
    /* --seed-from: another machine's results, as a wisdom file (lntune db export) or a tuning
     * database, whose fastest variants start a short search (lntune_search_from); NULL: none */
    const char *seed_from;
    /* As lntune_tune_config's max_wait_s: how long a final run may wait for quiet */
    double max_wait_s;
} lntune_tune_request;

typedef struct lntune_tune_job {
    lntune_tune_config cfg; /* the tuner's configuration */
    const char *ops[2];     /* cfg's op texts */
    int cpu, cuda;          /* the targets tuned */
    int find_cuda;          /* no target given: lntune_tune_job_find_cuda sets cuda */
    int device;
    void (*progress)(void *ud, const struct lntune_job_progress *p); /* the request's */
    void *progress_ud;
    char seed_dir[4096]; /* a wisdom file given as seed_from: the temporary folder it was
                          * imported into ("" if none); lntune_tune_job_end removes it */
    char seed_db[4200];
    /* What the user should hear before the run ("" if nothing): --threads above the CPUs this
     * process may run on, which the CPU tuner caps. */
    char note[160];
} lntune_tune_job;

/*
 * Fills job from req. Returns LNTUNE_OK, or LNTUNE_EINVAL with the fault in err (bad usage:
 * nothing was opened).
 */
int lntune_tune_job_init(lntune_tune_job *job, const lntune_tune_request *req, char *err,
                         size_t errlen);

/*
 * Reads req->seed_from (if any) for the job: a tuning database is used as it is, a wisdom file
 * is imported into a temporary database. Returns LNTUNE_OK, or a code with why in err. Call
 * lntune_tune_job_end after the run either way.
 */
int lntune_tune_job_seed(lntune_tune_job *job, const lntune_tune_request *req, char *err,
                         size_t errlen);
void lntune_tune_job_end(lntune_tune_job *job); /* removes what lntune_tune_job_seed made */

/*
 * With no target given, probes job's CUDA device: job->cuda says whether it opens; when it does
 * not, note says why (empty without CUDA in this build). Otherwise leaves job as it is and note
 * empty.
 */
void lntune_tune_job_find_cuda(lntune_tune_job *job, char *note, size_t notelen);

/*
 * Makes SIGINT and SIGTERM set the flag returned (to the signal's number) instead of ending the
 * process: given as cfg.stop, it has the tuner finish the write in hand and stop, and the run
 * returns what was done.
 */
const volatile sig_atomic_t *lntune_tune_stop_on_signals(void);

/*
 * Tunes the CPU, then (unless *cfg.stop is set by then) the CUDA device; *results (malloc'd, *n
 * entries, NULL and 0 when nothing was tuned) holds both's. Returns LNTUNE_OK, or the first
 * failure with its message in err; what was tuned before it is in *results.
 */
int lntune_tune_job_run(const lntune_tune_job *job, lntune_tune_result **results, size_t *n,
                        char *err, size_t errlen);

/* The measurements results[0..n) saved, and how many of them have no correct variant. */
void lntune_tune_results_count(const lntune_tune_result *results, size_t n, int *saved,
                               int *missing);

/*
 * A job's progress: the tuner's reports of each op x shape (lntune_tune_progress) placed in the
 * whole job, which tunes nops x nshapes op x shapes on each target. The tuner says nothing of a
 * shape whose winner it reads back from the database, nor when an op x shape ends; the job
 * tells the end from the next op x shape's first report (or the target's end), and the second
 * look (tuner.c's recheck, after every op x shape of a target) from a report of an op x shape
 * already ended.
 */
typedef enum lntune_job_event {
    LNTUNE_JOB_STEP,        /* a stage of the op x shape in hand (p: the tuner's report) */
    LNTUNE_JOB_SHAPE_DONE,  /* the op x shape ended (p: its last report) */
    LNTUNE_JOB_SECOND_LOOK, /* a second look at an op x shape's winner (p: its report) */
} lntune_job_event;

typedef struct lntune_job_progress {
    lntune_job_event event;
    const lntune_tune_progress *p;
    const char *target;   /* "cpu", "cuda" */
    size_t shape, shapes; /* this op x shape's number in the job (from 1), and how many it has */
    double job_s;         /* seconds since the job's run began */
    /* Seconds left (< 0: not known yet): of this op x shape at the rate of its variants so far,
     * and of the job: this op x shape's and the others' at the mean of those ended (else at this
     * one's pace). A second look's are 0. */
    double eta_s, job_eta_s;
} lntune_job_progress;

/* What is printed of one result beside its own fields. */
typedef struct lntune_tune_row {
    const char *direction;     /* "forward", "backward"; "?" for an op text not known */
    double time_us;            /* the median */
    double ratio_to_copy;      /* gbps / copy_gbps; 0 without a copy */
    double speedup_over_naive; /* naive_ns / median_ns; 0 without a time */
    char shape[40];            /* "64x96", "64x96 bf16": the dtype unless f32 */
    char counts[48];           /* compiled/cache hits/reused, and " (db)" when read back */
} lntune_tune_row;

void lntune_tune_row_make(const lntune_tune_result *r, lntune_tune_row *row);

#endif /* LNTUNE_TUNE_JOB_H */
