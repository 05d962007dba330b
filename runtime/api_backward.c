/*
 * api_backward.c - lntune_layernorm_backward and lntune_rmsnorm_backward: check the arguments,
 * find the kernel (tuned in the database for this machine, else built in), run it on the
 * handle's pool with per-thread fp32 partials of dgamma/dbeta, and reduce those in thread order.
 *
 * The descriptor is the forward's with the backward op codes; its dtype packs the type of x, dy
 * and dx (as x and y) and of gamma, dgamma, dbeta (as params), so the database key's dtype text
 * is the forward's: "f32", "bf16", "bf16/bf16/f32". One kernel serves calls with and without
 * gamma (the templates branch once per row group), so the affine kind is always "gamma".
 * A call with dresidual_out (the fused residual backward) has its own descriptor, fusion
 * LNTUNE_FUSION_RESIDUAL, so its database op text is "layernorm_backward+residual" (fusion.h's
 * one naming scheme) and its kernels are generated for it.
 * The partials (threads x H floats, threads <= rows) are allocated per call that wants dgamma or
 * dbeta: their size depends on the call, and a malloc costs little next to reading rows x H twice.
 * On device memory (args.device = LNTUNE_DEVICE_CUDA) the call goes to cuda_dispatch.c.
 */
#include "backward.h"
#include "args_check.h"
#include "context.h"
#include "builtin_policy.h"
#include "cuda_dispatch.h"
#include "dispatch.h"
#include "dtypes.h"
#include "fusion.h"

#include <stdint.h>
#include <stdlib.h>

static const char *const api_names[] = {"lntune_layernorm_backward", "lntune_rmsnorm_backward"};

/* Checks a; on success *types holds its element types. Sets *empty for an empty call (rows == 0
 * or H == 0), whose pointers are not looked at. */
static int check_args(lntune *ctx, const lntune_backward_args *a, int op, lntune_types *types,
                      int *empty) {
    const char *fn = api_names[op];
    if (!a) return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: args is NULL", fn);
    int rc = lntune_check_struct_size(ctx, fn, "lntune_backward_args", a, sizeof *a);
    if (rc != LNTUNE_OK) return rc;
    if ((rc = lntune_check_size(ctx, fn, a->rows, a->H, a->eps, a->flags)) != LNTUNE_OK) return rc;
    if ((unsigned)a->dtype > LNTUNE_BF16 || (unsigned)a->param_dtype > LNTUNE_BF16)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: unknown dtype (dtype %d, param_dtype %d)",
                               fn, (int)a->dtype, (int)a->param_dtype);
    if ((rc = lntune_check_device(ctx, fn, a->device, a->device_index, a->stream)) != LNTUNE_OK)
        return rc;
    const int x = a->dtype == LNTUNE_DTYPE_DEFAULT ? LNTUNE_TYPE_F32 : (int)a->dtype - 1;
    const int p = a->param_dtype == LNTUNE_DTYPE_DEFAULT ? x : (int)a->param_dtype - 1;
    *types = (lntune_types){.x = (uint8_t)x, .y = (uint8_t)x, .params = (uint8_t)p};
    if ((*empty = a->rows == 0 || a->H == 0)) return LNTUNE_OK;
    if (!a->x || !a->dy || !a->dx)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: %s is NULL", fn,
                               !a->x    ? "x"
                               : !a->dy ? "dy"
                                        : "dx");
    static const char *const stride_names[4] = {"x_stride", "dy_stride", "dx_stride",
                                                "dresidual_out_stride"};
    const int64_t strides[4] = {a->x_stride, a->dy_stride, a->dx_stride, a->dresidual_out_stride};
    for (int i = 0; i < 4; ++i)
        if (strides[i] != 0 && strides[i] < a->H)
            return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: %s = %lld; it must be 0 or >= H = %lld",
                                   fn, stride_names[i], (long long)strides[i], (long long)a->H);
    if (op == 1 && a->dbeta)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: RMSNorm has no beta, so no dbeta", fn);
    if (op == 0 && !a->mean != !a->rstd)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: %s given without %s; give both saved statistics or neither", fn,
                               a->mean ? "mean" : "rstd", a->mean ? "rstd" : "mean");
    /* x, dy, dx, dresidual_out: extents (bytes), row widths and strides in bytes */
    static const char *const names[4] = {"x", "dy", "dx", "dresidual_out"};
    const void *ptrs[4] = {a->x, a->dy, a->dx, a->dresidual_out};
    const int64_t size = (int64_t)lntune_type_size(x);
    int64_t extent[4], width = a->H * size, stride[4];
    for (int i = 0; i < 4; ++i) {
        const int64_t s = strides[i] ? strides[i] : a->H;
        extent[i] = ptrs[i] ? lntune_extent_bytes(a->rows, a->H, s, x) : 0;
        if (extent[i] < 0)
            return lntune_ctx_fail(ctx, LNTUNE_EOVERFLOW,
                                   "%s: rows = %lld by its stride does not fit in memory", fn,
                                   (long long)a->rows);
        stride[i] = a->rows > 1 ? s * size : width; /* one row: no stride */
        if (lntune_misaligned(ptrs[i], (size_t)size))
            return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                                   "%s: %s = %p is not aligned to its %lld-byte elements", fn,
                                   names[i], ptrs[i], (long long)size);
    }
    const void *params[3] = {a->gamma, a->dgamma, a->dbeta};
    static const char *const param_names[3] = {"gamma", "dgamma", "dbeta"};
    for (int i = 0; i < 3; ++i)
        if (lntune_misaligned(params[i], lntune_type_size(p)))
            return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                                   "%s: %s = %p is not aligned to its %zu-byte elements", fn,
                                   param_names[i], params[i], lntune_type_size(p));
    if (lntune_misaligned(a->mean, sizeof(float)) || lntune_misaligned(a->rstd, sizeof(float)))
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: mean or rstd is not aligned to a float",
                               fn);
    /* dx against x, dy and dresidual_out (which it may be, with the same stride) */
    for (int i = 0; i < 4; ++i) {
        if (i == 2 || !ptrs[i]) continue;
        if (i == 3 && a->dx == a->dresidual_out && stride[2] == stride[3]) continue;
        if (lntune_matrices_overlap(a->dx, stride[2], width, extent[2], ptrs[i], stride[i], width,
                                    extent[i], a->rows))
            return lntune_ctx_fail(
                ctx, LNTUNE_EINVAL, "%s: dx overlaps %s (%s); give dx memory of its own", fn,
                names[i],
                i == 3 ? "only dresidual_out's own buffer, same stride, is served"
                       : "any overlap is refused");
    }
    return LNTUNE_OK;
}

