/*
 * test_tuned_residual.c - fused residual kernels tuned by the tuner serve lntune_layernorm and
 * lntune_rmsnorm through a handle opened on that database:
 *  - the tuner stores the winner under the fused op text ("layernorm+residual_out",
 *    "rmsnorm+residual") and the dtype tuple's text;
 *  - the runtime loads it (LNTUNE_LOG=debug says "tuned <variant>" for that descriptor) for the
 *    tuned rows and another count of the same bucket; y, residual_out (separate and in place,
 *    residual_out == residual), mean and rstd match the float64 reference (residual_check.h);
 *  - a call whose fusion differs from the tuned one (residual without residual_out, for the
 *    shape tuned with it; with residual_out, for the one tuned without) is not served by the
 *    tuned kernel: the log says it is not tuned, and its built-in result is right too.
 *
 *   test_tuned_residual SCRATCH_DIR
 */
#define _GNU_SOURCE
#include "fusion.h"
#include "residual_check.h"
#include "log_lines.h"
#include "tune_once.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { H = 96, ROWS = 64 };

typedef struct {
    const char *op; /* the unfused op text; the fusion says the rest */
    int fusion;
    const char *dtype; /* lntune_types_parse */
    lntune_types types;
    char variant[256];
} tuned;

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char db[4096], log_path[4096];
    tune_test_files(argv[1], "tuned_residual", db, log_path, sizeof db);
    tuned cases[] = {{"layernorm", LNTUNE_FUSION_RESIDUAL_OUT, "f32", {0}, ""},
                     {"rmsnorm", LNTUNE_FUSION_RESIDUAL, "bf16/bf16/f32/f32", {0}, ""}};
    const size_t ncases = sizeof cases / sizeof cases[0];
    for (size_t c = 0; c < ncases; ++c) {
        int rc;
        if (!test_case(lntune_types_parse(cases[c].dtype, &cases[c].types) == 0, "parse %s",
                       cases[c].dtype))
            return test_summary();
        lntune_shape shape = {
            .rows = ROWS, .H = H, .types = cases[c].types, .fusion = cases[c].fusion};
        lntune_tune_result r = tune_once(db, cases[c].op, shape, LNTUNE_RIGOR_QUICK, 2, 0, &rc);
        char key[48];
        lntune_fusion_op_key(cases[c].op, cases[c].fusion, key, sizeof key);
        test_case(rc == LNTUNE_OK && r.variant[0] && strcmp(r.op, key) == 0 &&
                      strcmp(r.dtype, cases[c].dtype) == 0 && r.wrong == 0,
                  "%s %s %dx%d tuned: %s, %.2f us, %d wrong", r.op, r.dtype, ROWS, H, r.variant,
                  r.median_ns * 1e-3, r.wrong);
        snprintf(cases[c].variant, sizeof cases[c].variant, "%s", r.variant);
    }

    /* The runtime, its debug log in a file read back below. */
    const int saved_stderr = log_capture_begin(log_path);
    if (saved_stderr < 0) return 1;
    lntune *ctx = NULL;
    int rc = lntune_open(db, &ctx);
    int right[2] = {0, 0}, other = 0;
    for (size_t c = 0; rc == LNTUNE_OK && c < ncases; ++c) {
        const lntune_op op =
            strcmp(cases[c].op, "rmsnorm") == 0 ? LNTUNE_OP_RMSNORM : LNTUNE_OP_LAYERNORM;
        const int out = cases[c].fusion == LNTUNE_FUSION_RESIDUAL_OUT;
        right[c] += check_call(ctx, op, cases[c].types, out, 1, ROWS, H, 0);
        right[c] += check_call(ctx, op, cases[c].types, out, 1, 40, H, 0);     /* bucket 9-64 */
        right[c] += check_call(ctx, op, cases[c].types, out, 1, ROWS, H, out); /* in place */
        other += check_call(ctx, op, cases[c].types, !out, 1, ROWS, H, 0);     /* other fusion */
    }
    lntune_close(ctx);
    log_capture_end(saved_stderr);
    test_case(rc == LNTUNE_OK, "open the runtime on the database: rc %d", rc);
    test_case(other == 2, "calls with the other fusion match the reference (%d of 2)", other);
    for (size_t c = 0; c < ncases; ++c) {
        char key[48], other_key[48], desc[160], served[320];
        const int out = cases[c].fusion == LNTUNE_FUSION_RESIDUAL_OUT;
        lntune_fusion_op_key(cases[c].op, cases[c].fusion, key, sizeof key);
        lntune_fusion_op_key(cases[c].op, out ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_RESIDUAL_OUT,
                             other_key, sizeof other_key);
        test_case(right[c] == 3,
                  "%s %s: tuned rows, rows=40 and a third call (in place where residual_out is "
                  "written) match the reference (%d of 3)",
                  key, cases[c].dtype, right[c]);
        snprintf(desc, sizeof desc, "%s %s H=%d rows=%d", key, cases[c].dtype, H, ROWS);
        snprintf(served, sizeof served, ": tuned %s,", cases[c].variant);
        int n = log_lines(log_path, desc, served, 0);
        test_case(n == 1, "%s served by the tuned kernel (%d log lines '%s...%s')", key, n, desc,
                  served);
        snprintf(desc, sizeof desc, "%s %s H=%d rows=%d", other_key, cases[c].dtype, H, ROWS);
        n = log_lines(log_path, desc, "built-in kernel (not tuned", 0);
        const int tuned_lines = log_lines(log_path, desc, ": tuned ", 0);
        test_case(n == 1 && tuned_lines == 0,
                  "%s (fusion differs from the tuned one): built-in (%d log lines), never tuned "
                  "(%d)",
                  other_key, n, tuned_lines);
    }
    return test_summary();
}
