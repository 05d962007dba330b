/*
 * check.h - the assertions of the C tests: CHECK(cond, printf-args) prints "ok: ..." or
 * "FAIL file:line: ..." and counts failures; EXPECT counts them too but prints only failures;
 * a test ends with CHECK_SUMMARY() (or its own summary from check_failures).
 */
#ifndef LNTUNE_TEST_CHECK_H
#define LNTUNE_TEST_CHECK_H

#include <stdio.h>

static int check_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            check_failures++;                                                                      \
        } else {                                                                                   \
            printf("ok: ");                                                                        \
        }                                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

/* CHECK without the "ok" line, for tests that make thousands of checks: failures only, on stderr.
 */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            ++check_failures;                                                                      \
        }                                                                                          \
    } while (0)

/* Prints the closing line ("N passed, N failed" is left to ctest) and gives the exit code. */
#define CHECK_SUMMARY()                                                                            \
    (printf("%s: %d failures\n", check_failures ? "FAILED" : "passed", check_failures),            \
     check_failures ? 1 : 0)

#endif /* LNTUNE_TEST_CHECK_H */
