/*
 * fuzz_wisdom.c - libFuzzer target for the wisdom reader (lntune db import, core/tuning_db/
 * db_wisdom.c): the fuzzed bytes are imported into a new database. Either the import succeeds
 * or it fails with a message and leaves nothing of the file behind; a successful import done
 * again writes nothing new (import is idempotent).
 */
#define _GNU_SOURCE
#include "lntune.h"
#include "tuning_db.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_best(void *ud, const lntune_db_key *k, const lntune_best *b) {
    (void)k, (void)b;
    ++*(long *)ud;
    return 0;
}

/* Imports data into db; the report in *r. */
static int import(lntune_db *db, const uint8_t *data, size_t size, lntune_wisdom_report *r) {
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f) return -1;
    const int rc = lntune_db_wisdom_import(db, f, r);
    fclose(f);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0; /* fmemopen refuses an empty buffer */
    char path[64], side[80];
    snprintf(path, sizeof path, "/tmp/lntune-fuzz-wisdom-%d.db", (int)getpid());
    static const char *const sides[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; ++i) {
        snprintf(side, sizeof side, "%s%s", path, sides[i]);
        unlink(side);
    }
    lntune_db *db = NULL;
    if (lntune_db_open(path, 0, &db) != LNTUNE_OK) abort();
    lntune_wisdom_report r, again;
    const int rc = import(db, data, size, &r);
    long best = 0;
    lntune_db_each_best(db, 0, count_best, &best);
    if (rc == LNTUNE_OK) {
        /* idempotent: the same file again changes nothing */
        if (import(db, data, size, &again) != LNTUNE_OK || again.best != 0 ||
            again.measurements != 0 || again.crossovers != 0 || again.machines_new != 0)
            abort();
    } else if (rc != -1 && (!lntune_db_errmsg(db)[0] || best != 0)) {
        abort(); /* a refused file: a message, and nothing of it kept */
    }
    lntune_db_close(db);
    return 0;
}
