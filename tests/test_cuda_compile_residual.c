/*
 * test_cuda_compile_residual.c - the CUDA forward kernels fused with a residual add
 * (templates/cuda/norm.lua, shape.fusion) compile, without a GPU: a sample of the variants of
 * both ops, both fusions ("residual", "residual_out") and 8 type tuples x/y/params/residual (4 of
 * them with a residual type other than x's) goes through NVRTC for sm_90, and some for sm_80, to
 * a cubin and its PTX. Each must be non-empty and define the kernel's symbol; the launch line must
 * parse; the fused source must differ from the unfused one (the template reads shape.fusion) and
 * add x and residual with __fadd_rn, which must reach the PTX as add.rn.f32; a 16-bit x or
 * residual must be widened. Every layout supports a residual: each fused variant list must be the
 * unfused one. Every value of every knob of the lists sampled must come up in the sample of each
 * fusion.
 *
 * The sample (72 compiles, under a minute on 2 idle cores), per (tuple, op, fusion) k = 0..31:
 * one variant of the any-H list and one of the h=fixed variants at H = 1000, 4096 or 16384 (k mod
 * 3: register caches with H not a multiple of a pack's threads, register caches, clusters), each
 * the variant with the most knob values that the fusion's sample lacks, the first such from index
 * k * 13 + 5 (any H) or k * 7 (fixed H) on; for sm_80, per (op, fusion): the first any-H variant
 * and the last fixed-H one at H = 4096. On a GPU (none in CI) every sample for its compute
 * capability is also verified there (tests/cuda_device.h). Exits 77 (skipped) when no NVRTC can
 * be loaded.
 */
#define _GNU_SOURCE /* memmem, in nvrtc_check.h */
#include "check.h"
#include "cuda_compile_test.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"

#include <stdio.h>
#include <string.h>

enum { NTUPLES = 8, MAX_JOBS = NTUPLES * 2 * 2 * 2 + 2 * 2 * 2 };

static const char *const ops[] = {"layernorm", "rmsnorm"};
static const int fusions[] = {LNTUNE_FUSION_RESIDUAL, LNTUNE_FUSION_RESIDUAL_OUT};

/* x, y, params, residual: all of one type, then mixes with residual types other than x's. */
static const int tuples[NTUPLES][4] = {
    {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32},
    {LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16},
    {LNTUNE_TYPE_F16, LNTUNE_TYPE_F16, LNTUNE_TYPE_F16, LNTUNE_TYPE_F16},
    {LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32},
    {LNTUNE_TYPE_F16, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_BF16},
    {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F16},
    {LNTUNE_TYPE_F32, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F16, LNTUNE_TYPE_BF16},
    {LNTUNE_TYPE_BF16, LNTUNE_TYPE_F16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32},
};

typedef struct {
    lntune_nvrtc_job job;
    int sm;
    char symbol[96];
    char what[320];
    int widen_f16; /* x or residual is fp16: its widening (cvt.f32.f16) must reach the PTX */
    lntune_op op;  /* for the run on a GPU */
    lntune_types types;
    int fusion, affine;
    int64_t fixed_h;
} sample;

static sample samples[MAX_JOBS];
static size_t nsamples;

/* Every knob value of the lists sampled for each fusion (fusions[] order), and whether a sample
 * had it. */
static knob_coverage coverage[2];

static knob_coverage *coverage_of(int fusion) {
    return &coverage[fusion == fusions[0] ? 0 : 1];
}

static void add(lntune_gen *g, int sm, const char *op, const char *variant,
                const lntune_shape *shape) {
    if (!compile_test_room(nsamples, MAX_JOBS)) return;
    sample *s = &samples[nsamples];
    const lntune_types t = shape->types;
    const int rt = lntune_types_residual(t);
    s->sm = sm;
    snprintf(s->symbol, sizeof s->symbol, "lntune_%s_%s_%s_%s_%s_%s", op,
             lntune_fusion_name(shape->fusion), lntune_type_name(t.x), lntune_type_name(t.y),
             lntune_type_name(t.params), lntune_type_name(rt));
    snprintf(s->what, sizeof s->what, "sm_%d %s+%s x=%s y=%s params=%s residual=%s H=%lld %s", sm,
             op, lntune_fusion_name(shape->fusion), lntune_type_name(t.x), lntune_type_name(t.y),
             lntune_type_name(t.params), lntune_type_name(rt), (long long)shape->H, variant);
    lntune_source src, plain;
    if (!compile_test_emit(g, op, variant, shape, s->symbol, s->what, &src)) return;
    lntune_cuda_launch l;
    EXPECT(lntune_cuda_launch_parse(src.text, &l) == LNTUNE_OK, "launch line of %s", s->what);
    EXPECT(strstr(src.text, "__fadd_rn(a.v[e], b.v[e])"), "%s: x + residual is not formed",
           s->what);
    /* The same variant without a residual: another kernel, the one the template emitted before. */
    lntune_shape unfused = *shape;
    unfused.fusion = LNTUNE_FUSION_NONE;
    if (lntune_gen_emit(g, "cuda", op, variant, &unfused, s->symbol, &plain) == LNTUNE_OK) {
        EXPECT(strcmp(plain.text, src.text) != 0, "%s: the same source as unfused", s->what);
        EXPECT(!strstr(plain.text, "a.residual"), "%s: unfused source reads residual", s->what);
        lntune_source_free(&plain);
    } else {
        EXPECT(0, "emit unfused %s: %s", s->what, lntune_gen_errmsg(g));
    }
    knob_coverage_add(coverage_of(shape->fusion), variant, 1);
    compile_test_take(&s->job, &src);
    s->widen_f16 = t.x == LNTUNE_TYPE_F16 || rt == LNTUNE_TYPE_F16;
    s->op = (lntune_op)lntune_op_parse(op);
    s->types = t;
    s->fusion = shape->fusion;
    s->affine = src.affine;
    s->fixed_h = src.fixed_h;
    ++nsamples;
}

