/*
 * bench.c - the runner (see bench.h): for each shape, every implementation is opened on the same
 * buffers, checked against the float64 reference, calibrated, then timed in interleaved rounds
 * (each round runs every implementation for one repetition, starting at a different one), so that
 * drift and other processes' load hit all of them alike. A repetition loops the call until it
 * has lasted rep_ms; the figure is the median per-call time over repetitions.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "busy.h"
#include "lntune.h"
#include "peers.h"
#include "randn.h"
#include "dtypes.h"
#include "half.h"
#include "half_ref.h"
#include "reference.h"
#include "timing.h"
#include "verify.h"

#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const lntune_bench_shape lntune_bench_default_shapes[] = {
    {4096, 768},  {4096, 1024}, {256, 16384},
    {2048, 4096}, {1024, 8192}, {32768, 4096}, /* 1 GiB moved: out of every cache */
    {1, 4096},    {8, 4096},                   /* latency */
};
const size_t lntune_bench_default_shape_count =
    sizeof lntune_bench_default_shapes / sizeof lntune_bench_default_shapes[0];

/* Few enough elements that the call's fixed cost, not bandwidth, is what an app sees. */
int lntune_bench_is_latency(int64_t rows, int64_t H) {
    return rows * H <= 64 * 1024;
}

/* Elements whose output is compared with the reference per implementation and shape: all of a
 * small shape, evenly spaced rows (first and last included) of a large one. */
#define CHECK_ELEMENTS (INT64_C(1) << 24)

static const lntune_bench_family *const families[] = {
    &lntune_bench_lntune_family,    &lntune_bench_export_family, &lntune_bench_onednn_family,
    &lntune_bench_onednn3_family,   &lntune_bench_ort_family,    &lntune_bench_ggml_family,
    &lntune_bench_naive_copy_family};

enum { NFAMILIES = sizeof families / sizeof families[0] };

/* Reproducible normal data without libc's rand state (the tests' generator, tests/randn.h). */
static void fill_normal(float *v, int64_t n, double mean, double sd, uint64_t seed) {
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < n; ++i) v[i] = (float)(mean + sd * test_randn(&s));
}

/*
 * The verifier's error (gen/verify/verify.h) on one row: in its unit for fp32, against the bound of
 * the rounding to y's type for fp16 and bf16; a NaN or Inf where the reference has none, or the
 * reverse, is INFINITY. Copies must be exact. x is widened into xf (exactly) for the reference.
 */
