/*
 * test_cuda_check_quant.c - the device checker (gen/verify/cuda_check.c) with a quantized y and
 * the weight offset, on the stand-in driver (tests/mock_cuda: LD_LIBRARY_PATH), whose launches
 * compute the reference's codes and scales: what a GPU run of test_cuda_compile_quant's samples
 * goes through, here without a GPU.
 *   - Both ops, each code type (int8, e4m3; a static scale, one per row), fp32 and bf16 x, with
 *     gamma (and beta) and with the weight offset: the verifier's whole suite passes through the
 *     checker, so one-byte codes travel through guarded buffers whose poison is one byte, and the
 *     row scales to the device and back.
 *   - It must fail where the stand-in misbehaves ($MOCK_CUDA_QUANT_FAULT): a scale written past
 *     the row's end (the checker's guard float says so), scales never written (the verifier's
 *     poison), and the weight offset ignored.
 * Exits 77 (skipped) where the stand-in driver cannot be opened.
 */
#include "check.h"
#include "cuda_check.h"
#include "cuda_driver.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "fusion.h"
#include "lntune.h"
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char launch_line[] =
    "// lntune-cuda-launch: block=256 rows_per_block=1 cluster=1 smem=0 smem_per_h=0 max_h=0\n";

/* Runs the suite of (op, x/y/params types text, affine) on the stand-in; its return code, the
 * message in res. */
static int run(lntune_cuda *cu, lntune_cuda_checker *chk, lntune_op op, const char *types,
               int affine, lntune_verify_result *res) {
    lntune_types t;
    memset(res, 0, sizeof *res);
    if (lntune_types_parse(types, &t) != 0) {
        CHECK(0, "types %s", types);
        return -1;
    }
    setenv("MOCK_CUDA_TYPES", types, 1);
    static const int64_t hs[] = {1, 17, 768};
    lntune_verifier *v = NULL;
    if (lntune_verifier_create_fused(op, t, LNTUNE_FUSION_NONE, hs, 3, 0, &v) != LNTUNE_OK) {
        CHECK(0, "verifier for %s", types);
        return -1;
    }
    lntune_cuda_launch l;
    void *module = NULL, *function = NULL;
    int rc = -1;
    /* the stand-in takes any image; the kernel's name tells it the op */
    if (lntune_cuda_launch_parse(launch_line, &l) == LNTUNE_OK &&
        lntune_cuda_module_load(cu, launch_line,
                                op == LNTUNE_OP_RMSNORM ? "mock_rmsnorm" : "mock_layernorm",
                                &module, &function) == LNTUNE_OK)
        rc = lntune_cuda_checker_run(chk, v, function, &l, affine, 0, res);
    else
        CHECK(0, "load the stand-in's kernel: %s", lntune_cuda_errmsg(cu));
    lntune_cuda_module_unload(cu, module);
    lntune_verifier_destroy(v);
    return rc;
}

int main(void) {
    lntune_cuda *cu = NULL;
    if (lntune_cuda_open(0, &cu) != LNTUNE_OK) {
        printf("skipped: no stand-in driver (%s)\n", cu ? lntune_cuda_errmsg(cu) : "no memory");
        lntune_cuda_close(cu);
        return 77;
    }
    lntune_cuda_checker *chk = NULL;
    CHECK(lntune_cuda_checker_create(cu, 1 << 20, 4096, &chk) == LNTUNE_OK, "checker");
    if (!chk) return CHECK_SUMMARY();

    static const char *const types[] = {"f32/i8",      "f32/i8row",       "f32/e4m3",
                                        "f32/e4m3row", "bf16/i8row/bf16", "bf16/e4m3/bf16"};
    static const lntune_op ops[] = {LNTUNE_OP_LAYERNORM, LNTUNE_OP_RMSNORM};
    lntune_verify_result res;
    unsetenv("MOCK_CUDA_QUANT_FAULT");
    for (size_t o = 0; o < 2; ++o)
        for (size_t k = 0; k < sizeof types / sizeof *types; ++k)
            for (int affine = 1; affine <= 2; ++affine) {
                const int rc = run(cu, chk, ops[o], types[k], affine, &res);
                CHECK(rc == LNTUNE_OK, "%s %s affine %d: rc %d: %s", lntune_op_name(ops[o]),
                      types[k], affine, rc, res.message);
            }
    /* An fp32 y and the offset too: the checker is the same for every y. */
    CHECK(run(cu, chk, LNTUNE_OP_RMSNORM, "f32", 2, &res) == LNTUNE_OK, "f32 offset: %s",
          res.message);

    setenv("MOCK_CUDA_QUANT_FAULT", "past", 1);
    int rc = run(cu, chk, LNTUNE_OP_RMSNORM, "f32/i8row", 1, &res);
    CHECK(rc != LNTUNE_OK && strstr(res.message, "past the end of y_scales"),
          "a scale past the rows: rc %d: %s", rc, res.message);
    setenv("MOCK_CUDA_QUANT_FAULT", "noscale", 1);
    rc = run(cu, chk, LNTUNE_OP_LAYERNORM, "f32/e4m3row", 1, &res);
    CHECK(rc == LNTUNE_EVERIFY, "scales never written: rc %d: %s", rc, res.message);
    setenv("MOCK_CUDA_QUANT_FAULT", "nooffset", 1);
    rc = run(cu, chk, LNTUNE_OP_RMSNORM, "f32/i8row", 2, &res);
    CHECK(rc == LNTUNE_EVERIFY, "the offset ignored: rc %d: %s", rc, res.message);
    rc = run(cu, chk, LNTUNE_OP_RMSNORM, "f32", 2, &res);
    CHECK(rc == LNTUNE_EVERIFY, "the offset ignored, fp32 y: rc %d: %s", rc, res.message);
    unsetenv("MOCK_CUDA_QUANT_FAULT");

    lntune_cuda_checker_destroy(chk);
    lntune_cuda_close(cu);
    return CHECK_SUMMARY();
}
