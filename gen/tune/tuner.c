/*
 * tuner.c - the planner: one tuning run over every op x shape, the same for the CPU and a CUDA
 * device (target.h says what a target does). For each op x shape: reuse what the database holds
 * for this template and toolchain, search the variant space at the configured rigor (search.c)
 * evaluating candidates as check (emit, compile, verify) then time, re-time the leaders with the
 * copy of the same bytes in one long interleaved run, re-time the finalists the same way, choose
 * by score with the simpler variant winning ties, and store everything.
 *
 * Every measurement is written as soon as it is taken, so an interrupted run loses nothing, and
 * a rerun reuses each stored measurement of the same template and toolchain instead of compiling.
 */
#define _GNU_SOURCE
#include "tuner.h"

#include "decide.h"
#include "fusion.h"
#include "hardware.h"
#include "lntune.h"
#include "load.h"
#include "search.h"
#include "target.h"
#include "timing.h"
#include "tuning_db.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_TOP = 16, FINALISTS = 4, MAX_FINALISTS = 8, FINAL_RUNS = 4, FAULTS_IN_A_ROW = 3 };
/* Variants of another machine a seeded search starts from (lntune --seed-from). */
enum { MAX_SEEDS = 4 };
static const double NOISE = 0.01; /* within 1%, the simpler variant wins */
/*
 * A winner must beat the built-in by this fraction in the final run, or the built-in's variant
 * is stored: the kernel an untuned call runs, so a tune never costs a user speed. Two runs of
 * one final set rank variants within a few percent of each other in either order (`lntune time`
 * prints the spread), so a lead under 2% is not shown; at stop 45 four LayerNorm winners at 2
 * threads led the built-in by 1-3% here and did not lead it in bench/.
 */
static const double BUILTIN_MARGIN = 0.02;
static const double FINALIST_WINDOW = 1.15; /* see lntune_tune_finalists */

typedef struct {
    char *variant;
    lntune_measurement m;
    char status[8], message[512];
} stored;

struct lntune_plan {
    const lntune_tune_config *cfg;
    const lntune_target *t;
    void *state; /* the target's */
    lntune_db *db;
    lntune_db *seed_db; /* cfg->seed_db's, or NULL */
    const char *op;     /* the op text */
    char op_key[32];    /* the database's op text, with the fusion (fusion.h) */
    char dtype[24];     /* the types' database text */
    lntune_shape shape;
    lntune_db_key key;
    char code_hash[64];
    lntune_tune_result *res;
    stored *db_rows; /* measurements from earlier runs */
    size_t ndb_rows;
    char winner_key[64]; /* the stored winner's artifact key ("" if it has none) */
    int winner_fixed_h;  /* the stored winner is fixed-H (store_twin) */
    int twin_tried;      /* its twin was tried: stored, or declined */
    char twin_key[64];   /* the stored twin's artifact key ("" if it has none) */
    const char *const *variants;
    size_t nvariants, naive, builtin;
    lntune_space *space;
    lntune_outcome *checked; /* per variant: its check's outcome, once checked */
    unsigned char *was_checked;
    unsigned char *was_timed; /* counted in res->timed */
    double bytes;
    double start_ns;
    size_t done, estimate;
    double waited_s; /* spent waiting for quiet (cfg->max_wait_s) */
    int *rc;         /* the run's failure: it stops (with err) */
    char *err;
    size_t errlen;
};

const char *lntune_plan_op(const lntune_plan *p) {
    return p->op;
}
const char *lntune_plan_op_key(const lntune_plan *p) {
    return p->op_key;
}
const lntune_shape *lntune_plan_shape(const lntune_plan *p) {
    return &p->shape;
}
const lntune_tune_config *lntune_plan_config(const lntune_plan *p) {
    return p->cfg;
}
lntune_tune_result *lntune_plan_result(lntune_plan *p) {
    return p->res;
}

int lntune_plan_stopped(const lntune_plan *p) {
    return (p->cfg->stop && *p->cfg->stop) || *p->rc != LNTUNE_OK;
}

void lntune_plan_fail(lntune_plan *p, int rc, const char *fmt, ...) {
    if (*p->rc != LNTUNE_OK) return;
    *p->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
}

static void report(const lntune_tune_config *cfg, const char *op, const lntune_shape *shape,
                   const char *stage, const char *detail, size_t done, size_t estimate,
                   double start_ns) {
    if (!cfg->progress) return;
    lntune_tune_progress p = {.op = op,
                              .rows = shape->rows,
                              .H = shape->H,
                              .stage = stage,
                              .done = done,
                              .total = estimate > done ? estimate : done,
                              .elapsed_s = (lntune_now_ns() - start_ns) * 1e-9,
                              .detail = detail};
    cfg->progress(cfg->progress_ud, &p);
}

void lntune_tune_report(const lntune_tune_config *cfg, const char *op, const lntune_shape *shape,
                        const char *stage, size_t done, size_t estimate, double start_ns) {
    report(cfg, op, shape, stage, NULL, done, estimate, start_ns);
}

void lntune_plan_progress(lntune_plan *p, const char *stage) {
    lntune_tune_report(p->cfg, p->op_key, &p->shape, stage, p->done, p->estimate, p->start_ns);
}

void lntune_tune_result_from_best(lntune_tune_result *r, const lntune_best *b) {
    snprintf(r->variant, sizeof r->variant, "%s", b->variant);
    r->median_ns = b->median_ns;
    r->gbps = b->gbps;
    r->copy_gbps = b->copy_gbps;
    r->naive_ns = b->naive_ns;
    r->max_error = b->max_error;
    r->ratio_lo = b->ratio_lo > 0 ? b->ratio_lo : 0.0;
    r->ratio_hi = b->ratio_hi > 0 ? b->ratio_hi : 0.0;
    snprintf(r->under_load, sizeof r->under_load, "%s", b->under_load ? b->under_load : "");
    r->reach_lo = b->reach_lo;
    r->reach_hi = b->reach_hi;
    r->from_db = 1;
}

static int collect_stored(void *ud, const lntune_measurement *m) {
    lntune_plan *p = ud;
    stored *grown = realloc(p->db_rows, (p->ndb_rows + 1) * sizeof *grown);
    if (!grown) return 1;
    p->db_rows = grown;
    stored *s = &grown[p->ndb_rows];
    if (!(s->variant = strdup(m->variant))) return 1;
    s->m = *m;
    snprintf(s->status, sizeof s->status, "%s", m->status);
    snprintf(s->message, sizeof s->message, "%s", m->message ? m->message : "");
    s->m.variant = s->variant;
    s->m.status = s->status;
    s->m.message = s->message;
    s->m.artifact_key = NULL;
    s->m.template_hash = NULL;
    p->ndb_rows++;
    return 0;
}

static const stored *find_stored(const lntune_plan *p, const char *variant) {
    for (size_t i = 0; i < p->ndb_rows; ++i)
        if (strcmp(p->db_rows[i].variant, variant) == 0) return &p->db_rows[i];
    return NULL;
}

