/*
 * test_cuda_compile_quant.c - the CUDA forward kernels with a quantized y (int8 or fp8 e4m3, a
 * static scale or one per row) and with Gemma's weight offset (templates/cuda/norm.lua) compile,
 * without a GPU: a sample of both ops, the four code types, three x/params tuples, the fused
 * residual and the offset taking turns, goes through NVRTC for sm_90, and some for sm_80, to a
 * cubin and its PTX. Each must define the kernel's symbol with a launch line that parses; its
 * source must differ from the same variant with an fp32 y (the template reads the y type); the
 * PTX must round to the nearest integer (cvt.rni: the codes) and divide exactly (div.rn: the
 * reciprocal of a static scale, or QMAX / absmax and the scale of a row), and a scale per row
 * needs the row's max (max.f32). With the offset, gamma + offset is one __fadd_rn (add.rn.f32 in
 * the PTX). Each variant list is that of an fp32 y, whose affine=fused variants become
 * affine=offset (and affine=none ones drop out) with the offset; every value of every knob of
 * the lists sampled must come up in the sample of each code type.
 *
 * The sample (76 compiles, about 15 s on 2 cores), per (y type, tuple, op) k = 0..23 for sm_90:
 * two variants of the any-H list and one of the h=fixed variants at H = 1000, 4096 or 16384
 * (k mod 3), each the variant with the most knob values the code type's sample lacks, the first
 * such from index k * 11 + 3 and k * 11 + 8 (any H) or k * 5 (fixed H) on; the residual
 * (residual_out) on odd k, the offset on k mod 4 >= 2. For sm_80, per y type: the first any-H
 * variant. The codes' bits are checked on the host by test_cuda_codes.sh. On a GPU (none in CI)
 * every sample for its compute capability is also verified there (tests/cuda_device.h). Exits 77
 * (skipped) when no NVRTC can be loaded.
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

enum { NCODES = 4, NTUPLES = 3, MAX_JOBS = NCODES * NTUPLES * 2 * 3 + NCODES };

static const char *const ops[] = {"layernorm", "rmsnorm"};
static const int codes[NCODES] = {LNTUNE_TYPE_I8, LNTUNE_TYPE_I8_ROW, LNTUNE_TYPE_E4M3,
                                  LNTUNE_TYPE_E4M3_ROW};
static const int tuples[NTUPLES][2] = {/* x, gamma/beta (and the residual's type is x's) */
                                       {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32},
                                       {LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16},
                                       {LNTUNE_TYPE_F16, LNTUNE_TYPE_F32}};

typedef struct {
    lntune_nvrtc_job job;
    int sm;
    int row;    /* a scale per row */
    int offset; /* the weight offset */
    char symbol[96];
    char what[320];
    lntune_op op; /* for the run on a GPU */
    lntune_types types;
    int fusion, affine;
    int64_t fixed_h;
} sample;

static sample samples[MAX_JOBS];
static size_t nsamples;

/* Every knob value of the lists sampled for each code type (codes[] order), and whether a
 * sample had it. */
static knob_coverage coverage[NCODES];

static knob_coverage *coverage_of(int code) {
    size_t c = 0;
    while (c + 1 < NCODES && codes[c] != code) ++c;
    return &coverage[c];
}

static void add(lntune_gen *g, int sm, const char *op, const char *variant,
                const lntune_shape *shape) {
    if (!compile_test_room(nsamples, MAX_JOBS)) return;
    sample *s = &samples[nsamples];
    const lntune_types t = shape->types;
    const int offset = shape->affine == LNTUNE_AFFINE_OFFSET;
    s->sm = sm;
    s->row = lntune_type_row_scaled(t.y);
    s->offset = offset;
    snprintf(s->symbol, sizeof s->symbol, "lntune_%s_%s_%s_%s", op, lntune_type_name(t.x),
             lntune_type_name(t.y), lntune_type_name(t.params));
    snprintf(s->what, sizeof s->what, "sm_%d %s%s%s x=%s y=%s params=%s H=%lld %s", sm, op,
             shape->fusion ? "+residual_out" : "", offset ? "+offset" : "", lntune_type_name(t.x),
             lntune_type_name(t.y), lntune_type_name(t.params), (long long)shape->H, variant);
    lntune_source src, plain;
    if (!compile_test_emit(g, op, variant, shape, s->symbol, s->what, &src)) return;
    lntune_cuda_launch l;
    EXPECT(lntune_cuda_launch_parse(src.text, &l) == LNTUNE_OK, "launch line of %s", s->what);
    EXPECT(strstr(src.text, "* qinv; store_y<V>(yr + i, o);"), "%s: y is not scaled", s->what);
    EXPECT(!offset || strstr(src.text, "__fadd_rn(g.v[e], wofs)"), "%s: no gamma + offset",
           s->what);
    EXPECT(!s->row || strstr(src.text, "a.y_scales[row] = "), "%s: no row scale", s->what);
    /* The same variant with an fp32 y: another kernel, which neither scales nor codes. */
    lntune_shape f32y = *shape;
    f32y.types.y = LNTUNE_TYPE_F32;
    if (lntune_gen_emit(g, "cuda", op, variant, &f32y, s->symbol, &plain) == LNTUNE_OK) {
        EXPECT(strcmp(plain.text, src.text) != 0, "%s: the same source as an fp32 y", s->what);
        EXPECT(!strstr(plain.text, "qinv") && !strstr(plain.text, "y_scales[row]"),
               "%s: an fp32 y is scaled", s->what);
        lntune_source_free(&plain);
    } else {
        EXPECT(0, "emit %s with an fp32 y: %s", s->what, lntune_gen_errmsg(g));
    }
    knob_coverage_add(coverage_of(t.y), variant, 1);
    compile_test_take(&s->job, &src);
    s->op = (lntune_op)lntune_op_parse(op);
    s->types = t;
    s->fusion = shape->fusion;
    s->affine = src.affine;
    s->fixed_h = src.fixed_h;
    ++nsamples;
}

