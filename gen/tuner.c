/*
 * tuner.c - one tuning run: for each op x shape, measure the copy bandwidth, search the variant
 * space (search.c) evaluating candidates as generate -> JIT -> verify -> time, re-time the
 * leaders with the naive kernel and the copies in one interleaved run, then store everything.
 *
 * Forward and backward ops (op texts "layernorm" ... "rmsnorm_backward") take the same path; what
 * differs (buffers and args, verifier, bytes moved) comes from their lntune_direction (problem.h).
 *
 * Every measurement is written as soon as it is taken, so an interrupted run loses nothing, and
 * a rerun reuses each stored measurement of the same template and compiler instead of compiling.
 */
#define _GNU_SOURCE
#include "tuner.h"

#include "fusion.h"
#include "half.h"

#include "generator.h"
#include "hardware.h"
#include "incumbent.h"
#include "jit.h"
#include "lntune.h"
#include "pool.h"
#include "problem.h"
#include "reference.h"
#include "sandbox.h"
#include "search.h"
#include "timing.h"
#include "tuning_db.h"
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOP = 16, FINALISTS = 4, MAX_FINALISTS = 8, RETIME_ROUNDS = 15, MIN_ROUNDS = 7 };
enum { MAX_COPIES = 64 };                     /* copy variants built */
static const double NOISE = 0.01;             /* within 1%, the simpler variant wins */
static const double BATCH_BUDGET_NS = 250e6;  /* timing of one batch of candidates */
static const double RETIME_BUDGET_NS = 2.5e9; /* each of the two final interleaved runs */
static const double FINALIST_WINDOW = 1.15;   /* see tune_one */

/* A compiled, loaded source; variants that differ only in launch parameters share one. */
typedef struct {
    uint64_t text_hash;
    lntune_jit_module *module;
    lntune_kernel_fn fn;
    lntune_jit_object obj;
    int ok;            /* compiled, loaded and verified */
    int crashed, lost; /* crashed or hung in the sandbox; not run (interrupted) */
    double max_error;
    char message[512];
} compiled;

typedef struct {
    char *variant;
    lntune_measurement m;
    char status[8], message[512];
} stored;

/* Everything one op x shape needs. */
typedef struct {
    const lntune_tune_config *cfg;
    lntune_gen *gen;
    lntune_jit *jit;
    lntune_db *db;
    lntune_pool *pool;
    void *verifier;  /* of the problem's direction */
    const char *op;  /* the op text */
    char op_key[32]; /* the database's op text, with the fusion (fusion.h) */
    lntune_shape shape;
    lntune_db_key key;
    char code_hash[40];  /* template hash + compiler: measurements of other ones are not reused */
    char host_flag[64];  /* -DLNTUNE_HOST=<fingerprint>, see build_units */
    lntune_problem prob; /* buffers, args, bytes moved and the copy of them, per direction */
    char dtype[24];      /* the types' database text */
    const lntune_space *space;
    compiled *units;
    size_t nunits, capunits;
    int *unit_of;    /* variant -> unit index, -1 unknown */
    int *threads_of; /* variant -> threads */
    stored *db_rows; /* measurements from earlier runs */
    size_t ndb_rows;
    lntune_tune_result *res;
    lntune_timed reference;     /* the fastest copy: the drift reference (timing.h) */
    lntune_incumbent incumbent; /* each batch's reference once there is one (incumbent.h) */
    double start_ns;
    size_t done, estimate;
    char *write_err; /* the run's first failed write: the run stops (sized WRITE_ERR) */
    char *fatal;     /* a failure to prepare (memory, verifier): the run stops (sized WRITE_ERR) */
} job;

enum { WRITE_ERR = 1024 };

/* A signal asked to stop, or the database stopped taking writes. */
static int stopped(const job *j) {
    return (j->cfg->stop && *j->cfg->stop) || j->write_err[0];
}

void lntune_tune_report(const lntune_tune_config *cfg, const char *op, const lntune_shape *shape,
                        const char *stage, size_t done, size_t estimate, double start_ns) {
    if (!cfg->progress) return;
    lntune_tune_progress p = {op,
                              shape->rows,
                              shape->H,
                              stage,
                              done,
                              estimate > done ? estimate : done,
                              (lntune_now_ns() - start_ns) * 1e-9};
    cfg->progress(cfg->progress_ud, &p);
}

void lntune_tune_result_from_best(lntune_tune_result *r, const lntune_best *b) {
    snprintf(r->variant, sizeof r->variant, "%s", b->variant);
    r->median_ns = b->median_ns;
    r->gbps = b->gbps;
    r->copy_gbps = b->copy_gbps;
    r->naive_ns = b->naive_ns;
    r->max_error = b->max_error;
    r->from_db = 1;
}

