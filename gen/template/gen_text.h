/*
 * gen_text.h - `lntune variants`, `params` and `emit`: what the generator says of one target and
 * op, as the text printed. The generator is opened for the request alone (CUDA: for its compute
 * capability, sm_90 when none is given) and closed again.
 */
#ifndef LNTUNE_GEN_TEXT_H
#define LNTUNE_GEN_TEXT_H

#include "generator.h"

#include <stddef.h>

typedef enum lntune_gen_text_kind {
    LNTUNE_GEN_TEXT_VARIANTS, /* every valid variant, one canonical string a line */
    LNTUNE_GEN_TEXT_PARAMS,   /* the parameter space: each knob, its values and what it does */
    LNTUNE_GEN_TEXT_SOURCE,   /* the generated source of one variant */
} lntune_gen_text_kind;

typedef struct lntune_gen_text_request {
    const char *target;        /* "cpu" or "cuda" */
    const char *op;            /* op text: "layernorm", "rmsnorm_backward" (problem.h) */
    int sm;                    /* CUDA: the compute capability (80, 90); 0: 90 */
    const lntune_shape *shape; /* variants, source: NULL for run-time H, all fp32, unfused */
    const char *variant;       /* source: the parameter string; left-out knobs take their first */
    const char *symbol;        /* source: the kernel function's name; NULL: "lntune_kernel" */
} lntune_gen_text_request;

/*
 * The text of kind for req, malloc'd into *text (free it), each line ending in a newline. Returns
 * LNTUNE_OK, or a code with the generator's message in err: LNTUNE_EINVAL / LNTUNE_ENOTFOUND for
 * an op, variant, parameter or value the templates refuse; others for a template or memory
 * failure.
 */
int lntune_gen_text(lntune_gen_text_kind kind, const lntune_gen_text_request *req, char **text,
                    char *err, size_t errlen);

#endif /* LNTUNE_GEN_TEXT_H */
