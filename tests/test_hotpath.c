/*
 * test_hotpath.c - after its first call, a shape costs no SQL, no file I/O, no compilation and
 * no lock: this program defines the functions that would do those (open, read, fopen, dlopen,
 * fork, exec, pthread_mutex_lock, sqlite3_step, ...) itself, counting calls made while counting
 * is on and forwarding to the real ones. liblntune calls them through its PLT, so the program's
 * definitions (exported by ENABLE_EXPORTS) are the ones it reaches.
 *
 * The first calls must be counted (they read SQLite and take the mutex), which shows the
 * counters see liblntune; the thousands of calls after them must count nothing. The database
 * file is then removed and calls go on working.
 *
 *   test_hotpath SCRATCH_DIR
 */
#define _GNU_SOURCE
#include "lntune.h"
#include "testutil.h"
#include "tunedb.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static atomic_int counting;
static atomic_int n_file, n_sql, n_lock, n_proc;

#define REAL(name) ((__typeof__(&name))real(#name))
static void *real(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) abort();
    return p;
}
#define COUNT(counter)                                                                             \
    do {                                                                                           \
        if (atomic_load_explicit(&counting, memory_order_relaxed))                                 \
            atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);                          \
    } while (0)
/* An open-like call's mode, the int after its named parameter last. */
#define MODE_AFTER(last)                                                                           \
    __extension__({                                                                                \
        va_list ap_;                                                                               \
        va_start(ap_, last);                                                                       \
        const int mode_ = va_arg(ap_, int);                                                        \
        va_end(ap_);                                                                               \
        mode_;                                                                                     \
    })

