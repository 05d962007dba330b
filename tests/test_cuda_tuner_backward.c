/*
 * test_cuda_tuner_backward.c - the CUDA tuner on the backward, where there is no GPU: the
 * stand-in driver of tests/mock_cuda computes the reference gradients; one loaded module in
 * three is wrong and the fastest. NVRTC compiles for real. Checks, for LayerNorm fp32 and for
 * the fused RMSNorm backward in bf16 (dresidual_out):
 *  - a winner is chosen among the verified pairs, never a wrong one, within 1% of the fastest
 *    correct; every variant is stored under the op text "layernorm_backward" /
 *    "rmsnorm_backward+residual" and the dtype; the artifact holds both kernels of the pair;
 *  - the variants the stand-in cannot run right (several row groups per block, or atomics over
 *    several blocks: see its header comment) are recorded as wrong too, so some are;
 *  - a second run compiles nothing and reads the winner back;
 *  - liblntune serves lntune_layernorm_backward on device memory with the tuned pair (its debug
 *    log says "tuned"), and its dx and dgamma match the float64 reference;
 *  - a backward of an fp16 x with a bf16 y is refused with a message.
 * The LayerNorm fp32 tune is exhaustive with `test_cuda_tuner_backward full` (the slow tier's
 * cuda_tuner_backward_full: every pair of the space compiled with NVRTC) and of rigor quick
 * otherwise (the quick tier's; test_cuda_tuner tunes an exhaustive forward).
 * Exits 77 (skipped) without NVRTC.
 */
#define _GNU_SOURCE /* memmem, mkdtemp, nftw: in cuda_tuner_test.h */
#include "check.h"
#include "cuda_tuner.h"
#include "cuda_tuner_test.h"
#include "fusion.h"
#include "lntune.h"
#include "log_lines.h"
#include "nvrtc.h"
#include "reference.h"
#include "tuner_records.h"
#include "tuning_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pair_stored(void *ud, const lntune_artifact *a) {
    *(int *)ud = a->object_len > 0 && a->ptx && strstr(a->ptx, ".entry lntune_norm(") &&
                 strstr(a->ptx, ".entry lntune_norm_dgamma(") &&
                 strstr(a->source, "lntune-cuda-backward:");
    return 0;
}

static int gpu_row(void *ud, const lntune_db_hardware *hw) {
    if (strcmp(hw->kind, "cuda") == 0) *(int64_t *)ud = hw->id;
    return 0;
}

static lntune_tune_result tune(const char *db, const char *op, const char *dtype, int fusion,
                               int64_t rows, int64_t H, lntune_rigor rigor, int *rc, char *err) {
    const char *ops[1] = {op};
    lntune_shape shape = {.rows = rows, .H = H, .fusion = fusion};
    if (lntune_types_parse(dtype, &shape.types) != 0) exit(1);
    lntune_tune_config cfg = {
        .db_path = db, .ops = ops, .nops = 1, .shapes = &shape, .nshapes = 1, .rigor = rigor};
    lntune_tune_result *r = NULL, out;
    size_t n = 0;
    setenv("MOCK_CUDA_OP", strncmp(op, "rmsnorm", 7) == 0 ? "rmsnorm" : "layernorm", 1);
    setenv("MOCK_CUDA_TYPES", dtype, 1);
    *rc = lntune_tune_cuda(&cfg, 0, &r, &n, err, 1024);
    memset(&out, 0, sizeof out);
    if (n == 1) out = r[0];
    free(r);
    return out;
}

