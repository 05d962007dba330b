/*
 * db_records.c - reading and writing the four record types of the tuning database: hardware,
 * measurements, artifacts and best. One prepared statement per call, finalized before return,
 * so a callback may call back into the same handle.
 */
#include "db_internal.h"
#include "lntune.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The rows buckets' first row counts; a bucket ends where the next one starts. */
static const int64_t bucket_start[] = {1, 2, 9, 65, 513, 4097, 32769};
#define BUCKETS ((int)(sizeof bucket_start / sizeof bucket_start[0]))

int lntune_rows_bucket(int64_t rows) {
    if (rows < 1) return -1;
    int b = 0;
    while (b + 1 < BUCKETS && rows >= bucket_start[b + 1]) ++b;
    return b;
}

static int not_open(lntune_db *db) {
    if (!db) return LNTUNE_EINVAL;
    if (!db->sq)
        return lntune_dbi_fail(db, LNTUNE_EDB, "the database is not open (the open failed)");
    return LNTUNE_OK;
}

static int prepare(lntune_db *db, const char *sql, sqlite3_stmt **st) {
    *st = NULL;
    if (sqlite3_prepare_v2(db->sq, sql, -1, st, NULL) != SQLITE_OK)
        return lntune_dbi_sqlfail(db, "cannot prepare a statement");
    return LNTUNE_OK;
}

/* Binders that report the first failure: each returns the running result, 0 while all is well. */
static int bind_text(sqlite3_stmt *st, int i, const char *s, int src) {
    if (src != SQLITE_OK) return src;
    return s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

static int bind_int(sqlite3_stmt *st, int i, int64_t v, int src) {
    return src != SQLITE_OK ? src : sqlite3_bind_int64(st, i, v);
}

/* NaN, the tuner's "no timing", is stored as NULL, which is what SQLite would make of it anyway. */
static int bind_real(sqlite3_stmt *st, int i, double v, int src) {
    if (src != SQLITE_OK) return src;
    return isnan(v) ? sqlite3_bind_null(st, i) : sqlite3_bind_double(st, i, v);
}

static int bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len, int src) {
    if (src != SQLITE_OK) return src;
    if (!p) return sqlite3_bind_null(st, i);
    return sqlite3_bind_blob64(st, i, p, (sqlite3_uint64)len, SQLITE_TRANSIENT);
}

