/*
 * test_tuning_db.c - the tuning database's specification: every record type round-trips, the
 * schema is created and migrated from nothing, a read-only open never writes, and a file that is
 * not ours (text, another application's SQLite, a newer schema, a corrupt copy) is refused and
 * left byte-for-byte as it was. Each case prints its name; the exit status counts failures.
 */
#define _GNU_SOURCE
#include "best_record.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "sha256.h"
#include "tuning_db.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;
static char tmpdir[256];

/* Take a database back to before schema version 8, 7, 6 and 5 (a downgrade test's first
 * statements). */
#define DROP_REACH "ALTER TABLE best DROP COLUMN reach_lo; ALTER TABLE best DROP COLUMN reach_hi; "
#define DROP_SPREAD                                                                                \
    DROP_REACH                                                                                     \
    "ALTER TABLE best DROP COLUMN ratio_lo; ALTER TABLE best DROP COLUMN ratio_hi; "               \
    "ALTER TABLE best DROP COLUMN under_load; "
#define DROP_ANY_ALIGNMENT DROP_SPREAD "ALTER TABLE best DROP COLUMN any_alignment; "
#define DROP_TWINS                                                                                 \
    DROP_ANY_ALIGNMENT                                                                             \
    "ALTER TABLE best DROP COLUMN twin_variant; ALTER TABLE best DROP COLUMN twin_artifact_key; "  \
    "ALTER TABLE best DROP COLUMN twin_median_ns; "

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("    FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);                           \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

/* Checks a return code; on a mismatch prints the handle's message too. */
#define CHECK_RC(db, expr, want)                                                                   \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != (want)) {                                                                       \
            printf("    FAILED %s:%d: %s = %d (%s), want %d (%s)\n      message: %s\n", __FILE__,  \
                   __LINE__, #expr, rc_, lntune_errstr(rc_), (want), lntune_errstr(want),          \
                   lntune_db_errmsg(db));                                                          \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

static int streq(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}
#define CHECK_STR(a, b) CHECK(streq((a), (b)))

static const char *tpath(char *buf, const char *name) {
    snprintf(buf, 512, "%s/%s", tmpdir, name);
    return buf;
}

/* ---- file helpers ---- */

typedef struct {
    int exists;
    char *bytes;
    size_t len;
    struct timespec mtime;
} snapshot;

static snapshot snap(const char *path) {
    snapshot s = {0};
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &st) != 0) {
        if (f) fclose(f);
        return s;
    }
    s.exists = 1;
    s.len = (size_t)st.st_size;
    s.mtime = st.st_mtim;
    s.bytes = malloc(s.len + 1);
    if (!s.bytes || fread(s.bytes, 1, s.len, f) != s.len) s.exists = 0;
    fclose(f);
    return s;
}

static int same_file(snapshot a, snapshot b) {
    return a.exists && b.exists && a.len == b.len && memcmp(a.bytes, b.bytes, a.len) == 0 &&
           a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
}

static void free_snap(snapshot *s) {
    free(s->bytes);
    s->bytes = NULL;
}

/* An mtime far in the past, so that any write, however soon, would move it. */
static void age(const char *path) {
    struct timespec t[2] = {{978307200, 0}, {978307200, 0}};
    utimensat(AT_FDCWD, path, t, 0);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) printf("    cannot write %s\n", path);
    if (f) fclose(f);
}

/* Runs SQL on a plain SQLite connection: how another program would make or read a file. */
static void raw_exec(const char *path, const char *sql) {
    sqlite3 *sq = NULL;
    char *err = NULL;
    if (sqlite3_open(path, &sq) != SQLITE_OK ||
        sqlite3_exec(sq, sql, NULL, NULL, &err) != SQLITE_OK)
        printf("    raw_exec(%s): %s\n", path, err ? err : sqlite3_errmsg(sq));
    sqlite3_free(err);
    sqlite3_close(sq);
}

static long long raw_int(const char *path, const char *sql) {
    sqlite3 *sq = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -12345;
    if (sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(sq, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(sq);
    return v;
}

/* ---- fixtures ---- */

static lntune_cpu_info test_cpu(const char *fingerprint) {
    lntune_cpu_info c;
    memset(&c, 0, sizeof c);
    snprintf(c.arch, sizeof c.arch, "x86_64");
    snprintf(c.model, sizeof c.model, "Test CPU %s @ 1.00GHz", fingerprint);
    c.family = 6;
    c.model_id = 85;
    c.stepping = 7;
    c.isa = LNTUNE_ISA_SSE | LNTUNE_ISA_SSE2 | LNTUNE_ISA_AVX2;
    c.cores = 2;
    c.l1d_bytes = 32768;
    c.l2_bytes = 1 << 20;
    c.l3_bytes = 32ll << 20;
    snprintf(c.fingerprint, sizeof c.fingerprint, "%s", fingerprint);
    return c;
}

static lntune_db_key test_key(int64_t hw, const char *op, int64_t H, int64_t rows) {
    lntune_db_key k = {hw, "cpu", op, "f32", H, rows, 1};
    return k;
}

static lntune_db *open_new(const char *name, int64_t *hw) {
    char p[512];
    lntune_db *db = NULL;
    tpath(p, name);
    unlink(p);
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    lntune_cpu_info cpu = test_cpu("0123456789abcdef");
    if (hw) CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc 1.0", hw), LNTUNE_OK);
    return db;
}

static unsigned char shared_blob[3000];
static const unsigned char object_blob[] = {0x7f, 'E', 'L', 'F', 0, 0, 1, 0, 'a', 0, 0, 'c'};

/* A database holding one of each record, closed: the raw material of several cases. */
static void make_full_db(const char *path) {
    lntune_db *db = NULL;
    int64_t hw = 0;
    unlink(path);
    CHECK_RC(db, lntune_db_open(path, 0, &db), LNTUNE_OK);
    lntune_cpu_info cpu = test_cpu("00000000000000aa");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    lntune_db_key k = test_key(hw, "layernorm", 4096, 512);
    lntune_measurement m = {"vec=8", "h1", LNTUNE_STATUS_OK, NULL, "art", 1, 2, 3, 4, 5, 6, 7};
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &m), LNTUNE_OK);
    lntune_artifact a = {
        "art",       "int f(void);",     "cc", "-O2", "f", object_blob, sizeof object_blob,
        shared_blob, sizeof shared_blob, NULL, NULL};
    CHECK_RC(db, lntune_db_put_artifact(db, &a), LNTUNE_OK);
    lntune_best b = test_best("vec=8", "art", 2, 512, 2, 5, 6, 7, 10);
    CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK);
    /* Enough pages that a truncated copy loses b-tree pages, not only free space. */
    for (int i = 0; i < 40; ++i) {
        char variant[256];
        snprintf(variant, sizeof variant, "vec=%d,pad=%0200d", i, i);
        m.variant = variant;
        CHECK_RC(db, lntune_db_put_measurement(db, &k, &m), LNTUNE_OK);
    }
    lntune_db_close(db);
}

/* ---- callbacks ---- */

typedef struct {
    int n, stop_after;
    char items[16][128];
    lntune_measurement m[8];
    char strs[8][4][64]; /* copies of the measurement strings, valid past the callback */
} collect;

static int collect_hw(void *ud, const lntune_db_hardware *hw) {
    collect *c = ud;
    if (c->n < 16)
        snprintf(
            c->items[c->n], sizeof c->items[0], "%lld|%s|%s|%s|%s|%s|%d|%d|%d|%d|%lld|%lld|%lld",
            (long long)hw->id, hw->fingerprint, hw->arch, hw->model, hw->features,
            hw->compiler ? hw->compiler : "(null)", hw->family, hw->model_id, hw->stepping,
            hw->cores, (long long)hw->l1d_bytes, (long long)hw->l2_bytes, (long long)hw->l3_bytes);
    return ++c->n == c->stop_after;
}

static int collect_m(void *ud, const lntune_measurement *m) {
    collect *c = ud;
    if (c->n < 8) {
        c->m[c->n] = *m;
        snprintf(c->strs[c->n][0], 64, "%s", m->variant);
        snprintf(c->strs[c->n][1], 64, "%s", m->template_hash);
        snprintf(c->strs[c->n][2], 64, "%s", m->status);
        snprintf(c->strs[c->n][3], 64, "%s", m->message ? m->message : "(null)");
    }
    return ++c->n == c->stop_after;
}

