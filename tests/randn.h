/*
 * randn.h - reproducible draws for the C tests, uniform in (0, 1) (xorshift64*) and N(0, 1)
 * (Box-Muller on two of those), on a state the test owns (each test seeds its own, so that a
 * failure replays).
 */
#ifndef LNTUNE_TEST_RANDN_H
#define LNTUNE_TEST_RANDN_H

#include <math.h>
#include <stdint.h>

static inline double test_uniform(uint64_t *state) {
    *state ^= *state >> 12, *state ^= *state << 25, *state ^= *state >> 27;
    return ((double)((*state * 0x2545f4914f6cdd1dULL) >> 11) + 0.5) / 9007199254740992.0;
}

static inline double test_randn(uint64_t *state) {
    const double u0 = test_uniform(state), u1 = test_uniform(state);
    return sqrt(-2.0 * log(u0)) * cos(6.283185307179586 * u1);
}

#endif /* LNTUNE_TEST_RANDN_H */