static double col_real(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static const char *col_text(sqlite3_stmt *st, int i) {
    return (const char *)sqlite3_column_text(st, i);
}

/* A zero-length blob reads back as a NULL pointer; keep it apart from a NULL column. */
static const void *col_blob(sqlite3_stmt *st, int i, size_t *len) {
    const void *p = sqlite3_column_blob(st, i);
    *len = (size_t)sqlite3_column_bytes(st, i);
    if (!p && sqlite3_column_type(st, i) != SQLITE_NULL) p = "";
    return p;
}

/* Steps a statement that returns no rows, then finalizes it. */
static int run(lntune_db *db, sqlite3_stmt *st, int bind_rc, const char *what) {
    int rc = LNTUNE_OK;
    if (bind_rc != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) rc = lntune_dbi_sqlfail(db, what);
    sqlite3_finalize(st);
    return rc;
}

/* After a statement's last sqlite3_step: SQLITE_DONE is success, anything else a message. */
static int finish(lntune_db *db, sqlite3_stmt *st, int step_rc, const char *what) {
    int rc = LNTUNE_OK;
    if (step_rc != SQLITE_DONE && step_rc != SQLITE_ROW) rc = lntune_dbi_sqlfail(db, what);
    sqlite3_finalize(st);
    return rc;
}

static int begin(lntune_db *db) {
    if (sqlite3_exec(db->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return lntune_dbi_sqlfail(db, "cannot lock the database for writing");
    return LNTUNE_OK;
}

/* Commits after rc == 0, else rolls back keeping rc and its message. */
static int end(lntune_db *db, int rc) {
    if (!rc && sqlite3_exec(db->sq, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = lntune_dbi_sqlfail(db, "cannot commit");
    if (rc && !sqlite3_get_autocommit(db->sq)) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ---- hardware ---- */

static int find_hardware(lntune_db *db, const char *fingerprint, int64_t *id) {
    sqlite3_stmt *st;
    int rc = prepare(db, "SELECT id FROM hardware WHERE fingerprint = ?1", &st);
    if (rc) return rc;
    int src = bind_text(st, 1, fingerprint, SQLITE_OK);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    if (src == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    rc = finish(db, st, src, "cannot look up the hardware");
    if (!rc && src == SQLITE_DONE)
        rc = lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "no hardware with fingerprint %s", fingerprint);
    return rc;
}

int lntune_db_find_hardware(lntune_db *db, const char *fingerprint, int64_t *id) {
    int rc = not_open(db);
    if (rc) return rc;
    if (!fingerprint || !id)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "find_hardware: NULL fingerprint or id");
    return find_hardware(db, fingerprint, id);
}

/* Every column of a hardware row; CPU and GPU rows both go through put_row. */
typedef struct {
    const char *fingerprint, *arch, *model, *features, *compiler, *kind;
    int64_t family, model_id, stepping, cores, l1d, l2, l3;
    int64_t compute_capability, memory_bus_bits, driver_version; /* GPUs; NULL for CPUs */
    int gpu;
} hardware_row;

/* Inserts r unless its fingerprint is already there; *id receives the row id either way. */
static int put_row(lntune_db *db, const hardware_row *r, int64_t *id) {
    int rc = begin(db);
    if (rc) return rc;
    rc = find_hardware(db, r->fingerprint, id);
    if (rc == LNTUNE_ENOTFOUND) {
        sqlite3_stmt *st;
        rc = prepare(
            db,
            "INSERT INTO hardware (fingerprint, arch, model, family, model_id, stepping, "
            "features, cores, l1d_bytes, l2_bytes, l3_bytes, compiler, kind, "
            "compute_capability, memory_bus_bits, driver_version) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            &st);
        if (!rc) {
            int src = bind_text(st, 1, r->fingerprint, SQLITE_OK);
            src = bind_text(st, 2, r->arch, src);
            src = bind_text(st, 3, r->model, src);
            src = bind_int(st, 4, r->family, src);
            src = bind_int(st, 5, r->model_id, src);
            src = bind_int(st, 6, r->stepping, src);
            src = bind_text(st, 7, r->features, src);
            src = bind_int(st, 8, r->cores, src);
            src = bind_int(st, 9, r->l1d, src);
            src = bind_int(st, 10, r->l2, src);
            src = bind_int(st, 11, r->l3, src);
            src = bind_text(st, 12, r->compiler, src);
            src = bind_text(st, 13, r->kind, src);
            for (int i = 0; i < 3 && src == SQLITE_OK; ++i) {
                const int64_t v[3] = {r->compute_capability, r->memory_bus_bits, r->driver_version};
                src = r->gpu ? sqlite3_bind_int64(st, 14 + i, v[i]) : sqlite3_bind_null(st, 14 + i);
            }
            rc = run(db, st, src, "cannot insert the hardware");
        }
        if (!rc) *id = sqlite3_last_insert_rowid(db->sq);
    }
    return end(db, rc);
}

int lntune_db_put_hardware(lntune_db *db, const lntune_cpu_info *cpu, const char *compiler,
                           int64_t *id) {
    char fingerprint[sizeof cpu->fingerprint], arch[sizeof cpu->arch], model[sizeof cpu->model];
    char features[256];
    int rc = not_open(db);
    if (rc) return rc;
    if (!cpu || !id) return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_hardware: NULL cpu or id");
    /* The struct's arrays are filled by hardware.c; copy them so a missing NUL cannot overrun. */
    snprintf(fingerprint, sizeof fingerprint, "%.*s", (int)sizeof fingerprint - 1,
             cpu->fingerprint);
    snprintf(arch, sizeof arch, "%.*s", (int)sizeof arch - 1, cpu->arch);
    snprintf(model, sizeof model, "%.*s", (int)sizeof model - 1, cpu->model);
    if (!fingerprint[0])
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_hardware: the CPU has no fingerprint");
    lntune_hw_features_string(cpu->isa, features, (int)sizeof features);
    const hardware_row r = {.fingerprint = fingerprint,
                            .arch = arch,
                            .model = model,
                            .features = features,
                            .compiler = compiler,
                            .kind = "cpu",
                            .family = cpu->family,
                            .model_id = cpu->model_id,
                            .stepping = cpu->stepping,
                            .cores = cpu->cores,
                            .l1d = cpu->l1d_bytes,
                            .l2 = cpu->l2_bytes,
                            .l3 = cpu->l3_bytes};
    return put_row(db, &r, id);
}

int lntune_db_put_gpu_hardware(lntune_db *db, const lntune_gpu_info *gpu, const char *nvrtc,
                               int64_t *id) {
    char fingerprint[sizeof gpu->fingerprint], name[sizeof gpu->name], arch[16];
    int rc = not_open(db);
    if (rc) return rc;
    if (!gpu || !id) return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_gpu_hardware: NULL gpu or id");
    snprintf(fingerprint, sizeof fingerprint, "%.*s", (int)sizeof fingerprint - 1,
             gpu->fingerprint);
    snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, gpu->name);
    snprintf(arch, sizeof arch, "sm_%d", gpu->sm);
    if (!fingerprint[0])
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_gpu_hardware: the GPU has no fingerprint");
    const hardware_row r = {.fingerprint = fingerprint,
                            .arch = arch,
                            .model = name,
                            .features = "",
                            .compiler = nvrtc,
                            .kind = "cuda",
                            .cores = gpu->multiprocessors,
                            .l2 = gpu->l2_bytes,
                            .compute_capability = gpu->sm,
                            .memory_bus_bits = gpu->bus_width_bits,
                            .driver_version = gpu->driver_version,
                            .gpu = 1};
    return put_row(db, &r, id);
}

int lntune_db_each_hardware(lntune_db *db, int (*cb)(void *ud, const lntune_db_hardware *hw),
                            void *ud) {
    sqlite3_stmt *st;
    int rc = not_open(db), src;
    if (rc) return rc;
    if (!cb) return lntune_dbi_fail(db, LNTUNE_EINVAL, "each_hardware: NULL callback");
    rc = prepare(db,
                 "SELECT id, fingerprint, arch, model, features, compiler, family, model_id, "
                 "stepping, cores, l1d_bytes, l2_bytes, l3_bytes, kind, compute_capability, "
                 "memory_bus_bits, driver_version FROM hardware ORDER BY id",
                 &st);
    if (rc) return rc;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        lntune_db_hardware hw = {
            .id = sqlite3_column_int64(st, 0),
            .fingerprint = col_text(st, 1),
            .arch = col_text(st, 2),
            .model = col_text(st, 3),
            .features = col_text(st, 4),
            .compiler = col_text(st, 5),
            .family = sqlite3_column_int(st, 6),
            .model_id = sqlite3_column_int(st, 7),
            .stepping = sqlite3_column_int(st, 8),
            .cores = sqlite3_column_int(st, 9),
            .l1d_bytes = sqlite3_column_int64(st, 10),
            .l2_bytes = sqlite3_column_int64(st, 11),
            .l3_bytes = sqlite3_column_int64(st, 12),
            .kind = col_text(st, 13),
            .compute_capability = sqlite3_column_int(st, 14),
            .memory_bus_bits = sqlite3_column_int(st, 15),
            .driver_version = sqlite3_column_int(st, 16),
        };
        if (cb(ud, &hw)) break;
    }
    return finish(db, st, src, "cannot read the hardware");
}

/* ---- keys ---- */

static int check_key(lntune_db *db, const lntune_db_key *key, const char *fn) {
    if (!key) return lntune_dbi_fail(db, LNTUNE_EINVAL, "%s: NULL key", fn);
    if (!key->target || !key->op || !key->dtype)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "%s: the key needs target, op and dtype", fn);
    if (key->H < 1 || key->rows < 1)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "%s: H (%lld) and rows (%lld) must be positive",
                               fn, (long long)key->H, (long long)key->rows);
    if (key->affine != 0 && key->affine != 1)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "%s: affine must be 0 or 1, not %d", fn,
                               key->affine);
    return LNTUNE_OK;
}

/* Binds hardware_id, target, op, dtype, H, rows (or its bucket), affine to ?1 .. ?7. */
static int bind_key(sqlite3_stmt *st, const lntune_db_key *key, int64_t rows) {
    int src = bind_int(st, 1, key->hardware_id, SQLITE_OK);
    src = bind_text(st, 2, key->target, src);
    src = bind_text(st, 3, key->op, src);
    src = bind_text(st, 4, key->dtype, src);
    src = bind_int(st, 5, key->H, src);
    src = bind_int(st, 6, rows, src);
    return bind_int(st, 7, key->affine, src);
}

/* ---- measurements ---- */

int lntune_db_put_measurement(lntune_db *db, const lntune_db_key *key,
                              const lntune_measurement *m) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, "put_measurement"))) return rc;
    if (!m || !m->variant || !m->template_hash || !m->status)
        return lntune_dbi_fail(db, LNTUNE_EINVAL,
                               "put_measurement: needs variant, template_hash and status");
    if (strcmp(m->status, LNTUNE_STATUS_OK) && strcmp(m->status, LNTUNE_STATUS_WRONG) &&
        strcmp(m->status, LNTUNE_STATUS_FAILED))
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_measurement: unknown status '%s'",
                               m->status);
    /* An upsert is one statement, so it needs no explicit transaction. */
    rc = prepare(db,
                 "INSERT INTO measurements (hardware_id, target, op, dtype, H, rows, affine, "
                 "variant, template_hash, status, message, artifact_key, compile_ms, median_ns, "
                 "min_ns, max_ns, gbps, copy_gbps, max_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                 "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) "
                 "ON CONFLICT (hardware_id, target, op, dtype, H, rows, affine, variant, "
                 "template_hash) DO UPDATE SET status = excluded.status, message = "
                 "excluded.message, artifact_key = excluded.artifact_key, compile_ms = "
                 "excluded.compile_ms, median_ns = excluded.median_ns, min_ns = excluded.min_ns, "
                 "max_ns = excluded.max_ns, gbps = excluded.gbps, copy_gbps = excluded.copy_gbps, "
                 "max_error = excluded.max_error, measured_at = excluded.measured_at",
                 &st);
    if (rc) return rc;
    int src = bind_key(st, key, key->rows);
    src = bind_text(st, 8, m->variant, src);
    src = bind_text(st, 9, m->template_hash, src);
    src = bind_text(st, 10, m->status, src);
    src = bind_text(st, 11, m->message, src);
    src = bind_text(st, 12, m->artifact_key, src);
    src = bind_real(st, 13, m->compile_ms, src);
    src = bind_real(st, 14, m->median_ns, src);
    src = bind_real(st, 15, m->min_ns, src);
    src = bind_real(st, 16, m->max_ns, src);
    src = bind_real(st, 17, m->gbps, src);
    src = bind_real(st, 18, m->copy_gbps, src);
    src = bind_real(st, 19, m->max_error, src);
    return run(db, st, src, "cannot store the measurement");
}