static void progress(job *j, const char *stage) {
    lntune_tune_report(j->cfg, j->op_key, &j->shape, stage, j->done, j->estimate, j->start_ns);
}

int64_t lntune_tune_default_rows(int64_t H) {
    int64_t rows = (INT64_C(8) << 20) / (H > 0 ? H : 1);
    return rows > 0 ? rows : 1;
}

static int collect_stored(void *ud, const lntune_measurement *m) {
    job *j = ud;
    stored *grown = realloc(j->db_rows, (j->ndb_rows + 1) * sizeof *grown);
    if (!grown) return 1;
    j->db_rows = grown;
    stored *s = &grown[j->ndb_rows];
    if (!(s->variant = strdup(m->variant))) return 1;
    s->m = *m;
    snprintf(s->status, sizeof s->status, "%s", m->status);
    snprintf(s->message, sizeof s->message, "%s", m->message ? m->message : "");
    s->m.variant = s->variant;
    s->m.status = s->status;
    s->m.message = s->message;
    s->m.artifact_key = NULL;
    s->m.template_hash = NULL;
    j->ndb_rows++;
    return 0;
}

static const stored *find_stored(const job *j, const char *variant) {
    for (size_t i = 0; i < j->ndb_rows; ++i)
        if (strcmp(j->db_rows[i].variant, variant) == 0) return &j->db_rows[i];
    return NULL;
}

static void record(job *j, const char *variant, const char *status, const char *message,
                   const compiled *u, const lntune_timed *t) {
    lntune_measurement m = {0};
    m.variant = variant;
    m.template_hash = j->code_hash;
    m.status = status;
    m.message = message && *message ? message : NULL;
    m.artifact_key = u && u->obj.key[0] ? u->obj.key : NULL;
    m.compile_ms = u ? u->obj.compile_ms : 0.0;
    m.max_error = u ? u->max_error : 0.0;
    if (t) {
        m.median_ns = t->median_ns;
        m.min_ns = t->min_ns;
        m.max_ns = t->max_ns;
        m.gbps = j->prob.bytes / t->median_ns;
    }
    m.copy_gbps = j->res->copy_gbps;
    if (j->write_err[0]) return; /* the run is stopping: write nothing more */
    if (lntune_db_put_measurement(j->db, &j->key, &m) == LNTUNE_OK)
        j->res->saved++;
    else
        snprintf(j->write_err, WRITE_ERR, "%s", lntune_db_errmsg(j->db));
}

