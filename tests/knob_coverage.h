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

/* The first item no kept variant had, or NULL when every one was seen. */
static inline const char *knob_coverage_missing(const knob_coverage *c) {
    for (size_t i = 0; i < c->n; ++i)
        if (!c->items[i].seen) return c->items[i].item;
    return NULL;
}

#endif /* LNTUNE_TESTS_KNOB_COVERAGE_H */
