/*
 * verify_backward.h - checks backward kernels (dx, dgamma, dbeta) against the float64 reference
 * gradients on adversarial inputs, as verify.h does for the forward.
 *
 * Error units and tolerances (2^-24 = u, one fp32 rounding; each passes at 16 u, the forward's
 * LNTUNE_VERIFY_TOLERANCE, and 16-bit outputs add half an ulp of their type through
 * lntune_verify_element):
 *   dx_i: rstd * (|g_i| + A1 + (2 |xhat_i| + |mean| rstd + 1) * A2), g = dy * gamma,
 *     A1 = mean_j |g_j|, A2 = mean_j |g_j| (|xhat_j| + |mean| rstd + 1): g_i rounds by u |g_i|;
 *     the fp32 row sums (lanes flushed into double every BLOCK, as the forward's) carry u A1 and
 *     u A2; xhat_i is off by u (|xhat_i| + |mean| rstd + 1) when the statistics are recomputed
 *     (an ulp of the mean and of the spread) and that multiplies mean(g xhat), at most A2; an ulp
 *     of rstd scales the whole, which the terms above bound. With a fused residual, + |dres_i|:
 *     dx = that + dresidual_out rounds once more in fp32.
 *   dgamma_j: (16 + n) u * sum_r |dy_rj| (|xhat_rj| + |mean_r| rstd_r + 1), n = rows + threads:
 *     each term dy * xhat is off by a few u of that size, and any order of adding n fp32 numbers
 *     (a thread's rows one after another, row groups in registers, then the threads' partials
 *     in thread order) is off by at most (n - 1) u of the sum of their magnitudes. So the bound
 *     grows with the rows, as fp32 accumulation does; dbeta_j likewise with sum_r |dy_rj|.
 * A NaN or Inf in the reference must come out NaN or Inf (NaN/Inf propagate); poison left in
 * any output element, or a write outside the output (guard zones), fails.
 */
#ifndef LNTUNE_VERIFY_BACKWARD_H
#define LNTUNE_VERIFY_BACKWARD_H

#include "backward.h"
#include "dtypes.h"
#include "pool.h"
#include "reference.h"
#include "verify.h"

/* One backward call, as the kernel saw it (types: x = dy = dx type, params = gamma, dgamma). */
typedef struct lntune_backward_problem {
    lntune_op op;
    lntune_types types;
    int64_t rows, H;
    const void *x, *dy, *gamma; /* gamma NULL: ones */
    int64_t x_stride, dy_stride, dx_stride;
    const float *mean, *rstd; /* the statistics given to the kernel; NULL: recomputed */
    float eps;
    const void *dres; /* the fused residual's dresidual_out (x's type), added to dx; NULL: none */
    int64_t dres_stride; /* elements between its rows */
} lntune_backward_problem;

/*
 * Compares dx (at dx_stride), dgamma and dbeta (H elements of types.params each; NULL: not
 * checked) with the float64 reference of p, whose dgamma/dbeta were summed by threads partials.
 * Returns LNTUNE_OK, or LNTUNE_EVERIFY with res->message naming what, the tensor and element.
 */
int lntune_backward_compare(const lntune_backward_problem *p, const void *dx, const void *dgamma,
                            const void *dbeta, int threads, const char *what,
                            lntune_verify_result *res);

typedef struct lntune_backward_verifier lntune_backward_verifier;

/* Inputs for op (LayerNorm or RMSNorm) and types at each of hs; seed 0 picks a fresh one. */
int lntune_backward_verifier_create(lntune_op op, lntune_types types, const int64_t *hs, size_t nh,
                                    uint64_t seed, lntune_backward_verifier **out);
/*
 * As lntune_backward_verifier_create, for kernels of fusion (fusion.h): LNTUNE_FUSION_NONE, or
 * LNTUNE_FUSION_RESIDUAL (the fused residual backward: every case passes a dresidual_out, with
 * large values and NaN/Inf among them, misaligned and strided as x is). Others: LNTUNE_EINVAL.
 */
int lntune_backward_verifier_create_fused(lntune_op op, lntune_types types, int fusion,
                                          const int64_t *hs, size_t nh, uint64_t seed,
                                          lntune_backward_verifier **out);
void lntune_backward_verifier_destroy(lntune_backward_verifier *v); /* NULL is a no-op */
lntune_types lntune_backward_verifier_types(const lntune_backward_verifier *v); /* NULL: f32 */

/*
 * Runs kernel at every H (only fixed_h if not 0) on every data set (randn, large mean, tiny
 * variance, constant rows, NaN/Inf), layout (contiguous, misaligned by one element, strided),
 * with saved and with recomputed statistics, with gamma and without, on threads threads of pool
 * (NULL: one), outputs poisoned and guarded. LNTUNE_OK, or LNTUNE_EVERIFY with res->message.
 */
int lntune_backward_verifier_check(lntune_backward_verifier *v, lntune_backward_kernel_fn kernel,
                                   int64_t fixed_h, int threads, lntune_pool *pool,
                                   lntune_verify_result *res);

#endif /* LNTUNE_VERIFY_BACKWARD_H */