/* Writes variant v's measurement: o's figures when it is OK and timed. */
static void record(lntune_plan *p, size_t v, const lntune_outcome *o, int timed) {
    static const char *const status[] = {LNTUNE_STATUS_OK, LNTUNE_STATUS_WRONG,
                                         LNTUNE_STATUS_FAILED};
    if (o->state == LNTUNE_OUTCOME_LOST || *p->rc == LNTUNE_EDB) return;
    lntune_measurement m = {0};
    m.variant = p->variants[v];
    m.template_hash = p->code_hash;
    m.status = status[o->state];
    m.message = o->message[0] ? o->message : NULL;
    m.artifact_key = o->artifact_key[0] ? o->artifact_key : NULL;
    m.compile_ms = o->compile_ms;
    m.max_error = o->max_error;
    m.median_ns = m.min_ns = m.max_ns = m.gbps = NAN;
    if (timed && o->state == LNTUNE_OUTCOME_OK) {
        m.median_ns = o->t.median_ns;
        m.min_ns = o->t.min_ns;
        m.max_ns = o->t.max_ns;
        m.gbps = p->bytes / o->t.median_ns;
    }
    m.copy_gbps = p->res->copy_gbps;
    if (lntune_db_put_measurement(p->db, &p->key, &m) == LNTUNE_OK)
        p->res->saved++;
    else
        lntune_plan_fail(p, LNTUNE_EDB, "cannot write the tuning database, stopped: %s",
                         lntune_db_errmsg(p->db));
}

/* Counts and records a variant that did not check or time out correct. */
static void reject(lntune_plan *p, size_t v, const lntune_outcome *o) {
    if (o->state == LNTUNE_OUTCOME_LOST) return;
    if (o->state == LNTUNE_OUTCOME_WRONG)
        p->res->wrong++;
    else
        p->res->failed++;
    p->res->crashed += o->crashed;
    record(p, v, o, 0);
}

/* Checks those of v[0..n) never checked in this run; compacts v to the correct ones, returns
 * how many. */
static size_t check_all(lntune_plan *p, size_t *v, size_t n) {
    size_t *todo = malloc((n ? n : 1) * sizeof *todo), ntodo = 0;
    lntune_outcome *outs = calloc(n ? n : 1, sizeof *outs);
    if (!todo || !outs) {
        lntune_plan_fail(p, LNTUNE_ENOMEM, "out of memory");
        n = 0;
    }
    for (size_t k = 0; k < n; ++k)
        if (!p->was_checked[v[k]]) todo[ntodo++] = v[k];
    if (ntodo > 0) {
        p->t->check(p->state, p, todo, ntodo, outs);
        for (size_t k = 0; k < ntodo; ++k) {
            if (outs[k].state == LNTUNE_OUTCOME_LOST) continue; /* a later run checks it */
            p->checked[todo[k]] = outs[k];
            p->was_checked[todo[k]] = 1;
            if (outs[k].state != LNTUNE_OUTCOME_OK) reject(p, todo[k], &outs[k]);
        }
    }
    size_t m = 0;
    for (size_t k = 0; k < n; ++k)
        if (p->was_checked[v[k]] && p->checked[v[k]].state == LNTUNE_OUTCOME_OK) v[m++] = v[k];
    free(todo);
    free(outs);
    return m;
}

/*
 * Records the outcomes out[0..n) of variants v[0..n) timed in mode: a variant that failed while
 * timed is recorded failed and never timed again; the others with their new figures (a failure
 * in a batch counts as one).
 */
static void record_timed(lntune_plan *p, const size_t *v, size_t n, lntune_time_mode mode,
                         lntune_outcome *out) {
    for (size_t k = 0; k < n; ++k) {
        if (out[k].state == LNTUNE_OUTCOME_LOST) continue;
        p->res->timed += !p->was_timed[v[k]];
        p->was_timed[v[k]] = 1;
        if (out[k].state != LNTUNE_OUTCOME_OK) {
            p->checked[v[k]] = out[k]; /* never a leader again */
            if (mode == LNTUNE_TIME_BATCH)
                reject(p, v[k], &out[k]);
            else
                record(p, v[k], &out[k], 0);
            continue;
        }
        record(p, v[k], &out[k], 1);
    }
}

/* Times the correct variants v[0..n) in mode, unrecorded; out[k] is v[k]'s outcome. Returns the
 * copy's median of a FINAL run. */
static double time_only(lntune_plan *p, const size_t *v, size_t n, lntune_time_mode mode,
                        lntune_outcome *out) {
    double copy_ns = NAN;
    for (size_t k = 0; k < n; ++k) out[k] = p->checked[v[k]];
    if (n > 0) p->t->time(p->state, p, v, n, mode, out, &copy_ns);
    return copy_ns;
}

/* time_only, then record_timed. */
static double time_and_record(lntune_plan *p, const size_t *v, size_t n, lntune_time_mode mode,
                              lntune_outcome *out) {
    const double copy_ns = time_only(p, v, n, mode, out);
    record_timed(p, v, n, mode, out);
    return copy_ns;
}

/*
 * The fastest of out[0..n) against the copy (copy_ns / its median), 0 when none timed. A kernel
 * cannot move its bytes faster than the best copy of them: above LNTUNE_MAX_COPY_RATIO the copy
 * and the kernel were measured in different states (caches, a phase of the host), and the figure
 * is a measurement fault.
 */
static double best_ratio(const lntune_outcome *out, size_t n, double copy_ns) {
    double best = 0.0;
    for (size_t k = 0; k < n; ++k)
        if (out[k].state == LNTUNE_OUTCOME_OK && copy_ns / out[k].t.median_ns > best)
            best = copy_ns / out[k].t.median_ns;
    return best; /* a NaN ratio (no copy figure) never compares greater */
}

/* The search's evaluate callback: reuse a stored measurement, or check and time. */
static void evaluate(void *ud, const size_t *idx, size_t n, double *times) {
    lntune_plan *p = ud;
    size_t *todo = malloc(n * sizeof *todo), *slot = malloc(n * sizeof *slot);
    lntune_outcome *outs = calloc(n, sizeof *outs);
    size_t ntodo = 0;
    for (size_t k = 0; k < n; ++k) times[k] = INFINITY;
    if (!todo || !slot || !outs || lntune_plan_stopped(p)) goto done;
    for (size_t k = 0; k < n; ++k) {
        const stored *s = p->cfg->retune ? NULL : find_stored(p, p->variants[idx[k]]);
        if (!s) {
            slot[ntodo] = k;
            todo[ntodo++] = idx[k];
            continue;
        }
        p->res->reused++;
        if (strcmp(s->status, LNTUNE_STATUS_OK) == 0) times[k] = s->m.median_ns;
    }
    p->done += n - ntodo;
    if (ntodo == 0) goto done;
    size_t *ok = malloc(ntodo * sizeof *ok);
    if (!ok) goto done;
    memcpy(ok, todo, ntodo * sizeof *ok);
    const size_t nok = check_all(p, ok, ntodo);
    if (!lntune_plan_stopped(p)) { /* a signal during the compile: never measured */
        lntune_plan_progress(p, "time");
        time_and_record(p, ok, nok, LNTUNE_TIME_BATCH, outs);
        for (size_t t = 0, q = 0; t < ntodo && q < nok; ++t)
            if (todo[t] == ok[q]) {
                if (outs[q].state == LNTUNE_OUTCOME_OK) times[slot[t]] = outs[q].t.median_ns;
                ++q;
            }
        p->done += ntodo;
    }
    free(ok);
done:
    free(todo);
    free(slot);
    free(outs);
}