/* The variants of op for shape: those of an fp32 y, their affine=fused ones as affine=offset
 * (and no affine=none) with the offset. */
static char **variants(lntune_gen *g, const char *op, const lntune_shape *shape, size_t *n) {
    char **list = NULL, **ref = NULL;
    size_t nref = 0;
    *n = 0;
    const int rc = lntune_gen_variants(g, "cuda", op, shape, &list, n);
    EXPECT(rc == LNTUNE_OK && *n > 0, "variants of %s: %s", op, lntune_gen_errmsg(g));
    if (rc != LNTUNE_OK || *n == 0) {
        if (rc == LNTUNE_OK) lntune_gen_free_list(list, *n);
        *n = 0;
        return NULL;
    }
    lntune_shape f32y = *shape;
    f32y.types.y = LNTUNE_TYPE_F32;
    f32y.affine = LNTUNE_AFFINE_ANY;
    if (lntune_gen_variants(g, "cuda", op, &f32y, &ref, &nref) == LNTUNE_OK) {
        size_t k = 0;
        int same = 1;
        for (size_t i = 0; i < nref && same; ++i) {
            if (shape->affine == LNTUNE_AFFINE_OFFSET && strstr(ref[i], "affine=none")) continue;
            char want[256];
            snprintf(want, sizeof want, "%s", ref[i]);
            if (shape->affine == LNTUNE_AFFINE_OFFSET) {
                char *a = strstr(want, "affine=fused");
                if (a) snprintf(a, sizeof want - (size_t)(a - want), "affine=offset");
            }
            same = k < *n && strcmp(list[k++], want) == 0;
        }
        EXPECT(same && k == *n, "%s %s: %zu variants, not those of an fp32 y (%zu)", op,
               lntune_type_name(shape->types.y), *n, nref);
        lntune_gen_free_list(ref, nref);
    }
    for (size_t i = 0; i < *n; ++i) knob_coverage_add(coverage_of(shape->types.y), list[i], 0);
    return list;
}

static lntune_shape shape_of(int code, int tuple, int k) {
    lntune_shape s = {.types = {.x = tuples[tuple][0], .y = code, .params = tuples[tuple][1]}};
    lntune_types_set_residual(&s.types, tuples[tuple][0]);
    s.fusion = k % 2 ? LNTUNE_FUSION_RESIDUAL_OUT : LNTUNE_FUSION_NONE;
    s.affine = k % 4 >= 2 ? LNTUNE_AFFINE_OFFSET : LNTUNE_AFFINE_ANY;
    return s;
}

static void collect_sm90(lntune_gen *g) {
    int k = 0;
    for (int c = 0; c < NCODES; ++c)
        for (int ti = 0; ti < NTUPLES; ++ti)
            for (size_t o = 0; o < 2; ++o, ++k) {
                lntune_shape any = shape_of(codes[c], ti, k);
                size_t n = 0;
                char **list = variants(g, ops[o], &any, &n);
                for (size_t j = 0; list && j < 2; ++j)
                    add(g, 90, ops[o],
                        knob_coverage_pick(&coverage[c], list, n, (size_t)k * 11 + 3 + j * 5),
                        &any);
                lntune_gen_free_list(list, n);
                compile_test_add_fixed(g, ops[o], &any, k, &coverage[c], (size_t)k * 5, variants,
                                       add);
            }
}

static void collect_sm80(lntune_gen *g) {
    for (int c = 0; c < NCODES; ++c) {
        lntune_shape any = shape_of(codes[c], c % NTUPLES, c);
        size_t n = 0;
        char **list = variants(g, ops[c % 2], &any, &n);
        if (list) add(g, 80, ops[c % 2], list[0], &any);
        lntune_gen_free_list(list, n);
    }
}

/* Every knob value of the lists sampled came up in the sample of each code type. */
static void collected(const lntune_nvrtc *nv) {
    (void)nv;
    for (int c = 0; c < NCODES; ++c) compile_test_covered(&coverage[c], lntune_type_name(codes[c]));
}

static lntune_nvrtc_job *job(size_t i, int sm) {
    return samples[i].sm == sm ? &samples[i].job : NULL;
}

static void compiled(size_t i, device_suite *d) {
    const sample *s = &samples[i];
    const lntune_nvrtc_output *out = &s->job.out;
    if (nvrtc_check_compiled(&s->job, s->symbol, 0, s->what)) {
        EXPECT(strstr(out->ptx, "cvt.rni.s32.f32"), "%s: no rounding to codes in the PTX", s->what);
        EXPECT(strstr(out->ptx, "div.rn.f32"), "%s: no exact division in the PTX", s->what);
        EXPECT(!s->row || strstr(out->ptx, "max.f32"), "%s: no row max in the PTX", s->what);
        EXPECT(!s->offset || strstr(out->ptx, "add.rn.f32"), "%s: no add.rn.f32 (offset)", s->what);
    }
    if (s->job.rc == LNTUNE_OK)
        device_verify_forward(d, s->sm, s->job.source, out->data, s->symbol, s->op, s->types,
                              s->fusion, s->affine, s->fixed_h, s->what);
}

int main(void) {
    static const compile_test t = {"quantized-y variants",
                                   {90, 80},
                                   {collect_sm90, collect_sm80},
                                   collected,
                                   job,
                                   compiled,
                                   &nsamples,
                                   MAX_JOBS};
    return compile_test_main(&t);
}
