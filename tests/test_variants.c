/*
 * test_variants.c - every variant in the CPU space (or a sample holding every knob value)
 * compiles with -Wall -Wextra -Werror under the compiler named on the command line, and passes
 * the verifier's adversarial suite.
 *
 *   test_variants COMPILER [half | quick | third | dtypes | residual | quant]
 *
 * Variants that read H at run time are verified at every H of the standard list, on 1 thread and
 * on every thread count of the space; fixed-H variants at the H they were generated for (all of H
 * = 4096; every 5th of H = 1, 17, 4097). Every mode first keeps 1 in 8 of the variants whose
 * pdensity is not 4 (thinned_hint). "half" keeps every H = 4096 variant and the runtime-H
 * code variants whose hash is even, and fails unless every knob value of the list is among them
 * (the JIT compiler's run: AVX-512's vec=16 makes the whole space 1.4 times larger, more than
 * CI's time allows). "third" keeps the code variants whose hash is 0 modulo 3, with the same
 * check (the second compiler's run); "quick" does the same modulo 7 (sanitizer builds). "dtypes"
 * verifies, for every fp16/bf16 type tuple and op, a sample of its runtime-H and H = 4096
 * variants (every 401st, from an offset that moves with the tuple, so that the tuples together
 * cover the knobs). "residual" does the same for the fused residual add: both ops x both fusions
 * (residual; residual and residual_out) x a spread of type tuples, the residual's type equal to
 * x's and not, runtime H and H = 4096 (every 701st variant). "quant" the same for a quantized y:
 * int8 and e4m3, static and per-row scales, each with fp32, fp16 and bf16 data, both ops, the
 * fusions taking turns (every 601st variant).
 * LNTUNE_TEST_SEED=N verifies with the data of seed N (as a failure message prints it).
 */
#include "build.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "knob_coverage.h"
#include "lntune.h"
#include "verify.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int failures, variants, runs;
} tally;

/* How check_space thins a list: every stride-th variant from offset, or by hash modulo stride;
 * with hints, first thinned_hint's. */
typedef struct {
    int stride, offset, by_hash, hints;
} sample;

/* FNV-1a: a hash that spreads the variants of a Cartesian space over the residues. */
static unsigned long fnv1a(const char *s) {
    unsigned long h = 2166136261ul;
    for (; *s; ++s) h = ((h ^ (unsigned char)*s) * 16777619ul) & 0xfffffffful;
    return h;
}

/*
 * pdensity sets only how many prefetch hints a step issues; it cannot change a result
 * (test_prefetch checks the hints). A sampled run keeps 1 in 8 of the variants with another
 * value than its first (4), which still holds every value many times over: the knob made the
 * space 1.6 times larger (2.1 times with a third value, one per line), past the tests' time
 * limits.
 */
static int thinned_hint(const char *code) {
    const char *d = strstr(code, ",pdensity=");
    return d && atoi(d + 10) != 4 && (fnv1a(code) >> 8) % 8 != 0;
}

/* The variant with its launch parameter (threads=N, always last) removed. */
static void code_part(const char *variant, char *out, size_t size) {
    snprintf(out, size, "%s", variant);
    char *t = strstr(out, ",threads=");
    if (t) *t = '\0';
}

/*
 * Compiles every distinct code variant of op for shape (keeping those whose h matches want_h)
 * and verifies each at every thread count the list gives it.
 */
