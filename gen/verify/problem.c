/*
 * problem.c - the per-direction half of verifying and timing a kernel (see problem.h): buffers
 * and arguments, verifier, bytes moved. Everything else is shared by both directions.
 */
#include "problem.h"

#include "fusion.h"
#include "half.h"
#include "half_ref.h"
#include "lntune.h"
#include "verify_backward.h"
#include "verify_quant.h"

#include <stdlib.h>
#include <string.h>

static void fill(float *p, size_t n, uint64_t *state, double scale, double offset) {
    for (size_t i = 0; i < n; ++i) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)(offset + scale * ((double)(*state >> 11) / 9007199254740992.0 - 0.5));
    }
}

/* fill for n elements of type t (16-bit types rounded from the same fp32 values, in place). */
static void fill_typed(float *p, int t, size_t n, uint64_t *state, double scale, double offset) {
    fill(p, n, state, scale, offset);
    lntune_narrow_in_place(p, n, t);
}

static void *alloc(lntune_problem *p, size_t bytes) {
    size_t k = 0;
    while (k < sizeof p->mem / sizeof p->mem[0] && p->mem[k]) ++k;
    if (k == sizeof p->mem / sizeof p->mem[0]) return NULL;
    return p->mem[k] = aligned_alloc(64, (bytes + 63) / 64 * 64);
}

lntune_kernel_args lntune_tune_copy_args(const lntune_kernel_args *a, lntune_types types,
                                         int fusion) {
    lntune_kernel_args c = *a;
    const int64_t moved = lntune_fusion_bytes_per_element(types, fusion);
    c.H = c.x_stride = c.y_stride = (moved * a->H + 7) / 8;
    c.gamma = c.beta = NULL;
    c.residual = c.residual_out = NULL;
    c.residual_stride = c.residual_out_stride = 0;
    return c;
}

/* ---- forward ---- */

static int forward_init(lntune_problem *p, int max_threads) {
    (void)max_threads;
    /* Buffers are sized for fp32 whatever the types: the sandbox copies them as floats. x and y
     * also hold the copy of the same bytes, which moves more than x and y with a residual. */
    const size_t elems = (size_t)(p->rows * p->H), H = (size_t)p->H;
    const int fusion = p->fusion;
    const int64_t moved = lntune_fusion_bytes_per_element(p->types, fusion);
    const size_t xy_bytes = elems * (size_t)(moved > 8 ? (moved + 1) / 2 : 4);
    float *x = alloc(p, xy_bytes), *y = alloc(p, xy_bytes);
    float *gamma = alloc(p, H * sizeof(float)), *beta = alloc(p, H * sizeof(float));
    float *resid = fusion ? alloc(p, elems * sizeof(float)) : NULL;
    float *resid_out =
        fusion == LNTUNE_FUSION_RESIDUAL_OUT ? alloc(p, elems * sizeof(float)) : NULL;
    if (!x || !y || !gamma || !beta || (fusion && !resid) ||
        (fusion == LNTUNE_FUSION_RESIDUAL_OUT && !resid_out))
        return LNTUNE_ENOMEM;
    uint64_t state = 0x853c49e6748fea9bULL;
    fill_typed(x, p->types.x, elems, &state, 4.0, 0.0);
    fill(y, xy_bytes / sizeof(float), &state, 1.0, 0.0); /* touch y's pages before any timing */
    if (resid) fill_typed(resid, lntune_types_residual(p->types), elems, &state, 4.0, 0.0);
    if (resid_out) fill(resid_out, elems, &state, 1.0, 0.0);
    fill_typed(gamma, p->types.params, H, &state, 1.0, 1.0);
    fill_typed(beta, p->types.params, H, &state, 1.0, 0.0);
    p->args = (lntune_kernel_args){.rows = p->rows,
                                   .H = p->H,
                                   .x_stride = p->H,
                                   .y_stride = p->H,
                                   .x = x,
                                   .y = y,
                                   .gamma = gamma,
                                   .beta = p->op == LNTUNE_OP_LAYERNORM ? beta : NULL,
                                   .residual = resid,
                                   .residual_out = resid_out,
                                   .residual_stride = resid ? p->H : 0,
                                   .residual_out_stride = resid_out ? p->H : 0,
                                   .eps = 1e-5f,
                                   /* read by affine=offset kernels only: Gemma's offset */
                                   .weight_offset = 1.0f};
    if (lntune_type_quantized(p->types.y)) {
        p->args.y_scale = lntune_quant_test_scale(p->types.y);
        if (lntune_type_row_scaled(p->types.y) &&
            !(p->args.y_scales = alloc(p, (size_t)p->rows * sizeof(float))))
            return LNTUNE_ENOMEM;
    }
    p->bytes = (double)elems * (double)moved;
    p->copy_args = lntune_tune_copy_args(&p->args, p->types, fusion);
    return LNTUNE_OK;
}