/* Emits, compiles (in parallel), loads and verifies the sources of variants idx[0..n). */
static void build_units(job *j, const size_t *idx, size_t n) {
    size_t first_new = j->nunits, nnew = 0;
    const char **texts = calloc(n, sizeof *texts);
    lntune_source *srcs = calloc(n, sizeof *srcs);
    if (!texts || !srcs) goto done;
    for (size_t k = 0; k < n; ++k) {
        size_t v = idx[k];
        lntune_source src;
        if (lntune_gen_emit(j->gen, "cpu", j->op, lntune_space_variant(j->space, v), &j->shape,
                            NULL, &src) != LNTUNE_OK) {
            record(j, lntune_space_variant(j->space, v), LNTUNE_STATUS_FAILED,
                   lntune_gen_errmsg(j->gen), NULL, NULL);
            j->res->failed++;
            continue;
        }
        j->threads_of[v] = src.threads;
        uint64_t h = lntune_fnv1a(LNTUNE_FNV_INIT, src.text, strlen(src.text));
        size_t u = 0;
        while (u < j->nunits && j->units[u].text_hash != h) ++u;
        if (u < j->nunits) {
            j->unit_of[v] = (int)u;
            lntune_source_free(&src);
            continue;
        }
        if (j->nunits == j->capunits) {
            size_t cap = j->capunits ? 2 * j->capunits : 64;
            compiled *grown = realloc(j->units, cap * sizeof *grown);
            if (!grown) {
                lntune_source_free(&src);
                break;
            }
            j->units = grown;
            j->capunits = cap;
        }
        memset(&j->units[j->nunits], 0, sizeof j->units[0]);
        j->units[j->nunits].text_hash = h;
        j->unit_of[v] = (int)j->nunits++;
        srcs[nnew] = src;
        texts[nnew] = srcs[nnew].text;
        nnew++;
    }
    if (nnew == 0) goto done;
    progress(j, "compile");
    lntune_jit_object *objs = calloc(nnew, sizeof *objs);
    if (!objs) goto done;
    int parallel = lntune_pool_threads(j->pool);
    const char *flags[] = {j->host_flag, NULL};
    const char *const **extra = calloc(nnew, sizeof *extra);
    for (size_t k = 0; extra && k < nnew; ++k) extra[k] = flags;
    lntune_jit_compile_many(j->jit, texts, (const char *const *const *)extra, nnew, parallel, objs);
    free(extra);
    progress(j, "verify");
    /* Loaded here, run only in the sandbox's worker: a crash or hang is the variant's fault. */
    lntune_sandbox_check *checks = calloc(nnew, sizeof *checks);
    lntune_sandbox_outcome *outs = calloc(nnew, sizeof *outs);
    size_t *check_of = calloc(nnew, sizeof *check_of), nchecks = 0;
    for (size_t k = 0; k < nnew; ++k) {
        compiled *u = &j->units[first_new + k];
        u->obj = objs[k];
        if (u->obj.cache_hit)
            j->res->cache_hits++;
        else
            j->res->compiled++;
        if (!u->obj.data) {
            snprintf(u->message, sizeof u->message, "compile failed: %s",
                     u->obj.diag ? u->obj.diag : lntune_jit_errmsg(j->jit));
            continue;
        }
        if (lntune_jit_load(j->jit, u->obj.data, u->obj.len, "lntune_kernel", &u->module, &u->fn)) {
            snprintf(u->message, sizeof u->message, "load failed: %s", lntune_jit_errmsg(j->jit));
            continue;
        }
        if (!checks || !outs || !check_of) {
            u->lost = 1;
            continue;
        }
        checks[nchecks] = (lntune_sandbox_check){.fn = u->fn,
                                                 .affine = srcs[k].affine,
                                                 .fixed_h = srcs[k].fixed_h,
                                                 .threads = srcs[k].threads};
        check_of[nchecks++] = first_new + k;
    }
    j->prob.dir->sandbox_verify(j->verifier, checks, nchecks, j->pool, outs);
    for (size_t c = 0; c < nchecks; ++c) {
        compiled *u = &j->units[check_of[c]];
        if (outs[c].state != LNTUNE_SANDBOX_DONE) {
            u->crashed = outs[c].state == LNTUNE_SANDBOX_CRASHED;
            u->lost = !u->crashed;
            snprintf(u->message, sizeof u->message, "%s", outs[c].message);
            continue;
        }
        u->max_error = checks[c].result.max_error;
        j->res->verified++;
        if (checks[c].rc == LNTUNE_OK)
            u->ok = 1;
        else
            snprintf(u->message, sizeof u->message, "%s", checks[c].result.message);
    }
    free(checks);
    free(outs);
    free(check_of);
    free(objs);
done:
    for (size_t k = 0; srcs && k < nnew; ++k) lntune_source_free(&srcs[k]);
    free(srcs);
    free(texts);
}

