/*
 * cuda_target.c - the planner's target (target.h) for a CUDA device, and lntune_tune_cuda (see
 * cuda_tuner.h). Variants are compiled with NVRTC (cubin for the device's exact architecture,
 * plus PTX; the sources of one op and H carry over between row counts), verified on the device,
 * and timed with CUDA events interleaved with a device-to-device copy of the same bytes, on
 * buffers rotated past the L2.
 *
 * The backward ("layernorm_backward", "rmsnorm_backward"; fusion "residual": dresidual_out) goes
 * the same way with its pair of kernels (templates/cuda/norm_backward.lua): verified by the
 * backward checker, timed as the runtime calls it (saved statistics, dgamma and for LayerNorm
 * dbeta, the workspace grid of lntune_cuda_backward_call_grid); its bytes are x, dy (and
 * dresidual_out) read and dx written, as the CPU tuner counts them.
 */
#define _GNU_SOURCE
#include "cuda_tuner.h"

#include "cuda_check.h"
#include "cuda_check_backward.h"
#include "cuda_driver.h"
#include "cuda_fingerprint.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "half.h"
#include "hardware.h"
#include "lntune.h"
#include "nvrtc.h"
#include "problem.h"
#include "target.h"
#include "timing.h"
#include "tuning_db.h"
#include "verify.h"
#include "verify_backward.h"
#include "verify_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOP = 4, ROUNDS = 7, RETIME_ROUNDS = 25, WARMUP = 2, MAX_BUFFERS = 64 };
static const double L2_MULTIPLE = 4.0;  /* rotated inputs span at least 4x the L2 */
static const double BATCH_BYTES = 32e6; /* below this, a sample is a batch of launches */
enum { BATCH = 16 };

typedef struct {
    char *variant, *text;
    int affine;
    int64_t fixed_h;
    lntune_nvrtc_job compile;
    void *module, *fn;
    lntune_cuda_launch launch;
    void *finish;                         /* backward: the pair's second kernel */
    lntune_cuda_backward_launch backward; /* backward: both launch lines */
    int compiled;                         /* NVRTC has run on it (compile.rc says how) */
    int checked;                          /* loaded and verified: outcome says how */
    lntune_outcome outcome;
} candidate;

/* The compiled candidates of the previous op x shape: the next one of the same op and H (another
 * row count) has the same sources, so it takes these instead of compiling. */
typedef struct {
    const char *op;
    int64_t H;
    size_t n;
    char **texts;
    lntune_nvrtc_job *compiled;
} compile_cache;

static void cache_clear(compile_cache *k) {
    for (size_t i = 0; i < k->n; ++i) {
        free(k->texts[i]);
        lntune_nvrtc_output_free(&k->compiled[i].out);
    }
    free(k->texts);
    free(k->compiled);
    memset(k, 0, sizeof *k);
}

/* The verifier and the device checker of the job's direction. */
typedef struct {
    lntune_verifier *v;
    lntune_cuda_checker *checker;
    lntune_backward_verifier *bv; /* the backward's */
    lntune_cuda_backward_checker *bchecker;
} verifier_set;

/* The op x shape at hand, with the run's device, compiler and generator. */
typedef struct {
    lntune_plan *p;
    compile_cache *cache;
    lntune_gen *gen;
    const lntune_nvrtc *nv;
    lntune_cuda *cu;
    const lntune_cuda_info *info;
    const char *op;
    lntune_op norm;     /* LayerNorm or RMSNorm, of either direction */
    int backward;       /* op is a gradient ("layernorm_backward") */
    lntune_shape shape; /* with its types and fusion */
    char code_hash[64]; /* template hash + NVRTC version + architecture */
    candidate *c;
    size_t n;
    const char **names;  /* the candidates' variants, in order */
    verifier_set checks; /* the verifier and the device checker of the job's direction */
    candidate copy;      /* the device copy of the same bytes, timed in every batch */
    /* Per rotated buffer set: in holds x then residual, out y then residual_out; each is at
     * least copy_bytes, which the device copy moves from in to out. */
    uint64_t in[MAX_BUFFERS], out[MAX_BUFFERS], gamma, beta;
    /* Backward: in holds x, dy (and dresidual_out), out dx; the saved statistics, the
     * workspaces (max_parts rows of H floats each) and dgamma/dbeta. */
    uint64_t mean, rstd, ws[2], dgamma, dbeta;
    int64_t max_parts;
    uint64_t scales;            /* a quantized y with a scale per row: rows floats */
    size_t x_bytes, y_bytes;    /* where residual and residual_out start in in and out */
    size_t in_bytes, out_bytes; /* what a call reads and writes */
    size_t copy_bytes;          /* half of in_bytes + out_bytes */
    int nbuf, next_buf, batch;
    void *stream, *ev0, *ev1;
    double bytes; /* read and written by a call: x, residual, y, residual_out */
} job;

