/*
 * test_tuned_backward.c - a backward kernel tuned by the tuner serves lntune_layernorm_backward
 * and lntune_rmsnorm_backward through a handle opened on that database:
 *  - the tuner stores the winner under the op text "layernorm_backward" / "rmsnorm_backward"
 *    and the dtype tuple's text, with its artifact and thread count;
 *  - the runtime loads it (LNTUNE_LOG=debug says "tuned <variant>" for that descriptor) and runs
 *    it on the winner's threads with per-thread partials, for the tuned row count and another in
 *    the same bucket, with saved and with recomputed statistics;
 *  - dx, dgamma and dbeta match the float64 reference (lntune_backward_compare);
 *  - the fused residual backward (dresidual_out given) is tuned and stored under
 *    "layernorm_backward+residual", and served to calls with dresidual_out (strided).
 * The op's database text comes from fusion.h, as the tuner and the runtime make it.
 *
 *   test_tuned_backward SCRATCH_DIR
 */
#define _GNU_SOURCE
#include "check.h"
#include "randn.h"
#include "dtypes.h"
#include "fusion.h"
#include "half_ref.h"
#include "lntune.h"
#include "log_lines.h"
#include "tune_once.h"
#include "tuning_db.h"
#include "verify_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { H = 96, ROWS = 64 };

typedef struct {
    const char *op; /* op text */
    lntune_types types;
    lntune_dtype dtype, param_dtype;
    int fusion; /* LNTUNE_FUSION_RESIDUAL: calls pass dresidual_out */
    char variant[256];
    char op_key[48]; /* the database's op text */
    int threads;
} tuned;

static int best_threads(void *ud, const lntune_best *b) {
    *(int *)ud = b->threads;
    return 0;
}

/* The most threads that may have summed the partials: the tuned count, or every core (built-in). */
static int most_threads;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double randn(void) {
    return test_randn(&rng);
}

static void *values(int type, size_t n, double offset, double spread) {
    void *p = malloc(n * lntune_type_size(type));
    for (size_t i = 0; p && i < n; ++i)
        lntune_ref_store(type, p, (int64_t)i, (float)(offset + spread * randn()));
    return p;
}

