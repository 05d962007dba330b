/*
 * device_test.h - what the tests that call liblntune on device memory share: a device call that
 * must succeed (the test cannot go on without its buffers) and reproducible random inputs. The
 * includer defines `static lntune_cuda *cu;`, the device DEVICE's message comes from.
 */
#ifndef LNTUNE_TEST_DEVICE_TEST_H
#define LNTUNE_TEST_DEVICE_TEST_H

#include "cuda_driver.h"
#include "lntune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
