/*
 * cpu_target.c - the planner's target (target.h) for this CPU, and lntune_tune. Variants are
 * emitted as C, compiled in process on all cores (jit.c; variants that differ only in launch
 * parameters share one source and one object), verified against the float64 reference and timed
 * in a sandboxed worker (sandbox.h: a crash or hang is the variant's fault, not the run's),
 * interleaved with the fastest of the template's copy kernels of the same bytes.
 *
 * Forward and backward ops (op texts "layernorm" ... "rmsnorm_backward") take the same path; what
 * differs (buffers and args, verifier, bytes moved) comes from their lntune_direction (problem.h).
 */
#define _GNU_SOURCE
#include "tuner.h"

#include "builtin.h"
#include "builtin_policy.h"
#include "crossover.h"
#include "fusion.h"
#include "generator.h"
#include "hardware.h"
#include "incumbent.h"
#include "jit.h"
#include "lntune.h"
#include "pool.h"
#include "problem.h"
#include "sandbox.h"
#include "target.h"
#include "timing.h"
#include "tuning_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOP = 16, RETIME_ROUNDS = 15, MIN_ROUNDS = 7 };
enum { MAX_COPIES = 64 };                    /* copy variants built */
static const double BATCH_BUDGET_NS = 250e6; /* timing of one batch of candidates */
/* Each final interleaved run (the leaders', then the finalists' three: tuner.c); --rigor quick
 * takes a fifth of it, for seconds. */
static const double RETIME_BUDGET_NS = 2.5e9;

/* A timing budget, scaled by the configuration's time_scale. */
static double budget_ns(lntune_plan *p, double ns) {
    const double scale = lntune_plan_config(p)->time_scale;
    return scale > 0 && scale < 1 ? ns * scale : ns;
}

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

/* The op x shape at hand (cleared by end). */
typedef struct {
    char **list;
    size_t n;
    void *verifier;      /* of the problem's direction */
    lntune_problem prob; /* buffers, args, bytes moved and the copy of them, per direction */
    int has_prob;
    compiled *units;
    size_t nunits, capunits;
    int *unit_of;            /* variant -> unit index, -1 unknown */
    int *threads_of;         /* variant -> threads */
    char (*emit_error)[512]; /* variant -> why it did not emit ("" if it did) */
    lntune_jit_module *copy_modules[MAX_COPIES];
    lntune_timed copies[MAX_COPIES]; /* all defined: the sandbox copies them whole */
    size_t ncopies, nfinal;          /* built; re-timed with the leaders */
    lntune_timed reference;          /* the fastest copy: the drift reference (timing.h) */
    lntune_incumbent incumbent;      /* each batch's reference once there is one (incumbent.h) */
    double final_copy_ns;            /* the reference's median in the last FINAL run */
    lntune_source winner_src;        /* the artifact's */
    void *winner_so;
} shape_state;

/* The CPU across a run. */
typedef struct {
    lntune_gen *gen;
    lntune_jit *jit;
    lntune_pool *pool;
    lntune_cpu_info cpu;
    char host_flag[64];      /* -DLNTUNE_HOST=<fingerprint>, see build_units */
    int retune;              /* the run's --retune: measure the crossovers again too */
    int64_t streaming_bytes; /* the built-in's threshold, as liblntune's (builtin_policy.h) */
    int64_t streaming_row_alignment; /* and the row alignment it needs */
    shape_state s;
    /* The copy finalists last chosen, by their place in build_copies' list, and for what: the
     * next op of the same rows, H and bytes takes them without timing 50 copies again (about
     * 5 s a shape at 2048x4096). They are re-timed with its kernels in every final run. */
    struct {
        int64_t rows, H;
        double bytes;
        size_t ncopies, nfinal, order[LNTUNE_COPY_FINALISTS];
    } copy_memo;
} cpu_target;

int64_t lntune_tune_default_rows(int64_t H) {
    int64_t rows = (INT64_C(8) << 20) / (H > 0 ? H : 1);
    return rows > 0 ? rows : 1;
}

