/*
 * tune_job.c - `lntune [tune]`'s job (see tune_job.h).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tune_job.h"

#include "cuda_devices.h"
#include "fusion.h"
#include "hardware.h"
#include "lntune.h"
#include "reference.h"
#include "tuning_db.h"
#ifdef LNTUNE_HAVE_CUDA
#include "cuda_tuner.h"
#endif

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* x and y of a tuned CPU shape (and its other rows x H buffers) must fit in half the memory. */
static int check_memory(const lntune_tune_request *req, const lntune_shape *s, char *err,
                        size_t errlen) {
    const double memory = req->memory_bytes > 0
                              ? req->memory_bytes
                              : (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    const double rows = s->rows ? (double)s->rows : (double)lntune_tune_default_rows(s->H);
    if (s->H > LNTUNE_TUNE_MAX_H) {
        snprintf(err, errlen, "H above 2^26 is not tuned (the verifier's inputs would not fit)");
        return LNTUNE_EINVAL;
    }
    /* fp32-sized buffers: the backward's two each hold x + dy (+ dresidual_out with --residual;
     * or dx and the copy's rows); the forward's x and y, and residual and residual_out with
     * --residual */
    const double per_element = req->backward                             ? (s->fusion ? 24.0 : 16.0)
                               : s->fusion == LNTUNE_FUSION_RESIDUAL_OUT ? 16.0
                               : s->fusion                               ? 12.0
                                                                         : 8.0;
    if (memory > 0 && rows * (double)s->H * per_element > memory / 2) {
        snprintf(err, errlen,
                 "rows x H = %.0f x %lld needs %.1f GiB for %s, over half of this machine's "
                 "memory",
                 rows, (long long)s->H, rows * (double)s->H * per_element / (1 << 30),
                 req->backward ? "x, dy (, dresidual_out) and dx" : "its buffers");
        return LNTUNE_EINVAL;
    }
    return LNTUNE_OK;
}

/* $name as a number from lo to hi, else fallback: LNTUNE_FINAL_GAP_S, the pause between a
 * shape's final runs in seconds, and LNTUNE_TIME_SCALE, the share of the timing budgets (the
 * tests, which run beside each other and judge no speed, set no pause and a tenth). */
static double env_number(const char *name, double lo, double hi, double fallback) {
    const char *set = getenv(name);
    char *end = NULL;
    const double s = set ? strtod(set, &end) : -1;
    return set && end != set && !*end && s >= lo && s <= hi ? s : fallback;
}

int lntune_tune_job_init(lntune_tune_job *job, const lntune_tune_request *req, char *err,
                         size_t errlen) {
    memset(job, 0, sizeof *job);
    if (req->nshapes == 0) {
        snprintf(err, errlen, "--shape is required, e.g. --shape H=4096");
        return LNTUNE_EINVAL;
    }
    job->cpu = !req->target || strcmp(req->target, "cpu") == 0;
    job->cuda = req->target && strcmp(req->target, "cuda") == 0;
    job->find_cuda = !req->target;
    job->device = req->device;
    job->progress = req->progress;
    job->progress_ud = req->progress_ud;
    if (req->target && !job->cpu && !job->cuda) {
        snprintf(err, errlen, "unknown target '%s' (expected cpu or cuda)", req->target);
        return LNTUNE_EINVAL;
    }
    if (req->op && lntune_op_parse(req->op) < 0) {
        snprintf(err, errlen, "unknown op '%s' (expected layernorm or rmsnorm)", req->op);
        return LNTUNE_EINVAL;
    }
    lntune_rigor rigor = LNTUNE_RIGOR_MEASURE;
    if (req->rigor) {
        if (strcmp(req->rigor, "quick") == 0)
            rigor = LNTUNE_RIGOR_QUICK;
        else if (strcmp(req->rigor, "exhaustive") == 0)
            rigor = LNTUNE_RIGOR_EXHAUSTIVE;
        else if (strcmp(req->rigor, "measure") != 0) {
            snprintf(err, errlen, "unknown rigor '%s' (expected quick, measure or exhaustive)",
                     req->rigor);
            return LNTUNE_EINVAL;
        }
    }
    for (size_t i = 0; i < req->nshapes && job->cpu; ++i) {
        int rc = check_memory(req, &req->shapes[i], err, errlen);
        if (rc != LNTUNE_OK) return rc;
    }
    if (req->op) {
        job->ops[0] = lntune_op_text((lntune_op)lntune_op_parse(req->op), req->backward);
    } else {
        job->ops[0] = lntune_op_text(LNTUNE_OP_LAYERNORM, req->backward);
        job->ops[1] = lntune_op_text(LNTUNE_OP_RMSNORM, req->backward);
    }
    job->note[0] = '\0';
    if (job->cpu && req->threads > 0) {
        lntune_cpu_info cpu;
        lntune_cpu_info_get(&cpu);
        const int usable = lntune_cpu_usable_threads(&cpu);
        if (req->threads > usable)
            snprintf(job->note, sizeof job->note,
                     "--threads %d: this process may run on %d CPU(s); the CPU kernels are tuned "
                     "with %d thread(s)",
                     req->threads, usable, usable);
    }
    job->cfg = (lntune_tune_config){.db_path = req->db_path,
                                    .ops = job->ops,
                                    .nops = req->op ? 1 : 2,
                                    .shapes = req->shapes,
                                    .nshapes = req->nshapes,
                                    .max_threads = req->threads,
                                    .rigor = rigor,
                                    .retune = req->retune,
                                    .stop = req->stop,
                                    .force = req->force,
                                    .max_wait_s = req->max_wait_s,
                                    .final_gap_s =
                                        env_number("LNTUNE_FINAL_GAP_S", 0, 60, LNTUNE_FINAL_GAP_S),
                                    .time_scale = env_number("LNTUNE_TIME_SCALE", 0.01, 1, 1)};
    return LNTUNE_OK;
}

int lntune_tune_job_seed(lntune_tune_job *job, const lntune_tune_request *req, char *err,
                         size_t errlen) {
    if (!req->seed_from) return LNTUNE_OK;
    lntune_db *db = NULL;
    if (lntune_db_open(req->seed_from, LNTUNE_DB_READONLY, &db) == LNTUNE_OK) {
        lntune_db_close(db);
        snprintf(job->seed_db, sizeof job->seed_db, "%s", req->seed_from);
        job->cfg.seed_db = job->seed_db;
        return LNTUNE_OK;
    }
    lntune_db_close(db);
    FILE *f = fopen(req->seed_from, "r");
    if (!f) {
        snprintf(err, errlen, "--seed-from: cannot read %s", req->seed_from);
        return LNTUNE_EIO;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(job->seed_dir, sizeof job->seed_dir, "%s/lntune-seed-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    int rc = LNTUNE_EIO;
    if (!mkdtemp(job->seed_dir)) {
        job->seed_dir[0] = '\0';
        snprintf(err, errlen, "--seed-from: cannot make a temporary folder");
    } else {
        snprintf(job->seed_db, sizeof job->seed_db, "%s/seed.db", job->seed_dir);
        lntune_wisdom_report r;
        rc = lntune_db_open(job->seed_db, 0, &db);
        if (rc == LNTUNE_OK) rc = lntune_db_wisdom_import(db, f, &r);
        if (rc != LNTUNE_OK)
            snprintf(err, errlen, "--seed-from %s: %s", req->seed_from,
                     db ? lntune_db_errmsg(db) : lntune_errstr(rc));
        lntune_db_close(db);
        if (rc == LNTUNE_OK) job->cfg.seed_db = job->seed_db;
    }
    fclose(f);
    return rc;
}

void lntune_tune_job_end(lntune_tune_job *job) {
    if (!job || !job->seed_dir[0]) return;
    static const char *const files[] = {"seed.db", "seed.db-wal", "seed.db-shm", "seed.db-journal"};
    char path[4300];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; ++i) {
        snprintf(path, sizeof path, "%s/%s", job->seed_dir, files[i]);
        unlink(path);
    }
    rmdir(job->seed_dir);
    job->seed_dir[0] = '\0';
}

void lntune_tune_job_find_cuda(lntune_tune_job *job, char *note, size_t notelen) {
    if (notelen) note[0] = '\0';
    if (!job->find_cuda) return;
    char why[1024];
    job->cuda = lntune_cuda_device_usable(job->device, why, sizeof why);
    if (!job->cuda && why[0])
        snprintf(note, notelen, "no CUDA device to tune (%s); tuning the CPU", why);
}

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
    stop_signal = sig;
}

const volatile sig_atomic_t *lntune_tune_stop_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &stop_signal;
}

