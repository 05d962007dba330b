/*
 * cuda_tuner.c - the tuning job on a GPU (see cuda_tuner.h). The CPU tuner's search (search.h)
 * walks the variant space at the configured rigor (quick, measure, exhaustive); each batch it
 * asks for is compiled with NVRTC, verified on the device, and its correct variants are timed
 * interleaved with a device copy of the same bytes. The leaders are re-timed with the naive
 * kernel and the copy; everything checked is stored.
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
#include "search.h"
#include "timing.h"
#include "tuning_db.h"
#include "verify.h"
#include "verify_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOP = 4, ROUNDS = 7, RETIME_ROUNDS = 25, WARMUP = 2, MAX_BUFFERS = 64 };
static const double NOISE = 0.01;       /* within 1%, the variant listed first wins */
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
    int checked;                          /* loaded and verified (or rejected): ok says how */
    int ok;                               /* compiled, loaded and verified */
    int timed;                            /* timed at least once: its figures are recorded */
    double max_error;
    double samples[RETIME_ROUNDS];
    double median_ns, min_ns, max_ns;
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

/* Everything one op x shape needs. */
typedef struct {
    compile_cache *cache;
    const lntune_tune_config *cfg;
    lntune_gen *gen;
    const lntune_nvrtc *nv;
    lntune_cuda *cu;
    lntune_db *db;
    const lntune_cuda_info *info;
    const char *op;
    lntune_op norm;     /* LayerNorm or RMSNorm, of either direction */
    int backward;       /* op is a gradient ("layernorm_backward") */
    lntune_shape shape; /* with its types and fusion */
    char op_key[32];    /* the database's op text, with the fusion (fusion.h) */
    char dtype[24];     /* lntune_types_format */
    lntune_db_key key;
    char code_hash[64]; /* template hash + NVRTC version + architecture */
    candidate *c;
    size_t n;
    lntune_space *space; /* the candidates' variants, in the same order (search.h) */
    verifier_set checks; /* the verifier and the device checker of the job's direction */
    candidate copy;      /* the device copy of the same bytes, timed in every batch */
    /* Per rotated buffer set: in holds x then residual, out y then residual_out; each is at
     * least copy_bytes, which the device copy moves from in to out. */
    uint64_t in[MAX_BUFFERS], out[MAX_BUFFERS], gamma, beta;
    /* Backward: in holds x, dy (and dresidual_out), out dx; the saved statistics, the
     * workspaces (max_parts rows of H floats each) and dgamma/dbeta. */
    uint64_t mean, rstd, ws[2], dgamma, dbeta;
    int64_t max_parts;
    size_t x_bytes, y_bytes;    /* where residual and residual_out start in in and out */
    size_t in_bytes, out_bytes; /* what a call reads and writes */
    size_t copy_bytes;          /* half of in_bytes + out_bytes */
    int nbuf, next_buf, batch;
    void *stream, *ev0, *ev1;
    double bytes;    /* read and written by a call: x, residual, y, residual_out */
    int stored_best; /* the database already holds this shape's winner */
    lntune_tune_result *res;
    double start_ns;
    size_t done, estimate; /* variants checked, and about how many the search will check */
    char *err;             /* a device failure that stops the run */
    size_t errlen;
} job;

static int stopped(const job *j) {
    return (j->cfg->stop && *j->cfg->stop) || j->err[0];
}

static void progress(job *j, const char *stage) {
    lntune_tune_report(j->cfg, j->op, &j->shape, stage, j->done, j->estimate, j->start_ns);
}

static void device_failed(job *j, const char *what) {
    if (!j->err[0]) snprintf(j->err, j->errlen, "%s: %s", what, lntune_cuda_errmsg(j->cu));
}

int64_t lntune_tune_cuda_default_rows(int64_t H) {
    (void)H;
    return 16384;
}

