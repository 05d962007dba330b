/*
 * verify.h - runs a compiled kernel on adversarial inputs and compares it with the float64
 * reference. A kernel that fails here is never timed, stored or dispatched.
 *
 * A verifier owns fresh random inputs and their references for a list of H; checking a kernel
 * reuses them, so verifying many variants costs little more than running them.
 */
#ifndef LNTUNE_VERIFY_H
#define LNTUNE_VERIFY_H

#include "dtypes.h"
#include "lntune_kernel.h"
#include "pool.h"
#include "reference.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Error unit: |y - ref| / ((|mean| * rstd + |z| + 1) * |gamma| + |beta|), z = (x - mean) * rstd.
 * The denominator is the size of the terms whose fp32 rounding a correct kernel cannot avoid:
 * the mean is off by an ulp of |mean| plus an ulp of the spread (sigma, i.e. 1 after scaling by
 * rstd), rstd by an ulp (|z| after scaling), and the output rounds next to |beta|. So one ulp of
 * each term is 2^-24 whatever the data. Every template variant stays within 3 ulps here; 2^-20
 * (16 ulps) leaves room for compilers' contraction choices, yet fails any kernel that sums a long
 * fp32 chain (2^-10 or worse at H = 65536, mean 1000) or rounds mean or rstd to half precision.
 */
#define LNTUNE_VERIFY_TOLERANCE (1.0 / (1 << 20))

/*
 * fp16 and bf16 outputs. A correct kernel computes y in fp32 within the bound above and rounds
 * it once to y's type, which moves it by at most half an ulp of that type. So y passes when
 *     |y - ref| <= bound = 2^-20 * unit + 0.5 * ulp_y(|ref| + 2^-20 * unit) * (1 + 2^-7),
 * ulp_y(a) = 2^(floor(log2 a) - 7) for bf16 (8 significand bits), 2^(floor(log2 a) - 10) for fp16
 * (11 bits), never below the subnormal step (fp16 2^-24, bf16 2^-133). The ulp is taken at
 * |ref| + the fp32 bound since the fp32 value, which may lie in the binade above ref, is what
 * gets rounded. The 2^-7 lets a kernel round through a wider type (double rounding adds 2^-16 of
 * the half ulp for bf16, 2^-13 for fp16) yet fails truncation, which loses up to a whole ulp.
 * fp16 overflows: Inf of ref's sign passes when |ref| + 2^-20 * unit > 65504 (a value from 65520
 * on rounds to Inf; between, 65504 or Inf); 65504 passes by the rule above, so not much past
 * 65520. Same for bf16 past its largest finite value. NaN must give NaN, Inf the same Inf.
 * Reported error (max_error, messages) for a 16-bit y: |y - ref| / bound * 2^-20, so that, as
 * for fp32 (where bound is 2^-20 * unit and this is the error in the unit), <= 2^-20 passes.
 * A correctly rounded 16-bit y reaches about 0.99 * 2^-20 on ties: there it says pass or fail,
 * not which of two passing kernels is more accurate.
 */

/* The standard H list of the adversarial suite. */
extern const int64_t lntune_verify_standard_h[];
extern const size_t lntune_verify_standard_h_count;

typedef struct lntune_verifier lntune_verifier;

typedef struct lntune_verify_result {
    double max_error;  /* in the unit above, over every finite output */
    int64_t worst_h;   /* H where max_error was seen */
    int cases;         /* runs made */
    char worst[256];   /* where max_error was seen */
    char message[512]; /* the first failure, naming H, data set, layout and element */
} lntune_verify_result;

/*
 * Inputs for op at each of hs[0..nh), for kernels whose x, y and gamma/beta have the element
 * types of types (LNTUNE_TYPE_*). x, gamma and beta are drawn as for fp32 and rounded to their
 * type (to nearest even); the references are of the rounded values. seed 0 picks a fresh seed
 * (reported in messages). LNTUNE_EINVAL for an H outside [1, 2^26] or an unknown type.
 */
int lntune_verifier_create_typed(lntune_op op, lntune_types types, const int64_t *hs, size_t nh,
                                 uint64_t seed, lntune_verifier **out);
/*
 * The same for kernels fused with a residual add (fusion LNTUNE_FUSION_*, fusion.h; NONE is
 * create_typed): the data sets are split into x and residual (of types' residual type), the
 * references are of their fp32 sum, residual_out (LNTUNE_FUSION_RESIDUAL_OUT) must equal that
 * sum rounded to the residual type bit for bit (any NaN for a NaN) with poison and guard zones
 * as y's, residual must be left unchanged, and the contiguous layout passes mean and rstd,
 * checked against the reference (mean's error times rstd over |mean| rstd + 1, rstd's relative
 * error, each within LNTUNE_VERIFY_TOLERANCE).
 */
int lntune_verifier_create_fused(lntune_op op, lntune_types types, int fusion, const int64_t *hs,
                                 size_t nh, uint64_t seed, lntune_verifier **out);
/* The same, all fp32. */
int lntune_verifier_create(lntune_op op, const int64_t *hs, size_t nh, uint64_t seed,
                           lntune_verifier **out);
void lntune_verifier_destroy(lntune_verifier *v); /* NULL is a no-op */
uint64_t lntune_verifier_seed(const lntune_verifier *v);
lntune_types lntune_verifier_types(const lntune_verifier *v); /* all fp32 for NULL */
int lntune_verifier_fusion(const lntune_verifier *v);         /* LNTUNE_FUSION_NONE for NULL */

/*
 * Whether got is an acceptable output of type y_type (LNTUNE_TYPE_*) for the reference ref, with
 * the error unit above: 1 or 0. *err: the reported error when ref and got are finite, else 0.
 */
int lntune_verify_element(int y_type, double ref, double got, double unit, double *err);

/*
 * The bits poisoning y's elements and guard zones, in y's element size (the low 16 bits for
 * fp16 and bf16): signalling NaNs that no arithmetic or correct conversion produces.
 */
uint32_t lntune_verify_poison(int y_type);

/*
 * Runs kernel on every H of the verifier (only fixed_h if it is not 0, which must be one of
 * them), on every data set and layout, with threads threads from pool (NULL for one).
 * affine: 1, the kernel takes gamma (and beta, for LayerNorm); 2, gamma and the weight offset
 * (lntune_kernel_args.weight_offset, 1 and 0.5 in turn); 0, neither.
 * Returns LNTUNE_OK, or LNTUNE_EVERIFY with res->message saying what was wrong.
 */
int lntune_verifier_check(lntune_verifier *v, lntune_kernel_fn kernel, int affine, int64_t fixed_h,
                          int threads, lntune_pool *pool, lntune_verify_result *res);

#endif /* LNTUNE_VERIFY_H */