/* The search's evaluate callback: reuse a stored measurement, or build, verify and time. */
static void evaluate(void *ud, const size_t *idx, size_t n, double *times) {
    job *j = ud;
    size_t *todo = malloc(n * sizeof *todo), *slot = malloc(n * sizeof *slot);
    lntune_timed *timed = calloc(n + 2, sizeof *timed); /* + lntune_incumbent_refs's */
    lntune_sandbox_outcome *outs = calloc(n + 2, sizeof *outs);
    size_t ntodo = 0, ntimed = 0;
    for (size_t k = 0; k < n; ++k) times[k] = INFINITY;
    if (!todo || !slot || !timed || !outs || stopped(j)) goto done;
    for (size_t k = 0; k < n; ++k) {
        const char *variant = lntune_space_variant(j->space, idx[k]);
        const stored *s = j->cfg->retune ? NULL : find_stored(j, variant);
        if (!s) {
            slot[ntodo] = k;
            todo[ntodo++] = idx[k];
            continue;
        }
        j->res->reused++;
        if (strcmp(s->status, LNTUNE_STATUS_OK) == 0) times[k] = s->m.median_ns;
    }
    j->done += n - ntodo;
    if (ntodo == 0) goto done;
    build_units(j, todo, ntodo);
    if (stopped(j)) goto done; /* a signal during the compile: this batch was never measured */
    size_t *timed_slot = todo; /* reused: todo[] is not needed past this point */
    for (size_t t = 0; t < ntodo; ++t) {
        size_t k = slot[t], v = idx[k];
        int u = j->unit_of[v];
        if (u < 0) continue;            /* emit failed, already recorded */
        if (j->units[u].lost) continue; /* never ran: a later run measures it */
        if (!j->units[u].ok) {
            /* loaded, then failed verification (a crash is a failure, not a wrong answer) */
            const int wrong = j->units[u].fn != NULL && !j->units[u].crashed;
            j->res->crashed += j->units[u].crashed;
            record(j, lntune_space_variant(j->space, v),
                   wrong ? LNTUNE_STATUS_WRONG : LNTUNE_STATUS_FAILED, j->units[u].message,
                   &j->units[u], NULL);
            if (wrong)
                j->res->wrong++;
            else
                j->res->failed++;
            continue;
        }
        timed[ntimed] = j->prob.dir->candidate(&j->prob, j->units[u].fn, j->threads_of[v]);
        timed_slot[ntimed++] = k;
    }
    progress(j, "time");
    /*
     * The batch's references go last (not slots): the incumbent (and once the one it replaced:
     * incumbent.h), else the fastest copy. A copy's speed follows the machine's bandwidth more
     * than a norm kernel's does, so a ratio to another norm kernel ranks batches taken in
     * different bandwidth regimes more fairly.
     */
    const size_t nrefs =
        ntimed > 0 ? lntune_incumbent_refs(&j->incumbent, &j->reference, timed + ntimed) : 0;
    lntune_sandbox_time(timed, ntimed + nrefs, &j->prob.args, j->pool, MIN_ROUNDS, BATCH_BUDGET_NS,
                        outs);
    lntune_incumbent_scale(&j->incumbent, timed, ntimed, timed + ntimed, nrefs);
    for (size_t t = 0; t < ntimed; ++t) {
        size_t k = timed_slot[t], v = idx[k];
        compiled *u = &j->units[j->unit_of[v]];
        if (outs[t].state == LNTUNE_SANDBOX_LOST) continue;
        j->res->timed++;
        if (timed[t].failed) {
            const int crashed = outs[t].state == LNTUNE_SANDBOX_CRASHED;
            /* Never a leader; variants sharing its source are recorded failed with this. */
            u->ok = 0;
            u->crashed = 1;
            snprintf(u->message, sizeof u->message, "%s",
                     crashed ? outs[t].message : "the kernel returned an error code while timed");
            j->res->failed++;
            j->res->crashed += crashed;
            record(j, lntune_space_variant(j->space, v), LNTUNE_STATUS_FAILED, u->message, u, NULL);
            continue;
        }
        times[k] = timed[t].median_ns;
        record(j, lntune_space_variant(j->space, v), LNTUNE_STATUS_OK, NULL, u, &timed[t]);
        lntune_incumbent_offer(&j->incumbent, &timed[t]);
    }
    j->done += ntodo;
done:
    free(todo);
    free(slot);
    free(timed);
    free(outs);
}

/* Loads the source of variant v if an earlier run measured it and this one never built it. */
static compiled *unit_for(job *j, size_t v) {
    if (j->unit_of[v] < 0) build_units(j, &v, 1);
    int u = j->unit_of[v];
    return u >= 0 && j->units[u].ok ? &j->units[u] : NULL;
}

/* Compiles the copy kernels of the same bytes, checks that they copy, and loads them. */
static size_t build_copies(job *j, lntune_jit_module **modules, lntune_timed *copies, size_t max) {
    char **list;
    size_t n, got = 0;
    lntune_shape any = {.affine = LNTUNE_AFFINE_ANY};
    if (lntune_gen_variants(j->gen, "cpu", "copy", &any, &list, &n) != LNTUNE_OK) return 0;
    for (size_t i = 0; i < n && got < max; ++i) {
        lntune_source src;
        lntune_jit_object obj = {0};
        if (lntune_gen_emit(j->gen, "cpu", "copy", list[i], &any, NULL, &src) != LNTUNE_OK)
            continue;
        if (lntune_jit_compile(j->jit, src.text, NULL, &obj) == LNTUNE_OK &&
            lntune_jit_load(j->jit, obj.data, obj.len, "lntune_kernel", &modules[got],
                            &copies[got].fn) == LNTUNE_OK) {
            copies[got].threads = src.threads;
            lntune_kernel_args a = j->prob.copy_args;
            a.rows = a.rows < 4 ? a.rows : 4;
            float *y = a.y;
            y[0] = -1.0f;
            lntune_pool_run_kernel(j->pool, copies[got].fn, &a, copies[got].threads);
            copies[got].args = &j->prob.copy_args;
            if (memcmp(a.x, a.y, (size_t)(a.rows * a.H) * sizeof(float)) == 0)
                got++;
            else
                lntune_jit_unload(modules[got]);
        }
        lntune_jit_object_free(&obj);
        lntune_source_free(&src);
    }
    lntune_gen_free_list(list, n);
    return got;
}

static int faster_copy(const void *a, const void *b) {
    const lntune_timed *x = a, *y = b;
    if (x->failed != y->failed) return x->failed - y->failed;
    return (x->median_ns > y->median_ns) - (x->median_ns < y->median_ns);
}

