/*
 * api.c - lntune_layernorm and lntune_rmsnorm: check the arguments, find the kernel, run it.
 *
 * This is the hot path. After the first call of a shape it takes no lock, makes no system call
 * and touches neither SQLite nor a file: a descriptor is hashed, one registry chain is walked
 * with acquire loads, and the kernel runs on this thread or the handle's pool.
 *
 * Argument errors, each with a message on the handle (lntune_errmsg):
 *   LNTUNE_EINVAL       args, x or y NULL; H <= 0; rows < 0; eps < 0 or NaN; a stride that is
 *                       neither 0 nor >= H; a dtype or device outside its enum; device_index or
 *                       stream set for the CPU; beta given to RMSNorm; residual_out without
 *                       residual; a residual (residual_out) stride without residual (residual_out)
 *                       a weight offset that is not finite, or without gamma; an args_size below
 *                       0.4's struct
 *   LNTUNE_EUNSUPPORTED on CUDA, beta without gamma and residual_out == residual
 *                       (cuda_dispatch.c); an args_size past this struct with nonzero bytes
 *                       there
 * Device memory (args->device == LNTUNE_DEVICE_CUDA) goes on to cuda_dispatch.c, whose errors
 * add LNTUNE_ENODEVICE (no driver, GPU or such device_index) and a failed launch (LNTUNE_ERROR).
 *   LNTUNE_EOVERFLOW    the last element of x or y lies beyond what a pointer can address
 * rows == 0 is a successful no-op. A NULL ctx returns LNTUNE_EINVAL (no handle for a message).
 *
 * The CPU serves every (x, y, gamma/beta, residual) tuple of fp32, fp16 and bf16, with and
 * without residual/residual_out: the tuple and the fusion (fusion.h) are part of the descriptor,
 * so each has its own tuned kernels, and the built-ins where none was tuned.
 */
#include "args_check.h"
#include "context.h"
#include "builtin_offset.h"
#include "builtin_policy.h"
#include "builtin_quant.h"
#include "cuda_dispatch.h"
#include "dispatch.h"
#include "dtypes.h"
#include "fusion.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static const char *const api_names[] = {"lntune_layernorm", "lntune_rmsnorm"};

/*
 * The internal types of a call: LNTUNE_DTYPE_DEFAULT resolved (dtype: fp32; others: dtype). The
 * residual type counts only with a residual, so that a call without one keys as it always did.
 */
static lntune_types lntune_args_types(const lntune_args *a) {
    const int x = a->dtype == LNTUNE_DTYPE_DEFAULT ? LNTUNE_TYPE_F32 : (int)a->dtype - 1;
    /* a quantized y: its code, with a scale per row where y_scales is given (dtypes.h) */
    const int y = a->y_dtype == LNTUNE_DTYPE_DEFAULT ? x
                  : a->y_dtype == LNTUNE_I8 ? (a->y_scales ? LNTUNE_TYPE_I8_ROW : LNTUNE_TYPE_I8)
                  : a->y_dtype == LNTUNE_FP8_E4M3
                      ? (a->y_scales ? LNTUNE_TYPE_E4M3_ROW : LNTUNE_TYPE_E4M3)
                      : (int)a->y_dtype - 1;
    lntune_types t = {
        (uint8_t)x, (uint8_t)y,
        (uint8_t)(a->param_dtype == LNTUNE_DTYPE_DEFAULT ? x : (int)a->param_dtype - 1), 0};
    if (a->residual && a->residual_dtype != LNTUNE_DTYPE_DEFAULT)
        lntune_types_set_residual(&t, (int)a->residual_dtype - 1);
    return t;
}

/* The size of 0.4's lntune_args, which ends before weight_offset: what the plain functions read. */
#define ARGS_SIZE_0_4 offsetof(lntune_args, weight_offset)

/*
 * The weight offset of a, whose struct has size bytes (lntune.h), into *offset: 0 where the
 * caller's struct ends before it. Fails on a size below 0.4's, or past this struct with nonzero
 * bytes (fields of a newer header that this library would ignore).
 */
