/*
 * test_cuda_compile_backward.c - the CUDA backward kernels (templates/cuda/norm_backward.lua)
 * compile, without a GPU: a sample of the variants of both ops and all 9 (x/dy/dx, params) type
 * tuples goes through NVRTC for sm_90 (fp32 also for sm_80) to a cubin and its PTX. Each must be
 * non-empty and define both entry points (the dx kernel and SYMBOL_dgamma); the launch lines
 * must parse and agree with the variant; dgamma=atomic must reach the PTX as fp32 atomics and
 * dgamma=partials must have none; 16-bit x must be widened. Every value of every knob (of the
 * any-H lists and the fixed-H lists sampled) must come up in the sample.
 *
 * Fused with the residual (dx += dresidual_out), a source must add dresidual_out; unfused, it
 * must not read it.
 *
 * The sample (104 compiles, about a minute and a half on 2 idle cores), per (op, tuple)
 * k = 0..17: three variants of the any-H list at indices (k * 7 + m * 41) mod n, m = 0, 1, 2,
 * and one of the fixed-H list at H = 1000 (k even: warp and block register caches, H not a
 * multiple of a pack's threads) or 4096 (k odd) at index k * 5 mod n; fused, one any-H variant
 * at (k * 11 + 3) mod n and, for k a multiple of 3, the first fixed-H one from k * 3 mod n; for
 * sm_80, fp32, each op: the first and last any-H variants and two fixed-H ones. Each tuple's
 * list must be fp32's.
 *
 * On a GPU (none in CI) every sample for its compute capability is also verified there
 * (tests/cuda_device.h).
 * Exits 77 (skipped) when no NVRTC can be loaded.
 */
#define _GNU_SOURCE /* memmem, in nvrtc_check.h */
#include "check.h"
#include "cuda_compile_test.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "generator.h"
#include "knob_coverage.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_JOBS = 18 * 4 + 18 + 6 + 2 * 4 };

static const char *const ops[] = {"layernorm_backward", "rmsnorm_backward"};

typedef struct {
    lntune_nvrtc_job job;
    int sm;
    char symbol[64];
    char what[256];
    int x_f16;    /* x is fp16: its widening (cvt.f32.f16) must reach the PTX */
    int atomic;   /* dgamma=atomic: fp32 atomics in the PTX; partials: none */
    lntune_op op; /* for the run on a GPU */
    lntune_types types;
    int fusion; /* LNTUNE_FUSION_RESIDUAL: dx adds dresidual_out */
    int64_t fixed_h;
} sample;

static sample samples[MAX_JOBS];
static size_t nsamples;

/* Every "name=value" item of the lists sampled, and whether a sample had it. */
static knob_coverage coverage;

/* Checks the launch lines of src against variant: what a host launcher will rely on. */
static void check_launch(const char *text, const char *variant, const char *what) {
    lntune_cuda_backward_launch l;
    if (lntune_cuda_backward_launch_parse(text, &l) != LNTUNE_OK) {
        EXPECT(0, "launch lines of %s", what);
        return;
    }
    const int warp = strstr(variant, "layout=warp") != NULL;
    int block = 0, tpr = 0;
    const char *b = strstr(variant, "block="), *t = strstr(variant, "tpr=");
    if (b) block = atoi(b + 6);
    if (t) tpr = atoi(t + 4);
    const int rpb = warp && tpr ? block / tpr : 1;
    EXPECT(l.main.block == block && l.main.rows_per_block == rpb && l.parts_per_block == rpb,
           "%s: block %d, rows per block %d, parts per block %d", what, l.main.block,
           l.main.rows_per_block, l.parts_per_block);
    const int smem = strstr(variant, "cache=smem") != NULL;
    EXPECT(l.main.smem_per_h == (smem ? 8 : 0) && (l.main.max_h > 0) == smem,
           "%s: smem_per_h %lld, max_h %lld", what, (long long)l.main.smem_per_h,
           (long long)l.main.max_h);
    EXPECT(l.partials == (strstr(variant, "dgamma=partials") != NULL), "%s: dgamma mode", what);
    /* partials: the workspace stays bounded however many rows; atomic: one row. */
    const int64_t grid = lntune_cuda_backward_grid(&l, (int64_t)1 << 40);
    const int64_t parts = lntune_cuda_backward_parts(&l, grid);
    EXPECT(l.partials ? parts >= 1 && parts <= 2048 : parts == 1, "%s: %lld parts", what,
           (long long)parts);
    EXPECT(lntune_cuda_backward_grid(&l, 1) == 1 && lntune_cuda_backward_finish_grid(&l, 1) == 1,
           "%s: one row, one column: one block each", what);
}

