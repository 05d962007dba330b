/*
 * jit.h - the compile pipeline's in-process step: cc.h's compiler compiles the source to an
 * object as a subprocess (`clang-14 -std=c11 -O3 -march=native -fPIC -c -o - -x c -`), and the
 * LLVM ORC LLJIT loads the object from memory (LLVMOrcLLJITAddObjectFileWithRT), resolving libc
 * and process symbols.
 * Each loaded variant has its own resource tracker, so unloading one frees its code.
 *
 * An on-disk object cache keyed by source hash, flags and compiler version makes a second
 * tuning run compile nothing. lntune_jit_compile is thread-safe (many compilers run at once);
 * load and unload take the handle's lock.
 */
#ifndef LNTUNE_JIT_H
#define LNTUNE_JIT_H

#include "lntune_kernel.h"

#include <stddef.h>

typedef struct lntune_jit lntune_jit;
typedef struct lntune_jit_module lntune_jit_module; /* one loaded object */

typedef struct lntune_jit_config {
    const char *compiler;  /* NULL: lntune_default_compiler() (cc.h) */
    const char *cache_dir; /* NULL: $XDG_CACHE_HOME/lntune/objects (~/.cache/...); "" disables */
} lntune_jit_config;

/* Fails with LNTUNE_ECOMPILE (and a message) when the compiler cannot be run at all. */
int lntune_jit_open(const lntune_jit_config *config, lntune_jit **out);
void lntune_jit_close(lntune_jit *jit); /* NULL is a no-op; unloads every module */
const char *lntune_jit_errmsg(const lntune_jit *jit);
const char *lntune_jit_compiler_version(const lntune_jit *jit); /* first line of --version */

typedef struct lntune_jit_object {
    void *data; /* malloc'd object bytes */
    size_t len;
    char key[17];  /* cache key: hash of source, flags, compiler version */
    int cache_hit; /* 1 if no compiler ran */
    double compile_ms;
    char *diag; /* the compiler's messages on failure (malloc'd), else NULL */
} lntune_jit_object;

/*
 * Compiles source with the JIT's fixed flags plus extra_flags (NULL-terminated, may be NULL),
 * or takes the object from the cache. Thread-safe. LNTUNE_ECOMPILE with obj->diag on failure.
 */
int lntune_jit_compile(lntune_jit *jit, const char *source, const char *const *extra_flags,
                       lntune_jit_object *obj);
/* Compiles n sources at once on `parallel` threads; returns how many failed. */
size_t lntune_jit_compile_many(lntune_jit *jit, const char *const *sources,
                               const char *const *const *extra_flags, size_t n, int parallel,
                               lntune_jit_object *objs);
void lntune_jit_object_free(lntune_jit_object *obj); /* frees the fields; NULL is a no-op */

/* Loads an object in process and finds symbol in it. */
int lntune_jit_load(lntune_jit *jit, const void *object, size_t len, const char *symbol,
                    lntune_jit_module **module, lntune_kernel_fn *fn);
void lntune_jit_unload(lntune_jit_module *module); /* NULL is a no-op */

/* Links an object into shared-object bytes (what the runtime dlopens) with the compiler. */
int lntune_jit_link_shared(lntune_jit *jit, const void *object, size_t len, void **so,
                           size_t *so_len, char **diag);

#endif /* LNTUNE_JIT_H */