static int read_sized(lntune *ctx, const char *fn, const lntune_args *a, size_t size,
                      float *offset) {
    if (size < ARGS_SIZE_0_4)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: args_size = %zu, below any lntune_args (%zu bytes or more)", fn,
                               size, (size_t)ARGS_SIZE_0_4);
    for (size_t i = sizeof *a; i < size; ++i)
        if (((const unsigned char *)a)[i])
            return lntune_ctx_fail(ctx, LNTUNE_EUNSUPPORTED,
                                   "%s: args has %zu bytes, this liblntune (%s) knows %zu and "
                                   "byte %zu is set: a field of a newer lntune.h",
                                   fn, size, LNTUNE_VERSION_STRING, sizeof *a, i);
    *offset = size >= offsetof(lntune_args, weight_offset) + sizeof a->weight_offset
                  ? a->weight_offset
                  : 0.0f;
    return LNTUNE_OK;
}

/* Checks a (of size bytes); on success *types holds its resolved element types and *offset its
 * weight offset (0: none). */
static int check_args(lntune *ctx, const lntune_args *a, size_t size, int op, lntune_types *types,
                      float *offset) {
    const char *fn = api_names[op];
    if (!a) return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: args is NULL", fn);
    int rc = read_sized(ctx, fn, a, size, offset);
    if (rc != LNTUNE_OK) return rc;
    if (*offset != 0.0f && !(isfinite(*offset) && a->gamma))
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: weight_offset = %g %s", fn, (double)*offset,
                               isfinite(*offset) ? "without gamma (it offsets gamma)"
                                                 : "is not finite");
    if ((rc = lntune_check_size(ctx, fn, a->rows, a->H, a->eps)) != LNTUNE_OK) return rc;
    if (!a->x || !a->y)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: %s is NULL", fn, !a->x ? "x" : "y");
    if ((a->x_stride != 0 && a->x_stride < a->H) || (a->y_stride != 0 && a->y_stride < a->H))
        return lntune_ctx_fail(
            ctx, LNTUNE_EINVAL,
            "%s: x_stride = %lld, y_stride = %lld; each must be 0 or >= H = %lld", fn,
            (long long)a->x_stride, (long long)a->y_stride, (long long)a->H);
    if (a->residual_out && !a->residual)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: residual_out given without residual (it receives x + residual)",
                               fn);
    if ((a->residual_stride && !a->residual) || (a->residual_out_stride && !a->residual_out))
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: %s given without %s", fn,
                               a->residual_stride && !a->residual ? "residual_stride"
                                                                  : "residual_out_stride",
                               a->residual_stride && !a->residual ? "residual" : "residual_out");
    if ((a->residual_stride != 0 && a->residual_stride < a->H) ||
        (a->residual_out_stride != 0 && a->residual_out_stride < a->H))
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: residual_stride = %lld, residual_out_stride = %lld; each must "
                               "be 0 or >= H = %lld",
                               fn, (long long)a->residual_stride, (long long)a->residual_out_stride,
                               (long long)a->H);
    if ((unsigned)a->dtype > LNTUNE_BF16 || (unsigned)a->y_dtype > LNTUNE_FP8_E4M3 ||
        (unsigned)a->param_dtype > LNTUNE_BF16 ||
        (a->residual && (unsigned)a->residual_dtype > LNTUNE_BF16))
        return lntune_ctx_fail(
            ctx, LNTUNE_EINVAL,
            "%s: unknown dtype (dtype %d, y_dtype %d, param_dtype %d, residual_dtype %d)", fn,
            (int)a->dtype, (int)a->y_dtype, (int)a->param_dtype, (int)a->residual_dtype);
    if ((rc = lntune_check_device(ctx, fn, a->device, a->device_index, a->stream)) != LNTUNE_OK)
        return rc;
    if (op == LNTUNE_DESC_RMSNORM && a->beta)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: RMSNorm takes no beta", fn);
    if (a->y_dtype == LNTUNE_I8 || a->y_dtype == LNTUNE_FP8_E4M3) { /* the fields read only then */
        if (!a->y_scales && !(a->y_scale >= FLT_MIN && a->y_scale <= FLT_MAX))
            return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                                   "%s: y_scale = %g: a static scale must be positive, normal and "
                                   "finite (or give y_scales for a scale per row)",
                                   fn, (double)a->y_scale);
    }