/* One backward call through ctx, compared with the float64 reference; 1 if right. */
static int call(lntune *ctx, const tuned *t, int64_t rows, int saved) {
    const int ln = strncmp(t->op, "layernorm", 9) == 0, xt = t->types.x, pt = t->types.params;
    const size_t n = (size_t)(rows * H);
    void *x = values(xt, n, 3.0, 2.0), *dy = values(xt, n, 0.0, 1.0);
    void *gamma = values(pt, H, 1.0, 0.5), *dx = malloc(n * lntune_type_size(xt));
    void *dgamma = malloc(H * lntune_type_size(pt)), *dbeta = malloc(H * lntune_type_size(pt));
    float *mean = malloc((size_t)rows * sizeof *mean), *rstd = malloc((size_t)rows * sizeof *rstd);
    float *row = malloc(H * sizeof *row);
    enum { DRS = H + 5 }; /* dresidual_out's stride: strided */
    void *dres = t->fusion ? values(xt, (size_t)(rows * DRS), 0.0, 3.0) : NULL;
    double z[H];
    int ok = 0;
    if (!x || !dy || !gamma || !dx || !dgamma || !dbeta || !mean || !rstd || !row ||
        (t->fusion && !dres))
        goto done;
    for (int64_t r = 0; r < rows; ++r) { /* the forward's statistics, as it would save them */
        for (int64_t i = 0; i < H; ++i) row[i] = (float)lntune_ref_load(xt, x, r * H + i);
        double m, rs;
        lntune_reference_row(ln ? LNTUNE_OP_LAYERNORM : LNTUNE_OP_RMSNORM, row, H, 1e-5, z, &m,
                             &rs);
        mean[r] = (float)m;
        rstd[r] = (float)rs;
    }
    memset(dx, 0xff, n * lntune_type_size(xt)); /* NaN: an element left unwritten fails */
    lntune_backward_args a = {0};
    a.rows = rows, a.H = H, a.x = x, a.dy = dy, a.gamma = gamma, a.dx = dx, a.dgamma = dgamma;
    a.dbeta = ln ? dbeta : NULL;
    a.mean = saved && ln ? mean : NULL;
    a.rstd = saved ? rstd : NULL;
    a.dtype = t->dtype, a.param_dtype = t->param_dtype;
    a.dresidual_out = dres, a.dresidual_out_stride = dres ? DRS : 0;
    int rc = ln ? lntune_layernorm_backward(ctx, &a) : lntune_rmsnorm_backward(ctx, &a);
    lntune_backward_problem p = {ln ? LNTUNE_OP_LAYERNORM : LNTUNE_OP_RMSNORM,
                                 t->types,
                                 rows,
                                 H,
                                 x,
                                 dy,
                                 gamma,
                                 H,
                                 H,
                                 H,
                                 a.rstd ? mean : NULL,
                                 a.rstd,
                                 1e-5f,
                                 dres,
                                 DRS};
    lntune_verify_result res;
    memset(&res, 0, sizeof res);
    char what[128];
    snprintf(what, sizeof what, "%s rows=%lld %s statistics", t->op_key, (long long)rows,
             saved ? "saved" : "recomputed");
    ok = rc == LNTUNE_OK && lntune_backward_compare(&p, dx, dgamma, ln ? dbeta : NULL, most_threads,
                                                    what, &res) == LNTUNE_OK;
    CHECK(ok, "%s: rc %d (%s), %s, max error %.3g", what, rc, rc ? lntune_errmsg(ctx) : "ok",
          res.message[0] ? res.message : "matches the float64 reference", res.max_error);
done:
    free(x), free(dy), free(gamma), free(dx), free(dgamma), free(dbeta);
    free(mean), free(rstd), free(row), free(dres);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char db[4096], log_path[4096];
    tune_test_files(argv[1], "tuned_backward", db, log_path, sizeof db);
    tuned cases[] = {
        {"layernorm_backward", {0}, LNTUNE_DTYPE_DEFAULT, LNTUNE_DTYPE_DEFAULT, 0, "", "", 0},
        {"rmsnorm_backward",
         {.x = LNTUNE_TYPE_BF16, .y = LNTUNE_TYPE_BF16, .params = LNTUNE_TYPE_F32},
         LNTUNE_BF16,
         LNTUNE_F32,
         0,
         "",
         "",
         0},
        {"layernorm_backward",
         {.x = LNTUNE_TYPE_F16, .y = LNTUNE_TYPE_F16, .params = LNTUNE_TYPE_F16},
         LNTUNE_F16,
         LNTUNE_F16,
         LNTUNE_FUSION_RESIDUAL,
         "",
         "",
         0},
    };
    const size_t ncases = sizeof cases / sizeof cases[0];
    for (size_t c = 0; c < ncases; ++c) {
        int rc;
        lntune_fusion_op_key(cases[c].op, cases[c].fusion, cases[c].op_key, sizeof cases[c].op_key);
        lntune_shape shape = {.rows = ROWS, .H = H, .types = cases[c].types};
        shape.fusion = cases[c].fusion;
        lntune_tune_result r = tune_once(db, cases[c].op, shape, LNTUNE_RIGOR_QUICK, 2, 0, &rc);
        char dtype[24];
        lntune_types_format(cases[c].types, dtype, sizeof dtype);
        CHECK(rc == LNTUNE_OK && r.variant[0] && strcmp(r.dtype, dtype) == 0 && r.wrong == 0,
              "%s %s %dx%d tuned: %s, %.2f us, %d wrong", cases[c].op_key, r.dtype, ROWS, H,
              r.variant, r.median_ns * 1e-3, r.wrong);
        snprintf(cases[c].variant, sizeof cases[c].variant, "%s", r.variant);
    }

    /* The best rows as the runtime will look them up: op text, dtype text, affine "gamma". */
    lntune_db *h;
    int64_t hw;
    CHECK(tune_db_this_machine(db, &h, &hw), "the database holds this machine");
    for (size_t c = 0; c < ncases; ++c) {
        char dtype[24];
        lntune_types_format(cases[c].types, dtype, sizeof dtype);
        lntune_db_key key = {hw, "cpu", cases[c].op_key, dtype, H, ROWS, 1};
        cases[c].threads = 0;
        lntune_db_get_best(h, &key, best_threads, &cases[c].threads);
        CHECK(cases[c].threads >= 1, "best %s %s H=%d: %d thread(s)", cases[c].op_key, dtype, H,
              cases[c].threads);
    }
    lntune_db_close(h);
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    most_threads = cpu.cores;
    for (size_t c = 0; c < ncases; ++c)
        if (cases[c].threads > most_threads) most_threads = cases[c].threads;

    /* The runtime, its debug log in a file we read back. */
    const int saved_stderr = log_capture_begin(log_path);
    if (saved_stderr < 0) return 1;
    lntune *ctx = NULL;
    int rc = lntune_open(db, &ctx);
    int right = 0, calls = 0;
    for (size_t c = 0; rc == LNTUNE_OK && c < ncases; ++c)
        for (int saved = 1; saved >= 0; --saved) {
            right += call(ctx, &cases[c], ROWS, saved);
            right += call(ctx, &cases[c], 40, saved); /* same rows bucket (9-64) */
            calls += 2;
        }
    lntune_close(ctx);
    log_capture_end(saved_stderr);
    CHECK(rc == LNTUNE_OK && right == calls, "%d of %d calls through the runtime are right", right,
          calls);
    for (size_t c = 0; c < ncases; ++c) {
        char dtype[24], desc[160], served[320];
        lntune_types_format(cases[c].types, dtype, sizeof dtype);
        snprintf(desc, sizeof desc, "%s %s H=%d rows=%d (bucket %d), gamma", cases[c].op_key, dtype,
                 H, ROWS, lntune_rows_bucket(ROWS));
        snprintf(served, sizeof served, ": tuned %s, %d thread(s)", cases[c].variant,
                 cases[c].threads);
        const int n = log_lines(log_path, desc, served, 0);
        CHECK(n == 1, "%s served by the tuned kernel (%d log line '%s%s')", cases[c].op_key, n,
              desc, served);
    }
    return CHECK_SUMMARY();
}
