/*
 * test_wisdom_rebuild.c - wisdom moves figures, never code, and the code is built here (issue
 * 38): a database tuned by the real tuner (RMSNorm, 8x64, quick rigor) is exported as wisdom and
 * imported into an empty database, then:
 *   - the wisdom file holds no machine code (no ELF bytes, no artifact);
 *   - before the rebuild, liblntune serves the shape with the built-in (no code came) and the
 *     debug log says so;
 *   - lntune_rebuild_imported compiles and verifies the winner here: the same variant is then
 *     served tuned, with the right answer, from an artifact whose digest checks;
 *   - a second rebuild finds nothing to do;
 *   - in a copy whose measurements name another template hash, the winner is stale: nothing is
 *     built, and the built-in serves;
 *   - three databases (the tuned one, and two with records of other machines) merge into one
 *     that keeps every machine's winners.
 *
 *   test_wisdom_rebuild SCRATCH_DIR
 */
#define _GNU_SOURCE
#include "best_record.h"
#include "hardware.h"
#include "lntune.h"
#include "log_lines.h"
#include "rebuild.h"
#include "scratch_dir.h"
#include "testutil.h"
#include "logged_call.h"
#include "tuner.h"
#include "tuning_db.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

enum { H = 64, ROWS = 8 };

/* One RMSNorm call of ROWS x H through a new handle on path, the debug log to log; 0 when the
 * answer matches the float64 reference. */
static int call(const char *path, const char *log) {
    return logged_call(path, log, LNTUNE_OP_RMSNORM, ROWS, H, 0);
}

typedef struct {
    char variant[256];
    int n;
} winner;

static int first_winner(void *ud, const lntune_db_key *key, const lntune_best *b) {
    winner *w = ud;
    (void)key;
    if (w->n++ == 0) snprintf(w->variant, sizeof w->variant, "%s", b->variant);
    return 0;
}

/* The winners of every machine in the database at path; the first one's variant in *w. */
static int winners(const char *path, winner *w) {
    lntune_db *db = NULL;
    memset(w, 0, sizeof *w);
    if (lntune_db_open(path, LNTUNE_DB_READONLY, &db) == LNTUNE_OK)
        lntune_db_each_best(db, 0, first_winner, w);
    lntune_db_close(db);
    return w->n;
}

/* Runs sql on the database at path; 0 on success. */
static int sql(const char *path, const char *text) {
    sqlite3 *db = NULL;
    char *msg = NULL;
    const int ok = sqlite3_open(path, &db) == SQLITE_OK &&
                   sqlite3_exec(db, text, NULL, NULL, &msg) == SQLITE_OK;
    if (!ok) printf("      sql: %s\n", msg ? msg : db ? sqlite3_errmsg(db) : "no database");
    sqlite3_free(msg);
    sqlite3_close(db);
    return ok ? 0 : -1;
}

/* Wisdom of the database at from imported into a new database at to; 0 on success. */
static int export_import(const char *from, const char *file, const char *to) {
    lntune_db *src = NULL, *dst = NULL;
    int machines = 0, rc = lntune_db_open(from, LNTUNE_DB_READONLY, &src);
    FILE *f = rc == LNTUNE_OK ? fopen(file, "w") : NULL;
    if (f) {
        rc = lntune_db_wisdom_export(src, f, &machines);
        fclose(f);
    }
    lntune_db_close(src);
    lntune_wisdom_report r;
    if (rc == LNTUNE_OK && f && (f = fopen(file, "r")) != NULL) {
        remove(to);
        rc = lntune_db_open(to, 0, &dst);
        if (rc == LNTUNE_OK) rc = lntune_db_wisdom_import(dst, f, &r);
        if (rc != LNTUNE_OK) printf("      import: %s\n", lntune_db_errmsg(dst));
        lntune_db_close(dst);
        fclose(f);
    }
    return rc == LNTUNE_OK && machines == 1 ? 0 : -1;
}

/* Whether the file at path holds the bytes of an ELF header or the word "artifact". */
static int holds_code(const char *path) {
    FILE *f = fopen(path, "rb");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    return memmem(buf, n,
                  "\x7f"
                  "ELF",
                  4) != NULL ||
           strstr(buf, "artifact") != NULL;
}