/* Emits, compiles (in parallel), loads and verifies the sources of variants idx[0..n). */
static void build_units(cpu_target *c, lntune_plan *p, const size_t *idx, size_t n) {
    lntune_tune_result *res = lntune_plan_result(p);
    const char *op = lntune_plan_op(p);
    size_t first_new = c->s.nunits, nnew = 0;
    const char **texts = calloc(n, sizeof *texts);
    lntune_source *srcs = calloc(n, sizeof *srcs);
    if (!texts || !srcs) goto done;
    for (size_t k = 0; k < n; ++k) {
        size_t v = idx[k];
        lntune_source src;
        if (lntune_gen_emit(c->gen, "cpu", op, c->s.list[v], lntune_plan_shape(p), NULL, &src) !=
            LNTUNE_OK) {
            snprintf(c->s.emit_error[v], sizeof c->s.emit_error[v], "%s",
                     lntune_gen_errmsg(c->gen));
            continue;
        }
        c->s.threads_of[v] = src.threads;
        uint64_t h = lntune_fnv1a(LNTUNE_FNV_INIT, src.text, strlen(src.text));
        size_t u = 0;
        while (u < c->s.nunits && c->s.units[u].text_hash != h) ++u;
        if (u < c->s.nunits) {
            c->s.unit_of[v] = (int)u;
            lntune_source_free(&src);
            continue;
        }
        if (c->s.nunits == c->s.capunits) {
            size_t cap = c->s.capunits ? 2 * c->s.capunits : 64;
            compiled *grown = realloc(c->s.units, cap * sizeof *grown);
            if (!grown) {
                lntune_source_free(&src);
                break;
            }
            c->s.units = grown;
            c->s.capunits = cap;
        }
        memset(&c->s.units[c->s.nunits], 0, sizeof c->s.units[0]);
        c->s.units[c->s.nunits].text_hash = h;
        c->s.unit_of[v] = (int)c->s.nunits++;
        srcs[nnew] = src;
        texts[nnew] = srcs[nnew].text;
        nnew++;
    }
    if (nnew == 0) goto done;
    lntune_plan_progress(p, "compile");
    lntune_jit_object *objs = calloc(nnew, sizeof *objs);
    if (!objs) goto done;
    /* Objects are -march=native: the fingerprint keeps them out of other hosts' cache. */
    const char *flags[] = {c->host_flag, NULL};
    const char *const **extra = calloc(nnew, sizeof *extra);
    for (size_t k = 0; extra && k < nnew; ++k) extra[k] = flags;
    lntune_jit_compile_many(c->jit, texts, (const char *const *const *)extra, nnew,
                            lntune_pool_threads(c->pool), objs);
    free(extra);
    lntune_plan_progress(p, "verify");
    /* Loaded here, run only in the sandbox's worker: a crash or hang is the variant's fault. */
    lntune_sandbox_check *checks = calloc(nnew, sizeof *checks);
    lntune_sandbox_outcome *outs = calloc(nnew, sizeof *outs);
    size_t *check_of = calloc(nnew, sizeof *check_of), nchecks = 0;
    for (size_t k = 0; k < nnew; ++k) {
        compiled *u = &c->s.units[first_new + k];
        u->obj = objs[k];
        if (u->obj.cache_hit)
            res->cache_hits++;
        else
            res->compiled++;
        if (!u->obj.data) {
            snprintf(u->message, sizeof u->message, "compile failed: %s",
                     u->obj.diag ? u->obj.diag : lntune_jit_errmsg(c->jit));
            continue;
        }
        if (lntune_jit_load(c->jit, u->obj.data, u->obj.len, "lntune_kernel", &u->module, &u->fn)) {
            snprintf(u->message, sizeof u->message, "load failed: %s", lntune_jit_errmsg(c->jit));
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
    c->s.prob.dir->sandbox_verify(c->s.verifier, checks, nchecks, c->pool, outs);
    for (size_t q = 0; q < nchecks; ++q) {
        compiled *u = &c->s.units[check_of[q]];
        if (outs[q].state != LNTUNE_SANDBOX_DONE) {
            u->crashed = outs[q].state == LNTUNE_SANDBOX_CRASHED;
            u->lost = !u->crashed;
            snprintf(u->message, sizeof u->message, "%s", outs[q].message);
            continue;
        }
        u->max_error = checks[q].result.max_error;
        res->verified++;
        if (checks[q].rc == LNTUNE_OK)
            u->ok = 1;
        else
            snprintf(u->message, sizeof u->message, "%s", checks[q].result.message);
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

/* Variant v's outcome from its unit (built). */
static lntune_outcome unit_outcome(const cpu_target *c, size_t v) {
    lntune_outcome o = {.state = LNTUNE_OUTCOME_FAILED};
    if (c->s.unit_of[v] < 0) {
        snprintf(o.message, sizeof o.message, "%s", c->s.emit_error[v]);
        if (!c->s.emit_error[v][0]) o.state = LNTUNE_OUTCOME_LOST; /* out of memory: not run */
        return o;
    }
    const compiled *u = &c->s.units[c->s.unit_of[v]];
    o.max_error = u->max_error;
    o.compile_ms = u->obj.compile_ms;
    snprintf(o.artifact_key, sizeof o.artifact_key, "%s", u->obj.key);
    o.crashed = u->crashed;
    snprintf(o.message, sizeof o.message, "%s", u->message);
    if (u->lost)
        o.state = LNTUNE_OUTCOME_LOST;
    else if (u->ok)
        o.state = LNTUNE_OUTCOME_OK;
    else if (u->fn && !u->crashed) /* loaded, then failed verification; a crash is a failure */
        o.state = LNTUNE_OUTCOME_WRONG;
    return o;
}

static void check(void *state, lntune_plan *p, const size_t *v, size_t n, lntune_outcome *out) {
    cpu_target *c = state;
    size_t *todo = malloc((n ? n : 1) * sizeof *todo), ntodo = 0;
    for (size_t k = 0; todo && k < n; ++k)
        if (c->s.unit_of[v[k]] < 0) todo[ntodo++] = v[k];
    if (ntodo) build_units(c, p, todo, ntodo);
    free(todo);
    for (size_t k = 0; k < n; ++k) out[k] = unit_outcome(c, v[k]);
}

/* The figures of a timed candidate, or why it failed, into o. */
static void timed_outcome(compiled *u, const lntune_timed *t, const lntune_sandbox_outcome *s,
                          const char *returned, lntune_outcome *o) {
    if (s->state == LNTUNE_SANDBOX_LOST) {
        o->state = LNTUNE_OUTCOME_LOST;
        return;
    }
    if (!t->failed) {
        o->t = *t;
        return;
    }
    o->state = LNTUNE_OUTCOME_FAILED;
    o->crashed = s->state == LNTUNE_SANDBOX_CRASHED;
    snprintf(o->message, sizeof o->message, "%s", o->crashed ? s->message : returned);
    /* Variants sharing its source fail with it. */
    u->ok = 0;
    u->crashed = 1;
    snprintf(u->message, sizeof u->message, "%s", o->message);
}

/*
 * A batch: the candidates, then the batch's references (not candidates): the incumbent (and once
 * the one it replaced: incumbent.h), else the fastest copy. A copy's speed follows the machine's
 * bandwidth more than a norm kernel's does, so a ratio to another norm kernel ranks batches taken
 * in different bandwidth regimes more fairly. A final run: the candidates and the copy finalists,
 * the first copy the drift reference, for RETIME_BUDGET_NS. Alone: the candidate with the
 * reference, its ratio scaled to the reference's median in the last final run.
 */
static void time_variants(void *state, lntune_plan *p, const size_t *v, size_t n,
                          lntune_time_mode mode, lntune_outcome *out, double *copy_ns) {
    cpu_target *c = state;
    const size_t extra = mode == LNTUNE_TIME_FINAL ? c->s.nfinal : 2;
    lntune_timed *group = calloc(n + extra, sizeof *group);
    lntune_sandbox_outcome *outs = calloc(n + extra, sizeof *outs);
    size_t *live = calloc(n + 1, sizeof *live), m = 0; /* out index of group[q] */
    if (!group || !outs || !live) {
        for (size_t k = 0; k < n; ++k) out[k].state = LNTUNE_OUTCOME_LOST;
        goto done;
    }
    for (size_t k = 0; k < n; ++k) {
        const compiled *u = &c->s.units[c->s.unit_of[v[k]]];
        if (!u->ok) { /* its source crashed while another variant of it was timed */
            out[k].state = LNTUNE_OUTCOME_FAILED;
            out[k].crashed = 1;
            snprintf(out[k].message, sizeof out[k].message, "%s", u->message);
            continue;
        }
        group[m] = c->s.prob.dir->candidate(&c->s.prob, u->fn, c->s.threads_of[v[k]]);
        live[m++] = k;
    }
    size_t ng = m;
    if (mode == LNTUNE_TIME_BATCH) {
        ng += lntune_incumbent_refs(&c->s.incumbent, &c->s.reference, group + m);
        lntune_sandbox_time(group, ng, &c->s.prob.args, c->pool, MIN_ROUNDS,
                            budget_ns(p, BATCH_BUDGET_NS), outs);
        lntune_incumbent_scale(&c->s.incumbent, group, m, group + m, ng - m);
    } else if (mode == LNTUNE_TIME_FINAL) {
        for (size_t q = 0; q < c->s.nfinal; ++q) {
            group[ng] = c->s.copies[q];
            group[ng++].reference = q == 0;
        }
        const int quick = lntune_plan_config(p)->rigor == LNTUNE_RIGOR_QUICK;
        lntune_sandbox_time(group, ng, &c->s.prob.args, c->pool, RETIME_ROUNDS,
                            budget_ns(p, quick ? RETIME_BUDGET_NS / 5 : RETIME_BUDGET_NS), outs);
        *copy_ns = NAN;
        for (size_t q = m; q < ng; ++q)
            if (!group[q].failed && !(group[q].median_ns >= *copy_ns))
                *copy_ns = group[q].median_ns;
        c->s.final_copy_ns = ng > m && !group[m].failed ? group[m].median_ns : NAN;
    } else if (m == 1) {
        group[ng++] = c->s.reference;
        lntune_sandbox_time(group, ng, &c->s.prob.args, c->pool, MIN_ROUNDS,
                            budget_ns(p, BATCH_BUDGET_NS), outs);
        if (group[1].failed || isnan(c->s.final_copy_ns))
            group[0].failed = 1;
        else /* its ratio, on the reference's median in the final run */
            group[0].median_ns = group[0].median_ns / group[1].median_ns * c->s.final_copy_ns;
    }
    for (size_t q = 0; q < m; ++q) {
        const size_t k = live[q];
        timed_outcome(&c->s.units[c->s.unit_of[v[k]]], &group[q], &outs[q],
                      mode == LNTUNE_TIME_BATCH ? "the kernel returned an error code while timed"
                                                : "the kernel returned an error code",
                      &out[k]);
        if (mode == LNTUNE_TIME_BATCH && out[k].state == LNTUNE_OUTCOME_OK)
            lntune_incumbent_offer(&c->s.incumbent, &group[q]);
    }
done:
    free(group);
    free(outs);
    free(live);
}

/* Compiles the copy kernels of the same bytes, checks that they copy, and loads them. */
static size_t build_copies(cpu_target *c) {
    char **list;
    size_t n, got = 0;
    lntune_shape any = {.affine = LNTUNE_AFFINE_ANY};
    if (lntune_gen_variants(c->gen, "cpu", "copy", &any, &list, &n) != LNTUNE_OK) return 0;
    for (size_t i = 0; i < n && got < MAX_COPIES; ++i) {
        lntune_source src;
        lntune_jit_object obj = {0};
        if (lntune_gen_emit(c->gen, "cpu", "copy", list[i], &any, NULL, &src) != LNTUNE_OK)
            continue;
        lntune_timed *t = &c->s.copies[got];
        if (lntune_jit_compile(c->jit, src.text, NULL, &obj) == LNTUNE_OK &&
            lntune_jit_load(c->jit, obj.data, obj.len, "lntune_kernel", &c->s.copy_modules[got],
                            &t->fn) == LNTUNE_OK) {
            t->threads = src.threads;
            lntune_kernel_args a = c->s.prob.copy_args;
            a.rows = a.rows < 4 ? a.rows : 4;
            float *y = a.y;
            y[0] = -1.0f;
            lntune_pool_run_kernel(c->pool, t->fn, &a, t->threads);
            t->args = &c->s.prob.copy_args;
            if (memcmp(a.x, a.y, (size_t)(a.rows * a.H) * sizeof(float)) == 0)
                got++;
            else
                lntune_jit_unload(c->s.copy_modules[got]);
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

/* Puts the copy finalists chosen for the last op in front when this op moves the same bytes at
 * the same rows and H (c->copy_memo); 0 when it does not. */
static int reuse_copy_finalists(cpu_target *c, const lntune_shape *s) {
    if (c->copy_memo.nfinal == 0 || c->copy_memo.rows != s->rows || c->copy_memo.H != s->H ||
        c->copy_memo.bytes != c->s.prob.bytes || c->copy_memo.ncopies != c->s.ncopies)
        return 0;
    lntune_timed front[LNTUNE_COPY_FINALISTS];
    for (size_t k = 0; k < c->copy_memo.nfinal; ++k) front[k] = c->s.copies[c->copy_memo.order[k]];
    size_t m = c->copy_memo.nfinal;
    lntune_timed rest[MAX_COPIES];
    for (size_t q = 0, r = 0; q < c->s.ncopies; ++q) {
        size_t k = 0;
        while (k < c->copy_memo.nfinal && c->copy_memo.order[k] != q) ++k;
        if (k == c->copy_memo.nfinal) rest[r++] = c->s.copies[q];
    }
    memcpy(c->s.copies, front, m * sizeof *front);
    memcpy(c->s.copies + m, rest, (c->s.ncopies - m) * sizeof *rest);
    c->s.nfinal = m;
    return 1;
}

/*
 * The buffers and the verifier (only now: a winner read back from the database needs neither),
 * then every copy variant timed (interleaved, in the sandbox, MIN_ROUNDS rounds: they only pick
 * the finalists), LNTUNE_COPY_FINALISTS moved to the front (lntune_tune_copy_finalists): those
 * are re-timed with the leaders, so "the copy" is the best of all of them without 50 copies in
 * the final run. The next op of the same bytes takes the same finalists (copy_memo).
 */
static int prepare(void *state, lntune_plan *p, double *bytes) {
    cpu_target *c = state;
    const lntune_shape *s = lntune_plan_shape(p);
    const char *op = lntune_plan_op(p);
    int rc = lntune_problem_init(&c->s.prob, op, s->types, s->fusion, s->rows, s->H,
                                 lntune_pool_threads(c->pool));
    c->s.has_prob = rc == LNTUNE_OK;
    if (rc == LNTUNE_OK && (rc = lntune_problem_verifier(&c->s.prob, &c->s.verifier)) != LNTUNE_OK)
        lntune_plan_fail(p, LNTUNE_ENOMEM, "cannot prepare the %s verifier for H=%lld", op,
                         (long long)s->H);
    else if (rc != LNTUNE_OK)
        lntune_plan_fail(p, LNTUNE_ENOMEM, "out of memory for the %s buffers of %lldx%lld", op,
                         (long long)s->rows, (long long)s->H);
    if (rc != LNTUNE_OK) return rc;
    *bytes = c->s.prob.bytes;
    c->s.ncopies = build_copies(c);
    if (!reuse_copy_finalists(c, s) && c->s.ncopies > 0) {
        lntune_kernel_fn built[MAX_COPIES];
        for (size_t q = 0; q < c->s.ncopies; ++q) built[q] = c->s.copies[q].fn;
        lntune_sandbox_outcome outs[MAX_COPIES];
        lntune_sandbox_time(c->s.copies, c->s.ncopies, &c->s.prob.args, c->pool, MIN_ROUNDS,
                            budget_ns(p, BATCH_BUDGET_NS * 2), outs);
        c->s.nfinal = lntune_tune_copy_finalists(c->s.copies, c->s.ncopies, LNTUNE_COPY_FINALISTS);
        c->copy_memo.rows = s->rows;
        c->copy_memo.H = s->H;
        c->copy_memo.bytes = c->s.prob.bytes;
        c->copy_memo.ncopies = c->s.ncopies;
        c->copy_memo.nfinal = c->s.nfinal;
        for (size_t k = 0; k < c->s.nfinal; ++k)
            for (size_t q = 0; q < c->s.ncopies; ++q)
                if (built[q] == c->s.copies[k].fn) c->copy_memo.order[k] = q;
    }
    if (c->s.nfinal > 0) {
        c->s.reference = c->s.copies[0];
        c->s.reference.reference = 1;
    }
    return LNTUNE_OK;
}

/*
 * The index in the list of the kernel liblntune runs for the shape untuned, run as it runs it
 * (core/builtin_policy.h: its ISA level, its threads, non-temporal stores past the crossover);
 * c->s.n when the template names none for the op (or the shape rules it out).
 */
static size_t builtin_index(cpu_target *c, lntune_plan *p) {
    const lntune_shape *s = lntune_plan_shape(p);
    const int64_t bytes = lntune_fusion_bytes_per_element(s->types, s->fusion);
    const lntune_direction *dir = NULL;
    const int backward =
        lntune_op_text_parse(lntune_plan_op(p), NULL, &dir, NULL) != 0 || dir->suffix[0] != '\0';
    const int streams = !backward &&
                        lntune_builtin_streams(s->rows * s->H, bytes, c->streaming_bytes) &&
                        lntune_builtin_rows_stream(s->H, (int64_t)lntune_type_size(s->types.y),
                                                   c->streaming_row_alignment);
    const lntune_builtin_level *level =
        lntune_builtin_level_for(c->cpu.isa, !backward && s->fusion == LNTUNE_FUSION_NONE, streams);
    char *want = NULL;
    size_t found = c->s.n;
    const int threads = lntune_builtin_threads(s->rows, s->H, lntune_pool_threads(c->pool));
    if (lntune_builtin_run_variant(c->gen, level, lntune_plan_op(p), s, threads, &want) ==
        LNTUNE_OK)
        for (size_t i = 0; i < c->s.n && found == c->s.n; ++i)
            if (strcmp(c->s.list[i], want) == 0) found = i;
    free(want);
    return found;
}

static int variants(void *state, lntune_plan *p, const char *const **list, size_t *n, size_t *naive,
                    size_t *builtin) {
    cpu_target *c = state;
    if (lntune_gen_variants(c->gen, "cpu", lntune_plan_op(p), lntune_plan_shape(p), &c->s.list,
                            &c->s.n) != LNTUNE_OK)
        return LNTUNE_ETEMPLATE;
    c->s.unit_of = malloc((c->s.n + 1) * sizeof *c->s.unit_of);
    c->s.threads_of = calloc(c->s.n + 1, sizeof *c->s.threads_of);
    c->s.emit_error = calloc(c->s.n + 1, sizeof *c->s.emit_error);
    if (!c->s.unit_of || !c->s.threads_of || !c->s.emit_error) {
        lntune_plan_fail(p, LNTUNE_ENOMEM, "out of memory");
        return LNTUNE_ENOMEM;
    }
    for (size_t i = 0; i < c->s.n; ++i) c->s.unit_of[i] = -1;
    *list = (const char *const *)c->s.list;
    *n = c->s.n;
    *naive = 0; /* every knob's first value (search.h) */
    *builtin = builtin_index(c, p);
    return LNTUNE_OK;
}

static int artifact(void *state, lntune_plan *p, size_t v, lntune_artifact *art,
                    lntune_kernel_traits *traits) {
    cpu_target *c = state;
    if (c->s.winner_src.text) lntune_source_free(&c->s.winner_src); /* an earlier call's */
    free(c->s.winner_so);
    c->s.winner_so = NULL;
    if (c->s.unit_of[v] < 0 || !c->s.units[c->s.unit_of[v]].ok ||
        lntune_gen_emit(c->gen, "cpu", lntune_plan_op(p), c->s.list[v], lntune_plan_shape(p), NULL,
                        &c->s.winner_src) != LNTUNE_OK)
        return LNTUNE_ERROR;
    const compiled *u = &c->s.units[c->s.unit_of[v]];
    size_t so_len = 0;
    char *diag = NULL;
    lntune_jit_link_shared(c->jit, u->obj.data, u->obj.len, &c->s.winner_so, &so_len, &diag);
    free(diag);
    *art = (lntune_artifact){u->obj.key,
                             c->s.winner_src.text,
                             lntune_jit_compiler_version(c->jit),
                             "-std=c11 -O3 -march=native -fPIC",
                             "lntune_kernel",
                             u->obj.data,
                             u->obj.len,
                             c->s.winner_so,
                             so_len,
                             NULL,
                             NULL};
    *traits = (lntune_kernel_traits){c->s.winner_src.threads, !c->s.winner_src.fixed_h,
                                     c->s.winner_src.any_alignment};
    return LNTUNE_OK;
}

static void end(void *state, lntune_plan *p) {
    (void)p;
    cpu_target *c = state;
    for (size_t q = 0; q < c->s.ncopies; ++q) lntune_jit_unload(c->s.copy_modules[q]);
    for (size_t u = 0; u < c->s.nunits; ++u) {
        lntune_jit_unload(c->s.units[u].module);
        lntune_jit_object_free(&c->s.units[u].obj);
    }
    free(c->s.units);
    free(c->s.unit_of);
    free(c->s.threads_of);
    free(c->s.emit_error);
    if (c->s.verifier) c->s.prob.dir->verifier_destroy(c->s.verifier);
    if (c->s.has_prob) lntune_problem_free(&c->s.prob);
    lntune_gen_free_list(c->s.list, c->s.n);
    if (c->s.winner_src.text) lntune_source_free(&c->s.winner_src);
    free(c->s.winner_so);
    memset(&c->s, 0, sizeof c->s);
}

/* The op template's family knobs (target.h). */
static int families(void *state, lntune_plan *p, char **csv) {
    cpu_target *c = state;
    return lntune_gen_families(c->gen, "cpu", lntune_plan_op(p), csv);
}

/* op's template hash + compiler version: a measurement holds only for both. */
static int op_code_hash(cpu_target *c, const char *op, char *out, size_t size) {
    lntune_source src;
    lntune_shape any = {0};
    if (lntune_gen_emit(c->gen, "cpu", op, "", &any, NULL, &src) != LNTUNE_OK)
        return LNTUNE_ETEMPLATE;
    const char *cv = lntune_jit_compiler_version(c->jit);
    snprintf(out, size, "%s-%08llx", src.template_hash,
             (unsigned long long)(lntune_fnv1a(LNTUNE_FNV_INIT, cv, strlen(cv)) & 0xffffffffu));
    lntune_source_free(&src);
    return LNTUNE_OK;
}

static int code_hash(void *state, lntune_plan *p, char *out, size_t size) {
    cpu_target *c = state;
    if (op_code_hash(c, lntune_plan_op(p), out, size) != LNTUNE_OK) {
        lntune_plan_fail(p, LNTUNE_ETEMPLATE, "%s", lntune_gen_errmsg(c->gen));
        return LNTUNE_ETEMPLATE;
    }
    return LNTUNE_OK;
}

/* Crossover name of hw at exactly threads, measured with the templates of hash, into *value. */
static int stored_crossover(lntune_db *db, int64_t hw, const char *name, int threads,
                            const char *hash, int64_t *value) {
    char stored_hash[64] = "";
    int at = 0;
    return lntune_db_get_crossover(db, hw, name, threads, value, &at, stored_hash,
                                   sizeof stored_hash) == LNTUNE_OK &&
           at == threads && strcmp(stored_hash, hash) == 0;
}

/*
 * The built-in's streaming crossover and the row alignment it needs, at this run's threads
 * (crossover.h): read back when they were measured with these templates and compiler, else
 * measured and stored. Where they cannot be measured (no streaming built-in, templates without
 * the presets) liblntune's rules stand.
 */
static void streaming_crossover(cpu_target *c, lntune_db *db, int64_t hw) {
    const int threads = lntune_pool_threads(c->pool);
    char hash[64];
    int64_t measured = 0, alignment = 0;
    if (op_code_hash(c, "layernorm", hash, sizeof hash) == LNTUNE_OK &&
        (c->retune ||
         !stored_crossover(db, hw, LNTUNE_CROSSOVER_STREAMING_BYTES, threads, hash, &measured) ||
         !stored_crossover(db, hw, LNTUNE_CROSSOVER_STREAMING_ROW_ALIGNMENT, threads, hash,
                           &alignment))) {
        char err[256];
        const char *flags[] = {c->host_flag, NULL};
        measured = alignment = 0;
        if (lntune_crossover_streaming(c->gen, c->jit, c->pool, &c->cpu, flags, &measured,
                                       &alignment, err, sizeof err) == LNTUNE_OK) {
            lntune_db_put_crossover(db, hw, LNTUNE_CROSSOVER_STREAMING_BYTES, threads, measured,
                                    hash);
            lntune_db_put_crossover(db, hw, LNTUNE_CROSSOVER_STREAMING_ROW_ALIGNMENT, threads,
                                    alignment, hash);
        } else {
            measured = alignment = 0; /* a failed measurement leaves liblntune's rules */
        }
    }
    c->streaming_bytes = lntune_builtin_streaming_bytes(&c->cpu, measured, NULL);
    c->streaming_row_alignment = lntune_builtin_streaming_row_alignment(alignment, NULL);
}

static int hardware(void *state, lntune_db *db, int64_t *hw, char *err, size_t errlen) {
    cpu_target *c = state;
    const int rc = lntune_db_put_hardware(db, &c->cpu, lntune_jit_compiler_version(c->jit), hw);
    if (rc != LNTUNE_OK)
        snprintf(err, errlen, "%s", lntune_db_errmsg(db));
    else
        streaming_crossover(c, db, *hw);
    return rc;
}

/* v[0] against v[1] on a problem of rows x H of their own: buffers and data made here (the same
 * every run), then one interleaved run at a batch's budget, in the sandbox. */
static int time_at(void *state, lntune_plan *p, const size_t v[2], int64_t rows, int64_t H,
                   double *ratio) {
    cpu_target *c = state;
    const lntune_shape *s = lntune_plan_shape(p);
    *ratio = NAN;
    for (int k = 0; k < 2; ++k)
        if (!c->s.units[c->s.unit_of[v[k]]].ok) return LNTUNE_EINVAL;
    lntune_problem prob;
    int rc = lntune_problem_init(&prob, lntune_plan_op(p), s->types, s->fusion, rows, H,
                                 lntune_pool_threads(c->pool));
    if (rc != LNTUNE_OK) return rc;
    lntune_timed group[2];
    lntune_sandbox_outcome outs[2];
    for (int k = 0; k < 2; ++k)
        group[k] =
            prob.dir->candidate(&prob, c->s.units[c->s.unit_of[v[k]]].fn, c->s.threads_of[v[k]]);
    lntune_sandbox_time(group, 2, &prob.args, c->pool, MIN_ROUNDS, budget_ns(p, BATCH_BUDGET_NS),
                        outs);
    if (!group[0].failed && !group[1].failed && group[1].median_ns > 0)
        *ratio = group[0].median_ns / group[1].median_ns;
    lntune_problem_free(&prob);
    return isnan(*ratio) ? LNTUNE_EINVAL : LNTUNE_OK;
}

/* What the planner calls (target.h): name, leaders, by H, twins, recheck, then the functions in
 * its order. */
/* clang-format off */
static const lntune_target cpu_functions = {"cpu", TOP, 0, 1, 1, lntune_tune_default_rows,
    hardware, code_hash, variants, prepare, check, time_variants, artifact, end, families,
    time_at};
/* clang-format on */

int lntune_tune(const lntune_tune_config *cfg, lntune_tune_result **results, size_t *nresults,
                char *err, size_t errlen) {
    *results = NULL;
    *nresults = 0;
    cpu_target c = {0};
    int rc;
    lntune_cpu_info_get(&c.cpu);
    const int usable = lntune_cpu_usable_threads(&c.cpu); /* the affinity mask's CPUs */
    int threads = cfg->max_threads > 0 && cfg->max_threads < usable ? cfg->max_threads : usable;
    snprintf(c.host_flag, sizeof c.host_flag, "-DLNTUNE_HOST=0x%s", c.cpu.fingerprint);
    c.retune = cfg->retune;
    if ((rc = lntune_gen_open(NULL, &c.gen)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_gen_errmsg(c.gen));
        goto done;
    }
    lntune_gen_set_cores(c.gen, threads);
    if ((rc = lntune_jit_open(NULL, &c.jit)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_jit_errmsg(c.jit));
        goto done;
    }
    if ((rc = lntune_pool_create(threads, &c.pool)) != LNTUNE_OK) {
        snprintf(err, errlen, "cannot start %d threads", threads);
        goto done;
    }
    rc = lntune_plan_run(cfg, &cpu_functions, &c, results, nresults, err, errlen);
done:
    lntune_pool_destroy(c.pool);
    lntune_jit_close(c.jit);
    lntune_gen_close(c.gen);
    return rc;
}
