/*
 * loader.c - shared-object bytes -> dlopen handle.
 *
 * memfd_create gives a file that lives only in memory and vanishes with its last reference;
 * glibc's dlopen takes it by its /proc/self/fd path (the fd stays open while the object is
 * loaded, so that no later kernel reuses the path: see loader.h). Where memfd or /proc is missing
 * (old kernels, sandboxes) a private cache directory stands in; the file is unlinked as soon as it
 * is mapped, so nothing accumulates and no other user can swap it underneath us.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *bytes, size_t len) {
    const char *p = bytes;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *load_memfd(const void *bytes, size_t len, int *fd_out, char *err, size_t errlen) {
    int fd = memfd_create("lntune-kernel", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "memfd_create: %s", strerror(errno));
        return NULL;
    }
    void *dl = NULL;
    if (write_all(fd, bytes, len) != 0) {
        snprintf(err, errlen, "writing the memfd: %s", strerror(errno));
    } else {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (!(dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
            snprintf(err, errlen, "dlopen of a memfd: %s", dlerror());
    }
    if (dl)
        *fd_out = fd; /* kept open: see loader.h */
    else
        close(fd);
    return dl;
}

/* $XDG_CACHE_HOME/lntune/kernels, created 0700 and required to be ours and private. */
static int cache_dir(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[4096];
    if (xdg && *xdg)
        snprintf(base, sizeof base, "%s", xdg);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache", home);
    else
        return -1;
    snprintf(buf, size, "%s/lntune", base);
    mkdir(base, 0700);
    mkdir(buf, 0700);
    snprintf(buf, size, "%s/lntune/kernels", base);
    mkdir(buf, 0700);
    struct stat st;
    if (lstat(buf, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0)
        return -1;
    return 0;
}

static void *load_file(const void *bytes, size_t len, char *err, size_t errlen) {
    char path[4200];
    if (cache_dir(path, sizeof path - 32) != 0) {
        snprintf(err, errlen, "no private cache directory for kernels");
        return NULL;
    }
    strcat(path, "/k-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, errlen, "mkstemp %.200s: %s", path, strerror(errno));
        return NULL;
    }
    void *dl = NULL;
    if (write_all(fd, bytes, len) != 0)
        snprintf(err, errlen, "writing %.200s: %s", path, strerror(errno));
    else if (!(dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
        snprintf(err, errlen, "dlopen %.200s: %s", path, dlerror());
    close(fd);
    unlink(path);
    return dl;
}

void *lntune_load_shared(const void *bytes, size_t len, int *fd, char *err, size_t errlen) {
    *fd = -1;
    if (!bytes || len == 0) {
        snprintf(err, errlen, "the artifact has no shared object");
        return NULL;
    }
    char first[256] = "";
    void *dl = load_memfd(bytes, len, fd, first, sizeof first);
    if (dl) return dl;
    char second[256] = "";
    if ((dl = load_file(bytes, len, second, sizeof second))) return dl;
    snprintf(err, errlen, "%s; then %s", first, second);
    return NULL;
}
