/*
 * rebuild.c - lntune_rebuild_imported (rebuild.h): which winners need code, then the planner
 * once per winner in rebuild_only mode, which finds the stored winner, compiles and verifies it
 * and stores its artifact (tuner.c's rebuild_winner), or reports it stale.
 */
#include "rebuild.h"

#include "dtypes.h"
#include "fusion.h"
#include "hardware.h"
#include "lntune.h"
#include "problem.h"
#include "tuner.h"
#include "tuning_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char op[48], dtype[24];
    int64_t H, rows;
} wanted;

typedef struct {
    lntune_db *db;
    wanted *list;
    size_t n;
    int other, oom;
} collect;

static int without_code(void *ud, const lntune_db_key *key, const lntune_best *b) {
    collect *c = ud;
    if (!key->affine) return 0; /* the tuner stores only gamma (and beta) winners */
    if (lntune_db_artifact_intact(c->db, b->artifact_key)) return 0;
    if (strcmp(key->target, "cpu") != 0) {
        c->other++;
        return 0;
    }
    wanted *grown = realloc(c->list, (c->n + 1) * sizeof *grown);
    if (!grown) {
        c->oom = 1;
        return 1;
    }
    c->list = grown;
    wanted *w = &grown[c->n++];
    snprintf(w->op, sizeof w->op, "%s", key->op);
    snprintf(w->dtype, sizeof w->dtype, "%s", key->dtype);
    w->H = key->H;
    w->rows = b->tuned_rows;
    return 0;
}

/* This CPU's winners without intact code into c (none when the database never saw this CPU). */
static int find_wanted(const char *db_path, collect *c, char *err, size_t errlen) {
    int rc = lntune_db_open(db_path, LNTUNE_DB_READONLY, &c->db);
    if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "%s", c->db ? lntune_db_errmsg(c->db) : lntune_errstr(rc));
        lntune_db_close(c->db);
        return rc;
    }
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    int64_t hw = 0;
    rc = lntune_db_find_hardware(c->db, cpu.fingerprint, &hw);
    if (rc == LNTUNE_OK) rc = lntune_db_each_best(c->db, hw, without_code, c);
    if (rc == LNTUNE_ENOTFOUND) rc = LNTUNE_OK;
    if (c->oom) rc = LNTUNE_ENOMEM;
    if (rc != LNTUNE_OK) snprintf(err, errlen, "%s", lntune_db_errmsg(c->db));
    lntune_db_close(c->db);
    c->db = NULL;
    return rc;
}

/* The planner in rebuild_only mode for one winner. */
static int rebuild_one(const char *db_path, int max_threads, const wanted *w,
                       lntune_rebuild_report *r, char *err, size_t errlen) {
    char op[48];
    int fusion = 0, offset = 0;
    lntune_shape shape = {.H = w->H, .rows = w->rows};
    const char *canonical = NULL;
    if (lntune_op_key_parse(w->op, op, sizeof op, &fusion, &offset) != 0 ||
        lntune_op_text_parse(op, NULL, NULL, &canonical) != 0 ||
        lntune_types_parse(w->dtype, &shape.types) != 0) {
        r->failed++; /* a record of a later version: its op or types are not known here */
        return LNTUNE_OK;
    }
    shape.fusion = fusion;
    shape.affine = offset ? LNTUNE_AFFINE_OFFSET : LNTUNE_AFFINE_ANY;
    const char *ops[1] = {canonical};
    lntune_tune_config cfg = {.db_path = db_path,
                              .ops = ops,
                              .nops = 1,
                              .shapes = &shape,
                              .nshapes = 1,
                              .max_threads = max_threads,
                              .rebuild_only = 1};
    lntune_tune_result *res = NULL;
    size_t n = 0;
    const int rc = lntune_tune(&cfg, &res, &n, err, errlen);
    if (rc == LNTUNE_OK && n == 1) {
        if (res[0].rebuilt)
            r->rebuilt++;
        else if (res[0].stale)
            r->stale++;
        else
            r->failed++;
        if (!res[0].rebuilt && !r->first_stale[0])
            snprintf(r->first_stale, sizeof r->first_stale, "%s %s %lldx%lld", w->op, w->dtype,
                     (long long)w->rows, (long long)w->H);
    }
    free(res);
    return rc;
}

int lntune_rebuild_imported(const char *db_path, int max_threads, lntune_rebuild_report *r,
                            char *err, size_t errlen) {
    if (!r) return LNTUNE_EINVAL;
    memset(r, 0, sizeof *r);
    collect c = {0};
    int rc = find_wanted(db_path, &c, err, errlen);
    r->considered = (int)c.n;
    r->other = c.other;
    for (size_t i = 0; i < c.n && rc == LNTUNE_OK; ++i)
        rc = rebuild_one(db_path, max_threads, &c.list[i], r, err, errlen);
    free(c.list);
    return rc;
}
