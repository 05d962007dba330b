/*
 * build.c - sources -> objects (in parallel) -> one shared object in a private temporary
 * directory -> dlopen. The directory is removed as soon as the library is loaded.
 */
#define _GNU_SOURCE
#include "build.h"

#include "cc.h"
#include "lntune.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lntune_library {
    void *dl;
};

const char *const lntune_kernel_cflags[] = {"-std=c11", "-O3", "-march=native", "-fPIC",
                                            "-c", "-x", "c", NULL};

static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[4096];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, path, name);
        if (access(buf, X_OK) == 0) return 1;
        path += len + (path[len] == ':');
    }
    return 0;
}

const char *lntune_default_compiler(void)
{
    const char *cc = getenv("LNTUNE_CC");
    if (cc && *cc) return cc;
    return on_path("clang-14") ? "clang-14" : "cc";
}

static char *format_diag(const char *what, size_t index, const char *text)
{
    size_t len = strlen(what) + (text ? strlen(text) : 0) + 64;
    char *s = malloc(len);
    if (s) snprintf(s, len, "%s %zu: %s", what, index, text && *text ? text : "(no output)");
    return s;
}

int lntune_build_library(const char *compiler, const char *const *extra_flags,
                         const char *const *sources, size_t n, int parallel, lntune_library **out,
                         char **diag)
{
    *out = NULL;
    if (diag) *diag = NULL;
    char *dir = lntune_cc_tempdir();
    lntune_cc_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    char **objs = calloc(n ? n : 1, sizeof *objs);
    int rc = LNTUNE_ENOMEM;
    if (!dir || !jobs || !objs) goto done;
    for (size_t i = 0; i < n; ++i) {
        size_t len = strlen(dir) + 32;
        if (!(objs[i] = malloc(len))) goto done;
        snprintf(objs[i], len, "%s/k%zu.o", dir, i);
        jobs[i] = (lntune_cc_job){sources[i], objs[i], extra_flags, 0, NULL};
    }
    rc = LNTUNE_ECOMPILE;
    if (lntune_cc_compile(compiler, lntune_kernel_cflags, jobs, n, parallel) != 0) {
        for (size_t i = 0; i < n; ++i)
            if (jobs[i].status != 0) {
                if (diag) *diag = format_diag("compiling source", i, jobs[i].diag);
                break;
            }
        goto done;
    }
    char so[4200], *link_diag = NULL;
    snprintf(so, sizeof so, "%s/kernels.so", dir);
    if (lntune_cc_link_shared(compiler, (const char *const *)objs, n, so, &link_diag) != 0) {
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
    for (size_t i = 0; jobs && i < n; ++i) free(jobs[i].diag);
    for (size_t i = 0; objs && i < n; ++i) free(objs[i]);
    free(jobs);
    free(objs);
    lntune_cc_remove_dir(dir);
    free(dir);
    return rc;
}

lntune_kernel_fn lntune_library_kernel(lntune_library *lib, const char *symbol)
{
    if (!lib || !symbol) return NULL;
    lntune_kernel_fn fn;
    void *sym = dlsym(lib->dl, symbol);
    memcpy(&fn, &sym, sizeof fn); /* object-to-function pointer, as POSIX allows */
    return fn;
}

void lntune_library_close(lntune_library *lib)
{
    if (!lib) return;
    dlclose(lib->dl);
    free(lib);
}