static void add(lntune_gen *g, int sm, const char *op, const char *variant,
                const lntune_shape *shape) {
    if (!compile_test_room(nsamples, MAX_JOBS)) return;
    sample *s = &samples[nsamples];
    const lntune_types t = shape->types;
    s->sm = sm;
    snprintf(s->symbol, sizeof s->symbol, "lntune_%s_%s_%s", op, lntune_type_name(t.x),
             lntune_type_name(t.params));
    snprintf(s->what, sizeof s->what, "sm_%d %s%s x=%s params=%s H=%lld %s", sm, op,
             shape->fusion ? "+residual" : "", lntune_type_name(t.x), lntune_type_name(t.params),
             (long long)shape->H, variant);
    lntune_source src;
    if (!compile_test_emit(g, op, variant, shape, s->symbol, s->what, &src)) return;
    check_launch(src.text, variant, s->what);
    EXPECT((strstr(src.text, "drr + i") != NULL) == (shape->fusion != LNTUNE_FUSION_NONE),
           "%s: dresidual_out %s", s->what, shape->fusion ? "is not added" : "is read");
    knob_coverage_add(&coverage, variant, 1);
    compile_test_take(&s->job, &src);
    s->x_f16 = t.x == LNTUNE_TYPE_F16;
    s->atomic = strstr(variant, "dgamma=atomic") != NULL;
    s->op = strstr(op, "rmsnorm") ? LNTUNE_OP_RMSNORM : LNTUNE_OP_LAYERNORM;
    s->types = t;
    s->fixed_h = shape->H;
    s->fusion = shape->fusion;
    ++nsamples;
}

/* The variants of op for shape; the same list as for fp32 (the types change no knob). */
static char **variants(lntune_gen *g, const char *op, const lntune_shape *shape, size_t *n) {
    lntune_shape f32 = *shape;
    f32.types = (lntune_types){0};
    char **list = compile_test_variants(g, op, shape, &f32, "for fp32", NULL, n, NULL);
    for (size_t i = 0; i < *n; ++i) knob_coverage_add(&coverage, list[i], 0);
    return list;
}

