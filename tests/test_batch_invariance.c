/*
 * test_batch_invariance.c - under LNTUNE_OPEN_BATCH_INVARIANT every row's y, mean and rstd have
 * the same bits whatever call it comes in: alone, in batches of every size at every place, in a
 * call of 1024 rows, on 1 or 2 threads; served by tuned kernels (two winners of one H whose
 * reduction orders differ, at 1 row and at 64 rows) and by the built-in (whose non-temporal
 * copy a default handle switches to for large calls). A default handle on the same database
 * gives a row other bits alone than in a batch of 64: the comparison this test makes can fail.
 */
#include "testutil.h"
#include "tunedb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    H = 1008,
    ROWS = 40,
    BIG = 1024
}; /* rows of 4032 bytes: 64-byte aligned, so built-ins may stream */

/* Per op: the winner at 1 row and the one at 64 rows (another vector width, accumulators and
 * statistic: another order of additions). vec 1 and 4 are valid on every x86-64 and AArch64. */
static const char *const winners[2][2] = {
    {"vec=1,acc=1,stats=twopass,affine=fused,rows=1,threads=1",
     "vec=4,acc=4,stats=sampled,affine=fused,rows=4,threads=2"},
    {"vec=1,acc=1,stats=blocked,affine=fused,rows=1,threads=1",
     "vec=4,acc=4,stats=wide,affine=fused,rows=4,threads=2"}};

static float *x, *gamma_, *beta_;

/* One call of n rows starting at input row `first` (rows wrap around the ROWS drawn). */
typedef struct {
    float y[BIG * H], mean[BIG], rstd[BIG];
} outputs;

static int call(lntune *ctx, int op, const float *rows_x, int64_t n, outputs *o) {
    lntune_args a = {0};
    a.rows = n;
    a.H = H;
    a.x = rows_x;
    a.y = o->y;
    a.gamma = gamma_;
    a.beta = op == 0 ? beta_ : NULL;
    a.mean = o->mean;
    a.rstd = o->rstd;
    return op == 0 ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
}

/* Whether row k of o (input row `row`) has the bits of want's row `row`. */
static int same_row(const outputs *o, int64_t k, const outputs *want, int64_t row) {
    return memcmp(o->y + k * H, want->y + row * H, H * sizeof(float)) == 0 &&
           memcmp(&o->mean[k], &want->mean[row], sizeof(float)) == 0 &&
           memcmp(&o->rstd[k], &want->rstd[row], sizeof(float)) == 0;
}

/* Each row alone into want. */
static int rows_alone(lntune *ctx, int op, outputs *want, outputs *scratch) {
    for (int r = 0; r < ROWS; ++r) {
        if (call(ctx, op, x + (int64_t)r * H, 1, scratch) != LNTUNE_OK) return 0;
        memcpy(want->y + (int64_t)r * H, scratch->y, H * sizeof(float));
        want->mean[r] = scratch->mean[0];
        want->rstd[r] = scratch->rstd[0];
    }
    return 1;
}

/* Every batch [s, s + n) of the ROWS rows, then BIG rows (row k is input row k % ROWS), against
 * want; "" if all agree, else what differed first (in buf). */
static const char *batches_agree(lntune *ctx, int op, const outputs *want, outputs *o, char *buf,
                                 size_t size) {
    for (int n = 1; n <= ROWS; ++n)
        for (int s = 0; s + n <= ROWS; ++s) {
            if (call(ctx, op, x + (int64_t)s * H, n, o) != LNTUNE_OK)
                return snprintf(buf, size, "the call of rows [%d, %d) failed: %s", s, s + n,
                                lntune_errmsg(ctx)),
                       buf;
            for (int k = 0; k < n; ++k)
                if (!same_row(o, k, want, s + k))
                    return snprintf(buf, size, "row %d differs in the call of rows [%d, %d)", s + k,
                                    s, s + n),
                           buf;
        }
    if (call(ctx, op, x, BIG, o) != LNTUNE_OK)
        return snprintf(buf, size, "the call of %d rows failed", BIG), buf;
    for (int k = 0; k < BIG; ++k)
        if (!same_row(o, k, want, k % ROWS))
            return snprintf(buf, size, "row %d differs in the call of %d rows", k, BIG), buf;
    return "";
}

