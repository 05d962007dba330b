/*
 * app_internal.h - what the command files of app/ share (included there only; the rest of the
 * project sees lntune_app.h): the usage message, the shapes of --shape, --dtype and --residual made
 * into the generator's, the checks of --op and --target, exit codes of library codes, and JSON
 * and duration printing.
 */
#ifndef LNTUNE_APP_INTERNAL_H
#define LNTUNE_APP_INTERNAL_H

#include "generator.h"
#include "lntune_app.h"

#include <stddef.h>
#include <stdio.h>

/* "lntune: <message>" and the hint to --help on err; returns LNT_EXIT_USAGE. */
int app_usage(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The shapes asked for: each --shape's H (and rows), all with --dtype's types, the fusion of
 * --residual and the affine of --weight-offset; kind alone when no --shape was given. */
typedef struct app_shapes {
    lntune_shape *shapes; /* malloc'd; free with app_shapes_free */
    size_t n;
    lntune_shape kind;
    int given; /* --dtype, --residual or --weight-offset given (kind differs from the default) */
} app_shapes;

/* Parses o's shapes into s; LNT_EXIT_OK, or LNT_EXIT_USAGE with the fault said on err. */
int app_shapes_parse(const lnt_app_options *o, FILE *err, app_shapes *s);
void app_shapes_free(app_shapes *s);
/* The one shape of a command that takes one: the --shape, else the kind when given, else NULL. */
const lntune_shape *app_the_shape(const app_shapes *s);

/* --op and --target both given and known, --variant when need_variant, one shape at most. */
int app_check_op_target(const lnt_app_options *o, const app_shapes *s, int need_variant, FILE *err);
/* The op text of --op in the direction asked ("rmsnorm_backward"), for a valid --op. */
const char *app_op_text(const lnt_app_options *o);

int app_db_exit(int rc);  /* LNTUNE_EDB: LNT_EXIT_DB, else LNT_EXIT_FAIL */
int app_gen_exit(int rc); /* what the templates refuse: LNT_EXIT_USAGE, else LNT_EXIT_FAIL */

/* JSON: a number (null when not finite: NaN is no JSON), a string escaped (json_string.h) or
 * null for NULL, and a string field ", "key": value" (first: without the comma). */
void app_json_number(FILE *f, const char *fmt, double v);
void app_json_text(FILE *f, const char *s);
void app_json_field(FILE *f, const char *key, const char *s, int first);

/* Seconds as "42 s", "3 min 05 s", "2 h 07 min" into buf. */
const char *app_duration(double s, char *buf, size_t size);

#endif /* LNTUNE_APP_INTERNAL_H */