static int is_finalist(const size_t *out, size_t m, size_t k) {
    size_t q = 0;
    while (q < m && out[q] != k) ++q;
    return q < m;
}

/* Whether leader k holds a value of some knob that none of the m finalists holds. */
static int brings_a_value(const int *values, size_t nknobs, const size_t *out, size_t m, size_t k) {
    for (size_t j = 0; j < nknobs; ++j) {
        size_t q = 0;
        while (q < m && values[out[q] * nknobs + j] != values[k * nknobs + j]) ++q;
        if (q == m) return 1;
    }
    return 0;
}

size_t lntune_tune_finalists(const lntune_timed *t, size_t n, const int *values, size_t nknobs,
                             size_t core, size_t *out, size_t max) {
    if (core > max) core = max;
    size_t m = 0;
    for (int by_median = 0; by_median < 2; ++by_median) {
        const size_t limit = by_median ? core : (core + 1) / 2;
        while (m < limit) {
            size_t best = n;
            for (size_t k = 0; k < n; ++k) {
                if (t[k].failed || is_finalist(out, m, k)) continue;
                const double f = by_median ? t[k].median_ns : t[k].score_ns;
                if (best == n || f < (by_median ? t[best].median_ns : t[best].score_ns)) best = k;
            }
            if (best == n) return m;
            out[m++] = best;
        }
    }
    if (!values || m == 0) return m;
    double best_median = INFINITY;
    for (size_t k = 0; k < n; ++k)
        if (!t[k].failed && t[k].median_ns < best_median) best_median = t[k].median_ns;
    while (m < max) {
        size_t best = n;
        for (size_t k = 0; k < n; ++k) {
            if (t[k].failed || !(t[k].median_ns <= best_median * FINALIST_WINDOW) ||
                is_finalist(out, m, k) || !brings_a_value(values, nknobs, out, m, k))
                continue;
            if (best == n || t[k].median_ns < t[best].median_ns) best = k;
        }
        if (best == n) break;
        out[m++] = best;
    }
    return m;
}

size_t lntune_tune_choose(const lntune_timed *t, size_t n, const int *complexity,
                          const char *const *variant, double noise, size_t builtin, double margin) {
    size_t best = 0;
    for (size_t k = 1; k < n; ++k)
        if (t[best].failed || (!t[k].failed && t[k].score_ns < t[best].score_ns)) best = k;
    size_t pick = best;
    for (size_t k = 0; k < n; ++k) {
        if (t[k].failed || t[k].score_ns > t[best].score_ns * (1.0 + noise)) continue;
        if (complexity[k] < complexity[pick] ||
            (complexity[k] == complexity[pick] && strcmp(variant[k], variant[pick]) < 0))
            pick = k;
    }
    if (builtin < n && !t[builtin].failed &&
        !(t[pick].score_ns < t[builtin].score_ns * (1.0 - margin)))
        pick = builtin;
    return pick;
}

/* The figures of a re-time: failed where the outcome is not OK. */
static void as_timed(const lntune_outcome *o, size_t n, lntune_timed *t) {
    for (size_t k = 0; k < n; ++k) {
        t[k] = o[k].t;
        t[k].failed = o[k].state != LNTUNE_OUTCOME_OK;
    }
}

/* The variant's thread count ("threads=N"), 0 when it names none. */
static int threads_of(const char *variant) {
    const char *t = strstr(variant, "threads=");
    return t && (t == variant || t[-1] == ',') ? atoi(t + 8) : 0;
}

static int in_list(const size_t *v, size_t n, size_t x) {
    for (size_t k = 0; k < n; ++k)
        if (v[k] == x) return 1;
    return 0;
}

/*
 * Finalists fin[0..nfin) grown, up to max, by the families the template declares (stores,
 * threads, row grouping, prefetch): for each value of such a knob no finalist holds, the leader
 * holding it with the best median, else the first finalist's variant with that value. A phase
 * of the host during the search slows a family as a whole (a neighbour on one core halves the
 * 2-thread kernels), and with no finalist of it the final could not see it win in a quieter run.
 */
static size_t add_families(lntune_plan *p, const size_t *top, const lntune_timed *group,
                           size_t nlead, size_t *fin, size_t nfin, size_t max) {
    char *csv = NULL;
    if (!p->t->families || nfin == 0 || p->t->families(p->state, p, &csv) != LNTUNE_OK || !csv)
        return nfin;
    for (char *name = strtok(csv, ","); name && nfin < max; name = strtok(NULL, ",")) {
        const int j = lntune_space_knob(p->space, name);
        for (int value = 0; j >= 0 && value < 16 && nfin < max; ++value) {
            int held = 0;
            for (size_t k = 0; k < nfin && !held; ++k)
                held = lntune_space_value(p->space, fin[k], j) == value;
            if (held) continue;
            size_t pick = p->nvariants;
            for (size_t k = 0; k < nlead; ++k)
                if (!group[k].failed && lntune_space_value(p->space, top[k], j) == value &&
                    (pick == p->nvariants || group[k].median_ns < group[pick].median_ns))
                    pick = k;
            size_t v =
                pick < p->nvariants ? top[pick] : lntune_space_with(p->space, fin[0], j, value);
            if (v < p->nvariants && !in_list(fin, nfin, v) && check_all(p, &v, 1)) fin[nfin++] = v;
        }
    }
    free(csv);
    return nfin;
}

/* Waits, while cfg->max_wait_s allows, for a second in which no other process holds a core
 * (load.h); says why on the progress line. 1: it came, measure again. */
static int wait_for_quiet(lntune_plan *p, const char *why) {
    char detail[160];
    snprintf(detail, sizeof detail, "%s; waiting up to %.0f s", why,
             p->cfg->max_wait_s - p->waited_s);
    while (p->waited_s + 1.0 <= p->cfg->max_wait_s && !lntune_plan_stopped(p)) {
        report(p->cfg, p->op_key, &p->shape, "wait", detail, p->done, p->estimate, p->start_ns);
        lntune_load load;
        lntune_load_sample(1.0, &load);
        p->waited_s += 1.0;
        if (!lntune_load_busy(&load)) return 1;
        lntune_load_describe(&load, detail, sizeof detail);
    }
    return 0;
}

/* One final run of fin[0..nfin) with the copy, taken again after a wait for quiet while other
 * processes held a core during it (and waiting is allowed); *busy and note say if they still
 * did. The copy's median. */
static double final_run(lntune_plan *p, const size_t *fin, size_t nfin, lntune_outcome *outs,
                        unsigned char *busy, char *note, size_t notelen) {
    for (;;) {
        lntune_load_mark a, b;
        lntune_load load;
        lntune_load_mark_now(&a);
        const double copy_ns = time_only(p, fin, nfin, LNTUNE_TIME_FINAL, outs);
        lntune_load_mark_now(&b);
        lntune_load_between(&a, &b, &load);
        *busy = (unsigned char)lntune_load_busy(&load);
        if (*busy) lntune_load_describe(&load, note, notelen);
        if (!*busy || lntune_plan_stopped(p) || !wait_for_quiet(p, note)) return copy_ns;
    }
}

