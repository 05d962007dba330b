/*
 * args_check.h - the argument checks the forward (api.c) and backward (api_backward.c) entry
 * points share: a versioned struct's size, the problem's size, eps and flags, the device fields,
 * each tensor's extent, alignment and overlap. Each check returns LNTUNE_OK or fails on ctx with
 * a message that names the function fn.
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

/*
 * The struct_size of the versioned struct p (lntune.h), type's, of which this library knows
 * known bytes: 0 (this header's struct), or at least known with only zero bytes past it.
 */
static inline int lntune_check_struct_size(lntune *ctx, const char *fn, const char *type,
                                           const void *p, size_t known) {
    const size_t size = *(const size_t *)p;
    if (size == 0 || size == known) return LNTUNE_OK;
    if (size < known)
        return lntune_ctx_fail(
            ctx, LNTUNE_EINVAL,
            "%s: %s.struct_size = %zu; it must be 0 or at least %zu (set it with "
            "the header's _INIT macro)",
            fn, type, size, known);
    for (size_t i = known; i < size; ++i)
        if (((const unsigned char *)p)[i])
            return lntune_ctx_fail(ctx, LNTUNE_EUNSUPPORTED,
                                   "%s: %s has %zu bytes, this liblntune (%s) knows %zu and byte "
                                   "%zu is set: a field of a newer lntune.h",
                                   fn, type, size, LNTUNE_VERSION_STRING, known, i);
    return LNTUNE_OK;
}

/* The eps a kernel gets: as given under LNTUNE_EPS_EXACT, else 0 means 1e-5. */
static inline float lntune_kernel_eps(float eps, unsigned flags) {
    return (flags & LNTUNE_EPS_EXACT) || eps > 0.0f ? eps : 1e-5f;
}

/* Whether p lacks the alignment of an element of size bytes (a power of two). */
static inline int lntune_misaligned(const void *p, size_t size) {
    return ((uintptr_t)p & (size - 1)) != 0;
}

static inline int64_t lntune_floor_div(int64_t a, int64_t b) { /* b > 0 */
    return a / b - (a % b < 0);
}

/*
 * Whether two matrices of rows rows overlap: a's rows of wa bytes start every sa bytes from pa,
 * b's likewise; ea and eb are their extents ((rows - 1) * stride + width, which fit in
 * ptrdiff_t: lntune_extent_bytes). Rows that interleave without touching do not overlap. O(1)
 * where the extents do not meet or the strides are equal, else O(rows).
 */
static inline int lntune_matrices_overlap(const void *a, int64_t sa, int64_t wa, int64_t ea,
                                          const void *b, int64_t sb, int64_t wb, int64_t eb,
                                          int64_t rows) {
    const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    if (pb >= pa ? pb - pa >= (uint64_t)ea : pa - pb >= (uint64_t)eb) return 0;
    const int64_t d = pb >= pa ? (int64_t)(pb - pa) : -(int64_t)(pa - pb); /* b's start from a's */
    if (sa == sb) { /* b's row r + j against a's row r: some j in [-(rows - 1), rows - 1] */
        int64_t j = lntune_floor_div(d - wa, sa) + 1; /* the least j with j * sa > d - wa */
        if (j < -(rows - 1)) j = -(rows - 1);
        return j <= rows - 1 && j * sa < d + wb;
    }
    for (int64_t r = 0; r < rows; ++r) { /* b's row r against a's rows */
        const int64_t at = d + r * sb;
        int64_t k = lntune_floor_div(at - wa, sa) + 1;
        if (k < 0) k = 0;
        if (k <= rows - 1 && k * sa < at + wb) return 1;
    }
    return 0;
}

/* H >= 0, rows >= 0, eps >= 0 and not NaN, no unknown flag. */
static inline int lntune_check_size(lntune *ctx, const char *fn, int64_t rows, int64_t H, float eps,
                                    unsigned flags) {
    if (H < 0)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: H = %lld is negative", fn, (long long)H);
    if (flags & ~LNTUNE_EPS_EXACT)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: unknown flags 0x%x", fn,
                               flags & ~LNTUNE_EPS_EXACT);
    if (rows < 0)
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL, "%s: rows = %lld is negative", fn,
                               (long long)rows);
    if (!(eps >= 0.0f)) /* also catches NaN */
        return lntune_ctx_fail(ctx, LNTUNE_EINVAL,
                               "%s: eps = %g; it must be >= 0 (0: 1e-5 unless LNTUNE_EPS_EXACT)",
                               fn, (double)eps);
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
