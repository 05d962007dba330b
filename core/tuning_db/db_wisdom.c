/*
 * db_wisdom.c - a tuning database as portable text (tuning_db.h): JSON lines that carry every
 * machine, measurement, winner and crossover, keyed by the machine's fingerprint instead of a
 * row id, and never machine code (no artifact, no artifact key). The format, version 1:
 *
 *   {"lntune_wisdom": 1, "schema": 6}                                  first line
 *   {"record": "machine", "fingerprint": ..., <hardware columns>}      before its records
 *   {"record": "measurement", "machine": FP, <measurements columns>}
 *   {"record": "best", "machine": FP, <best columns>}
 *   {"record": "crossover", "machine": FP, <crossovers columns>}
 *
 * Column names are the schema's (schema.sql); a value is a JSON number, string or null. A winner's
 * run-time-H twin is not carried (it would arrive without its code): the next tuning run on the
 * importing machine tries it there (tuner.c's add_twin). Nor is any_alignment, a property of the
 * code: the importing machine's tuner sets it when it builds the winner (rebuild_winner).
 * A winner's spread (ratio_lo/ratio_hi), its under_load mark and its reach of H are figures of
 * the measuring machine and travel with it (a marked winner stays marked, so the importing
 * machine's next tune measures it again); wisdom written before they existed imports them as NULL.
 * Readers ignore keys they do not know, so later versions may add columns.
 */
#include "db_internal.h"
#include "json_string.h"
#include "lntune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The columns exported per table (never ids, blobs or artifact keys). */
static const char HARDWARE_COLUMNS[] =
    "fingerprint, kind, arch, model, family, model_id, stepping, features, cores, l1d_bytes, "
    "l2_bytes, l3_bytes, compiler, compute_capability, memory_bus_bits, driver_version, created";
static const char MEASUREMENT_COLUMNS[] =
    "target, op, dtype, H, rows, affine, variant, template_hash, status, message, compile_ms, "
    "median_ns, min_ns, max_ns, gbps, copy_gbps, max_error, measured_at";
static const char BEST_COLUMNS[] =
    "target, op, dtype, H, rows_bucket, affine, variant, threads, tuned_rows, median_ns, gbps, "
    "copy_gbps, max_error, naive_ns, any_h, chosen_at, ratio_lo, ratio_hi, under_load, reach_lo, "
    "reach_hi";
static const char CROSSOVER_COLUMNS[] = "name, threads, value, template_hash, measured_at";

/* The row's columns from first on, as ", name: value" pairs. */
static void put_columns(FILE *f, sqlite3_stmt *st, int first) {
    for (int i = first; i < sqlite3_column_count(st); ++i) {
        fputs(", ", f);
        lntune_json_string(f, sqlite3_column_name(st, i));
        fputs(": ", f);
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER:
            fprintf(f, "%lld", (long long)sqlite3_column_int64(st, i));
            break;
        case SQLITE_FLOAT: {
            const double v = sqlite3_column_double(st, i);
            if (isfinite(v))
                fprintf(f, "%.17g", v);
            else
                fputs("null", f);
            break;
        }
        case SQLITE_TEXT:
            lntune_json_string(f, (const char *)sqlite3_column_text(st, i));
            break;
        default: /* NULL; no exported column holds a blob */
            fputs("null", f);
        }
    }
}

/* Writes each row of table's columns for machine hw (fingerprint fp) as a record line. */
static int put_table(lntune_db *db, FILE *f, const char *record, const char *table,
                     const char *columns, int64_t hw, const char *fp) {
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE hardware_id = ?1 ORDER BY rowid", columns,
             table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sq, sql, -1, &st, NULL) != SQLITE_OK)
        return lntune_dbi_sqlfail(db, "cannot read the records to export");
    sqlite3_bind_int64(st, 1, hw);
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        fprintf(f, "{\"record\": \"%s\", \"machine\": ", record);
        lntune_json_string(f, fp);
        put_columns(f, st, 0);
        fputs("}\n", f);
    }
    sqlite3_finalize(st);
    if (src != SQLITE_DONE) return lntune_dbi_sqlfail(db, "cannot read the records to export");
    return LNTUNE_OK;
}

