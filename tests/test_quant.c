/*
 * test_quant.c - quantized y (core/quant.h): the reference codes, the CPU template's kernels
 * under the verifier, and the verifier's power to refuse wrong ones.
 *
 *   test_quant [full]
 *
 * Checks: every e4m3 code decodes and encodes back to itself, ties go to even, values past the
 * largest code saturate, NaN gives int8 0 and the e4m3 NaN code; kernels of both ops, int8 and
 * e4m3, static and per-row scales, fp32 and bf16 data, with and without the fused residual pass
 * the verifier (each tuple with two of the variants), RMSNorm's scale from the statistics pass
 * (qabs=stats) and AVX-512's int8 conversion (convert=native, where the host has it) too, and
 * bf16 data in layout=evenodd; and the verifier refuses the same template with ties rounded away
 * from zero, and without the saturation, for int8 and e4m3, and evenodd's codes stored in the
 * wrong order (each a copy of templates/cpu/convert.lua or norm.lua with one line changed, found
 * first on LNTUNE_TEMPLATE_DIR).
 *
 * Each check is a full verification (a compile, and the adversarial suite twice for the codes'
 * poisons), so the quick tier's run (no argument) takes one case of each kind: each tuple with
 * one of the variants (every variant over the tuples), each qabs=stats variant once (the tuples
 * in turn), each evenodd (op, tuple) once, and each wrong template under one op (the two in
 * turn). `test_quant full` (quant_full, the slow tier) takes every case: each tuple with two
 * variants, each qabs=stats variant with every tuple, each evenodd pair with two, each wrong
 * template under both ops.
 */
#define _GNU_SOURCE
#include "check.h"
#include "dtypes.h"
#include "lntune.h"
#include "quant.h"
#include "scratch_dir.h"
#include "template_mutant.h"
#include "verify_variant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int full; /* test_quant full: every case (see the top) */

static void check_codes(void) {
    int roundtrip = 1, monotonic = 1;
    double prev = -INFINITY;
    for (int c = 0; c < 256; ++c) {
        const double v = lntune_e4m3_value((uint8_t)c);
        if (isnan(v)) {
            CHECK((c & 0x7f) == 0x7f, "only 0x7f and 0xff are NaN, not 0x%02x", c);
            continue;
        }
        roundtrip &= lntune_quant_e4m3(v) == c;
    }
    for (int c = 0xfe; c >= 0x80; --c) { /* negative codes, most negative first */
        const double v = lntune_e4m3_value((uint8_t)c);
        monotonic &= v >= prev;
        prev = v;
    }
    for (int c = 0x00; c <= 0x7e; ++c) {
        const double v = lntune_e4m3_value((uint8_t)c);
        monotonic &= v >= prev;
        prev = v;
    }
    CHECK(roundtrip, "every e4m3 code encodes back to itself");
    CHECK(monotonic, "e4m3 codes in order of value");
    CHECK(lntune_e4m3_value(0x7e) == 448.0 && lntune_e4m3_value(0x01) == 0x1p-9,
          "e4m3 extremes: 448 and 2^-9");
    CHECK(lntune_quant_e4m3(2.125) == lntune_quant_e4m3(2.0) &&
              lntune_quant_e4m3(2.375) == lntune_quant_e4m3(2.5) &&
              lntune_quant_e4m3(0x1p-10) == 0 &&
              lntune_quant_e4m3(400.0) == lntune_quant_e4m3(384.0),
          "e4m3 ties to even");
    CHECK(lntune_quant_e4m3(460.0) == 0x7e && lntune_quant_e4m3(-1e30) == 0xfe &&
              lntune_quant_e4m3(INFINITY) == 0x7e,
          "e4m3 saturates at 448");
    CHECK(lntune_quant_e4m3(NAN) == 0x7f && lntune_quant_i8(NAN) == 0, "NaN codes");
    CHECK(lntune_quant_i8(2.5) == 2 && lntune_quant_i8(-2.5) == -2 && lntune_quant_i8(3.5) == 4 &&
              lntune_quant_i8(126.5) == 126,
          "int8 ties to even");
    CHECK(lntune_quant_i8(127.6) == 127 && lntune_quant_i8(300.0) == 127 &&
              lntune_quant_i8(-128.4) == -128 && lntune_quant_i8(-INFINITY) == -128,
          "int8 saturates to [-128, 127]");
}