/* One tuned shape at a rigor: the winner, its records and the second run. */
static void check_tuned(const char *db, const char *op, const char *dtype, int fusion, int64_t rows,
                        int64_t H, lntune_rigor rigor) {
    char err[1024] = "", key_op[48];
    int rc;
    lntune_fusion_op_key(op, fusion, key_op, sizeof key_op);
    lntune_tune_result r = tune(db, op, dtype, fusion, rows, H, rigor, &rc, err);
    CHECK(rc == LNTUNE_OK && r.variant[0], "%s %s %lldx%lld tuned: rc %d %s; winner %s", key_op,
          dtype, (long long)rows, (long long)H, rc, err, r.variant);
    lntune_shape shape = {.rows = rows, .H = H, .fusion = fusion};
    lntune_types_parse(dtype, &shape.types);
    const size_t space = cuda_candidates(op, &shape);
    CHECK(rigor_coverage_ok(rigor, r.compiled, r.failed, space),
          "rigor %d compiled %d (and %d failed) of the %zu variants", (int)rigor, r.compiled,
          r.failed, space);
    CHECK(r.verified > 0 && r.wrong > 0 && r.verified + r.wrong + r.failed == r.compiled &&
              r.timed == r.verified,
          "compiled %d, verified %d, wrong %d, failed %d, timed %d", r.compiled, r.verified,
          r.wrong, r.failed, r.timed);
    lntune_db *h = NULL;
    int64_t hw = 0;
    CHECK(lntune_db_open(db, LNTUNE_DB_READONLY, &h) == LNTUNE_OK, "database opens");
    lntune_db_each_hardware(h, gpu_row, &hw);
    lntune_db_key key = {hw, "cuda", key_op, dtype, H, rows, 1};
    static census c;
    census_init(&c);
    lntune_db_each_measurement(h, &key, NULL, census_count, &c);
    CHECK(c.ok == r.verified && c.wrong == r.wrong,
          "every pair measured is stored under %s %s: %d ok, %d wrong", key_op, dtype, c.ok,
          c.wrong);
    best_copy b = {"", "", 0};
    CHECK(lntune_db_get_best(h, &key, best_get, &b) == LNTUNE_OK &&
              strcmp(b.variant, r.variant) == 0,
          "best record holds the winner %s", b.variant);
    CHECK(!census_wrong(&c, b.variant), "the winner is no wrong variant");
    CHECK(b.median_ns <= c.fastest_ok_ns * 1.0101,
          "the winner (%.0f ns) is the fastest correct pair (%.0f ns) within 1%%", b.median_ns,
          c.fastest_ok_ns);
    int pair = 0;
    lntune_db_get_artifact(h, b.artifact, pair_stored, &pair);
    CHECK(pair, "artifact %s holds the cubin, the PTX of both kernels and both launch lines",
          b.artifact);
    lntune_db_close(h);
    lntune_tune_result again = tune(db, op, dtype, fusion, rows, H, rigor, &rc, err);
    CHECK(rc == LNTUNE_OK && again.from_db && again.compiled == 0 &&
              strcmp(again.variant, r.variant) == 0,
          "second run reads the winner back, compiling nothing (compiled %d)", again.compiled);
}

/* lntune_layernorm_backward on "device" memory (the stand-in's is host memory) with db's
 * winner for rows x H; returns how many of dx and dgamma miss the float64 reference. */