int lntune_db_wisdom_export(lntune_db *db, FILE *f, int *machines) {
    static const struct {
        const char *record, *table, *columns;
    } tables[] = {{"measurement", "measurements", MEASUREMENT_COLUMNS},
                  {"best", "best", BEST_COLUMNS},
                  {"crossover", "crossovers", CROSSOVER_COLUMNS}};
    *machines = 0;
    if (!db || !db->sq || !f) return LNTUNE_EINVAL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT id, %s FROM hardware ORDER BY id", HARDWARE_COLUMNS);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sq, sql, -1, &st, NULL) != SQLITE_OK)
        return lntune_dbi_sqlfail(db, "cannot read the machines to export");
    fprintf(f, "{\"lntune_wisdom\": 1, \"schema\": %d}\n", lntune_db_schema_version());
    int rc = LNTUNE_OK;
    while (rc == LNTUNE_OK && sqlite3_step(st) == SQLITE_ROW) {
        const int64_t hw = sqlite3_column_int64(st, 0);
        const char *fp = (const char *)sqlite3_column_text(st, 1); /* NOT NULL in the schema */
        fputs("{\"record\": \"machine\"", f);
        put_columns(f, st, 1);
        fputs("}\n", f);
        (*machines)++;
        for (size_t t = 0; rc == LNTUNE_OK && t < sizeof tables / sizeof tables[0]; ++t)
            rc = put_table(db, f, tables[t].record, tables[t].table, tables[t].columns, hw, fp);
    }
    sqlite3_finalize(st);
    if (rc == LNTUNE_OK && ferror(f))
        rc = lntune_dbi_fail(db, LNTUNE_EIO, "cannot write the export");
    return rc;
}

/* ---- import ---- */

enum { MAX_FIELDS = 48, MAX_VALUE = 4096 };

/* One parsed line: a flat JSON object of strings, numbers and nulls. */
typedef struct {
    int n;
    char key[MAX_FIELDS][40];
    char value[MAX_FIELDS][MAX_VALUE];
    int type[MAX_FIELDS]; /* SQLITE_TEXT, SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_NULL */
} flat_object;

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') ++p;
    return p;
}

/* A JSON string at p (after its quote) into out; the character after it, or NULL. */
static const char *parse_string(const char *p, char *out, size_t size) {
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            c = *p++;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; ++i, ++p) {
                    const char h = *p;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return NULL;
                    v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
                }
                if (v == 0 || v > 0x7f) return NULL; /* the export writes control characters only */
                c = (char)v;
            } else if (c != '"' && c != '\\' && c != '/') {
                return NULL;
            }
        }
        if (n + 1 >= size) return NULL;
        out[n++] = c;
    }
    if (*p != '"') return NULL;
    out[n] = '\0';
    return p + 1;
}

/* Parses line into o; 0 on success. */
static int parse_object(const char *line, flat_object *o) {
    o->n = 0;
    const char *p = skip_space(line);
    if (*p++ != '{') return -1;
    p = skip_space(p);
    if (*p == '}') return 0;
    for (;;) {
        if (o->n == MAX_FIELDS || *p++ != '"') return -1;
        if (!(p = parse_string(p, o->key[o->n], sizeof o->key[o->n]))) return -1;
        p = skip_space(p);
        if (*p++ != ':') return -1;
        p = skip_space(p);
        char *v = o->value[o->n];
        if (*p == '"') {
            if (!(p = parse_string(p + 1, v, MAX_VALUE))) return -1;
            o->type[o->n] = SQLITE_TEXT;
        } else if (strncmp(p, "null", 4) == 0) {
            p += 4;
            v[0] = '\0';
            o->type[o->n] = SQLITE_NULL;
        } else {
            size_t n = 0;
            int real = 0;
            while (*p && strchr("+-0123456789.eE", *p)) {
                real |= *p == '.' || *p == 'e' || *p == 'E';
                if (n + 1 >= MAX_VALUE) return -1;
                v[n++] = *p++;
            }
            if (n == 0) return -1;
            v[n] = '\0';
            o->type[o->n] = real ? SQLITE_FLOAT : SQLITE_INTEGER;
        }
        o->n++;
        p = skip_space(p);
        if (*p == '}') return *skip_space(p + 1) ? -1 : 0;
        if (*p++ != ',') return -1;
        p = skip_space(p);
    }
}

static int field(const flat_object *o, const char *key) {
    for (int i = 0; i < o->n; ++i)
        if (strcmp(o->key[i], key) == 0) return i;
    return -1;
}

/* Binds field key of o (NULL when absent) to parameter i. */
static int bind_field(sqlite3_stmt *st, int i, const flat_object *o, const char *key) {
    const int k = field(o, key);
    if (k < 0 || o->type[k] == SQLITE_NULL) return sqlite3_bind_null(st, i);
    if (o->type[k] == SQLITE_INTEGER)
        return sqlite3_bind_int64(st, i, strtoll(o->value[k], NULL, 10));
    if (o->type[k] == SQLITE_FLOAT) return sqlite3_bind_double(st, i, strtod(o->value[k], NULL));
    return sqlite3_bind_text(st, i, o->value[k], -1, SQLITE_TRANSIENT);
}