int open(const char *path, int flags, ...) {
    const int mode = MODE_AFTER(flags);
    COUNT(n_file);
    return REAL(open)(path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    const int mode = MODE_AFTER(flags);
    COUNT(n_file);
    return REAL(open64)(path, flags, mode);
}
int openat(int dir, const char *path, int flags, ...) {
    const int mode = MODE_AFTER(flags);
    COUNT(n_file);
    return REAL(openat)(dir, path, flags, mode);
}
FILE *fopen(const char *path, const char *mode) {
    COUNT(n_file);
    return REAL(fopen)(path, mode);
}
ssize_t read(int fd, void *buf, size_t n) {
    COUNT(n_file);
    return REAL(read)(fd, buf, n);
}
ssize_t pread64(int fd, void *buf, size_t n, off_t off) {
    COUNT(n_file);
    return REAL(pread64)(fd, buf, n, off);
}
ssize_t write(int fd, const void *buf, size_t n) {
    COUNT(n_file);
    return REAL(write)(fd, buf, n);
}
int memfd_create(const char *name, unsigned flags) {
    COUNT(n_file);
    return REAL(memfd_create)(name, flags);
}
void *dlopen(const char *file, int mode) {
    COUNT(n_file);
    return REAL(dlopen)(file, mode);
}
pid_t fork(void) {
    COUNT(n_proc);
    return REAL(fork)();
}
int execve(const char *path, char *const argv[], char *const envp[]) {
    COUNT(n_proc);
    return REAL(execve)(path, argv, envp);
}
int execvp(const char *file, char *const argv[]) {
    COUNT(n_proc);
    return REAL(execvp)(file, argv);
}
int pthread_mutex_lock(pthread_mutex_t *m) {
    COUNT(n_lock);
    return REAL(pthread_mutex_lock)(m);
}
int sqlite3_prepare_v2(sqlite3 *db, const char *sql, int n, sqlite3_stmt **st, const char **tail) {
    COUNT(n_sql);
    return REAL(sqlite3_prepare_v2)(db, sql, n, st, tail);
}
int sqlite3_prepare_v3(sqlite3 *db, const char *sql, int n, unsigned flags, sqlite3_stmt **st,
                       const char **tail) {
    COUNT(n_sql);
    return REAL(sqlite3_prepare_v3)(db, sql, n, flags, st, tail);
}
int sqlite3_step(sqlite3_stmt *st) {
    COUNT(n_sql);
    return REAL(sqlite3_step)(st);
}
int sqlite3_exec(sqlite3 *db, const char *sql, int (*cb)(void *, int, char **, char **), void *ud,
                 char **err) {
    COUNT(n_sql);
    return REAL(sqlite3_exec)(db, sql, cb, ud, err);
}

static void reset(void) {
    atomic_store(&n_file, 0), atomic_store(&n_sql, 0), atomic_store(&n_lock, 0);
    atomic_store(&n_proc, 0);
}

enum { SHAPES = 4 };
static const int64_t shape_h[SHAPES] = {768, 768, 100, 3000};
static const int shape_op[SHAPES] = {0, 1, 0, 1};

static int calls(lntune *ctx, float *x, float *y, float *g, int repeat) {
    for (int r = 0; r < repeat; ++r)
        for (int s = 0; s < SHAPES; ++s) {
            lntune_args a = {0};
            a.rows = 1, a.H = shape_h[s], a.x = x, a.y = y, a.gamma = g;
            int rc = shape_op[s] ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
            if (rc != LNTUNE_OK) return rc;
        }
    return LNTUNE_OK;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    tunedb_file t;
    int rc = tunedb_create(&t, argv[1], "hotpath.db");
    if (rc == LNTUNE_OK)
        rc = put_tuned(t.db, t.hw, "layernorm", "vec=8,affine=fused,threads=1", 768, 1, 1, 1,
                       TUNED_RUNS);
    test_case(rc == LNTUNE_OK, "a database with a tuned layernorm H=768: rc %d", rc);
    lntune_db_close(t.db);
    const char *path = t.path;

    float *x = malloc(3000 * sizeof *x), *y = malloc(3000 * sizeof *y);
    float *g = malloc(3000 * sizeof *g);
    test_fill(x, 3000, 1.0, 1.0);
    test_fill(g, 3000, 1.0, 0.1);
    lntune *ctx = NULL;
    rc = lntune_open(path, &ctx);
    test_case(rc == LNTUNE_OK, "open: rc %d", rc);

    reset();
    atomic_store(&counting, 1);
    rc = calls(ctx, x, y, g, 1);
    atomic_store(&counting, 0);
    test_case(rc == LNTUNE_OK, "first calls of %d shapes: rc %d", SHAPES, rc);
    test_case(atomic_load(&n_sql) > 0 && atomic_load(&n_lock) > 0,
              "first calls are seen: %d SQLite calls, %d locks, %d file calls (the counters "
              "work)",
              atomic_load(&n_sql), atomic_load(&n_lock), atomic_load(&n_file));
    int tuned_before = lntune_test_tuned_calls;

    reset();
    atomic_store(&counting, 1);
    rc = calls(ctx, x, y, g, 2500);
    atomic_store(&counting, 0);
    /* layernorm H=768, and H=100 too: its rows are less aligned than the H=768 winner's, whose
     * plain stores serve rows of any alignment (dispatch.c). */
    test_case(rc == LNTUNE_OK && lntune_test_tuned_calls - tuned_before == 5000,
              "10000 more calls: rc %d, the tuned kernel ran %d times", rc,
              lntune_test_tuned_calls - tuned_before);
    test_case(atomic_load(&n_sql) == 0, "  no SQL after the first call: %d", atomic_load(&n_sql));
    test_case(atomic_load(&n_file) == 0, "  no file I/O, memfd or dlopen: %d",
              atomic_load(&n_file));
    test_case(atomic_load(&n_proc) == 0, "  no compiler process: %d", atomic_load(&n_proc));
    test_case(atomic_load(&n_lock) == 0, "  no mutex taken: %d", atomic_load(&n_lock));

    remove(path);
    reset();
    atomic_store(&counting, 1);
    rc = calls(ctx, x, y, g, 10);
    atomic_store(&counting, 0);
    test_case(rc == LNTUNE_OK && atomic_load(&n_file) == 0 && atomic_load(&n_sql) == 0,
              "the database file removed: calls still succeed (rc %d), touching nothing", rc);
    double err =
        test_error(LNTUNE_OP_RMSNORM, x, 3000, y, 3000, 1, 3000, g, NULL, 1e-5, NULL, NULL);
    test_case(err <= TOLERANCE, "  and stay correct: error %.3g", err);
    lntune_close(ctx);
    free(x), free(y), free(g);
    return test_summary();
}
