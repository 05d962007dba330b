/*
 * make_dirs.h - mkdir -p, for the folders lntune writes into: the tuning database's, the JIT's
 * object cache, `lntune export --out`.
 */
#ifndef LNTUNE_MAKE_DIRS_H
#define LNTUNE_MAKE_DIRS_H

#include <stddef.h>

/*
 * Creates the folder path and its missing parents, each new one with mode (less the umask).
 * 0 on success, when every one exists as a folder; else -1 with errno set (ENOTDIR: a file of
 * that name is in the way) and failed (when not NULL) the path that could not be made.
 */
int lntune_make_dirs(const char *path, unsigned mode, char *failed, size_t failed_size);

#endif /* LNTUNE_MAKE_DIRS_H */
