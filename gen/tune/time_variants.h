/*
 * time_variants.h - `lntune time`: chosen CPU variants of one op and shape verified, then timed
 * side by side in one interleaved run with the fastest copy variants, as the tuner times its
 * finalists (timing.h: every copy variant alone first, then the variants with the three fastest
 * copies, the fastest one the drift reference).
 */
#ifndef LNTUNE_TIME_VARIANTS_H
#define LNTUNE_TIME_VARIANTS_H

#include "shape.h"

#include <stddef.h>

enum { LNTUNE_TIME_MAX_VARIANTS = 16 };

typedef struct lntune_time_config {
    const char *op;              /* op text: "layernorm", "rmsnorm_backward" (problem.h) */
    lntune_shape shape;          /* H, types, fusion; rows 0: lntune_tune_default_rows(H) */
    const char *const *variants; /* canonical or partial parameter strings */
    size_t nvariants;            /* 1 to LNTUNE_TIME_MAX_VARIANTS */
    double seconds;              /* the interleaved run's length; 0: 3 */
} lntune_time_config;

typedef struct lntune_time_entry {
    double median_ns, score_ns, gbps; /* timing.h's median and score; NAN when not timed */
    double ratio_to_copy;             /* the better copy's median / median_ns */
    int wrong;                        /* failed verification, so not timed */
    char message[512];                /* why it is wrong */
} lntune_time_entry;

typedef struct lntune_time_result {
    int64_t rows;          /* the row count timed */
    char op_key[48];       /* the op text with its fusion: "layernorm+residual_out" */
    double bytes;          /* what a call reads and writes (problem.h) */
    double copy_ns;        /* the better copy's median in the same run */
    double copy_gbps;      /* bytes / copy_ns; NAN when nothing was timed */
    size_t ncopy_variants; /* copy variants the fastest were chosen from */
    int wrong;             /* variants that failed verification */
    /* How much slower the slowest variant is than the fastest, by median and by score (0.1:
     * 10%); NAN when nothing was timed */
    double spread, score_spread;
    lntune_time_entry v[LNTUNE_TIME_MAX_VARIANTS];
} lntune_time_result;

/*
 * Emits, compiles (with cc.h's lntune_default_compiler), verifies and times c's variants.
 * Returns LNTUNE_OK (wrong variants are marked in r, and nothing is timed when any is wrong), or
 * a code with a message in err: LNTUNE_EINVAL / LNTUNE_ENOTFOUND for a variant or op the
 * templates refuse, others for a compile or memory failure.
 */
int lntune_time_variants(const lntune_time_config *c, lntune_time_result *r, char *err,
                         size_t errlen);

#endif /* LNTUNE_TIME_VARIANTS_H */