static void collect_sm90(lntune_gen *g) {
    int k = 0;
    for (int tx = 0; tx < 3; ++tx)
        for (int tp = 0; tp < 3; ++tp)
            for (size_t o = 0; o < 2; ++o, ++k) {
                const lntune_types types = {
                    .x = tx, .y = tx, .params = tp}; /* y is unused: dx is x's type */
                lntune_shape any = {.types = types};
                size_t n = 0;
                char **list = variants(g, ops[o], &any, &n);
                for (size_t m = 0; list && m < 3; ++m)
                    add(g, 90, ops[o], list[((size_t)k * 7 + m * 41) % n], &any);
                lntune_gen_free_list(list, n);

                lntune_shape fixed = {.H = k % 2 ? 4096 : 1000, .types = types};
                list = variants(g, ops[o], &fixed, &n);
                char *fixed_list[256];
                const size_t nf = compile_test_fixed(list, n, fixed_list, 256);
                EXPECT(nf > 0, "%s H=%lld: no h=fixed variant", ops[o], (long long)fixed.H);
                if (nf) add(g, 90, ops[o], fixed_list[(size_t)k * 5 % nf], &fixed);
                lntune_gen_free_list(list, n);

                /* Fused with the residual: one any-H variant, and every third pair a fixed H. */
                lntune_shape fused = {.types = types, .fusion = LNTUNE_FUSION_RESIDUAL};
                list = variants(g, ops[o], &fused, &n);
                if (list) add(g, 90, ops[o], list[((size_t)k * 11 + 3) % n], &fused);
                lntune_gen_free_list(list, n);
                if (k % 3) continue;
                fused.H = k % 2 ? 4096 : 1000;
                list = variants(g, ops[o], &fused, &n);
                const char *v = NULL;
                for (size_t i = (size_t)k * 3 % (n ? n : 1); list && i < n && !v; ++i)
                    if (strstr(list[i], "h=fixed")) v = list[i];
                EXPECT(v, "%s+residual H=%lld: no h=fixed variant", ops[o], (long long)fused.H);
                if (v) add(g, 90, ops[o], v, &fused);
                lntune_gen_free_list(list, n);
            }
}

static void collect_sm80(lntune_gen *g) {
    for (size_t o = 0; o < 2; ++o) {
        lntune_shape any = {0};
        size_t n = 0;
        char **list = variants(g, ops[o], &any, &n);
        if (list) {
            add(g, 80, ops[o], list[0], &any);
            add(g, 80, ops[o], list[n - 1], &any);
        }
        lntune_gen_free_list(list, n);
        for (int h = 0; h < 2; ++h) {
            lntune_shape fixed = {.H = h ? 4096 : 1000};
            list = variants(g, ops[o], &fixed, &n);
            const char *v = NULL;
            for (size_t i = 0; list && i < n && !v; ++i)
                if (strstr(list[i], "h=fixed")) v = list[i];
            EXPECT(v, "sm_80 %s H=%lld: no h=fixed variant", ops[o], (long long)fixed.H);
            if (v) add(g, 80, ops[o], v, &fixed);
            lntune_gen_free_list(list, n);
        }
    }
}

/* Every value of every knob of the lists sampled came up in the sample. */
static void collected(const lntune_nvrtc *nv) {
    (void)nv;
    EXPECT(!coverage.overflow, "more than %d knob values", KNOB_COVERAGE_MAX);
    for (size_t i = 0; i < coverage.n; ++i)
        EXPECT(coverage.items[i].seen, "knob value %s is in no sample", coverage.items[i].item);
    printf("%zu knob values covered\n", coverage.n);
}

static lntune_nvrtc_job *job(size_t i, int sm) {
    return samples[i].sm == sm ? &samples[i].job : NULL;
}

static void compiled(size_t i, device_suite *d) {
    const sample *s = &samples[i];
    if (nvrtc_check_compiled(&s->job, s->symbol, 1, s->what)) {
        const char *ptx = s->job.out.ptx;
        /* atomicAdd of a float whose result is unused compiles to red (or atom) .add.f32. */
        const int atomics = strstr(ptx, ".global.add.f32") != NULL;
        EXPECT(atomics == s->atomic, "%s: fp32 atomics %s in the PTX", s->what,
               atomics ? "present" : "absent");
        if (s->x_f16) EXPECT(strstr(ptx, "cvt.f32.f16"), "%s: x is not widened", s->what);
    }
    if (s->job.rc == LNTUNE_OK)
        device_verify_backward(d, s->sm, s->job.source, s->job.out.data, s->symbol, s->op, s->types,
                               s->fusion, s->fixed_h, s->what);
}

int main(void) {
    static const compile_test t = {"backward variants", {90, 80}, {collect_sm90, collect_sm80},
                                   collected,           job,      compiled,
                                   &nsamples,           MAX_JOBS};
    return compile_test_main(&t);
}
