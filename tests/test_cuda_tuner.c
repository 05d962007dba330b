/*
 * test_cuda_tuner.c - the CUDA tuner's whole loop where there is no GPU: the stand-in driver of
 * tests/mock_cuda (loaded as libcuda.so.1 through LD_LIBRARY_PATH) computes the reference on the
 * CPU and reports repeatable virtual timings; one loaded module in three is wrong and the
 * fastest. NVRTC compiles for real. Checks:
 *  - every shape gets a winner; the wrong modules are recorded as wrong and never chosen;
 *  - the rigor holds as on the CPU (the same search): exhaustive compiles every variant of the
 *    space, quick a few;
 *  - the winner is the fastest correct variant measured (within the 1% tie-break), stored as
 *    best with a cubin and its PTX, under a GPU hardware row (kind cuda) apart from the CPU's;
 *  - a second run compiles nothing and reads the winner back; a second row count of one H in
 *    the same run compiles nothing new;
 *  - a quantized y (scales per row) and the weight offset tune too, the wrong modules (codes
 *    off by two steps) never chosen, each winner stored under its op text and type tuple;
 *  - a device that does not exist is a clear error.
 * Exits 77 (skipped) without NVRTC.
 */
#define _GNU_SOURCE /* memmem, mkdtemp, nftw: in cuda_tuner_test.h */
#include "check.h"
#include "cuda_tuner.h"
#include "cuda_tuner_test.h"
#include "dtypes.h"
#include "generator.h"
#include "lntune.h"
#include "nvrtc.h"
#include "tuner_records.h"
#include "tuning_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int artifact_ok(void *ud, const lntune_artifact *a) {
    *(int *)ud = a->object_len > 0 && a->ptx && strstr(a->ptx, ".version") &&
                 strstr(a->source, "lntune-cuda-launch:") && strcmp(a->symbol, "lntune_norm") == 0;
    return 0;
}

typedef struct {
    int cpu_rows, gpu_rows;
    int64_t gpu_id;
} hw_census;

static int count_hw(void *ud, const lntune_db_hardware *hw) {
    hw_census *c = ud;
    if (strcmp(hw->kind, "cuda") == 0 && strcmp(hw->model, "lntune mock GPU") == 0 &&
        hw->compute_capability == 90) {
        c->gpu_rows++;
        c->gpu_id = hw->id;
    } else {
        c->cpu_rows++;
    }
    return 0;
}

/* Tunes op at shape (its types, affine kind) on device: the one result. */
static lntune_tune_result tune_shape(const char *db, const char *op, lntune_shape shape,
                                     lntune_rigor rigor, int device, int *rc, char *err) {
    const char *ops[1] = {op};
    lntune_tune_config cfg = {
        .db_path = db, .ops = ops, .nops = 1, .shapes = &shape, .nshapes = 1, .rigor = rigor};
    lntune_tune_result *r = NULL, out;
    size_t n = 0;
    char types[32];
    lntune_types_format(shape.types, types, sizeof types);
    setenv("MOCK_CUDA_OP", op, 1);
    setenv("MOCK_CUDA_TYPES", types, 1);
    *rc = lntune_tune_cuda(&cfg, device, &r, &n, err, 1024);
    memset(&out, 0, sizeof out);
    if (n == 1) out = r[0];
    free(r);
    return out;
}

static lntune_tune_result tune(const char *db, const char *op, int64_t rows, int64_t H,
                               lntune_rigor rigor, int device, int *rc, char *err) {
    const lntune_shape shape = {.rows = rows, .H = H};
    return tune_shape(db, op, shape, rigor, device, rc, err);
}

/* Tunes op at rows x H and 1 x H in one run (rows x H's result returned): the shape tuned
 * second must compile nothing new, every source of one H being shared by its row counts. */
