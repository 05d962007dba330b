/*
 * object_cache.c - the JIT's object cache on disk (see object_cache.h).
 */
#define _GNU_SOURCE
#include "object_cache.h"

#include "lntune.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lntune_object_cache_dir(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && *xdg == '/')
        n = snprintf(buf, size, "%s/lntune/objects", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/lntune/objects", home);
    else
        return LNTUNE_ENOTFOUND;
    return n < 0 || (size_t)n >= size ? LNTUNE_EINVAL : LNTUNE_OK;
}

/* KEY.o with KEY 16 lowercase hex digits: what jit.c writes. */
static int is_object(const char *name) {
    if (strlen(name) != 18 || strcmp(name + 16, ".o") != 0) return 0;
    for (int i = 0; i < 16; ++i)
        if (!strchr("0123456789abcdef", name[i])) return 0;
    return 1;
}

int lntune_object_cache_scan(const char *dir, int clean, lntune_object_cache_stats *out) {
    out->files = 0;
    out->bytes = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? LNTUNE_OK : LNTUNE_EIO;
    int rc = LNTUNE_OK;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_object(e->d_name)) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (clean && unlinkat(dirfd(d), e->d_name, 0) != 0) {
            rc = LNTUNE_EIO;
            continue;
        }
        out->files++;
        out->bytes += st.st_size;
    }
    closedir(d);
    return rc;
}
