/*
 * args_check.h - the argument checks the forward (api.c) and backward (api_backward.c) entry
 * points share: the problem's size, eps, the device fields, and each tensor's extent. Each check
 * returns LNTUNE_OK or fails on ctx with a message that names the function fn.
 */
#ifndef LNTUNE_ARGS_CHECK_H
#define LNTUNE_ARGS_CHECK_H

#include "context.h"
#include "dtypes.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes from the first to the last element of a matrix of type, or -1 if that overflows. */
static inline int64_t lntune_extent_bytes(int64_t rows, int64_t H, int64_t stride, int type) {
    int64_t n;
    if (__builtin_mul_overflow(rows - 1, stride, &n) || __builtin_add_overflow(n, H, &n) ||
        __builtin_mul_overflow(n, (int64_t)lntune_type_size(type), &n) || (uint64_t)n > PTRDIFF_MAX)
        return -1;
    return n;
}

/* H > 0, rows >= 0, eps >= 0 and not NaN. */
static inline int lntune_check_size(lntune *ctx, const char *fn, int64_t rows, int64_t H,
                                    float eps) {
    if (H <= 0)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: H = %lld; it must be positive", fn,
                               (long long)H);
    if (rows < 0)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: rows = %lld is negative", fn,
                               (long long)rows);
    if (!(eps >= 0.0f)) /* also catches NaN */
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: eps = %g; it must be >= 0 (0: 1e-5)", fn,
                               (double)eps);
    return LNTUNE_OK;
}

/* A known device; device_index and stream only for CUDA. */
static inline int lntune_check_device(lntune *ctx, const char *fn, lntune_device_kind device,
                                      int device_index, const void *stream) {
    if ((unsigned)device > LNTUNE_DEVICE_CUDA)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: unknown device %d", fn, (int)device);
    if (device == LNTUNE_DEVICE_CPU && (device_index != 0 || stream))
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: device_index and stream must be 0/NULL for the CPU", fn);
    return LNTUNE_OK;
}

#endif /* LNTUNE_ARGS_CHECK_H */