static lntune_tune_result tune_and_one_row(const char *db, const char *op, int64_t rows, int64_t H,
                                           lntune_rigor rigor, int *rc, char *err) {
    const char *ops[1] = {op};
    lntune_shape two[2] = {{.rows = rows, .H = H}, {.rows = 1, .H = H}};
    lntune_tune_config cfg = {
        .db_path = db, .ops = ops, .nops = 1, .shapes = two, .nshapes = 2, .rigor = rigor};
    lntune_tune_result *r = NULL, out;
    size_t n = 0;
    setenv("MOCK_CUDA_OP", op, 1);
    setenv("MOCK_CUDA_TYPES", "f32", 1);
    *rc = lntune_tune_cuda(&cfg, 0, &r, &n, err, 1024);
    memset(&out, 0, sizeof out);
    /* the results in the order tuned: the first compiles, the second reuses */
    const lntune_tune_result *first = n == 2 ? &r[0] : &out, *second = n == 2 ? &r[1] : &out;
    CHECK(*rc == LNTUNE_OK && n == 2 && first->variant[0] && second->variant[0] &&
              first->cache_hits == 0 && second->compiled > 0 &&
              second->cache_hits == second->compiled + second->failed,
          "rows %lld after rows %lld at H=%lld reuses every compiled source (%d of %d)",
          (long long)second->rows, (long long)first->rows, (long long)H, second->cache_hits,
          second->compiled);
    for (size_t i = 0; i < n; ++i)
        if (r[i].rows == rows) out = r[i];
    free(r);
    return out;
}

