/*
 * test_sweep.c - a random sample of every template's variant space, different every run, so
 * that the quick tier meets new variants each time while the exhaustive sweeps (test_variants,
 * test_backward_variants, test_cuda_compile*: `ctest -L slow`) stay out of it.
 *
 *   test_sweep COMPILER [SCALE]
 *
 * Groups, each one (template, op, fusion, type tuple):
 *  - CPU forward (templates/cpu/norm.lua): each of the 27 (x, y, gamma/beta) tuples under one of
 *    the 6 (op, fusion) pairs, in turn from a random start, so that every op, fusion and tuple
 *    comes up in every run; a fused group's residual type is drawn from the three;
 *  - CPU backward (cpu/norm_backward.lua): each of the 9 (x, gamma/beta) tuples under one of the
 *    4 (op, fused residual or not) pairs;
 *  - CUDA forward and backward (cuda/norm.lua, cuda/norm_backward.lua), the same groups, through
 *    NVRTC for sm_90 (skipped without NVRTC; verified on the device where there is a GPU).
 * Each group takes SCALE (default 1) variants, half drawn from its any-H list and half from its
 * fixed-H list at an H drawn from a set of odd, one-element and large rows; an odd one from
 * either list in turn (from a random start), so that at SCALE 1 half the groups meet each list
 * and every group meets both over runs. CPU variants are
 * compiled with COMPILER -Wall -Wextra -Werror and verified (the float64 reference on the
 * adversarial suite, every thread count the variant names); CUDA ones must compile to a cubin
 * with the kernel's entry points.
 *
 * The seed is printed first; LNTUNE_TEST_SEED=N replays the same sample with the same data.
 */
#define _GNU_SOURCE /* memmem, in nvrtc_check.h */
#include "build.h"
#include "check.h"
#include "cuda_device.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"
#include "nvrtc.h"
#include "nvrtc_check.h"
#include "randn.h"
#include "verify.h"
#include "verify_backward.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_SAMPLES = 4096, CUDA_SM = 90 };

/* The H a fixed-H variant is drawn for: one element, odd, not a multiple of a vector, large. */
static const int64_t fixed_hs[] = {1, 3, 17, 768, 1000, 4096, 4097, 12288};

typedef struct {
    int backward;
    lntune_op op;
    int fusion;
    lntune_types types;
    lntune_source src;
    char symbol[32];
    char what[320];
    lntune_nvrtc_job job; /* CUDA */
} sample;

typedef struct {
    const char *target; /* "cpu", "cuda" */
    sample *s;
    size_t n;
    uint64_t rng;
    int scale;
    int turn; /* which list a group's odd variant comes from: any-H when odd */
} sweep;

static size_t draw(sweep *w, size_t n) {
    const size_t k = (size_t)(test_uniform(&w->rng) * (double)n);
    return k < n ? k : n - 1;
}

/* Adds up to count distinct variants of list (those containing part) for one group. */
static void add_from(lntune_gen *g, sweep *w, const char *op_text, const lntune_shape *shape,
                     lntune_op op, int backward, const char *part, int count) {
    if (count <= 0) return;
    char **list = NULL;
    size_t n = 0;
    if (lntune_gen_variants(g, w->target, op_text, shape, &list, &n) != LNTUNE_OK || n == 0) {
        CHECK(0, "%s %s variants: %s", w->target, op_text, lntune_gen_errmsg(g));
        return;
    }
    size_t *eligible = malloc(n * sizeof *eligible), ne = 0;
    for (size_t i = 0; eligible && i < n; ++i)
        if (strstr(list[i], part)) eligible[ne++] = i;
    char types[32], op_key[48];
    lntune_types_format(shape->types, types, sizeof types);
    lntune_fusion_op_key(op_text, shape->fusion, op_key, sizeof op_key);
    EXPECT(ne > 0, "%s %s %s H=%lld: no %s variant", w->target, op_key, types, (long long)shape->H,
           part);
    for (int k = 0; k < count && ne > 0 && w->n < MAX_SAMPLES; ++k) {
        const size_t j = draw(w, ne), i = eligible[j];
        eligible[j] = eligible[--ne]; /* drawn without replacement */
        sample *s = &w->s[w->n];
        memset(s, 0, sizeof *s);
        s->backward = backward;
        s->op = op;
        s->fusion = shape->fusion;
        s->types = shape->types;
        snprintf(s->symbol, sizeof s->symbol, "sweep_%zu", w->n);
        snprintf(s->what, sizeof s->what, "%s %s %s H=%s %s", w->target, op_key, types,
                 shape->H ? "fixed" : "any", list[i]);
        if (shape->H)
            snprintf(s->what + strlen(s->what), sizeof s->what - strlen(s->what), " (H=%lld)",
                     (long long)shape->H);
        if (lntune_gen_emit(g, w->target, op_text, list[i], shape, s->symbol, &s->src) !=
            LNTUNE_OK) {
            CHECK(0, "emit %s: %s", s->what, lntune_gen_errmsg(g));
            continue;
        }
        w->n++;
    }
    free(eligible);
    lntune_gen_free_list(list, n);
}