int lntune_db_each_measurement(lntune_db *db, const lntune_db_key *key, const char *template_hash,
                               int (*cb)(void *ud, const lntune_measurement *m), void *ud) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, "each_measurement"))) return rc;
    if (!cb) return lntune_dbi_fail(db, LNTUNE_EINVAL, "each_measurement: NULL callback");
    rc = prepare(db,
                 "SELECT variant, template_hash, status, message, artifact_key, compile_ms, "
                 "median_ns, min_ns, max_ns, gbps, copy_gbps, max_error FROM measurements "
                 "WHERE hardware_id = ?1 AND target = ?2 AND op = ?3 AND dtype = ?4 AND H = ?5 "
                 "AND rows = ?6 AND affine = ?7 AND (?8 IS NULL OR template_hash = ?8) "
                 "ORDER BY variant, template_hash",
                 &st);
    if (rc) return rc;
    int src = bind_text(st, 8, template_hash, bind_key(st, key, key->rows));
    if (src == SQLITE_OK) {
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            lntune_measurement m = {
                .variant = col_text(st, 0),
                .template_hash = col_text(st, 1),
                .status = col_text(st, 2),
                .message = col_text(st, 3),
                .artifact_key = col_text(st, 4),
                .compile_ms = col_real(st, 5),
                .median_ns = col_real(st, 6),
                .min_ns = col_real(st, 7),
                .max_ns = col_real(st, 8),
                .gbps = col_real(st, 9),
                .copy_gbps = col_real(st, 10),
                .max_error = col_real(st, 11),
            };
            if (cb(ud, &m)) break;
        }
    }
    return finish(db, st, src, "cannot read the measurements");
}

