/*
 * randn.h - reproducible N(0, 1) draws for the C tests: xorshift64* and Box-Muller on a state
 * the test owns (each test seeds its own, so that a failure replays).
 */
#ifndef LNTUNE_TEST_RANDN_H
#define LNTUNE_TEST_RANDN_H

#include <math.h>
#include <stdint.h>

static inline double test_randn(uint64_t *state) {
    double u[2];
    for (int k = 0; k < 2; ++k) {
        *state ^= *state >> 12, *state ^= *state << 25, *state ^= *state >> 27;
        u[k] = ((double)((*state * 0x2545f4914f6cdd1dULL) >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

#endif /* LNTUNE_TEST_RANDN_H */
