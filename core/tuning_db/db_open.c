/*
 * db_open.c - finding, checking, creating and migrating the tuning database file.
 *
 * The rule is that a file we do not recognise is never modified. So a file is inspected in
 * three steps, each only once the one before has passed: its first 100 bytes by hand (is it
 * SQLite, whose application_id, which user_version), then a read-only SQLite connection
 * (quick_check, foreign tables), and only then a read-write connection, which sets WAL mode and
 * runs the schema.sql sections the file has not seen, all in one BEGIN IMMEDIATE transaction.
 */
#define _POSIX_C_SOURCE 200809L
#include "db_internal.h"
#include "lntune.h"
#include "make_dirs.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define LNTUNE_DB_APPLICATION_ID 0x4C4E5455 /* "LNTU", at offset 68 of the SQLite header */
#define LNTUNE_DB_BUSY_MS 10000 /* a tuner holds the write lock for one record at a time */
#define MAX_SCHEMA_STEPS 64

/* Built by cmake/embed.cmake from core/tuning_db/schema.sql. */
typedef struct {
    const char *path;
    const char *text;
    size_t len;
} embedded_file;
extern const embedded_file lntune_embedded_schema[];

/* One "-- @version N" section of schema.sql: the SQL that takes version N-1 to N. */
typedef struct {
    int version;
    const char *sql;
    size_t len;
} schema_step;

int lntune_dbi_fail(lntune_db *db, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->errmsg, sizeof db->errmsg, fmt, ap);
    va_end(ap);
    return rc;
}

int lntune_dbi_code(int sqlite_rc) {
    switch (sqlite_rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return LNTUNE_OK;
    case SQLITE_NOMEM:
        return LNTUNE_ENOMEM;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
        return LNTUNE_EINVAL; /* the caller's record broke a rule of the schema */
    default:
        return LNTUNE_EDB;
    }
}

/* A verdict on the file itself (foreign, newer, corrupt), as opposed to a transient failure. */
static int refuse(lntune_db *db) {
    db->refused = 1;
    return LNTUNE_EDB;
}

/* SQLite's verdict that the file is damaged or not a database; busy or I/O errors are not. */
static int is_damage(int sqlite_rc) {
    return (sqlite_rc & 0xff) == SQLITE_CORRUPT || (sqlite_rc & 0xff) == SQLITE_NOTADB;
}

/* Like lntune_dbi_sqlfail, for a connection that is not (yet) the handle's. */
static int conn_fail(lntune_db *db, sqlite3 *sq, const char *what) {
    int src = sq ? sqlite3_extended_errcode(sq) : SQLITE_NOMEM;
    int rc = lntune_dbi_code(src);
    /* A failed call always means failure, even if the connection's last code says otherwise. */
    if (rc == LNTUNE_OK) rc = LNTUNE_EDB;
    if (is_damage(src)) refuse(db);
    db->busy = (src & 0xff) == SQLITE_BUSY || (src & 0xff) == SQLITE_LOCKED;
    if (db->busy)
        return lntune_dbi_fail(db, rc,
                               "%s: %s (%s): another process held it longer than %d s; try again",
                               what, sqlite3_errmsg(sq), db->path, LNTUNE_DB_BUSY_MS / 1000);
    return lntune_dbi_fail(db, rc, "%s: %s (%s)", what, sqlite3_errmsg(sq), db->path);
}

int lntune_dbi_sqlfail(lntune_db *db, const char *what) {
    return conn_fail(db, db->sq, what);
}

/* Splits schema.sql at its "-- @version N" lines; -1 unless they number 1, 2, 3, ... */
static int schema_steps(schema_step *steps, int max) {
    static const char marker[] = "-- @version ";
    const embedded_file *f = &lntune_embedded_schema[0];
    const char *p = f->text, *end = f->text + f->len;
    int n = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol ? eol + 1 : end;
        if ((size_t)(end - p) >= sizeof marker - 1 && memcmp(p, marker, sizeof marker - 1) == 0) {
            int v = atoi(p + sizeof marker - 1);
            if (n == max || v != n + 1) return -1;
            if (n > 0) steps[n - 1].len = (size_t)(p - steps[n - 1].sql);
            steps[n].version = v;
            steps[n].sql = next;
            steps[n].len = (size_t)(end - next);
            ++n;
        }
        p = next;
    }
    return n > 0 ? n : -1;
}

