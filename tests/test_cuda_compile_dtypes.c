/*
 * test_cuda_compile_dtypes.c - the CUDA kernels of every fp16/bf16 type tuple compile, without a
 * GPU: for each of the 26 tuples of {f32, f16, bf16} for x, y and gamma/beta other than all-f32,
 * and both ops, a sample of the variants goes through NVRTC for sm_90 to a cubin and its PTX.
 * Each must be non-empty and define the kernel's symbol; 16-bit x must be widened in the PTX.
 *
 * The sample, per tuple and op (256 compiles, about 2.5 minutes on 2 idle cores): the first
 * variant for a shape of any H (layout=warp, pack=4, gamma and beta) and the last
 * (layout=cluster, no gamma), one of layout=block or layout=uncached, and one with H fixed at
 * 4096 (register caches); the last two alternate between the ends of their lists from one tuple
 * to the next, so that packs 4 and 1, both caches and both affine modes come up; with x or y
 * 16-bit, one of pack=8 too (any H and fixed H in turn). Each tuple's list must be fp32's plus,
 * when x or y is 16-bit, and only then, variants of pack=8.
 *
 * On a GPU (none in CI) every sample is also verified there (tests/cuda_device.h).
 * Exits 77 (skipped) when no NVRTC can be loaded.
 */
#define _GNU_SOURCE /* memmem, in nvrtc_check.h */
#include "check.h"
#include "cuda_compile_test.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "generator.h"
#include "lntune.h"

#include <stdio.h>
#include <string.h>

enum { SM = 90, MAX_JOBS = 26 * 2 * 4 + 24 * 2 };

static const char *const ops[] = {"layernorm", "rmsnorm"};

typedef struct {
    lntune_nvrtc_job job;
    char symbol[64];
    char what[256];
    int x_f16;    /* x is fp16: its widening (cvt.f32.f16) must reach the PTX */
    lntune_op op; /* for the run on a GPU */
    lntune_types types;
    int affine;
    int64_t fixed_h;
} sample;

static sample samples[MAX_JOBS];
static size_t nsamples;

static void add(lntune_gen *g, const char *op, const char *variant, const lntune_shape *shape) {
    if (!compile_test_room(nsamples, MAX_JOBS)) return;
    sample *s = &samples[nsamples];
    const lntune_types t = shape->types;
    snprintf(s->symbol, sizeof s->symbol, "lntune_%s_%s_%s_%s", op, lntune_type_name(t.x),
             lntune_type_name(t.y), lntune_type_name(t.params));
    snprintf(s->what, sizeof s->what, "%s x=%s y=%s params=%s H=%lld %s", op, lntune_type_name(t.x),
             lntune_type_name(t.y), lntune_type_name(t.params), (long long)shape->H, variant);
    lntune_source src;
    if (!compile_test_emit(g, op, variant, shape, s->symbol, s->what, &src)) return;
    lntune_cuda_launch l;
    EXPECT(lntune_cuda_launch_parse(src.text, &l) == LNTUNE_OK, "launch line of %s", s->what);
    compile_test_take(&s->job, &src);
    s->x_f16 = t.x == LNTUNE_TYPE_F16;
    s->op = (lntune_op)lntune_op_parse(op);
    s->types = t;
    s->affine = src.affine;
    s->fixed_h = src.fixed_h;
    ++nsamples;
}

/* The variants of op for shape: fp32's list, plus pack=8 (16-byte accesses) when x or y is 16-bit.
 */
static char **variants(lntune_gen *g, const char *op, const lntune_shape *shape, size_t *n) {
    lntune_shape f32 = *shape;
    f32.types = (lntune_types){0};
    size_t pack8 = 0;
    char **list = compile_test_variants(g, op, shape, &f32, "for fp32", ",pack=8,", n, &pack8);
    const lntune_types t = shape->types;
    const int half = t.x != LNTUNE_TYPE_F32 || t.y != LNTUNE_TYPE_F32;
    EXPECT(!list || (pack8 > 0) == half, "%s: %zu pack=8 variants for x=%s y=%s", op, pack8,
           lntune_type_name(t.x), lntune_type_name(t.y));
    return list;
}

/* The first (last: the last) variant of list that contains part; NULL if none. */
static const char *pick(char **list, size_t n, const char *part, int last) {
    const char *found = NULL;
    for (size_t i = 0; i < n; ++i)
        if (strstr(list[i], part)) {
            found = list[i];
            if (!last) break;
        }
    EXPECT(found, "no variant with %s", part);
    return found;
}

static void collect(lntune_gen *g) {
    int k = 0; /* (tuple, op) pairs so far: which ends the alternating picks take */
    for (int tx = 0; tx < 3; ++tx)
        for (int ty = 0; ty < 3; ++ty)
            for (int tp = 0; tp < 3; ++tp) {
                if (tx == 0 && ty == 0 && tp == 0) continue;
                const int half = tx != LNTUNE_TYPE_F32 || ty != LNTUNE_TYPE_F32;
                for (size_t o = 0; o < 2; ++o, ++k) {
                    lntune_shape any = {.types = {tx, ty, tp}};
                    size_t n = 0;
                    char **list = variants(g, ops[o], &any, &n);
                    if (list) {
                        add(g, ops[o], list[0], &any);
                        add(g, ops[o], list[n - 1], &any);
                        const char *layout = k % 2 ? "layout=uncached" : "layout=block";
                        const char *v = pick(list, n, layout, k / 2 % 2);
                        if (v) add(g, ops[o], v, &any);
                        v = half && k % 2 == 0 ? pick(list, n, ",pack=8,", k / 2 % 2) : NULL;
                        if (v) add(g, ops[o], v, &any);
                    }
                    lntune_gen_free_list(list, n);

                    lntune_shape fixed = {.H = 4096, .types = {tx, ty, tp}};
                    list = variants(g, ops[o], &fixed, &n);
                    const char *v = list ? pick(list, n, "h=fixed", k % 2) : NULL;
                    if (v) add(g, ops[o], v, &fixed);
                    v = list && half && k % 2 ? pick(list, n, ",pack=8,cache=regs", k / 2 % 2)
                                              : NULL;
                    if (v) add(g, ops[o], v, &fixed);
                    lntune_gen_free_list(list, n);
                }
            }
}

static lntune_nvrtc_job *job(size_t i, int sm) {
    (void)sm;
    return &samples[i].job;
}

static void compiled(size_t i, device_suite *d) {
    const sample *s = &samples[i];
    if (nvrtc_check_compiled(&s->job, s->symbol, 0, s->what) && s->x_f16)
        EXPECT(strstr(s->job.out.ptx, "cvt.f32.f16"), "%s: x is not widened", s->what);
    if (s->job.rc == LNTUNE_OK)
        device_verify_forward(d, SM, s->job.source, s->job.out.data, s->symbol, s->op, s->types,
                              LNTUNE_FUSION_NONE, s->affine, s->fixed_h, s->what);
}

int main(void) {
    static const compile_test t = {"variants", {SM},     {collect}, NULL,
                                   job,        compiled, &nsamples, MAX_JOBS};
    return compile_test_main(&t);
}
