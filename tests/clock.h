/*
 * clock.h - the monotonic clock in seconds, for the tests' and the benches' own figures (how
 * long a compile or a sweep took, a bench's rounds): one copy for all of them. The tuner's
 * clock is gen/tune/timing.h's lntune_now_ns.
 */
#ifndef LNTUNE_TEST_CLOCK_H
#define LNTUNE_TEST_CLOCK_H

#include <time.h>

static inline double test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* LNTUNE_TEST_CLOCK_H */
