/*
 * test_shape_kind.c - lntune_shape_kind: the types and fusion that --dtype, --residual and
 * --backward give every shape. Checks: no dtype is all fp32 and unfused; a dtype's types as
 * lntune_types_parse reads them; the forward keeps its fusion, the backward makes residual_out
 * "residual" (dresidual_out given); refused with their messages: an unknown dtype, a backward
 * whose y type is not x's, the backward of a forward without residual_out.
 */
#include "check.h"
#include "dtypes.h"
#include "fusion.h"
#include "lntune.h"
#include "shape.h"

#include <string.h>

int main(void) {
    lntune_shape k;
    lntune_types bf16;
    char err[1024] = "";
    lntune_types_parse("bf16/bf16/f32", &bf16);
    int rc = lntune_shape_kind(NULL, 0, 0, &k, err, sizeof err);
    CHECK(rc == LNTUNE_OK && k.types.x == 0 && k.types.y == 0 && k.types.params == 0 &&
              k.fusion == LNTUNE_FUSION_NONE && k.H == 0 && k.rows == 0,
          "no dtype: all fp32, unfused");
    rc = lntune_shape_kind("bf16/bf16/f32", LNTUNE_FUSION_RESIDUAL, 0, &k, err, sizeof err);
    CHECK(rc == LNTUNE_OK && memcmp(&k.types, &bf16, sizeof bf16) == 0 &&
              k.fusion == LNTUNE_FUSION_RESIDUAL,
          "bf16/bf16/f32 --residual=noout: its types, the fusion kept");
    rc = lntune_shape_kind("bf16/bf16/f32", LNTUNE_FUSION_RESIDUAL_OUT, 1, &k, err, sizeof err);
    CHECK(rc == LNTUNE_OK && k.fusion == LNTUNE_FUSION_RESIDUAL,
          "--backward --residual: dresidual_out given (fusion %d)", k.fusion);
    rc = lntune_shape_kind(NULL, LNTUNE_FUSION_RESIDUAL_OUT, 0, &k, err, sizeof err);
    CHECK(rc == LNTUNE_OK && k.fusion == LNTUNE_FUSION_RESIDUAL_OUT, "forward --residual");

    rc = lntune_shape_kind("f64", 0, 0, &k, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "unknown dtype 'f64' (expected f32, f16 or bf16"),
          "f64: %s", err);
    rc = lntune_shape_kind("bf16/f32/f32", 0, 1, &k, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "--backward with dtype 'bf16/f32/f32': dx and dy"),
          "a backward of y unlike x: %s", err);
    rc = lntune_shape_kind(NULL, LNTUNE_FUSION_RESIDUAL, 1, &k, err, sizeof err);
    CHECK(rc == LNTUNE_EINVAL && strstr(err, "--backward with --residual=noout: a forward"),
          "the backward of a forward without residual_out: %s", err);
    return CHECK_SUMMARY();
}
