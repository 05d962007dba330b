/*
 * peers_lntune.c - lntune itself, the way an app calls it: through the public runtime API
 * (include/lntune.h), once with the database the bench names ("tuned") and once with an empty
 * one, so every shape runs the built-in kernel ("built-in"). Without the runtime in the build
 * (LNTUNE_BENCH_HAVE_RUNTIME undefined) both are reported as n/a.
 */
#define _POSIX_C_SOURCE 200809L
#include "peers.h"

#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef LNTUNE_BENCH_HAVE_RUNTIME

static lntune *tuned_ctx, *builtin_ctx;
static char empty_dir[64], empty_db[96];

typedef struct {
    lntune *ctx;
    int op;
    lntune_args a;
} state;

static int init(const lntune_bench_config *cfg, char *note, size_t notelen) {
    /* A database file that does not exist yet: the runtime finds no tuned kernel in it. */
    snprintf(empty_dir, sizeof empty_dir, "/tmp/lntune-bench-XXXXXX");
    if (!mkdtemp(empty_dir)) {
        snprintf(note, notelen, "cannot create a temporary directory for the empty database");
        return LNTUNE_EIO;
    }
    snprintf(empty_db, sizeof empty_db, "%s/empty.db", empty_dir);
    int rc = lntune_open(cfg->tuned_db, &tuned_ctx);
    if (rc == LNTUNE_OK) rc = lntune_open(empty_db, &builtin_ctx);
    if (rc != LNTUNE_OK)
        snprintf(note, notelen, "lntune_open: %s",
                 tuned_ctx ? lntune_errmsg(tuned_ctx) : lntune_errstr(rc));
    return rc;
}

static void fini(void) {
    lntune_close(tuned_ctx);
    lntune_close(builtin_ctx);
    tuned_ctx = builtin_ctx = NULL;
    if (empty_db[0]) unlink(empty_db);
    if (empty_dir[0]) rmdir(empty_dir);
    empty_db[0] = empty_dir[0] = '\0';
}

static int open_with(lntune *ctx, int op, const lntune_bench_problem *p, void **out, char *note,
                     size_t notelen) {
    if (!ctx) {
        snprintf(note, notelen, "the lntune runtime did not open");
        return LNTUNE_EUNSUPPORTED;
    }
    state *s = calloc(1, sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    s->ctx = ctx;
    s->op = op;
    s->a.rows = p->rows;
    s->a.H = p->H;
    s->a.eps = p->eps;
    /* The public enum counts from 1 (0 is "the default"); y and gamma/beta follow dtype. */
    s->a.dtype = (lntune_dtype)(p->type + 1);
    s->a.x = p->x;
    s->a.y = p->y;
    s->a.gamma = p->gamma;
    s->a.beta = op == LNTUNE_BENCH_LAYERNORM ? p->beta : NULL;
    *out = s;
    return LNTUNE_OK;
}

static int open_tuned_ln(const lntune_bench_problem *p, void **o, char *n, size_t nl) {
    return open_with(tuned_ctx, LNTUNE_BENCH_LAYERNORM, p, o, n, nl);
}
static int open_tuned_rms(const lntune_bench_problem *p, void **o, char *n, size_t nl) {
    return open_with(tuned_ctx, LNTUNE_BENCH_RMSNORM, p, o, n, nl);
}
static int open_builtin_ln(const lntune_bench_problem *p, void **o, char *n, size_t nl) {
    return open_with(builtin_ctx, LNTUNE_BENCH_LAYERNORM, p, o, n, nl);
}
static int open_builtin_rms(const lntune_bench_problem *p, void **o, char *n, size_t nl) {
    return open_with(builtin_ctx, LNTUNE_BENCH_RMSNORM, p, o, n, nl);
}

static int run(void *st) {
    state *s = st;
    return s->op == LNTUNE_BENCH_LAYERNORM ? lntune_layernorm(s->ctx, &s->a)
                                           : lntune_rmsnorm(s->ctx, &s->a);
}

static void close_state(void *s) {
    free(s);
}

/* The table below, with this build's functions. */
#define OPENER(f) f
#define RUN run
#define CLOSE close_state
#define INIT init
#define FINI fini
#define HAS_RUNTIME 1

#else /* no runtime in this build: every peer is n/a, saying why */

static int open_absent(const lntune_bench_problem *p, void **out, char *note, size_t notelen) {
    (void)p, (void)out;
    snprintf(note, notelen, "this build has no lntune runtime (liblntune) to call");
    return LNTUNE_EUNSUPPORTED;
}

#define OPENER(f) open_absent
#define RUN NULL
#define CLOSE NULL
#define INIT NULL
#define FINI NULL
#define HAS_RUNTIME 0

#endif

static const lntune_bench_peer peers[] = {
    {"lntune_tuned", LNTUNE_BENCH_LAYERNORM, OPENER(open_tuned_ln), RUN, CLOSE},
    {"lntune_builtin", LNTUNE_BENCH_LAYERNORM, OPENER(open_builtin_ln), RUN, CLOSE},
    {"lntune_tuned", LNTUNE_BENCH_RMSNORM, OPENER(open_tuned_rms), RUN, CLOSE},
    {"lntune_builtin", LNTUNE_BENCH_RMSNORM, OPENER(open_builtin_rms), RUN, CLOSE},
};

const lntune_bench_family lntune_bench_lntune_family = {peers, sizeof peers / sizeof peers[0], INIT,
                                                        FINI};

int lntune_bench_has_runtime(void) {
    return HAS_RUNTIME;
}