int lntune_db_each_seed(lntune_db *db, const lntune_db_key *key, int max,
                        int (*cb)(void *ud, const char *variant), void *ud) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, "each_seed"))) return rc;
    if (!cb) return lntune_dbi_fail(db, LNTUNE_EINVAL, "each_seed: NULL callback");
    /* The winners of the nearest row count first (chosen by the final re-time), then the fastest
     * correct measurements there, each variant once; every machine but hardware ?1. */
    rc = prepare(db,
                 "WITH near AS (SELECT rows FROM measurements WHERE hardware_id != ?1 AND "
                 "target = ?2 AND op = ?3 AND dtype = ?4 AND H = ?5 AND affine = ?7 AND "
                 "status = 'ok' ORDER BY abs(rows - ?6), rows DESC LIMIT 1), "
                 "ranked AS (SELECT variant, 0 AS pass, median_ns AS t FROM best WHERE "
                 "hardware_id != ?1 AND target = ?2 AND op = ?3 AND dtype = ?4 AND H = ?5 AND "
                 "affine = ?7 AND tuned_rows = (SELECT rows FROM near) UNION ALL SELECT variant, "
                 "1, median_ns FROM measurements WHERE hardware_id != ?1 AND target = ?2 AND "
                 "op = ?3 AND dtype = ?4 AND H = ?5 AND affine = ?7 AND status = 'ok' AND "
                 "median_ns IS NOT NULL AND rows = (SELECT rows FROM near)) "
                 "SELECT variant FROM ranked GROUP BY variant ORDER BY min(pass), min(t) LIMIT ?8",
                 &st);
    if (rc) return rc;
    int src = bind_int(st, 8, max, bind_key(st, key, key->rows));
    if (src == SQLITE_OK)
        while ((src = sqlite3_step(st)) == SQLITE_ROW)
            if (cb(ud, col_text(st, 0))) break;
    return finish(db, st, src, "cannot read the seeds");
}