static int forward_verifier(lntune_op op, lntune_types types, int fusion, const int64_t *hs,
                            size_t nh, uint64_t seed, void **out) {
    lntune_verifier *v = NULL;
    int rc = lntune_verifier_create_fused(op, types, fusion, hs, nh, seed, &v);
    *out = v;
    return rc;
}

static void forward_verifier_destroy(void *v) {
    lntune_verifier_destroy(v);
}

static int forward_check(void *v, lntune_kernel_fn fn, const lntune_source *src, int threads,
                         lntune_pool *pool, lntune_verify_result *res) {
    return lntune_verifier_check(v, fn, src->affine, src->fixed_h, threads, pool, res);
}

static void forward_sandbox_verify(void *v, lntune_sandbox_check *c, size_t n, lntune_pool *pool,
                                   lntune_sandbox_outcome *out) {
    lntune_sandbox_verify(v, c, n, pool, out);
}

static lntune_timed forward_candidate(const lntune_problem *p, lntune_kernel_fn fn, int threads) {
    (void)p;
    return (lntune_timed){.fn = fn, .threads = threads};
}

/* ---- backward ---- */

/*
 * x and dy (and, fused, dresidual_out) are read and dx written, all in x's type; the copy moves
 * as many bytes. gamma (H elements), the saved statistics (rows floats), the per-thread partials
 * and their reduction (threads x H floats) are left out of the bytes: they do not grow with
 * rows x H. The data are those of training: saved statistics from the forward (the kernel's other
 * path, recomputing them, is verified but not timed).
 */