static int collect_best(void *ud, const lntune_db_key *k, const lntune_best *b) {
    collect *c = ud;
    if (c->n < 16)
        snprintf(c->items[c->n], sizeof c->items[0], "%s/%s/%s/%lld/a%d/hw%lld/r%lld/%s", k->target,
                 k->op, k->dtype, (long long)k->H, k->affine, (long long)k->hardware_id,
                 (long long)k->rows, b->variant);
    return ++c->n == c->stop_after;
}

typedef struct {
    int called;
    lntune_best b; /* its strings point into the buffers below (or are NULL) */
    char variant[64], artifact_key[64], twin_variant[64], twin_artifact_key[64], under_load[64];
} one_best;

/* s copied into buf, or NULL when s is. */
static const char *keep(char *buf, size_t size, const char *s) {
    if (!s) return NULL;
    snprintf(buf, size, "%s", s);
    return buf;
}

static int get_one_best(void *ud, const lntune_best *b) {
    one_best *o = ud;
    o->called++;
    o->b = *b;
    snprintf(o->variant, sizeof o->variant, "%s", b->variant);
    o->b.variant = o->variant;
    o->b.artifact_key = keep(o->artifact_key, sizeof o->artifact_key, b->artifact_key);
    o->b.twin_variant = keep(o->twin_variant, sizeof o->twin_variant, b->twin_variant);
    o->b.twin_artifact_key =
        keep(o->twin_artifact_key, sizeof o->twin_artifact_key, b->twin_artifact_key);
    o->b.under_load = keep(o->under_load, sizeof o->under_load, b->under_load);
    return 1; /* get_nearest_best: takes the nearest */
}

/* Closes db, takes its file NAME back to an older schema (sql drops what came since and sets
 * the version), opens it again, which migrates it to this version, and reads key's best into
 * *o; returns the new handle. */
static lntune_db *reopen_migrated(lntune_db *db, const char *name, const char *sql,
                                  const lntune_db_key *key, one_best *o) {
    char p[512];
    lntune_db_close(db);
    raw_exec(tpath(p, name), sql);
    db = NULL;
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK(raw_int(p, "PRAGMA user_version") == lntune_db_schema_version());
    memset(o, 0, sizeof *o);
    CHECK_RC(db, lntune_db_get_best(db, key, get_one_best, o), LNTUNE_OK);
    return db;
}

typedef struct {
    int called;
    char key[64], source[64], compiler[64], flags[64], symbol[64];
    int object_null, shared_null;
    size_t object_len, shared_len;
    unsigned char object[64], shared[4096];
} one_artifact;

static int get_one_artifact(void *ud, const lntune_artifact *a) {
    one_artifact *o = ud;
    o->called++;
    snprintf(o->key, 64, "%s", a->key);
    snprintf(o->source, 64, "%s", a->source);
    snprintf(o->compiler, 64, "%s", a->compiler ? a->compiler : "(null)");
    snprintf(o->flags, 64, "%s", a->flags ? a->flags : "(null)");
    snprintf(o->symbol, 64, "%s", a->symbol);
    o->object_null = a->object == NULL;
    o->shared_null = a->shared == NULL;
    o->object_len = a->object_len;
    o->shared_len = a->shared_len;
    if (a->object && a->object_len <= sizeof o->object) memcpy(o->object, a->object, a->object_len);
    if (a->shared && a->shared_len <= sizeof o->shared) memcpy(o->shared, a->shared, a->shared_len);
    return 0;
}

/* ---- cases ---- */

static void schema_version_is_the_last_section(void) {
    CHECK(lntune_db_schema_version() == 8);
}

static void rows_bucket_boundaries(void) {
    static const struct {
        int64_t rows;
        int bucket;
    } t[] = {{-5, -1},  {0, -1},   {1, 0},     {2, 1},     {8, 1},
             {9, 2},    {64, 2},   {65, 3},    {512, 3},   {513, 4},
             {4096, 4}, {4097, 5}, {32768, 5}, {32769, 6}, {INT64_MAX, 6}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; ++i) {
        int got = lntune_rows_bucket(t[i].rows);
        if (got != t[i].bucket) {
            printf("    FAILED rows_bucket(%lld) = %d, want %d\n", (long long)t[i].rows, got,
                   t[i].bucket);
            ++failures;
        }
    }
}

static void default_path_from_environment(void) {
    char buf[512], small[8];
    setenv("LNTUNE_DB", "/x/y/my.db", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    CHECK_RC(NULL, lntune_db_default_path(buf, sizeof buf), LNTUNE_OK);
    CHECK_STR(buf, "/x/y/my.db");
    setenv("LNTUNE_DB", "", 1); /* empty means unset */
    CHECK_RC(NULL, lntune_db_default_path(buf, sizeof buf), LNTUNE_OK);
    CHECK_STR(buf, "/xdg/lntune/tune.db");
    unsetenv("LNTUNE_DB");
    setenv("XDG_CACHE_HOME", "relative/cache", 1); /* the XDG spec says: ignore it */
    CHECK_RC(NULL, lntune_db_default_path(buf, sizeof buf), LNTUNE_OK);
    CHECK_STR(buf, "/home/u/.cache/lntune/tune.db");
    unsetenv("XDG_CACHE_HOME");
    CHECK_RC(NULL, lntune_db_default_path(buf, sizeof buf), LNTUNE_OK);
    CHECK_STR(buf, "/home/u/.cache/lntune/tune.db");
    CHECK_RC(NULL, lntune_db_default_path(small, sizeof small), LNTUNE_EINVAL);
    CHECK_STR(small, "");
    unsetenv("HOME");
    CHECK_RC(NULL, lntune_db_default_path(buf, sizeof buf), LNTUNE_ENOTFOUND);
    CHECK_RC(NULL, lntune_db_default_path(NULL, 10), LNTUNE_EINVAL);

    /* And lntune_db_open(NULL) uses it, creating the directories on the way. */
    lntune_db *db = NULL;
    setenv("XDG_CACHE_HOME", tpath(buf, "xdg"), 1);
    CHECK_RC(db, lntune_db_open(NULL, 0, &db), LNTUNE_OK);
    strcat(buf, "/lntune/tune.db");
    CHECK_STR(lntune_db_path(db), buf);
    CHECK(exists(buf));
    lntune_db_close(db);
    unsetenv("XDG_CACHE_HOME");
}

static void create_makes_directories_schema_and_wal(void) {
    char p[512];
    lntune_db *db = NULL;
    tpath(p, "new/nested/dirs/tune.db");
    CHECK(!exists(p));
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK_STR(lntune_db_path(db), p);
    CHECK(exists(p));
    CHECK(raw_int(p, "PRAGMA application_id") == 0x4C4E5455);
    CHECK(raw_int(p, "PRAGMA user_version") == lntune_db_schema_version());
    CHECK(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                     "('hardware', 'measurements', 'artifacts', 'best')") == 4);
    lntune_db_close(db);
    /* WAL is a persistent mode: the header says so (read and write versions 2). */
    snapshot s = snap(p);
    CHECK(s.exists && s.len >= 20 && s.bytes[18] == 2 && s.bytes[19] == 2);
    free_snap(&s);
}