/* Tunes cfg on CUDA device `device`, appending its results to *r. */
static int tune_cuda(const lntune_tune_config *cfg, int device, lntune_tune_result **r, size_t *n,
                     char *err, size_t errlen) {
#ifdef LNTUNE_HAVE_CUDA
    lntune_tune_result *more = NULL;
    size_t nmore = 0;
    int rc = lntune_tune_cuda(cfg, device, &more, &nmore, err, errlen);
    lntune_tune_result *all = realloc(*r, (*n + nmore + 1) * sizeof *all);
    if (!all) {
        free(more);
        snprintf(err, errlen, "out of memory");
        return LNTUNE_ENOMEM;
    }
    if (nmore) memcpy(all + *n, more, nmore * sizeof *more);
    *r = all;
    *n += nmore;
    free(more);
    return rc;
#else
    (void)cfg, (void)device, (void)r, (void)n;
    snprintf(err, errlen, "this lntune was built without CUDA (LNTUNE_CUDA=OFF)");
    return LNTUNE_EUNSUPPORTED;
#endif
}

/* What a job's run has seen of the tuner's reports (lntune_job_progress). */
enum { KEY_LEN = 96 };
typedef struct {
    const lntune_tune_job *job;
    const char *target;
    double t0_s;
    char cur[KEY_LEN];         /* the op x shape in hand: "op H rows" ("": none) */
    lntune_tune_progress last; /* its last report, its texts copied below */
    char op[32], stage[16];
    char (*ended)[KEY_LEN]; /* the op x shapes of this target that ended */
    size_t nended, cap;
    size_t base; /* op x shapes that ended on targets before this one */
    size_t started, finished, shapes;
    double finished_s; /* the seconds they took */
    int second_look;   /* the tuner's second looks of this target began */
} job_tracker;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void job_event(job_tracker *t, lntune_job_event e, const lntune_tune_progress *p,
                      size_t shape) {
    lntune_job_progress j = {e, p, t->target, shape, t->shapes, now_s() - t->t0_s, -1, -1};
    const size_t left = t->shapes - (t->finished < t->shapes ? t->finished : t->shapes);
    if (e == LNTUNE_JOB_SECOND_LOOK) {
        j.eta_s = j.job_eta_s = 0;
    } else if (e == LNTUNE_JOB_SHAPE_DONE) {
        j.eta_s = 0;
        j.job_eta_s = (double)left * t->finished_s / (double)t->finished;
    } else if (p->done) { /* the others at the mean of those ended, else at this one's pace */
        j.eta_s = p->elapsed_s * (double)(p->total - p->done) / (double)p->done;
        const double mean =
            t->finished ? t->finished_s / (double)t->finished : j.eta_s + p->elapsed_s;
        j.job_eta_s = j.eta_s + (double)(left ? left - 1 : 0) * mean;
    } else if (t->finished) {
        j.job_eta_s = (double)left * t->finished_s / (double)t->finished;
    }
    t->job->progress(t->job->progress_ud, &j);
}