static lntune_shape shape_of(const char *dtype, int fusion) {
    lntune_shape s = {.affine = LNTUNE_AFFINE_ANY, .fusion = fusion};
    CHECK(lntune_types_parse(dtype, &s.types) == 0, "dtype %s parses", dtype);
    return s;
}

/* variant of op on dtype (fusion: 0 none, 1 residual, 2 residual_out) passes the verifier; a
 * convert=native variant the host does not offer (no AVX-512, or no int8 y) is noted instead. */
static void check_variant(const char *op, const char *dtype, int fusion, const char *variant) {
    const lntune_shape s = shape_of(dtype, fusion);
    lntune_verify_variant_result r;
    char err[1024] = "";
    const int rc = lntune_verify_variant(op, variant, &s, &r, err, sizeof err);
    if (rc == LNTUNE_EINVAL && strstr(variant, "native") && strstr(err, "'convert' = 'native'")) {
        printf("note: %s %s not offered here: %s\n", dtype, variant, err);
        return;
    }
    CHECK(rc == LNTUNE_OK && r.check.cases > 0, "%s %s fusion %d %s: rc %d %s %s", op, dtype,
          fusion, variant, rc, err, r.check.message);
}

/* Variants of every code path: vector and tail, rows=2 groups, overlap=1, vec=1. */
static void check_kernels(void) {
    static const char *const dtypes[] = {"f32/i8",      "f32/i8row",       "f32/e4m3",
                                         "f32/e4m3row", "bf16/i8row/bf16", "bf16/e4m3/bf16"};
    static const char *const variants[] = {"vec=16,acc=2", "vec=8,acc=1,rows=2",
                                           "vec=16,acc=1,stats=sampled,prefetch=1,overlap=1",
                                           "vec=1,acc=1,affine=none"};
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    /* Each tuple with two of the variants (full), or one (all of them over the tuples). */
    const size_t nv = sizeof variants / sizeof *variants;
    for (size_t o = 0; o < 2; ++o)
        for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; ++d)
            for (size_t j = 0; j < (full ? 2u : 1u); ++j) {
                const size_t k = (2 * d + j + o) % nv;
                const char *variant = variants[k];
                if (o == 1 && strstr(variant, "stats=sampled"))
                    variant = "vec=16,acc=1,prefetch=1,overlap=1";
                /* the fused residual with every other dtype, residual_out with bf16 */
                check_variant(ops[o], dtypes[d], d % 2 ? (d >= 4 ? 2 : 1) : 0, variant);
            }
}

/* RMSNorm's largest |x * gamma| from the statistics pass (qabs=stats), and AVX-512's int8
 * conversion (convert=native), which a host without AVX-512 does not offer. */
static void check_rmsnorm_row_scales(void) {
    static const char *const dtypes[] = {"f32/i8row", "bf16/i8row/bf16", "f32/e4m3row"};
    static const char *const variants[] = {
        "vec=16,acc=2,qabs=stats",
        "vec=8,acc=2,rows=2,qabs=stats",
        "vec=16,acc=4,prefetch=1,overlap=1,qabs=stats",
        "vec=4,acc=1,qabs=stats,affine=none",
        "vec=16,acc=2,convert=native",
        "vec=16,acc=4,prefetch=1,overlap=1,qabs=stats,convert=native"};
    /* residual_out with every other one; the quick run takes each variant with one tuple */
    const size_t nd = sizeof dtypes / sizeof *dtypes;
    for (size_t d = 0; d < nd; ++d)
        for (size_t k = 0; k < sizeof variants / sizeof *variants; ++k)
            if (full || k % nd == d)
                check_variant("rmsnorm", dtypes[d], (int)((d + k) % 2) * 2, variants[k]);
}

/* layout=evenodd with a quantized y (all-bf16 data): each half of 2V elements narrowed, the codes
 * interleaved back into memory order. Both ops, int8 and e4m3, static and per-row scales, no
 * fusion, the residual and residual_out, vector widths 4 to 16, tails (H at run time), row
 * groups, overlap=1, and RMSNorm's qabs=stats with AVX-512's int8 conversion. */
