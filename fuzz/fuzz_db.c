/*
 * fuzz_db.c - libFuzzer target for the tuning database's loader: the fuzzed bytes are written to
 * a file, opened read-only through tuning_db.h, and every table is read: hardware, best, and for
 * each best its measurements and its artifact. Any file is refused with a message or read.
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

static size_t sink; /* what the callbacks read, so nothing is optimized away */

static int on_hardware(void *ud, const lntune_db_hardware *hw) {
    (void)ud;
    sink += strlen(hw->fingerprint ? hw->fingerprint : "") + (size_t)hw->cores;
    return 0;
}

static int on_measurement(void *ud, const lntune_measurement *m) {
    (void)ud;
    sink += strlen(m->variant ? m->variant : "") + strlen(m->status ? m->status : "");
    return 0;
}

static int on_artifact(void *ud, const lntune_artifact *a) {
    (void)ud;
    sink += a->object_len + a->shared_len + strlen(a->source ? a->source : "");
    return 0;
}

static int on_best(void *ud, const lntune_db_key *k, const lntune_best *b) {
    lntune_db *db = ud;
    lntune_db_key key = *k;
    lntune_db_each_measurement(db, &key, NULL, on_measurement, NULL);
    if (b->artifact_key) lntune_db_get_artifact(db, b->artifact_key, on_artifact, NULL);
    sink += strlen(b->variant ? b->variant : "");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64], side[80];
    snprintf(path, sizeof path, "/tmp/lntune-fuzz-db-%d.db", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    lntune_db *db = NULL;
    if (lntune_db_open(path, LNTUNE_DB_READONLY, &db) == LNTUNE_OK) {
        lntune_db_each_hardware(db, on_hardware, NULL);
        lntune_db_each_best(db, 0, on_best, db);
    } else if (!db || !lntune_db_errmsg(db)[0]) {
        abort();
    }
    lntune_db_close(db);
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; ++i) {
        snprintf(side, sizeof side, "%s%s", path, suffix[i]);
        unlink(side);
    }
    return 0;
}