/* ---- artifacts ---- */

static int intact_cb(void *ud, const lntune_artifact *a) {
    char why[256];
    *(int *)ud = lntune_artifact_intact(a, why, sizeof why);
    return 0;
}

int lntune_db_artifact_intact(lntune_db *db, const char *key) {
    int ok = 0;
    return key && key[0] && lntune_db_get_artifact(db, key, intact_cb, &ok) == LNTUNE_OK && ok;
}

int lntune_db_put_artifact(lntune_db *db, const lntune_artifact *a) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc) return rc;
    if (!a || !a->key || !a->source || !a->symbol)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_artifact: needs key, source and symbol");
    rc =
        prepare(db,
                "INSERT INTO artifacts (key, source, compiler, flags, symbol, object, shared, ptx, "
                "code_sha256) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (key) DO "
                "UPDATE SET source = excluded.source, compiler = excluded.compiler, flags = "
                "excluded.flags, symbol = excluded.symbol, object = excluded.object, shared = "
                "excluded.shared, ptx = excluded.ptx, code_sha256 = excluded.code_sha256",
                &st);
    if (rc) return rc;
    int src = bind_text(st, 1, a->key, SQLITE_OK);
    src = bind_text(st, 2, a->source, src);
    src = bind_text(st, 3, a->compiler, src);
    src = bind_text(st, 4, a->flags, src);
    src = bind_text(st, 5, a->symbol, src);
    src = bind_blob(st, 6, a->object, a->object_len, src);
    src = bind_blob(st, 7, a->shared, a->shared_len, src);
    src = bind_text(st, 8, a->ptx, src);
    char digest[65]; /* lntune_artifact_code_digest: 64 hex digits */
    lntune_artifact_code_digest(a->source, a->shared, a->shared_len, a->object, a->object_len,
                                a->ptx, digest);
    src = bind_text(st, 9, digest, src);
    return run(db, st, src, "cannot store the artifact");
}

/* The columns of artifact_row, in its order. */
#define ARTIFACT_COLUMNS "key, source, compiler, flags, symbol, object, shared, ptx, code_sha256"

static lntune_artifact artifact_row(sqlite3_stmt *st) {
    lntune_artifact a = {
        .key = col_text(st, 0),
        .source = col_text(st, 1),
        .compiler = col_text(st, 2),
        .flags = col_text(st, 3),
        .symbol = col_text(st, 4),
        .ptx = col_text(st, 7),
        .code_sha256 = col_text(st, 8),
    };
    a.object = col_blob(st, 5, &a.object_len);
    a.shared = col_blob(st, 6, &a.shared_len);
    return a;
}

int lntune_db_get_artifact(lntune_db *db, const char *key,
                           int (*cb)(void *ud, const lntune_artifact *a), void *ud) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc) return rc;
    if (!key || !cb)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "get_artifact: NULL key or callback");
    rc = prepare(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE key = ?1", &st);
    if (rc) return rc;
    int src = bind_text(st, 1, key, SQLITE_OK);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        const lntune_artifact a = artifact_row(st);
        cb(ud, &a);
    }
    rc = finish(db, st, src, "cannot read the artifact");
    if (!rc && src == SQLITE_DONE)
        rc = lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "no artifact with key %s", key);
    return rc;
}

int lntune_db_each_artifact(lntune_db *db, int (*cb)(void *ud, const lntune_artifact *a),
                            void *ud) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc) return rc;
    if (!cb) return lntune_dbi_fail(db, LNTUNE_EINVAL, "each_artifact: NULL callback");
    rc = prepare(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts ORDER BY key", &st);
    if (rc) return rc;
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        const lntune_artifact a = artifact_row(st);
        if (cb(ud, &a) != 0) {
            src = SQLITE_DONE;
            break;
        }
    }
    return finish(db, st, src, "cannot read the artifacts");
}

/* ---- best ---- */

#define BEST_COLUMNS                                                                               \
    "variant, artifact_key, threads, tuned_rows, median_ns, gbps, copy_gbps, max_error, "          \
    "naive_ns, any_h, H, twin_variant, twin_artifact_key, twin_median_ns, any_alignment, "         \
    "ratio_lo, ratio_hi, under_load, reach_lo, reach_hi"