static int run(lntune *ctx, const lntune_backward_args *a, int op) {
    if (!ctx) return LNTUNE_EINVAL;
    lntune_types types = {0};
    int empty = 1;
    int rc = check_args(ctx, a, op, &types, &empty);
    if (rc != LNTUNE_OK || empty) return rc;

    const int fusion = a->dresidual_out ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE;
    const lntune_backward_kernel_args ka = {
        .rows = a->rows,
        .H = a->H,
        .x_stride = a->x_stride ? a->x_stride : a->H,
        .dy_stride = a->dy_stride ? a->dy_stride : a->H,
        .dx_stride = a->dx_stride ? a->dx_stride : a->H,
        .x = a->x,
        .dy = a->dy,
        .gamma = a->gamma,
        .mean = a->mean,
        .rstd = a->rstd,
        .dx = a->dx,
        .eps = lntune_kernel_eps(a->eps, a->flags),
        .dresidual_out = a->dresidual_out,
        .dresidual_out_stride = a->dresidual_out_stride ? a->dresidual_out_stride : a->H,
    };
    if (a->device == LNTUNE_DEVICE_CUDA)
        return lntune_gpu_run_backward(ctx, a, op, types, fusion, &ka, api_names[op]);

    const lntune_desc d =
        lntune_desc_make(LNTUNE_DESC_LAYERNORM_BACKWARD + op, lntune_types_packed(types),
                         LNTUNE_DESC_GAMMA, fusion, lntune_rows_bucket(a->rows), a->H);
    const uint64_t hash = lntune_desc_hash(&d);
    const lntune_entry *e = lntune_registry_find(&ctx->registry, &d, hash);
    if (!e && (rc = lntune_dispatch_resolve(ctx, &d, hash, a->rows, &e)) != LNTUNE_OK) return rc;

    const int builtin_threads = lntune_builtin_threads(a->rows, a->H, ctx->max_threads);
    const int tuned = e->backward != e->backward_fallback;
    int threads = tuned ? e->threads : builtin_threads;
    lntune_pool *pool = NULL;
    if ((threads > 1 || builtin_threads > 1) &&
        !(pool = atomic_load_explicit(&ctx->pool, memory_order_acquire)))
        pool = lntune_dispatch_pool(ctx);
    /* Sized for the larger thread count of the two kernels that may run. */
    const int most = lntune_backward_threads(
        pool, threads > builtin_threads ? threads : builtin_threads, a->rows);
    float *dgamma = NULL, *dbeta = NULL;
    const size_t n = (size_t)most * (size_t)a->H;
    if ((a->dgamma && !(dgamma = malloc(n * sizeof *dgamma))) ||
        (a->dbeta && !(dbeta = malloc(n * sizeof *dbeta)))) {
        free(dgamma);
        return lntune_ctx_fail(ctx, LNTUNE_ENOMEM, "%s: out of memory for %lld partial sums",
                               api_names[op], (long long)n);
    }
    rc = lntune_backward_run(pool, e->backward, &ka, threads, dgamma, dbeta);
    if (rc == LNTUNE_KERNEL_EUNSUPPORTED && tuned) {
        /* the tuned kernel declined these args; the run zeroes the partials again */
        threads = builtin_threads;
        rc = lntune_backward_run(pool, e->backward_fallback, &ka, threads, dgamma, dbeta);
    }
    if (rc == LNTUNE_KERNEL_OK) {
        threads = lntune_backward_threads(pool, threads, a->rows);
        if (a->dgamma) lntune_backward_reduce(dgamma, threads, a->H, a->dgamma, types.params);
        if (a->dbeta) lntune_backward_reduce(dbeta, threads, a->H, a->dbeta, types.params);
    }
    free(dgamma);
    free(dbeta);
    if (rc != LNTUNE_KERNEL_OK)
        return lntune_ctx_fail(ctx, LNTUNE_ERROR, "%s: the kernel for H = %lld returned %d",
                               api_names[op], (long long)a->H, rc);
    return LNTUNE_OK;
}

int lntune_layernorm_backward(lntune *ctx, const lntune_backward_args *args) {
    return run(ctx, args, 0);
}

int lntune_rmsnorm_backward(lntune *ctx, const lntune_backward_args *args) {
    return run(ctx, args, 1);
}