/* One group: scale variants, half of the any-H list and half of a fixed-H list (the odd one
 * from either in turn). */
static void add_group(lntune_gen *g, sweep *w, int backward, lntune_op op, int fusion,
                      lntune_types types) {
    static const char *const forward_ops[] = {"layernorm", "rmsnorm"};
    static const char *const backward_ops[] = {"layernorm_backward", "rmsnorm_backward"};
    const char *op_text = backward ? backward_ops[op] : forward_ops[op];
    const int any_count = (w->scale + w->turn++ % 2) / 2;
    lntune_shape any = {.types = types, .fusion = fusion};
    add_from(g, w, op_text, &any, op, backward, "h=runtime", any_count);
    lntune_shape fixed = any;
    fixed.H = fixed_hs[draw(w, sizeof fixed_hs / sizeof fixed_hs[0])];
    add_from(g, w, op_text, &fixed, op, backward, "h=fixed", w->scale - any_count);
}

/* Every template's groups, each op/fusion pair in turn from a random start (see the header). */
static void collect(lntune_gen *g, sweep *w) {
    const int start = (int)draw(w, 12);
    w->turn = (int)draw(w, 2);
    for (int t = 0; t < 27; ++t) {
        const int pair = (start + t) % 6; /* op x {none, residual, residual_out} */
        lntune_types types = {(uint8_t)(t % 3), (uint8_t)(t / 3 % 3), (uint8_t)(t / 9), 0};
        if (pair % 3 != LNTUNE_FUSION_NONE) lntune_types_set_residual(&types, (int)draw(w, 3));
        add_group(g, w, 0, (lntune_op)(pair / 3), pair % 3, types);
    }
    for (int t = 0; t < 9; ++t) {
        const int pair = (start + t) % 4; /* op x {none, residual} */
        lntune_types types = {(uint8_t)(t % 3), (uint8_t)(t % 3), (uint8_t)(t / 3), 0};
        add_group(g, w, 1, (lntune_op)(pair / 2),
                  pair % 2 ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE, types);
    }
}

static int max_threads(const sweep *w) {
    int most = 1;
    for (size_t i = 0; i < w->n; ++i)
        if (w->s[i].src.threads > most) most = w->s[i].src.threads;
    return most;
}

/* Compiles the CPU samples into one library and verifies each; returns how many passed. */
static size_t run_cpu(sweep *w, const char *compiler, uint64_t seed) {
    const char **texts = calloc(w->n ? w->n : 1, sizeof *texts);
    for (size_t i = 0; i < w->n; ++i) texts[i] = w->s[i].src.text;
    const char *const werror[] = {"-Wall", "-Wextra", "-Werror", NULL};
    lntune_library *lib = NULL;
    char *diag = NULL;
    const double t0 = test_now_s();
    int rc = lntune_build_library(compiler, werror, texts, w->n, 2, &lib, &diag);
    const double t1 = test_now_s();
    CHECK(rc == LNTUNE_OK, "%zu CPU sources compile with %s -Wall -Wextra -Werror in %.1f s%s%s",
          w->n, compiler, t1 - t0, diag ? ": " : "", diag ? diag : "");
    free(diag);
    free(texts);
    lntune_pool *pool = NULL;
    const int threads = max_threads(w);
    if (threads > 1) lntune_pool_create(threads, &pool);
    size_t passed = 0;
    for (size_t i = 0; lib && i < w->n; ++i) {
        sample *s = &w->s[i];
        const int64_t *hs = s->src.fixed_h ? &s->src.fixed_h : lntune_verify_standard_h;
        const size_t nh = s->src.fixed_h ? 1 : lntune_verify_standard_h_count;
        lntune_kernel_fn f = lntune_library_kernel(lib, s->symbol);
        lntune_verify_result res = {0};
        if (!f) {
            snprintf(res.message, sizeof res.message, "no symbol %s", s->symbol);
            rc = LNTUNE_ENOTFOUND;
        } else if (s->backward) {
            lntune_backward_verifier *v = NULL;
            static const int64_t bwd_hs[] = {1, 3, 17, 768, 4096, 4097};
            rc = lntune_backward_verifier_create_fused(s->op, s->types, s->fusion,
                                                       s->src.fixed_h ? hs : bwd_hs,
                                                       s->src.fixed_h ? 1 : 6, seed, &v);
            lntune_backward_kernel_fn kernel;
            memcpy(&kernel, &f, sizeof f); /* the symbol has the backward ABI */
            if (rc == LNTUNE_OK)
                rc = lntune_backward_verifier_check(v, kernel, s->src.fixed_h, s->src.threads, pool,
                                                    &res);
            lntune_backward_verifier_destroy(v);
        } else {
            lntune_verifier *v = NULL;
            rc = lntune_verifier_create_fused(s->op, s->types, s->fusion, hs, nh, seed, &v);
            if (rc == LNTUNE_OK)
                rc = lntune_verifier_check(v, f, s->src.affine, s->src.fixed_h, s->src.threads,
                                           pool, &res);
            lntune_verifier_destroy(v);
        }
        EXPECT(rc == LNTUNE_OK, "%s: %s", s->what, res.message);
        if (rc == LNTUNE_OK) ++passed;
        if (getenv("LNTUNE_TEST_VERBOSE")) printf("%s: %s\n", rc ? "FAIL" : "ok", s->what);
    }
    printf("CPU: %zu of %zu variants verified in %.1f s\n", passed, w->n, test_now_s() - t1);
    lntune_pool_destroy(pool);
    lntune_library_close(lib);
    return passed;
}

