/*
 * db_shapes.c - the shapes `lntune bench` compares: those this machine has tuned kernels for in
 * a tuning database, one (tuned rows, H) each whatever the op.
 */
#include "bench.h"

#include "hardware.h"
#include "lntune.h"
#include "tuning_db.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    lntune_bench_shape *s;
    size_t n;
    int rc;
} collected;

static int collect(void *ud, const lntune_db_key *k, const lntune_best *b) {
    collected *c = ud;
    if (strcmp(k->target, "cpu") != 0 || strcmp(k->dtype, "f32") != 0) return 0;
    const int64_t rows = b->tuned_rows > 0 ? b->tuned_rows : k->rows;
    for (size_t i = 0; i < c->n; ++i)
        if (c->s[i].rows == rows && c->s[i].H == k->H) return 0;
    lntune_bench_shape *s = realloc(c->s, (c->n + 1) * sizeof *s);
    if (!s) return c->rc = LNTUNE_ENOMEM;
    c->s = s;
    c->s[c->n++] = (lntune_bench_shape){rows, k->H};
    return 0;
}

int lntune_bench_db_shapes(const char *path, lntune_bench_shape **shapes, size_t *n, char *err,
                           size_t errlen) {
    *shapes = NULL, *n = 0;
    lntune_db *db = NULL;
    int rc = lntune_db_open(path, LNTUNE_DB_READONLY, &db);
    if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "%s", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
        lntune_db_close(db);
        return rc;
    }
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    int64_t hw;
    collected c = {NULL, 0, LNTUNE_OK};
    rc = lntune_db_find_hardware(db, cpu.fingerprint, &hw);
    if (rc == LNTUNE_OK) rc = lntune_db_each_best(db, hw, collect, &c);
    if (rc == LNTUNE_OK) rc = c.rc;
    if (rc == LNTUNE_ENOTFOUND || (rc == LNTUNE_OK && c.n == 0)) {
        snprintf(err, errlen, "%s has no tuned shapes for this machine (%s); tune some first",
                 lntune_db_path(db), cpu.fingerprint);
        rc = LNTUNE_ENOTFOUND;
    } else if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "%s", lntune_db_errmsg(db));
    }
    lntune_db_close(db);
    if (rc != LNTUNE_OK) {
        free(c.s);
        return rc;
    }
    *shapes = c.s, *n = c.n;
    return LNTUNE_OK;
}