static int stopped(const job *j) {
    return lntune_plan_stopped(j->p);
}

static void device_failed(job *j, const char *what) {
    lntune_plan_fail(j->p, LNTUNE_ENODEVICE, "%s: %s", what, lntune_cuda_errmsg(j->cu));
}

int64_t lntune_tune_cuda_default_rows(int64_t H) {
    (void)H;
    return 16384;
}

/* The job of op x shape p (code_hash starts one). */
static job *job_of(void *state, lntune_plan *p) {
    job *j = state;
    if (j->p == p) return j;
    j->p = p;
    j->op = lntune_plan_op(p);
    j->shape = *lntune_plan_shape(p);
    const lntune_direction *dir = NULL;
    lntune_op_text_parse(j->op, &j->norm, &dir, NULL);
    j->backward = dir && dir->suffix[0] != '\0';
    return j;
}

/* One backward call of c on buffer set k, as the runtime makes it (cuda_dispatch.c). */
static int launch_backward(job *j, const candidate *c, int k) {
    const int64_t rows = j->shape.rows, H = j->shape.H;
    lntune_backward_kernel_args a = {.rows = rows,
                                     .H = H,
                                     .x_stride = H,
                                     .dy_stride = H,
                                     .dx_stride = H,
                                     .x = (const void *)(uintptr_t)j->in[k],
                                     .dy = (const void *)(uintptr_t)(j->in[k] + j->x_bytes),
                                     .gamma = (const void *)(uintptr_t)j->gamma,
                                     .mean = (const float *)(uintptr_t)j->mean,
                                     .rstd = (const float *)(uintptr_t)j->rstd,
                                     .dx = (void *)(uintptr_t)j->out[k],
                                     .eps = 1e-5f};
    if (j->shape.fusion == LNTUNE_FUSION_RESIDUAL) {
        a.dresidual_out = (const void *)(uintptr_t)(j->in[k] + 2 * j->x_bytes);
        a.dresidual_out_stride = H;
    }
    const int64_t grid = lntune_cuda_backward_call_grid(&c->backward, rows, H);
    const uint64_t ws[2] = {j->ws[0], j->norm == LNTUNE_OP_LAYERNORM ? j->ws[1] : 0};
    const uint64_t out[2] = {j->dgamma, ws[1] ? j->dbeta : 0};
    if (!c->backward.partials &&
        (lntune_cuda_fill32_async(j->cu, ws[0], 0, (size_t)H, j->stream) ||
         (ws[1] && lntune_cuda_fill32_async(j->cu, ws[1], 0, (size_t)H, j->stream))))
        return LNTUNE_ERROR;
    return lntune_cuda_backward_launch_pair(j->cu, c->fn, c->finish, &c->backward, &a, grid, ws,
                                            out, j->stream);
}

/* One timing sample in ns per call: c's kernel, or (c NULL) a device copy of the same bytes. */
static double sample_ns(job *j, const candidate *c) {
    const int ln = j->norm == LNTUNE_OP_LAYERNORM;
    const int64_t rows = j->shape.rows, H = j->shape.H;
    if (lntune_cuda_event_record(j->cu, j->ev0, j->stream)) goto fail;
    for (int b = 0; b < j->batch; ++b) {
        const int k = j->next_buf++ % j->nbuf;
        if (!c) {
            if (lntune_cuda_dtod(j->cu, j->out[k], j->in[k], j->copy_bytes, j->stream)) goto fail;
            continue;
        }
        if (j->backward) {
            if (launch_backward(j, c, k)) goto fail;
            continue;
        }
        lntune_kernel_args a = {.rows = rows,
                                .H = H,
                                .x_stride = H,
                                .y_stride = H,
                                .x = (const void *)(uintptr_t)j->in[k],
                                .y = (void *)(uintptr_t)j->out[k],
                                .gamma = (const void *)(uintptr_t)j->gamma,
                                .beta = ln ? (const void *)(uintptr_t)j->beta : NULL,
                                .eps = 1e-5f};
        if (j->shape.fusion != LNTUNE_FUSION_NONE) {
            a.residual = (const void *)(uintptr_t)(j->in[k] + j->x_bytes);
            a.residual_stride = H;
        }
        if (j->shape.fusion == LNTUNE_FUSION_RESIDUAL_OUT) {
            a.residual_out = (void *)(uintptr_t)(j->out[k] + j->y_bytes);
            a.residual_out_stride = H;
        }
        /* a quantized y's scale (the verifier's static one, or a scale per row written to
         * scales) and Gemma's offset, as the CPU tuner's timing problem has them */
        a.y_scale = lntune_type_quantized(j->shape.types.y)
                        ? lntune_quant_test_scale(j->shape.types.y)
                        : 0.0f;
        a.y_scales = (float *)(uintptr_t)j->scales;
        a.weight_offset = j->shape.affine == LNTUNE_AFFINE_OFFSET ? 1.0f : 0.0f;
        if (lntune_cuda_launch_kernel(j->cu, c->fn, lntune_cuda_launch_grid(&c->launch, rows),
                                      c->launch.block, lntune_cuda_launch_smem(&c->launch, H),
                                      j->stream, &a))
            goto fail;
    }
    float ms = 0.0f;
    if (lntune_cuda_event_record(j->cu, j->ev1, j->stream) ||
        lntune_cuda_event_elapsed_ms(j->cu, j->ev0, j->ev1, &ms))
        goto fail;
    return (double)ms * 1e6 / j->batch;
fail:
    device_failed(j, c ? c->variant : "device copy");
    return NAN;
}