enum { MAX_FINAL = MAX_FINALISTS + 6 }; /* the core, the families, the built-in */
/* What one timed group holds: the leaders (MAX_TOP), or the final, which is no larger. */
enum { MAX_GROUP = MAX_TOP + 1 };
_Static_assert((int)MAX_FINAL <= (int)MAX_TOP, "a final must fit a timed group");

/*
 * The winner's figures from the kept final runs: its median over them, the copy's, and the
 * spread of its speed against the copy over every paired block (quartiles); what held the
 * machine, or how far the copy moved between runs, into under_load.
 */
static void final_figures(lntune_plan *p, const lntune_final_runs *f, size_t k,
                          const double *run_copy, const char *busy_note, lntune_outcome *w) {
    double med[LNTUNE_DECIDE_MAX_RUNS], copy[LNTUNE_DECIDE_MAX_RUNS];
    double speed[LNTUNE_DECIDE_MAX_RUNS * LNTUNE_TIMING_BLOCKS], blk[LNTUNE_TIMING_BLOCKS];
    size_t ns = 0, nbusy = 0;
    for (int r = 0; r < f->nruns; ++r) {
        const lntune_timed *t = &f->t[(size_t)r * f->n + k];
        med[r] = t->median_ns;
        copy[r] = run_copy[r];
        nbusy += f->busy[r];
        for (int i = 0; i < t->nblocks; ++i) blk[i] = t->blocks[i];
        const double mid = t->nblocks ? lntune_quantile(blk, (size_t)t->nblocks, 0.5) : 0.0;
        for (int i = 0; i < t->nblocks; ++i)
            if (t->blocks[i] > 0) speed[ns++] = run_copy[r] / t->median_ns * mid / t->blocks[i];
    }
    const double copy_ns = lntune_quantile(copy, (size_t)f->nruns, 0.5); /* sorts copy */
    const double lo = copy[0], hi = copy[f->nruns - 1];
    w->t.median_ns = lntune_quantile(med, (size_t)f->nruns, 0.5);
    p->res->copy_gbps = p->bytes / copy_ns;
    p->res->ratio_lo = ns ? lntune_quantile(speed, ns, 0.25) : 0.0;
    p->res->ratio_hi = ns ? lntune_quantile(speed, ns, 0.75) : 0.0;
    if (nbusy)
        snprintf(p->res->under_load, sizeof p->res->under_load, "%zu of %d final runs: %s", nbusy,
                 f->nruns, busy_note);
    else if (hi > lo * LNTUNE_MAX_COPY_DRIFT) { /* said, not marked: tiny shapes drift so */
        const size_t at = strlen(p->res->why);
        snprintf(p->res->why + at, sizeof p->res->why - at,
                 "%sthe copy's time moved %.0f%% between final runs", at ? "; " : "",
                 (hi / lo - 1.0) * 100.0);
    }
}

/*
 * Re-times the leaders and picks the finalists, times those in FINAL_RUNS runs and lets
 * decide.h choose; the winner's index in the space (or the space's size when none). Why this
 * way: the leaders with the copy in one long interleaved run, because many variants lie within a
 * few percent of each other and the short batches of the search rank them only roughly. The
 * finalists are the best two by score and the best two by median (a phase in the first run once
 * gave all four best scores to rows=4 variants, 10% slower side by side than the overlap=1 one
 * with the best median), then leaders within FINALIST_WINDOW that hold a knob value no finalist
 * holds, then the template's families (add_families), then the built-in. Then several final runs,
 * each with the copy, waited for while other processes hold a core, and a choice by paired
 * blocks (decide.h): on the 2-core Zen 4 guest one burst chose winners 54% apart in three quiet
 * tunes of one shape (issue 56).
 */
static size_t retime_and_choose(lntune_plan *p, size_t *top, size_t ntop, lntune_outcome *w) {
    lntune_outcome outs[MAX_GROUP];
    lntune_timed group[MAX_GROUP];
    lntune_plan_progress(p, "retime");
    size_t nlead = check_all(p, top, ntop); /* measured by an earlier run: checked here first */
    time_and_record(p, top, nlead, LNTUNE_TIME_FINAL, outs);
    if (lntune_plan_stopped(p)) return p->nvariants;
    as_timed(outs, nlead, group);
    const size_t nknobs = (size_t)lntune_space_knobs(p->space);
    int *values = malloc(nlead * nknobs * sizeof *values + 1);
    for (size_t k = 0; values && k < nlead; ++k)
        for (size_t q = 0; q < nknobs; ++q)
            values[k * nknobs + q] = lntune_space_value(p->space, top[k], (int)q);
    size_t fin[MAX_FINAL + 1];
    size_t nfin =
        lntune_tune_finalists(group, nlead, values, nknobs, FINALISTS, fin, MAX_FINALISTS);
    free(values);
    if (nfin == 0) return p->nvariants;
    for (size_t k = 0; k < nfin; ++k) fin[k] = top[fin[k]];
    nfin = add_families(p, top, group, nlead, fin, nfin, MAX_FINAL - 1);
    /* The built-in, whatever the search made of it: the winner must beat it side by side. */
    size_t builtin = p->builtin, builtin_at = MAX_FINAL + 1; /* its place in fin, or none */
    for (size_t k = 0; k < nfin; ++k)
        if (fin[k] == builtin) builtin_at = k;
    if (builtin < p->nvariants && builtin_at > MAX_FINAL && check_all(p, &builtin, 1))
        builtin_at = nfin, fin[nfin++] = builtin;

    lntune_timed runs[LNTUNE_DECIDE_MAX_RUNS * (MAX_FINAL + 1)];
    unsigned char busy[LNTUNE_DECIDE_MAX_RUNS];
    double run_copy[LNTUNE_DECIDE_MAX_RUNS], fault = 0.0;
    const char *fault_variant = "";
    char busy_note[128] = "";
    int nruns = 0, want = FINAL_RUNS, faults = 0, tries = 0;
    lntune_plan_progress(p, "final");
more_runs:
    /* A fault is timed again; FAULTS_IN_A_ROW (or too many in all) fail the shape. */
    for (; nruns < want && faults < FAULTS_IN_A_ROW && tries < 3 * want; ++tries) {
        char note[128] = "";
        unsigned char b = 0;
        if (tries > 0 && p->cfg->final_gap_s > 0 && p->cfg->rigor != LNTUNE_RIGOR_QUICK) {
            const double s = p->cfg->final_gap_s;
            const struct timespec gap = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
            nanosleep(&gap, NULL);
        }
        const double copy_ns = final_run(p, fin, nfin, outs, &b, note, sizeof note);
        if (lntune_plan_stopped(p)) return p->nvariants;
        const double ratio = best_ratio(outs, nfin, copy_ns);
        if (ratio > LNTUNE_MAX_COPY_RATIO || isnan(copy_ns)) { /* a fault: timed again */
            for (size_t q = 0; q < nfin; ++q) /* the one that beat the copy, for the message */
                if (outs[q].state == LNTUNE_OUTCOME_OK && copy_ns / outs[q].t.median_ns == ratio &&
                    ratio > fault)
                    fault = ratio, fault_variant = p->variants[fin[q]];
            faults++;
            continue;
        }
        faults = 0;
        if (b) snprintf(busy_note, sizeof busy_note, "%s", note);
        busy[nruns] = b;
        run_copy[nruns] = copy_ns;
        as_timed(outs, nfin, runs + (size_t)nruns * nfin);
        nruns++;
    }
    if (nruns < want) {
        lntune_plan_fail(p, LNTUNE_ERROR,
                         "%s %lldx%lld: a finalist timed up to %.2fx faster than the copy of its "
                         "bytes, a measurement fault, too often to keep %d final runs (the host "
                         "is too busy?): nothing stored; run again (%s)",
                         p->op_key, (long long)p->shape.rows, (long long)p->shape.H, fault, want,
                         fault_variant);
        return p->nvariants;
    }
    int complexity[MAX_FINAL + 1], threads[MAX_FINAL + 1];
    const char *variant[MAX_FINAL + 1];
    for (size_t k = 0; k < nfin; ++k) {
        complexity[k] = lntune_space_complexity(p->space, fin[k]);
        variant[k] = p->variants[fin[k]];
        threads[k] = threads_of(variant[k]);
    }
    int unsettled = 0;
    const lntune_final_runs f = {runs, nfin, nruns, busy};
    const lntune_decide_in in = {complexity,     variant, threads,   builtin_at,
                                 BUILTIN_MARGIN, NOISE,   &unsettled};
    const size_t k = lntune_decide(&f, &in, p->res->why, sizeof p->res->why);
    /* A lead the runs so far cannot confirm: two more runs, up to LNTUNE_DECIDE_MAX_RUNS (a
     * quiet LayerNorm 4096x768 tune kept plain stores that ran 20% behind the others' winners
     * side by side; issue 56). */
    if (unsettled && want < LNTUNE_DECIDE_MAX_RUNS && p->cfg->rigor != LNTUNE_RIGOR_QUICK) {
        want = want + 2 < LNTUNE_DECIDE_MAX_RUNS ? want + 2 : LNTUNE_DECIDE_MAX_RUNS;
        goto more_runs;
    }
    record_timed(p, fin, nfin, LNTUNE_TIME_FINAL, outs); /* the last run's figures */
    if (nruns > FINAL_RUNS) {
        const size_t at = strlen(p->res->why);
        snprintf(p->res->why + at, sizeof p->res->why - at, " (over %d final runs)", nruns);
    }
    if (k >= nfin) return p->nvariants;
    *w = outs[k];
    final_figures(p, &f, k, run_copy, busy_note, w);
    return fin[k];
}

