/*
 * lntune_kernel.h - the one ABI shared by every generated kernel and its callers.
 *
 * A kernel normalizes rows [row_begin, row_end) of the problem that args describes. The
 * caller (the verifier, the tuner, the runtime, an exported dispatch table) splits rows among
 * threads; kernels never create threads. Counts and strides are 64-bit so that rows x H may
 * exceed 2^31. Strides count elements, not bytes. Generated sources carry a copy of this
 * header's declarations, so they compile on their own.
 */
#ifndef LNTUNE_KERNEL_H
#define LNTUNE_KERNEL_H

#include <stdint.h>

#define LNTUNE_KERNEL_ABI_VERSION 1

/* Kernel return codes. */
#define LNTUNE_KERNEL_OK 0
#define LNTUNE_KERNEL_EUNSUPPORTED 1 /* args outside what this variant was generated for */

typedef struct lntune_kernel_args {
    int64_t rows;                /* rows in the whole problem */
    int64_t H;                   /* elements per row (the normalized dimension) */
    int64_t x_stride;            /* elements between consecutive rows of x */
    int64_t y_stride;            /* elements between consecutive rows of y */
    int64_t residual_stride;     /* rows of residual (optional input) */
    int64_t residual_out_stride; /* rows of residual_out (optional output) */
    const void *x;
    const void *residual; /* optional: normalize x + residual */
    const void *gamma;    /* optional scale, H elements */
    const void *beta;     /* optional shift, H elements (LayerNorm only) */
    void *y;
    void *residual_out; /* optional: receives x + residual */
    float *mean;        /* optional: per-row mean (LayerNorm) */
    float *rstd;        /* optional: per-row 1/sqrt(var + eps) */
    float eps;
    /* Quantized y only (int8 or fp8 e4m3; lntune.h has the semantics): y is rounded from
     * norm(x) / y_scale; or, with a scale per row, y_scales[r] receives that row's scale.
     * Appended, so that kernels built before them (which never read them) keep working. */
    float y_scale;
    float *y_scales;
    /* Kernels of a call with a weight offset only (Gemma's y = norm(x) * (weight_offset +
     * gamma), the sum in fp32); appended like y_scale. */
    float weight_offset;
} lntune_kernel_args;

typedef int (*lntune_kernel_fn)(const lntune_kernel_args *args, int64_t row_begin, int64_t row_end);

#endif /* LNTUNE_KERNEL_H */
