/*
 * cuda_tuner_test.h - how the CUDA tuner tests start: they run the tuner's whole loop on the
 * stand-in driver of tests/mock_cuda, so NVRTC must load (the tuner opens its own; the test is
 * skipped, 77, without it), the database goes to a scratch directory, and the stand-in makes one
 * loaded module in three wrong (and the fastest). The includer defines _GNU_SOURCE (memmem,
 * mkdtemp, nftw) before any include.
 */
#ifndef LNTUNE_TEST_CUDA_TUNER_TEST_H
#define LNTUNE_TEST_CUDA_TUNER_TEST_H

#include "nvrtc_check.h"
#include "scratch_dir.h"

#include <stdio.h>
#include <stdlib.h>

/* dir (dir_size bytes) receives the test's scratch directory, db (db_size bytes) the path of
 * tune.db in it; 0, or the exit code the test returns now (77: no NVRTC, skipped; 1: failed). */
static inline int cuda_tuner_test_begin(const char *name, char *dir, size_t dir_size, char *db,
                                        size_t db_size) {
    const int skip = nvrtc_check_present();
    if (skip) return skip;
    if (scratch_dir_make(dir, dir_size, name)) return 1;
    snprintf(db, db_size, "%s/tune.db", dir);
    setenv("MOCK_CUDA_WRONG_EVERY", "3", 1);
    return 0;
}

#endif /* LNTUNE_TEST_CUDA_TUNER_TEST_H */
