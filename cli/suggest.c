/*
 * suggest.c - "did you mean" for unknown commands and options (suggest.h).
 */
#include "suggest.h"

#include <string.h>

/* The edit distance of a and b, a swap of two neighbours counting one edit (Damerau's optimal
 * string alignment); words over 63 characters are no typo of a name. */
static size_t edit_distance(const char *a, const char *b) {
    const size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return (size_t)-1;
    size_t d[64][64];
    for (size_t i = 0; i <= na; ++i) d[i][0] = i;
    for (size_t j = 0; j <= nb; ++j) d[0][j] = j;
    for (size_t i = 1; i <= na; ++i)
        for (size_t j = 1; j <= nb; ++j) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

const char *cli_suggest(const char *word, const void *table, size_t n, size_t stride) {
    const char *best = NULL;
    size_t best_distance = 3; /* more edits than 2 is another word */
    for (size_t i = 0; i < n; ++i) {
        const char *name = *(const char *const *)((const char *)table + i * stride);
        const size_t d = edit_distance(word, name);
        if (d < best_distance && 2 * d < strlen(name)) best = name, best_distance = d;
    }
    return best;
}
