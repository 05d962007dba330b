/*
 * db_trust.c - whether the code a tuning database holds may run in this process (tuning_db.h).
 *
 * A database is a file anyone can hand over (a colleague, a container image, a download), and
 * its artifacts are shared objects liblntune maps into every app that links it. So, as ssh
 * treats a private key, the file must be this user's own: owned by the effective user and not
 * writable by group or others, in a folder owned by that user (or root) that group and others
 * cannot write either, so that nobody else can have written or swapped it. The same holds for
 * SQLite's -wal and -shm files beside it, which SQLite reads as part of the database. Paths
 * are resolved first (realpath), so a link is judged by what it points to.
 */
#define _GNU_SOURCE
#include "tuning_db.h"

#include "lntune.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether st (of what, at path) passes; else why. */
static int owned_and_private(const struct stat *st, const char *what, const char *path, int root_ok,
                             char *why, size_t whylen) {
    const uid_t me = geteuid();
    if (st->st_uid != me && !(root_ok && st->st_uid == 0)) {
        snprintf(why, whylen, "%s %s belongs to uid %lu, not to this user (uid %lu)", what, path,
                 (unsigned long)st->st_uid, (unsigned long)me);
        return 0;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, whylen, "%s %s is writable by %s (mode %03o)", what, path,
                 st->st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st->st_mode & 0777));
        return 0;
    }
    return 1;
}

/* The -wal or -shm file beside the database, when it exists. */
static int companion_ok(const char *file, const char *suffix, char *why, size_t whylen) {
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s%s", file, suffix);
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT; /* absent: nothing to judge */
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s is not a regular file", path);
        return 0;
    }
    return owned_and_private(&st, "the database's", path, 0, why, whylen);
}

int lntune_db_code_trusted(const char *path, char *why, size_t whylen) {
    char def[4096], real[PATH_MAX];
    if (!path) {
        if (lntune_db_default_path(def, sizeof def) != LNTUNE_OK) {
            snprintf(why, whylen, "no database path (neither $LNTUNE_DB nor $HOME is set)");
            return LNTUNE_EDB;
        }
        path = def;
    }
    if (!realpath(path, real)) {
        snprintf(why, whylen, "cannot resolve %s: %s", path, strerror(errno));
        return LNTUNE_EDB;
    }
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s is not a regular file", real);
        return LNTUNE_EDB;
    }
    if (!owned_and_private(&st, "the database", real, 0, why, whylen)) return LNTUNE_EDB;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", real);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0'; /* a database in / */
    else if (slash)
        *slash = '\0';
    if (stat(dir, &st) != 0) {
        snprintf(why, whylen, "cannot stat the database's folder %s: %s", dir, strerror(errno));
        return LNTUNE_EDB;
    }
    if (!owned_and_private(&st, "the database's folder", dir, 1, why, whylen)) return LNTUNE_EDB;
    if (!companion_ok(real, "-wal", why, whylen) || !companion_ok(real, "-shm", why, whylen))
        return LNTUNE_EDB;
    return LNTUNE_OK;
}
