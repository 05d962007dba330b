/*
 * test_code_loading.c - liblntune runs no code from a database this user did not build here.
 *
 * A database in a private folder holds a tuned LayerNorm for H = 64 (tunedb.h); first it must
 * serve the call (the control: the rule lets good code through). Then a shared object whose
 * constructor writes a marker file is planted in the artifact:
 *   - its bytes alone (the recorded SHA-256 no longer matches),
 *   - its bytes and their SHA-256 with the recorded digest of the code dropped (an older
 *     artifact's state),
 *   - its bytes and a matching digest, in a database file its group may write,
 *   - the same in a folder others may write,
 *   - the same in a file another user owns (only where the test runs as root: chown).
 * In every case the marker must never appear, the call must still give the float64 reference's
 * answer (from the built-in), and the debug log must say why no tuned kernel was loaded.
 *
 *   test_code_loading SCRATCH_DIR
 */
#include "lntune.h"
#include "log_lines.h"
#include "testutil.h"
#include "logged_call.h"
#include "tunedb.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

enum { H = 64, ROWS = 8 };

static int failures;

static void expect(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

/* One LayerNorm call through a new handle on path, its stderr (debug log) to log; returns the
 * tuned calls it made, or -1 when the answer was wrong. */
static int call(const char *path, const char *log) {
    const int before = __atomic_load_n(&lntune_test_tuned_calls, __ATOMIC_RELAXED);
    if (logged_call(path, log, LNTUNE_OP_LAYERNORM, ROWS, H, 1)) return -1;
    return __atomic_load_n(&lntune_test_tuned_calls, __ATOMIC_RELAXED) - before;
}

/* Replaces the only artifact's shared object with so; with_digest: and records the digest of
 * the code it then holds (else keeps the old one), or drop_digest: records none. */
static int plant(const char *path, const void *so, size_t len, int with_digest, int drop_digest) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *source = NULL, digest[65];
    int ok = sqlite3_open(path, &db) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "SELECT source FROM artifacts", -1, &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW &&
             (source = strdup((const char *)sqlite3_column_text(st, 0))) != NULL;
    sqlite3_finalize(st);
    st = NULL;
    if (ok) lntune_artifact_code_digest(source, so, len, NULL, 0, NULL, digest);
    const char *sql = drop_digest   ? "UPDATE artifacts SET shared = ?1, code_sha256 = NULL"
                      : with_digest ? "UPDATE artifacts SET shared = ?1, code_sha256 = ?2"
                                    : "UPDATE artifacts SET shared = ?1";
    ok = ok && sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
         sqlite3_bind_blob(st, 1, so, (int)len, SQLITE_TRANSIENT) == SQLITE_OK &&
         (!with_digest || drop_digest ||
          sqlite3_bind_text(st, 2, digest, -1, SQLITE_TRANSIENT) == SQLITE_OK) &&
         sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(db) == 1;
    if (!ok) printf("      plant: %s\n", db ? sqlite3_errmsg(db) : "no database");
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(source);
    return ok ? 0 : -1;
}

/* One planted case: the marker never written, the right answer, and a log line naming why. */
static void refused(const char *path, const char *log, const char *marker, const char *why,
                    const char *what) {
    unlink(marker);
    const int tuned = call(path, log);
    const int lines = log_lines(log, "built-in kernel", why, 0);
    const int ran = access(marker, F_OK) == 0;
    printf("%s: %s: tuned calls %d, marker %s, %d log line(s) naming \"%s\"\n",
           tuned == 0 && !ran && lines >= 1 ? "ok" : "FAIL", what, tuned,
           ran ? "WRITTEN" : "absent", lines, why);
    if (tuned != 0 || ran || lines < 1) {
        failures++;
        log_lines(log, "", "", 1);
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char dir[1024], path[4200], log[1200], marker[1200];
    snprintf(dir, sizeof dir, "%s/code_loading", argc > 1 ? argv[1] : "/tmp");
    mkdir(dir, 0700);
    if (chmod(dir, 0700) != 0) {
        printf("FAIL cannot make %s private\n", dir);
        return 1;
    }
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(marker, sizeof marker, "%s/marker", dir);
    unlink(marker);

    tunedb_file t;
    if (tunedb_create(&t, dir, "tune.db") != LNTUNE_OK ||
        put_tuned(t.db, t.hw, "layernorm", "vec=4,h=runtime,threads=1", H, ROWS, 1, 1,
                  TUNED_RUNS) != 0) {
        printf("FAIL cannot build the database: %s\n", lntune_db_errmsg(t.db));
        return 1;
    }
    lntune_db_close(t.db);
    snprintf(path, sizeof path, "%s", t.path);
    chmod(path, 0600);

    const int good = call(path, log);
    expect(good >= 1 && log_lines(log, "H=64", "tuned", 0) >= 1,
           "control: this user's private database serves its tuned kernel");

    char source[2048];
    snprintf(source, sizeof source,
             "#include <stdio.h>\n#include <stdint.h>\n"
             "__attribute__((constructor)) static void planted(void)\n"
             "{ FILE *f = fopen(\"%s\", \"w\"); if (f) { fputs(\"ran\\n\", f); fclose(f); } }\n"
             "int tuned_entry(const void *a, int64_t b, int64_t e) "
             "{ (void)a; (void)b; (void)e; return 0; }\n",
             marker);
    size_t so_len = 0;
    void *so = build_shared(source, &so_len);
    if (!so) {
        printf("FAIL cannot build the planted shared object\n");
        return 1;
    }

    if (plant(path, so, so_len, 0, 0) == 0)
        refused(path, log, marker, "altered since", "planted bytes under the old digest");
    if (plant(path, so, so_len, 0, 1) == 0)
        refused(path, log, marker, "no recorded SHA-256", "planted bytes with no digest");
    if (plant(path, so, so_len, 1, 0) == 0) {
        chmod(path, 0620);
        refused(path, log, marker, "writable by its group", "database file writable by group");
        chmod(path, 0600);
        chmod(dir, 0777);
        refused(path, log, marker, "writable by others", "folder writable by others");
        chmod(dir, 0700);
        if (geteuid() == 0) {
            if (chown(path, 65534, 65534) == 0) {
                refused(path, log, marker, "belongs to uid 65534", "database of another user");
                if (chown(path, 0, 0) != 0) failures++;
            } else {
                expect(0, "chown to uid 65534 as root");
            }
        } else {
            printf("skip: another user's file needs root to make (running as uid %lu)\n",
                   (unsigned long)geteuid());
        }
    } else {
        failures++;
    }
    free(so);
    unlink(marker);
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
