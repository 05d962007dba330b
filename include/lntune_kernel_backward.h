/*
 * lntune_kernel_backward.h - the ABI of every generated backward (gradient) kernel.
 *
 * Separate from lntune_kernel.h so that the forward ABI, and with it every forward kernel's
 * generated source, stays byte for byte what it was. A backward kernel computes dx for rows
 * [row_begin, row_end) and adds those rows' dgamma (and, for LayerNorm, dbeta) contributions
 * into the caller's fp32 partial buffers: the caller gives each thread its own zeroed partials
 * and reduces them afterwards (per-thread partials, then a second pass), so kernels need no
 * atomics and a fixed thread count gives the same bits every run. Generated sources carry a copy
 * of these declarations after those of lntune_kernel.h (whose return codes they use).
 */
#ifndef LNTUNE_KERNEL_BACKWARD_H
#define LNTUNE_KERNEL_BACKWARD_H

#include <stdint.h>

typedef struct lntune_backward_kernel_args {
    int64_t rows;      /* rows in the whole problem */
    int64_t H;         /* elements per row */
    int64_t x_stride;  /* elements between consecutive rows of x */
    int64_t dy_stride; /* ... of dy */
    int64_t dx_stride; /* ... of dx */
    const void *x;     /* the forward's input; x, dy and dx share one element type */
    const void *dy;    /* gradient of the forward's output */
    const void *gamma; /* optional scale, H elements (NULL: ones) */
    const float *mean; /* optional: the forward's per-row mean (LayerNorm; RMSNorm ignores it) */
    const float *rstd; /* optional: the forward's per-row rstd; NULL: recomputed from x and eps */
    void *dx;          /* gradient of x */
    float eps;
    /*
     * Appended for the fused residual backward (s = x + residual, y = Norm(s)); older fields keep
     * their offsets. A kernel generated with shape.fusion = "residual" adds dresidual_out (the
     * gradient at residual_out = s, in x's type) to dx in fp32 before dx's rounding, and refuses
     * args without it (LNTUNE_KERNEL_EUNSUPPORTED); an unfused kernel refuses args with it.
     */
    const void *dresidual_out;
    int64_t dresidual_out_stride; /* elements between rows of dresidual_out */
} lntune_backward_kernel_args;

/*
 * dgamma_part, dbeta_part: H fp32 partial sums each, added to (never overwritten); NULL when the
 * caller does not want that gradient. RMSNorm kernels take no dbeta_part (EUNSUPPORTED).
 */
typedef int (*lntune_backward_kernel_fn)(const lntune_backward_kernel_args *args, int64_t row_begin,
                                         int64_t row_end, float *dgamma_part, float *dbeta_part);

#endif /* LNTUNE_KERNEL_BACKWARD_H */
