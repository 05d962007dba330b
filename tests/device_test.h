/*
 * device_test.h - what the tests that call liblntune on device memory share: the device (cu,
 * opened by device_test_open), a device call that must succeed (the test cannot go on without
 * its buffers) and reproducible random inputs.
 */
#ifndef LNTUNE_TEST_DEVICE_TEST_H
#define LNTUNE_TEST_DEVICE_TEST_H

#include "cuda_driver.h"
#include "lntune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static lntune_cuda *cu; /* CUDA device 0, the tests' own handle beside liblntune's */

/* Opens cu: 0, or the exit code the test returns now (77: no GPU, skipped; 1: failed). */
static inline int device_test_open(void) {
    const int rc = lntune_cuda_open(0, &cu);
    if (rc == LNTUNE_ENODEVICE) {
        printf("skipped: %s\n", lntune_cuda_errmsg(cu));
        lntune_cuda_close(cu);
        return 77;
    }
    if (rc != LNTUNE_OK) {
        printf("FAIL CUDA: %s\n", lntune_cuda_errmsg(cu));
        return 1;
    }
    return 0;
}

#define DEVICE(call)                                                                               \
    do {                                                                                           \
        if ((call) != LNTUNE_OK) {                                                                 \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, lntune_cuda_errmsg(cu));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Uniform in [-1, 1), reproducible. */
static inline float next_random(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*s >> 11) / (double)(1ULL << 53) * 2.0 - 1.0);
}

#endif /* LNTUNE_TEST_DEVICE_TEST_H */