/* BEST_COLUMNS as a row that serves other H: the winner where it reads H at run time, else its
 * twin (schema.sql's version 5), with the twin's figures and no twin of its own. */
#define RUNTIME_H_COLUMNS                                                                          \
    "CASE WHEN any_h THEN variant ELSE twin_variant END, "                                         \
    "CASE WHEN any_h THEN artifact_key ELSE twin_artifact_key END, threads, tuned_rows, "          \
    "CASE WHEN any_h THEN median_ns ELSE twin_median_ns END, "                                     \
    "CASE WHEN any_h THEN gbps ELSE gbps * median_ns / twin_median_ns END, copy_gbps, "            \
    "CASE WHEN any_h THEN max_error END, naive_ns, 1, H, NULL, NULL, NULL, any_alignment, "        \
    "ratio_lo, ratio_hi, under_load, reach_lo, reach_hi"

static lntune_best best_row(sqlite3_stmt *st, int i) {
    lntune_best b = {
        .variant = col_text(st, i),
        .artifact_key = col_text(st, i + 1),
        .threads = sqlite3_column_int(st, i + 2),
        .tuned_rows = sqlite3_column_int64(st, i + 3),
        .median_ns = col_real(st, i + 4),
        .gbps = col_real(st, i + 5),
        .copy_gbps = col_real(st, i + 6),
        .max_error = col_real(st, i + 7),
        .naive_ns = col_real(st, i + 8),
        .any_h = sqlite3_column_int(st, i + 9),
        .H = sqlite3_column_int64(st, i + 10),
        .twin_variant = col_text(st, i + 11),
        .twin_artifact_key = col_text(st, i + 12),
        .twin_median_ns = col_real(st, i + 13),
        .any_alignment = sqlite3_column_int(st, i + 14),
        .ratio_lo = col_real(st, i + 15),
        .ratio_hi = col_real(st, i + 16),
        .under_load = col_text(st, i + 17),
        .reach_lo = sqlite3_column_int64(st, i + 18),
        .reach_hi = sqlite3_column_int64(st, i + 19),
    };
    return b;
}

int lntune_db_set_best(lntune_db *db, const lntune_db_key *key, const lntune_best *b) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, "set_best"))) return rc;
    if (!b || !b->variant) return lntune_dbi_fail(db, LNTUNE_EINVAL, "set_best: needs a variant");
    if ((rc = begin(db))) return rc;
    rc = prepare(
        db,
        "INSERT INTO best (hardware_id, target, op, dtype, H, rows_bucket, affine, variant, "
        "artifact_key, threads, tuned_rows, median_ns, gbps, copy_gbps, max_error, naive_ns, "
        "any_h, any_alignment, ratio_lo, ratio_hi, under_load) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
        "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21) ON CONFLICT "
        "(hardware_id, target, op, dtype, H, "
        "rows_bucket, affine) DO UPDATE SET variant = excluded.variant, artifact_key = "
        "excluded.artifact_key, threads = excluded.threads, tuned_rows = "
        "excluded.tuned_rows, median_ns = excluded.median_ns, gbps = excluded.gbps, "
        "copy_gbps = excluded.copy_gbps, max_error = excluded.max_error, naive_ns = "
        "excluded.naive_ns, any_h = excluded.any_h, any_alignment = excluded.any_alignment, "
        "ratio_lo = excluded.ratio_lo, ratio_hi = excluded.ratio_hi, under_load = "
        "excluded.under_load, "
        "chosen_at = excluded.chosen_at, twin_variant = NULL, twin_artifact_key = NULL, "
        "twin_median_ns = NULL, reach_lo = NULL, reach_hi = NULL",
        &st);
    if (!rc) {
        int src = bind_key(st, key, lntune_rows_bucket(key->rows));
        src = bind_text(st, 8, b->variant, src);
        src = bind_text(st, 9, b->artifact_key, src);
        src = bind_int(st, 10, b->threads, src);
        src = bind_int(st, 11, b->tuned_rows, src);
        src = bind_real(st, 12, b->median_ns, src);
        src = bind_real(st, 13, b->gbps, src);
        src = bind_real(st, 14, b->copy_gbps, src);
        src = bind_real(st, 15, b->max_error, src);
        src = bind_real(st, 16, b->naive_ns, src);
        src = bind_int(st, 17, b->any_h != 0, src);
        src = bind_int(st, 18, b->any_alignment != 0, src);
        src = bind_real(st, 19, b->ratio_lo > 0 ? b->ratio_lo : NAN, src);
        src = bind_real(st, 20, b->ratio_hi > 0 ? b->ratio_hi : NAN, src);
        src = bind_text(st, 21, b->under_load, src);
        rc = run(db, st, src, "cannot store the best variant");
    }
    return end(db, rc);
}

