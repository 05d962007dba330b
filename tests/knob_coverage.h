/*
 * knob_coverage.h - whether a sample of a variant space holds every value of every knob: a test
 * adds each variant of the lists it samples from (kept 0) and each variant it kept (kept 1),
 * then asks for an item ("name=value") that no kept variant had.
 */
#ifndef LNTUNE_TESTS_KNOB_COVERAGE_H
#define LNTUNE_TESTS_KNOB_COVERAGE_H

#include <stdio.h>
#include <string.h>

enum { KNOB_COVERAGE_MAX = 64 };

typedef struct knob_coverage {
    struct {
        char item[48]; /* "name=value" */
        int seen;      /* a kept variant had it */
    } items[KNOB_COVERAGE_MAX];
    size_t n;
    int overflow; /* more distinct items than KNOB_COVERAGE_MAX came */
} knob_coverage;

/* Adds each item of variant; kept 1 marks them seen. */
static inline void knob_coverage_add(knob_coverage *c, const char *variant, int kept) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", variant);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < c->n && strcmp(c->items[i].item, it) != 0) ++i;
        if (i == c->n) {
            if (c->n == KNOB_COVERAGE_MAX) {
                c->overflow = 1;
                continue;
            }
            snprintf(c->items[c->n++].item, sizeof c->items[0].item, "%s", it);
        }
        c->items[i].seen |= kept;
    }
}

/* How many items of variant no kept variant had yet (items never added count as had). */
static inline int knob_coverage_new(const knob_coverage *c, const char *variant) {
    char buf[256];
    int count = 0;
    snprintf(buf, sizeof buf, "%s", variant);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < c->n; ++i)
            if (strcmp(c->items[i].item, it) == 0) count += !c->items[i].seen;
    return count;
}

/* The variant of list[0..n) with the most items new to c, the first such from index start on
 * (cyclically): deterministic, and spread over the list by start. NULL when n is 0. */
static inline const char *knob_coverage_pick(const knob_coverage *c, char **list, size_t n,
                                             size_t start) {
    const char *best = NULL;
    int most = -1;
    for (size_t j = 0; j < n; ++j) {
        const char *v = list[(start + j) % n];
        const int u = knob_coverage_new(c, v);
        if (u > most) most = u, best = v;
    }
    return best;
}

/* The first item no kept variant had, or NULL when every one was seen. */
static inline const char *knob_coverage_missing(const knob_coverage *c) {
    for (size_t i = 0; i < c->n; ++i)
        if (!c->items[i].seen) return c->items[i].item;
    return NULL;
}

#endif /* LNTUNE_TESTS_KNOB_COVERAGE_H */
