/*
 * make_dirs.c - mkdir -p (see make_dirs.h).
 */
#include "make_dirs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir of one folder; one that exists already counts only when it is a folder. */
static int make_one(const char *dir, unsigned mode) {
    if (mkdir(dir, (mode_t)mode) == 0) return 0;
    if (errno != EEXIST) return -1;
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    errno = ENOTDIR;
    return -1;
}

int lntune_make_dirs(const char *path, unsigned mode, char *failed, size_t failed_size) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        errno = ENAMETOOLONG;
        if (failed) snprintf(failed, failed_size, "%s", path);
        return -1;
    }
    for (char *p = dir + 1;; ++p) {
        if (*p != '/' && *p != '\0') continue;
        const char c = *p;
        *p = '\0';
        if (make_one(dir, mode) != 0) {
            if (failed) snprintf(failed, failed_size, "%s", dir);
            return -1;
        }
        if (c == '\0') return 0;
        *p = c;
    }
}
