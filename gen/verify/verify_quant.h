/*
 * verify_quant.h - the verifier's checks of a quantized y (core/quant.h): each row's codes and
 * scale against the float64 reference, and probes whose fp32 y is exact by construction, where
 * ties and saturation leave no room for tolerance.
 */
#ifndef LNTUNE_VERIFY_QUANT_H
#define LNTUNE_VERIFY_QUANT_H

#include "lntune_kernel.h"
#include "pool.h"
#include "quant.h"
#include "verify.h"

#include <stddef.h>
#include <stdint.h>

/* The static scale the verifier and the tuner's timing problem give a kernel of quantized type:
 * y / scale spans the codes, and the largest |y| (about 4 sigmas of randn) saturates. */
static inline float lntune_quant_test_scale(int type) {
    return (float)(3.0 / lntune_quant_max(type));
}

/*
 * Checks one row of codes q[0..H) of quantized type against yref (the float64 reference y) and
 * unit (each element's error unit: the fp32 y may be off by LNTUNE_VERIFY_TOLERANCE units).
 * scale: the call's static scale (as the kernel got it); got_scale: the row's written scale
 * (types with a scale per row). A code passes where it is that of some v within the fp32 error of
 * yref / scale (codes are monotonic in v, so that is a range); exact: the fp32 y is yref itself,
 * and the code must be exactly that of yref / scale. Returns 1, or 0 with msg set.
 */
int lntune_quant_check_row(int type, const double *yref, const double *unit, int64_t H,
                           const unsigned char *q, float scale, const float *got_scale, int exact,
                           char *msg, size_t len);

/*
 * Runs kernel (op, types, fusion, affine as it was generated for; H fixed_h, else a few
 * sizes) on probes whose fp32 y is exact whatever the kernel's order of operations: ties of the
 * codes (which must round to even) and, with a static scale, values past the largest code (which
 * must saturate). Returns 1, or 0 with res->message set.
 */
int lntune_quant_probes(lntune_op op, lntune_types types, int fusion, lntune_kernel_fn kernel,
                        int affine, int64_t fixed_h, int threads, lntune_pool *pool,
                        lntune_verify_result *res);

#endif /* LNTUNE_VERIFY_QUANT_H */
