/*
 * lntune_app.h - the application layer of the `lntune` command: one function per command, each
 * taking the parsed options and writing its results to out and its messages (usage faults,
 * warnings, progress) to err, and returning the command's exit code. The command line (cli/)
 * only turns argv into lnt_app_options, prints help and calls these; tests call them too.
 *
 * Every check of what the options mean (an unknown op, a missing --variant, a shape's text) is
 * made here, before anything is opened, and answered with LNT_EXIT_USAGE.
 * docs/reliability.md says what each exit code means.
 */
#ifndef LNTUNE_APP_H
#define LNTUNE_APP_H

#include <stdio.h>

enum {
    LNT_EXIT_OK = 0,
    LNT_EXIT_FAIL = 1,
    LNT_EXIT_USAGE = 2,
    LNT_EXIT_DB = 3,       /* the database refused or unwritable */
    LNT_EXIT_SIGNAL = 128, /* + N: signal N stopped a tune after it saved its work */
};

/* --residual (or --residual=out) and --residual=noout */
enum { LNT_APP_RESIDUAL_OUT = 1, LNT_APP_RESIDUAL_NOOUT = 2 };

enum { LNT_APP_MAX_LIST = 16, LNT_APP_MAX_FILES = 64 };

/* The options of every command, as given; zero-filled means none given. */
typedef struct lnt_app_options {
    const char *op, *target, *rigor, *dtype, *db, *symbol;
    const char *out_dir, *gpu;              /* export --out, --gpu */
    const char *seed_from, *max_wait;       /* tune --seed-from, --max-wait SECONDS */
    const char *shapes[LNT_APP_MAX_LIST];   /* every --shape's text ("rows=8,H=64,96") */
    const char *variants[LNT_APP_MAX_LIST]; /* every --variant */
    const char *action;                     /* db: export, import, merge; cache: clean */
    const char *files[LNT_APP_MAX_FILES];   /* db's FILE arguments */
    int nshapes, nvariants, nfiles;
    int residual;      /* LNT_APP_RESIDUAL_* */
    int backward;      /* the gradients' ops */
    int weight_offset; /* y = norm(x) * (offset + gamma) */
    int retune, force, json, all, long_rows, cmake, generic_only;
    int threads, seconds, sm, device; /* 0: the default */
} lnt_app_options;

/* The commands (docs/cli.md). */
int lnt_app_tune(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_show(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_variants(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_params(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_emit(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_verify(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_time(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_doctor(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_cache(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_export(const lnt_app_options *o, FILE *out, FILE *err);
/* db ACTION: export (files[0], "-": out), import (each file), merge (files[0] <- files[1..]) */
int lnt_app_db(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_db_export(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_db_import(const lnt_app_options *o, FILE *out, FILE *err);
int lnt_app_db_merge(const lnt_app_options *o, FILE *out, FILE *err);

/*
 * What tune prints of its results, for tests: n results (struct lntune_tune_result, tuner.h)
 * as the table or, with json, as a JSON array whose strings are escaped (json_string.h).
 */
struct lntune_tune_result;
void lnt_app_print_tune_results(FILE *out, const struct lntune_tune_result *r, size_t n, int json);

#endif /* LNTUNE_APP_H */