static void hardware_round_trip(void) {
    int64_t id1 = 0, id1b = 0, id2 = 0, found = 0;
    lntune_db *db = open_new("hw.db", NULL);
    lntune_cpu_info c1 = test_cpu("0123456789abcdef"), c2 = test_cpu("fedcba9876543210");
    CHECK_RC(db, lntune_db_put_hardware(db, &c1, "gcc 12.2", &id1), LNTUNE_OK);
    CHECK(id1 > 0);
    CHECK_RC(db, lntune_db_put_hardware(db, &c1, "gcc 12.2", &id1b), LNTUNE_OK);
    CHECK(id1b == id1); /* finds, does not duplicate */
    CHECK_RC(db, lntune_db_put_hardware(db, &c2, NULL, &id2), LNTUNE_OK);
    CHECK(id2 > 0 && id2 != id1);
    CHECK_RC(db, lntune_db_find_hardware(db, "fedcba9876543210", &found), LNTUNE_OK);
    CHECK(found == id2);
    CHECK_RC(db, lntune_db_find_hardware(db, "ffffffffffffffff", &found), LNTUNE_ENOTFOUND);
    CHECK(strstr(lntune_db_errmsg(db), "ffffffffffffffff") != NULL);

    collect c = {0};
    char want[128];
    CHECK_RC(db, lntune_db_each_hardware(db, collect_hw, &c), LNTUNE_OK);
    CHECK(c.n == 2);
    snprintf(want, sizeof want,
             "%lld|0123456789abcdef|x86_64|Test CPU 0123456789abcdef @ 1.00GHz|sse,sse2,avx2|"
             "gcc 12.2|6|85|7|2|32768|1048576|33554432",
             (long long)id1);
    CHECK_STR(c.items[0], want);
    CHECK(strstr(c.items[1], "|(null)|") != NULL); /* a NULL compiler stays NULL */

    /* This machine's own fingerprint is accepted too. */
    lntune_cpu_info real;
    int64_t id3 = 0;
    lntune_cpu_info_get(&real);
    CHECK_RC(db, lntune_db_put_hardware(db, &real, "cc", &id3), LNTUNE_OK);
    CHECK_RC(db, lntune_db_find_hardware(db, real.fingerprint, &found), LNTUNE_OK);
    CHECK(found == id3);
    lntune_cpu_info none = test_cpu("");
    CHECK_RC(db, lntune_db_put_hardware(db, &none, "cc", &id3), LNTUNE_EINVAL);
    lntune_db_close(db);
}

static void measurement_upsert_replaces(void) {
    int64_t hw = 0;
    lntune_db *db = open_new("meas.db", &hw);
    lntune_db_key k = test_key(hw, "layernorm", 4096, 512);
    lntune_measurement m1 = {"vec=8,unroll=2",
                             "h1",
                             LNTUNE_STATUS_OK,
                             NULL,
                             "art1",
                             12.5,
                             1000,
                             900,
                             1200,
                             30,
                             40,
                             1e-6};
    lntune_measurement m2 = m1, m3 = m1;
    m2.variant = "vec=16,unroll=1";
    m3.template_hash = "h2";
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &m1), LNTUNE_OK);
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &m2), LNTUNE_OK);
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &m3), LNTUNE_OK);
    lntune_measurement again = m1;
    again.status = LNTUNE_STATUS_WRONG;
    again.message = "max error 1e-2";
    again.artifact_key = NULL;
    again.compile_ms = 7.25;
    again.median_ns = NAN; /* never timed */
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &again), LNTUNE_OK);

    collect c = {0};
    CHECK_RC(db, lntune_db_each_measurement(db, &k, NULL, collect_m, &c), LNTUNE_OK);
    CHECK(c.n == 3); /* replaced, not appended */
    CHECK_STR(c.strs[0][0], "vec=16,unroll=1");
    CHECK_STR(c.strs[1][0], "vec=8,unroll=2");
    CHECK_STR(c.strs[1][1], "h1");
    CHECK_STR(c.strs[1][2], "wrong");
    CHECK_STR(c.strs[1][3], "max error 1e-2");
    CHECK(c.m[1].compile_ms == 7.25 && isnan(c.m[1].median_ns) && c.m[1].min_ns == 900);
    CHECK_STR(c.strs[2][1], "h2");
    CHECK_STR(c.strs[2][2], "ok");
    CHECK(c.m[2].median_ns == 1000 && c.m[2].max_ns == 1200 && c.m[2].gbps == 30 &&
          c.m[2].copy_gbps == 40 && c.m[2].max_error == 1e-6);

    memset(&c, 0, sizeof c);
    CHECK_RC(db, lntune_db_each_measurement(db, &k, "h2", collect_m, &c), LNTUNE_OK);
    CHECK(c.n == 1);
    memset(&c, 0, sizeof c);
    c.stop_after = 1; /* a non-zero return stops the walk, and is not an error */
    CHECK_RC(db, lntune_db_each_measurement(db, &k, NULL, collect_m, &c), LNTUNE_OK);
    CHECK(c.n == 1);
    memset(&c, 0, sizeof c);
    lntune_db_key other = k;
    other.rows = 513; /* measurements are per exact row count */
    CHECK_RC(db, lntune_db_each_measurement(db, &other, NULL, collect_m, &c), LNTUNE_OK);
    CHECK(c.n == 0);

    lntune_measurement bad = m1;
    bad.status = "fine";
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &bad), LNTUNE_EINVAL);
    lntune_db_key nohw = k;
    nohw.hardware_id = hw + 1000; /* the foreign key holds */
    CHECK_RC(db, lntune_db_put_measurement(db, &nohw, &m1), LNTUNE_EINVAL);
    CHECK(strstr(lntune_db_errmsg(db), "FOREIGN KEY") != NULL);
    lntune_db_key zero = k;
    zero.H = 0;
    CHECK_RC(db, lntune_db_put_measurement(db, &zero, &m1), LNTUNE_EINVAL);
    lntune_db_close(db);
}

static void artifact_blobs_round_trip(void) {
    lntune_db *db = open_new("art.db", NULL);
    lntune_artifact a = {"k1",
                         "float f(void) { return 0; }",
                         "clang 14",
                         "-O3 -march=native",
                         "lntune_ln_f32",
                         object_blob,
                         sizeof object_blob,
                         shared_blob,
                         sizeof shared_blob,
                         NULL,
                         NULL};
    CHECK_RC(db, lntune_db_put_artifact(db, &a), LNTUNE_OK);
    one_artifact *o = calloc(1, sizeof *o);
    CHECK_RC(db, lntune_db_get_artifact(db, "k1", get_one_artifact, o), LNTUNE_OK);
    CHECK(o->called == 1);
    CHECK_STR(o->key, "k1");
    CHECK_STR(o->source, a.source);
    CHECK_STR(o->compiler, "clang 14");
    CHECK_STR(o->flags, "-O3 -march=native");
    CHECK_STR(o->symbol, "lntune_ln_f32");
    CHECK(o->object_len == sizeof object_blob &&
          memcmp(o->object, object_blob, o->object_len) == 0);
    CHECK(o->shared_len == sizeof shared_blob &&
          memcmp(o->shared, shared_blob, o->shared_len) == 0);

    /* Replaced under the same key; an empty blob and an absent one stay distinct. */
    static const char empty[1] = "";
    lntune_artifact b = {"k1", "src2", NULL, NULL, "sym2", empty, 0, NULL, 0, NULL, NULL};
    CHECK_RC(db, lntune_db_put_artifact(db, &b), LNTUNE_OK);
    memset(o, 0, sizeof *o);
    CHECK_RC(db, lntune_db_get_artifact(db, "k1", get_one_artifact, o), LNTUNE_OK);
    CHECK_STR(o->symbol, "sym2");
    CHECK_STR(o->compiler, "(null)");
    CHECK(!o->object_null && o->object_len == 0);
    CHECK(o->shared_null && o->shared_len == 0);

    memset(o, 0, sizeof *o);
    CHECK_RC(db, lntune_db_get_artifact(db, "nope", get_one_artifact, o), LNTUNE_ENOTFOUND);
    CHECK(o->called == 0);
    lntune_artifact nosym = a;
    nosym.symbol = NULL;
    CHECK_RC(db, lntune_db_put_artifact(db, &nosym), LNTUNE_EINVAL);
    free(o);
    lntune_db_close(db);
}

static void best_per_bucket(void) {
    int64_t hw = 0;
    lntune_db *db = open_new("best.db", &hw);
    lntune_db_key k = test_key(hw, "rmsnorm", 4096, 4096); /* bucket 513-4096 */
    lntune_best a = test_best("A", "artA", 2, 4096, 100, 50, 60, 1e-7, 300);
    one_best o = {0};
    CHECK_RC(db, lntune_db_set_best(db, &k, &a), LNTUNE_OK);
    for (int64_t rows = 513; rows <= 4096; rows += 3583) {
        k.rows = rows;
        memset(&o, 0, sizeof o);
        CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
        CHECK(o.called == 1);
        CHECK_STR(o.b.variant, "A");
        CHECK(o.b.threads == 2 && o.b.tuned_rows == 4096 && o.b.median_ns == 100 &&
              o.b.gbps == 50 && o.b.copy_gbps == 60 && o.b.max_error == 1e-7 &&
              o.b.naive_ns == 300);
        CHECK_STR(o.b.artifact_key, "artA");
    }
    k.rows = 4097;
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_ENOTFOUND);
    k.rows = 512;
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_ENOTFOUND);

    lntune_best b = test_best("B", NULL, 1, 1000, 90, 55, 60, 0, NAN);
    k.rows = 1000; /* same bucket: replaces A */
    CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK);
    memset(&o, 0, sizeof o);
    k.rows = 600;
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
    CHECK_STR(o.variant, "B");
    CHECK(o.b.tuned_rows == 1000 && o.b.artifact_key == NULL && isnan(o.b.naive_ns));

    lntune_best c = test_best("C", NULL, 1, 1, 5, 1, 1, 0, 6);
    k.rows = 1;
    CHECK_RC(db, lntune_db_set_best(db, &k, &c), LNTUNE_OK);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
    CHECK_STR(o.variant, "C");
    k.rows = 2;
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_ENOTFOUND);
    k.rows = 1000;
    k.affine = 0; /* affine is part of the key */
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_ENOTFOUND);
    k.rows = 0;
    CHECK_RC(db, lntune_db_set_best(db, &k, &c), LNTUNE_EINVAL);
    lntune_db_close(db);
}

