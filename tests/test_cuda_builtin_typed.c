/*
 * test_cuda_builtin_typed.c - the CUDA built-ins of fp16/bf16 and residual calls: one source per
 * op, affine kind and fusion, its element types chosen by NVRTC options
 * (core/cuda_types.h). Without a GPU: each sample compiles through NVRTC for sm_90 to a cubin
 * and its PTX with the kernel's entry; with x in fp16 the PTX widens it (cvt.f32.f16), so the
 * options did choose the types. On a GPU every sample is also verified on the device
 * (tests/cuda_device.h), for the H of the device suite.
 *
 * The sample: all 27 tuples of x, y and gamma/beta without a residual (the all-fp32 one is
 * served by the fp32 built-ins, and checked here anyway), the op and the affine kind moving from
 * one tuple to the next; with a residual, every residual type under both fusions and both ops,
 * x, y and gamma/beta moving likewise. The backward built-ins (a pair: the kernel and its
 * _dgamma second pass): every (x, params) tuple of each op, with and without dresidual_out.
 *
 * The built-ins of a quantized y and of the weight offset (lntune_builtin_emit_cuda_kind): every
 * one of them, both ops x {no gamma, gamma, gamma + offset} x {int8, e4m3, each with a static
 * scale or one per row; with the offset also y left to its macro} x the three fusions, x, y
 * (where not quantized), gamma/beta and the residual moving through fp32, fp16 and bf16 as
 * above. A quantized y's PTX must round to codes (cvt.rni.s32.f32) and divide exactly
 * (div.rn.f32), and per row take the row's max (max.f32); with the offset, gamma + offset is one
 * add.rn.f32. Exits 77 (skipped) when no NVRTC can be loaded.
 *
 * With the argument "quick" (the quick tier's cuda_builtin_typed), the same sample but for the
 * backward and the quantized/offset built-ins, each taken under one of its fusions (and for the
 * backward one op) in turn: every (x, params) tuple of the backward and every built-in of a
 * quantized y or the offset compiled once. Without it (cuda_builtin_typed_full, the slow tier;
 * the GPU bundle's run) every one.
 */
#define _GNU_SOURCE /* memmem, in nvrtc_check.h */
#include "builtin.h"
#include "check.h"
#include "cuda_compile_test.h"
#include "cuda_types.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"
#include "problem.h"

#include <stdio.h>
#include <string.h>

enum {
    SM = 90,
    UNFUSED = 27,
    FUSED = 3 * 2 * 2,
    BACKWARD = 9 * 2 * 2,        /* (x, params) x op x fusion */
    KINDS = 2 * (2 * 4 + 5) * 3, /* op x (affine, y) x fusion */
    MAX_JOBS = UNFUSED + FUSED + BACKWARD + KINDS,
    QUICK_JOBS = UNFUSED + FUSED + 9 + KINDS / 3 /* one per (x, params) tuple; per built-in */
};

static int quick; /* the argument "quick": see the top */

typedef struct {
    int backward; /* a pair: variant is its index in lntune_builtin_cuda_backward_variants */
    size_t variant;
    const char *op;  /* forward: lntune_builtin_emit_cuda_kind's op */
    int kind_affine; /* and its LNTUNE_AFFINE_* */
    int affine;      /* the source's: what the device checker passes */
    int fusion;
    lntune_types types;
    char symbol[128];
    char what[200];
    lntune_cuda_type_options options;
    lntune_nvrtc_job job;
} sample;

static sample samples[MAX_JOBS];
static size_t nsamples;

/* Sample s, whose source src was emitted with code rc, named and queued for NVRTC with its
 * types' options. */
static void take(lntune_gen *g, sample *s, int rc, lntune_source *src) {
    char tuple[24], symbol[sizeof s->symbol];
    lntune_types_format(s->types, tuple, sizeof tuple);
    memcpy(symbol, s->symbol, sizeof symbol);
    snprintf(s->what, sizeof s->what, "%.120s %s", symbol, tuple);
    EXPECT(rc == LNTUNE_OK, "emit %s: %s", s->what, lntune_gen_errmsg(g));
    if (rc != LNTUNE_OK) return;
    lntune_cuda_type_options_make(s->types, &s->options);
    s->job.options = s->options.options;
    s->affine = src->affine;
    compile_test_take(&s->job, src);
}

