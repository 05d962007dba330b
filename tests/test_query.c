/*
 * test_query.c - lntune_query says which kernel a call would run, and why, from the dispatcher's
 * own decision:
 *  - on a database with a tuned LayerNorm (H = 4096, 16 rows, no gamma, reach H 2048..8192): its
 *    shape is served by that winner (variant, tuned H and rows, threads); H = 3000 by the same
 *    winner as a nearest H; H = 768, outside its reach, by the built-in, and the reason says
 *    the reach; each answer matches what the call then runs (tuned calls counted); the tuned
 *    kernel in place (y = x) gives the bits of its call out of place;
 *  - without a database every shape is the built-in's, and the reason names the database;
 *  - an empty call is served by nothing; bad args get the call's code and message; an unknown
 *    op, a NULL info and a bad info.struct_size are LNTUNE_EINVAL.
 *
 *   test_query SCRATCH_DIR
 */
#include "lntune.h"
#include "testutil.h"
#include "tunedb.h"

#include <string.h>

enum { ROWS = 16, MAXH = 4096 };

static float x[ROWS * MAXH], y[ROWS * MAXH], in_place[ROWS * MAXH];

static lntune_args args_of(int64_t H) {
    lntune_args a = LNTUNE_ARGS_INIT;
    a.rows = ROWS, a.H = H, a.x = x, a.y = y;
    return a;
}

/* Queries LayerNorm at H, then calls it: 1 if the call ran a tuned kernel. */
static int query_then_call(lntune *ctx, int64_t H, lntune_kernel_info *info, int *rc) {
    lntune_args a = args_of(H);
    *info = (lntune_kernel_info)LNTUNE_KERNEL_INFO_INIT;
    *rc = lntune_query(ctx, LNTUNE_LAYERNORM, &a, info);
    const int before = lntune_test_tuned_calls;
    if (*rc == LNTUNE_OK) *rc = lntune_layernorm(ctx, &a);
    return lntune_test_tuned_calls > before;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    test_fill(x, ROWS * MAXH, 1.0, 2.0);
    tunedb_file t;
    int rc = tunedb_create(&t, argv[1], "query.db");
    const lntune_db_key reach = {t.hw, "cpu", "layernorm", "f32", MAXH, ROWS, 0};
    int ok = rc == LNTUNE_OK &&
             put_tuned(t.db, t.hw, "layernorm", "vec=8,acc=2,stats=twopass,affine=none,threads=1",
                       MAXH, ROWS, 0, 1, TUNED_RUNS) == 0 &&
             lntune_db_set_reach(t.db, &reach, 2048, 8192) == LNTUNE_OK;
    lntune_db_close(t.db);
    if (!test_case(ok, "a database with LayerNorm tuned at H=4096, 16 rows, reach 2048..8192"))
        return test_summary();

    lntune *ctx = NULL;
    if (!test_case(lntune_open(t.path, &ctx) == LNTUNE_OK, "open it")) return test_summary();
    lntune_kernel_info info;
    int tuned = query_then_call(ctx, MAXH, &info, &rc);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_TUNED &&
                  strstr(info.variant, "stats=twopass") && info.tuned_H == MAXH &&
                  info.tuned_rows == ROWS && info.threads == 1 && tuned,
              "H=4096: tuned %s (H=%lld, rows=%lld, %d thread(s)); the call ran it: %d; reason: %s",
              info.variant, (long long)info.tuned_H, (long long)info.tuned_rows, info.threads,
              tuned, info.reason);
    lntune_args p = args_of(MAXH); /* y holds this call's result out of place */
    memcpy(in_place, x, sizeof in_place);
    p.x = p.y = in_place;
    const int before = lntune_test_tuned_calls;
    rc = lntune_layernorm(ctx, &p);
    test_case(rc == LNTUNE_OK && lntune_test_tuned_calls > before &&
                  memcmp(in_place, y, sizeof y) == 0,
              "the tuned kernel in place (y = x): the bits of its call out of place");
    tuned = query_then_call(ctx, 3000, &info, &rc);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_TUNED && info.tuned_H == MAXH &&
                  tuned && strstr(info.reason, "tuned for H=4096"),
              "H=3000, within the reach: the H=4096 winner serves it, and the call ran it; "
              "reason: %s",
              info.reason);
    tuned = query_then_call(ctx, 768, &info, &rc);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_BUILTIN && !tuned &&
                  info.variant[0] == '\0' && info.tuned_H == 0 && strstr(info.reason, "reach"),
              "H=768, outside the winner's reach: built-in, as the call; reason: %s", info.reason);
    lntune_args a = args_of(MAXH);
    a.gamma = x; /* gamma: another affine kind, never tuned */
    info = (lntune_kernel_info)LNTUNE_KERNEL_INFO_INIT;
    rc = lntune_query(ctx, LNTUNE_LAYERNORM, &a, &info);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_BUILTIN &&
                  strstr(info.reason, "not tuned"),
              "H=4096 with gamma: built-in; reason: %s", info.reason);

    a = args_of(MAXH);
    a.rows = 0, a.x = a.y = NULL;
    rc = lntune_query(ctx, LNTUNE_RMSNORM, &a, &info);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_NONE,
              "an empty call: served by nothing (%s)", info.reason);
    a = args_of(MAXH);
    a.y = NULL;
    rc = lntune_query(ctx, LNTUNE_LAYERNORM, &a, &info);
    test_case(rc == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "y is NULL"),
              "y NULL: the call's code and message: %s", lntune_errmsg(ctx));
    a = args_of(MAXH);
    test_case(lntune_query(ctx, 7, &a, &info) == LNTUNE_EINVAL, "an unknown op: %s",
              lntune_errmsg(ctx));
    test_case(lntune_query(ctx, LNTUNE_LAYERNORM, &a, NULL) == LNTUNE_EINVAL, "info NULL: %s",
              lntune_errmsg(ctx));
    info.struct_size = 4;
    test_case(lntune_query(ctx, LNTUNE_LAYERNORM, &a, &info) == LNTUNE_EINVAL,
              "info.struct_size 4: %s", lntune_errmsg(ctx));
    memset(&info, 0, sizeof info); /* struct_size 0: this header's struct */
    rc = lntune_query(ctx, LNTUNE_LAYERNORM, &a, &info);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_TUNED && info.struct_size == 0,
              "a zero-filled info: answered, its struct_size left 0");
    test_case(lntune_query(NULL, LNTUNE_LAYERNORM, &a, &info) == LNTUNE_EINVAL, "a NULL handle");
    lntune_close(ctx);

    char none[4200];
    snprintf(none, sizeof none, "%s/no_such.db", argv[1]);
    if (!test_case(lntune_open(none, &ctx) == LNTUNE_OK, "open a path with no database"))
        return test_summary();
    tuned = query_then_call(ctx, MAXH, &info, &rc);
    test_case(rc == LNTUNE_OK && info.served_by == LNTUNE_SERVED_BUILTIN && !tuned &&
                  strstr(info.reason, "no tuning database"),
              "no database: built-in; reason: %s", info.reason);
    lntune_close(ctx);
    return test_summary();
}
