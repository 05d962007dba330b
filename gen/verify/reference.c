/*
 * reference.c - float64 LayerNorm and RMSNorm. Two passes in double: for the H <= 2^24 of any
 * test, the sums carry at least 12 more correct digits than an fp32 kernel can show.
 */
#include "reference.h"

#include <math.h>
#include <string.h>

int lntune_op_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "layernorm") == 0) return LNTUNE_OP_LAYERNORM;
    if (strcmp(name, "rmsnorm") == 0) return LNTUNE_OP_RMSNORM;
    return -1;
}

const char *lntune_op_name(lntune_op op) {
    return op == LNTUNE_OP_RMSNORM ? "rmsnorm" : "layernorm";
}

void lntune_reference_row(lntune_op op, const float *x, int64_t H, double eps, double *z,
                          double *mean, double *rstd) {
    double m = 0.0, ss = 0.0;
    if (op == LNTUNE_OP_LAYERNORM) {
        for (int64_t i = 0; i < H; ++i) m += x[i];
        m /= (double)H;
    }
    for (int64_t i = 0; i < H; ++i) {
        double d = (double)x[i] - m;
        ss += d * d;
    }
    double r = 1.0 / sqrt(ss / (double)H + eps);
    for (int64_t i = 0; i < H; ++i) z[i] = ((double)x[i] - m) * r;
    *mean = m;
    *rstd = r;
}

void lntune_reference_backward_row(lntune_op op, const double *x, const double *dy,
                                   const double *dres, const double *gamma, int64_t H, double mean,
                                   double rstd, double *dx, double *dgamma, double *dbeta) {
    const double m = op == LNTUNE_OP_LAYERNORM ? mean : 0.0;
    double sg = 0.0, sgx = 0.0;
    for (int64_t i = 0; i < H; ++i) {
        const double xhat = (x[i] - m) * rstd, g = dy[i] * (gamma ? gamma[i] : 1.0);
        sg += g;
        sgx += g * xhat;
        if (dgamma) dgamma[i] += dy[i] * xhat;
        if (dbeta) dbeta[i] += dy[i];
    }
    const double mg = op == LNTUNE_OP_LAYERNORM ? sg / (double)H : 0.0, mgx = sgx / (double)H;
    for (int64_t i = 0; i < H; ++i) {
        const double xhat = (x[i] - m) * rstd, g = dy[i] * (gamma ? gamma[i] : 1.0);
        dx[i] = rstd * (g - mg - xhat * mgx) + (dres ? dres[i] : 0.0);
    }
}
