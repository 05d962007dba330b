/*
 * builtin_offset.c - fp32 offset + gamma for the built-ins (see builtin_offset.h).
 */
#include "builtin_offset.h"

#include "dtypes.h"
#include "typed_kernel.h"

#include <stdlib.h>

/* One loop per type, so that each vectorizes (the type is a constant in each). */
static void widen_plus(int type, const void *p, int64_t H, float offset, float *out) {
    if (type == LNTUNE_TYPE_F32)
        for (int64_t i = 0; i < H; ++i) out[i] = offset + ((const float *)p)[i];
    else if (type == LNTUNE_TYPE_BF16)
        for (int64_t i = 0; i < H; ++i)
            out[i] = offset + lntune_bf16_to_f32(((const uint16_t *)p)[i]);
    else
        for (int64_t i = 0; i < H; ++i)
            out[i] = offset + lntune_f16_to_f32(((const uint16_t *)p)[i]);
}

int lntune_offset_params(lntune_kernel_args *a, int param_type, float **buf) {
    const int64_t H = a->H;
    float *g = malloc((size_t)H * (a->beta ? 2 : 1) * sizeof *g);
    if (!g) return -1;
    widen_plus(param_type, a->gamma, H, a->weight_offset, g);
    if (a->beta) {
        /* + 0.0f would turn a -0.0 beta into +0.0: beta is widened as it is */
        widen_plus(param_type, a->beta, H, -0.0f, g + H);
        a->beta = g + H;
    }
    a->gamma = g;
    *buf = g;
    return 0;
}