static int backward_init(lntune_problem *p, int max_threads) {
    const size_t elems = (size_t)(p->rows * p->H), H = (size_t)p->H,
                 sx = lntune_type_size(p->types.x);
    const int fused = p->fusion == LNTUNE_FUSION_RESIDUAL;
    const int64_t tensors = 3 + fused; /* x, dy, dx (, dresidual_out) */
    const int64_t copy_h =
        (tensors * (int64_t)sx * p->H + 7) / 8; /* floats a copy row reads and writes */
    const size_t dy_at = (elems * sx + 63) / 64 * 64;
    const size_t dres_at = dy_at + (elems * sizeof(float) + 63) / 64 * 64;
    const size_t in_end = fused ? dres_at + elems * sizeof(float) : dy_at + elems * sizeof(float);
    /* One region for x, dy (, dresidual_out), one for dx, each big enough for the copy's rows
     * too; fill() writes fp32 before narrowing in place, so dy's room is fp32-sized. */
    size_t floats = (size_t)(p->rows * copy_h);
    if (floats < in_end / sizeof(float) + 1) floats = in_end / sizeof(float) + 1;
    if (max_threads < 1) max_threads = 1;
    const int ln = p->op == LNTUNE_OP_LAYERNORM;
    unsigned char *in = alloc(p, floats * sizeof(float));
    float *out = alloc(p, floats * sizeof(float));
    float *gamma = alloc(p, H * sizeof(float));
    float *stats = alloc(p, 2 * (size_t)p->rows * sizeof(float));
    float *parts = alloc(p, (ln ? 2 : 1) * (size_t)max_threads * H * sizeof(float));
    unsigned char *sums = alloc(p, 2 * H * sizeof(float));
    double *z = alloc(p, H * sizeof(double));
    float *row = alloc(p, H * sizeof(float));
    if (!in || !out || !gamma || !stats || !parts || !sums || !z || !row) return LNTUNE_ENOMEM;
    uint64_t state = 0x853c49e6748fea9bULL;
    fill_typed((float *)in, p->types.x, elems, &state, 4.0, 0.0);
    fill_typed((float *)(in + dy_at), p->types.x, elems, &state, 2.0, 0.0);
    if (fused) fill_typed((float *)(in + dres_at), p->types.x, elems, &state, 2.0, 0.0);
    memset(out, 0, floats * sizeof(float)); /* touch dx's pages before any timing */
    fill_typed(gamma, p->types.params, H, &state, 1.0, 1.0);
    float *mean = stats, *rstd = stats + p->rows;
    for (int64_t r = 0; r < p->rows; ++r) {
        for (int64_t i = 0; i < p->H; ++i)
            row[i] = (float)lntune_ref_load(p->types.x, in, r * p->H + i);
        double m, rs;
        lntune_reference_row(p->op, row, p->H, 1e-5, z, &m, &rs);
        mean[r] = (float)m;
        rstd[r] = (float)rs;
    }
    p->call = (lntune_backward_call){.args = {.rows = p->rows,
                                              .H = p->H,
                                              .x_stride = p->H,
                                              .dy_stride = p->H,
                                              .dx_stride = p->H,
                                              .x = in,
                                              .dy = in + dy_at,
                                              .gamma = gamma,
                                              .mean = ln ? mean : NULL,
                                              .rstd = rstd,
                                              .dx = out,
                                              .eps = 1e-5f,
                                              .dresidual_out = fused ? in + dres_at : NULL,
                                              .dresidual_out_stride = fused ? p->H : 0},
                                     .dgamma_parts = parts,
                                     .dbeta_parts = ln ? parts + (size_t)max_threads * H : NULL,
                                     .dgamma = sums,
                                     .dbeta = sums + H * sizeof(float),
                                     .params_type = p->types.params};
    /* The two regions as one row each: what the sandbox's worker copies. */
    p->args = (lntune_kernel_args){.rows = 1,
                                   .H = (int64_t)floats,
                                   .x_stride = (int64_t)floats,
                                   .y_stride = (int64_t)floats,
                                   .x = in,
                                   .y = out,
                                   .eps = 1e-5f};
    p->copy_args = (lntune_kernel_args){
        .rows = p->rows, .H = copy_h, .x_stride = copy_h, .y_stride = copy_h, .x = in, .y = out};
    p->bytes = (double)elems * (double)tensors * (double)sx;
    return LNTUNE_OK;
}

static int backward_verifier(lntune_op op, lntune_types types, int fusion, const int64_t *hs,
                             size_t nh, uint64_t seed, void **out) {
    lntune_backward_verifier *v = NULL;
    int rc = lntune_backward_verifier_create_fused(op, types, fusion, hs, nh, seed, &v);
    *out = v;
    return rc;
}

static void backward_verifier_destroy(void *v) {
    lntune_backward_verifier_destroy(v);
}

/* A backward kernel is loaded through lntune_kernel_fn; this is its type again. */
static lntune_backward_kernel_fn as_backward(lntune_kernel_fn fn) {
    lntune_backward_kernel_fn b;
    memcpy(&b, &fn, sizeof b); /* as dispatch.c: the symbol's real type, not a call through fn's */
    return b;
}