/* The naive kernel, for the result's speed-up: alone with the copy (it is as slow as several
 * finalists together), on the final run's copy scale; not kept when it times faster than the
 * copy (a fault: at a load average of 4-5 one was stored at 17x the copy). */
static void time_naive(lntune_plan *p) {
    size_t v = p->naive;
    if (v >= p->nvariants || p->res->copy_gbps <= 0 || check_all(p, &v, 1) == 0 ||
        lntune_plan_stopped(p))
        return;
    lntune_outcome o;
    time_only(p, &v, 1, LNTUNE_TIME_ALONE, &o);
    if (best_ratio(&o, 1, p->bytes / p->res->copy_gbps) > LNTUNE_MAX_COPY_RATIO) return;
    record_timed(p, &v, 1, LNTUNE_TIME_ALONE, &o);
    if (o.state == LNTUNE_OUTCOME_OK) p->res->naive_ns = o.t.median_ns;
}

/*
 * The winner's figures from a run of its own after the choice, where that run's figure is sane
 * and within 10% of the final runs' median. The final runs' figure is the fastest finalist's,
 * and so too low: at 1x4096 LayerNorm it stored 0.51 us where `lntune time` and bench/ measure
 * the same variant at 0.55-0.59 us. A fresh sample of the winner alone carries no such
 * selection; one far from the final runs' (a phase) is not kept.
 */
static void confirm_winner(lntune_plan *p, size_t v, lntune_outcome *w) {
    lntune_outcome o;
    time_only(p, &v, 1, LNTUNE_TIME_ALONE, &o);
    const double copy_ns = p->res->copy_gbps > 0.0 ? p->bytes / p->res->copy_gbps : NAN;
    if (o.state != LNTUNE_OUTCOME_OK || !(o.t.median_ns > 0.0) ||
        best_ratio(&o, 1, copy_ns) > LNTUNE_MAX_COPY_RATIO ||
        !(fabs(o.t.median_ns / w->t.median_ns - 1.0) <= 0.10))
        return; /* a measurement fault or a phase: the final runs' figure stands */
    w->t.median_ns = o.t.median_ns;
}

/* Stores variant v as the winner, with its artifact, at median_ns and max_error. */
static void store_winner(lntune_plan *p, size_t v, double median_ns, double max_error) {
    lntune_artifact art;
    lntune_kernel_traits traits;
    if (p->t->artifact(p->state, p, v, &art, &traits) != LNTUNE_OK) return;
    const lntune_best b = {.variant = p->variants[v],
                           .artifact_key = art.key,
                           .threads = traits.threads,
                           .tuned_rows = p->shape.rows,
                           .median_ns = median_ns,
                           .gbps = p->bytes / median_ns,
                           .copy_gbps = p->res->copy_gbps,
                           .max_error = max_error,
                           .naive_ns = p->res->naive_ns,
                           .any_h = traits.any_h,
                           .any_alignment = traits.any_alignment,
                           .ratio_lo = p->res->ratio_lo,
                           .ratio_hi = p->res->ratio_hi,
                           .under_load = p->res->under_load[0] ? p->res->under_load : NULL};
    if (lntune_db_put_artifact(p->db, &art) != LNTUNE_OK ||
        lntune_db_set_best(p->db, &p->key, &b) != LNTUNE_OK)
        lntune_plan_fail(p, LNTUNE_EDB, "cannot write the tuning database, stopped: %s",
                         lntune_db_errmsg(p->db));
}

static int from_best(void *ud, const lntune_best *b) {
    lntune_plan *p = ud;
    /* Only a winner measured by this template and toolchain at these rows: else tune again. */
    /* ... and measured quietly: a winner chosen under load is measured again */
    if (!find_stored(p, b->variant) || b->tuned_rows != p->shape.rows ||
        (b->under_load && !p->cfg->rebuild_only)) {
        p->res->stale = 1;
        return 0;
    }
    lntune_tune_result_from_best(p->res, b);
    snprintf(p->winner_key, sizeof p->winner_key, "%s", b->artifact_key ? b->artifact_key : "");
    p->winner_fixed_h = !b->any_h;
    p->twin_tried = b->twin_variant != NULL;
    snprintf(p->twin_key, sizeof p->twin_key, "%s",
             b->twin_artifact_key ? b->twin_artifact_key : "");
    return 0;
}

/* The index of variant in the space (open_space), nvariants when it is not there. */
static size_t variant_index(const lntune_plan *p, const char *variant) {
    size_t v = 0;
    while (v < p->nvariants && strcmp(p->variants[v], variant) != 0) ++v;
    return v;
}

