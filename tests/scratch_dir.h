/*
 * scratch_dir.h - a test's own directory for its databases and logs: made under $TMPDIR (else
 * /tmp), removed with everything in it when the test passed, kept for a look when it failed.
 */
#ifndef LNTUNE_TEST_SCRATCH_DIR_H
#define LNTUNE_TEST_SCRATCH_DIR_H

/* The includer defines _GNU_SOURCE (mkdtemp, nftw) before its first include. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

/* dir (size bytes) receives "$TMPDIR/lntune-NAME-XXXXXX", created; returns 0, or -1 with a
 * message. */
static int scratch_dir_make(char *dir, size_t size, const char *name) {
    const char *base = getenv("TMPDIR");
    const int n = snprintf(dir, size, "%s/lntune-%s-XXXXXX", base && base[0] ? base : "/tmp", name);
    if (n < 0 || (size_t)n >= size || !mkdtemp(dir)) {
        perror("scratch directory");
        return -1;
    }
    return 0;
}

static int scratch_dir_remove_entry(const char *path, const struct stat *st, int flag,
                                    struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes dir and what it holds if the test passed (failures == 0); otherwise names it. */
static void scratch_dir_finish(const char *dir, int failures) {
    if (failures)
        printf("files kept in %s\n", dir);
    else if (nftw(dir, scratch_dir_remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        printf("could not remove %s\n", dir);
}

#endif