#ifndef LNTUNE_HAVE_CUDA
    if (a->device == LNTUNE_DEVICE_CUDA)
        return lntune_ctx_fail(ctx, LNTUNE_EUNSUPPORTED,
                               "%s: this build of liblntune has no CUDA support (LNTUNE_CUDA=OFF)",
                               fn);
#endif
    *types = lntune_args_types(a);
    const int rt = lntune_types_residual(*types);
    if (a->rows > 0 &&
        (lntune_extent_bytes(a->rows, a->H, a->x_stride ? a->x_stride : a->H, types->x) < 0 ||
         lntune_extent_bytes(a->rows, a->H, a->y_stride ? a->y_stride : a->H, types->y) < 0 ||
         (a->residual &&
          lntune_extent_bytes(a->rows, a->H, a->residual_stride ? a->residual_stride : a->H, rt) <
              0) ||
         (a->residual_out &&
          lntune_extent_bytes(a->rows, a->H, a->residual_out_stride ? a->residual_out_stride : a->H,
                              rt) < 0)))
        return lntune_ctx_fail(ctx, LNTUNE_EOVERFLOW,
                               "%s: rows = %lld by its stride does not fit in memory", fn,
                               (long long)a->rows);
    return LNTUNE_OK;
}

/*
 * Runs a built-in: kernel, or without one (a quantized y) quant_float then quantized
 * (builtin_quant.h); with a weight offset, on fp32 offset + gamma (builtin_offset.h), so that
 * types' params are then fp32.
 */
static int run_builtin(lntune_pool *pool, lntune_kernel_fn kernel, lntune_kernel_fn quant_float,
                       lntune_kernel_args *ka, lntune_types types, int threads, int offset) {
    lntune_kernel_args oa;
    float *buf = NULL;
    if (offset) {
        oa = *ka;
        if (lntune_offset_params(&oa, types.params, &buf) != 0) return -1;
        ka = &oa;
        types.params = LNTUNE_TYPE_F32;
    }
    const int rc = kernel ? lntune_pool_run_kernel(pool, kernel, ka, threads)
                          : lntune_builtin_quant_run(pool, quant_float, ka, types, threads);
    free(buf);
    return rc;
}