static void each_best_is_ordered(void) {
    int64_t hw1 = 0, hw2 = 0;
    lntune_db *db = open_new("order.db", &hw1);
    lntune_cpu_info c2 = test_cpu("2222222222222222");
    CHECK_RC(db, lntune_db_put_hardware(db, &c2, "cc", &hw2), LNTUNE_OK);
    struct {
        int64_t hw;
        const char *target, *op, *dtype;
        int64_t H, rows;
    } put[] = {
        {hw1, "cpu", "rmsnorm", "f32", 768, 64},     {hw1, "cuda", "layernorm", "f32", 1024, 8},
        {hw1, "cpu", "layernorm", "f32", 4096, 100}, {hw2, "cpu", "layernorm", "f32", 768, 1},
        {hw1, "cpu", "layernorm", "f32", 768, 1},    {hw1, "cpu", "layernorm", "bf16", 8192, 40000},
    };
    for (size_t i = 0; i < sizeof put / sizeof put[0]; ++i) {
        lntune_db_key k = {put[i].hw, put[i].target, put[i].op, put[i].dtype,
                           put[i].H,  put[i].rows,   1};
        lntune_best b = test_best("v", NULL, 1, put[i].rows, 1, 1, 1, 0, 1);
        CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK);
    }
    char want[6][128];
    snprintf(want[0], 128, "cpu/layernorm/bf16/8192/a1/hw%lld/r40000/v", (long long)hw1);
    snprintf(want[1], 128, "cpu/layernorm/f32/768/a1/hw%lld/r1/v", (long long)hw1);
    snprintf(want[2], 128, "cpu/layernorm/f32/768/a1/hw%lld/r1/v", (long long)hw2);
    snprintf(want[3], 128, "cpu/layernorm/f32/4096/a1/hw%lld/r100/v", (long long)hw1);
    snprintf(want[4], 128, "cpu/rmsnorm/f32/768/a1/hw%lld/r64/v", (long long)hw1);
    snprintf(want[5], 128, "cuda/layernorm/f32/1024/a1/hw%lld/r8/v", (long long)hw1);
    collect c = {0};
    CHECK_RC(db, lntune_db_each_best(db, 0, collect_best, &c), LNTUNE_OK);
    CHECK(c.n == 6);
    for (int i = 0; i < 6 && i < c.n; ++i) {
        if (strcmp(c.items[i], want[i]) != 0) {
            printf("    FAILED each_best[%d] = %s, want %s\n", i, c.items[i], want[i]);
            ++failures;
        }
    }
    memset(&c, 0, sizeof c);
    CHECK_RC(db, lntune_db_each_best(db, hw2, collect_best, &c), LNTUNE_OK);
    CHECK(c.n == 1);
    CHECK_STR(c.items[0], want[2]);
    memset(&c, 0, sizeof c);
    c.stop_after = 2;
    CHECK_RC(db, lntune_db_each_best(db, 0, collect_best, &c), LNTUNE_OK);
    CHECK(c.n == 2);
    lntune_db_close(db);
}

static void reopen_keeps_data(void) {
    char p[512];
    int64_t hw = 0;
    lntune_db *db = NULL;
    make_full_db(tpath(p, "full.db"));
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK_RC(db, lntune_db_find_hardware(db, "00000000000000aa", &hw), LNTUNE_OK);
    lntune_db_key k = test_key(hw, "layernorm", 4096, 512);
    one_best o = {0};
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
    CHECK_STR(o.variant, "vec=8");
    one_artifact *a = calloc(1, sizeof *a);
    CHECK_RC(db, lntune_db_get_artifact(db, "art", get_one_artifact, a), LNTUNE_OK);
    CHECK(a->shared_len == sizeof shared_blob &&
          memcmp(a->shared, shared_blob, a->shared_len) == 0);
    free(a);
    collect c = {0};
    CHECK_RC(db, lntune_db_each_measurement(db, &k, "h1", collect_m, &c), LNTUNE_OK);
    CHECK(c.n == 41);
    lntune_db_close(db);
}

static void migrates_an_empty_file(void) {
    char p[512];
    lntune_db *db = NULL;
    write_file(tpath(p, "empty.db"), "", 0);
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK(raw_int(p, "PRAGMA user_version") == lntune_db_schema_version());
    CHECK(raw_int(p, "PRAGMA application_id") == 0x4C4E5455);
    int64_t hw = 0;
    lntune_cpu_info cpu = test_cpu("00000000000000bb");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    lntune_db_close(db);
    /* A second open finds the current version and leaves the data alone. */
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK_RC(db, lntune_db_find_hardware(db, "00000000000000bb", &hw), LNTUNE_OK);
    lntune_db_close(db);
}

typedef struct {
    lntune_db_hardware hw; /* its strings are valid only in the callback: arch is copied */
    char arch[16];
} gpu_row;

static int find_gpu_row(void *ud, const lntune_db_hardware *hw) {
    gpu_row *r = ud;
    if (strcmp(hw->kind, "cuda") != 0) return 0;
    r->hw = *hw;
    snprintf(r->arch, sizeof r->arch, "%s", hw->arch);
    return 0;
}

/* A GPU row carries its own columns; its fingerprint ignores the driver version. */
static void gpu_hardware_round_trip(void) {
    char p[512];
    lntune_db *db = NULL;
    CHECK_RC(db, lntune_db_open(tpath(p, "gpu.db"), 0, &db), LNTUNE_OK);
    lntune_gpu_info g = {.name = "NVIDIA H200",
                         .sm = 90,
                         .multiprocessors = 132,
                         .l2_bytes = 62914560,
                         .bus_width_bits = 6144,
                         .driver_version = 13000};
    lntune_gpu_info_finish(&g);
    lntune_gpu_info newer_driver = g;
    newer_driver.driver_version = 13010;
    lntune_gpu_info_finish(&newer_driver);
    CHECK_STR(g.fingerprint, newer_driver.fingerprint);
    lntune_gpu_info other = g;
    other.multiprocessors = 114;
    lntune_gpu_info_finish(&other);
    CHECK(strcmp(g.fingerprint, other.fingerprint) != 0);
    int64_t id1 = 0, id2 = 0;
    CHECK_RC(db, lntune_db_put_gpu_hardware(db, &g, "NVRTC 13.0", &id1), LNTUNE_OK);
    CHECK_RC(db, lntune_db_put_gpu_hardware(db, &newer_driver, "NVRTC 13.0", &id2), LNTUNE_OK);
    CHECK(id1 > 0 && id1 == id2);
    gpu_row r = {0};
    CHECK_RC(db, lntune_db_each_hardware(db, find_gpu_row, &r), LNTUNE_OK);
    CHECK(r.hw.id == id1 && r.hw.compute_capability == 90 && r.hw.cores == 132 &&
          r.hw.memory_bus_bits == 6144 && r.hw.driver_version == 13000 &&
          r.hw.l2_bytes == 62914560);
    CHECK_STR(r.arch, "sm_90");
    lntune_gpu_info nameless = {0};
    CHECK_RC(db, lntune_db_put_gpu_hardware(db, &nameless, NULL, &id2), LNTUNE_EINVAL);
    lntune_db_close(db);
}