/* The op x shape in hand ended: said once, with its last report. */
static void end_current(job_tracker *t) {
    if (!t->cur[0]) return;
    if (t->nended == t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 8;
        char(*more)[KEY_LEN] = realloc(t->ended, cap * sizeof *more);
        if (more) t->ended = more, t->cap = cap;
    }
    if (t->nended < t->cap) memcpy(t->ended[t->nended++], t->cur, KEY_LEN);
    t->finished++;
    t->finished_s += t->last.elapsed_s;
    job_event(t, LNTUNE_JOB_SHAPE_DONE, &t->last, t->started);
    t->cur[0] = '\0';
}

static void on_report(void *ud, const lntune_tune_progress *p) {
    job_tracker *t = ud;
    char key[KEY_LEN];
    snprintf(key, sizeof key, "%s %lld %lld", p->op, (long long)p->H, (long long)p->rows);
    size_t seen = 0;
    while (seen < t->nended && strcmp(t->ended[seen], key) != 0) ++seen;
    if (t->second_look || seen < t->nended) {
        if (!t->second_look) end_current(t);
        t->second_look = 1;
        /* the look's other reports (its copy) are no stage of a search */
        if (strcmp(p->stage, "recheck") == 0)
            job_event(t, LNTUNE_JOB_SECOND_LOOK, p, t->base + seen + 1);
        return;
    }
    if (strcmp(key, t->cur) != 0) {
        end_current(t);
        memcpy(t->cur, key, KEY_LEN);
        t->started++;
    }
    t->last = *p;
    snprintf(t->op, sizeof t->op, "%s", p->op);
    snprintf(t->stage, sizeof t->stage, "%s", p->stage);
    t->last.op = t->op, t->last.stage = t->stage, t->last.detail = NULL;
    job_event(t, LNTUNE_JOB_STEP, p, t->started);
}