static lntune *open_with(const char *db, unsigned flags, const char *threads) {
    setenv("LNTUNE_NUM_THREADS", threads, 1); /* read by the open */
    lntune *ctx = NULL;
    int rc = lntune_open_flags(db, flags, &ctx);
    test_case(rc == LNTUNE_OK && ctx, "open %s with flags %u, %s thread(s): rc %d", db, flags,
              threads, rc);
    return ctx;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    static outputs want, first, o;
    x = malloc((size_t)BIG * H * sizeof *x);
    gamma_ = malloc(H * sizeof *gamma_);
    beta_ = malloc(H * sizeof *beta_);
    for (int r = 0; r < ROWS; ++r) { /* some rows far from 0, one far from its first elements */
        test_fill(x + (int64_t)r * H, H, r % 3 ? 0.0 : 100.0, 1.0);
        if (r == 7)
            for (int i = 0; i < 32; ++i) x[(int64_t)r * H + i] += 50.0f;
    }
    for (int k = ROWS; k < BIG; ++k) memcpy(x + (int64_t)k * H, x + (int64_t)(k % ROWS) * H, H * 4);
    test_fill(gamma_, H, 1.0, 0.1);
    test_fill(beta_, H, 0.0, 0.1);

    lntune *bad = (lntune *)x;
    test_case(lntune_open_flags(NULL, 0x80u, &bad) == LNTUNE_EINVAL && bad == NULL,
              "an unknown flag is LNTUNE_EINVAL, and *out is NULL");
    test_case(lntune_open_flags(NULL, LNTUNE_OPEN_BATCH_INVARIANT, NULL) == LNTUNE_EINVAL,
              "out == NULL is LNTUNE_EINVAL");

    tunedb_file t;
    int rc = tunedb_create(&t, argv[1], "invariance.db");
    int ok = rc == LNTUNE_OK;
    const char *const ops[2] = {"layernorm", "rmsnorm"};
    for (int op = 0; ok && op < 2; ++op)
        ok = put_tuned(t.db, t.hw, ops[op], winners[op][0], H, 1, 1, 1, TUNED_RUNS) == 0 &&
             put_tuned(t.db, t.hw, ops[op], winners[op][1], H, 64, 1, 2, TUNED_RUNS) == 0;
    lntune_db_close(t.db);
    if (!test_case(ok, "a database with two winners of H=%d per op, at 1 and at 64 rows", H))
        return test_summary();

    char missing[4200], why[256];
    snprintf(missing, sizeof missing, "%s/no-such.db", argv[1]);
    setenv("LNTUNE_STREAMING_BYTES", "65536", 1); /* the built-ins' big calls stream */
    for (int op = 0; op < 2; ++op) {
        /* The default handle: a row alone runs the 1-row winner, in 64 rows the other one. */
        lntune *plain = open_with(t.path, 0, "2");
        int differs = 0;
        if (plain && rows_alone(plain, op, &want, &o) && call(plain, op, x, 64, &o) == LNTUNE_OK)
            for (int k = 0; k < ROWS && !differs; ++k) differs = !same_row(&o, k, &want, k);
        test_case(differs,
                  "%s, default handle: some row has other bits alone than in a call of 64 rows "
                  "(two winners, two orders of additions): the check below can fail",
                  ops[op]);
        lntune_close(plain);

        for (int db = 0; db < 2; ++db) {
            const char *path = db == 0 ? t.path : missing;
            const char *served = db == 0 ? "tuned" : "built-in";
            for (int threads = 1; threads <= 2; ++threads) {
                lntune *ctx =
                    open_with(path, LNTUNE_OPEN_BATCH_INVARIANT, threads == 1 ? "1" : "2");
                if (!ctx) continue;
                const int calls_before = lntune_test_tuned_calls;
                if (!test_case(rows_alone(ctx, op, threads == 1 ? &first : &want, &o),
                               "%s, %s: each row alone", ops[op], served)) {
                    lntune_close(ctx);
                    continue;
                }
                if (db == 0)
                    test_case(lntune_test_tuned_calls >= calls_before + ROWS,
                              "%s: a 1-row call runs the tuned kernel of 64 rows (%d calls)",
                              ops[op], lntune_test_tuned_calls - calls_before);
                if (threads == 2)
                    test_case(memcmp(&want, &first, sizeof want) == 0,
                              "%s, %s: rows alone on 1 and on 2 threads agree", ops[op], served);
                const char *diff = batches_agree(ctx, op, &first, &o, why, sizeof why);
                test_case(!*diff,
                          "%s, %s, %d thread(s): every batch of every size and place, and %d "
                          "rows, give each row its bits alone %s",
                          ops[op], served, threads, BIG, diff);
                lntune_close(ctx);
            }
        }
    }
    unsetenv("LNTUNE_STREAMING_BYTES");
    free(x), free(gamma_), free(beta_);
    return test_summary();
}