/* A version-1 database (before GPUs) gains the GPU columns and keeps its rows. */
static void migrates_version_1(void) {
    char p[512];
    lntune_db *db = NULL;
    CHECK_RC(db, lntune_db_open(tpath(p, "v1.db"), 0, &db), LNTUNE_OK);
    int64_t hw = 0;
    lntune_cpu_info cpu = test_cpu("00000000000000cc");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    lntune_db_close(db);
    raw_exec(p, "ALTER TABLE hardware DROP COLUMN kind; ALTER TABLE hardware DROP COLUMN "
                "compute_capability; ALTER TABLE hardware DROP COLUMN memory_bus_bits; "
                "ALTER TABLE hardware DROP COLUMN driver_version; ALTER TABLE artifacts DROP "
                "COLUMN ptx; DROP TABLE crossovers; ALTER TABLE best DROP COLUMN any_h; " DROP_TWINS
                "ALTER TABLE artifacts DROP COLUMN code_sha256; PRAGMA user_version = 1;");
    CHECK(raw_int(p, "PRAGMA user_version") == 1);
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK(raw_int(p, "PRAGMA user_version") == lntune_db_schema_version());
    CHECK(raw_int(p, "SELECT count(*) FROM hardware WHERE kind = 'cpu'") == 1);
    CHECK_RC(db, lntune_db_find_hardware(db, "00000000000000cc", &hw), LNTUNE_OK);
    lntune_artifact a = {.key = "k", .source = "s", .symbol = "f", .ptx = ".version 9.0"};
    CHECK_RC(db, lntune_db_put_artifact(db, &a), LNTUNE_OK);
    lntune_db_close(db);
    CHECK(raw_int(p, "SELECT length(ptx) FROM artifacts WHERE key = 'k'") == 12);
}

/* Crossovers: stored per machine, name and threads; read back at the nearest thread count; a
 * version-2 database (before them) gains the table and keeps its rows. */
static void crossovers(void) {
    char p[512];
    lntune_db *db = NULL;
    CHECK_RC(db, lntune_db_open(tpath(p, "crossovers.db"), 0, &db), LNTUNE_OK);
    int64_t hw = 0, value = 0;
    int at = 0;
    char hash[32] = "";
    lntune_cpu_info cpu = test_cpu("00000000000000dd");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    CHECK_RC(db, lntune_db_get_crossover(db, hw, "streaming_bytes", 2, &value, &at, hash, 32),
             LNTUNE_ENOTFOUND);
    CHECK_RC(db, lntune_db_put_crossover(db, hw, "streaming_bytes", 1, 100, "h1"), LNTUNE_OK);
    CHECK_RC(db, lntune_db_put_crossover(db, hw, "streaming_bytes", 4, 400, "h4"), LNTUNE_OK);
    CHECK_RC(db, lntune_db_put_crossover(db, hw, "streaming_bytes", 4, 444, "h4b"), LNTUNE_OK);
    CHECK_RC(db, lntune_db_get_crossover(db, hw, "streaming_bytes", 3, &value, &at, hash, 32),
             LNTUNE_OK);
    CHECK(value == 444 && at == 4 && strcmp(hash, "h4b") == 0); /* nearest, replaced */
    CHECK_RC(db, lntune_db_get_crossover(db, hw, "streaming_bytes", 2, &value, NULL, NULL, 0),
             LNTUNE_OK);
    CHECK(value == 100); /* a tie goes to the lower thread count */
    CHECK_RC(db, lntune_db_get_crossover(db, hw + 1, "streaming_bytes", 1, &value, NULL, NULL, 0),
             LNTUNE_ENOTFOUND);
    CHECK_RC(db, lntune_db_put_crossover(db, hw, "streaming_bytes", 0, 1, "h"), LNTUNE_EINVAL);
    lntune_db_close(db);
    raw_exec(p, DROP_TWINS
             "DROP TABLE crossovers; ALTER TABLE best DROP COLUMN any_h; ALTER TABLE artifacts "
             "DROP COLUMN code_sha256; PRAGMA user_version = 2;");
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK(raw_int(p, "PRAGMA user_version") == lntune_db_schema_version());
    CHECK(raw_int(p, "SELECT count(*) FROM hardware") == 1);
    CHECK_RC(db, lntune_db_put_crossover(db, hw, "streaming_bytes", 1, 7, "h"), LNTUNE_OK);
    lntune_db_close(db);
}

static int intact_of(void *ud, const lntune_artifact *a) {
    char why[256];
    *(int *)ud = lntune_artifact_intact(a, why, sizeof why);
    return 0;
}

/* The artifact's code digest: SHA-256 itself on the FIPS 180-4 examples; recorded by put, checked
 * by lntune_artifact_intact (one byte changed fails it); a version-3 database (before digests)
 * gets the digest of what its artifacts hold at the migration. */
static void code_digests(void) {
    static const struct {
        const char *in, *hex;
    } fips[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof fips / sizeof fips[0]; ++i) {
        lntune_sha256 s;
        char hex[LNTUNE_SHA256_HEX];
        lntune_sha256_init(&s);
        lntune_sha256_update(&s, fips[i].in, strlen(fips[i].in));
        lntune_sha256_final_hex(&s, hex);
        CHECK(strcmp(hex, fips[i].hex) == 0);
    }
    char p[512];
    lntune_db *db = NULL;
    CHECK_RC(db, lntune_db_open(tpath(p, "digests.db"), 0, &db), LNTUNE_OK);
    unsigned char so[100];
    for (int i = 0; i < 100; ++i) so[i] = (unsigned char)(i * 7);
    lntune_artifact a = {
        .key = "k", .source = "s", .symbol = "f", .shared = so, .shared_len = sizeof so};
    CHECK_RC(db, lntune_db_put_artifact(db, &a), LNTUNE_OK);
    int intact = -1;
    CHECK_RC(db, lntune_db_get_artifact(db, "k", intact_of, &intact), LNTUNE_OK);
    CHECK(intact == 1);
    lntune_db_close(db);
    raw_exec(p, "UPDATE artifacts SET shared = CAST(zeroblob(100) AS BLOB) WHERE key = 'k';");
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK_RC(db, lntune_db_get_artifact(db, "k", intact_of, &intact), LNTUNE_OK);
    CHECK(intact == 0); /* altered after put */
    lntune_db_close(db);
    raw_exec(p,
             DROP_TWINS "ALTER TABLE artifacts DROP COLUMN code_sha256; PRAGMA user_version = 3;");
    CHECK_RC(db, lntune_db_open(p, 0, &db), LNTUNE_OK);
    CHECK(raw_int(p, "PRAGMA user_version") == lntune_db_schema_version());
    CHECK_RC(db, lntune_db_get_artifact(db, "k", intact_of, &intact), LNTUNE_OK);
    CHECK(intact == 1); /* digested at the migration */
    lntune_db_close(db);
}

/* Wisdom export: a machine, its measurement, winner and crossover as JSON lines keyed by its
 * fingerprint, with text escaped; no artifact (neither its bytes nor its key). */