size_t lntune_tune_copy_finalists(lntune_timed *copies, size_t n, size_t max) {
    qsort(copies, n, sizeof *copies, faster_copy);
    /* The fastest one-thread copy moves up to second place (unless it is first). */
    size_t one = 0;
    while (one < n && (copies[one].failed || copies[one].threads != 1)) ++one;
    if (one > 1 && one < n && max > 1) {
        const lntune_timed t = copies[one];
        memmove(&copies[2], &copies[1], (one - 1) * sizeof *copies);
        copies[1] = t;
    }
    size_t k = 0;
    while (k < n && k < max && !copies[k].failed) ++k;
    return k;
}

/*
 * Times every copy variant (interleaved, in the sandbox) and moves LNTUNE_COPY_FINALISTS to the
 * front (lntune_tune_copy_finalists): those are re-timed with the leaders, so "the better copy" is
 * the best of all of them without 50 copies in the final run. Returns how many finalists there are.
 */
static size_t keep_fastest_copies(job *j, lntune_timed *copies, size_t n) {
    if (n == 0) return 0;
    lntune_sandbox_outcome outs[MAX_COPIES];
    lntune_sandbox_time(copies, n, &j->prob.args, j->pool, RETIME_ROUNDS, BATCH_BUDGET_NS * 2,
                        outs);
    return lntune_tune_copy_finalists(copies, n, LNTUNE_COPY_FINALISTS);
}

size_t lntune_tune_choose(const lntune_timed *t, size_t n, const int *complexity,
                          const char *const *variant, double noise) {
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
    return pick;
}

/* Among the retimed leaders top[0..n) (n <= MAX_FINALISTS), lntune_tune_choose's. */
static size_t choose(const job *j, const size_t *top, const lntune_timed *t, size_t n) {
    int complexity[MAX_FINALISTS];
    const char *variant[MAX_FINALISTS];
    for (size_t k = 0; k < n; ++k) {
        complexity[k] = lntune_space_complexity(j->space, top[k]);
        variant[k] = lntune_space_variant(j->space, top[k]);
    }
    return lntune_tune_choose(t, n, complexity, variant, NOISE);
}

/*
 * Times variants v[0..n) (compacted to those loaded; returns how many) and the copy finalists,
 * the first copy the drift reference, in one interleaved run of RETIME_BUDGET_NS: group[0..n)
 * the variants, then the copies.
 */
static size_t retime(job *j, size_t *v, size_t n, const lntune_timed *copies, size_t ncopies,
                     lntune_timed *group, lntune_sandbox_outcome *outs) {
    size_t ng = 0;
    for (size_t k = 0; k < n; ++k) {
        compiled *u = unit_for(j, v[k]);
        if (!u) continue;
        v[ng] = v[k];
        group[ng++] = j->prob.dir->candidate(&j->prob, u->fn, j->threads_of[v[k]]);
    }
    const size_t nv = ng;
    for (size_t c = 0; c < ncopies; ++c) {
        group[ng] = copies[c];
        group[ng++].reference = c == 0;
    }
    lntune_sandbox_time(group, ng, &j->prob.args, j->pool, RETIME_ROUNDS, RETIME_BUDGET_NS, outs);
    return nv;
}

