/*
 * tune_once.h - the tuner tests' one call: tune one op at one shape into a database and return
 * its single result (zeroed, with the tuner's message printed, on failure); and the database
 * opened again to read what the tuner stored for this machine; and the files of a test that tunes
 * into a fresh database.
 */
#ifndef LNTUNE_TEST_TUNE_ONCE_H
#define LNTUNE_TEST_TUNE_ONCE_H

#include "tuner.h"
#include "tuning_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lntune_tune_result tune_once(const char *db, const char *op, lntune_shape shape,
                                    lntune_rigor rigor, int max_threads, int retune, int *rc) {
    const char *ops[] = {op};
    lntune_tune_config cfg = {.db_path = db, .ops = ops, .nops = 1, .shapes = &shape, .nshapes = 1};
    cfg.max_threads = max_threads, cfg.rigor = rigor, cfg.retune = retune;
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

/* Opens db read-only into *h (to be closed) and finds this machine's hardware row, *hw: 1, or 0
 * when either fails. */
static int tune_db_this_machine(const char *db, lntune_db **h, int64_t *hw) __attribute__((unused));
static int tune_db_this_machine(const char *db, lntune_db **h, int64_t *hw) {
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    *h = NULL;
    *hw = 0;
    return lntune_db_open(db, LNTUNE_DB_READONLY, h) == LNTUNE_OK &&
           lntune_db_find_hardware(*h, cpu.fingerprint, hw) == LNTUNE_OK;
}

/* Under dir, for the test name: db (size bytes) receives NAME.db, removed so that the test tunes
 * afresh, log_path (size bytes) NAME.log; NAME_cache holds the JIT's object cache; the
 * templates are the built-in ones. */
static void tune_test_files(const char *dir, const char *name, char *db, char *log_path,
                            size_t size) __attribute__((unused));
static void tune_test_files(const char *dir, const char *name, char *db, char *log_path,
                            size_t size) {
    char cache[4096];
    snprintf(db, size, "%s/%s.db", dir, name);
    snprintf(log_path, size, "%s/%s.log", dir, name);
    snprintf(cache, sizeof cache, "%s/%s_cache", dir, name);
    unlink(db);
    setenv("XDG_CACHE_HOME", cache, 1);
    unsetenv("LNTUNE_TEMPLATE_DIR");
}

#endif /* LNTUNE_TEST_TUNE_ONCE_H */