static void wisdom_export(void) {
    char p[512], out[600];
    lntune_db *db = NULL;
    CHECK_RC(db, lntune_db_open(tpath(p, "wisdom.db"), 0, &db), LNTUNE_OK);
    int64_t hw = 0;
    lntune_cpu_info cpu = test_cpu("0000000000000abc");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    lntune_db_key k = {hw, "cpu", "layernorm", "f32", 768, 64, 1};
    lntune_measurement m = {"vec=8",      "th1", "wrong", "said \"no\"\n",
                            "secret-key", 1.0,   100.0,   90.0,
                            110.0,        50.0,  55.0,    1e-7};
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &m), LNTUNE_OK);
    static const unsigned char so[] = "ELF-ish bytes";
    lntune_artifact a = {
        .key = "secret-key", .source = "s", .symbol = "f", .shared = so, .shared_len = sizeof so};
    CHECK_RC(db, lntune_db_put_artifact(db, &a), LNTUNE_OK);
    lntune_best b = test_best("vec=8", "secret-key", 2, 64, 100.0, 50.0, 55.0, 1e-7, 300.0);
    b.any_h = 1;
    b.ratio_lo = 0.75;
    b.ratio_hi = 0.875;
    b.under_load = "0.9 of 2 cores";
    CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK);
    CHECK_RC(db, lntune_db_set_reach(db, &k, 192, 3072), LNTUNE_OK);
    CHECK_RC(db, lntune_db_put_crossover(db, hw, "streaming_bytes", 2, 1 << 26, "th1"), LNTUNE_OK);
    snprintf(out, sizeof out, "%s.jsonl", p);
    FILE *f = fopen(out, "w");
    int machines = 0;
    CHECK_RC(db, lntune_db_wisdom_export(db, f, &machines), LNTUNE_OK);
    fclose(f);
    lntune_db_close(db);
    CHECK(machines == 1);
    f = fopen(out, "r");
    char line[4096];
    int n = 0, machine = 0, meas = 0, best = 0, cross = 0, code = 0;
    while (f && fgets(line, sizeof line, f)) {
        n++;
        machine +=
            strstr(line, "\"record\": \"machine\", \"fingerprint\": \"0000000000000abc\"") != NULL;
        meas += strstr(line, "\"record\": \"measurement\", \"machine\": \"0000000000000abc\"") &&
                strstr(line, "\"message\": \"said \\\"no\\\"\\n\"") && strstr(line, "\"H\": 768");
        best += strstr(line, "\"record\": \"best\"") && strstr(line, "\"any_h\": 1") &&
                strstr(line, "\"threads\": 2") && strstr(line, "\"ratio_lo\": 0.75") &&
                strstr(line, "\"under_load\": \"0.9 of 2 cores\"") &&
                strstr(line, "\"reach_lo\": 192") && strstr(line, "\"reach_hi\": 3072");
        cross += strstr(line, "\"record\": \"crossover\"") && strstr(line, "\"value\": 67108864");
        code += strstr(line, "secret-key") || strstr(line, "ELF-ish") || strstr(line, "artifact");
    }
    if (f) fclose(f);
    CHECK(n == 5 && machine == 1 && meas == 1 && best == 1 && cross == 1);
    CHECK(code == 0);

    /* imported again: the winner keeps its spread, its under-load mark and its reach of H */
    lntune_db *in = NULL;
    CHECK_RC(in, lntune_db_open(tpath(p, "wisdom-in.db"), 0, &in), LNTUNE_OK);
    lntune_wisdom_report r;
    f = fopen(out, "r");
    CHECK_RC(in, lntune_db_wisdom_import(in, f, &r), LNTUNE_OK);
    if (f) fclose(f);
    CHECK(r.best == 1);
    CHECK_RC(in, lntune_db_find_hardware(in, "0000000000000abc", &k.hardware_id), LNTUNE_OK);
    one_best o = {0};
    CHECK_RC(in, lntune_db_get_best(in, &k, get_one_best, &o), LNTUNE_OK);
    CHECK(o.called == 1 && o.b.ratio_lo == 0.75 && o.b.ratio_hi == 0.875);
    CHECK(o.b.reach_lo == 192 && o.b.reach_hi == 3072);
    CHECK(o.b.under_load && strcmp(o.b.under_load, "0.9 of 2 cores") == 0);
    lntune_db_close(in);
}

static int copy_h(void *ud, const lntune_best *b) {
    *(int64_t *)ud = b->any_h ? b->H : -b->H;
    return 1;
}

/* copy_h, declining (returning 0 for) every H but the one *ud holds on entry. */
static int copy_h_if(void *ud, const lntune_best *b) {
    const int64_t want = *(int64_t *)ud;
    copy_h(ud, b);
    if (b->H == want) return 1;
    *(int64_t *)ud = want;
    return 0;
}

/* The nearest run-time-H winner: by H's ratio, then rows bucket; fixed-H and other affine,
 * dtype or op never. */
static void nearest_best(void) {
    char p[512];
    lntune_db *db = NULL;
    CHECK_RC(db, lntune_db_open(tpath(p, "nearest.db"), 0, &db), LNTUNE_OK);
    int64_t hw = 0, got = 0;
    lntune_cpu_info cpu = test_cpu("00000000000000ee");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    const struct {
        int64_t H, rows;
        int affine, any_h;
        const char *dtype;
    } put[] = {{1024, 64, 1, 1, "f32"}, {4096, 64, 1, 1, "f32"},  {3000, 64, 1, 0, "f32"},
               {2900, 64, 0, 1, "f32"}, {2950, 64, 1, 1, "bf16"}, {4096, 1, 1, 1, "f32"}};
    for (size_t i = 0; i < sizeof put / sizeof put[0]; ++i) {
        lntune_db_key k = {hw,       "cpu",       "layernorm",  put[i].dtype,
                           put[i].H, put[i].rows, put[i].affine};
        lntune_best b = test_best("v", NULL, 1, put[i].rows, 1, 1, 1, 0, 1);
        b.any_h = put[i].any_h;
        CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK);
    }
    lntune_db_key want = {hw, "cpu", "layernorm", "f32", 2900, 64, 1};
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, copy_h, &got), LNTUNE_OK);
    CHECK(got == 4096); /* 4096/2900 = 1.41 beats 2900/1024 = 2.83; 3000 is fixed-H */
    got = 1024;         /* the caller declines 4096: the walk goes on to the next nearest */
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, copy_h_if, &got), LNTUNE_OK);
    CHECK(got == 1024);
    got = 3000; /* fixed-H: never handed over, so nothing is taken */
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, copy_h_if, &got), LNTUNE_ENOTFOUND);
    want.H = 1500;
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, copy_h, &got), LNTUNE_OK);
    CHECK(got == 1024);
    want.affine = 0;
    want.H = 100;
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, copy_h, &got), LNTUNE_OK);
    CHECK(got == 2900);
    want.dtype = "f16";
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, copy_h, &got), LNTUNE_ENOTFOUND);
    lntune_db_close(db);
}

/* A fixed-H winner's run-time-H twin (schema version 5): stored beside it, read back by
 * get_best, handed over by get_nearest_best in the winner's place (any_h set, the twin's
 * variant, artifact and figures), cleared when set_best replaces the winner; never on a winner
 * that reads H at run time itself. */
static void runtime_h_twin(void) {
    int64_t hw = 0;
    lntune_db *db = open_new("twin.db", &hw);
    lntune_db_key fixed = test_key(hw, "layernorm", 3000, 64), runtime = fixed, want = fixed;
    runtime.H = 4096;
    want.H = 3010;
    lntune_best f = test_best("h=fixed,vec=8", "artF", 2, 64, 100, 50, 60, 1e-7, 300);
    lntune_best r = test_best("h=runtime,vec=4", "artR", 1, 64, 200, 25, 60, 1e-7, 300);
    r.any_h = 1;
    CHECK_RC(db, lntune_db_set_best(db, &fixed, &f), LNTUNE_OK);
    CHECK_RC(db, lntune_db_set_best(db, &runtime, &r), LNTUNE_OK);
    one_best o = {0};
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.H == 4096); /* no twin yet: the fixed-H winner never serves 3010 */

    CHECK_RC(db, lntune_db_set_twin(db, &fixed, "h=runtime,vec=8", "artT", 125), LNTUNE_OK);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_best(db, &fixed, get_one_best, &o), LNTUNE_OK);
    CHECK_STR(o.variant, "h=fixed,vec=8");
    CHECK(o.b.any_h == 0 && o.b.twin_median_ns == 125 && o.b.twin_variant &&
          strcmp(o.b.twin_variant, "h=runtime,vec=8") == 0);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.H == 3000 && o.b.any_h == 1 && o.b.threads == 2 && o.b.median_ns == 125 &&
          o.b.gbps == 40 && isnan(o.b.max_error) && o.b.twin_artifact_key == NULL);
    CHECK_STR(o.variant, "h=runtime,vec=8");
    CHECK_STR(o.artifact_key, "artT");

    CHECK_RC(db, lntune_db_set_twin(db, &runtime, "x", "artX", 1), LNTUNE_ENOTFOUND);
    CHECK_RC(db, lntune_db_set_twin(db, &fixed, NULL, "artX", 1), LNTUNE_EINVAL);
    CHECK_RC(db, lntune_db_set_best(db, &fixed, &f), LNTUNE_OK); /* a new winner: no twin */
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_best(db, &fixed, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.twin_variant == NULL && o.b.twin_artifact_key == NULL && isnan(o.b.twin_median_ns));
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.H == 4096);
    /* A declined twin (no code) is remembered and serves nothing. */
    CHECK_RC(db, lntune_db_set_twin(db, &fixed, "h=runtime,vec=8", NULL, 140), LNTUNE_OK);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_best(db, &fixed, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.twin_variant && strcmp(o.b.twin_variant, "h=runtime,vec=8") == 0 &&
          o.b.twin_artifact_key == NULL && o.b.twin_median_ns == 140);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.H == 4096);
    /* A version-4 database (before twins) gains the columns and keeps its winners, twinless. */
    db = reopen_migrated(db, "twin.db", DROP_TWINS "PRAGMA user_version = 4;", &fixed, &o);
    CHECK(o.called == 1 && o.b.twin_variant == NULL && isnan(o.b.twin_median_ns));
    CHECK_RC(db, lntune_db_set_twin(db, &fixed, "h=runtime,vec=8", "artT", 125), LNTUNE_OK);
    lntune_db_close(db);
}