int lntune_db_set_twin(lntune_db *db, const lntune_db_key *key, const char *variant,
                       const char *artifact_key, double median_ns) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, "set_twin"))) return rc;
    if (!variant) return lntune_dbi_fail(db, LNTUNE_EINVAL, "set_twin: needs a variant");
    if ((rc = begin(db))) return rc;
    rc = prepare(db,
                 "UPDATE best SET twin_variant = ?8, twin_artifact_key = ?9, twin_median_ns = ?10 "
                 "WHERE hardware_id = ?1 AND target = ?2 AND op = ?3 AND dtype = ?4 AND H = ?5 "
                 "AND rows_bucket = ?6 AND affine = ?7 AND any_h = 0",
                 &st);
    if (!rc) {
        int src = bind_key(st, key, lntune_rows_bucket(key->rows));
        src = bind_text(st, 8, variant, src);
        src = bind_text(st, 9, artifact_key, src);
        src = bind_real(st, 10, median_ns, src);
        rc = run(db, st, src, "cannot store the run-time-H twin");
    }
    if (!rc && sqlite3_changes(db->sq) != 1)
        rc = lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "set_twin: no fixed-H winner for %s %s H=%lld",
                             key->op, key->dtype, (long long)key->H);
    return end(db, rc);
}

int lntune_db_set_reach(lntune_db *db, const lntune_db_key *key, int64_t lo, int64_t hi) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, "set_reach"))) return rc;
    if (lo < 1 || lo > key->H || hi < key->H)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "set_reach: H %lld to %lld leaves out H=%lld",
                               (long long)lo, (long long)hi, (long long)key->H);
    if ((rc = begin(db))) return rc;
    rc = prepare(db,
                 "UPDATE best SET reach_lo = ?8, reach_hi = ?9 WHERE hardware_id = ?1 AND "
                 "target = ?2 AND op = ?3 AND dtype = ?4 AND H = ?5 AND rows_bucket = ?6 AND "
                 "affine = ?7",
                 &st);
    if (!rc) {
        int src = bind_key(st, key, lntune_rows_bucket(key->rows));
        src = bind_int(st, 8, lo, src);
        src = bind_int(st, 9, hi, src);
        rc = run(db, st, src, "cannot store the reach");
    }
    if (!rc && sqlite3_changes(db->sq) != 1)
        rc = lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "set_reach: no winner for %s %s H=%lld", key->op,
                             key->dtype, (long long)key->H);
    return end(db, rc);
}

/* Runs sql (a SELECT of BEST_COLUMNS from best bound by bind_key) and hands its first row to cb,
 * or with walk each row in turn until cb returns non-zero (it took that one); LNTUNE_ENOTFOUND
 * with missing's message when there is none, or with walk when cb took none. */
static int one_best(lntune_db *db, const lntune_db_key *key, const char *what, const char *sql,
                    int walk, int (*cb)(void *ud, const lntune_best *b), void *ud,
                    const char *missing) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc || (rc = check_key(db, key, what))) return rc;
    if (!cb) return lntune_dbi_fail(db, LNTUNE_EINVAL, "%s: NULL callback", what);
    if ((rc = prepare(db, sql, &st))) return rc;
    int src = bind_key(st, key, lntune_rows_bucket(key->rows));
    if (src == SQLITE_OK) src = sqlite3_step(st);
    while (src == SQLITE_ROW) {
        lntune_best b = best_row(st, 0);
        if (cb(ud, &b) || !walk) break;
        src = sqlite3_step(st);
    }
    rc = finish(db, st, src, "cannot read the best variant");
    if (!rc && src == SQLITE_DONE)
        rc = lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "%s for %s %s %s H=%lld rows=%lld affine=%d",
                             missing, key->target, key->op, key->dtype, (long long)key->H,
                             (long long)key->rows, key->affine);
    return rc;
}

int lntune_db_get_best(lntune_db *db, const lntune_db_key *key,
                       int (*cb)(void *ud, const lntune_best *b), void *ud) {
    return one_best(db, key, "get_best",
                    "SELECT " BEST_COLUMNS " FROM best WHERE hardware_id = ?1 AND target = ?2 AND "
                    "op = ?3 AND dtype = ?4 AND H = ?5 AND rows_bucket = ?6 AND affine = ?7",
                    0, cb, ud, "no best variant");
}

