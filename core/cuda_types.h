/*
 * cuda_types.h - the NVRTC options that choose the element types of a CUDA source generated with
 * its types left to macros (the typed built-ins, templates/cuda/convert.lua's pseudo-types):
 * -DLNTUNE_X_T=lntune_bf16 and so on for y, gamma/beta and the residual.
 */
#ifndef LNTUNE_CUDA_TYPES_H
#define LNTUNE_CUDA_TYPES_H

#include "dtypes.h"

#include <stdio.h>

typedef struct {
    char text[4][40];
    const char *options[5]; /* NULL-terminated, pointing into text */
} lntune_cuda_type_options;

static inline const char *lntune_cuda_type_name(int t) {
    return t == LNTUNE_TYPE_F16 ? "lntune_f16" : t == LNTUNE_TYPE_BF16 ? "lntune_bf16" : "float";
}

static inline void lntune_cuda_type_options_make(lntune_types t, lntune_cuda_type_options *o) {
    const int types[4] = {t.x, t.y, t.params, lntune_types_residual(t)};
    static const char names[4] = {'X', 'Y', 'P', 'R'};
    for (int i = 0; i < 4; ++i) {
        snprintf(o->text[i], sizeof o->text[i], "-DLNTUNE_%c_T=%s", names[i],
                 lntune_cuda_type_name(types[i]));
        o->options[i] = o->text[i];
    }
    o->options[4] = NULL;
}

#endif /* LNTUNE_CUDA_TYPES_H */
