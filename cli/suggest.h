/*
 * suggest.h - the command line's "did you mean": the name of a table nearest a mistyped word.
 */
#ifndef LNTUNE_CLI_SUGGEST_H
#define LNTUNE_CLI_SUGGEST_H

#include <stddef.h>

/*
 * The name nearest word (Levenshtein distance) among n table rows of stride bytes from table,
 * each starting with its name (const char *), or NULL when none is near enough to be a typo: at
 * most 2 edits, and fewer than half of the name's letters.
 */
const char *cli_suggest(const char *word, const void *table, size_t n, size_t stride);

#endif /* LNTUNE_CLI_SUGGEST_H */
