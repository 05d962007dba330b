/*
 * test_tuned.c - shapes tuned on this machine run their tuned kernel, loaded from the database's
 * artifact without a compiler: the exact rows bucket, the nearest tuned bucket, the nearest H
 * whose winner reads H at run time (a fixed-H winner never serves another H, its run-time-H
 * twin does; one with non-temporal stores only rows as aligned as its own and only calls past the
 * streaming crossover when tuned past it (a plain-store one also calls under it), and where the
 * nearest does not serve the call, the next nearest of the call's rows bucket that does), a winner
 * of another H only within its measured reach, a multi-threaded winner on the pool, a winner that
 * declines its args (the built-in takes over), and a winner whose artifact is not a loadable shared
 * object (the built-in serves, the call succeeds). Every result is also checked against the float64
 * reference. The built-ins store non-temporally from the streaming crossover the tuner measured and
 * stored for this machine (the nearest thread count's), and LNTUNE_STREAMING_BYTES overrides it
 * (the debug log says).
 *
 *   test_tuned SCRATCH_DIR
 */
#include "best_record.h"
#include "lntune.h"
#include "log_lines.h"
#include "testutil.h"
#include "tunedb.h"

#include <limits.h>
#include <string.h>

/* Runs one call; returns the tuned calls it made, or -1 on a wrong result. */
static int call(lntune *ctx, int op, int64_t H, int64_t rows, int gamma, int beta) {
    float *x = malloc((size_t)(rows * H) * sizeof *x), *y = malloc((size_t)(rows * H) * 4);
    float *g = malloc((size_t)H * sizeof *g), *b = malloc((size_t)H * sizeof *b);
    test_fill(x, rows * H, 10.0, 3.0);
    test_fill(g, H, 1.0, 0.2);
    test_fill(b, H, 0.0, 0.5);
    lntune_args a = {0};
    a.rows = rows, a.H = H, a.x = x, a.y = y;
    a.gamma = gamma ? g : NULL;
    a.beta = beta ? b : NULL;
    int before = __atomic_load_n(&lntune_test_tuned_calls, __ATOMIC_RELAXED);
    int rc = op ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
    double err =
        rc ? INFINITY
           : test_error((lntune_op)op, x, H, y, H, rows, H, a.gamma, a.beta, 1e-5, NULL, NULL);
    int calls = __atomic_load_n(&lntune_test_tuned_calls, __ATOMIC_RELAXED) - before;
    free(x), free(y), free(g), free(b);
    if (rc != LNTUNE_OK || !(err <= TOLERANCE)) {
        printf("      rc %d (%s), error %.3g\n", rc, lntune_errmsg(ctx), err);
        return -1;
    }
    return calls;
}

