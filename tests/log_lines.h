/*
 * log_lines.h - what the tests that read liblntune's debug log (LNTUNE_LOG=debug, stderr sent to
 * a file) ask of it: how many of its lines hold two strings.
 */
#ifndef LNTUNE_TEST_LOG_LINES_H
#define LNTUNE_TEST_LOG_LINES_H

#include <stdio.h>
#include <string.h>

/* The lines of the file at path holding both a and b; echo: print every line (for whoever reads
 * a failure). */
static inline int log_lines(const char *path, const char *a, const char *b, int echo) {
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        n += strstr(line, a) && strstr(line, b);
        if (echo) printf("log: %s", line);
    }
    if (f) fclose(f);
    return n;
}

#endif /* LNTUNE_TEST_LOG_LINES_H */