static void record(job *j, const candidate *c, const char *status, const char *message) {
    lntune_measurement m = {0};
    m.variant = c->variant;
    m.template_hash = j->code_hash;
    m.status = status;
    m.message = message && *message ? message : NULL;
    m.compile_ms = c->compile.out.compile_ms;
    m.max_error = c->max_error;
    m.median_ns = m.min_ns = m.max_ns = m.gbps = NAN;
    if (c->ok) {
        m.median_ns = c->median_ns;
        m.min_ns = c->min_ns;
        m.max_ns = c->max_ns;
        m.gbps = j->bytes / c->median_ns;
    }
    m.copy_gbps = j->res->copy_gbps;
    if (lntune_db_put_measurement(j->db, &j->key, &m) == LNTUNE_OK)
        j->res->saved++;
    else if (!j->err[0])
        snprintf(j->err, j->errlen, "cannot write the tuning database: %s",
                 lntune_db_errmsg(j->db));
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
 * Times the candidates idx[0..n) and the copy (copy, a candidate with fn NULL) interleaved:
 * every round visits each once, starting one further each round, so drift hits all alike.
 */
static void time_interleaved(job *j, candidate **set, size_t n, int rounds) {
    for (size_t i = 0; i < n; ++i)
        for (int w = 0; w < WARMUP && !stopped(j); ++w) sample_ns(j, set[i]->fn ? set[i] : NULL);
    for (int r = 0; r < rounds && !stopped(j); ++r)
        for (size_t t = 0; t < n && !stopped(j); ++t) {
            candidate *c = set[(t + (size_t)r) % n];
            c->samples[r] = sample_ns(j, c->fn ? c : NULL);
        }
    if (stopped(j)) return;
    for (size_t i = 0; i < n; ++i)
        lntune_sample_stats(set[i]->samples, (size_t)rounds, &set[i]->median_ns, &set[i]->min_ns,
                            &set[i]->max_ns);
}

/* Emits every variant of the shape with gamma (the key's affine = 1). */
static int emit_all(job *j) {
    char **list = NULL;
    size_t count = 0;
    if (lntune_gen_variants(j->gen, "cuda", j->op, &j->shape, &list, &count) != LNTUNE_OK) {
        snprintf(j->err, j->errlen, "%s", lntune_gen_errmsg(j->gen));
        return LNTUNE_ETEMPLATE;
    }
    j->c = calloc(count ? count : 1, sizeof *j->c);
    int rc = j->c ? LNTUNE_OK : LNTUNE_ENOMEM;
    for (size_t i = 0; i < count && !rc; ++i) {
        lntune_source src;
        if (!j->backward && !strstr(list[i], "affine=fused")) continue; /* one serves both */
        if (lntune_gen_emit(j->gen, "cuda", j->op, list[i], &j->shape, "lntune_norm", &src)) {
            snprintf(j->err, j->errlen, "%s", lntune_gen_errmsg(j->gen));
            rc = LNTUNE_ETEMPLATE;
            break;
        }
        candidate *c = &j->c[j->n++];
        c->variant = strdup(list[i]);
        c->text = src.text;
        c->affine = src.affine;
        c->fixed_h = src.fixed_h;
        if (!j->code_hash[0]) {
            int major = 0, minor = 0;
            lntune_nvrtc_version(j->nv, &major, &minor);
            snprintf(j->code_hash, sizeof j->code_hash, "%s-nvrtc%d.%d-sm%d", src.template_hash,
                     major, minor, j->info->sm);
        }
        src.text = NULL;
        lntune_source_free(&src);
    }
    lntune_gen_free_list(list, count);
    return rc;
}

/* Compiles the candidates idx[0..n) that NVRTC has not seen yet, together, on all cores. */
static int compile_batch(job *j, const size_t *idx, size_t n) {
    lntune_nvrtc_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    candidate **of = calloc(n ? n : 1, sizeof *of);
    if (!jobs || !of) {
        free(jobs);
        free(of);
        snprintf(j->err, j->errlen, "out of memory");
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
            ++j->res->cache_hits;
            memset(&k->compiled[i].out, 0, sizeof k->compiled[i].out);
            continue;
        }
        of[nnew] = c;
        jobs[nnew].source = c->text;
        jobs[nnew++].name = c->variant;
    }
    progress(j, "compile");
    int rc = lntune_nvrtc_compile_many(j->nv, j->info->sm, LNTUNE_NVRTC_CUBIN, jobs, nnew, 0);
    for (size_t f = 0; f < nnew; ++f) of[f]->compile = jobs[f];
    free(jobs);
    free(of);
    if (rc) snprintf(j->err, j->errlen, "cannot start the compile threads");
    return rc;
}

