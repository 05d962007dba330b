/*
 * loader.h - loads a tuned kernel's shared-object bytes, as stored in the tuning database,
 * without a compiler and without leaving a file behind.
 */
#ifndef LNTUNE_LOADER_H
#define LNTUNE_LOADER_H

#include <stddef.h>

/*
 * dlopens len bytes of a shared object: from an anonymous memfd (/proc/self/fd/N), else from a
 * private file under $XDG_CACHE_HOME/lntune/kernels (mode 0700), unlinked once loaded. Returns
 * the dlopen handle, or NULL with a message in err.
 *
 * *fd receives the memfd (or -1), which the caller closes only after dlclose: glibc's dlopen
 * returns an already loaded object whose name matches, so while one kernel is loaded from
 * /proc/self/fd/N no other may be given the same N.
 */
void *lntune_load_shared(const void *bytes, size_t len, int *fd, char *err, size_t errlen);

#endif /* LNTUNE_LOADER_H */