/* Whether a winner keeps its speed on rows of any alignment (schema version 6): stored by
 * set_best, read back by get_best and by get_nearest_best, whose twin carries its winner's; a
 * version-5 database gains the column as 0 (the alignment rule holds) and keeps its winners. */
static void any_alignment(void) {
    int64_t hw = 0;
    lntune_db *db = open_new("align.db", &hw);
    lntune_db_key plain = test_key(hw, "layernorm", 768, 64), nt = plain, want = plain;
    nt.op = "rmsnorm";
    want.H = 777;
    lntune_best b = test_best("h=fixed,store=plain", "artP", 2, 64, 100, 50, 60, 1e-7, 300);
    b.any_alignment = 1;
    CHECK_RC(db, lntune_db_set_best(db, &plain, &b), LNTUNE_OK);
    CHECK_RC(db, lntune_db_set_twin(db, &plain, "h=runtime,store=plain", "artT", 110), LNTUNE_OK);
    b.variant = "h=runtime,store=nt";
    b.any_h = 1;
    b.any_alignment = 0;
    CHECK_RC(db, lntune_db_set_best(db, &nt, &b), LNTUNE_OK);
    one_best o = {0};
    CHECK_RC(db, lntune_db_get_best(db, &plain, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.any_alignment == 1);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.any_h == 1 && o.b.any_alignment == 1 && o.b.median_ns == 110);
    CHECK_STR(o.variant, "h=runtime,store=plain");
    want.op = "rmsnorm";
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.any_h == 1 && o.b.any_alignment == 0);
    CHECK_STR(o.variant, "h=runtime,store=nt");
    db = reopen_migrated(db, "align.db", DROP_ANY_ALIGNMENT "PRAGMA user_version = 5;", &plain, &o);
    CHECK(o.called == 1 && o.b.any_alignment == 0 && o.b.twin_median_ns == 110);
    lntune_db_close(db);
}

/* A winner's reach (schema version 8): set_reach stores it, get_best and get_nearest_best read
 * it back (the twin's row too), set_best clears it; a reach that leaves out its own H, or a
 * bucket with no winner, is refused; a version-7 database gains the columns as unmeasured. */
static void reach(void) {
    int64_t hw = 0;
    lntune_db *db = open_new("reach.db", &hw);
    lntune_db_key k = test_key(hw, "rmsnorm", 4096, 2048), want = k, none = k;
    want.H = 3000;
    none.H = 512;
    lntune_best b = test_best("h=fixed,vec=16", "artF", 2, 2048, 100, 50, 60, 1e-7, 300);
    CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK);
    CHECK_RC(db, lntune_db_set_twin(db, &k, "h=runtime,vec=16", "artT", 110), LNTUNE_OK);
    one_best o = {0};
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.reach_lo == 0 && o.b.reach_hi == 0); /* not measured */
    CHECK_RC(db, lntune_db_set_reach(db, &k, 2048, 32768), LNTUNE_OK);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.reach_lo == 2048 && o.b.reach_hi == 32768);
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_nearest_best(db, &want, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.any_h == 1 && o.b.reach_lo == 2048 && o.b.reach_hi == 32768);
    CHECK_STR(o.variant, "h=runtime,vec=16");
    CHECK_RC(db, lntune_db_set_reach(db, &k, 5000, 32768), LNTUNE_EINVAL);
    CHECK_RC(db, lntune_db_set_reach(db, &k, 0, 32768), LNTUNE_EINVAL);
    CHECK_RC(db, lntune_db_set_reach(db, &k, 1024, 2048), LNTUNE_EINVAL);
    CHECK_RC(db, lntune_db_set_reach(db, &none, 1, 1024), LNTUNE_ENOTFOUND);
    CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_OK); /* a new winner: no reach yet */
    memset(&o, 0, sizeof o);
    CHECK_RC(db, lntune_db_get_best(db, &k, get_one_best, &o), LNTUNE_OK);
    CHECK(o.b.reach_lo == 0 && o.b.reach_hi == 0);
    CHECK_RC(db, lntune_db_set_reach(db, &k, 1, 4096), LNTUNE_OK);
    db = reopen_migrated(db, "reach.db", DROP_REACH "PRAGMA user_version = 7;", &k, &o);
    CHECK(o.called == 1 && o.b.reach_lo == 0 && o.b.reach_hi == 0);
    lntune_db_close(db);
}

static void readonly_missing_is_notfound(void) {
    char p[512], dir[512];
    lntune_db *db = NULL;
    tpath(p, "ro-missing/sub/tune.db");
    CHECK_RC(db, lntune_db_open(p, LNTUNE_DB_READONLY, &db), LNTUNE_ENOTFOUND);
    CHECK(db != NULL && strstr(lntune_db_errmsg(db), p) != NULL);
    CHECK(!exists(tpath(dir, "ro-missing"))); /* no directory made either */
    int64_t hw;
    CHECK_RC(db, lntune_db_find_hardware(db, "x", &hw), LNTUNE_EDB); /* a failed handle */
    lntune_db_close(db);
    /* An empty file is not created into either. */
    write_file(tpath(p, "ro-empty.db"), "", 0);
    CHECK_RC(db, lntune_db_open(p, LNTUNE_DB_READONLY, &db), LNTUNE_ENOTFOUND);
    lntune_db_close(db);
    snapshot s = snap(p);
    CHECK(s.exists && s.len == 0);
    free_snap(&s);
}

static void readonly_never_writes(void) {
    char p[512];
    lntune_db *db = NULL;
    make_full_db(tpath(p, "ro.db"));
    age(p);
    snapshot before = snap(p);
    CHECK_RC(db, lntune_db_open(p, LNTUNE_DB_READONLY, &db), LNTUNE_OK);
    int64_t hw = 0;
    CHECK_RC(db, lntune_db_find_hardware(db, "00000000000000aa", &hw), LNTUNE_OK);
    lntune_db_key k = test_key(hw, "layernorm", 4096, 512);
    collect c = {0};
    CHECK_RC(db, lntune_db_each_best(db, 0, collect_best, &c), LNTUNE_OK);
    CHECK(c.n == 1);
    one_artifact *a = calloc(1, sizeof *a);
    CHECK_RC(db, lntune_db_get_artifact(db, "art", get_one_artifact, a), LNTUNE_OK);
    free(a);
    lntune_best b = test_best("other", NULL, 1, 512, 1, 1, 1, 0, 1);
    CHECK_RC(db, lntune_db_set_best(db, &k, &b), LNTUNE_EDB);
    CHECK(strstr(lntune_db_errmsg(db), "readonly") != NULL);
    lntune_measurement m = {"x", "h", "ok", NULL, NULL, 0, 0, 0, 0, 0, 0, 0};
    CHECK_RC(db, lntune_db_put_measurement(db, &k, &m), LNTUNE_EDB);
    lntune_db_close(db);
    snapshot after = snap(p);
    CHECK(same_file(before, after));
    free_snap(&before);
    free_snap(&after);
}