/* A candidate that did not compile, load or verify: counted and recorded. */
static void reject(job *j, candidate *c, const char *status, const char *why) {
    ++*(strcmp(status, LNTUNE_STATUS_WRONG) == 0 ? &j->res->wrong : &j->res->failed);
    record(j, c, status, why);
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

/* Loads and verifies a compiled candidate once; records it if wrong or failed. */
static void check(job *j, candidate *c) {
    if (c->checked || stopped(j)) return;
    c->checked = 1;
    ++j->done;
    char why[600];
    if (c->compile.rc) {
        reject(j, c, LNTUNE_STATUS_FAILED, c->compile.out.message);
        return;
    }
    ++j->res->compiled;
    int64_t hs[3], max_h;
    verify_hs(j, hs, &max_h);
    if (load(j, c, max_h, why, sizeof why)) {
        reject(j, c, LNTUNE_STATUS_FAILED, why);
        return;
    }
    lntune_verify_result vr;
    const verifier_set *s = &j->checks;
    int rc = j->backward ? lntune_cuda_backward_checker_run(s->bchecker, s->bv, c->fn, c->finish,
                                                            &c->backward, c->fixed_h, &vr)
                         : lntune_cuda_checker_run(s->checker, s->v, c->fn, &c->launch, c->affine,
                                                   c->fixed_h, &vr);
    c->max_error = vr.max_error;
    if (rc == LNTUNE_ENODEVICE) {
        reject(j, c, LNTUNE_STATUS_FAILED, vr.message);
        snprintf(j->err, j->errlen,
                 "the device failed on %s (recorded as failed; a rerun goes on without it): %s",
                 c->variant, vr.message);
        return;
    }
    if (rc) {
        reject(j, c, LNTUNE_STATUS_WRONG, vr.message);
        return;
    }
    ++j->res->verified;
    c->ok = 1;
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
    const uint64_t backward[] = {j->mean, j->rstd, j->ws[0], j->ws[1], j->dgamma, j->dbeta};
    for (size_t i = 0; i < sizeof backward / sizeof backward[0]; ++i)
        lntune_cuda_free(j->cu, backward[i]);
}

/* The naive kernel of the GPU: one block per row, scalar accesses, two passes over x (the
 * backward: re-reading x and dy, dgamma/dbeta from partials). */
static int is_naive(const job *j, const candidate *c) {
    const char *how = j->backward                      ? "dgamma=partials"
                      : j->norm == LNTUNE_OP_LAYERNORM ? "stats=twopass"
                                                       : "stats=";
    return strstr(c->variant, "layout=uncached,") && strstr(c->variant, "block=256,") &&
           strstr(c->variant, "pack=1,") && strstr(c->variant, how);
}

static void store_winner(job *j, const candidate *w) {
    char key[64];
    uint64_t h = lntune_fnv1a(LNTUNE_FNV_INIT, w->text, strlen(w->text));
    h = lntune_fnv1a(h, j->code_hash, strlen(j->code_hash));
    snprintf(key, sizeof key, "cuda-%016llx", (unsigned long long)h);
    char flags[32];
    snprintf(flags, sizeof flags, "sm_%d", j->info->sm);
    lntune_artifact art = {key,
                           w->text,
                           lntune_nvrtc_describe(j->nv),
                           flags,
                           "lntune_norm",
                           w->compile.out.data,
                           w->compile.out.len,
                           NULL,
                           0,
                           w->compile.out.ptx};
    lntune_best b = {w->variant,        key,          1,
                     j->shape.rows,     w->median_ns, j->bytes / w->median_ns,
                     j->res->copy_gbps, w->max_error, j->res->naive_ns};
    if (lntune_db_put_artifact(j->db, &art) != LNTUNE_OK ||
        lntune_db_set_best(j->db, &j->key, &b) != LNTUNE_OK)
        snprintf(j->err, j->errlen, "cannot write the tuning database: %s",
                 lntune_db_errmsg(j->db));
}

/* Picks the fastest of set[0..n); within NOISE of it, the one listed first in the space. */
static candidate *choose(candidate **set, size_t n) {
    candidate *best = set[0];
    for (size_t k = 1; k < n; ++k)
        if (set[k]->median_ns < best->median_ns) best = set[k];
    candidate *pick = best;
    for (size_t k = 0; k < n; ++k)
        if (set[k]->median_ns <= best->median_ns * (1.0 + NOISE) && set[k] < pick) pick = set[k];
    return pick;
}

static int has_measurement(void *ud, const lntune_measurement *m) {
    const char *variant = ud;
    if (strcmp(m->variant, variant) == 0) *(char *)ud = '\0'; /* found */
    return 0;
}

static int from_best(void *ud, const lntune_best *b) {
    job *j = ud;
    if (b->tuned_rows != j->shape.rows) return 0;
    /* Only a winner measured by this template and compiler: else the shape is tuned again. */
    char probe[512];
    snprintf(probe, sizeof probe, "%s", b->variant);
    if (lntune_db_each_measurement(j->db, &j->key, j->code_hash, has_measurement, probe) ||
        probe[0])
        return 0;
    lntune_tune_result_from_best(j->res, b);
    return 0;
}

/*
 * The search's evaluate callback (search.h): compiles the batch's new candidates, verifies each
 * once on the device, then times the correct ones interleaved with the device copy. A candidate
 * timed again (the search's second look) keeps its latest figures.
 */
static void evaluate(void *ud, const size_t *idx, size_t n, double *times) {
    job *j = ud;
    for (size_t k = 0; k < n; ++k) times[k] = INFINITY;
    candidate **set = calloc(n + 1, sizeof *set);
    if (!set || stopped(j) || compile_batch(j, idx, n)) goto done;
    progress(j, "verify");
    size_t ns = 0;
    for (size_t k = 0; k < n; ++k) {
        candidate *c = &j->c[idx[k]];
        check(j, c);
        if (c->ok) set[ns++] = c;
    }
    if (ns == 0 || stopped(j)) goto done;
    set[ns] = &j->copy;
    progress(j, "time");
    time_interleaved(j, set, ns + 1, ROUNDS);
    if (stopped(j)) goto done;
    for (size_t k = 0; k < n; ++k) {
        candidate *c = &j->c[idx[k]];
        if (!c->ok) continue;
        times[k] = c->median_ns;
        j->res->timed += !c->timed;
        c->timed = 1;
    }
done:
    free(set);
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

/* The space of the emitted candidates, in their order (index 0: every knob's first value). */
static int make_space(job *j) {
    char **names = malloc((j->n ? j->n : 1) * sizeof *names);
    if (!names) return LNTUNE_ENOMEM;
    for (size_t i = 0; i < j->n; ++i) names[i] = j->c[i].variant;
    const int rc = lntune_space_create(names, j->n, &j->space);
    free(names);
    if (rc) snprintf(j->err, j->errlen, "cannot index the %zu %s variants", j->n, j->op);
    return rc;
}

/*
 * Searches the space at the configured rigor (search.h: the CPU tuner's search), then times the
 * leaders once more with the naive kernel and the copy, and keeps the fastest. Every candidate
 * checked is recorded: wrong and failed ones as they are found, correct ones at the end with
 * their last figures.
 */
static void tune_one(job *j) {
    size_buffers(j);
    if (emit_all(j)) goto done;
    if (!j->cfg->retune) lntune_db_get_best(j->db, &j->key, from_best, j);
    if (j->res->from_db || j->n == 0 || make_space(j)) goto done;
    j->estimate = lntune_search_estimate(j->space, j->cfg->rigor);
    j->copy = (candidate){.variant = "device copy"};
    size_workspace(j);
    if (checks_open(j)) goto done;
    if (alloc_buffers(j) || lntune_cuda_stream_create(j->cu, &j->stream) ||
        lntune_cuda_event_create(j->cu, &j->ev0) || lntune_cuda_event_create(j->cu, &j->ev1)) {
        device_failed(j, "cannot prepare the timing");
        goto done;
    }

    size_t top[TOP];
    const size_t nlead = lntune_search(j->space, j->cfg->rigor, evaluate, j, top, TOP);
    if (stopped(j) || nlead == 0) goto done;

    /* The naive kernel, for the result's speed-up, checked here if the search passed it by. */
    candidate *naive = NULL;
    for (size_t i = 0; i < j->n && !naive; ++i)
        if (is_naive(j, &j->c[i])) {
            if (!j->c[i].checked) {
                double t;
                evaluate(j, &i, 1, &t);
            }
            if (j->c[i].ok) naive = &j->c[i];
        }
    if (stopped(j)) goto done;

    /* The leaders again, with the naive kernel and the copy, in one longer interleaved run. */
    candidate *group[TOP + 2];
    size_t ng = 0;
    int naive_in_top = 0;
    for (size_t k = 0; k < nlead; ++k) {
        group[ng++] = &j->c[top[k]];
        naive_in_top |= group[k] == naive;
    }
    if (naive && !naive_in_top) group[ng++] = naive;
    group[ng++] = &j->copy;
    progress(j, "retime");
    time_interleaved(j, group, ng, RETIME_ROUNDS);
    if (stopped(j)) goto done;
    j->res->copy_gbps = j->bytes / j->copy.median_ns;
    if (naive) j->res->naive_ns = naive->median_ns;
    for (size_t i = 0; i < j->n; ++i)
        if (j->c[i].ok && j->c[i].timed) record(j, &j->c[i], LNTUNE_STATUS_OK, NULL);
    candidate *w = choose(group, nlead);
    store_winner(j, w);
    lntune_tune_result *r = j->res;
    snprintf(r->variant, sizeof r->variant, "%s", w->variant);
    r->median_ns = w->median_ns;
    r->gbps = j->bytes / w->median_ns;
    r->max_error = w->max_error;
done:
    checks_close(j);
    lntune_space_destroy(j->space);
    j->space = NULL;
    lntune_cuda_event_destroy(j->cu, j->ev0);
    lntune_cuda_event_destroy(j->cu, j->ev1);
    lntune_cuda_stream_destroy(j->cu, j->stream);
    free_buffers(j);
    /* This shape's compiled sources become the cache for the next one. */
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
}

static int by_h(const void *a, const void *b) {
    const lntune_shape *x = a, *y = b;
    if (x->H != y->H) return (x->H > y->H) - (x->H < y->H);
    return (x->rows > y->rows) - (x->rows < y->rows);
}

int lntune_tune_cuda(const lntune_tune_config *cfg, int device_index, lntune_tune_result **results,
                     size_t *nresults, char *err, size_t errlen) {
    *results = NULL;
    *nresults = 0;
    lntune_cuda *cu = NULL;
    lntune_nvrtc *nv = NULL;
    lntune_gen *gen = NULL;
    lntune_db *db = NULL;
    lntune_shape *shapes = NULL;
    compile_cache cache = {0};
    int64_t hw = 0;
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
    lntune_gpu_info gpu;
    lntune_cuda_gpu_info(info, &gpu);
    if ((rc = lntune_gen_open(NULL, &gen)) != LNTUNE_OK ||
        (rc = lntune_gen_set_cuda_arch(gen, info->sm)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_gen_errmsg(gen));
        goto done;
    }
    if ((rc = lntune_db_open(cfg->db_path, cfg->force ? LNTUNE_DB_FORCE : 0, &db)) != LNTUNE_OK ||
        (rc = lntune_db_put_gpu_hardware(db, &gpu, lntune_nvrtc_describe(nv), &hw)) != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_db_errmsg(db));
        goto done;
    }
    lntune_tune_result *res = calloc(cfg->nops * cfg->nshapes + 1, sizeof *res);
    if (!res) {
        rc = LNTUNE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    *results = res;
    err[0] = '\0';
    /* Shapes in order of H, so the row counts of one H share their compiled sources. */
    shapes = malloc((cfg->nshapes + 1) * sizeof *shapes);
    if (!shapes) {
        rc = LNTUNE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    memcpy(shapes, cfg->shapes, cfg->nshapes * sizeof *shapes);
    qsort(shapes, cfg->nshapes, sizeof *shapes, by_h);
    for (size_t o = 0; o < cfg->nops && !rc; ++o) {
        for (size_t s = 0; s < cfg->nshapes; ++s) {
            lntune_tune_result *r = &res[(*nresults)++];
            job j = {.cfg = cfg, .gen = gen, .nv = nv, .cu = cu, .db = db, .info = info};
            j.cache = &cache;
            j.op = cfg->ops[o];
            const lntune_direction *dir = NULL;
            if (lntune_op_text_parse(j.op, &j.norm, &dir, NULL) != 0) {
                rc = LNTUNE_EINVAL;
                snprintf(err, errlen, "unknown op '%s'", j.op);
                break;
            }
            j.backward = dir->suffix[0] != '\0';
            j.shape = shapes[s];
            if (j.backward && (j.shape.types.y != j.shape.types.x ||
                               j.shape.fusion == LNTUNE_FUSION_RESIDUAL_OUT)) {
                rc = LNTUNE_EINVAL;
                snprintf(err, errlen,
                         "%s: dx has x's type (dtype x or x/x/params), and the "
                         "backward fuses no residual_out",
                         j.op);
                break;
            }
            if (j.shape.rows <= 0) j.shape.rows = lntune_tune_cuda_default_rows(j.shape.H);
            j.shape.affine = LNTUNE_AFFINE_GAMMA;
            lntune_types_format(j.shape.types, j.dtype, sizeof j.dtype);
            lntune_fusion_op_key(j.op, j.shape.fusion, j.op_key, sizeof j.op_key);
            j.key = (lntune_db_key){hw, "cuda", j.op_key, j.dtype, j.shape.H, j.shape.rows, 1};
            j.res = r;
            j.err = err;
            j.errlen = errlen;
            j.start_ns = lntune_now_ns();
            snprintf(r->target, sizeof r->target, "cuda");
            snprintf(r->op, sizeof r->op, "%s", j.op_key);
            snprintf(r->dtype, sizeof r->dtype, "%s", j.dtype);
            r->rows = j.shape.rows;
            r->H = j.shape.H;
            tune_one(&j);
            if (err[0]) {
                rc = strstr(err, "database") ? LNTUNE_EDB : LNTUNE_ENODEVICE;
                break;
            }
            if (cfg->stop && *cfg->stop) goto done;
        }
    }
done:
    cache_clear(&cache);
    free(shapes);
    lntune_db_close(db);
    lntune_gen_close(gen);
    lntune_nvrtc_close(nv);
    lntune_cuda_close(cu);
    return rc;
}
