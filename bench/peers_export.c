/*
 * peers_export.c - lntune export's output, the way an app ships it: the lntune_kernels.c that
 * `lntune export` wrote from the bench's database, compiled at -O3 -march=native into a shared
 * object (bench/run.sh does both; bench_cpu --export PATH) and loaded here. Winners run as
 * tuned, every other shape on the file's generic kernels. Without --export it is n/a.
 */
#define _GNU_SOURCE
#include "peers.h"

#include "lntune.h"
#include "lntune_kernel.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* lntune_kernels.h's type selector (generated, so not includable here): four ints, 0 = fp32 for
 * x and "as x" for the others, else lntune_dtype's numbers. */
typedef struct {
    int x, y, params, residual;
} exported_types;
typedef int (*exported_fn)(const lntune_kernel_args *args, exported_types types);

static void *library;
static exported_fn layernorm, rmsnorm;

typedef struct {
    exported_fn fn;
    lntune_kernel_args a;
    exported_types t;
} state;

static int init(const lntune_bench_config *cfg, char *note, size_t notelen) {
    if (!cfg->export_lib) {
        snprintf(note, notelen, "no exported kernels to load (bench_cpu --export; bench/run.sh)");
        return LNTUNE_EUNSUPPORTED;
    }
    if (!(library = dlopen(cfg->export_lib, RTLD_NOW | RTLD_LOCAL))) {
        snprintf(note, notelen, "dlopen: %s", dlerror());
        return LNTUNE_EIO;
    }
    *(void **)&layernorm = dlsym(library, "lntune_kernels_layernorm_v2");
    *(void **)&rmsnorm = dlsym(library, "lntune_kernels_rmsnorm_v2");
    if (!layernorm || !rmsnorm) {
        snprintf(note, notelen, "%s lacks lntune_kernels_layernorm_v2/_rmsnorm_v2",
                 cfg->export_lib);
        return LNTUNE_EIO;
    }
    return LNTUNE_OK;
}

static void fini(void) {
    if (library) dlclose(library);
    library = NULL;
    layernorm = rmsnorm = NULL;
}

static int open_with(exported_fn fn, int op, const lntune_bench_problem *p, void **out) {
    state *s = calloc(1, sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    s->fn = fn;
    s->a.rows = p->rows;
    s->a.H = p->H;
    s->a.x_stride = s->a.y_stride = p->H;
    s->a.eps = p->eps;
    s->a.x = p->x;
    s->a.y = p->y;
    s->a.gamma = p->gamma;
    s->a.beta = op == LNTUNE_BENCH_LAYERNORM ? p->beta : NULL;
    s->t.x = p->type + 1; /* y and gamma/beta follow x */
    *out = s;
    return LNTUNE_OK;
}

static int open_ln(const lntune_bench_problem *p, void **o, char *n, size_t nl) {
    (void)n, (void)nl;
    return open_with(layernorm, LNTUNE_BENCH_LAYERNORM, p, o);
}
static int open_rms(const lntune_bench_problem *p, void **o, char *n, size_t nl) {
    (void)n, (void)nl;
    return open_with(rmsnorm, LNTUNE_BENCH_RMSNORM, p, o);
}

static int run(void *st) {
    const state *s = st;
    return s->fn(&s->a, s->t);
}

static void close_state(void *s) {
    free(s);
}

static const lntune_bench_peer peers[] = {
    {"lntune_export", LNTUNE_BENCH_LAYERNORM, open_ln, run, close_state},
    {"lntune_export", LNTUNE_BENCH_RMSNORM, open_rms, run, close_state},
};

const lntune_bench_family lntune_bench_export_family = {peers, sizeof peers / sizeof peers[0], init,
                                                        fini};
