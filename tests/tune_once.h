/*
 * tune_once.h - the tuner tests' one call: tune one op at one shape into a database and return
 * its single result (zeroed, with the tuner's message printed, on failure).
 */
#ifndef LNTUNE_TEST_TUNE_ONCE_H
#define LNTUNE_TEST_TUNE_ONCE_H

#include "tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lntune_tune_result tune_once(const char *db, const char *op, lntune_shape shape,
                                    lntune_rigor rigor, int max_threads, int retune, int *rc) {
    const char *ops[] = {op};
    lntune_tune_config cfg = {db,    ops,    1,    &shape, 1,    max_threads,
                              rigor, retune, NULL, NULL,   NULL, 0};
    lntune_tune_result *r = NULL, out;
    size_t n = 0;
    char err[512] = "";
    memset(&out, 0, sizeof out);
    *rc = lntune_tune(&cfg, &r, &n, err, sizeof err);
    if (*rc != LNTUNE_OK) printf("tune failed: %s\n", err);
    if (r && n == 1) out = r[0];
    free(r);
    return out;
}

#endif /* LNTUNE_TEST_TUNE_ONCE_H */
