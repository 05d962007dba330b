/*
 * test_db_open_race.c - any number of processes opening one new database at the same instant
 * all succeed. Each round forks PROCS children that block on one pipe; closing its write end
 * wakes them together, and each opens the (missing) file read-write, which creates, switches to
 * WAL and migrates it, then records this machine's hardware row and closes. Every child must
 * exit 0 with no message; the file must pass integrity_check and hold exactly one hardware row.
 *
 *   test_db_open_race [ROUNDS [PROCS]]   (default 40 rounds of 8)
 *
 * The processes take turns at the WAL switch and the migration (core/tuning_db/db_open.c,
 * lock_creation); every open after the first takes no lock. (This case was test_tuning_db's,
 * with an open alone; it moved here to be a ctest of its own.)
 */
#define _GNU_SOURCE
#include "check.h"
#include "hardware.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "tuning_db.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_PROCS = 64 };

/* The child: waits for the start, opens, writes one row, closes; its message to out. */
static int child(int start_fd, const char *db_path, int out_fd) {
    char c;
    if (read(start_fd, &c, 1) != 0) return 3; /* EOF is the start signal */
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    lntune_db *db = NULL;
    int rc = lntune_db_open(db_path, 0, &db);
    int64_t id = 0;
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &cpu, "race-test-cc", &id);
    if (rc != LNTUNE_OK) {
        const char *msg = lntune_db_errmsg(db);
        if (write(out_fd, msg, strlen(msg)) < 0) rc = 4;
    }
    lntune_db_close(db);
    return rc == LNTUNE_OK ? 0 : 1;
}

static int64_t count_rows(const char *path, const char *sql, char *text, size_t size) {
    sqlite3 *sq = NULL;
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(sq, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        n = sqlite3_column_int64(st, 0);
        if (text) snprintf(text, size, "%s", (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(sq);
    return n;
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 40;
    const int procs = argc > 2 ? atoi(argv[2]) : 8;
    if (rounds < 1 || procs < 2 || procs > MAX_PROCS) {
        fprintf(stderr, "usage: test_db_open_race [ROUNDS [PROCS (2-%d)]]\n", MAX_PROCS);
        return 2;
    }
    char dir[4096];
    if (scratch_dir_make(dir, sizeof dir, "db-race")) return 1;
    int failed_opens = 0, bad_files = 0;
    for (int r = 0; r < rounds; ++r) {
        char path[4200];
        snprintf(path, sizeof path, "%s/sub%d/tune.db", dir, r); /* its folder is missing too */
        int start[2], out[MAX_PROCS][2];
        pid_t pid[MAX_PROCS];
        if (pipe(start) != 0) return 1;
        for (int p = 0; p < procs; ++p) {
            if (pipe(out[p]) != 0) return 1;
            pid[p] = fork();
            if (pid[p] == 0) {
                close(start[1]);
                close(out[p][0]);
                _exit(child(start[0], path, out[p][1]));
            }
            close(out[p][1]);
        }
        close(start[0]);
        close(start[1]); /* every child wakes now */
        for (int p = 0; p < procs; ++p) {
            char msg[1200] = "";
            ssize_t n = read(out[p][0], msg, sizeof msg - 1);
            msg[n > 0 ? n : 0] = '\0';
            close(out[p][0]);
            int status = 0;
            waitpid(pid[p], &status, 0);
            const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            EXPECT(code == 0, "round %d, process %d: exit %d: %s", r, p, code, msg);
            failed_opens += code != 0;
        }
        char integrity[64] = "";
        count_rows(path, "PRAGMA integrity_check", integrity, sizeof integrity);
        const int64_t hw = count_rows(path, "SELECT count(*) FROM hardware", NULL, 0);
        EXPECT(strcmp(integrity, "ok") == 0 && hw == 1,
               "round %d: integrity '%s', %lld hardware rows", r, integrity, (long long)hw);
        bad_files += !(strcmp(integrity, "ok") == 0 && hw == 1);
    }
    CHECK(failed_opens == 0,
          "%d rounds of %d processes opening one new database at once: %d failed", rounds, procs,
          failed_opens);
    CHECK(bad_files == 0, "every file passes integrity_check with one hardware row (%d do not)",
          bad_files);
    scratch_dir_finish(dir, check_failures);
    return CHECK_SUMMARY();
}