static int backward_check(void *v, lntune_kernel_fn fn, const lntune_source *src, int threads,
                          lntune_pool *pool, lntune_verify_result *res) {
    return lntune_backward_verifier_check(v, as_backward(fn), src->fixed_h, threads, pool, res);
}

static void backward_sandbox_verify(void *v, lntune_sandbox_check *c, size_t n, lntune_pool *pool,
                                    lntune_sandbox_outcome *out) {
    for (size_t k = 0; k < n; ++k) c[k].backward = as_backward(c[k].fn);
    lntune_sandbox_verify_backward(v, c, n, pool, out);
}

static lntune_timed backward_candidate(const lntune_problem *p, lntune_kernel_fn fn, int threads) {
    return (lntune_timed){.backward = as_backward(fn), .call = &p->call, .threads = threads};
}

/* ---- the table ---- */

static const lntune_direction directions[2] = {
    {"forward", "", forward_init, forward_verifier, forward_verifier_destroy, forward_check,
     forward_sandbox_verify, forward_candidate},
    {"backward", "_backward", backward_init, backward_verifier, backward_verifier_destroy,
     backward_check, backward_sandbox_verify, backward_candidate},
};

static const char *const op_texts[2][2] = {{"layernorm", "layernorm_backward"},
                                           {"rmsnorm", "rmsnorm_backward"}};

int lntune_op_text_parse(const char *text, lntune_op *op, const lntune_direction **dir,
                         const char **canonical) {
    for (int o = 0; text && o < 2; ++o)
        for (int b = 0; b < 2; ++b)
            if (strcmp(text, op_texts[o][b]) == 0) {
                if (op) *op = (lntune_op)o;
                if (dir) *dir = &directions[b];
                if (canonical) *canonical = op_texts[o][b];
                return 0;
            }
    return -1;
}

const char *lntune_op_text(lntune_op op, int backward) {
    return op_texts[op == LNTUNE_OP_RMSNORM][backward != 0];
}

const char *lntune_op_direction(const char *op_key) {
    const lntune_direction *dir = NULL;
    char op[48];
    int fusion, offset;
    return lntune_op_key_parse(op_key, op, sizeof op, &fusion, &offset) == 0 &&
                   lntune_op_text_parse(op, NULL, &dir, NULL) == 0
               ? dir->name
               : "?";
}

int lntune_problem_init(lntune_problem *p, const char *op_text, lntune_types types, int fusion,
                        int64_t rows, int64_t H, int max_threads) {
    memset(p, 0, sizeof *p);
    if (lntune_op_text_parse(op_text, &p->op, &p->dir, &p->op_text) != 0 || rows < 1 || H < 1 ||
        fusion < LNTUNE_FUSION_NONE || fusion >= LNTUNE_FUSION_COUNT)
        return LNTUNE_EINVAL;
    /* the backward fuses only a residual whose gradient dresidual_out is given (fusion.h) */
    if (p->dir == &directions[1] && (types.y != types.x || fusion == LNTUNE_FUSION_RESIDUAL_OUT))
        return LNTUNE_EINVAL;
    p->types = types;
    p->fusion = fusion;
    p->rows = rows;
    p->H = H;
    int rc = p->dir->init(p, max_threads);
    if (rc != LNTUNE_OK) lntune_problem_free(p);
    return rc;
}

void lntune_problem_free(lntune_problem *p) {
    if (!p) return;
    for (size_t k = 0; k < sizeof p->mem / sizeof p->mem[0]; ++k) {
        free(p->mem[k]);
        p->mem[k] = NULL;
    }
}

int lntune_problem_verifier(const lntune_problem *p, void **out) {
    const int64_t hs[3] = {1, 17, p->H};
    const size_t nh = p->H == 1 || p->H == 17 ? 2 : 3;
    return p->dir->verifier_create(p->op, p->types, p->fusion, hs, nh, 0, out);
}
