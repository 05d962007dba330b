/*
 * api.c - lntune_layernorm, lntune_rmsnorm and lntune_query: check the arguments, find the
 * kernel, run it (or, for the query, say which it is).
 *
 * This is the hot path. After the first call of a shape it takes no lock, makes no system call
 * and touches neither SQLite nor a file: a descriptor is hashed, one registry chain is walked
 * with acquire loads, and the kernel runs on this thread or the handle's pool.
 *
 * The checks and their codes are lntune.h's list (each failure with a message on the handle,
 * lntune_errmsg). Their order: the struct's size, then the fields other than pointers; an empty
 * call (rows == 0 or H == 0) returns there, before any pointer is looked at; then the pointers,
 * strides, extents, alignment and overlap. Device memory (args->device == LNTUNE_DEVICE_CUDA)
 * goes on to cuda_dispatch.c, whose errors add LNTUNE_ENODEVICE (no driver, GPU or such
 * device_index), its refusals (LNTUNE_EUNSUPPORTED) and a failed launch (LNTUNE_ERROR). A NULL
 * ctx returns LNTUNE_EINVAL (no handle for a message).
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

/* The extents in bytes of x, y, residual and residual_out, and their rows' widths and strides. */
typedef struct {
    int64_t extent[4], width[4], stride[4];
} call_layout;

static const char *const tensor_names[4] = {"x", "y", "residual", "residual_out"};

/* Whether tensors i and j of a call overlap (lntune_matrices_overlap). */
static int overlap(const lntune_args *a, const call_layout *l, int i, int j) {
    const void *p[4] = {a->x, a->y, a->residual, a->residual_out};
    return p[i] && p[j] &&
           lntune_matrices_overlap(p[i], l->stride[i], l->width[i], l->extent[i], p[j],
                                   l->stride[j], l->width[j], l->extent[j], a->rows);
}

/* Whether tensors i and j of a call are one: the same start, stride and row width. */
static int same_tensor(const lntune_args *a, const call_layout *l, int i, int j) {
    const void *p[4] = {a->x, a->y, a->residual, a->residual_out};
    return p[i] == p[j] && l->stride[i] == l->stride[j] && l->width[i] == l->width[j];
}

/* The pointers of a (rows > 0, H > 0): each aligned to its element, no output overlapping
 * another tensor but residual_out residual itself and y x itself (in place). */
static int check_pointers(lntune *ctx, const char *fn, const lntune_args *a, lntune_types types,
                          const call_layout *l) {
    const int rt = lntune_types_residual(types);
    const struct {
        const void *p;
        int type;
        const char *name;
    } ptrs[] = {{a->x, types.x, "x"},
                {a->y, types.y, "y"},
                {a->gamma, types.params, "gamma"},
                {a->beta, types.params, "beta"},
                {a->residual, rt, "residual"},
                {a->residual_out, rt, "residual_out"},
                {a->mean, LNTUNE_TYPE_F32, "mean"},
                {a->rstd, LNTUNE_TYPE_F32, "rstd"},
                {lntune_type_quantized(types.y) ? a->y_scales : NULL, LNTUNE_TYPE_F32, "y_scales"}};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; ++i)
        if (lntune_misaligned(ptrs[i].p, lntune_type_size(ptrs[i].type)))
            return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                                   "%s: %s = %p is not aligned to its %zu-byte elements", fn,
                                   ptrs[i].name, ptrs[i].p, lntune_type_size(ptrs[i].type));
    /* outputs (y, residual_out) against every other tensor of rows x H */
    static const int pairs[][2] = {{1, 0}, {1, 2}, {1, 3}, {3, 0}, {3, 2}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i) {
        const int o = pairs[i][0], t = pairs[i][1];
        if (((o == 3 && t == 2) || (o == 1 && t == 0)) && same_tensor(a, l, o, t))
            continue; /* residual_out = residual, y = x: in place */
        if (overlap(a, l, o, t))
            return lntune_ctx_fail(
                ctx, LNTUNE_EINVAL, "%s: %s overlaps %s (%s); give %s memory of its own", fn,
                tensor_names[o], tensor_names[t],
                o == 3 && t == 2 ? "only residual_out = residual itself, same stride, is served"
                : o == 1 && t == 0
                    ? "only y = x itself, same stride and element size, is served (in place)"
                    : "any overlap is refused",
                tensor_names[o]);
    }
    return LNTUNE_OK;
}