int main(void) {
    char dir[4096], db[4200], err[1024] = "";
    const int skip = cuda_tuner_test_begin("cuda-tuner", dir, sizeof dir, db, sizeof db);
    if (skip) return skip;
    int rc;

    /* The order matters to the stand-in, which numbers the modules loaded in this process: the
     * naive variants of both shapes must not load as a multiple of 3 (wrong), or no naive time is
     * reported. The exhaustive run tunes rows 1 of its H too: two row counts of one H in one
     * run, the second compiling nothing new. */
    static const struct {
        const char *op;
        int64_t rows, H;
        lntune_rigor rigor;
    } shapes[] = {{"rmsnorm", 8, 768, LNTUNE_RIGOR_EXHAUSTIVE},
                  {"layernorm", 64, 1024, LNTUNE_RIGOR_QUICK}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        const char *op = shapes[s].op;
        const lntune_rigor rigor = shapes[s].rigor;
        lntune_tune_result r =
            rigor == LNTUNE_RIGOR_EXHAUSTIVE
                ? tune_and_one_row(db, op, shapes[s].rows, shapes[s].H, rigor, &rc, err)
                : tune(db, op, shapes[s].rows, shapes[s].H, rigor, 0, &rc, err);
        CHECK(rc == LNTUNE_OK && r.variant[0], "%s %lldx%lld tuned: rc %d %s; winner %s", op,
              (long long)shapes[s].rows, (long long)shapes[s].H, rc, err, r.variant);
        const lntune_shape shape = {.rows = shapes[s].rows, .H = shapes[s].H};
        const size_t space = cuda_candidates(op, &shape);
        CHECK(rigor_coverage_ok(rigor, r.compiled, r.failed, space),
              "rigor %d compiled %d (and %d failed) of the %zu variants", (int)rigor, r.compiled,
              r.failed, space);
        CHECK(r.wrong > 0 && r.verified + r.wrong + r.failed == r.compiled && r.timed == r.verified,
              "compiled %d, verified %d, wrong %d, failed %d, timed %d", r.compiled, r.verified,
              r.wrong, r.failed, r.timed);
        CHECK(r.copy_gbps > 0 && r.gbps < r.copy_gbps && r.naive_ns > 0,
              "copy %.1f GB/s beats the kernels' %.1f; naive %.0f ns", r.copy_gbps, r.gbps,
              r.naive_ns);

        lntune_db *h = NULL;
        CHECK(lntune_db_open(db, LNTUNE_DB_READONLY, &h) == LNTUNE_OK, "database opens");
        hw_census hc = {0, 0, 0};
        lntune_db_each_hardware(h, count_hw, &hc);
        CHECK(hc.gpu_rows == 1 && hc.cpu_rows == 0, "one GPU hardware row (%d), no CPU row (%d)",
              hc.gpu_rows, hc.cpu_rows);
        lntune_db_key key = {hc.gpu_id, "cuda", op, "f32", shapes[s].H, shapes[s].rows, 1};
        static census c;
        census_init(&c);
        lntune_db_each_measurement(h, &key, NULL, census_count, &c);
        CHECK(c.ok == r.verified && c.wrong == r.wrong && c.failed == r.failed,
              "every variant measured is stored: %d ok, %d wrong, %d failed", c.ok, c.wrong,
              c.failed);
        best_copy b = {"", "", 0};
        CHECK(lntune_db_get_best(h, &key, best_get, &b) == LNTUNE_OK &&
                  strcmp(b.variant, r.variant) == 0,
              "best record holds the winner %s", b.variant);
        CHECK(c.wrong > 0 && !census_wrong(&c, b.variant), "a wrong variant is not the best");
        CHECK(b.median_ns <= c.fastest_ok_ns * 1.0101,
              "the winner (%.0f ns) is the fastest correct variant (%.0f ns) within 1%%",
              b.median_ns, c.fastest_ok_ns);
        int art = 0;
        lntune_db_get_artifact(h, b.artifact, artifact_ok, &art);
        CHECK(art, "artifact %s holds a cubin, its PTX and the source with its launch line",
              b.artifact);
        lntune_db_close(h);

        lntune_tune_result again = tune(db, op, shapes[s].rows, shapes[s].H, rigor, 0, &rc, err);
        CHECK(rc == LNTUNE_OK && again.from_db && again.compiled == 0 &&
                  strcmp(again.variant, r.variant) == 0,
              "second run reads the winner back, compiling nothing (compiled %d)", again.compiled);
    }

    /* A quantized y (a scale per row: the timing launches pass a buffer for them) and the
     * weight offset (with a static e4m3 scale), keyed by their op text and type tuple. */
    static const struct {
        const char *op, *types, *key_op;
        int affine;
    } fused[] = {{"rmsnorm", "f32/i8row", "rmsnorm", LNTUNE_AFFINE_ANY},
                 {"layernorm", "bf16/e4m3/bf16", "layernorm+offset", LNTUNE_AFFINE_OFFSET}};
    for (size_t f = 0; f < sizeof fused / sizeof fused[0]; ++f) {
        lntune_shape shape = {.rows = 16, .H = 768, .affine = fused[f].affine};
        char dtype[32]; /* the key's text: every type named */
        CHECK(lntune_types_parse(fused[f].types, &shape.types) == 0, "%s", fused[f].types);
        lntune_types_format(shape.types, dtype, sizeof dtype);
        lntune_tune_result r = tune_shape(db, fused[f].op, shape, LNTUNE_RIGOR_QUICK, 0, &rc, err);
        CHECK(rc == LNTUNE_OK && r.variant[0] && r.wrong > 0 && r.verified > 0 &&
                  strcmp(r.op, fused[f].key_op) == 0 && strcmp(r.dtype, dtype) == 0,
              "%s %s: rc %d %s; winner %s of %s %s (verified %d, wrong %d)", fused[f].op,
              fused[f].types, rc, err, r.variant, r.op, r.dtype, r.verified, r.wrong);
        CHECK(!fused[f].affine || strstr(r.variant, "affine=offset"), "%s: the offset's space",
              r.variant);
        lntune_db *h = NULL;
        hw_census hc = {0, 0, 0};
        if (lntune_db_open(db, LNTUNE_DB_READONLY, &h) == LNTUNE_OK)
            lntune_db_each_hardware(h, count_hw, &hc);
        lntune_db_key key = {hc.gpu_id, "cuda", fused[f].key_op, dtype, 768, 16, 1};
        static census c;
        census_init(&c);
        lntune_db_each_measurement(h, &key, NULL, census_count, &c);
        best_copy b = {"", "", 0};
        CHECK(lntune_db_get_best(h, &key, best_get, &b) == LNTUNE_OK &&
                  strcmp(b.variant, r.variant) == 0 && c.wrong > 0 && !census_wrong(&c, b.variant),
              "%s: the best stored (%s) is the winner, and not one of the %d wrong", fused[f].types,
              b.variant, c.wrong);
        lntune_db_close(h);
    }
    unsetenv("MOCK_CUDA_TYPES");

    lntune_tune_result none = tune(db, "layernorm", 64, 1024, LNTUNE_RIGOR_QUICK, 3, &rc, err);
    CHECK(rc != LNTUNE_OK && err[0] && !none.variant[0], "device 3 refused: rc %d, '%s'", rc, err);
    scratch_dir_finish(dir, check_failures);
    return CHECK_SUMMARY();
}