/* The variants of op for shape; the same list as without a residual (every layout fuses it). */
static char **variants(lntune_gen *g, const char *op, const lntune_shape *shape, size_t *n) {
    lntune_shape unfused = *shape;
    unfused.fusion = LNTUNE_FUSION_NONE;
    char **list = compile_test_variants(g, op, shape, &unfused, "unfused", NULL, n, NULL);
    for (size_t i = 0; i < *n; ++i) knob_coverage_add(coverage_of(shape->fusion), list[i], 0);
    return list;
}

static lntune_types tuple(int i) {
    lntune_types t = {.x = tuples[i][0], .y = tuples[i][1], .params = tuples[i][2]};
    lntune_types_set_residual(&t, tuples[i][3]);
    return t;
}

static void collect_sm90(lntune_gen *g) {
    int k = 0;
    for (int ti = 0; ti < NTUPLES; ++ti)
        for (size_t o = 0; o < 2; ++o)
            for (size_t f = 0; f < 2; ++f, ++k) {
                lntune_shape any = {.types = tuple(ti), .fusion = fusions[f]};
                size_t n = 0;
                char **list = variants(g, ops[o], &any, &n);
                if (list)
                    add(g, 90, ops[o],
                        knob_coverage_pick(&coverage[f], list, n, (size_t)k * 13 + 5), &any);
                lntune_gen_free_list(list, n);
                compile_test_add_fixed(g, ops[o], &any, k, &coverage[f], (size_t)k * 7, variants,
                                       add);
            }
}

static void collect_sm80(lntune_gen *g) {
    int k = 0;
    for (size_t o = 0; o < 2; ++o)
        for (size_t f = 0; f < 2; ++f, ++k) {
            lntune_shape any = {.types = tuple(3 + k), .fusion = fusions[f]};
            size_t n = 0;
            char **list = variants(g, ops[o], &any, &n);
            if (list) add(g, 80, ops[o], list[0], &any);
            lntune_gen_free_list(list, n);
            lntune_shape fixed = any;
            fixed.H = 4096;
            list = variants(g, ops[o], &fixed, &n);
            char *fl[512];
            const size_t nf = compile_test_fixed(list, n, fl, 512);
            EXPECT(nf > 0, "sm_80 %s H=4096: no h=fixed variant", ops[o]);
            if (nf) add(g, 80, ops[o], fl[nf - 1], &fixed);
            lntune_gen_free_list(list, n);
        }
}

/* Every knob value of the lists sampled came up in the sample of each fusion. */
static void collected(const lntune_nvrtc *nv) {
    (void)nv;
    for (int f = 0; f < 2; ++f) compile_test_covered(&coverage[f], lntune_fusion_name(fusions[f]));
}

static lntune_nvrtc_job *job(size_t i, int sm) {
    return samples[i].sm == sm ? &samples[i].job : NULL;
}

static void compiled(size_t i, device_suite *d) {
    const sample *s = &samples[i];
    const lntune_nvrtc_output *out = &s->job.out;
    if (nvrtc_check_compiled(&s->job, s->symbol, 0, s->what)) {
        EXPECT(strstr(out->ptx, "add.rn.f32"), "%s: no add.rn.f32 (x + residual) in the PTX",
               s->what);
        if (s->widen_f16)
            EXPECT(strstr(out->ptx, "cvt.f32.f16"), "%s: fp16 is not widened", s->what);
    }
    if (s->job.rc == LNTUNE_OK)
        device_verify_forward(d, s->sm, s->job.source, out->data, s->symbol, s->op, s->types,
                              s->fusion, s->affine, s->fixed_h, s->what);
}

int main(void) {
    static const compile_test t = {"residual variants", {90, 80}, {collect_sm90, collect_sm80},
                                   collected,           job,      compiled,
                                   &nsamples,           MAX_JOBS};
    return compile_test_main(&t);
}