/* Checks a; on success *types holds its resolved element types. Sets *empty for an empty call
 * (rows == 0 or H == 0), whose pointers are not looked at. */
static inline int check_args(lntune *ctx, const lntune_args *a, int op, lntune_types *types,
                             int *empty) {
    const char *fn = api_names[op];
    if (!a) return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: args is NULL", fn);
    int rc = lntune_check_struct_size(ctx, fn, "lntune_args", a, sizeof *a);
    if (rc != LNTUNE_OK) return rc;
    if ((rc = lntune_check_size(ctx, fn, a->rows, a->H, a->eps, a->flags)) != LNTUNE_OK) return rc;
    if (a->weight_offset != 0.0f && !isfinite(a->weight_offset))
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: weight_offset = %g is not finite", fn,
                               (double)a->weight_offset);
    if ((unsigned)a->dtype > LNTUNE_BF16 || (unsigned)a->y_dtype > LNTUNE_FP8_E4M3 ||
        (unsigned)a->param_dtype > LNTUNE_BF16 ||
        (a->residual && (unsigned)a->residual_dtype > LNTUNE_BF16))
        return lntune_ctx_fail(
            ctx, LNTUNE_EINVAL,
            "%s: unknown dtype (dtype %d, y_dtype %d, param_dtype %d, residual_dtype %d)", fn,
            (int)a->dtype, (int)a->y_dtype, (int)a->param_dtype, (int)a->residual_dtype);
    if ((rc = lntune_check_device(ctx, fn, a->device, a->device_index, a->stream)) != LNTUNE_OK)
        return rc;
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
    if ((*empty = a->rows == 0 || a->H == 0)) return LNTUNE_OK;
    if (!a->x || !a->y)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: %s is NULL", fn, !a->x ? "x" : "y");
    if (a->weight_offset != 0.0f && !a->gamma)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: weight_offset = %g without gamma (it offsets gamma)", fn,
                               (double)a->weight_offset);
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
    if (op == LNTUNE_DESC_RMSNORM && a->beta)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: RMSNorm takes no beta", fn);
    const int rt = lntune_types_residual(*types);
    const int64_t strides[4] = {a->x_stride, a->y_stride, a->residual_stride,
                                a->residual_out_stride};
    const int type[4] = {types->x, types->y, rt, rt};
    const int given[4] = {1, 1, a->residual != NULL, a->residual_out != NULL};
    call_layout l;
    for (int i = 0; i < 4; ++i) {
        const int64_t size = (int64_t)lntune_type_size(type[i]);
        const int64_t stride = strides[i] ? strides[i] : a->H;
        l.extent[i] = given[i] ? lntune_extent_bytes(a->rows, a->H, stride, type[i]) : 0;
        if (l.extent[i] < 0)
            return lntune_ctx_fail(ctx, LNTUNE_EOVERFLOW,
                                   "%s: rows = %lld by its stride does not fit in memory", fn,
                                   (long long)a->rows);
        l.width[i] = a->H * size; /* no overflow: the extent is at least this */
        l.stride[i] = a->rows > 1 ? stride * size : l.width[i]; /* one row: no stride */
    }
    return check_pointers(ctx, fn, a, *types, &l);
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

/* The affine kind of a call's descriptor (registry.h). */
static int call_affine(const lntune_args *a) {
    return a->weight_offset != 0.0f ? LNTUNE_DESC_GAMMA_OFFSET
           : a->gamma               ? LNTUNE_DESC_GAMMA
           : a->beta                ? LNTUNE_DESC_BETA_ONLY
                                    : LNTUNE_DESC_NO_AFFINE;
}

static int call_fusion(const lntune_args *a) {
    return !a->residual      ? LNTUNE_FUSION_NONE
           : a->residual_out ? LNTUNE_FUSION_RESIDUAL_OUT
                             : LNTUNE_FUSION_RESIDUAL;
}