static int run(lntune *ctx, const lntune_args *a, size_t size, int op) {
    if (!ctx) return LNTUNE_EINVAL;
    lntune_types types = {0}; /* set by check_args; zeroed for the compiler's flow analysis */
    float offset = 0.0f;
    int rc = check_args(ctx, a, size, op, &types, &offset);
    if (rc != LNTUNE_OK || a->rows == 0) return rc;
    const int fusion = !a->residual      ? LNTUNE_FUSION_NONE
                       : a->residual_out ? LNTUNE_FUSION_RESIDUAL_OUT
                                         : LNTUNE_FUSION_RESIDUAL;
    /* The kernels' args, the CPU's and the GPU's. Field by field: an initializer would zero the
     * struct first (rep stos), which costs more than the whole lookup. */
    lntune_kernel_args ka;
    ka.rows = a->rows;
    ka.H = a->H;
    ka.x_stride = a->x_stride ? a->x_stride : a->H;
    ka.y_stride = a->y_stride ? a->y_stride : a->H;
    ka.residual_stride = a->residual_stride ? a->residual_stride : a->H;
    ka.residual_out_stride = a->residual_out_stride ? a->residual_out_stride : a->H;
    ka.x = a->x;
    ka.residual = a->residual;
    ka.gamma = a->gamma;
    ka.beta = a->beta;
    ka.y = a->y;
    ka.residual_out = a->residual_out;
    ka.mean = a->mean;
    ka.rstd = a->rstd;
    ka.eps = a->eps > 0.0f ? a->eps : 1e-5f;
    const int quant = lntune_type_quantized(types.y); /* a->y_scale and y_scales exist */
    ka.y_scale = quant ? a->y_scale : 0.0f;
    ka.y_scales = quant ? a->y_scales : NULL;
    ka.weight_offset = offset;
#ifdef LNTUNE_HAVE_CUDA
    if (a->device == LNTUNE_DEVICE_CUDA)
        return lntune_gpu_run(ctx, a, op, types, fusion, &ka, api_names[op]);
#endif

    const int affine = offset != 0.0f ? LNTUNE_DESC_GAMMA_OFFSET
                       : a->gamma     ? LNTUNE_DESC_GAMMA
                       : a->beta      ? LNTUNE_DESC_BETA_ONLY
                                      : LNTUNE_DESC_NO_AFFINE;
    const lntune_desc d = lntune_desc_make(op, lntune_types_packed(types), affine, fusion,
                                           lntune_dispatch_bucket(ctx, a->rows), a->H);
    uint64_t hash = lntune_desc_hash(&d);
    const lntune_entry *e = lntune_registry_find(&ctx->registry, &d, hash);
    if (!e && (rc = lntune_dispatch_resolve(ctx, &d, hash, a->rows, &e)) != LNTUNE_OK) return rc;

    const int builtin_threads = lntune_builtin_threads(a->rows, a->H, ctx->max_threads);
    lntune_kernel_fn kernel = e->kernel;
    int threads = e->threads;
    const int builtin = kernel == e->fallback; /* both NULL: a quantized y never tuned */
    if (builtin) {
        threads = builtin_threads;
        if (e->streaming && a->rows * a->H >= e->streaming_elements) kernel = e->streaming;
    }
    lntune_pool *pool = NULL;
    if (threads > 1 && !(pool = atomic_load_explicit(&ctx->pool, memory_order_acquire)))
        pool = lntune_dispatch_pool(ctx);
    /* A tuned kernel, else a built-in (none for a quantized y: quant_float, then quantized). */
    rc = !builtin || (kernel && !e->offset_params)
             ? lntune_pool_run_kernel(pool, kernel, &ka, threads)
             : run_builtin(pool, kernel, e->quant_float, &ka, types, threads, e->offset_params);
    if (rc == LNTUNE_KERNEL_EUNSUPPORTED && e->kernel != e->fallback) {
        /* The tuned kernel declined these args (its checks are stricter than the key). */
        if (builtin_threads > 1 && !pool) pool = lntune_dispatch_pool(ctx);
        rc = run_builtin(pool, e->fallback, e->quant_float, &ka, types, builtin_threads,
                         e->offset_params);
    }
    if (rc < 0)
        return lntune_ctx_fail(ctx, LNTUNE_ENOMEM, "%s: out of memory for the weights + offset",
                               api_names[op]);
    if (rc != LNTUNE_KERNEL_OK)
        return lntune_ctx_fail(ctx, LNTUNE_ERROR, "%s: the kernel for H = %lld returned %d",
                               api_names[op], (long long)a->H, rc);
    return LNTUNE_OK;
}

/* The plain functions (parenthesized past lntune.h's macros of the same names) read 0.4's
 * struct: what apps built before 0.5 pass. */
int(lntune_layernorm)(lntune *ctx, const lntune_args *args) {
    return run(ctx, args, ARGS_SIZE_0_4, LNTUNE_DESC_LAYERNORM);
}

int(lntune_rmsnorm)(lntune *ctx, const lntune_args *args) {
    return run(ctx, args, ARGS_SIZE_0_4, LNTUNE_DESC_RMSNORM);
}

int lntune_layernorm_sized(lntune *ctx, const lntune_args *args, size_t args_size) {
    return run(ctx, args, args_size, LNTUNE_DESC_LAYERNORM);
}

int lntune_rmsnorm_sized(lntune *ctx, const lntune_args *args, size_t args_size) {
    return run(ctx, args, args_size, LNTUNE_DESC_RMSNORM);
}