/* "a, b, c" -> its names, in order; the count. */
static int split_columns(const char *list, char names[][40], int max) {
    int n = 0;
    for (const char *p = list; *p && n < max;) {
        while (*p == ' ' || *p == ',') ++p;
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ') --len;
        if (!len) break;
        snprintf(names[n++], 40, "%.*s", (int)len, p);
        p += len;
    }
    return n;
}

/*
 * Inserts o's columns of table for machine hw (hw < 0: the hardware table itself). On a
 * conflict over conflict_cols, the row is replaced only when o is newer by newer_col (never for
 * hardware); replaced columns never include the keys. *changed: whether a row was written.
 */
static int upsert(lntune_db *db, const char *table, const char *columns, const char *conflict,
                  const char *newer_col, int64_t hw, const flat_object *o, int *changed) {
    char names[MAX_FIELDS][40];
    const int n = split_columns(columns, names, MAX_FIELDS);
    char sql[4096];
    size_t len = (size_t)snprintf(sql, sizeof sql, "INSERT INTO %s (%s", table,
                                  hw >= 0 ? "hardware_id, " : "");
    for (int i = 0; i < n; ++i)
        len += (size_t)snprintf(sql + len, sizeof sql - len, "%s%s", i ? ", " : "", names[i]);
    len += (size_t)snprintf(sql + len, sizeof sql - len, ") VALUES (%s", hw >= 0 ? "?1, " : "");
    for (int i = 0; i < n; ++i)
        len += (size_t)snprintf(sql + len, sizeof sql - len, "%s?%d", i ? ", " : "",
                                i + (hw >= 0 ? 2 : 1));
    if (!newer_col) {
        len += (size_t)snprintf(sql + len, sizeof sql - len, ") ON CONFLICT (%s) DO NOTHING",
                                conflict);
    } else {
        len += (size_t)snprintf(sql + len, sizeof sql - len, ") ON CONFLICT (%s) DO UPDATE SET ",
                                conflict);
        int first = 1;
        for (int i = 0; i < n; ++i) {
            char key[64];
            snprintf(key, sizeof key, ", %.39s,", names[i]);
            char keys[512];
            snprintf(keys, sizeof keys, ", %s,", conflict);
            if (strstr(keys, key)) continue; /* a key column */
            len += (size_t)snprintf(sql + len, sizeof sql - len, "%s%s = excluded.%s",
                                    first ? "" : ", ", names[i], names[i]);
            first = 0;
        }
        if (strcmp(table, "best") == 0) /* the local artifact serves only its own variant */
            len += (size_t)snprintf(sql + len, sizeof sql - len,
                                    ", artifact_key = CASE WHEN best.variant = excluded.variant "
                                    "THEN best.artifact_key END");
        len += (size_t)snprintf(sql + len, sizeof sql - len,
                                " WHERE excluded.%s > %s.%s OR %s.%s IS NULL", newer_col, table,
                                newer_col, table, newer_col);
    }
    if (len >= sizeof sql) return lntune_dbi_fail(db, LNTUNE_ERROR, "import: statement too long");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sq, sql, -1, &st, NULL) != SQLITE_OK)
        return lntune_dbi_sqlfail(db, "import: cannot prepare");
    int src = hw >= 0 ? sqlite3_bind_int64(st, 1, hw) : SQLITE_OK;
    for (int i = 0; i < n && src == SQLITE_OK; ++i)
        src = bind_field(st, i + (hw >= 0 ? 2 : 1), o, names[i]);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    *changed = src == SQLITE_DONE && sqlite3_changes(db->sq) > 0;
    sqlite3_finalize(st);
    if (src != SQLITE_DONE) return lntune_dbi_sqlfail(db, "import: a record was refused");
    return LNTUNE_OK;
}