/* The backward pair variant of lntune_builtin_cuda_backward_variants for fusion and types. */
static void add_backward(lntune_gen *g, size_t variant, int fusion, lntune_types types) {
    sample *s = &samples[nsamples++];
    s->backward = 1;
    s->variant = variant;
    s->fusion = fusion;
    s->types = types;
    lntune_builtin_cuda_backward_symbol("lntune_builtin", variant, fusion, s->symbol,
                                        sizeof s->symbol);
    lntune_source src;
    const int rc = lntune_builtin_emit_cuda_backward(g, variant, fusion, s->symbol, &src);
    take(g, s, rc, &src);
}

/* The forward built-in of op, affine kind and fusion for types: y quantized (the source's own),
 * or left to its macro like the others. */
static void add_forward(lntune_gen *g, const char *op, int affine, lntune_types types, int fusion) {
    sample *s = &samples[nsamples++];
    s->op = op;
    s->kind_affine = affine;
    s->fusion = fusion;
    s->types = types;
    const int y = lntune_type_quantized(types.y) ? types.y : LNTUNE_TYPE_F32;
    lntune_builtin_cuda_kind_symbol("lntune_builtin", op, affine, y, fusion, s->symbol,
                                    sizeof s->symbol);
    lntune_source src;
    const int rc = lntune_builtin_emit_cuda_kind(g, op, affine, y, fusion, s->symbol, &src);
    take(g, s, rc, &src);
}

/* Variant i of lntune_builtin_cuda_variants, y left to its macro. */
static void add_variant(lntune_gen *g, size_t i, int fusion, lntune_types types) {
    const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
    add_forward(g, v->op, v->affine ? LNTUNE_AFFINE_GAMMA : LNTUNE_AFFINE_NONE, types, fusion);
}

static void collect(lntune_gen *g) {
    const size_t nvariants = lntune_builtin_cuda_variant_count;
    for (int k = 0; k < UNFUSED; ++k) {
        const lntune_types t = {
            .x = (uint8_t)(k / 9), .y = (uint8_t)(k / 3 % 3), .params = (uint8_t)(k % 3)};
        add_variant(g, (size_t)k % nvariants, LNTUNE_FUSION_NONE, t);
    }
    int k = 0;
    for (int r = 0; r < 3; ++r)
        for (int f = LNTUNE_FUSION_RESIDUAL; f < LNTUNE_FUSION_COUNT; ++f)
            for (int op = 0; op < 2; ++op, ++k) {
                lntune_types t = {.x = (uint8_t)((r + k) % 3),
                                  .y = (uint8_t)(k % 3),
                                  .params = (uint8_t)((k / 3) % 3)};
                lntune_types_set_residual(&t, r);
                add_variant(g, (size_t)(op * 2 + k % 2), f, t);
            }
    /* the backward: x, dy, dx (and dresidual_out) share x's type; y is x's */
    for (int b = 0; b < BACKWARD; ++b) {
        if (quick && b % 4 != b / 4 % 4) continue; /* tuple b / 4's op and fusion in turn */
        const int x = b / 12, p = b / 4 % 3;
        const lntune_types t = {.x = (uint8_t)x, .y = (uint8_t)x, .params = (uint8_t)p};
        add_backward(g, (size_t)(b % 2), b / 2 % 2 ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE,
                     t);
    }
    /* every built-in of a quantized y or the weight offset, the types moving */
    static const int affines[] = {LNTUNE_AFFINE_NONE, LNTUNE_AFFINE_GAMMA, LNTUNE_AFFINE_OFFSET};
    static const int ys[] = {LNTUNE_TYPE_F32, LNTUNE_TYPE_I8, LNTUNE_TYPE_I8_ROW, LNTUNE_TYPE_E4M3,
                             LNTUNE_TYPE_E4M3_ROW};
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    k = 0;
    int built_in = 0;
    for (int op = 0; op < 2; ++op)
        for (int a = 0; a < 3; ++a)
            for (int y = 0; y < 5; ++y) {
                if (ys[y] == LNTUNE_TYPE_F32 && affines[a] != LNTUNE_AFFINE_OFFSET) continue;
                const int quick_fusion = built_in++ % LNTUNE_FUSION_COUNT; /* in turn */
                for (int f = LNTUNE_FUSION_NONE; f < LNTUNE_FUSION_COUNT; ++f, ++k) {
                    if (quick && f != quick_fusion) continue;
                    lntune_types t = {.x = (uint8_t)(k % 3),
                                      .y = (uint8_t)(ys[y] ? ys[y] : (k / 3) % 3),
                                      .params = (uint8_t)((k / 9) % 3)};
                    if (f) lntune_types_set_residual(&t, (k + 1) % 3);
                    add_forward(g, ops[op], affines[a], t, f);
                }
            }
}