int lntune_db_get_nearest_best(lntune_db *db, const lntune_db_key *key,
                               int (*cb)(void *ud, const lntune_best *b), void *ud) {
    return one_best(db, key, "get_nearest_best",
                    "SELECT " RUNTIME_H_COLUMNS " FROM best WHERE hardware_id = ?1 AND "
                    "target = ?2 AND op = ?3 AND dtype = ?4 AND affine = ?7 AND (any_h = 1 OR "
                    "twin_artifact_key IS NOT NULL) ORDER BY "
                    "max(H, ?5) * 1.0 / min(H, ?5), abs(rows_bucket - ?6), H",
                    1, cb, ud, "no run-time H winner taken");
}

int lntune_db_each_best(lntune_db *db, int64_t hardware_id,
                        int (*cb)(void *ud, const lntune_db_key *key, const lntune_best *b),
                        void *ud) {
    sqlite3_stmt *st;
    int rc = not_open(db), src;
    if (rc) return rc;
    if (!cb) return lntune_dbi_fail(db, LNTUNE_EINVAL, "each_best: NULL callback");
    /* The columns after H only make the order total, so that two listings compare equal. */
    rc = prepare(db,
                 "SELECT hardware_id, target, op, dtype, H, rows_bucket, affine, " BEST_COLUMNS
                 " FROM best WHERE ?1 = 0 OR hardware_id = ?1 "
                 "ORDER BY target, op, dtype, H, affine, rows_bucket, hardware_id",
                 &st);
    if (rc) return rc;
    src = bind_int(st, 1, hardware_id, SQLITE_OK);
    if (src == SQLITE_OK) {
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            int bucket = sqlite3_column_int(st, 5);
            lntune_best b = best_row(st, 7);
            lntune_db_key key = {
                .hardware_id = sqlite3_column_int64(st, 0),
                .target = col_text(st, 1),
                .op = col_text(st, 2),
                .dtype = col_text(st, 3),
                .H = sqlite3_column_int64(st, 4),
                .affine = sqlite3_column_int(st, 6),
            };
            /* A row count of the bucket: the tuned one when it lies there, else the first. */
            key.rows = lntune_rows_bucket(b.tuned_rows) == bucket ? b.tuned_rows
                       : bucket >= 0 && bucket < BUCKETS          ? bucket_start[bucket]
                                                                  : 1;
            if (cb(ud, &key, &b)) break;
        }
    }
    return finish(db, st, src, "cannot read the best variants");
}

int lntune_db_put_crossover(lntune_db *db, int64_t hw, const char *name, int threads, int64_t value,
                            const char *template_hash) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc) return rc;
    if (!name || !template_hash || threads < 1)
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "put_crossover: needs a name, hash and threads");
    rc = prepare(db,
                 "INSERT INTO crossovers (hardware_id, name, threads, value, template_hash) "
                 "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (hardware_id, name, threads) DO UPDATE "
                 "SET value = excluded.value, template_hash = excluded.template_hash, "
                 "measured_at = excluded.measured_at",
                 &st);
    if (rc) return rc;
    int src = bind_int(st, 1, hw, SQLITE_OK);
    src = bind_text(st, 2, name, src);
    src = bind_int(st, 3, threads, src);
    src = bind_int(st, 4, value, src);
    src = bind_text(st, 5, template_hash, src);
    return run(db, st, src, "cannot store a crossover");
}

int lntune_db_get_crossover(lntune_db *db, int64_t hw, const char *name, int threads,
                            int64_t *value, int *measured_threads, char *hash, size_t size) {
    sqlite3_stmt *st;
    int rc = not_open(db);
    if (rc) return rc;
    if (!name || !value) return lntune_dbi_fail(db, LNTUNE_EINVAL, "get_crossover: NULL argument");
    rc = prepare(db,
                 "SELECT value, template_hash, threads FROM crossovers WHERE hardware_id = ?1 AND "
                 "name = ?2 ORDER BY abs(threads - ?3), threads LIMIT 1",
                 &st);
    if (rc) return rc;
    int src = bind_int(st, 1, hw, SQLITE_OK);
    src = bind_text(st, 2, name, src);
    src = bind_int(st, 3, threads, src);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        *value = sqlite3_column_int64(st, 0);
        if (measured_threads) *measured_threads = sqlite3_column_int(st, 2);
        if (hash && size) snprintf(hash, size, "%s", col_text(st, 1) ? col_text(st, 1) : "");
    }
    rc = finish(db, st, src, "cannot read a crossover");
    if (!rc && src == SQLITE_DONE)
        rc = lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "no crossover %s measured", name);
    return rc;
}