/* Opens path both ways; each must fail with LNTUNE_EDB, mention why, and leave the file alone. */
static void expect_refused(const char *path, const char *why, int check_no_side_files) {
    static const int modes[] = {0, LNTUNE_DB_READONLY};
    char side[600];
    age(path);
    snapshot before = snap(path);
    CHECK(before.exists);
    for (int i = 0; i < 2; ++i) {
        lntune_db *db = NULL;
        CHECK_RC(db, lntune_db_open(path, modes[i], &db), LNTUNE_EDB);
        if (!strstr(lntune_db_errmsg(db), why)) {
            printf("    FAILED message \"%s\" lacks \"%s\"\n", lntune_db_errmsg(db), why);
            ++failures;
        }
        printf("    %s: %s\n", modes[i] ? "read-only" : "read-write", lntune_db_errmsg(db));
        lntune_db_close(db);
        snapshot after = snap(path);
        CHECK(same_file(before, after));
        free_snap(&after);
    }
    if (check_no_side_files) {
        snprintf(side, sizeof side, "%s-wal", path);
        CHECK(!exists(side));
        snprintf(side, sizeof side, "%s-shm", path);
        CHECK(!exists(side));
        snprintf(side, sizeof side, "%s-journal", path);
        CHECK(!exists(side));
    }
    free_snap(&before);
}

static void refuses_text_file(void) {
    char p[512];
    static const char text[] = "this is not a database\nbut someone's notes\n";
    write_file(tpath(p, "notes.txt"), text, sizeof text - 1);
    expect_refused(p, "not an SQLite database", 1);
}

static void refuses_other_applications_sqlite(void) {
    char p[512];
    tpath(p, "other.db");
    raw_exec(p, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
                "INSERT INTO notes (body) VALUES ('keep me');");
    expect_refused(p, "another application", 1);
    tpath(p, "otherid.db");
    raw_exec(p, "PRAGMA application_id = 305419896;"); /* 0x12345678, no tables at all */
    expect_refused(p, "another application", 1);
}

static void refuses_newer_schema(void) {
    char p[512];
    tpath(p, "newer.db");
    raw_exec(p, "PRAGMA application_id = 1280201813; PRAGMA user_version = 999;"
                "CREATE TABLE hardware (id INTEGER PRIMARY KEY, future TEXT);");
    expect_refused(p, "newer", 1);
}

static void refuses_truncated_copy(void) {
    char p[512], q[512];
    make_full_db(tpath(p, "whole.db"));
    snapshot whole = snap(p);
    CHECK(whole.exists && whole.len > 8 * 4096);
    write_file(tpath(q, "truncated.db"), whole.bytes, whole.len / 2);
    free_snap(&whole);
    /* A WAL-mode file: SQLite makes its -shm even to read it, so side files are not checked. */
    expect_refused(q, "corrupt", 0);
}

static void force_moves_a_refused_file_aside(void) {
    char p[512], bak[600];
    static const char text[] = "precious notes";
    lntune_db *db = NULL;
    write_file(tpath(p, "forced.db"), text, sizeof text - 1);
    CHECK_RC(db, lntune_db_open(p, LNTUNE_DB_READONLY | LNTUNE_DB_FORCE, &db), LNTUNE_EINVAL);
    lntune_db_close(db);
    CHECK_RC(db, lntune_db_open(p, LNTUNE_DB_FORCE, &db), LNTUNE_OK);
    int64_t hw = 0;
    lntune_cpu_info cpu = test_cpu("00000000000000cc");
    CHECK_RC(db, lntune_db_put_hardware(db, &cpu, "cc", &hw), LNTUNE_OK);
    lntune_db_close(db);
    snprintf(bak, sizeof bak, "%s.bak", p);
    snapshot s = snap(bak);
    CHECK(s.exists && s.len == sizeof text - 1 && memcmp(s.bytes, text, s.len) == 0);
    free_snap(&s);
    /* A FORCE open of a healthy database changes nothing. */
    CHECK_RC(db, lntune_db_open(p, LNTUNE_DB_FORCE, &db), LNTUNE_OK);
    CHECK_RC(db, lntune_db_find_hardware(db, "00000000000000cc", &hw), LNTUNE_OK);
    lntune_db_close(db);
}

static void null_and_bad_arguments(void) {
    lntune_db *db = NULL;
    int64_t id;
    lntune_db_close(NULL);
    CHECK(lntune_db_errmsg(NULL) != NULL);
    CHECK_STR(lntune_db_path(NULL), "");
    CHECK_RC(NULL, lntune_db_open("x.db", 0, NULL), LNTUNE_EINVAL);
    CHECK_RC(NULL, lntune_db_find_hardware(NULL, "x", &id), LNTUNE_EINVAL);
    CHECK_RC(NULL, lntune_db_each_best(NULL, 0, collect_best, NULL), LNTUNE_EINVAL);
    CHECK_RC(db, lntune_db_open("", 0, &db), LNTUNE_EINVAL);
    lntune_db_close(db);
    CHECK_RC(db, lntune_db_open("x.db", 0x100, &db), LNTUNE_EINVAL);
    lntune_db_close(db);
    db = open_new("args.db", NULL);
    CHECK_RC(db, lntune_db_each_best(db, 0, NULL, NULL), LNTUNE_EINVAL);
    CHECK_RC(db, lntune_db_put_measurement(db, NULL, NULL), LNTUNE_EINVAL);
    lntune_db_close(db);
}

static void two_handles_share_a_file(void) {
    char p[512];
    lntune_db *a = NULL, *b = NULL;
    int64_t ha = 0, hb = 0;
    tpath(p, "shared.db");
    CHECK_RC(a, lntune_db_open(p, 0, &a), LNTUNE_OK);
    CHECK_RC(b, lntune_db_open(p, 0, &b), LNTUNE_OK);
    lntune_cpu_info cpu = test_cpu("00000000000000dd");
    CHECK_RC(a, lntune_db_put_hardware(a, &cpu, "cc", &ha), LNTUNE_OK);
    CHECK_RC(b, lntune_db_put_hardware(b, &cpu, "cc", &hb), LNTUNE_OK);
    CHECK(ha == hb && ha > 0); /* b sees a's committed row and does not add another */
    lntune_db_close(a);
    lntune_db_close(b);
}

int main(void) {
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"schema version is the last schema.sql section", schema_version_is_the_last_section},
        {"artifact code digests: recorded, checked, migrated", code_digests},
        {"wisdom export: every record of a machine, no code", wisdom_export},
        {"rows buckets have the documented boundaries", rows_bucket_boundaries},
        {"default path: LNTUNE_DB, then XDG_CACHE_HOME, then HOME", default_path_from_environment},
        {"create makes directories, schema, ids and WAL", create_makes_directories_schema_and_wal},
        {"hardware is found, not duplicated, and round-trips", hardware_round_trip},
        {"a measurement upsert replaces the earlier one", measurement_upsert_replaces},
        {"artifacts keep blobs with NUL bytes", artifact_blobs_round_trip},
        {"best is set, replaced and got per rows bucket", best_per_bucket},
        {"each_best orders by target, op, dtype, H", each_best_is_ordered},
        {"reopening keeps every record", reopen_keeps_data},
        {"a 0-byte file is migrated to the current schema", migrates_an_empty_file},
        {"a GPU's hardware row round-trips", gpu_hardware_round_trip},
        {"a version-1 database migrates to the GPU columns", migrates_version_1},
        {"crossovers: per machine, name and threads; version 2 migrates", crossovers},
        {"the nearest run-time-H winner", nearest_best},
        {"a fixed-H winner's run-time-H twin", runtime_h_twin},
        {"a winner of any row alignment; version 5 migrates", any_alignment},
        {"a winner's reach of H; version 7 migrates", reach},
        {"read-only open of a missing file is ENOTFOUND", readonly_missing_is_notfound},
        {"read-only open never writes", readonly_never_writes},
        {"refused unchanged: a text file", refuses_text_file},
        {"refused unchanged: another application's SQLite", refuses_other_applications_sqlite},
        {"refused unchanged: a newer schema version", refuses_newer_schema},
        {"refused unchanged: a truncated copy", refuses_truncated_copy},
        {"FORCE moves a refused file aside", force_moves_a_refused_file_aside},
        {"NULL handles and bad arguments", null_and_bad_arguments},
        {"two handles share one file", two_handles_share_a_file},
    };
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "test-db")) return 1;
    for (size_t i = 0; i < sizeof shared_blob; ++i) shared_blob[i] = (unsigned char)(i * 7);
    unsetenv("LNTUNE_DB");
    int failed_cases = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        int before = failures;
        printf("case: %s\n", cases[i].name);
        cases[i].fn();
        printf("  %s\n", failures == before ? "ok" : "FAIL");
        failed_cases += failures != before;
    }
    scratch_dir_finish(tmpdir, failures);
    printf("%d of %zu cases failed\n", failed_cases, sizeof cases / sizeof cases[0]);
    return failures != 0;
}