/* The calls, in order, and how many tuned calls each must make. */
static const struct {
    int op;
    int64_t H, rows;
    int gamma, beta, least, most;
    const char *what;
} calls[] = {
    {0, 768, 64, 1, 1, 1, INT_MAX, "layernorm H=768 rows=64 gamma+beta: tuned kernel ran"},
    {0, 768, 40, 1, 0, 1, INT_MAX, "layernorm H=768 rows=40 gamma only: same bucket, tuned"},
    {0, 768, 1, 1, 1, 1, 1, "layernorm H=768 rows=1: nearest tuned bucket serves it"},
    {0, 768, 64, 0, 0, 0, 0,
     "layernorm H=768 without gamma: the no-gamma winner of H=4096 reaches down to H=2048 only "
     "(its measured reach): built-in"},
    {0, 3000, 16, 0, 0, 1, 1,
     "layernorm H=3000 without gamma: within the no-gamma 4096 winner's reach, it serves"},
    {0, 769, 64, 1, 1, 2, 2,
     "layernorm H=769: not tuned; its rows are less aligned than the 768 winner's, whose twin "
     "stores plainly and serves it, on the winner's 2 threads"},
    {0, 3072, 64, 1, 1, 2, 2,
     "layernorm H=3072: not tuned; the nearest run-time-H winner (H=4096, not the fixed-H 768) "
     "serves it, on its 2 threads"},
    {0, 100000, 3, 1, 1, 1, 2, "layernorm H=100000: the nearest run-time-H winner serves it"},
    {0, 896, 64, 1, 1, 2, 2,
     "layernorm H=896: not tuned; the run-time-H twin of the fixed-H 768 winner serves it (its "
     "rows as aligned), on the winner's 2 threads"},
    {0, 4096, 4, 1, 1, 1, 2,
     "layernorm H=4096 rows=4: the 4096-row winner was tuned past the crossover but stores "
     "plainly, so it serves this call under it too (the store kind follows the call's size)"},
    {1, 8192, 1024, 0, 0, 2, 2,
     "rmsnorm H=8192 rows=1024 without gamma: tuned (non-temporal stores), on its 2 threads"},
    {1, 8192, 2, 0, 0, 1, 1,
     "rmsnorm H=8192 rows=2 without gamma: the 1024-row winner streams its stores and this call "
     "fits under the crossover, so the nearest run-time-H winner (1000's, declining) is asked"},
    {1, 768, 64, 1, 0, 1, 1,
     "rmsnorm H=768: not tuned; the nearest run-time-H winner (1024, non-temporal stores) serves "
     "it, its rows as aligned"},
    {1, 1023, 64, 1, 0, 2, 2,
     "rmsnorm H=1023: not tuned; the nearest run-time-H winner (1024) stores non-temporally and "
     "these rows are less aligned; the next nearest (1536, plain stores, this rows bucket) "
     "serves it on 2 threads"},
    {1, 1024, 1024, 1, 0, 0, 0,
     "rmsnorm H=1024 rows=1024: past the streaming crossover, where no RMSNorm winner was tuned: "
     "built-in"},
    {1, 1000, 1, 0, 0, 1, 1, "rmsnorm H=1000: tuned kernel declined, built-in gave the result"},
    {1, 1000, 1, 0, 0, 1, 1, "rmsnorm H=1000 again: still asks the tuned one first"},
    {0, 4096, 4096, 1, 1, 2, 2, "layernorm H=4096 rows=4096: tuned, split over its 2 threads"},
    {0, 512, 1, 0, 0, 0, 0, "layernorm H=512: unloadable artifact, built-in serves"},
};

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    tunedb_file t;
    int rc = tunedb_create(&t, argv[1], "tuned.db");
    if (!test_case(rc == LNTUNE_OK, "create a database for this machine (%s): rc %d %s",
                   t.cpu.fingerprint, rc, t.db ? lntune_db_errmsg(t.db) : "")) {
        lntune_db_close(t.db);
        return test_summary();
    }
    /* Winners: 768 at rows 9-64 (fixed H, 2 threads, with its twin); 1000 declining; 4096 at
     * 4096 rows; RMSNorm 1024 with non-temporal stores, 1536 with plain ones (2 threads). */
    int ok = put_tuned(t.db, t.hw, "layernorm",
                       "vec=8,acc=4,stats=welford,affine=fused,h=fixed,threads=2", 768, 64, 1, 2,
                       TUNED_RUNS) == 0;
    ok &= put_twin(t.db, t.hw, "layernorm",
                   "vec=8,acc=4,stats=welford,affine=fused,h=runtime,threads=2", 768, 64, 1) == 0;
    ok &= put_tuned(t.db, t.hw, "rmsnorm", "vec=4,stats=wide,affine=none,threads=1", 1000, 1, 0, 1,
                    TUNED_DECLINES) == 0;
    ok &= put_tuned(t.db, t.hw, "layernorm", "vec=8,acc=2,stats=onepass,affine=fused,threads=2",
                    4096, 4096, 1, 2, TUNED_RUNS) == 0;
    ok &= put_tuned(t.db, t.hw, "rmsnorm", "vec=4,stats=wide,affine=fused,store=nt,threads=1", 1024,
                    64, 1, 1, TUNED_RUNS) == 0;
    ok &= put_tuned(t.db, t.hw, "rmsnorm", "vec=4,stats=wide,affine=fused,threads=2", 1536, 64, 1,
                    2, TUNED_RUNS) == 0;
    /* A no-gamma fixed-H winner with non-temporal stores, tuned past the crossover. */
    ok &=
        put_tuned(t.db, t.hw, "rmsnorm", "vec=4,stats=wide,affine=none,store=nt,h=fixed,threads=2",
                  8192, 1024, 0, 2, TUNED_RUNS) == 0;
    /* A no-gamma winner whose reach (tuner.c's store_reach) is H = 2048 to 8192. */
    const lntune_db_key reach = {t.hw, "cpu", "layernorm", "f32", 4096, 16, 0};
    ok &= put_tuned(t.db, t.hw, "layernorm", "vec=8,acc=2,stats=twopass,affine=none,threads=1",
                    4096, 16, 0, 1, TUNED_RUNS) == 0 &&
          lntune_db_set_reach(t.db, &reach, 2048, 8192) == LNTUNE_OK;
    /* A winner whose artifact holds no shared object the loader can use. */
    lntune_artifact junk = {"junk", "",   "cc", "", "tuned_entry", NULL, 0, "not an ELF file",
                            15,     NULL, NULL};
    lntune_db_key k = {t.hw, "cpu", "layernorm", "f32", 512, 1, 0};
    lntune_best best = test_best("vec=4", "junk", 1, 1, 1.0, 1.0, 1.0, 0.0, 1.0);
    ok &= lntune_db_put_artifact(t.db, &junk) == LNTUNE_OK &&
          lntune_db_set_best(t.db, &k, &best) == 0;
    test_case(ok, "store eight tuned winners (one with a reach) and a twin with their artifacts");
    ok = lntune_db_put_crossover(t.db, t.hw, "streaming_bytes", 1, 1234567, "h") == LNTUNE_OK &&
         lntune_db_put_crossover(t.db, t.hw, "streaming_bytes", 64, 7654321, "h") == LNTUNE_OK &&
         lntune_db_put_crossover(t.db, t.hw, "streaming_row_alignment", 1, 16, "h") == LNTUNE_OK;
    test_case(ok, "store streaming crossovers at 1 and 64 threads, a row alignment at 1");
    lntune_db_close(t.db);

    char log[4200];
    snprintf(log, sizeof log, "%s/crossover.log", argv[1]);
    for (int env = 0; env < 2; ++env) {
        if (env) setenv("LNTUNE_STREAMING_BYTES", "999", 1);
        lntune *probe = NULL;
        const int saved = log_capture_begin(log);
        setenv("LNTUNE_NUM_THREADS", "1", 1);
        rc = lntune_open(t.path, &probe);
        lntune_close(probe);
        unsetenv("LNTUNE_NUM_THREADS");
        log_capture_end(saved);
        unsetenv("LNTUNE_STREAMING_BYTES");
        const char *want = env ? "from 999 bytes" : "from 1234567 bytes";
        if (log_lines(log, "built-in CPU kernels: generic", "", 0) == 1) {
            printf("skip: the generic built-ins have no streaming copy\n");
            continue;
        }
        test_case(rc == LNTUNE_OK && log_lines(log, "non-temporal stores", want, 0) == 1 &&
                      log_lines(log, want, "on rows of y aligned to 16 bytes", 0) == 1,
                  "the built-ins stream %s on rows aligned to 16 bytes (%s)", want,
                  env ? "LNTUNE_STREAMING_BYTES over the measured crossover"
                      : "the crossover measured at 1 thread, for a 1-thread handle");
    }

    lntune *ctx = NULL;
    rc = lntune_open(t.path, &ctx);
    if (!test_case(rc == LNTUNE_OK, "open the runtime on it: rc %d", rc)) return test_summary();
    int n;
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
        n = call(ctx, calls[i].op, calls[i].H, calls[i].rows, calls[i].gamma, calls[i].beta);
        test_case(n >= calls[i].least && n <= calls[i].most, "%s (%d calls)", calls[i].what, n);
    }
    for (int i = 0; i < 3; ++i) n = call(ctx, 0, 768, 64, 1, 1);
    test_case(n >= 1, "repeat calls keep the tuned kernel (%d calls)", n);
    lntune_close(ctx);
    return test_summary();
}