/* Compiles the CUDA samples with NVRTC (and verifies them on a GPU when there is one). */
static size_t run_cuda(sweep *w, lntune_nvrtc *nv) {
    lntune_nvrtc_job *jobs = calloc(w->n ? w->n : 1, sizeof *jobs);
    for (size_t i = 0; i < w->n; ++i) jobs[i].source = w->s[i].src.text;
    const double t0 = test_now_s();
    int rc = lntune_nvrtc_compile_many(nv, CUDA_SM, LNTUNE_NVRTC_CUBIN, jobs, w->n, 0);
    CHECK(rc == LNTUNE_OK, "NVRTC batch of %zu: rc %d", w->n, rc);
    device_suite dev;
    device_open(&dev);
    size_t compiled = 0;
    for (size_t i = 0; rc == LNTUNE_OK && i < w->n; ++i) {
        sample *s = &w->s[i];
        const int before = check_failures;
        if (nvrtc_check_compiled(&jobs[i], s->symbol, s->backward, s->what) && s->backward)
            device_verify_backward(&dev, CUDA_SM, s->src.text, jobs[i].out.data, s->symbol, s->op,
                                   s->types, s->fusion, s->src.fixed_h, s->what);
        else if (jobs[i].rc == LNTUNE_OK)
            device_verify_forward(&dev, CUDA_SM, s->src.text, jobs[i].out.data, s->symbol, s->op,
                                  s->types, s->fusion, s->src.affine, s->src.fixed_h, s->what);
        compiled += check_failures == before;
        lntune_nvrtc_output_free(&jobs[i].out);
    }
    device_close(&dev);
    printf("CUDA: %zu of %zu variants compiled for sm_%d in %.1f s\n", compiled, w->n, CUDA_SM,
           test_now_s() - t0);
    free(jobs);
    return compiled;
}

static void free_samples(sweep *w) {
    for (size_t i = 0; i < w->n; ++i) lntune_source_free(&w->s[i].src);
    w->n = 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || (argc == 3 && atoi(argv[2]) < 1)) {
        fprintf(stderr, "usage: test_sweep COMPILER [SCALE]\n");
        return 2;
    }
    const int scale = argc == 3 ? atoi(argv[2]) : 1;
    const char *env = getenv("LNTUNE_TEST_SEED");
    uint64_t seed = env && env[0] ? strtoull(env, NULL, 10) : 0;
    if (!seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32) %
                   1000000000000ull +
               1;
    }
    printf("seed %llu (LNTUNE_TEST_SEED=%llu replays this sample and its data), scale %d\n",
           (unsigned long long)seed, (unsigned long long)seed, scale);
    fflush(stdout);

    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) != LNTUNE_OK) {
        printf("FAIL gen: %s\n", lntune_gen_errmsg(g));
        return 1;
    }
    sample *samples = calloc(MAX_SAMPLES, sizeof *samples);
    sweep w = {"cpu", samples, 0, seed, scale, 0};
    collect(g, &w);
    const size_t ncpu = w.n;
    const size_t cpu_ok = run_cpu(&w, argv[1], seed);
    CHECK(ncpu >= 36 * (size_t)scale && cpu_ok == ncpu, "CPU: %zu of %zu sampled variants pass",
          cpu_ok, ncpu);
    free_samples(&w);

    lntune_nvrtc *nv = NULL;
    if (nvrtc_check_open(&nv) == 0) {
        lntune_gen_set_cuda_arch(g, CUDA_SM);
        w.target = "cuda";
        w.rng = seed ^ 0x9e3779b97f4a7c15ull; /* CUDA's draws apart from the CPU's */
        collect(g, &w);
        const size_t ncuda = w.n, cuda_ok = run_cuda(&w, nv);
        CHECK(ncuda >= 36 * (size_t)scale && cuda_ok == ncuda,
              "CUDA: %zu of %zu sampled variants compile", cuda_ok, ncuda);
        free_samples(&w);
    } else {
        printf("CUDA: no NVRTC, its templates not sampled\n");
    }
    lntune_nvrtc_close(nv);
    lntune_gen_close(g);
    free(samples);
    if (check_failures) printf("replay: LNTUNE_TEST_SEED=%llu\n", (unsigned long long)seed);
    return CHECK_SUMMARY();
}