/* The registry entry of a CPU call, resolved by dispatch.c on the first call of its shape. */
static inline int cpu_entry(lntune *ctx, const lntune_args *a, int op, lntune_types types,
                            const lntune_entry **e) {
    const lntune_desc d =
        lntune_desc_make(op, lntune_types_packed(types), call_affine(a), call_fusion(a),
                         lntune_dispatch_bucket(ctx, a->rows), a->H);
    uint64_t hash = lntune_desc_hash(&d);
    if ((*e = lntune_registry_find(&ctx->registry, &d, hash))) return LNTUNE_OK;
    return lntune_dispatch_resolve(ctx, &d, hash, a->rows, e);
}

static int run(lntune *ctx, const lntune_args *a, int op) {
    if (!ctx) return LNTUNE_EINVAL;
    lntune_types types = {0}; /* set by check_args; zeroed for the compiler's flow analysis */
    int empty = 1;
    int rc = check_args(ctx, a, op, &types, &empty);
    if (rc != LNTUNE_OK || empty) return rc;
    const float offset = a->weight_offset;
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
    ka.eps = lntune_kernel_eps(a->eps, a->flags);
    const int quant = lntune_type_quantized(types.y); /* a->y_scale and y_scales exist */
    ka.y_scale = quant ? a->y_scale : 0.0f;
    ka.y_scales = quant ? a->y_scales : NULL;
    ka.weight_offset = offset;
#ifdef LNTUNE_HAVE_CUDA
    if (a->device == LNTUNE_DEVICE_CUDA)
        return lntune_gpu_run(ctx, a, op, types, call_fusion(a), &ka, api_names[op]);
#endif

    const lntune_entry *e;
    if ((rc = cpu_entry(ctx, a, op, types, &e)) != LNTUNE_OK) return rc;

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

int lntune_layernorm(lntune *ctx, const lntune_args *args) {
    return run(ctx, args, LNTUNE_DESC_LAYERNORM);
}

int lntune_rmsnorm(lntune *ctx, const lntune_args *args) {
    return run(ctx, args, LNTUNE_DESC_RMSNORM);
}

int lntune_query(lntune *ctx, int op, const lntune_args *args, lntune_kernel_info *info) {
    if (!ctx) return LNTUNE_EINVAL;
    static const char *const fn = "lntune_query";
    if (op != LNTUNE_LAYERNORM && op != LNTUNE_RMSNORM)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: unknown op %d", fn, op);
    if (!info) return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: info is NULL", fn);
    int rc = lntune_check_struct_size(ctx, fn, "lntune_kernel_info", info, sizeof *info);
    if (rc != LNTUNE_OK) return rc;
    /* the library writes only what the caller's struct holds: this struct, or more */
    lntune_kernel_info out = {sizeof out, LNTUNE_SERVED_NONE, 0, 0, 0, "", ""};
    const int dop = op == LNTUNE_LAYERNORM ? LNTUNE_DESC_LAYERNORM : LNTUNE_DESC_RMSNORM;
    lntune_types types = {0};
    int empty = 1;
    if ((rc = check_args(ctx, args, dop, &types, &empty)) != LNTUNE_OK) return rc;
    const lntune_entry *e = NULL;
    if (empty) {
        out.reason = "an empty call (rows == 0 or H == 0): no kernel runs";
    } else {
#ifdef LNTUNE_HAVE_CUDA
        if (args->device == LNTUNE_DEVICE_CUDA)
            rc = lntune_gpu_entry(ctx, args, dop, types, call_fusion(args), fn, &e);
        else
#endif
            rc = cpu_entry(ctx, args, dop, types, &e);
        if (rc != LNTUNE_OK) return rc;
        out.served_by = e->variant ? LNTUNE_SERVED_TUNED : LNTUNE_SERVED_BUILTIN;
        out.variant = e->variant ? e->variant : "";
        out.reason = e->reason ? e->reason : "";
        if (e->variant) {
            out.threads = e->threads;
            out.tuned_H = e->tuned_H;
            out.tuned_rows = e->tuned_rows;
        }
    }
    out.struct_size = info->struct_size;
    *info = out;
    return LNTUNE_OK;
}
