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
