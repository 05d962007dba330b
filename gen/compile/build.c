/*
 * build.c - the compile pipeline's step to a loaded library: sources -> objects (cc.h, in
 * parallel) -> one shared object in a private temporary directory -> dlopen. The directory is
 * removed as soon as the library is loaded.
 */
#define _GNU_SOURCE
#include "build.h"

#include "cc.h"
#include "lntune.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lntune_library {
    void *dl;
};

static char *format_diag(const char *what, size_t index, const char *text) {
    size_t len = strlen(what) + (text ? strlen(text) : 0) + 64;
    char *s = malloc(len);
    if (s) snprintf(s, len, "%s %zu: %s", what, index, text && *text ? text : "(no output)");
    return s;
}

/* Sources per translation unit: kernels with distinct symbols share a file, which saves the
 * compiler's start-up and header parsing (a third of the time of a one-kernel compile). */
enum { SOURCES_PER_UNIT = 16 };

/* Concatenates sources[first, first + count) into one translation unit. */
static char *join_sources(const char *const *sources, size_t first, size_t count) {
    size_t len = 1;
    for (size_t i = first; i < first + count; ++i) len += strlen(sources[i]) + 1;
    char *unit = malloc(len), *p = unit;
    if (!unit) return NULL;
    for (size_t i = first; i < first + count; ++i) {
        size_t n = strlen(sources[i]);
        memcpy(p, sources[i], n);
        p += n;
        *p++ = '\n';
    }
    *p = '\0';
    return unit;
}

int lntune_build_library(const char *compiler, const char *const *extra_flags,
                         const char *const *sources, size_t n, int parallel, lntune_library **out,
                         char **diag) {
    *out = NULL;
    if (diag) *diag = NULL;
    const size_t per_unit = n > SOURCES_PER_UNIT * (size_t)parallel ? SOURCES_PER_UNIT : 1;
    const size_t units = (n + per_unit - 1) / per_unit;
    char *dir = lntune_cc_tempdir();
    lntune_cc_job *jobs = calloc(units ? units : 1, sizeof *jobs);
    char **objs = calloc(units ? units : 1, sizeof *objs);
    char **texts = calloc(units ? units : 1, sizeof *texts);
    int rc = LNTUNE_ENOMEM;
    if (!dir || !jobs || !objs || !texts) goto done;
    for (size_t u = 0; u < units; ++u) {
        size_t len = strlen(dir) + 32, first = u * per_unit;
        size_t count = first + per_unit <= n ? per_unit : n - first;
        if (!(objs[u] = malloc(len))) goto done;
        snprintf(objs[u], len, "%s/k%zu.o", dir, u);
        if (!(texts[u] = per_unit == 1 ? strdup(sources[u]) : join_sources(sources, first, count)))
            goto done;
        jobs[u] = (lntune_cc_job){texts[u], objs[u], extra_flags, 0, NULL};
    }
    rc = LNTUNE_ECOMPILE;
    const char *flags[32]; /* the kernel flags, compiling only */
    size_t nflags = 0;
    for (const char *const *f = lntune_kernel_cflags; *f && nflags < 30; ++f) flags[nflags++] = *f;
    flags[nflags++] = "-c";
    flags[nflags] = NULL;
    if (lntune_cc_compile(compiler, flags, jobs, units, parallel) != 0) {
        for (size_t u = 0; u < units; ++u)
            if (jobs[u].status != 0) {
                if (diag)
                    *diag = format_diag(per_unit == 1 ? "compiling source"
                                                      : "compiling the "
                                                        "unit of sources from",
                                        u * per_unit, jobs[u].diag);
                break;
            }
        goto done;
    }
    char so[4200], *link_diag = NULL;
    snprintf(so, sizeof so, "%s/kernels.so", dir);
    if (lntune_cc_link_shared(compiler, (const char *const *)objs, units, so, &link_diag) != 0) {
        if (diag) *diag = format_diag("linking sources", n, link_diag);
        free(link_diag);
        goto done;
    }
    free(link_diag);
    void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        if (diag) *diag = format_diag("loading library of", n, dlerror());
        goto done;
    }
    rc = LNTUNE_ENOMEM;
    if (!(*out = malloc(sizeof **out))) {
        dlclose(dl);
        goto done;
    }
    (*out)->dl = dl;
    rc = LNTUNE_OK;
done:
    for (size_t u = 0; jobs && u < units; ++u) free(jobs[u].diag);
    for (size_t u = 0; objs && u < units; ++u) free(objs[u]);
    for (size_t u = 0; texts && u < units; ++u) free(texts[u]);
    free(jobs);
    free(objs);
    free(texts);
    lntune_cc_remove_dir(dir);
    free(dir);
    return rc;
}

lntune_kernel_fn lntune_library_kernel(lntune_library *lib, const char *symbol) {
    if (!lib || !symbol) return NULL;
    lntune_kernel_fn fn;
    void *sym = dlsym(lib->dl, symbol);
    memcpy(&fn, &sym, sizeof fn); /* object-to-function pointer, as POSIX allows */
    return fn;
}

void lntune_library_close(lntune_library *lib) {
    if (!lib) return;
    dlclose(lib->dl);
    free(lib);
}