/* A database at path with one winner of a made-up machine fp (a hardware row and its best). */
static int other_machine(const char *path, const char *fp) {
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    snprintf(cpu.model, sizeof cpu.model, "another machine %s", fp);
    snprintf(cpu.fingerprint, sizeof cpu.fingerprint, "%s", fp);
    lntune_db *db = NULL;
    int64_t hw = 0;
    remove(path);
    int rc = lntune_db_open(path, 0, &db);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &cpu, "cc", &hw);
    const lntune_db_key key = {hw, "cpu", "layernorm", "f32", 4096, 2048, 1};
    lntune_best b = test_best("vec=8", NULL, 1, 2048, 1000.0, 60.0, 62.0, 1e-7, 3000.0);
    b.any_h = 1;
    if (rc == LNTUNE_OK) rc = lntune_db_set_best(db, &key, &b);
    if (rc != LNTUNE_OK) printf("      %s: %s\n", path, lntune_db_errmsg(db));
    lntune_db_close(db);
    return rc == LNTUNE_OK ? 0 : -1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char dir[1024], tuned[1200], wisdom[1200], imported[1200], stale[1200], log[1200];
    (void)argc;
    (void)argv;
    if (scratch_dir_make(dir, sizeof dir, "wisdom_rebuild") != 0) {
        printf("FAIL cannot make a scratch directory\n");
        return 1;
    }
    chmod(dir, 0700);
    snprintf(tuned, sizeof tuned, "%s/tuned.db", dir);
    snprintf(wisdom, sizeof wisdom, "%s/wisdom.jsonl", dir);
    snprintf(imported, sizeof imported, "%s/imported.db", dir);
    snprintf(stale, sizeof stale, "%s/stale.db", dir);
    snprintf(log, sizeof log, "%s/log", dir);

    /* The real tuner, quick rigor, one thread: a winner with its artifact. */
    static const char *const ops[] = {"rmsnorm"};
    const lntune_shape shape = {.H = H, .rows = ROWS};
    lntune_tune_config cfg = {.db_path = tuned,
                              .ops = ops,
                              .nops = 1,
                              .shapes = &shape,
                              .nshapes = 1,
                              .max_threads = 1,
                              .rigor = LNTUNE_RIGOR_QUICK};
    lntune_tune_result *res = NULL;
    size_t n = 0;
    char err[1024] = "";
    int rc = lntune_tune(&cfg, &res, &n, err, sizeof err);
    test_case(rc == LNTUNE_OK && n == 1 && res[0].variant[0], "tuned RMSNorm 8x64 for the test");
    if (rc != LNTUNE_OK || n != 1) {
        printf("      %s\n", err);
        return 1;
    }
    char variant[256];
    snprintf(variant, sizeof variant, "%s", res[0].variant);
    free(res);

    test_case(call(tuned, log) == 0 && log_lines(log, "tuned", variant, 0) == 1,
              "control: the tuned database serves its winner");

    test_case(export_import(tuned, wisdom, imported) == 0,
              "exported and imported into a new database");
    test_case(!holds_code(wisdom), "the wisdom file holds no machine code");
    winner w;
    test_case(winners(imported, &w) == 1 && strcmp(w.variant, variant) == 0,
              "the imported database holds the same winner");
    test_case(call(imported, log) == 0 &&
                  log_lines(log, "built-in kernel", "no compiled kernel", 0) == 1,
              "before the rebuild: the built-in serves (no code came), and the log says so");
    lntune_db_health h;
    test_case(lntune_db_doctor(imported, &h) == LNTUNE_OK && h.winners == 1 && h.loadable == 0 &&
                  strstr(h.first_unloadable, "no compiled code"),
              "doctor agrees: 1 winner of this machine, 0 loadable");

    lntune_rebuild_report r;
    rc = lntune_rebuild_imported(imported, 1, &r, err, sizeof err);
    printf("      rebuild: %d considered, %d rebuilt, %d stale, %d failed %s\n", r.considered,
           r.rebuilt, r.stale, r.failed, err);
    test_case(rc == LNTUNE_OK && r.considered == 1 && r.rebuilt == 1,
              "the rebuild compiled and verified the winner here");
    test_case(call(imported, log) == 0 && log_lines(log, "tuned", variant, 0) == 1,
              "after the rebuild: the same variant serves the call, with the right answer");
    test_case(lntune_db_doctor(imported, &h) == LNTUNE_OK && h.artifacts == 1 && h.intact == 1 &&
                  h.winners == 1 && h.loadable == 1,
              "its artifact hashes to the recorded digest; doctor: 1 winner, 1 loadable");
    rc = lntune_rebuild_imported(imported, 1, &r, err, sizeof err);
    test_case(rc == LNTUNE_OK && r.considered == 0, "a second rebuild finds nothing to do");

    /* Stale: the measurements of another template (or toolchain). */
    test_case(export_import(tuned, wisdom, stale) == 0 &&
                  sql(stale, "UPDATE measurements SET template_hash = 'another template'") == 0,
              "a copy whose measurements name another template hash");
    rc = lntune_rebuild_imported(stale, 1, &r, err, sizeof err);
    test_case(rc == LNTUNE_OK && r.considered == 1 && r.stale == 1 && r.rebuilt == 0,
              "its winner is stale: nothing is built");
    test_case(call(stale, log) == 0 &&
                  log_lines(log, "built-in kernel", "no compiled kernel", 0) == 1,
              "the stale winner never loads: the built-in serves");
    test_case(lntune_db_doctor(stale, &h) == LNTUNE_OK && h.winners == 1 && h.loadable == 0,
              "doctor agrees: the stale winner is not loadable");

    /* Three databases merged: every machine's winners kept. */
    char a[1200], b[1200], merged[1200];
    snprintf(a, sizeof a, "%s/a.db", dir);
    snprintf(b, sizeof b, "%s/b.db", dir);
    snprintf(merged, sizeof merged, "%s/merged.db", dir);
    remove(merged);
    lntune_db *m = NULL;
    lntune_wisdom_report mr;
    rc = other_machine(a, "00000000000000aa") == 0 && other_machine(b, "00000000000000bb") == 0
             ? lntune_db_open(merged, 0, &m)
             : LNTUNE_EDB;
    const char *sources[] = {tuned, a, b};
    for (int i = 0; i < 3 && rc == LNTUNE_OK; ++i) rc = lntune_db_wisdom_merge(m, sources[i], &mr);
    if (rc != LNTUNE_OK) printf("      merge: %s\n", m ? lntune_db_errmsg(m) : "cannot open");
    lntune_db_close(m);
    int machines = 0;
    lntune_db *md = NULL;
    if (lntune_db_open(merged, LNTUNE_DB_READONLY, &md) == LNTUNE_OK) {
        int64_t id;
        machines = (lntune_db_find_hardware(md, "00000000000000aa", &id) == LNTUNE_OK) +
                   (lntune_db_find_hardware(md, "00000000000000bb", &id) == LNTUNE_OK);
    }
    lntune_db_close(md);
    test_case(rc == LNTUNE_OK && winners(merged, &w) == 3 && machines == 2,
              "three databases merged: 3 winners of 3 machines kept apart");

    scratch_dir_finish(dir, test_failures);
    return test_summary();
}