/* The index of v's twin: its variant with h=fixed as h=runtime; nvariants when it has none. */
static size_t twin_of(const lntune_plan *p, size_t v) {
    static const char fixed[] = "h=fixed";
    const char *variant = p->variants[v], *at = variant;
    while ((at = strstr(at, fixed)) && at != variant && at[-1] != ',') at += sizeof fixed - 1;
    const char *after = at ? at + sizeof fixed - 1 : NULL;
    if (!at || (*after && *after != ',')) return p->nvariants;
    char want[1024];
    if ((size_t)snprintf(want, sizeof want, "%.*sh=runtime%s", (int)(at - variant), variant,
                         after) >= sizeof want)
        return p->nvariants;
    return variant_index(p, want);
}

/*
 * Stores winner v's run-time-H twin (schema.sql's version 5) where v is fixed-H: the same knobs
 * with h=runtime, checked (verified at H = 1 and 17 besides the tuned H: problem.c) and timed
 * side by side with v, the built-in and the copy. A fixed-H kernel serves its own H only, so a
 * shape never tuned fell to the generic built-in even next to a tuned H (issue 36: 4096x777
 * LayerNorm at 0.81x of its tuned speed, Xeon); the twin is this machine's tuned code for any H.
 * A twin no faster than the built-in at the tuned shape is declined, since it would serve other
 * H no better: recorded with no artifact, so that later runs do not try it again. Returns the
 * kernel that serves other H: v where it has no twin (it reads H at run time), else the twin
 * kept, else nvariants.
 */
static size_t store_twin(lntune_plan *p, size_t v) {
    size_t fin[3] = {v, twin_of(p, v), p->builtin}, n = 3;
    if (fin[1] == p->nvariants) return v; /* v itself reads H at run time */
    if (!p->t->twins || p->cfg->rebuild_only || lntune_plan_stopped(p)) return p->nvariants;
    if (fin[2] >= p->nvariants || fin[2] == v || fin[2] == fin[1]) n = 2;
    lntune_plan_progress(p, "twin");
    size_t ok[3] = {fin[0], fin[1], fin[2]};
    lntune_outcome outs[3];
    const int checked = check_all(p, ok, n) == n; /* else the twin failed its check (recorded) */
    if (checked) time_only(p, fin, n, LNTUNE_TIME_FINAL, outs);
    if (lntune_plan_stopped(p)) return p->nvariants;
    const int timed = checked && outs[1].state == LNTUNE_OUTCOME_OK;
    if (timed) record_timed(p, fin + 1, 1, LNTUNE_TIME_FINAL, outs + 1);
    const int faster = timed && (n == 2 || outs[2].state != LNTUNE_OUTCOME_OK ||
                                 outs[1].t.score_ns * (1.0 + BUILTIN_MARGIN) < outs[2].t.score_ns);
    lntune_artifact art;
    lntune_kernel_traits traits;
    const int kept = faster && p->t->artifact(p->state, p, fin[1], &art, &traits) == LNTUNE_OK &&
                     traits.any_h && lntune_db_put_artifact(p->db, &art) == LNTUNE_OK;
    if (lntune_db_set_twin(p->db, &p->key, p->variants[fin[1]], kept ? art.key : NULL,
                           timed ? outs[1].t.median_ns : NAN) != LNTUNE_OK) {
        lntune_plan_fail(p, LNTUNE_EDB, "cannot write the tuning database, stopped: %s",
                         lntune_db_errmsg(p->db));
        return p->nvariants;
    }
    return kept ? fin[1] : p->nvariants;
}

/* The H between a step held and the next lost: their geometric mean, rounded. */
static int64_t between(int64_t held, int64_t lost) {
    return (int64_t)llround(sqrt((double)held * (double)lost));
}

/*
 * The reach of run-time-H kernel k (the winner, or its twin: what liblntune's nearest-H walk
 * serves other H by): timed beside the built-in at H x4, x16, ... and H / 4, / 16, ..., each at
 * the tuned bytes (rows scaled), until it loses by more than BUILTIN_MARGIN; stored as the H
 * between the last step held and the first lost, 1 or LNTUNE_TUNE_MAX_H (the largest H tuned:
 * no limit) where none was lost. The rule
 * it replaces trusted any distance: an RMSNorm call at 32768x128 ran on the H=4096 winner at
 * 1230 us, where the built-in took 1005 us (Zen 4, 1 thread; issue 56).
 */
static void store_reach(lntune_plan *p, size_t k) {
    if (!p->t->time_at || k >= p->nvariants || p->builtin >= p->nvariants || k == p->builtin ||
        p->cfg->rebuild_only || lntune_plan_stopped(p))
        return;
    lntune_plan_progress(p, "reach");
    const size_t pair[2] = {k, p->builtin};
    const int64_t H = p->shape.H, bytes_rows = p->shape.rows * H;
    int64_t reach[2] = {1, LNTUNE_TUNE_MAX_H};
    for (int up = 0; up < 2; ++up) {
        int64_t held = H;
        for (;;) {
            const int64_t h = up ? held * 4 : held / 4;
            if (h < 1 || h > LNTUNE_TUNE_MAX_H || bytes_rows / h < 1) break; /* held to the end */
            double ratio;
            if (p->t->time_at(p->state, p, pair, bytes_rows / h, h, &ratio) != LNTUNE_OK ||
                lntune_plan_stopped(p))
                return; /* not measured: no reach stored */
            if (ratio > 1.0 + BUILTIN_MARGIN) {
                reach[up] = between(held, h);
                break;
            }
            held = h;
        }
    }
    if (lntune_db_set_reach(p->db, &p->key, reach[0], reach[1]) != LNTUNE_OK)
        lntune_plan_fail(p, LNTUNE_EDB, "cannot write the tuning database, stopped: %s",
                         lntune_db_errmsg(p->db));
    p->res->reach_lo = reach[0];
    p->res->reach_hi = reach[1];
}

/* Whether the stored winner's code is in the database, as lntune stored it. */
static int winner_has_code(lntune_plan *p) {
    return lntune_db_artifact_intact(p->db, p->winner_key);
}

/* The op x shape's variants, their index and check slots (once); 0 when there are none. */
static int open_space(lntune_plan *p) {
    if (p->space) return 1;
    if (p->t->variants(p->state, p, &p->variants, &p->nvariants, &p->naive, &p->builtin) !=
            LNTUNE_OK ||
        p->nvariants == 0)
        return 0;
    if (lntune_space_create((char *const *)p->variants, p->nvariants, &p->space) != LNTUNE_OK) {
        lntune_plan_fail(p, LNTUNE_ENOMEM, "cannot index the %zu %s variants", p->nvariants, p->op);
        return 0;
    }
    p->checked = calloc(p->nvariants, sizeof *p->checked);
    p->was_checked = calloc(p->nvariants, 1);
    p->was_timed = calloc(p->nvariants, 1);
    if (!p->checked || !p->was_checked || !p->was_timed) {
        lntune_plan_fail(p, LNTUNE_ENOMEM, "out of memory");
        return 0;
    }
    return 1;
}

/* The target's buffers, verifier and copy for the shape (once); 0 on failure. */
static int prepared(lntune_plan *p) {
    if (p->bytes > 0) return 1;
    lntune_plan_progress(p, "copy");
    return p->t->prepare(p->state, p, &p->bytes) == LNTUNE_OK && p->bytes > 0;
}