static int served(const char *db, const char *log_path, int64_t rows, int64_t H, int *rc) {
    const size_t n = (size_t)(rows * H);
    float *x = malloc(n * 4), *dy = malloc(n * 4), *dx = malloc(n * 4), *g = malloc(H * 4);
    float *dg = malloc(H * 4);
    double *xd = malloc(n * 8), *dyd = malloc(n * 8), *gd = malloc(H * 8), *dxr = malloc(H * 8);
    double *dgr = calloc((size_t)H, 8);
    if (!x || !dy || !dx || !g || !dg || !xd || !dyd || !gd || !dxr || !dgr) exit(1);
    for (size_t i = 0; i < n; ++i) {
        x[i] = 3.0f + (float)((i * 7919) % 1000) / 500.0f,
        dy[i] = (float)((i * 104729) % 997) / 997.0f - 0.5f;
        xd[i] = x[i], dyd[i] = dy[i], dx[i] = NAN;
    }
    for (int64_t i = 0; i < H; ++i) g[i] = 0.5f + (float)i / (float)H, gd[i] = g[i], dg[i] = NAN;
    setenv("MOCK_CUDA_OP", "layernorm", 1);
    setenv("MOCK_CUDA_TYPES", "f32", 1);
    /* The stand-in's wrong modules test the tuner's choice; the runtime's load of the winner
     * would otherwise be wrong whenever its number in this process is a multiple of 3. */
    setenv("MOCK_CUDA_WRONG_EVERY", "0", 1);
    const int saved = log_capture_begin(log_path);
    if (saved < 0) exit(1);
    lntune *ctx = NULL;
    *rc = lntune_open(db, &ctx);
    lntune_backward_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = x, a.dy = dy, a.dx = dx, a.gamma = g, a.dgamma = dg;
    a.device = LNTUNE_DEVICE_CUDA;
    if (*rc == LNTUNE_OK) *rc = lntune_layernorm_backward(ctx, &a);
    if (*rc != LNTUNE_OK) printf("backward: %s\n", ctx ? lntune_errmsg(ctx) : "no handle");
    lntune_close(ctx);
    log_capture_end(saved);
    setenv("MOCK_CUDA_WRONG_EVERY", "3", 1);
    int bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
        double mean, rstd;
        lntune_reference_row(LNTUNE_OP_LAYERNORM, x + r * H, H, 1e-5, dxr, &mean, &rstd);
        lntune_reference_backward_row(LNTUNE_OP_LAYERNORM, xd + r * H, dyd + r * H, NULL, gd, H,
                                      mean, rstd, dxr, dgr, NULL);
        for (int64_t i = 0; i < H; ++i)
            bad += !(fabs(dx[r * H + i] - dxr[i]) <= 1e-5 * (1.0 + fabs(dxr[i])));
    }
    for (int64_t i = 0; i < H; ++i) bad += !(fabs(dg[i] - dgr[i]) <= 1e-5 * (1.0 + fabs(dgr[i])));
    free(x), free(dy), free(dx), free(g), free(dg), free(xd), free(dyd), free(gd), free(dxr);
    free(dgr);
    return bad;
}

int main(int argc, char **argv) {
    const int full = argc > 1 && strcmp(argv[1], "full") == 0;
    char dir[4096], db[4200], log_path[4200], err[1024] = "";
    const int skip = cuda_tuner_test_begin("cuda-tuner-backward", dir, sizeof dir, db, sizeof db);
    if (skip) return skip;
    snprintf(log_path, sizeof log_path, "%s/lntune.log", dir);

    check_tuned(db, "layernorm_backward", "f32", LNTUNE_FUSION_NONE, 64, 64,
                full ? LNTUNE_RIGOR_EXHAUSTIVE : LNTUNE_RIGOR_QUICK);
    check_tuned(db, "rmsnorm_backward", "bf16", LNTUNE_FUSION_RESIDUAL, 16, 48, LNTUNE_RIGOR_QUICK);

    int rc;
    const int bad = served(db, log_path, 64, 64, &rc);
    const int lines = log_lines(log_path, "H=64 rows=64", "on CUDA device 0: tuned", 0);
    CHECK(rc == LNTUNE_OK && bad == 0 && lines == 1,
          "lntune_layernorm_backward on the device runs the tuned pair: rc %d, %d value(s) off, "
          "%d log line(s)",
          rc, bad, lines);
    if (lines != 1) log_lines(log_path, "", "", 1);

    lntune_tune_result r =
        tune(db, "layernorm_backward", "f16/bf16/f16", 0, 8, 64, LNTUNE_RIGOR_QUICK, &rc, err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "x's type") && !r.variant[0],
          "an fp16 x with a bf16 dx is refused: rc %d, %s", rc, err);
    scratch_dir_finish(dir, check_failures);
    return CHECK_SUMMARY();
}
