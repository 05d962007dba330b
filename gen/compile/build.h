/*
 * build.h - the compile pipeline's step to a loaded library: generated sources compiled by cc.h's
 * compiler into one shared object, loaded. (The tuner's in-process step is the ORC JIT, jit.h;
 * this one serves the CLI's verify and time, the tests, and any compiler given by name, gcc
 * included.)
 */
#ifndef LNTUNE_BUILD_H
#define LNTUNE_BUILD_H

#include "cc.h" /* lntune_default_compiler, lntune_kernel_cflags */
#include "lntune_kernel.h"

#include <stddef.h>

typedef struct lntune_library lntune_library;

/*
 * Compiles sources[0..n) (each with extra_flags, which may be NULL) into objects, up to parallel
 * at once, links them into one shared object and loads it. On failure returns LNTUNE_ECOMPILE
 * and *diag names the first failing source and the compiler's message.
 */
int lntune_build_library(const char *compiler, const char *const *extra_flags,
                         const char *const *sources, size_t n, int parallel, lntune_library **out,
                         char **diag);
lntune_kernel_fn lntune_library_kernel(lntune_library *lib, const char *symbol);
void lntune_library_close(lntune_library *lib); /* NULL is a no-op */

#endif /* LNTUNE_BUILD_H */
