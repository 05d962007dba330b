/*
 * json_string.h - a C string written as a JSON string: the one escaper of the wisdom files
 * (db_wisdom.c) and the command line's JSON output.
 */
#ifndef LNTUNE_JSON_STRING_H
#define LNTUNE_JSON_STRING_H

#include <stdio.h>

/* s quoted, with '"', '\\', newlines and the other control characters escaped. */
void lntune_json_string(FILE *f, const char *s);

#endif /* LNTUNE_JSON_STRING_H */
