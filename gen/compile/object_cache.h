/*
 * object_cache.h - the JIT's object cache on disk (jit.c): where it is, how big, and emptying it.
 * Compiled objects are kept by the hash of their source, flags and compiler (FOLDER/KEY.o), so a
 * tune compiles a variant once per toolchain; nothing else reads the folder, and an object removed
 * is compiled again when next needed. `lntune cache` is its command.
 */
#ifndef LNTUNE_OBJECT_CACHE_H
#define LNTUNE_OBJECT_CACHE_H

#include <stddef.h>

/* The folder: $XDG_CACHE_HOME/lntune/objects (an absolute XDG_CACHE_HOME), else
 * $HOME/.cache/lntune/objects. LNTUNE_ENOTFOUND when neither is set; LNTUNE_EINVAL when it does
 * not fit buf. */
int lntune_object_cache_dir(char *buf, size_t size);

typedef struct lntune_object_cache_stats {
    long files;      /* objects (KEY.o, KEY 16 hex digits) */
    long long bytes; /* their size */
} lntune_object_cache_stats;

/* Counts the objects in dir, removing each when clean is set (what was removed, then, in out); a
 * folder that does not exist holds none. Other files are neither counted nor touched. LNTUNE_EIO
 * when the folder cannot be read or an object cannot be removed (out: what was done). */
int lntune_object_cache_scan(const char *dir, int clean, lntune_object_cache_stats *out);

#endif /* LNTUNE_OBJECT_CACHE_H */
