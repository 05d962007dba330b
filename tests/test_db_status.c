/*
 * test_db_status.c - lntune_open keeps opening on a database it cannot use (the app runs on the
 * built-ins), and lntune_db_status says which case it met, with a message naming the file;
 * LNTUNE_OPEN_STRICT makes open fail instead. Cases: this user's private database of this
 * machine (LNTUNE_DB_OK, strict opens), no file (MISSING, strict: LNTUNE_ENOTFOUND), a file that
 * is not SQLite, a database cut short and another application's SQLite file (UNUSABLE), a database
 * writable by its group (UNTRUSTED), one of another machine (OTHER_MACHINE); strict fails with
 * LNTUNE_EDB on each of these, and *out is NULL.
 *
 *   test_db_status SCRATCH_DIR
 */
#include "lntune.h"
#include "testutil.h"
#include "tunedb.h"

#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

static const char *const state_names[] = {"OK", "MISSING", "UNUSABLE", "UNTRUSTED",
                                          "OTHER_MACHINE"};

/* Opens path plainly and strictly; checks the state, the message and the strict code. */
static void expect_state(const char *path, int want, const char *in_message, int strict_rc,
                         const char *what) {
    lntune *ctx = NULL;
    const int rc = lntune_open(path, &ctx);
    const char *msg = NULL;
    const int state = lntune_db_status(ctx, &msg);
    test_case(rc == LNTUNE_OK && ctx && state == want && msg && strstr(msg, path) &&
                  strstr(msg, in_message),
              "%s: open %d, state %s (want %s): %s", what, rc,
              state >= 0 && state <= 4 ? state_names[state] : "?", state_names[want],
              msg ? msg : "(no message)");
    lntune_close(ctx);
    lntune *strict = (lntune *)&ctx; /* not NULL, to see it reset */
    const int src = lntune_open_flags(path, LNTUNE_OPEN_STRICT, &strict);
    test_case(src == strict_rc && (src == LNTUNE_OK) == (strict != NULL),
              "  LNTUNE_OPEN_STRICT: rc %d (%s), want %d", src, lntune_errstr(src), strict_rc);
    lntune_close(strict);
}

static int write_file(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const int ok = fwrite(bytes, 1, n, f) == n;
    return fclose(f) == 0 && ok ? chmod(path, 0600) : -1;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char dir[2048], path[4200];
    snprintf(dir, sizeof dir, "%s/db_status", argv[1]);
    mkdir(dir, 0700);
    if (!test_case(chmod(dir, 0700) == 0, "a private folder %s", dir)) return test_summary();

    tunedb_file t;
    int rc = tunedb_create(&t, dir, "good.db");
    lntune_db_close(t.db);
    test_case(rc == LNTUNE_OK && chmod(t.path, 0600) == 0, "a database of this machine");
    expect_state(t.path, LNTUNE_DB_OK, "this machine is", LNTUNE_OK,
                 "this user's private database");

    chmod(t.path, 0620);
    expect_state(t.path, LNTUNE_DB_UNTRUSTED, "writable by its group", LNTUNE_EDB,
                 "the same database writable by its group");
    chmod(t.path, 0600);

    snprintf(path, sizeof path, "%s/missing.db", dir);
    remove(path);
    expect_state(path, LNTUNE_DB_MISSING, "no tuning database", LNTUNE_ENOTFOUND, "no file");

    snprintf(path, sizeof path, "%s/not_sqlite.db", dir);
    static const char text[] = "a text file where a database should be\n";
    test_case(write_file(path, text, sizeof text - 1) == 0, "write a text file");
    expect_state(path, LNTUNE_DB_UNUSABLE, "", LNTUNE_EDB, "a file that is not SQLite");

    /* this machine's database cut short in its pages: corrupt */
    snprintf(path, sizeof path, "%s/corrupt.db", dir);
    size_t n = 0;
    char *bytes = read_all(t.path, &n);
    test_case(bytes && n > 8192 && write_file(path, bytes, n / 2) == 0,
              "a copy of the good database cut to %zu of its %zu bytes", n / 2, n);
    free(bytes);
    expect_state(path, LNTUNE_DB_UNUSABLE, "", LNTUNE_EDB, "a database cut short");

    snprintf(path, sizeof path, "%s/other_app.db", dir);
    remove(path);
    sqlite3 *sq = NULL;
    rc = sqlite3_open(path, &sq);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(sq, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)", NULL, NULL,
                          NULL);
    sqlite3_close(sq);
    test_case(rc == SQLITE_OK && chmod(path, 0600) == 0, "another application's SQLite file");
    expect_state(path, LNTUNE_DB_UNUSABLE, "", LNTUNE_EDB, "another application's SQLite file");

    lntune_cpu_info other;
    other_machine(&other);
    snprintf(path, sizeof path, "%s/other_machine.db", dir);
    lntune_db *db = NULL;
    int64_t hw = 0;
    rc = create_db_for(path, &other, &db, &hw);
    lntune_db_close(db);
    test_case(rc == LNTUNE_OK && chmod(path, 0600) == 0, "a database of another machine");
    expect_state(path, LNTUNE_DB_OTHER_MACHINE, "no record of this machine", LNTUNE_EDB,
                 "a database of another machine");

    const char *msg = NULL;
    const int state = lntune_db_status(NULL, &msg);
    test_case(state == LNTUNE_DB_MISSING && msg && msg[0] &&
                  lntune_db_status(NULL, NULL) == LNTUNE_DB_MISSING,
              "a NULL handle: MISSING, with a message (%s)", msg ? msg : "NULL");
    return test_summary();
}