/* The target's run ended: its op x shape in hand too; the next target starts afresh. */
static void end_target(job_tracker *t) {
    end_current(t);
    t->base = t->finished;
    t->nended = 0;
    t->second_look = 0;
}

int lntune_tune_job_run(const lntune_tune_job *job, lntune_tune_result **results, size_t *n,
                        char *err, size_t errlen) {
    lntune_tune_config cfg = job->cfg;
    cfg.ops = job->ops; /* job may have been copied */
    cfg.seed_db = job->seed_db[0] ? job->seed_db : NULL;
    job_tracker t = {.job = job, .t0_s = now_s()};
    t.shapes = cfg.nops * cfg.nshapes * (size_t)(!!job->cpu + !!job->cuda);
    cfg.progress = job->progress ? on_report : NULL;
    cfg.progress_ud = &t;
    *results = NULL;
    *n = 0;
    if (errlen) err[0] = '\0';
    int rc = LNTUNE_OK;
    t.target = "cpu";
    if (job->cpu) rc = lntune_tune(&cfg, results, n, err, errlen);
    end_target(&t);
    t.target = "cuda";
    if (job->cuda && rc == LNTUNE_OK && !(cfg.stop && *cfg.stop))
        rc = tune_cuda(&cfg, job->device, results, n, err, errlen);
    end_target(&t);
    free(t.ended);
    if (rc != LNTUNE_OK && errlen && !err[0]) snprintf(err, errlen, "%s", lntune_errstr(rc));
    return rc;
}

void lntune_tune_results_count(const lntune_tune_result *results, size_t n, int *saved,
                               int *missing) {
    *saved = *missing = 0;
    for (size_t i = 0; i < n; ++i) {
        *saved += results[i].saved;
        *missing += !results[i].variant[0];
    }
}

void lntune_tune_row_make(const lntune_tune_result *r, lntune_tune_row *row) {
    const int f32 = strcmp(r->dtype, "f32") == 0;
    row->direction = lntune_op_direction(r->op);
    row->time_us = r->median_ns * 1e-3;
    row->ratio_to_copy = r->copy_gbps > 0 ? r->gbps / r->copy_gbps : 0.0;
    row->speedup_over_naive = r->median_ns > 0 ? r->naive_ns / r->median_ns : 0.0;
    snprintf(row->shape, sizeof row->shape, "%lldx%lld%s%s", (long long)r->rows, (long long)r->H,
             f32 ? "" : " ", f32 ? "" : r->dtype);
    snprintf(row->counts, sizeof row->counts, "%d/%d/%d%s", r->compiled, r->cache_hits, r->reused,
             r->rebuilt   ? " (db, rebuilt)"
             : r->from_db ? " (db)"
                          : "");
}
