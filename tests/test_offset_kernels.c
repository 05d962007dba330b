/*
 * test_offset_kernels.c - the CPU template's weight offset (affine=offset: y = norm(x) *
 * (offset + gamma)) under the verifier, and the verifier's power to refuse a wrong one.
 *
 *   test_offset_kernels
 *
 * Checks: kernels of both ops over the template's code paths (vector loops and tails, row groups,
 * overlap=1, the even/odd bf16 layout, non-temporal stores, native fp16, fixed H), fp32, fp16 and
 * bf16, with and without the fused residual, and a quantized y (RMSNorm's qabs=stats takes
 * max |x * (offset + gamma)| in its statistics pass) pass the verifier, which runs each with
 * offsets 1 and 0.5; and it refuses the same template that ignores the offset, or takes it to be
 * 1 (each a copy of templates/cpu/norm.lua with one line changed, found first on
 * LNTUNE_TEMPLATE_DIR).
 */
#define _GNU_SOURCE
#include "check.h"
#include "dtypes.h"
#include "fusion.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "template_mutant.h"
#include "verify_variant.h"

#include <stdlib.h>
#include <string.h>

static lntune_shape shape_of(const char *dtype, int fusion, int64_t H) {
    lntune_shape s = {.H = H, .affine = LNTUNE_AFFINE_OFFSET, .fusion = fusion};
    CHECK(lntune_types_parse(dtype, &s.types) == 0, "dtype %s parses", dtype);
    return s;
}

typedef struct {
    const char *op, *dtype, *variant;
    int fusion;
    int64_t H; /* 0: any (h=runtime) */
} kernel_case;

static const kernel_case cases[] = {
    {"rmsnorm", "f32", "vec=16,acc=2", LNTUNE_FUSION_NONE, 0},
    {"rmsnorm", "bf16", "vec=8,acc=2,layout=evenodd", LNTUNE_FUSION_RESIDUAL_OUT, 0},
    {"rmsnorm", "bf16", "vec=16,acc=1,prefetch=1,overlap=1", LNTUNE_FUSION_NONE, 0},
    {"rmsnorm", "f16/f16/f32", "vec=8,acc=1,rows=2,convert=native", LNTUNE_FUSION_NONE, 0},
    {"rmsnorm", "f32", "vec=1,acc=1", LNTUNE_FUSION_RESIDUAL, 0},
    {"rmsnorm", "bf16/i8row/bf16", "vec=16,acc=2,qabs=stats", LNTUNE_FUSION_NONE, 0},
    {"rmsnorm", "f32/i8row", "vec=16,acc=4,prefetch=1,overlap=1,qabs=stats", LNTUNE_FUSION_NONE, 0},
    {"rmsnorm", "bf16/e4m3/bf16", "vec=8,acc=2", LNTUNE_FUSION_NONE, 0},
    {"rmsnorm", "bf16", "vec=16,acc=2,h=fixed", LNTUNE_FUSION_NONE, 4096},
    {"layernorm", "f32", "vec=16,acc=2,stats=sampled,store=nt", LNTUNE_FUSION_NONE, 0},
    {"layernorm", "bf16", "vec=8,acc=2,layout=evenodd,stats=twopass", LNTUNE_FUSION_RESIDUAL_OUT,
     0},
    {"layernorm", "bf16/f32/bf16", "vec=16,acc=1,stats=sampled,prefetch=1,overlap=1",
     LNTUNE_FUSION_NONE, 0},
    {"layernorm", "f32/i8row", "vec=16,acc=2", LNTUNE_FUSION_RESIDUAL, 0},
    {"layernorm", "f32", "vec=4,acc=1,rows=4,stats=welford", LNTUNE_FUSION_NONE, 0},
};

static void check_kernels(void) {
    for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
        const kernel_case *c = &cases[k];
        const lntune_shape s = shape_of(c->dtype, c->fusion, c->H);
        char variant[256];
        snprintf(variant, sizeof variant, "%s,affine=offset", c->variant);
        lntune_verify_variant_result r;
        char err[1024] = "";
        const int rc = lntune_verify_variant(c->op, variant, &s, &r, err, sizeof err);
        if (rc == LNTUNE_EINVAL && strstr(c->variant, "native") &&
            strstr(err, "'convert' = 'native'")) {
            printf("note: %s %s %s not offered here (no F16C): %s\n", c->op, c->dtype, variant,
                   err);
            continue;
        }
        CHECK(rc == LNTUNE_OK && r.check.cases > 0, "%s %s fusion %d %s: rc %d %s %s", c->op,
              c->dtype, c->fusion, variant, rc, err, r.check.message);
    }
}

typedef struct {
    const char *what;
    const char *from, *to; /* a line of norm.lua, and what it becomes */
} mutant;

static const mutant mutants[] = {
    {"the offset ignored",
     "@ local function GW(e) return ofs and (\"(\" .. e .. \" + wofs)\") or e end",
     "@ local function GW(e) return ofs and (\"(\" .. e .. \" + 0.0f * wofs)\") or e end"},
    {"the offset taken to be 1",
     "@ local function GW(e) return ofs and (\"(\" .. e .. \" + wofs)\") or e end",
     "@ local function GW(e) return ofs and (\"(\" .. e .. \" + 1.0f + 0.0f * wofs)\") or e end"},
};

static void check_mutants(void) {
    char dir[512];
    if (scratch_dir_make(dir, sizeof dir, "offset") != 0) {
        CHECK(0, "a scratch directory");
        return;
    }
    for (size_t m = 0; m < sizeof mutants / sizeof *mutants; ++m) {
        const mutant *u = &mutants[m];
        if (!write_mutant_checked(dir, "norm.lua", u->from, u->to, u->what)) continue;
        const lntune_shape s = shape_of("f32", LNTUNE_FUSION_NONE, 0);
        for (int op = 0; op < 2; ++op)
            mutant_refused(dir, u->what, op ? "rmsnorm" : "layernorm", "vec=16,acc=2,affine=offset",
                           &s, "reference");
    }
    scratch_dir_finish(dir, check_failures);
}

int main(void) {
    check_kernels();
    check_mutants();
    return CHECK_SUMMARY();
}
