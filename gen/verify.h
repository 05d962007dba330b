/*
 * verify.h - runs a compiled kernel on adversarial inputs and compares it with the float64
 * reference. A kernel that fails here is never timed, stored or dispatched.
 *
 * A verifier owns fresh random inputs and their references for a list of H; checking a kernel
 * reuses them, so verifying many variants costs little more than running them.
 */
#ifndef LNTUNE_VERIFY_H
#define LNTUNE_VERIFY_H

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

/* Inputs for op at each of hs[0..nh). seed 0 picks a fresh seed (reported in messages). */
int lntune_verifier_create(lntune_op op, const int64_t *hs, size_t nh, uint64_t seed,
                           lntune_verifier **out);
void lntune_verifier_destroy(lntune_verifier *v); /* NULL is a no-op */
uint64_t lntune_verifier_seed(const lntune_verifier *v);

/*
 * Runs kernel on every H of the verifier (only fixed_h if it is not 0, which must be one of
 * them), on every data set and layout, with threads threads from pool (NULL for one).
 * affine: the kernel takes gamma (and beta, for LayerNorm); else it takes neither.
 * Returns LNTUNE_OK, or LNTUNE_EVERIFY with res->message saying what was wrong.
 */
int lntune_verifier_check(lntune_verifier *v, lntune_kernel_fn kernel, int affine, int64_t fixed_h,
                          int threads, lntune_pool *pool, lntune_verify_result *res);

#endif /* LNTUNE_VERIFY_H */