/*
 * The stored winner has no intact code here: it came as wisdom (lntune db import carries
 * figures, never machine code) or its artifact was altered. Its variant is built from this
 * machine's templates, verified against the reference and stored as the artifact, with the
 * stored figures: code that liblntune runs is only ever compiled here. 0 when that failed (the
 * variant is not valid here, or no longer verifies: recorded so).
 */
static int rebuild_winner(lntune_plan *p) {
    if (!open_space(p)) return 0;
    size_t v = variant_index(p, p->res->variant);
    if (v == p->nvariants || !prepared(p)) return 0;
    lntune_plan_progress(p, "rebuild");
    if (check_all(p, &v, 1) == 0 || lntune_plan_stopped(p)) return 0;
    store_winner(p, v, p->res->median_ns, p->checked[v].max_error);
    if (lntune_plan_stopped(p)) return 0;
    p->res->max_error = p->checked[v].max_error;
    p->res->rebuilt = 1;
    return 1;
}

/* The stored winner's twin, where the winner is fixed-H and its twin was never tried or its code
 * was altered since (store_twin). */
static void add_twin(lntune_plan *p) {
    if (!p->t->twins || p->cfg->rebuild_only || !open_space(p)) return;
    const size_t v = variant_index(p, p->res->variant);
    if (v < p->nvariants && twin_of(p, v) < p->nvariants && prepared(p)) store_twin(p, v);
}

/* variant without its threads=N item into buf: the knobs of the code, whatever the cores. */
static const char *without_threads(const char *variant, char *buf, size_t size) {
    const char *t = strstr(variant, "threads=");
    if (!t || (t != variant && t[-1] != ',')) return variant;
    const char *after = strchr(t, ',');
    snprintf(buf, size, "%.*s%s", (int)(t - variant), variant, after ? after + 1 : "");
    return buf;
}

typedef struct {
    lntune_plan *p;
    size_t *out, n;
} seed_list;

/* The local variant of a seed: the same string, else the same knobs at the most threads this
 * run has (another machine's thread count is its own). */
static int add_seed(void *ud, const char *variant) {
    seed_list *l = ud;
    const lntune_plan *p = l->p;
    char want[512], have[512];
    const char *code = without_threads(variant, want, sizeof want);
    size_t pick = p->nvariants;
    for (size_t v = 0; v < p->nvariants; ++v) {
        if (strcmp(p->variants[v], variant) == 0) {
            pick = v;
            break;
        }
        if (code == want && strcmp(without_threads(p->variants[v], have, sizeof have), want) == 0 &&
            (pick == p->nvariants || threads_of(p->variants[v]) > threads_of(p->variants[pick])))
            pick = v;
    }
    for (size_t k = 0; k < l->n; ++k)
        if (l->out[k] == pick) return 0;
    if (pick < p->nvariants) l->out[l->n++] = pick;
    return l->n == MAX_SEEDS;
}

/* Up to MAX_SEEDS variants of the seed database that the search starts from; 0 without one. */
static size_t find_seeds(lntune_plan *p, size_t *out) {
    if (!p->seed_db || p->cfg->rigor == LNTUNE_RIGOR_EXHAUSTIVE) return 0;
    seed_list l = {p, out, 0};
    lntune_db_key key = p->key;
    key.hardware_id = 0; /* every machine of the seed database */
    lntune_db_each_seed(p->seed_db, &key, MAX_SEEDS, add_seed, &l);
    return l.n;
}

/* Tunes one op x shape into p->res. */
static void tune_one(lntune_plan *p) {
    const lntune_target *t = p->t;
    if (t->code_hash(p->state, p, p->code_hash, sizeof p->code_hash) != LNTUNE_OK) return;
    lntune_db_each_measurement(p->db, &p->key, p->code_hash, collect_stored, p);
    if (!p->cfg->retune) lntune_db_get_best(p->db, &p->key, from_best, p);
    if (p->res->from_db && (winner_has_code(p) || rebuild_winner(p))) {
        /* a winner stored before twins, or a twin whose code was altered since */
        if (p->winner_fixed_h &&
            (!p->twin_tried || (p->twin_key[0] && !lntune_db_artifact_intact(p->db, p->twin_key))))
            add_twin(p);
        return;
    }
    if (p->cfg->rebuild_only || lntune_plan_stopped(p)) return; /* never a search in this mode */
    p->res->from_db = 0;                                        /* the winner is chosen again */
    if (!open_space(p)) return;
    p->estimate = lntune_search_estimate(p->space, p->cfg->rigor);
    if (!prepared(p)) return;

    size_t top[MAX_TOP], seeds[MAX_SEEDS];
    const size_t max_top = (size_t)t->top < MAX_TOP ? (size_t)t->top : MAX_TOP;
    const size_t nseeds = find_seeds(p, seeds);
    p->res->seeds = (int)nseeds;
    const size_t ntop = nseeds
                            ? lntune_search_from(p->space, seeds, nseeds, evaluate, p, top, max_top)
                            : lntune_search(p->space, p->cfg->rigor, evaluate, p, top, max_top);
    if (ntop == 0 || lntune_plan_stopped(p)) return;
    lntune_outcome w;
    const size_t v = retime_and_choose(p, top, ntop, &w);
    if (v == p->nvariants) return;
    confirm_winner(p, v, &w);
    time_naive(p);
    if (lntune_plan_stopped(p)) return;
    store_winner(p, v, w.t.median_ns, w.max_error);
    store_reach(p, store_twin(p, v));
    snprintf(p->res->variant, sizeof p->res->variant, "%s", p->variants[v]);
    p->res->median_ns = w.t.median_ns;
    p->res->gbps = p->bytes / w.t.median_ns;
    p->res->max_error = w.max_error;
}

static int by_h(const void *a, const void *b) {
    const lntune_shape *x = a, *y = b;
    if (x->H != y->H) return (x->H > y->H) - (x->H < y->H);
    return (x->rows > y->rows) - (x->rows < y->rows);
}

/* Sets p up for op x shape, its result into res. */
static void plan_begin(lntune_plan *p, const lntune_tune_config *cfg, const lntune_target *t,
                       void *state, lntune_db *db, lntune_db *seed_db, const char *op,
                       lntune_shape shape, int64_t hw, int *rc, char *err, size_t errlen,
                       lntune_tune_result *res) {
    *p = (lntune_plan){.cfg = cfg,
                       .t = t,
                       .state = state,
                       .db = db,
                       .seed_db = seed_db,
                       .op = op,
                       .shape = shape,
                       .rc = rc,
                       .err = err,
                       .errlen = errlen,
                       .res = res};
    if (p->shape.rows <= 0) p->shape.rows = t->default_rows(p->shape.H);
    /* gamma always (a winner with gamma serves calls without it); the weight offset when
     * asked, keyed in the op text (fusion.h) */
    const int offset = p->shape.affine == LNTUNE_AFFINE_OFFSET;
    p->shape.affine = offset ? LNTUNE_AFFINE_OFFSET : LNTUNE_AFFINE_GAMMA;
    lntune_types_format(p->shape.types, p->dtype, sizeof p->dtype);
    lntune_op_key(p->op, p->shape.fusion, offset, p->op_key, sizeof p->op_key);
    p->key = (lntune_db_key){hw, t->name, p->op_key, p->dtype, p->shape.H, p->shape.rows, 1};
    p->start_ns = lntune_now_ns();
    snprintf(res->target, sizeof res->target, "%s", t->name);
    snprintf(res->op, sizeof res->op, "%s", p->op_key);
    snprintf(res->dtype, sizeof res->dtype, "%s", p->dtype);
    res->rows = p->shape.rows;
    res->H = p->shape.H;
}