int lntune_db_schema_version(void) {
    schema_step steps[MAX_SCHEMA_STEPS];
    int n = schema_steps(steps, MAX_SCHEMA_STEPS);
    return n > 0 ? steps[n - 1].version : -1;
}

int lntune_db_default_path(char *buf, size_t size) {
    const char *env;
    int n;
    if (!buf || size == 0) return LNTUNE_EINVAL;
    buf[0] = '\0';
    if ((env = getenv("LNTUNE_DB")) && env[0])
        n = snprintf(buf, size, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') /* XDG: relative is invalid */
        n = snprintf(buf, size, "%s/lntune/tune.db", env);
    else if ((env = getenv("HOME")) && env[0])
        n = snprintf(buf, size, "%s/.cache/lntune/tune.db", env);
    else
        return LNTUNE_ENOTFOUND;
    if (n < 0 || (size_t)n >= size) {
        buf[0] = '\0';
        return LNTUNE_EINVAL;
    }
    return LNTUNE_OK;
}

/* mkdir -p of the directory holding db->path. */
static int make_parent_dirs(lntune_db *db) {
    char dir[4096], failed[4096];
    if (snprintf(dir, sizeof dir, "%s", db->path) >= (int)sizeof dir)
        return lntune_dbi_fail(db, LNTUNE_EIO, "the database path is too long: %.200s...",
                               db->path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return LNTUNE_OK;
    *slash = '\0';
    /* 0700: liblntune loads code only from a database in a private folder (db_trust.c) */
    if (lntune_make_dirs(dir, 0700, failed, sizeof failed) != 0)
        return lntune_dbi_fail(db, LNTUNE_EIO, "cannot create directory %s: %s", failed,
                               strerror(errno));
    return LNTUNE_OK;
}

enum { FILE_MISSING, FILE_EMPTY, FILE_PRESENT };

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * The first look, by hand, before SQLite may touch the file: SQLite would happily open a text
 * file read-write, and reading the header ourselves refuses foreign and newer files without
 * creating even a -shm next to them. In WAL mode the header can lag the WAL; the SQLite checks
 * that follow see the truth.
 */
static int inspect_file(lntune_db *db, int *state, int *wal) {
    struct stat st;
    unsigned char h[100];
    if (wal) *wal = 0;
    if (stat(db->path, &st) != 0) {
        if (errno == ENOENT) {
            *state = FILE_MISSING;
            return LNTUNE_OK;
        }
        return lntune_dbi_fail(db, LNTUNE_EIO, "cannot stat %s: %s", db->path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return lntune_dbi_fail(db, LNTUNE_EIO, "%s is not a regular file", db->path);
    if (st.st_size == 0) {
        *state = FILE_EMPTY;
        return LNTUNE_OK;
    }
    int fd = open(db->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lntune_dbi_fail(db, LNTUNE_EIO, "cannot open %s: %s", db->path, strerror(errno));
    ssize_t n = pread(fd, h, sizeof h, 0);
    int err = errno;
    close(fd);
    if (n < 0)
        return lntune_dbi_fail(db, LNTUNE_EIO, "cannot read %s: %s", db->path, strerror(err));
    if (n < 16 || memcmp(h, "SQLite format 3", 16) != 0)
        return lntune_dbi_fail(
            db, refuse(db),
            "%s is not an SQLite database; refusing to touch it (move it away, or "
            "set LNTUNE_DB to another path)",
            db->path);
    if (n < (ssize_t)sizeof h)
        return lntune_dbi_fail(db, refuse(db), "%s is corrupt: its SQLite header is truncated",
                               db->path);
    uint32_t version = be32(h + 60), app = be32(h + 68);
    if (app != 0 && app != LNTUNE_DB_APPLICATION_ID)
        return lntune_dbi_fail(db, refuse(db),
                               "%s is the SQLite database of another application (application_id "
                               "0x%08x, lntune's is 0x%08x); refusing to touch it",
                               db->path, (unsigned)app, (unsigned)LNTUNE_DB_APPLICATION_ID);
    if (app == LNTUNE_DB_APPLICATION_ID && version > (uint32_t)lntune_db_schema_version())
        return lntune_dbi_fail(db, refuse(db),
                               "%s has schema version %u, newer than this build's %d; use a newer "
                               "lntune with it",
                               db->path, (unsigned)version, lntune_db_schema_version());
    /* Bytes 18 and 19 (the file format's read and write versions) are 2 in WAL mode. */
    if (wal) *wal = h[18] == 2 && h[19] == 2;
    *state = FILE_PRESENT;
    return LNTUNE_OK;
}

/* The n integer columns of sql's first row into out[0..n). */
static int query_ints(lntune_db *db, sqlite3 *sq, const char *sql, int64_t *out, int n) {
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(sq, sql, -1, &st, NULL);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        int rc = conn_fail(db, sq, "cannot inspect the database");
        sqlite3_finalize(st);
        return rc;
    }
    for (int i = 0; i < n; ++i) out[i] = sqlite3_column_int64(st, i);
    sqlite3_finalize(st);
    return LNTUNE_OK;
}

/*
 * What a connection sees: *version receives the schema version to migrate from (0: a blank
 * file), or the file is refused. Run again inside the migration's transaction, since another
 * process may have created or upgraded the file in between.
 */
static int classify(lntune_db *db, sqlite3 *sq, int *version) {
    /* One statement, so one read transaction: three would each see the file as it was then,
     * and another process's migration committed in between looks like a foreign schema. */
    int64_t v[3];
    int rc = query_ints(db, sq,
                        "SELECT (SELECT application_id FROM pragma_application_id), "
                        "(SELECT user_version FROM pragma_user_version), "
                        "(SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' "
                        "ESCAPE '\\')",
                        v, 3);
    if (rc) return rc;
    const int64_t app = v[0], ver = v[1], objects = v[2];
    if (app != LNTUNE_DB_APPLICATION_ID && (app != 0 || ver != 0 || objects > 0))
        return lntune_dbi_fail(db, refuse(db),
                               "%s is the SQLite database of another application (application_id "
                               "0x%08llx, user_version %lld, %lld schema objects); refusing "
                               "to touch it",
                               db->path, (unsigned long long)app, (long long)ver,
                               (long long)objects);
    if (ver > lntune_db_schema_version())
        return lntune_dbi_fail(db, refuse(db),
                               "%s has schema version %lld, newer than this build's %d; use a "
                               "newer lntune with it",
                               db->path, (long long)ver, lntune_db_schema_version());
    if (app == LNTUNE_DB_APPLICATION_ID && ver <= 0)
        return lntune_dbi_fail(db, refuse(db),
                               "%s is corrupt: lntune's application_id without a schema version",
                               db->path);
    *version = (int)ver;
    return LNTUNE_OK;
}

/* quick_check answers one row "ok", or rows of problems (or fails outright on a bad schema). */
static int quick_check(lntune_db *db, sqlite3 *sq) {
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(sq, "PRAGMA quick_check", -1, &st, NULL);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        /* Busy, locked or unreadable says nothing about the file: only damage is a verdict. */
        int rc = conn_fail(db, sq, "cannot check the database");
        if (db->refused)
            lntune_dbi_fail(db, LNTUNE_EDB, "%s is corrupt: %s", db->path, sqlite3_errmsg(sq));
        sqlite3_finalize(st);
        return rc;
    }
    const char *first = (const char *)sqlite3_column_text(st, 0);
    if (first && strcmp(first, "ok") == 0 && sqlite3_step(st) == SQLITE_DONE) {
        sqlite3_finalize(st);
        return LNTUNE_OK;
    }
    lntune_dbi_fail(db, refuse(db), "%s is corrupt: quick_check says: %s", db->path,
                    first ? first : sqlite3_errmsg(sq));
    sqlite3_finalize(st);
    return LNTUNE_EDB;
}

/*
 * The second look, on a read-only connection, which never writes the main file: not even the
 * checkpoint a read-write connection runs on close, which would fold someone's leftover WAL in.
 */
static int exists(const char *path, const char *suffix) {
    char buf[4200];
    struct stat st;
    snprintf(buf, sizeof buf, "%s%s", path, suffix);
    return stat(buf, &st) == 0;
}

/*
 * A read-only connection to a WAL file creates its -wal and -shm; once the file is refused,
 * removes them again if this open made them and no one wrote to the WAL, so that a refused
 * file is left exactly as it was found.
 */
static void remove_companions(lntune_db *db, int had_wal, int had_shm) {
    char wal[4200], shm[4200];
    struct stat st;
    if (had_wal || had_shm || !db->refused) return;
    snprintf(wal, sizeof wal, "%s-wal", db->path);
    snprintf(shm, sizeof shm, "%s-shm", db->path);
    if (stat(wal, &st) == 0 && st.st_size != 0) return;
    unlink(wal);
    unlink(shm);
}

/* On a read-only file system no one can be writing the file: SQLite may read it as immutable. */
static int on_read_only_fs(const char *path) {
    struct statvfs vfs;
    return statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
}

/* "file:PATH?immutable=1", PATH percent-encoded where a URI needs it. */
static char *immutable_uri(const char *path) {
    static const char tail[] = "?immutable=1";
    char *uri = malloc(5 + 3 * strlen(path) + sizeof tail), *o = uri;
    if (!uri) return NULL;
    o += sprintf(o, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; ++p)
        o += (*p == '?' || *p == '#' || *p == '%' || *p < 0x20) ? sprintf(o, "%%%02X", *p)
                                                                : sprintf(o, "%c", *p);
    memcpy(o, tail, sizeof tail);
    return uri;
}

static int probe(lntune_db *db, sqlite3 **out, int *version) {
    sqlite3 *sq = NULL;
    int rc = LNTUNE_OK;
    const int had_wal = exists(db->path, "-wal"), had_shm = exists(db->path, "-shm");
    /* A WAL file on read-only media cannot get its -shm: read it as immutable instead. */
    char *uri = on_read_only_fs(db->path) ? immutable_uri(db->path) : NULL;
    int open_rc = sqlite3_open_v2(uri ? uri : db->path, &sq,
                                  SQLITE_OPEN_READONLY | (uri ? SQLITE_OPEN_URI : 0), NULL);
    free(uri);
    if (open_rc != SQLITE_OK)
        rc = conn_fail(db, sq, "cannot open the database");
    else if (sqlite3_busy_timeout(sq, LNTUNE_DB_BUSY_MS) != SQLITE_OK)
        rc = conn_fail(db, sq, "cannot set the busy timeout");
    if (!rc) rc = quick_check(db, sq);
    if (!rc) rc = classify(db, sq, version);
    if (rc) {
        sqlite3_close_v2(sq);
        remove_companions(db, had_wal, had_shm);
        return rc;
    }
    *out = sq;
    return LNTUNE_OK;
}

/*
 * LNTUNE_DB_FORCE: a refused file is renamed to <path>.bak (with its WAL) rather than deleted,
 * so that forcing never destroys what might be someone's data. Only a verdict on the file
 * (db->refused) moves it: a healthy database that is merely locked or unreadable stays.
 */
static int move_aside(lntune_db *db) {
    static const char *const suffix[] = {"-wal", "-journal", "-shm", ""};
    char reason[sizeof db->errmsg];
    size_t len = strlen(db->path) + 16;
    char *from = malloc(len), *to = malloc(len);
    int rc = LNTUNE_OK;
    memcpy(reason, db->errmsg, sizeof reason);
    if (!from || !to) rc = lntune_dbi_fail(db, LNTUNE_ENOMEM, "out of memory");
    /* Stale companions of an older .bak would be applied to the new one: clear them first. */
    for (int i = 0; !rc && i < 3; ++i) {
        snprintf(to, len, "%s.bak%s", db->path, suffix[i]);
        if (unlink(to) != 0 && errno != ENOENT)
            rc = lntune_dbi_fail(db, LNTUNE_EIO, "cannot remove %s: %s", to, strerror(errno));
    }
    for (int i = 0; !rc && i < 4; ++i) {
        snprintf(from, len, "%s%s", db->path, suffix[i]);
        snprintf(to, len, "%s.bak%s", db->path, suffix[i]);
        if (rename(from, to) != 0 && errno != ENOENT)
            rc = lntune_dbi_fail(db, LNTUNE_EIO, "cannot move %s to %s (%s) after: %s", from, to,
                                 strerror(errno), reason);
    }
    free(from);
    free(to);
    return rc;
}

static int exec_sql(lntune_db *db, const char *sql, const char *what) {
    if (sqlite3_exec(db->sq, sql, NULL, NULL, NULL) != SQLITE_OK)
        return lntune_dbi_sqlfail(db, what);
    return LNTUNE_OK;
}

/* sqlite3_value_text, or NULL for an SQL NULL. */
static const char *text_or_null(sqlite3_value *v) {
    return sqlite3_value_type(v) == SQLITE_NULL ? NULL : (const char *)sqlite3_value_text(v);
}

/* lntune_code_sha256(source, shared, object, ptx): lntune_artifact_code_digest, for schema.sql's
 * migrations. */
static void sql_code_sha256(sqlite3_context *c, int argc, sqlite3_value **argv) {
    (void)argc;
    const void *part[2];
    size_t len[2];
    for (int i = 0; i < 2; ++i) {
        sqlite3_value *v = argv[1 + i];
        part[i] = sqlite3_value_type(v) == SQLITE_NULL ? NULL : sqlite3_value_blob(v);
        len[i] = part[i] ? (size_t)sqlite3_value_bytes(v) : 0;
    }
    char hex[LNTUNE_SHA256_HEX];
    lntune_artifact_code_digest(text_or_null(argv[0]), part[0], len[0], part[1], len[1],
                                text_or_null(argv[3]), hex);
    sqlite3_result_text(c, hex, -1, SQLITE_TRANSIENT);
}

/* Every schema.sql section after the file's version, and the version itself, or none of them. */
static int migrate(lntune_db *db) {
    schema_step steps[MAX_SCHEMA_STEPS];
    int n = schema_steps(steps, MAX_SCHEMA_STEPS), version = 0;
    char pragma[64];
    int rc = exec_sql(db, "BEGIN IMMEDIATE", "cannot lock the database to migrate it");
    if (rc) return rc;
    rc = classify(db, db->sq, &version);
    for (int i = 0; !rc && i < n; ++i) {
        if (steps[i].version <= version) continue;
        char *sql = strndup(steps[i].sql, steps[i].len);
        if (!sql) {
            rc = lntune_dbi_fail(db, LNTUNE_ENOMEM, "out of memory");
            break;
        }
        snprintf(pragma, sizeof pragma, "schema version %d", steps[i].version);
        rc = exec_sql(db, sql, pragma);
        free(sql);
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", steps[i].version);
        if (!rc) rc = exec_sql(db, pragma, "cannot set the schema version");
    }
    if (!rc && version == 0) {
        snprintf(pragma, sizeof pragma, "PRAGMA application_id = %d", LNTUNE_DB_APPLICATION_ID);
        rc = exec_sql(db, pragma, "cannot set the application id");
    }
    if (!rc) rc = exec_sql(db, "COMMIT", "cannot commit the migration");
    if (rc) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL); /* keeps the first message */
    return rc;
}

static int set_wal(lntune_db *db) {
    sqlite3_stmt *st = NULL;
    int rc = LNTUNE_OK;
    if (sqlite3_prepare_v2(db->sq, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        rc = lntune_dbi_sqlfail(db, "cannot switch to WAL mode");
    } else {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        if (!mode || strcasecmp(mode, "wal") != 0)
            rc = lntune_dbi_fail(db, LNTUNE_EDB, "%s: journal mode stays '%s', not WAL", db->path,
                                 mode ? mode : "?");
    }
    sqlite3_finalize(st);
    return rc;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Runs step again while it fails busy or locked, for up to LNTUNE_DB_BUSY_MS. The busy timeout
 * alone is not enough: SQLite skips the busy handler when a connection must upgrade a lock it
 * already holds (deadlock avoidance), as PRAGMA journal_mode = WAL does on a new file, so
 * processes creating one file together would fail at once. A random 1-8 ms pause keeps them out
 * of lockstep.
 */
static int retry_busy(lntune_db *db, int (*step)(lntune_db *)) {
    const int64_t deadline = now_ms() + LNTUNE_DB_BUSY_MS;
    for (;;) {
        db->busy = 0;
        int rc = step(db);
        if (!rc || !db->busy || now_ms() >= deadline) return rc;
        unsigned r;
        sqlite3_randomness(sizeof r, &r);
        sqlite3_sleep(1 + (int)(r % 8));
    }
}

static int open_readonly(lntune_db *db) {
    int state, version = 0;
    sqlite3 *sq = NULL;
    int rc = inspect_file(db, &state, NULL);
    if (rc) return rc;
    if (state == FILE_MISSING)
        return lntune_dbi_fail(db, LNTUNE_ENOTFOUND,
                               "%s does not exist (a read-only open never creates it)", db->path);
    if (state == FILE_EMPTY)
        return lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "%s is empty: nothing was ever tuned into it",
                               db->path);
    rc = probe(db, &sq, &version);
    if (rc) return rc;
    if (version == 0) {
        sqlite3_close_v2(sq);
        return lntune_dbi_fail(db, LNTUNE_ENOTFOUND, "%s has no lntune tables yet", db->path);
    }
    if (version < lntune_db_schema_version()) {
        sqlite3_close_v2(sq);
        return lntune_dbi_fail(db, LNTUNE_EDB,
                               "%s has schema version %d, older than this build's %d; open it "
                               "read-write once (any lntune command that writes) to migrate it",
                               db->path, version, lntune_db_schema_version());
    }
    db->sq = sq;
    return LNTUNE_OK;
}

/* Tuning writes: a file or directory it cannot write is refused up front, with the reason. */
static int check_writable(lntune_db *db, int state) {
    char *dir = strdup(db->path);
    if (!dir) return lntune_dbi_fail(db, LNTUNE_ENOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0'; /* "/x.db": the root */
    else if (slash)
        *slash = '\0';
    const char *d = slash ? dir : ".";
    int rc = LNTUNE_OK;
    if (state != FILE_MISSING && on_read_only_fs(db->path))
        rc = lntune_dbi_fail(db, LNTUNE_EDB,
                             "%s is on a read-only file system; tuning writes to it (lntune show "
                             "reads it; tune into a copy elsewhere with --db)",
                             db->path);
    else if (state != FILE_MISSING && access(db->path, W_OK) != 0)
        rc = lntune_dbi_fail(db, LNTUNE_EDB,
                             "%s is not writable (%s); tuning writes to it (lntune show reads it; "
                             "tune into a copy elsewhere with --db)",
                             db->path, strerror(errno));
    else if (state != FILE_MISSING && access(d, W_OK) != 0)
        rc = lntune_dbi_fail(db, LNTUNE_EDB,
                             "the directory %s is not writable (%s): SQLite keeps %s-wal and "
                             "-shm next to the database",
                             d, strerror(errno), db->path);
    free(dir);
    return rc;
}

/*
 * Creating or migrating a file takes turns among lntune processes: each holds an flock(2) on
 * the database's directory while it switches the file to WAL and runs the migration, so that
 * processes that open one new file at once (a fleet's first tune, a test starting eight) queue
 * there instead of failing each other's lock upgrades and sleeping in SQLite's busy handler,
 * whose waits grow to 100 ms. The lock is advisory and only for this phase: where flock fails
 * (a file system without it) or is held past the deadline (a process that forked while holding
 * it), the open goes on without it, and retry_busy still serves. Returns the directory's file
 * descriptor, or -1 with no lock held.
 */
static int lock_creation(const lntune_db *db, int64_t deadline) {
    char *dir = strdup(db->path);
    if (!dir) return -1;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    const int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if ((errno != EWOULDBLOCK && errno != EINTR) || now_ms() >= deadline) break;
        sqlite3_sleep(1);
    }
    close(fd);
    return -1;
}

static void unlock_creation(int fd) {
    if (fd >= 0) close(fd); /* closing the descriptor releases its flock */
}

static int open_readwrite(lntune_db *db) {
    int state = FILE_MISSING, version = 0, wal = 0;
    sqlite3 *sq = NULL;
    int rc = inspect_file(db, &state, &wal);
    if (!rc) rc = check_writable(db, state);
    if (!rc && state == FILE_PRESENT) {
        rc = probe(db, &sq, &version);
        sqlite3_close_v2(sq); /* NULL-safe; the read-write connection below replaces it */
    }
    if (rc == LNTUNE_EDB && db->refused && (db->flags & LNTUNE_DB_FORCE)) {
        rc = move_aside(db);
        state = FILE_MISSING;
    }
    if (!rc && state == FILE_MISSING) rc = make_parent_dirs(db);
    if (rc) return rc;
    if (state == FILE_MISSING) {
        /* Created 0600 whatever the umask (SQLite gives its -wal and -shm files the same mode):
         * liblntune loads code only from a database nobody else may write (db_trust.c). */
        const int fd = open(db->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
    }

    if (sqlite3_open_v2(db->path, &db->sq, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK)
        rc = lntune_dbi_sqlfail(db, "cannot open the database");
    else if (sqlite3_busy_timeout(db->sq, LNTUNE_DB_BUSY_MS) != SQLITE_OK)
        rc = lntune_dbi_sqlfail(db, "cannot set the busy timeout");
    if (!rc) rc = exec_sql(db, "PRAGMA foreign_keys = ON", "cannot enable foreign keys");
    if (!rc && sqlite3_create_function_v2(db->sq, "lntune_code_sha256", 4,
                                          SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_code_sha256,
                                          NULL, NULL, NULL) != SQLITE_OK)
        rc = lntune_dbi_sqlfail(db, "cannot register lntune_code_sha256");
    /* Every open after the first finds the file in WAL mode (its header) at this version (probe's
     * read through SQLite): no lock at all. */
    const int ready = !rc && state == FILE_PRESENT && wal && version == lntune_db_schema_version();
    if (!rc && !ready) {
        const int lock = lock_creation(db, now_ms() + LNTUNE_DB_BUSY_MS);
        rc = retry_busy(db, set_wal);
        if (!rc) rc = retry_busy(db, migrate);
        unlock_creation(lock);
    }
    if (rc) {
        sqlite3_close_v2(db->sq);
        db->sq = NULL;
    }
    return rc;
}

int lntune_db_open(const char *path, int flags, lntune_db **out) {
    if (!out) return LNTUNE_EINVAL;
    /* Like sqlite3_open: even a failed open yields a handle, which carries the message. */
    lntune_db *db = *out = calloc(1, sizeof *db);
    if (!db) return LNTUNE_ENOMEM;
    snprintf(db->errmsg, sizeof db->errmsg, "not an error");
    db->flags = flags;
    if (flags & ~(LNTUNE_DB_READONLY | LNTUNE_DB_FORCE))
        return lntune_dbi_fail(db, LNTUNE_EINVAL, "unknown lntune_db_open flags 0x%x", flags);
    if ((flags & LNTUNE_DB_READONLY) && (flags & LNTUNE_DB_FORCE))
        return lntune_dbi_fail(
            db, LNTUNE_EINVAL,
            "LNTUNE_DB_FORCE rewrites a database, LNTUNE_DB_READONLY never does");
    if (lntune_db_schema_version() < 1)
        return lntune_dbi_fail(db, LNTUNE_ERROR,
                               "the built-in schema.sql lacks '-- @version 1', 2, ... sections");
    if (path && !path[0]) return lntune_dbi_fail(db, LNTUNE_EINVAL, "empty database path");
    if (!path) {
        char buf[4096];
        int rc = lntune_db_default_path(buf, sizeof buf);
        if (rc)
            return lntune_dbi_fail(db, rc,
                                   rc == LNTUNE_ENOTFOUND
                                       ? "no database path: set LNTUNE_DB, XDG_CACHE_HOME or HOME"
                                       : "the default database path is too long");
        db->path = strdup(buf);
    } else {
        db->path = strdup(path);
    }
    if (!db->path) return lntune_dbi_fail(db, LNTUNE_ENOMEM, "out of memory");
    return (flags & LNTUNE_DB_READONLY) ? open_readonly(db) : open_readwrite(db);
}

void lntune_db_close(lntune_db *db) {
    if (!db) return;
    /* close_v2 cannot fail once our statements are finalized, and every function finalizes. */
    sqlite3_close_v2(db->sq);
    free(db->path);
    free(db);
}

const char *lntune_db_errmsg(const lntune_db *db) {
    return db ? db->errmsg : "out of memory (no database handle)";
}

const char *lntune_db_path(const lntune_db *db) {
    return db && db->path ? db->path : "";
}
