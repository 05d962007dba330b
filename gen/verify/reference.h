/*
 * reference.h - float64 LayerNorm and RMSNorm, the ground truth every kernel is checked against.
 */
#ifndef LNTUNE_REFERENCE_H
#define LNTUNE_REFERENCE_H

#include <stdint.h>

typedef enum lntune_op { LNTUNE_OP_LAYERNORM = 0, LNTUNE_OP_RMSNORM = 1 } lntune_op;

/* "layernorm" / "rmsnorm" to lntune_op; -1 for anything else. */
int lntune_op_parse(const char *name);
const char *lntune_op_name(lntune_op op);

/*
 * Normalizes one row of H floats in double: z = (x - mean) * rstd for LayerNorm, x * rstd for
 * RMSNorm, with the variance (mean square) divided by H, as PyTorch does. Writes H values to z
 * and the row's mean (0 for RMSNorm) and rstd.
 */
void lntune_reference_row(lntune_op op, const float *x, int64_t H, double eps, double *z,
                          double *mean, double *rstd);

/*
 * The gradients of one row in double, for the forward y = xhat * gamma (+ beta), xhat =
 * (x - mean) * rstd (RMSNorm: x * rstd), given dy and the statistics to differentiate with
 * (the forward's fp32 values, or lntune_reference_row's): with g = dy * gamma,
 *   LayerNorm dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), RMSNorm drops mean(g).
 * Writes H values to dx; adds dy * xhat to dgamma[i] and dy to dbeta[i] (each may be NULL).
 * gamma NULL means ones. mean is ignored for RMSNorm. dres (NULL: none), the fused residual
 * backward's dresidual_out row, is added to dx (the gradient of s = x + residual).
 */
void lntune_reference_backward_row(lntune_op op, const double *x, const double *dy,
                                   const double *dres, const double *gamma, int64_t H, double mean,
                                   double rstd, double *dx, double *dgamma, double *dbeta);

#endif /* LNTUNE_REFERENCE_H */