/*
 * Times set[0..n) (the copy: a candidate with fn NULL) interleaved: every round visits each once,
 * starting one further each round, so drift hits all alike. The figures of each into t, by the
 * copy as the drift reference (timing.h).
 */
static void time_interleaved(job *j, candidate **set, size_t n, int rounds, lntune_timed *t) {
    double *samples = malloc(n * (size_t)rounds * sizeof *samples);
    if (!samples) {
        lntune_plan_fail(j->p, LNTUNE_ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; ++i)
        for (int w = 0; w < WARMUP && !stopped(j); ++w) sample_ns(j, set[i]->fn ? set[i] : NULL);
    for (int r = 0; r < rounds && !stopped(j); ++r)
        for (size_t q = 0; q < n && !stopped(j); ++q) {
            const size_t i = (q + (size_t)r) % n;
            samples[i * (size_t)rounds + (size_t)r] = sample_ns(j, set[i]->fn ? set[i] : NULL);
        }
    if (!stopped(j)) {
        for (size_t i = 0; i < n; ++i) t[i] = (lntune_timed){.reference = !set[i]->fn};
        lntune_timing_figures(t, n, samples, (size_t)rounds, rounds);
    }
    free(samples);
}

/* Emits every variant of the shape with gamma (the key's affine = 1). */
static int emit_all(job *j) {
    char **list = NULL;
    size_t count = 0;
    if (lntune_gen_variants(j->gen, "cuda", j->op, &j->shape, &list, &count) != LNTUNE_OK) {
        lntune_plan_fail(j->p, LNTUNE_ETEMPLATE, "%s", lntune_gen_errmsg(j->gen));
        return LNTUNE_ETEMPLATE;
    }
    j->c = calloc(count ? count : 1, sizeof *j->c);
    j->names = calloc(count ? count : 1, sizeof *j->names);
    int rc = j->c && j->names ? LNTUNE_OK : LNTUNE_ENOMEM;
    for (size_t i = 0; i < count && !rc; ++i) {
        lntune_source src;
        /* one serves calls with gamma and without; the offset's space is affine=offset alone */
        if (!j->backward && strstr(list[i], "affine=none")) continue;
        if (lntune_gen_emit(j->gen, "cuda", j->op, list[i], &j->shape, "lntune_norm", &src)) {
            lntune_plan_fail(j->p, LNTUNE_ETEMPLATE, "%s", lntune_gen_errmsg(j->gen));
            rc = LNTUNE_ETEMPLATE;
            break;
        }
        candidate *c = &j->c[j->n];
        j->names[j->n++] = c->variant = strdup(list[i]);
        c->text = src.text;
        c->affine = src.affine;
        c->fixed_h = src.fixed_h;
        src.text = NULL;
        lntune_source_free(&src);
    }
    lntune_gen_free_list(list, count);
    if (rc == LNTUNE_ENOMEM) lntune_plan_fail(j->p, rc, "out of memory");
    return rc;
}

/* Compiles the candidates idx[0..n) that NVRTC has not seen yet, together, on all cores. */
static int compile_batch(job *j, const size_t *idx, size_t n) {
    lntune_nvrtc_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    candidate **of = calloc(n ? n : 1, sizeof *of);
    if (!jobs || !of) {
        free(jobs);
        free(of);
        lntune_plan_fail(j->p, LNTUNE_ENOMEM, "out of memory");
        return LNTUNE_ENOMEM;
    }
    /* Sources compiled for the previous shape move over; the others go to NVRTC together. */
    compile_cache *k = j->cache;
    const int same = k->op && strcmp(k->op, j->op) == 0 && k->H == j->shape.H && k->n == j->n;
    size_t nnew = 0;
    for (size_t t = 0; t < n; ++t) {
        const size_t i = idx[t];
        candidate *c = &j->c[i];
        if (c->compiled) continue;
        c->compiled = 1;
        const lntune_nvrtc_output *o = same ? &k->compiled[i].out : NULL;
        if (o && (o->data || o->message) && strcmp(k->texts[i], c->text) == 0) {
            c->compile = k->compiled[i];
            ++lntune_plan_result(j->p)->cache_hits;
            memset(&k->compiled[i].out, 0, sizeof k->compiled[i].out);
            continue;
        }
        of[nnew] = c;
        jobs[nnew].source = c->text;
        jobs[nnew++].name = c->variant;
    }
    lntune_plan_progress(j->p, "compile");
    int rc = lntune_nvrtc_compile_many(j->nv, j->info->sm, LNTUNE_NVRTC_CUBIN, jobs, nnew, 0);
    for (size_t f = 0; f < nnew; ++f) of[f]->compile = jobs[f];
    free(jobs);
    free(of);
    if (rc) lntune_plan_fail(j->p, LNTUNE_ENOMEM, "cannot start the compile threads");
    return rc;
}

/* Loads c (backward: its pair), parses its launch lines and lets it have the shared memory of
 * rows of max_h; the message of a failure in why. */
static int load(job *j, candidate *c, int64_t max_h, char *why, size_t size) {
    const int bad_line = j->backward ? lntune_cuda_backward_launch_parse(c->text, &c->backward)
                                     : lntune_cuda_launch_parse(c->text, &c->launch);
    if (!bad_line && j->backward) c->launch = c->backward.main;
    if (bad_line ||
        lntune_cuda_module_load(j->cu, c->compile.out.data, "lntune_norm", &c->module, &c->fn) ||
        (j->backward &&
         lntune_cuda_module_function(j->cu, c->module, "lntune_norm_dgamma", &c->finish))) {
        snprintf(why, size, "cannot load: %s",
                 bad_line ? "no launch line" : lntune_cuda_errmsg(j->cu));
        return LNTUNE_ERROR;
    }
    const int64_t smem = lntune_cuda_launch_smem(&c->launch, max_h);
    if (smem > 48 * 1024 && lntune_cuda_set_max_smem(j->cu, c->fn, smem)) {
        snprintf(why, size, "%lld bytes of shared memory refused: %s", (long long)smem,
                 lntune_cuda_errmsg(j->cu));
        return LNTUNE_ERROR;
    }
    return LNTUNE_OK;
}

/* The rows the verifier runs: one element, odd, and the shape's H. */
static size_t verify_hs(const job *j, int64_t hs[3], int64_t *max_h) {
    const int64_t H = j->shape.H;
    hs[0] = 1, hs[1] = 17, hs[2] = H;
    *max_h = H > 17 ? H : 17;
    return H == 1 || H == 17 ? 2 : 3;
}

/* Prepares the verifier and the device checker of the job's direction, once per shape. */
static int checks_open(job *j) {
    int64_t hs[3], max_h;
    const size_t nh = verify_hs(j, hs, &max_h);
    const int64_t max_floats = 8 * (max_h + 16);
    verifier_set *s = &j->checks;
    const int failed =
        j->backward
            ? lntune_backward_verifier_create_fused(j->norm, j->shape.types, j->shape.fusion, hs,
                                                    nh, 0, &s->bv) ||
                  lntune_cuda_backward_checker_create(j->cu, max_floats, max_h, &s->bchecker)
            : lntune_verifier_create_fused(j->norm, j->shape.types, j->shape.fusion, hs, nh, 0,
                                           &s->v) ||
                  lntune_cuda_checker_create(j->cu, max_floats, max_h, &s->checker);
    if (failed) device_failed(j, "cannot prepare the verifier");
    return failed;
}

static void checks_close(job *j) {
    verifier_set *s = &j->checks;
    lntune_cuda_checker_destroy(s->checker);
    lntune_verifier_destroy(s->v);
    lntune_cuda_backward_checker_destroy(s->bchecker);
    lntune_backward_verifier_destroy(s->bv);
    memset(s, 0, sizeof *s);
}

/* Loads and verifies a compiled candidate: its outcome. */
static lntune_outcome check_one(job *j, candidate *c) {
    lntune_outcome o = {.state = LNTUNE_OUTCOME_FAILED};
    o.compile_ms = c->compile.out.compile_ms;
    if (c->compile.rc) {
        snprintf(o.message, sizeof o.message, "%s", c->compile.out.message);
        return o;
    }
    ++lntune_plan_result(j->p)->compiled;
    int64_t hs[3], max_h;
    verify_hs(j, hs, &max_h);
    if (load(j, c, max_h, o.message, sizeof o.message)) return o;
    lntune_verify_result vr;
    const verifier_set *s = &j->checks;
    int rc = j->backward ? lntune_cuda_backward_checker_run(s->bchecker, s->bv, c->fn, c->finish,
                                                            &c->backward, c->fixed_h, &vr)
                         : lntune_cuda_checker_run(s->checker, s->v, c->fn, &c->launch, c->affine,
                                                   c->fixed_h, &vr);
    o.max_error = vr.max_error;
    snprintf(o.message, sizeof o.message, "%s", rc ? vr.message : "");
    if (rc == LNTUNE_ENODEVICE) {
        lntune_plan_fail(j->p, LNTUNE_ENODEVICE,
                         "the device failed on %s (recorded as failed; a rerun goes on without "
                         "it): %s",
                         c->variant, vr.message);
        return o;
    }
    if (rc) {
        o.state = LNTUNE_OUTCOME_WRONG;
        return o;
    }
    ++lntune_plan_result(j->p)->verified;
    o.state = LNTUNE_OUTCOME_OK;
    return o;
}

static void check(void *state, lntune_plan *p, const size_t *v, size_t n, lntune_outcome *out) {
    job *j = job_of(state, p);
    for (size_t k = 0; k < n; ++k) out[k] = (lntune_outcome){.state = LNTUNE_OUTCOME_LOST};
    if (stopped(j) || compile_batch(j, v, n)) return;
    lntune_plan_progress(p, "verify");
    for (size_t k = 0; k < n && !stopped(j); ++k) {
        candidate *c = &j->c[v[k]];
        if (!c->checked) c->outcome = check_one(j, c);
        c->checked = 1;
        out[k] = c->outcome;
    }
}

/* The correct candidates v[0..n) and the copy, interleaved: ROUNDS in a batch, RETIME_ROUNDS
 * else. */
static void time_variants(void *state, lntune_plan *p, const size_t *v, size_t n,
                          lntune_time_mode mode, lntune_outcome *out, double *copy_ns) {
    job *j = job_of(state, p);
    candidate **set = calloc(n + 1, sizeof *set);
    lntune_timed *t = calloc(n + 1, sizeof *t);
    if (!set || !t) {
        lntune_plan_fail(p, LNTUNE_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n; ++k) set[k] = &j->c[v[k]];
    set[n] = &j->copy;
    time_interleaved(j, set, n + 1, mode == LNTUNE_TIME_BATCH ? ROUNDS : RETIME_ROUNDS, t);
    if (stopped(j)) goto done;
    for (size_t k = 0; k < n; ++k) out[k].t = t[k];
    *copy_ns = t[n].median_ns;
done:
    for (size_t k = 0; stopped(j) && k < n; ++k) out[k].state = LNTUNE_OUTCOME_LOST;
    free(set);
    free(t);
}

/* Rounds the n random floats at host to type and copies them to dev (bytes of that type). */
static int upload(job *j, uint64_t dev, float *host, size_t n, int type) {
    lntune_narrow_in_place(host, n, type);
    return lntune_cuda_htod(j->cu, dev, host, n * lntune_type_size(type));
}

/* Random floats in [-2, 2) from state. */
static void fill_random(float *host, size_t n, uint64_t *state) {
    for (size_t i = 0; i < n; ++i) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        host[i] = (float)(4.0 * ((double)(*state >> 11) / 9007199254740992.0 - 0.5));
    }
}

/* Fills elems elements of type at dev with random values, a chunk at a time. */
static int upload_random(job *j, uint64_t dev, size_t elems, int type, float *host, size_t chunk,
                         uint64_t *state) {
    const size_t e = lntune_type_size(type);
    for (size_t off = 0; off < elems; off += chunk) {
        const size_t n = elems - off < chunk ? elems - off : chunk;
        fill_random(host, n, state);
        if (upload(j, dev + off * e, host, n, type)) return LNTUNE_ENODEVICE;
    }
    return LNTUNE_OK;
}

/*
 * Device buffers rotated so that consecutive launches miss the L2: in (x, then residual) and out
 * (y, then residual_out), each in the shape's types. The copy moves half the bytes a call reads
 * and writes, from in to out, so that it too reads and writes j->bytes.
 */
static void size_buffers(job *j) {
    const lntune_types t = j->shape.types;
    const int fusion = j->shape.fusion;
    const size_t elems = (size_t)(j->shape.rows * j->shape.H);
    const size_t r_bytes = elems * lntune_type_size(lntune_types_residual(t));
    j->x_bytes = elems * lntune_type_size(t.x);
    j->y_bytes = elems * lntune_type_size(t.y);
    j->in_bytes = j->x_bytes + (fusion != LNTUNE_FUSION_NONE ? r_bytes : 0);
    j->out_bytes = j->y_bytes + (fusion == LNTUNE_FUSION_RESIDUAL_OUT ? r_bytes : 0);
    if (j->backward) { /* x, dy (and dresidual_out) read, all of x's type; dx written */
        j->in_bytes = j->x_bytes * (fusion == LNTUNE_FUSION_RESIDUAL ? 3 : 2);
        j->out_bytes = j->x_bytes;
    }
    j->bytes = (double)(j->in_bytes + j->out_bytes);
    j->copy_bytes = (j->in_bytes + j->out_bytes) / 2;
}

static int alloc_buffers(job *j) {
    const lntune_types t = j->shape.types;
    const int rt = lntune_types_residual(t);
    const size_t elems = (size_t)(j->shape.rows * j->shape.H);
    const size_t in_alloc = j->in_bytes > j->copy_bytes ? j->in_bytes : j->copy_bytes;
    const size_t out_alloc = j->out_bytes > j->copy_bytes ? j->out_bytes : j->copy_bytes;
    const double span = L2_MULTIPLE * (double)j->info->l2_bytes;
    j->nbuf = j->bytes >= span ? 1 : (int)ceil(span / j->bytes);
    if (j->nbuf > MAX_BUFFERS) j->nbuf = MAX_BUFFERS;
    j->batch = j->bytes < BATCH_BYTES ? BATCH : 1;
    enum { CHUNK = 1 << 20 };
    float *host = malloc(CHUNK * sizeof *host);
    if (!host) return LNTUNE_ENOMEM;
    uint64_t state = 0x853c49e6748fea9bULL;
    int rc = LNTUNE_OK;
    /* x, then the residual; the backward's x, dy and dresidual_out are all of x's type */
    const size_t x_elems = j->backward ? j->in_bytes / j->x_bytes * elems : elems;
    for (int b = 0; b < j->nbuf && !rc; ++b) {
        if (lntune_cuda_alloc(j->cu, in_alloc, &j->in[b]) ||
            lntune_cuda_alloc(j->cu, out_alloc, &j->out[b]) ||
            upload_random(j, j->in[b], x_elems, t.x, host, CHUNK, &state) ||
            (!j->backward && j->in_bytes > j->x_bytes &&
             upload_random(j, j->in[b] + j->x_bytes, elems, rt, host, CHUNK, &state)))
            rc = LNTUNE_ENODEVICE;
    }
    const size_t H = (size_t)j->shape.H;
    if (!rc &&
        (lntune_cuda_alloc(j->cu, H * 4, &j->gamma) || lntune_cuda_alloc(j->cu, H * 4, &j->beta) ||
         upload_random(j, j->gamma, H, t.params, host, CHUNK, &state) ||
         upload_random(j, j->beta, H, t.params, host, CHUNK, &state)))
        rc = LNTUNE_ENODEVICE;
    if (!rc && lntune_type_row_scaled(j->shape.types.y) &&
        lntune_cuda_alloc(j->cu, (size_t)j->shape.rows * 4, &j->scales))
        rc = LNTUNE_ENODEVICE;
    if (!rc && j->backward) { /* statistics as a forward saves them (mean 0, rstd 1: finite) */
        const size_t rows = (size_t)j->shape.rows, ws = (size_t)j->max_parts * H * 4;
        if (lntune_cuda_alloc(j->cu, rows * 4, &j->mean) ||
            lntune_cuda_alloc(j->cu, rows * 4, &j->rstd) ||
            lntune_cuda_fill32(j->cu, j->mean, 0, rows) ||
            lntune_cuda_fill32(j->cu, j->rstd, 0x3f800000u, rows) ||
            lntune_cuda_alloc(j->cu, ws, &j->ws[0]) || lntune_cuda_alloc(j->cu, ws, &j->ws[1]) ||
            lntune_cuda_alloc(j->cu, H * 4, &j->dgamma) ||
            lntune_cuda_alloc(j->cu, H * 4, &j->dbeta))
            rc = LNTUNE_ENODEVICE;
    }
    free(host);
    if (rc) device_failed(j, "cannot allocate the timing buffers");
    return rc;
}

static void free_buffers(job *j) {
    for (int b = 0; b < j->nbuf; ++b) {
        lntune_cuda_free(j->cu, j->in[b]);
        lntune_cuda_free(j->cu, j->out[b]);
    }
    lntune_cuda_free(j->cu, j->gamma);
    lntune_cuda_free(j->cu, j->beta);
    const uint64_t backward[] = {j->mean,   j->rstd,  j->ws[0], j->ws[1],
                                 j->dgamma, j->dbeta, j->scales};
    for (size_t i = 0; i < sizeof backward / sizeof backward[0]; ++i)
        lntune_cuda_free(j->cu, backward[i]);
}

static int artifact(void *state, lntune_plan *p, size_t v, lntune_artifact *art,
                    lntune_kernel_traits *traits) {
    job *j = job_of(state, p);
    const candidate *w = &j->c[v];
    static char key[64], flags[32];
    uint64_t h = lntune_fnv1a(LNTUNE_FNV_INIT, w->text, strlen(w->text));
    h = lntune_fnv1a(h, j->code_hash, strlen(j->code_hash));
    snprintf(key, sizeof key, "cuda-%016llx", (unsigned long long)h);
    snprintf(flags, sizeof flags, "sm_%d", j->info->sm);
    *art = (lntune_artifact){key,
                             w->text,
                             lntune_nvrtc_describe(j->nv),
                             flags,
                             "lntune_norm",
                             w->compile.out.data,
                             w->compile.out.len,
                             NULL,
                             0,
                             w->compile.out.ptx,
                             NULL};
    *traits = (lntune_kernel_traits){1, 0, 0}; /* the GPU's nearest-H dispatch: issue 37 */
    return LNTUNE_OK;
}

/* The backward's workspace rows: the most any candidate's launch lines ask for. */
static void size_workspace(job *j) {
    for (size_t i = 0; i < j->n && j->backward; ++i) {
        lntune_cuda_backward_launch l;
        if (lntune_cuda_backward_launch_parse(j->c[i].text, &l)) continue; /* fails at load */
        const int64_t parts = lntune_cuda_backward_parts(
            &l, lntune_cuda_backward_call_grid(&l, j->shape.rows, j->shape.H));
        if (parts > j->max_parts) j->max_parts = parts;
    }
}

/* Every candidate emitted; the naive one is the template's "naive" preset (none where the
 * preset is not valid for the shape: H below its block of threads). */
static int variants(void *state, lntune_plan *p, const char *const **list, size_t *n, size_t *naive,
                    size_t *builtin) {
    job *j = job_of(state, p);
    if (emit_all(j)) return LNTUNE_ETEMPLATE;
    *list = j->names;
    *n = *naive = *builtin = j->n; /* the CUDA built-in as a finalist: issue 37 */
    char *preset = NULL;
    if (lntune_gen_preset(j->gen, "cuda", j->op, "naive", &j->shape, &preset) == LNTUNE_OK)
        for (size_t i = 0; i < j->n && *naive == j->n; ++i)
            if (strcmp(j->c[i].variant, preset) == 0) *naive = i;
    free(preset);
    return LNTUNE_OK;
}

static int prepare(void *state, lntune_plan *p, double *bytes) {
    job *j = job_of(state, p);
    size_buffers(j);
    *bytes = j->bytes;
    j->copy = (candidate){.variant = "device copy"};
    size_workspace(j);
    if (checks_open(j)) return LNTUNE_ENODEVICE;
    if (alloc_buffers(j) || lntune_cuda_stream_create(j->cu, &j->stream) ||
        lntune_cuda_event_create(j->cu, &j->ev0) || lntune_cuda_event_create(j->cu, &j->ev1)) {
        device_failed(j, "cannot prepare the timing");
        return LNTUNE_ENODEVICE;
    }
    return LNTUNE_OK;
}

/* template hash + NVRTC version + architecture (the hash is of the template files: any one
 * variant's source gives it). */
static int code_hash(void *state, lntune_plan *p, char *out, size_t size) {
    job *j = job_of(state, p);
    char **list = NULL;
    size_t count = 0;
    lntune_source src = {0};
    int rc = lntune_gen_variants(j->gen, "cuda", j->op, &j->shape, &list, &count);
    if (rc == LNTUNE_OK && count == 0) rc = LNTUNE_ETEMPLATE;
    if (rc == LNTUNE_OK)
        rc = lntune_gen_emit(j->gen, "cuda", j->op, list[0], &j->shape, NULL, &src);
    lntune_gen_free_list(list, count);
    if (rc != LNTUNE_OK) {
        lntune_plan_fail(p, LNTUNE_ETEMPLATE, "%s", lntune_gen_errmsg(j->gen));
        return LNTUNE_ETEMPLATE;
    }
    int major = 0, minor = 0;
    lntune_nvrtc_version(j->nv, &major, &minor);
    snprintf(j->code_hash, sizeof j->code_hash, "%s-nvrtc%d.%d-sm%d", src.template_hash, major,
             minor, j->info->sm);
    snprintf(out, size, "%s", j->code_hash);
    lntune_source_free(&src);
    return LNTUNE_OK;
}

/* Frees the op x shape; its compiled sources become the cache for the next one. */
static void end(void *state, lntune_plan *p) {
    job *j = job_of(state, p);
    checks_close(j);
    lntune_cuda_event_destroy(j->cu, j->ev0);
    lntune_cuda_event_destroy(j->cu, j->ev1);
    lntune_cuda_stream_destroy(j->cu, j->stream);
    free_buffers(j);
    compile_cache *k = j->cache;
    cache_clear(k);
    k->texts = calloc(j->n ? j->n : 1, sizeof *k->texts);
    k->compiled = calloc(j->n ? j->n : 1, sizeof *k->compiled);
    const int keep = k->texts && k->compiled;
    if (keep) k->op = j->op, k->H = j->shape.H, k->n = j->n;
    for (size_t i = 0; i < j->n; ++i) {
        lntune_cuda_module_unload(j->cu, j->c[i].module);
        if (keep) {
            k->texts[i] = j->c[i].text;
            k->compiled[i] = j->c[i].compile;
        } else {
            lntune_nvrtc_output_free(&j->c[i].compile.out);
            free(j->c[i].text);
        }
        free(j->c[i].variant);
    }
    free(j->c);
    free(j->names);
    const job run = {.cache = j->cache, .gen = j->gen, .nv = j->nv, .cu = j->cu, .info = j->info};
    *j = run;
}

static int hardware(void *state, lntune_db *db, int64_t *hw, char *err, size_t errlen) {
    job *j = state;
    lntune_gpu_info gpu;
    lntune_cuda_gpu_info(j->info, &gpu);
    const int rc = lntune_db_put_gpu_hardware(db, &gpu, lntune_nvrtc_describe(j->nv), hw);
    if (rc != LNTUNE_OK) snprintf(err, errlen, "%s", lntune_db_errmsg(db));
    return rc;
}

/* What the planner calls (target.h): name, leaders, by H, twins (the GPU's nearest-H dispatch:
 * issue 37), recheck (the phases it answers are a shared CPU host's), then the functions in its
 * order; no families, and no reach measured (not yet: a GPU winner serves other H as before). */
/* clang-format off */
static const lntune_target cuda_functions = {"cuda", TOP, 1, 0, 0, lntune_tune_cuda_default_rows,
    hardware, code_hash, variants, prepare, check, time_variants, artifact, end, NULL, NULL};
/* clang-format on */

int lntune_tune_cuda(const lntune_tune_config *cfg, int device_index, lntune_tune_result **results,
                     size_t *nresults, char *err, size_t errlen) {
    *results = NULL;
    *nresults = 0;
    lntune_cuda *cu = NULL;
    lntune_nvrtc *nv = NULL;
    lntune_gen *gen = NULL;
    compile_cache cache = {0};
    int rc;
    if ((rc = lntune_cuda_open(device_index, &cu)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", cu ? lntune_cuda_errmsg(cu) : "out of memory");
        goto done;
    }
    if ((rc = lntune_nvrtc_open(&nv)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", nv ? lntune_nvrtc_errmsg(nv) : "out of memory");
        goto done;
    }
    const lntune_cuda_info *info = lntune_cuda_get_info(cu);
    if ((rc = lntune_gen_open(NULL, &gen)) != LNTUNE_OK ||
        (rc = lntune_gen_set_cuda_arch(gen, info->sm)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_gen_errmsg(gen));
        goto done;
    }
    job j = {.cache = &cache, .gen = gen, .nv = nv, .cu = cu, .info = info};
    err[0] = '\0';
    rc = lntune_plan_run(cfg, &cuda_functions, &j, results, nresults, err, errlen);
done:
    cache_clear(&cache);
    lntune_gen_close(gen);
    lntune_nvrtc_close(nv);
    lntune_cuda_close(cu);
    return rc;
}