/* Stores the retimed figures of v[0..n) (group[k] is v[k]'s). */
static void record_retimed(job *j, const size_t *v, const lntune_timed *group,
                           const lntune_sandbox_outcome *outs, size_t n) {
    for (size_t k = 0; k < n; ++k) {
        const int crashed = outs[k].state == LNTUNE_SANDBOX_CRASHED;
        if (outs[k].state == LNTUNE_SANDBOX_LOST) continue;
        record(j, lntune_space_variant(j->space, v[k]),
               group[k].failed ? LNTUNE_STATUS_FAILED : LNTUNE_STATUS_OK,
               crashed           ? outs[k].message
               : group[k].failed ? "the kernel returned an error code"
                                 : NULL,
               &j->units[j->unit_of[v[k]]], group[k].failed ? NULL : &group[k]);
    }
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

static void store_winner(job *j, size_t v, const lntune_timed *t) {
    compiled *u = unit_for(j, v);
    lntune_source src;
    if (!u || lntune_gen_emit(j->gen, "cpu", j->op, lntune_space_variant(j->space, v), &j->shape,
                              NULL, &src) != LNTUNE_OK)
        return;
    void *so = NULL;
    size_t so_len = 0;
    char *diag = NULL;
    lntune_jit_link_shared(j->jit, u->obj.data, u->obj.len, &so, &so_len, &diag);
    lntune_artifact art = {u->obj.key,
                           src.text,
                           lntune_jit_compiler_version(j->jit),
                           "-std=c11 -O3 -march=native -fPIC",
                           "lntune_kernel",
                           u->obj.data,
                           u->obj.len,
                           so,
                           so_len,
                           NULL};
    lntune_best b = {lntune_space_variant(j->space, v),
                     u->obj.key,
                     src.threads,
                     j->shape.rows,
                     t->median_ns,
                     j->prob.bytes / t->median_ns,
                     j->res->copy_gbps,
                     u->max_error,
                     j->res->naive_ns};
    if (lntune_db_put_artifact(j->db, &art) != LNTUNE_OK ||
        lntune_db_set_best(j->db, &j->key, &b) != LNTUNE_OK)
        snprintf(j->write_err, WRITE_ERR, "%s", lntune_db_errmsg(j->db));
    free(so);
    free(diag);
    lntune_source_free(&src);
}

static int from_best(void *ud, const lntune_best *b) {
    job *j = ud;
    const stored *s = find_stored(j, b->variant);
    if (!s || b->tuned_rows != j->shape.rows) return 0; /* another template, compiler or rows */
    lntune_tune_result_from_best(j->res, b);
    return 0;
}

/* Tunes one op x shape into res. */
static void tune_one(job *j) {
    lntune_tune_result *res = j->res;
    char **list = NULL;
    size_t n = 0;
    lntune_space *space = NULL;
    lntune_jit_module *copy_modules[MAX_COPIES] = {0};
    size_t ncopies = 0;

    lntune_db_each_measurement(j->db, &j->key, j->code_hash, collect_stored, j);
    if (!j->cfg->retune) lntune_db_get_best(j->db, &j->key, from_best, j);
    if (res->from_db) goto done;

    if (lntune_gen_variants(j->gen, "cpu", j->op, &j->shape, &list, &n) != LNTUNE_OK || n == 0 ||
        lntune_space_create(list, n, &space) != LNTUNE_OK)
        goto done;
    j->space = space;
    j->estimate = lntune_search_estimate(space, j->cfg->rigor);
    j->unit_of = malloc(n * sizeof *j->unit_of);
    j->threads_of = calloc(n, sizeof *j->threads_of);
    if (!j->unit_of || !j->threads_of) goto done;
    for (size_t i = 0; i < n; ++i) j->unit_of[i] = -1;
    /* The buffers and the verifier only now: a winner read back from the database needs neither. */
    int rc = lntune_problem_init(&j->prob, j->op, j->shape.types, j->shape.fusion, j->shape.rows,
                                 j->shape.H, lntune_pool_threads(j->pool));
    if (rc == LNTUNE_OK && (rc = lntune_problem_verifier(&j->prob, &j->verifier)) != LNTUNE_OK)
        snprintf(j->fatal, WRITE_ERR, "cannot prepare the %s verifier for H=%lld", j->op,
                 (long long)j->shape.H);
    else if (rc != LNTUNE_OK)
        snprintf(j->fatal, WRITE_ERR, "out of memory for the %s buffers of %lldx%lld", j->op,
                 (long long)j->shape.rows, (long long)j->shape.H);
    if (rc != LNTUNE_OK) goto done;

    progress(j, "copy");
    lntune_timed copies[MAX_COPIES] = {{0}}; /* all defined: the sandbox copies them whole */
    ncopies = build_copies(j, copy_modules, copies, MAX_COPIES);
    size_t nfinal = keep_fastest_copies(j, copies, ncopies);
    if (nfinal > 0) {
        j->reference = copies[0];
        j->reference.reference = 1;
    }

    size_t top[TOP];
    size_t ntop = lntune_search(space, j->cfg->rigor, evaluate, j, top, TOP);
    if (ntop == 0 || stopped(j)) goto done;

    /*
     * The leaders with the copies in one long interleaved run: many variants lie within a few
     * percent of each other, and the short batches of the search rank them only roughly. Then
     * the best FINALISTS again, alone with the copies: with fewer kernels per round the figures
     * follow the machine's drift closely, and they decide. The final choice goes by score
     * (timing.h), not the median: on a shared 2-vCPU host, phases of about a second slowed
     * row-at-a-time LayerNorms by 25-35% against 15% for rows=4 ones, the copy hardly at all,
     * and the median saw them in some runs only, so three runs chose three winners 8.5% apart.
     * The finalists are the best two by score and the best two by median: a phase in the first
     * run once gave all four best scores to rows=4 variants, 10% slower side by side than the
     * overlap=1 one with the best median, which then never reached the final run. Then, up to
     * MAX_FINALISTS, leaders within FINALIST_WINDOW that hold a knob value no finalist holds: a
     * phase that slowed rows=1 kernels during the whole first run (their best 5% behind rows=4)
     * once left only rows=2 and rows=4 finalists, and the winner at 0.87x the copy.
     */
    progress(j, "retime");
    lntune_timed group[TOP + LNTUNE_COPY_FINALISTS];
    lntune_sandbox_outcome outs[TOP + LNTUNE_COPY_FINALISTS];
    size_t nlead = retime(j, top, ntop, copies, nfinal, group, outs);
    if (stopped(j)) goto done;
    record_retimed(j, top, group, outs, nlead);
    const size_t nknobs = (size_t)lntune_space_knobs(space);
    int *values = malloc(nlead * nknobs * sizeof *values + 1);
    for (size_t k = 0; values && k < nlead; ++k)
        for (size_t q = 0; q < nknobs; ++q)
            values[k * nknobs + q] = lntune_space_value(space, top[k], (int)q);
    size_t fin[MAX_FINALISTS];
    const size_t nfin =
        lntune_tune_finalists(group, nlead, values, nknobs, FINALISTS, fin, MAX_FINALISTS);
    free(values);
    for (size_t k = 0; k < nfin; ++k) fin[k] = top[fin[k]];
    if (nfin == 0) goto done;
    const size_t nf = retime(j, fin, nfin, copies, nfinal, group, outs);
    if (stopped(j)) goto done;
    record_retimed(j, fin, group, outs, nf);
    double copy_ns = INFINITY;
    for (size_t c = nf; c < nf + nfinal; ++c)
        if (!group[c].failed && group[c].median_ns < copy_ns) copy_ns = group[c].median_ns;
    res->copy_gbps = isinf(copy_ns) ? 0.0 : j->prob.bytes / copy_ns;
    /* The naive kernel (as slow as several finalists together) on its own with the reference. */
    compiled *naive = unit_for(j, 0);
    if (naive && nfinal > 0 && !group[nf].failed) {
        lntune_timed pair[2] = {j->prob.dir->candidate(&j->prob, naive->fn, j->threads_of[0]),
                                j->reference};
        lntune_sandbox_outcome pair_outs[2];
        lntune_sandbox_time(pair, 2, &j->prob.args, j->pool, MIN_ROUNDS, BATCH_BUDGET_NS,
                            pair_outs);
        if (!pair[0].failed && !pair[1].failed) /* its ratio, on the reference's median above */
            res->naive_ns = pair[0].median_ns / pair[1].median_ns * group[nf].median_ns;
    }
    if (nf == 0) goto done;
    size_t w = choose(j, fin, group, nf);
    if (group[w].failed) goto done;
    store_winner(j, fin[w], &group[w]);
    snprintf(res->variant, sizeof res->variant, "%s", lntune_space_variant(space, fin[w]));
    res->median_ns = group[w].median_ns;
    res->gbps = j->prob.bytes / group[w].median_ns;
    res->max_error = j->units[j->unit_of[fin[w]]].max_error;
done:
    for (size_t c = 0; c < ncopies; ++c) lntune_jit_unload(copy_modules[c]);
    for (size_t u = 0; u < j->nunits; ++u) {
        lntune_jit_unload(j->units[u].module);
        lntune_jit_object_free(&j->units[u].obj);
    }
    for (size_t i = 0; i < j->ndb_rows; ++i) free(j->db_rows[i].variant);
    free(j->db_rows);
    free(j->units);
    free(j->unit_of);
    free(j->threads_of);
    if (j->verifier) j->prob.dir->verifier_destroy(j->verifier);
    lntune_problem_free(&j->prob);
    lntune_space_destroy(space);
    lntune_gen_free_list(list, n);
}

/* template hash + compiler version: a measurement holds only for both. */
static int code_hash(lntune_gen *g, lntune_jit *jit, const char *op, char *out, size_t size) {
    lntune_source src;
    lntune_shape any = {0};
    if (lntune_gen_emit(g, "cpu", op, "", &any, NULL, &src) != LNTUNE_OK) return -1;
    const char *cv = lntune_jit_compiler_version(jit);
    snprintf(out, size, "%s-%08llx", src.template_hash,
             (unsigned long long)(lntune_fnv1a(LNTUNE_FNV_INIT, cv, strlen(cv)) & 0xffffffffu));
    lntune_source_free(&src);
    return 0;
}

int lntune_tune(const lntune_tune_config *cfg, lntune_tune_result **results, size_t *nresults,
                char *err, size_t errlen) {
    *results = NULL;
    *nresults = 0;
    lntune_gen *gen = NULL;
    lntune_jit *jit = NULL;
    lntune_db *db = NULL;
    lntune_pool *pool = NULL;
    lntune_cpu_info cpu;
    int64_t hw = 0;
    int rc;
    char write_err[WRITE_ERR] = "", fatal[WRITE_ERR] = "";
    for (size_t o = 0; o < cfg->nops; ++o) {
        const lntune_direction *dir = NULL;
        if (lntune_op_text_parse(cfg->ops[o], NULL, &dir, NULL) != 0) {
            snprintf(err, errlen, "unknown op '%s'", cfg->ops[o] ? cfg->ops[o] : "(null)");
            return LNTUNE_EINVAL;
        }
        for (size_t s = 0; s < cfg->nshapes && strcmp(dir->name, "backward") == 0; ++s)
            if (cfg->shapes[s].types.y != cfg->shapes[s].types.x) {
                snprintf(err, errlen, "%s: dx and dy have x's type, so y's type must be x's",
                         cfg->ops[o]);
                return LNTUNE_EINVAL;
            }
    }
    lntune_cpu_info_get(&cpu);
    int threads =
        cfg->max_threads > 0 && cfg->max_threads < cpu.cores ? cfg->max_threads : cpu.cores;
    if ((rc = lntune_gen_open(NULL, &gen)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_gen_errmsg(gen));
        goto done;
    }
    lntune_gen_set_cores(gen, threads);
    if ((rc = lntune_jit_open(NULL, &jit)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_jit_errmsg(jit));
        goto done;
    }
    if ((rc = lntune_db_open(cfg->db_path, cfg->force ? LNTUNE_DB_FORCE : 0, &db)) != LNTUNE_OK ||
        (rc = lntune_db_put_hardware(db, &cpu, lntune_jit_compiler_version(jit), &hw)) !=
            LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_db_errmsg(db));
        goto done;
    }
    if ((rc = lntune_pool_create(threads, &pool)) != LNTUNE_OK) {
        snprintf(err, errlen, "cannot start %d threads", threads);
        goto done;
    }
    lntune_tune_result *res = calloc(cfg->nops * cfg->nshapes + 1, sizeof *res);
    if (!res) {
        rc = LNTUNE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    *results = res;
    for (size_t o = 0; o < cfg->nops; ++o) {
        for (size_t s = 0; s < cfg->nshapes; ++s) {
            lntune_tune_result *r = &res[(*nresults)++];
            job j = {0};
            j.cfg = cfg;
            j.gen = gen;
            j.jit = jit;
            j.db = db;
            j.pool = pool;
            j.op = cfg->ops[o];
            j.shape = cfg->shapes[s];
            if (j.shape.rows <= 0) j.shape.rows = lntune_tune_default_rows(j.shape.H);
            j.shape.affine = LNTUNE_AFFINE_GAMMA;
            lntune_types_format(j.shape.types, j.dtype, sizeof j.dtype);
            lntune_fusion_op_key(j.op, j.shape.fusion, j.op_key, sizeof j.op_key);
            j.key = (lntune_db_key){hw, "cpu", j.op_key, j.dtype, j.shape.H, j.shape.rows, 1};
            j.res = r;
            j.write_err = write_err;
            j.fatal = fatal;
            j.start_ns = lntune_now_ns();
            /* Objects are -march=native: the fingerprint keeps them out of other hosts' cache. */
            snprintf(j.host_flag, sizeof j.host_flag, "-DLNTUNE_HOST=0x%s", cpu.fingerprint);
            snprintf(r->target, sizeof r->target, "cpu");
            snprintf(r->op, sizeof r->op, "%s", j.op_key);
            snprintf(r->dtype, sizeof r->dtype, "%s", j.dtype);
            r->rows = j.shape.rows;
            r->H = j.shape.H;
            if (code_hash(gen, jit, j.op, j.code_hash, sizeof j.code_hash) != 0) {
                rc = LNTUNE_ETEMPLATE;
                snprintf(err, errlen, "%s", lntune_gen_errmsg(gen));
                goto done;
            }
            tune_one(&j);
            if (fatal[0]) {
                rc = LNTUNE_ENOMEM;
                snprintf(err, errlen, "%s", fatal);
                goto done;
            }
            if (write_err[0]) {
                rc = LNTUNE_EDB;
                snprintf(err, errlen, "cannot write the tuning database, stopped: %s", write_err);
                goto done;
            }
            if (stopped(&j)) goto stop;
        }
    }
stop:
    rc = LNTUNE_OK;
done:
    lntune_pool_destroy(pool);
    lntune_db_close(db);
    lntune_jit_close(jit);
    lntune_gen_close(gen);
    return rc;
}
