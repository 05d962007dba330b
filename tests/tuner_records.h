/*
 * tuner_records.h - what the CUDA tuner tests read back from the database: a census of one key's
 * measurements (ok, wrong, failed; the fastest correct time; the wrong variants) and a copy of
 * its best record; and what a tuning run at a rigor must have compiled.
 */
#ifndef LNTUNE_TEST_TUNER_RECORDS_H
#define LNTUNE_TEST_TUNER_RECORDS_H

#include "generator.h"
#include "tuner.h"
#include "tuning_db.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    int ok, wrong, failed;
    double fastest_ok_ns;
    char wrong_variants[32768]; /* ";v1;v2;...;" */
} census;

static inline void census_init(census *c) {
    memset(c, 0, sizeof *c);
    c->fastest_ok_ns = INFINITY;
    c->wrong_variants[0] = ';';
}

/* lntune_db_each_measurement's callback. */
static inline int census_count(void *ud, const lntune_measurement *m) {
    census *c = ud;
    if (strcmp(m->status, LNTUNE_STATUS_OK) == 0) {
        c->ok++;
        if (!(m->median_ns >= c->fastest_ok_ns)) c->fastest_ok_ns = m->median_ns;
    } else if (strcmp(m->status, LNTUNE_STATUS_WRONG) == 0) {
        c->wrong++;
        const size_t n = strlen(c->wrong_variants);
        snprintf(c->wrong_variants + n, sizeof c->wrong_variants - n, "%s;", m->variant);
    } else {
        c->failed++;
    }
    return 0;
}

/* Whether variant was recorded as wrong. */
static inline int census_wrong(const census *c, const char *variant) {
    char needle[600];
    snprintf(needle, sizeof needle, ";%s;", variant);
    return strstr(c->wrong_variants, needle) != NULL;
}

typedef struct {
    char variant[256], artifact[64];
    double median_ns;
} best_copy;

/* lntune_db_get_best's callback. */
static inline int best_get(void *ud, const lntune_best *b) {
    best_copy *c = ud;
    snprintf(c->variant, sizeof c->variant, "%s", b->variant);
    snprintf(c->artifact, sizeof c->artifact, "%s", b->artifact_key ? b->artifact_key : "");
    c->median_ns = b->median_ns;
    return 0;
}

/* How many candidates the CUDA tuner has for op x shape on an sm_90 device: the space's
 * variants (the forward's with gamma only, which serve calls without it too); 0 on failure. */
static inline size_t cuda_candidates(const char *op, const lntune_shape *shape) {
    lntune_gen *g = NULL;
    char **list = NULL;
    size_t n = 0, count = 0;
    if (lntune_gen_open(NULL, &g) == LNTUNE_OK && lntune_gen_set_cuda_arch(g, 90) == LNTUNE_OK &&
        lntune_gen_variants(g, "cuda", op, shape, &list, &n) == LNTUNE_OK)
        for (size_t i = 0; i < n; ++i)
            count += strstr(op, "_backward") || strstr(list[i], "affine=fused");
    lntune_gen_free_list(list, n);
    lntune_gen_close(g);
    return count;
}

/* The search's contract on the count of variants a run compiled (or saw fail to compile) out
 * of the space's: exhaustive all of them; quick and measure some, and far fewer than all. */
static inline int rigor_coverage_ok(lntune_rigor rigor, int compiled, int failed, size_t space) {
    const size_t seen = (size_t)(compiled + failed);
    if (rigor == LNTUNE_RIGOR_EXHAUSTIVE) return space > 0 && seen == space;
    return seen > 1 && seen * 4 < space;
}

#endif /* LNTUNE_TEST_TUNER_RECORDS_H */