static void check_evenodd(void) {
    static const char *const dtypes[] = {"bf16/i8row/bf16", "bf16/i8/bf16", "bf16/e4m3row/bf16",
                                         "bf16/e4m3/bf16"};
    static const char *const variants[] = {
        "vec=16,acc=2,layout=evenodd", "vec=4,acc=1,rows=2,layout=evenodd",
        "vec=8,acc=1,stats=sampled,prefetch=1,overlap=1,layout=evenodd",
        "vec=16,acc=2,prefetch=1,overlap=1,qabs=stats,convert=native,layout=evenodd"};
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    for (size_t o = 0; o < 2; ++o)
        for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; ++d)
            for (size_t j = 0; j < (full ? 2u : 1u); ++j) { /* two (or one) of the four each */
                const size_t k = (o + d + 2 * j) % (sizeof variants / sizeof *variants);
                const char *variant = variants[k];
                if (o == 1 && strstr(variant, "stats=sampled"))
                    variant = "vec=8,acc=1,prefetch=1,overlap=1,layout=evenodd";
                if (strstr(variant, "qabs=stats") && (o == 0 || !strstr(dtypes[d], "row")))
                    variant = "vec=16,acc=4,convert=native,layout=evenodd";
                /* the fusions in turn: none, residual, residual_out */
                check_variant(ops[o], dtypes[d], (int)((o + d + k) % 3), variant);
            }
}

typedef struct {
    const char *what, *dtype, *variant;
    const char *from, *to; /* a line of the template file, and what it becomes */
    const char *file;      /* NULL: convert.lua */
} mutant;

static const mutant mutants[] = {
    {"int8 ties away from zero (vector code)", "f32/i8", "vec=16,acc=1",
     "            .. \"    w = (w + 0x1.8p23f) - 0x1.8p23f;\\n\"",
     "            .. \"    w += (vf)((vu)(w < 0.0f) & 0x80000000u | 0x3f000000u);\\n\"", NULL},
    {"int8 ties away from zero (scalar code)", "f32/i8", "vec=1,acc=1",
     "return (int8_t)(int)((v + 0x1.8p23f) - 0x1.8p23f);",
     "return (int8_t)(int)(v + (v < 0.0f ? -0.5f : 0.5f));", NULL},
    {"int8 without saturation", "f32/i8", "vec=16,acc=1",
     "            .. \"    u = (u & ~(hi | lo)) | (0x42fe0000u & hi) | (0xc3000000u & lo); /* "
     "127.0f, -128.0f */\\n\"",
     "            .. \"    (void)hi, (void)lo;\\n\"", NULL},
    {"e4m3 ties away from zero", "f32/e4m3", "vec=16,acc=1",
     "            .. \"    const vu normal = ((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u "
     "<< "
     "3);\\n\"",
     "            .. \"    const vu normal = ((a + 0x80000u) >> 20) - (120u << 3);\\n\"", NULL},
    {"e4m3 without saturation", "f32/e4m3", "vec=16,acc=1",
     "            .. \"    a = (a & ~big) | (0x43e00000u & big); /* 448.0f */\\n\"",
     "            .. \"    (void)big;\\n\"", NULL},
    {"layout=evenodd codes stored odd before even", "bf16/i8row/bf16",
     "vec=16,acc=1,layout=evenodd", "__builtin_shufflevector(narrow_y(even), narrow_y(odd),",
     "__builtin_shufflevector(narrow_y(odd), narrow_y(even),", "norm.lua"},
};

static void check_mutants(void) {
    char dir[512];
    if (scratch_dir_make(dir, sizeof dir, "quant") != 0) {
        CHECK(0, "a scratch directory");
        return;
    }
    for (size_t m = 0; m < sizeof mutants / sizeof *mutants; ++m) {
        const mutant *u = &mutants[m];
        const char *file = u->file ? u->file : "convert.lua";
        if (!write_mutant_checked(dir, file, u->from, u->to, u->what)) continue;
        const lntune_shape s = shape_of(u->dtype, 0);
        const int first = full ? 0 : (int)(m % 2), last = full ? 1 : first; /* ops, in turn */
        for (int op = first; op <= last; ++op)
            mutant_refused(dir, u->what, op ? "rmsnorm" : "layernorm", u->variant, &s, "expected");
    }
    scratch_dir_finish(dir, check_failures);
}

int main(int argc, char **argv) {
    full = argc > 1 && strcmp(argv[1], "full") == 0;
    check_codes();
    check_kernels();
    check_rmsnorm_row_scales();
    check_evenodd();
    check_mutants();
    return CHECK_SUMMARY();
}
