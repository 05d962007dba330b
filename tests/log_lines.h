/*
 * log_lines.h - what the tests that read liblntune's debug log (LNTUNE_LOG=debug, stderr sent to
 * a file) ask of it: how many of its lines hold two strings; and the capture itself.
 */
#ifndef LNTUNE_TEST_LOG_LINES_H
#define LNTUNE_TEST_LOG_LINES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Sends stderr to the file at path (emptied) with the debug log on for the handles opened from
 * now on: the saved stderr for log_capture_end, or -1 when path cannot be written. */
static inline int log_capture_begin(const char *path) {
    fflush(stderr);
    const int saved = dup(2);
    if (!freopen(path, "w", stderr)) return -1;
    setenv("LNTUNE_LOG", "debug", 1);
    return saved;
}

/* Puts stderr back, and the debug log off. */
static inline void log_capture_end(int saved) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    unsetenv("LNTUNE_LOG");
}

#endif /* LNTUNE_TEST_LOG_LINES_H */