/* The target's end of p's op x shape, and p's own memory. */
static void plan_end(lntune_plan *p) {
    p->t->end(p->state, p);
    for (size_t i = 0; i < p->ndb_rows; ++i) free(p->db_rows[i].variant);
    free(p->db_rows);
    free(p->checked);
    free(p->was_checked);
    free(p->was_timed);
    lntune_space_destroy(p->space);
}

/*
 * A second look at out's winner, chosen earlier in this run: side by side with the built-in and
 * the copy again, now that other shapes were tuned in between. On a shared host a phase slows the
 * machine for minutes, and not every kernel alike: on the 2-core Zen 4 guest the same kernel
 * took 803 us and, twenty minutes later, 1383 us, and an RMSNorm 4096x768 tuning at 2 threads
 * chose a 1-thread kernel that the bench, in another phase, ran at 0.66x the 2-thread built-in
 * (docs/notes/2026-12-06-zen4-phases.md). A choice one phase made is undone only when the
 * built-in beats the winner by BUILTIN_MARGIN in two looks in a row: it is then stored instead,
 * with the second look's figures. out->rechecked says what happened.
 */
static void recheck(lntune_plan *p, lntune_tune_result *out) {
    if (p->t->code_hash(p->state, p, p->code_hash, sizeof p->code_hash) != LNTUNE_OK ||
        !open_space(p) || !prepared(p))
        return;
    const size_t v = variant_index(p, out->variant);
    const size_t pair[2] = {v, p->builtin};
    size_t ok[2] = {v, p->builtin};
    if (v == p->nvariants || p->builtin >= p->nvariants || v == p->builtin ||
        check_all(p, ok, 2) != 2)
        return;
    lntune_plan_progress(p, "recheck");
    out->rechecked = 1;
    lntune_outcome outs[2];
    double copy_ns = NAN;
    for (int look = 0; look < 2; ++look) {
        copy_ns = time_only(p, pair, 2, LNTUNE_TIME_FINAL, outs);
        if (lntune_plan_stopped(p) || outs[0].state != LNTUNE_OUTCOME_OK ||
            outs[1].state != LNTUNE_OUTCOME_OK ||
            !(outs[1].t.score_ns * (1.0 + BUILTIN_MARGIN) < outs[0].t.score_ns) ||
            best_ratio(outs + 1, 1, copy_ns) > LNTUNE_MAX_COPY_RATIO)
            return; /* the winner holds (or the look was a measurement fault) */
    }
    p->res->copy_gbps = p->bytes / copy_ns;
    store_winner(p, p->builtin, outs[1].t.median_ns, outs[1].max_error);
    if (lntune_plan_stopped(p)) return;
    snprintf(out->variant, sizeof out->variant, "%s", p->variants[p->builtin]);
    out->median_ns = outs[1].t.median_ns;
    out->gbps = p->bytes / outs[1].t.median_ns;
    out->copy_gbps = p->res->copy_gbps;
    out->max_error = outs[1].max_error;
    out->rechecked = 2;
}

int lntune_plan_run(const lntune_tune_config *cfg, const lntune_target *t, void *state,
                    lntune_tune_result **results, size_t *nresults, char *err, size_t errlen) {
    *results = NULL;
    *nresults = 0;
    for (size_t o = 0; o < cfg->nops; ++o) {
        const lntune_direction *dir = NULL;
        if (lntune_op_text_parse(cfg->ops[o], NULL, &dir, NULL) != 0) {
            snprintf(err, errlen, "unknown op '%s'", cfg->ops[o] ? cfg->ops[o] : "(null)");
            return LNTUNE_EINVAL;
        }
        for (size_t s = 0; s < cfg->nshapes && dir->suffix[0]; ++s) /* the backward (problem.h) */
            if (cfg->shapes[s].types.y != cfg->shapes[s].types.x ||
                cfg->shapes[s].fusion == LNTUNE_FUSION_RESIDUAL_OUT) {
                snprintf(err, errlen,
                         "%s: dx and dy have x's type (dtype x or x/x/params), and the backward "
                         "fuses no residual_out",
                         cfg->ops[o]);
                return LNTUNE_EINVAL;
            }
    }
    lntune_db *db = NULL, *seed_db = NULL;
    lntune_shape *shapes = NULL;
    int64_t hw = 0;
    int rc = lntune_db_open(cfg->db_path, cfg->force ? LNTUNE_DB_FORCE : 0, &db);
    if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_db_errmsg(db));
        goto done;
    }
    if ((rc = t->hardware(state, db, &hw, err, errlen)) != LNTUNE_OK) goto done;
    if (cfg->seed_db && (rc = lntune_db_open(cfg->seed_db, LNTUNE_DB_READONLY, &seed_db)) != 0) {
        snprintf(err, errlen, "--seed-from: %s", lntune_db_errmsg(seed_db));
        goto done;
    }
    lntune_tune_result *res = calloc(cfg->nops * cfg->nshapes + 1, sizeof *res);
    shapes = malloc((cfg->nshapes + 1) * sizeof *shapes);
    if (!res || !shapes) {
        free(res);
        rc = LNTUNE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    *results = res;
    memcpy(shapes, cfg->shapes, cfg->nshapes * sizeof *shapes);
    if (t->by_h) qsort(shapes, cfg->nshapes, sizeof *shapes, by_h);
    for (size_t o = 0; o < cfg->nops && rc == LNTUNE_OK; ++o) {
        for (size_t s = 0; s < cfg->nshapes && rc == LNTUNE_OK; ++s) {
            lntune_plan p;
            plan_begin(&p, cfg, t, state, db, seed_db, cfg->ops[o], shapes[s], hw, &rc, err, errlen,
                       &res[(*nresults)++]);
            tune_one(&p);
            plan_end(&p);
            if (cfg->stop && *cfg->stop) goto done;
        }
    }
    /* A second look at each choice, after the others were tuned (recheck); result i is op
     * i / nshapes at shape i % nshapes, in the order of the loop above. */
    for (size_t i = 0; t->recheck && *nresults > 1 && i < *nresults && rc == LNTUNE_OK; ++i) {
        if (res[i].from_db || !res[i].variant[0]) continue;
        lntune_tune_result scratch = res[i]; /* the look's counters are not the tuning's */
        lntune_plan p;
        plan_begin(&p, cfg, t, state, db, seed_db, cfg->ops[i / cfg->nshapes],
                   shapes[i % cfg->nshapes], hw, &rc, err, errlen, &scratch);
        recheck(&p, &res[i]);
        plan_end(&p);
        if (cfg->stop && *cfg->stop) goto done;
    }
done:
    free(shapes);
    lntune_db_close(seed_db);
    lntune_db_close(db);
    return rc;
}