static double row_error(int op, const lntune_bench_problem *p, int64_t r, float *xf, double *z) {
    const int64_t H = p->H;
    const size_t es = lntune_type_size(p->type), at = (size_t)(r * H);
    if (op == LNTUNE_BENCH_COPY)
        return memcmp((const char *)p->x + at * es, (const char *)p->y + at * es, (size_t)H * es)
                   ? INFINITY
                   : 0.0;
    for (int64_t i = 0; i < H; ++i) xf[i] = (float)lntune_ref_load(p->type, p->x, (int64_t)at + i);
    double mean, rstd, worst = 0.0;
    lntune_reference_row(op == LNTUNE_BENCH_LAYERNORM ? LNTUNE_OP_LAYERNORM : LNTUNE_OP_RMSNORM, xf,
                         H, p->eps, z, &mean, &rstd);
    for (int64_t i = 0; i < H; ++i) {
        const double g = lntune_ref_load(p->type, p->gamma, i);
        const double b = op == LNTUNE_BENCH_LAYERNORM ? lntune_ref_load(p->type, p->beta, i) : 0.0;
        const double ref = z[i] * g + b, got = lntune_ref_load(p->type, p->y, (int64_t)at + i);
        const double unit = (fabs(mean) * rstd + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
        double e = 0.0;
        if (!lntune_verify_element(p->type, ref, got, unit, &e) &&
            !(isfinite(ref) && isfinite(got)))
            e = INFINITY;
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* The largest error over the checked rows (all of them, or evenly spaced ones and the last). */
static double max_error(int op, const lntune_bench_problem *p, float *xf, double *z) {
    const int64_t per = CHECK_ELEMENTS / p->H > 0 ? CHECK_ELEMENTS / p->H : 1;
    const int64_t step = p->rows <= per ? 1 : (p->rows + per - 1) / per;
    double worst = row_error(op, p, p->rows - 1, xf, z);
    for (int64_t r = 0; r < p->rows; r += step) {
        const double e = row_error(op, p, r, xf, z);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

typedef struct {
    const lntune_bench_peer *peer;
    void *state;
    lntune_bench_record rec;
    double batch;           /* calls per timing batch */
    double fastest_ns;      /* its fastest single call, for lntune_settle */
    double *samples;        /* per-call ns, one per repetition */
    double other_s, wall_s; /* other processes' CPU seconds and wall seconds while it ran */
    int live;
} candidate;

static const char *op_name(int op) {
    return op == LNTUNE_BENCH_LAYERNORM ? "layernorm"
           : op == LNTUNE_BENCH_RMSNORM ? "rmsnorm"
                                        : "copy";
}

/*
 * Runs c for at least rep_ns; returns ns per call, or -1 if a call failed. First a short pause:
 * a thread pool's idle workers spin for a while after its last call (lntune's for 20000 pauses,
 * libgomp's under oneDNN by default), and on a small machine they take the cores from the next
 * candidate (with OMP_WAIT_POLICY=active, lntune at 4096x768 on 2 threads fell from 38-40 GB/s
 * to 10-13). A 20 ms pause lowered every candidate, the copies too (idle cores clock down); 2 ms
 * read highest for all in the runs of 2026-11-30.
 * Then untimed calls until the caches settle (lntune_settle, as the tuner does): the previous
 * candidate's non-temporal writes to the shared y slowed the next plain-store candidate's first
 * 3-5 calls up to 2x, which at 64 MiB shapes took 7-13% off its repetition and measured what
 * the other candidate left, not a loop of this one (issue 36).
 */
static int run_peer(void *ud) {
    candidate *c = ud;
    return c->peer->run(c->state);
}

static double repetition(candidate *c, double rep_ns) {
    const struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
    if (lntune_settle(run_peer, c, &c->fastest_ns) != 0) return -1.0;
    const double t0 = lntune_now_ns();
    double t = t0, calls = 0;
    do {
        for (double k = 0; k < c->batch; ++k)
            if (c->peer->run(c->state) != 0) return -1.0;
        calls += c->batch;
        t = lntune_now_ns();
    } while (t - t0 < rep_ns);
    return (t - t0) / calls;
}

/* Restricts the process to n of its allowed CPUs, so that every implementation, including those
 * that size their thread pools from the machine, runs on n cores. */
static int pin_to(int n, char *note, size_t notelen) {
    cpu_set_t allowed, use;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) <= n) return 0;
    CPU_ZERO(&use);
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < n; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) CPU_SET(cpu, &use), ++k;
    if (sched_setaffinity(0, sizeof use, &use) != 0) {
        snprintf(note, notelen, "could not pin to %d cores", n);
        return -1;
    }
    return 1;
}

static void progress(const lntune_bench_config *cfg, const char *what, const lntune_bench_shape *s,
                     size_t i, double t0) {
    if (!cfg->progress) return;
    lntune_bench_progress p = {what, s->rows, s->H, i, cfg->nshapes, (lntune_now_ns() - t0) * 1e-9};
    cfg->progress(cfg->progress_ud, &p);
}

/* Fills v[0..n) with normal values rounded to type, and returns them widened back in wide: every
 * peer gets the same values. */
static void fill_typed(void *v, float *wide, int64_t n, int type, double mean, double sd,
                       uint64_t seed) {
    fill_normal(wide, n, mean, sd, seed);
    for (int64_t i = 0; i < n; ++i) {
        lntune_ref_store(type, v, i, wide[i]);
        wide[i] = (float)lntune_ref_load(type, v, i);
    }
}

static int bench_shape(const lntune_bench_config *cfg, const lntune_bench_shape *shape, int threads,
                       const char *family_note[NFAMILIES], lntune_bench_records *out) {
    const int reps = cfg->reps > 7 ? cfg->reps : 7;
    const double rep_ns = (cfg->rep_ms > 50 ? cfg->rep_ms : 50) * 1e6;
    const int64_t rows = shape->rows, H = shape->H, n = rows * H;
    const int type = cfg->type;
    const size_t es = lntune_type_size(type);
    int rc = LNTUNE_OK;
    void *x = NULL, *y = NULL, *gamma = NULL, *beta = NULL;
    float *gamma_f32 = malloc((size_t)H * sizeof(float)),
          *beta_f32 = malloc((size_t)H * sizeof(float));
    float *xf = malloc((size_t)H * sizeof(float));
    double *z = malloc((size_t)H * sizeof(double));
    candidate cand[32];
    size_t ncand = 0;
    /* x is allocated as fp32 so that it can be drawn as fp32 and narrowed where it lies. */
    if (posix_memalign(&x, 64, (size_t)n * sizeof(float)) ||
        posix_memalign(&y, 64, (size_t)n * es) || posix_memalign(&gamma, 64, (size_t)H * es) ||
        posix_memalign(&beta, 64, (size_t)H * es) || !z || !xf || !gamma_f32 || !beta_f32) {
        rc = LNTUNE_ENOMEM;
        goto done;
    }
    fill_normal(x, n, 1.0, 1.0, 0x9E3779B97F4A7C15ULL ^ (uint64_t)(rows * 131 + H));
    lntune_narrow_in_place(x, (size_t)n, type);
    fill_typed(gamma, gamma_f32, H, type, 1.0, 0.1, 7);
    fill_typed(beta, beta_f32, H, type, 0.0, 0.1, 11);
    memset(y, 0, (size_t)n * es);
    const lntune_bench_problem prob = {rows, H, 1e-5f,     type,     x,      gamma,
                                       beta, y, gamma_f32, beta_f32, threads};

    for (size_t f = 0; f < NFAMILIES; ++f)
        for (size_t i = 0; i < families[f]->npeers && ncand < 32; ++i) {
            candidate *c = &cand[ncand];
            memset(c, 0, sizeof *c);
            c->peer = &families[f]->peers[i];
            lntune_bench_record *r = &c->rec;
            snprintf(r->impl, sizeof r->impl, "%s", c->peer->impl);
            snprintf(r->op, sizeof r->op, "%s", op_name(c->peer->op));
            snprintf(r->dtype, sizeof r->dtype, "%s", lntune_type_name(type));
            r->rows = rows, r->H = H, r->threads = threads;
            r->us = r->gbps = r->max_error = -1.0;
            if (family_note[f]) {
                snprintf(r->note, sizeof r->note, "%s", family_note[f]);
            } else if (c->peer->open(&prob, &c->state, r->note, sizeof r->note) == LNTUNE_OK) {
                c->live = 1;
                c->samples = calloc((size_t)reps, sizeof(double));
                if (!c->samples) c->live = 0, rc = LNTUNE_ENOMEM;
            }
            ncand++;
        }

    /* Check each output against the reference (y poisoned with NaN first), then calibrate. */
    for (size_t i = 0; i < ncand; ++i) {
        candidate *c = &cand[i];
        if (!c->live) continue;
        memset(y, 0xff, (size_t)n * es); /* NaN in every type */
        if (c->peer->run(c->state) != 0) {
            snprintf(c->rec.note, sizeof c->rec.note, "the call failed");
            c->live = 0;
            continue;
        }
        c->rec.max_error = max_error(c->peer->op, &prob, xf, z);
        c->rec.flagged = !(c->rec.max_error <= LNTUNE_BENCH_TOLERANCE);
        double t0 = lntune_now_ns(), calls = 0;
        do {
            c->peer->run(c->state);
            calls++;
        } while (lntune_now_ns() - t0 < rep_ns / 10);
        const double per_call = (lntune_now_ns() - t0) / calls;
        c->batch = ceil(rep_ns / 8 / per_call);
        c->fastest_ns = per_call;
    }

    /*
     * Each repetition visits the candidates in a fresh random order, as the tuner's rounds do
     * (gen/common/timing.c). In a fixed cyclic order each candidate always followed the same one,
     * and the first (lntune tuned) always followed the NT copy: with no database, so that tuned
     * and built-in ran the same kernel, the first read 0.65-0.94x of the second at 2 threads
     * (LayerNorm 2048x4096, 1024x8192, 256x16384), whatever the warm-up calls (lntune_settle).
     */
    size_t order[32];
    for (size_t k = 0; k < ncand; ++k) order[k] = k;
    uint64_t rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(rows * 131 + H); /* the same run alike */
    for (int rep = 0; rep < reps; ++rep) {
        for (size_t k = ncand; k > 1; --k) { /* Fisher-Yates */
            const size_t j = (size_t)(test_uniform(&rng) * (double)k), tmp = order[k - 1];
            order[k - 1] = order[j];
            order[j] = tmp;
        }
        for (size_t k = 0; k < ncand; ++k) {
            candidate *c = &cand[order[k]];
            if (!c->live) continue;
            lntune_busy_sample a, b;
            lntune_busy_sample_now(&a);
            double t = repetition(c, rep_ns);
            lntune_busy_sample_now(&b);
            if (t < 0) {
                snprintf(c->rec.note, sizeof c->rec.note, "a call failed while timing");
                c->live = 0;
                continue;
            }
            c->samples[c->rec.reps++] = t;
            c->other_s += lntune_busy_other_cores(&a, &b) * (b.wall_s - a.wall_s);
            c->wall_s += b.wall_s - a.wall_s;
        }
    }

    for (size_t i = 0; i < ncand && rc == LNTUNE_OK; ++i) {
        candidate *c = &cand[i];
        lntune_bench_record *r = &c->rec;
        if (c->live && r->reps > 0) {
            double med, lo, hi;
            lntune_sample_stats(c->samples, (size_t)r->reps, &med, &lo, &hi);
            r->us = med * 1e-3;
            r->gbps = 2.0 * (double)n * (double)es / med; /* bytes per ns = GB/s */
            r->busy = c->wall_s > 0 ? c->other_s / c->wall_s : 0.0;
        }
        rc = lntune_bench_records_add(out, r);
    }
done:
    for (size_t i = 0; i < ncand; ++i) {
        if (cand[i].state) cand[i].peer->close(cand[i].state);
        free(cand[i].samples);
    }
    free(x), free(y), free(gamma), free(beta), free(gamma_f32), free(beta_f32), free(xf), free(z);
    return rc;
}

int lntune_bench_run(const lntune_bench_config *cfg, lntune_bench_records *out, char *err,
                     size_t errlen) {
    const double t0 = lntune_now_ns();
    if (cfg->type < 0 || cfg->type >= LNTUNE_TYPE_COUNT) {
        snprintf(err, errlen, "unknown element type %d", cfg->type);
        return LNTUNE_EINVAL;
    }
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cfg->threads > 0 ? cfg->threads : cores > 0 ? cores : 1;
    char pin_note[64] = "";
    pin_to(threads, pin_note, sizeof pin_note);
    omp_set_num_threads(threads); /* oneDNN sizes its parallel regions from this */

    progress(cfg, "torch", &cfg->shapes[0], 0, t0);
    int rc = lntune_bench_torch(cfg, cfg->shapes, cfg->nshapes, threads, out);
    if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "running the PyTorch script: %s", lntune_errstr(rc));
        return rc;
    }
    char notes[NFAMILIES][120];
    const char *family_note[NFAMILIES];
    for (size_t f = 0; f < NFAMILIES; ++f) {
        family_note[f] = NULL;
        if (families[f]->init && families[f]->init(cfg, notes[f], sizeof notes[f]) != LNTUNE_OK)
            family_note[f] = notes[f];
    }
    for (size_t i = 0; i < cfg->nshapes && rc == LNTUNE_OK; ++i) {
        progress(cfg, "time", &cfg->shapes[i], i, t0);
        rc = bench_shape(cfg, &cfg->shapes[i], threads, family_note, out);
    }
    for (size_t f = 0; f < NFAMILIES; ++f)
        if (families[f]->fini) families[f]->fini();
    if (rc != LNTUNE_OK) snprintf(err, errlen, "%s", lntune_errstr(rc));
    if (pin_note[0] && rc == LNTUNE_OK) snprintf(err, errlen, "warning: %s", pin_note);
    return rc;
}