static void check(const sample *s) {
    if (!nvrtc_check_compiled(&s->job, s->symbol, s->backward, s->what)) return;
    /* fp16 x must be widened; with no fp16 input at all, nothing may be. */
    const lntune_types t = s->types;
    const int widens = strstr(s->job.out.ptx, "cvt.f32.f16") != NULL;
    EXPECT(t.x != LNTUNE_TYPE_F16 || widens, "%s: x is fp16, yet not widened", s->what);
    const int f16_in = t.x == LNTUNE_TYPE_F16 || t.params == LNTUNE_TYPE_F16 ||
                       (s->fusion && lntune_types_residual(t) == LNTUNE_TYPE_F16);
    EXPECT(f16_in || !widens, "%s: no fp16 input, yet cvt.f32.f16 in the PTX", s->what);
    const char *ptx = s->job.out.ptx;
    if (lntune_type_quantized(t.y)) {
        EXPECT(strstr(ptx, "cvt.rni.s32.f32"), "%s: no rounding to codes in the PTX", s->what);
        EXPECT(strstr(ptx, "div.rn.f32"), "%s: no exact division in the PTX", s->what);
        EXPECT(!lntune_type_row_scaled(t.y) || strstr(ptx, "max.f32"), "%s: no row max", s->what);
    } else {
        EXPECT(!strstr(ptx, "cvt.rni.s32.f32"), "%s: y is not quantized, yet rounded to codes",
               s->what);
    }
    EXPECT(s->kind_affine != LNTUNE_AFFINE_OFFSET || strstr(ptx, "add.rn.f32"),
           "%s: no add.rn.f32 (offset)", s->what);
}

/* Without the macros the source must refuse to compile, naming them. */
static void collected(const lntune_nvrtc *nv) {
    lntune_nvrtc_output bare = {0};
    if (nsamples && samples[0].job.source) {
        const int brc = lntune_nvrtc_compile(nv, samples[0].job.source, "bare.cu", SM,
                                             LNTUNE_NVRTC_PTX, NULL, &bare);
        EXPECT(brc == LNTUNE_ECOMPILE && bare.message && strstr(bare.message, "LNTUNE_X_T"),
               "compiled without -DLNTUNE_X_T: rc %d, %s", brc,
               bare.message ? bare.message : "no message");
        lntune_nvrtc_output_free(&bare);
    }
}

static lntune_nvrtc_job *job(size_t i, int sm) {
    (void)sm;
    return &samples[i].job;
}

static void compiled(size_t i, device_suite *d) {
    const sample *s = &samples[i];
    check(s);
    if (s->job.rc != LNTUNE_OK) return;
    if (s->backward) {
        const lntune_builtin_variant *v = &lntune_builtin_cuda_backward_variants[s->variant];
        lntune_op op;
        lntune_op_text_parse(v->op, &op, NULL, NULL);
        device_verify_backward(d, SM, s->job.source, s->job.out.data, s->symbol, op, s->types,
                               s->fusion, 0, s->what);
    } else {
        device_verify_forward(d, SM, s->job.source, s->job.out.data, s->symbol,
                              (lntune_op)lntune_op_parse(s->op), s->types, s->fusion, s->affine, 0,
                              s->what);
    }
}

int main(int argc, char **argv) {
    quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const compile_test t = {"typed built-ins",
                            {SM},
                            {collect},
                            collected,
                            job,
                            compiled,
                            &nsamples,
                            quick ? QUICK_JOBS : MAX_JOBS};
    return compile_test_main(&t);
}