static void check_space(lntune_gen *g, const char *compiler, const char *op, lntune_shape shape,
                        const char *want_h, sample pick, tally *t) {
    char op_key[48]; /* "layernorm+residual_out": the fusion named in every line */
    lntune_fusion_op_key(op, shape.fusion, op_key, sizeof op_key);
    char **list;
    size_t n;
    if (lntune_gen_variants(g, "cpu", op, &shape, &list, &n) != LNTUNE_OK) {
        printf("FAIL listing %s: %s\n", op, lntune_gen_errmsg(g));
        t->failures++;
        return;
    }
    lntune_source *srcs = calloc(n, sizeof *srcs);
    const char **texts = calloc(n, sizeof *texts);
    char(*codes)[256] = calloc(n, sizeof *codes);
    size_t *code_of = calloc(n, sizeof *code_of); /* variant -> index of its code variant */
    size_t ncode = 0, kept = 0;
    knob_coverage coverage = {0};
    for (size_t i = 0; i < n; ++i) {
        char code[256], symbol[32];
        if (!strstr(list[i], want_h)) continue;
        code_part(list[i], code, sizeof code);
        knob_coverage_add(&coverage, code, 0);
        if (pick.hints && thinned_hint(code)) continue;
        const size_t stride = (size_t)pick.stride, offset = (size_t)pick.offset % stride;
        if ((pick.by_hash ? fnv1a(code) % stride : kept++ % stride) != offset) continue;
        size_t c = 0;
        while (c < ncode && strcmp(codes[c], code) != 0) ++c;
        code_of[i] = c + 1;
        if (c < ncode) continue;
        snprintf(codes[ncode], sizeof codes[ncode], "%s", code);
        snprintf(symbol, sizeof symbol, "k%zu", ncode);
        if (lntune_gen_emit(g, "cpu", op, list[i], &shape, symbol, &srcs[ncode]) != LNTUNE_OK) {
            printf("FAIL emitting %s: %s\n", list[i], lntune_gen_errmsg(g));
            t->failures++;
            code_of[i] = 0;
            continue;
        }
        texts[ncode] = srcs[ncode].text;
        ncode++;
        knob_coverage_add(&coverage, code, 1);
    }
    /* A hashed sample must still hold every value of every knob the list has. */
    const char *missing = knob_coverage_missing(&coverage);
    if (pick.by_hash && (missing || coverage.overflow)) {
        printf("FAIL %s: %s%s\n", op_key,
               missing ? "no sampled variant has " : "more knob values than the check holds",
               missing ? missing : "");
        t->failures++;
    }
    const char *const werror[] = {"-Wall", "-Wextra", "-Werror", NULL};
    lntune_library *lib = NULL;
    char *diag = NULL;
    double t0 = test_now_s();
    int rc = lntune_build_library(compiler, werror, texts, ncode, 2, &lib, &diag);
    double t1 = test_now_s();
    if (rc != LNTUNE_OK) {
        printf("FAIL %s %s: %s\n", compiler, op, diag ? diag : lntune_errstr(rc));
        t->failures++;
        free(diag);
    } else {
        const int64_t *hs = lntune_verify_standard_h;
        size_t nh = lntune_verify_standard_h_count;
        if (shape.H && strstr(want_h, "fixed")) hs = &shape.H, nh = 1;
        lntune_verifier *v = NULL;
        lntune_pool *pool = NULL;
        /* A fresh seed each run, unless LNTUNE_TEST_SEED replays the one a failure printed. */
        const char *seed = getenv("LNTUNE_TEST_SEED");
        lntune_verifier_create_fused(lntune_op_parse(op), shape.types, shape.fusion, hs, nh,
                                     seed ? strtoull(seed, NULL, 10) : 0, &v);
        for (size_t i = 0; i < n; ++i) {
            if (!code_of[i]) continue;
            const lntune_source *s = &srcs[code_of[i] - 1];
            char symbol[32];
            snprintf(symbol, sizeof symbol, "k%zu", code_of[i] - 1);
            const char *th = strstr(list[i], "threads=");
            int threads = th ? atoi(th + 8) : 1;
            if (threads > 1 && (!pool || lntune_pool_threads(pool) < threads)) {
                lntune_pool_destroy(pool);
                lntune_pool_create(threads, &pool);
            }
            lntune_verify_result res;
            rc = lntune_verifier_check(v, lntune_library_kernel(lib, symbol), s->affine, s->fixed_h,
                                       threads, pool, &res);
            t->variants++;
            t->runs += res.cases;
            if (rc != LNTUNE_OK) {
                printf("FAIL %s %s %s: %s\n", compiler, op_key, list[i], res.message);
                t->failures++;
            }
        }
        lntune_pool_destroy(pool);
        lntune_verifier_destroy(v);
    }
    char types[24];
    lntune_types_format(shape.types, types, sizeof types);
    printf("  %s %s %s H=%lld %s: %zu sources compiled in %.1f s, verified in %.1f s\n", compiler,
           op_key, types, (long long)shape.H, want_h, ncode, t1 - t0, test_now_s() - t1);
    fflush(stdout);
    lntune_library_close(lib);
    for (size_t i = 0; i < ncode; ++i) lntune_source_free(&srcs[i]);
    free(srcs);
    free(texts);
    free(codes);
    free(code_of);
    lntune_gen_free_list(list, n);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(
            stderr,
            "usage: test_variants COMPILER [half | quick | third | dtypes | residual | quant]\n");
        return 2;
    }
    const char *compiler = argv[1];
    const char *mode = argc > 2 ? argv[2] : "";
    const int stride = strcmp(mode, "quick") == 0 ? 7 : strcmp(mode, "third") == 0 ? 3 : 1;
    const int by_hash = stride > 1;
    const int half = strcmp(mode, "half") == 0;
    const int hints = *mode != '\0'; /* every mode samples; none verifies the whole space */
    const int dtypes = strcmp(mode, "dtypes") == 0;
    const int residual = strcmp(mode, "residual") == 0;
    const int quant = strcmp(mode, "quant") == 0;
    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) != LNTUNE_OK) {
        printf("FAIL opening the generator: %s\n", lntune_gen_errmsg(g));
        return 1;
    }
    tally t = {0, 0, 0};
    const char *ops[] = {"layernorm", "rmsnorm"};
    /* H=4096 is the shape of the promise: all of it. Other fixed H are sampled. */
    const int64_t sampled[] = {1, 17, 4097};
    for (int o = 0; o < 2 && !dtypes && !residual && !quant; ++o) {
        const sample all = {stride, 0, by_hash, hints}, fifth = {stride * 5, 0, by_hash, hints};
        const sample runtime_h = half ? (sample){2, 0, 1, hints} : all;
        check_space(g, compiler, ops[o], (lntune_shape){0}, "h=runtime", runtime_h, &t);
        check_space(g, compiler, ops[o], (lntune_shape){.H = 4096}, "h=fixed", all, &t);
        for (size_t f = 0; f < sizeof sampled / sizeof sampled[0]; ++f)
            check_space(g, compiler, ops[o], (lntune_shape){.H = sampled[f]}, "h=fixed", fifth, &t);
    }
    for (int packed = 1; dtypes && packed < 64; ++packed) {
        const lntune_types types = lntune_types_unpacked(packed);
        if (types.x >= LNTUNE_TYPE_COUNT || types.y >= LNTUNE_TYPE_COUNT ||
            types.params >= LNTUNE_TYPE_COUNT)
            continue;
        for (int o = 0; o < 2; ++o) {
            check_space(g, compiler, ops[o], (lntune_shape){.types = types}, "h=runtime",
                        (sample){401, packed * 17, 0, hints}, &t);
            check_space(g, compiler, ops[o], (lntune_shape){.H = 4096, .types = types}, "h=fixed",
                        (sample){401, packed * 17 + 5, 0, hints}, &t);
        }
    }
    /* A quantized y: each code and scale kind with fp32, fp16 and bf16 data (gamma/beta of x's
     * type), the fusions taking turns. */
    static const char *const quant_y[] = {"i8", "i8row", "e4m3", "e4m3row"};
    static const char *const quant_x[] = {"f32", "f16", "bf16"};
    const size_t nquant = sizeof quant_x / sizeof *quant_x * (sizeof quant_y / sizeof *quant_y);
    for (size_t k = 0; quant && k < nquant; ++k) {
        char text[32];
        lntune_types types;
        snprintf(text, sizeof text, "%s/%s/%s", quant_x[k % 3], quant_y[k / 3], quant_x[k % 3]);
        if (lntune_types_parse(text, &types) != 0) {
            printf("FAIL parsing %s\n", text);
            t.failures++;
            continue;
        }
        for (int o = 0; o < 2; ++o) {
            const int f = (int)(k + (size_t)o) % LNTUNE_FUSION_COUNT, offset = (int)k * 53 + o * 29;
            check_space(g, compiler, ops[o], (lntune_shape){.types = types, .fusion = f},
                        "h=runtime", (sample){601, offset, 0, hints}, &t);
            check_space(g, compiler, ops[o], (lntune_shape){.H = 4096, .types = types, .fusion = f},
                        "h=fixed", (sample){601, offset + 7, 0, hints}, &t);
        }
    }
    /* x/y/params/residual: same-type tuples, and the residual wider, narrower or other than x. */
    const char *fused_tuples[] = {
        "f32", "bf16", "f16/f16/f32", "bf16/bf16/f32/f32", "f32/f32/f32/bf16", "f16/bf16/f32/bf16"};
    const size_t ntuples = sizeof fused_tuples / sizeof fused_tuples[0];
    for (size_t k = 0; residual && k < ntuples; ++k) {
        lntune_types types;
        if (lntune_types_parse(fused_tuples[k], &types) != 0) {
            printf("FAIL parsing %s\n", fused_tuples[k]);
            t.failures++;
            continue;
        }
        for (int o = 0; o < 2; ++o)
            for (int f = LNTUNE_FUSION_RESIDUAL; f < LNTUNE_FUSION_COUNT; ++f) {
                const int offset = (int)k * 97 + o * 31 + f * 13; /* moves over the knobs */
                check_space(g, compiler, ops[o], (lntune_shape){.types = types, .fusion = f},
                            "h=runtime", (sample){701, offset, 0, hints}, &t);
                check_space(g, compiler, ops[o],
                            (lntune_shape){.H = 4096, .types = types, .fusion = f}, "h=fixed",
                            (sample){701, offset + 5, 0, hints}, &t);
            }
    }
    lntune_gen_close(g);
    printf("%s: %d variants verified (%d runs), %d failures\n", compiler, t.variants, t.runs,
           t.failures);
    return t.failures || t.variants == 0 ? 1 : 0;
}