int lntune_db_wisdom_import(lntune_db *db, FILE *f, lntune_wisdom_report *r) {
    memset(r, 0, sizeof *r);
    if (!db || !db->sq || !f) return LNTUNE_EINVAL;
    flat_object *o = malloc(sizeof *o);
    char *line = malloc(1 << 20);
    if (!o || !line) {
        free(o), free(line);
        return lntune_dbi_fail(db, LNTUNE_ENOMEM, "out of memory");
    }
    int rc = sqlite3_exec(db->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK
                 ? LNTUNE_OK
                 : lntune_dbi_sqlfail(db, "import: cannot lock the database");
    char machine[64] = "";
    int64_t hw = -1;
    while (rc == LNTUNE_OK && fgets(line, 1 << 20, f)) {
        r->lines++;
        if (parse_object(line, o) != 0) {
            rc = lntune_dbi_fail(db, LNTUNE_EINVAL, "line %ld is not a flat JSON object", r->lines);
            break;
        }
        const int rec = field(o, "record");
        if (r->lines == 1) {
            const int v = field(o, "lntune_wisdom");
            if (v < 0 || strcmp(o->value[v], "1") != 0)
                rc = lntune_dbi_fail(db, LNTUNE_EINVAL,
                                     "not lntune wisdom of version 1 (its first line names the "
                                     "format: {\"lntune_wisdom\": 1, ...})");
            continue;
        }
        if (rec < 0 || o->type[rec] != SQLITE_TEXT) {
            r->ignored++;
            continue;
        }
        const char *what = o->value[rec];
        int changed = 0;
        if (strcmp(what, "machine") == 0) {
            const int fp = field(o, "fingerprint");
            if (fp < 0 || o->type[fp] != SQLITE_TEXT || !o->value[fp][0] ||
                strlen(o->value[fp]) >= sizeof machine) {
                rc = lntune_dbi_fail(db, LNTUNE_EINVAL, "line %ld: a machine without fingerprint",
                                     r->lines);
                break;
            }
            rc = upsert(db, "hardware", HARDWARE_COLUMNS, "fingerprint", NULL, -1, o, &changed);
            if (rc == LNTUNE_OK) rc = lntune_db_find_hardware(db, o->value[fp], &hw);
            memcpy(machine, o->value[fp], strlen(o->value[fp]) + 1); /* fits: checked above */
            r->machines++;
            r->machines_new += changed;
            continue;
        }
        const int m = field(o, "machine");
        if (m < 0 || hw < 0 || strcmp(o->value[m], machine) != 0) {
            rc = lntune_dbi_fail(db, LNTUNE_EINVAL,
                                 "line %ld: a %s record before its machine's line", r->lines, what);
            break;
        }
        if (strcmp(what, "measurement") == 0) {
            rc = upsert(db, "measurements", MEASUREMENT_COLUMNS,
                        "hardware_id, target, op, dtype, H, rows, affine, variant, template_hash",
                        "measured_at", hw, o, &changed);
            r->measurements += changed;
        } else if (strcmp(what, "best") == 0) {
            rc = upsert(db, "best", BEST_COLUMNS,
                        "hardware_id, target, op, dtype, H, rows_bucket, affine", "chosen_at", hw,
                        o, &changed);
            r->best += changed;
        } else if (strcmp(what, "crossover") == 0) {
            rc = upsert(db, "crossovers", CROSSOVER_COLUMNS, "hardware_id, name, threads",
                        "measured_at", hw, o, &changed);
            r->crossovers += changed;
        } else {
            r->ignored++;
        }
    }
    if (rc == LNTUNE_OK && r->lines == 0)
        rc = lntune_dbi_fail(db, LNTUNE_EINVAL, "empty: no wisdom in it");
    if (rc == LNTUNE_OK && sqlite3_exec(db->sq, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = lntune_dbi_sqlfail(db, "import: cannot commit");
    if (rc != LNTUNE_OK) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    free(o);
    free(line);
    return rc;
}

int lntune_db_wisdom_merge(lntune_db *db, const char *src_path, lntune_wisdom_report *r) {
    memset(r, 0, sizeof *r);
    lntune_db *src = NULL;
    int machines = 0;
    FILE *f = tmpfile(); /* the other database's wisdom, then imported as a file would be */
    int rc = f ? lntune_db_open(src_path, LNTUNE_DB_READONLY, &src)
               : lntune_dbi_fail(db, LNTUNE_EIO, "no temporary file for %s's wisdom", src_path);
    if (f && rc != LNTUNE_OK)
        lntune_dbi_fail(db, rc, "%s", src ? lntune_db_errmsg(src) : lntune_errstr(rc));
    else if (f && (rc = lntune_db_wisdom_export(src, f, &machines)) != LNTUNE_OK)
        lntune_dbi_fail(db, rc, "%s", lntune_db_errmsg(src));
    lntune_db_close(src);
    if (rc == LNTUNE_OK) {
        rewind(f);
        rc = lntune_db_wisdom_import(db, f, r);
    }
    if (f) fclose(f);
    return rc;
}
