/*
 * db_doctor.c - what `lntune doctor` reports of a tuning database (tuning_db.h): whether
 * liblntune can open it, may load its code (db_trust.c), knows this machine, whether every
 * artifact's code still hashes to the digest recorded when lntune stored it, and whether each of
 * this machine's winners has code liblntune would load (wisdom brings none: import and merge build
 * it here, and a stale winner keeps none until it is tuned again).
 */
#include "tuning_db.h"

#include "lntune.h"

#include <stdio.h>
#include <string.h>

static int count_artifact(void *ud, const lntune_artifact *a) {
    lntune_db_health *h = ud;
    char why[256];
    h->artifacts++;
    if (lntune_artifact_intact(a, why, sizeof why))
        h->intact++;
    else if (!h->first_altered[0])
        snprintf(h->first_altered, sizeof h->first_altered, "%s: %s", a->key, why);
    return 0;
}

typedef struct {
    lntune_db *db;
    lntune_db_health *h;
    char why[256];
} winner_check;

/* The runtime's test (dispatch.c): intact code with a shared object to load. */
static int loadable_code(void *ud, const lntune_artifact *a) {
    winner_check *w = ud;
    if (!lntune_artifact_intact(a, w->why, sizeof w->why)) return 0;
    if (a->shared)
        w->why[0] = 0;
    else
        snprintf(w->why, sizeof w->why, "no shared object");
    return 0;
}

static int count_winner(void *ud, const lntune_db_key *k, const lntune_best *b) {
    winner_check *w = ud;
    w->h->winners++;
    snprintf(w->why, sizeof w->why, "no compiled code (wisdom of another machine, or stale)");
    const int rc = b->artifact_key && b->artifact_key[0]
                       ? lntune_db_get_artifact(w->db, b->artifact_key, loadable_code, w)
                       : LNTUNE_OK;
    if (rc != LNTUNE_OK)
        snprintf(w->why, sizeof w->why, "its artifact %.64s: %.150s", b->artifact_key,
                 rc == LNTUNE_ENOTFOUND ? "missing" : lntune_db_errmsg(w->db));
    if (!w->why[0])
        w->h->loadable++;
    else if (!w->h->first_unloadable[0])
        snprintf(w->h->first_unloadable, sizeof w->h->first_unloadable,
                 "%s %s %s H=%lld rows=%lld: %s", k->target, k->op, k->dtype, (long long)k->H,
                 (long long)b->tuned_rows, w->why);
    return 0;
}

int lntune_db_doctor(const char *path, lntune_db_health *h) {
    memset(h, 0, sizeof *h);
    if (path)
        snprintf(h->path, sizeof h->path, "%s", path);
    else if (lntune_db_default_path(h->path, sizeof h->path) != LNTUNE_OK)
        snprintf(h->path, sizeof h->path, "(no default path: neither $LNTUNE_DB nor $HOME set)");
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    snprintf(h->fingerprint, sizeof h->fingerprint, "%s", cpu.fingerprint);
    lntune_db *db = NULL;
    int rc = lntune_db_open(h->path, LNTUNE_DB_READONLY, &db);
    if (rc != LNTUNE_OK) {
        snprintf(h->open_error, sizeof h->open_error, "%s",
                 db ? lntune_db_errmsg(db) : lntune_errstr(rc));
        lntune_db_close(db);
        return rc;
    }
    h->opened = 1;
    h->trusted = lntune_db_code_trusted(h->path, h->why, sizeof h->why) == LNTUNE_OK;
    int64_t hw = 0;
    rc = lntune_db_find_hardware(db, cpu.fingerprint, &hw);
    h->machine_known = rc == LNTUNE_OK;
    winner_check w = {db, h, ""};
    if (rc == LNTUNE_OK) rc = lntune_db_each_best(db, hw, count_winner, &w);
    if (rc == LNTUNE_OK || rc == LNTUNE_ENOTFOUND)
        rc = lntune_db_each_artifact(db, count_artifact, h);
    if (rc != LNTUNE_OK) snprintf(h->open_error, sizeof h->open_error, "%s", lntune_db_errmsg(db));
    lntune_db_close(db);
    return rc;
}
