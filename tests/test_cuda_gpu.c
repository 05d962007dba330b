/*
 * test_cuda_gpu.c - every CUDA variant of both ops gives the float64 reference's answer on a real
 * GPU, on the verifier's adversarial suite (gen/verify/verify.h): randn, 1000 + randn, 1 + 1e-3
 * randn, constant rows, NaN/Inf rows; contiguous rows, x and y misaligned by 4 bytes, row strides
 * larger than H; H in {1, 3, 17, 768, 1000, 4096, 4097, 12288, 65536}; y poisoned before each run,
 * so an element never written, or written outside the rows, is caught.
 *
 * The device side of each case is gen/verify/cuda_check.c (the tuner's own verifier): x copied at
 * the same alignment (mod 16 bytes), poisoned guard zones around y. Variants with fixed H run at
 * that H only; shared-memory variants only up to their max_h.
 *
 * Exits 77 (skipped) when there is no GPU, no driver, or no NVRTC. Labelled `cuda` in ctest.
 */
#include "cuda_check.h"
#include "cuda_driver.h"
#include "cuda_launch.h"
#include "generator.h"
#include "lntune.h"
#include "nvrtc.h"
#include "verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const int64_t test_h[] = {1, 3, 17, 768, 1000, 4096, 4097, 12288, 65536};
enum { NH = sizeof test_h / sizeof test_h[0] };
static const int64_t fixed_shapes[] = {768, 4096, 12288};

typedef struct {
    char *variant, *text;
    int64_t fixed_h;
    int affine;
} job;

/* Emits every variant of op: the generic space plus the fixed-H variants of fixed_shapes. */
static size_t collect(lntune_gen *g, const char *op, job **jobs) {
    size_t n = 0, cap = 0;
    for (size_t s = 0; s <= sizeof fixed_shapes / sizeof fixed_shapes[0]; ++s) {
        lntune_shape shape = {.H = s ? fixed_shapes[s - 1] : 0};
        char **list = NULL;
        size_t count = 0;
        if (lntune_gen_variants(g, "cuda", op, &shape, &list, &count)) {
            fprintf(stderr, "variants: %s\n", lntune_gen_errmsg(g));
            exit(1);
        }
        for (size_t i = 0; i < count; ++i) {
            if (s && !strstr(list[i], "h=fixed")) continue; /* runtime H: in the generic list */
            lntune_source src;
            if (lntune_gen_emit(g, "cuda", op, list[i], &shape, "lntune_norm", &src)) {
                fprintf(stderr, "emit %s: %s\n", list[i], lntune_gen_errmsg(g));
                exit(1);
            }
            if (n == cap) *jobs = realloc(*jobs, (cap = cap ? 2 * cap : 512) * sizeof **jobs);
            job *j = &(*jobs)[n++];
            j->variant = strdup(list[i]), j->text = src.text; /* the job takes the text */
            j->fixed_h = src.fixed_h, j->affine = src.affine;
            src.text = NULL;
            lntune_source_free(&src);
        }
        lntune_gen_free_list(list, count);
    }
    return n;
}

/* A verifier over the test H that fit max_h (and only fixed_h, when set). */
static lntune_verifier *verifier_for(lntune_op op, int64_t max_h, lntune_verifier **cache,
                                     int64_t *cache_key, size_t *ncache) {
    for (size_t i = 0; i < *ncache; ++i)
        if (cache_key[i] == max_h) return cache[i];
    int64_t hs[NH];
    size_t nh = 0;
    for (size_t i = 0; i < NH; ++i)
        if (!max_h || test_h[i] <= max_h) hs[nh++] = test_h[i];
    for (size_t i = 0; i < sizeof fixed_shapes / sizeof fixed_shapes[0]; ++i) {
        int present = 0;
        for (size_t k = 0; k < nh; ++k) present |= hs[k] == fixed_shapes[i];
        if (!present && (!max_h || fixed_shapes[i] <= max_h)) hs[nh++] = fixed_shapes[i];
    }
    lntune_verifier *v = NULL;
    if (lntune_verifier_create(op, hs, nh, 0, &v)) {
        fprintf(stderr, "cannot create a verifier\n");
        exit(1);
    }
    cache[*ncache] = v;
    cache_key[(*ncache)++] = max_h;
    return v;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress survives a crash when stdout is a file */
    lntune_cuda *cu = NULL;
    int rc = lntune_cuda_open(0, &cu);
    if (rc == LNTUNE_ENODEVICE) {
        printf("skipped: %s\n", lntune_cuda_errmsg(cu));
        lntune_cuda_close(cu);
        return 77;
    }
    if (rc) {
        fprintf(stderr, "CUDA: %s\n", lntune_cuda_errmsg(cu));
        return 1;
    }
    const lntune_cuda_info *info = lntune_cuda_get_info(cu);
    lntune_nvrtc *nv = NULL;
    if ((rc = lntune_nvrtc_open(&nv)) != LNTUNE_OK) {
        printf("skipped: %s\n", lntune_nvrtc_errmsg(nv));
        return rc == LNTUNE_ENODEVICE ? 77 : 1;
    }
    printf("%s, sm_%d, %d SMs, driver %d; %s\n", info->name, info->sm, info->multiprocessors,
           info->driver_version, lntune_nvrtc_describe(nv));
    lntune_cuda_checker *checker = NULL;
    if (lntune_cuda_checker_create(cu, 8 * (65536 + 16), 65536, &checker)) {
        fprintf(stderr, "alloc: %s\n", lntune_cuda_errmsg(cu));
        return 1;
    }
    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) || lntune_gen_set_cuda_arch(g, info->sm)) {
        fprintf(stderr, "gen: %s\n", lntune_gen_errmsg(g));
        return 1;
    }
    int failures = 0;
    size_t checked = 0;
    const char *ops[2] = {"layernorm", "rmsnorm"};
    for (int o = 0; o < 2; ++o) {
        job *jobs = NULL;
        size_t n = collect(g, ops[o], &jobs);
        lntune_nvrtc_job *compiled = calloc(n ? n : 1, sizeof *compiled);
        for (size_t i = 0; i < n; ++i) compiled[i].source = jobs[i].text;
        time_t t0 = time(NULL);
        if (lntune_nvrtc_compile_many(nv, info->sm, LNTUNE_NVRTC_CUBIN, compiled, n, 0)) {
            fprintf(stderr, "cannot start the compile threads\n");
            return 1;
        }
        printf("%s: %zu variants compiled for sm_%d in %ld s\n", ops[o], n, info->sm,
               (long)(time(NULL) - t0));
        lntune_verifier *vcache[16];
        int64_t vkey[16];
        size_t nv_cache = 0;
        for (size_t i = 0; i < n; ++i) {
            job *j = &jobs[i];
            lntune_nvrtc_output *out = &compiled[i].out;
            if (compiled[i].rc) {
                printf("FAIL %s %s: compile: %s\n", ops[o], j->variant, out->message);
                ++failures;
                continue;
            }
            void *module = NULL, *function = NULL;
            lntune_cuda_launch launch;
            if (lntune_cuda_launch_parse(j->text, &launch) ||
                lntune_cuda_module_load(cu, out->data, "lntune_norm", &module, &function)) {
                printf("FAIL %s %s: load: %s\n", ops[o], j->variant, lntune_cuda_errmsg(cu));
                ++failures;
                continue;
            }
            const int64_t smem_max =
                lntune_cuda_launch_smem(&launch, launch.max_h ? launch.max_h : 65536);
            if (smem_max > 48 * 1024 && launch.smem_per_h)
                lntune_cuda_set_max_smem(cu, function, smem_max);
            lntune_verifier *v = verifier_for((lntune_op)o, launch.max_h, vcache, vkey, &nv_cache);
            lntune_verify_result res;
            rc =
                lntune_cuda_checker_run(checker, v, function, &launch, j->affine, j->fixed_h, &res);
            ++checked;
            if (rc == LNTUNE_ENODEVICE) { /* a fault poisons the context */
                printf("FAIL %s %s: %s\nstopping: the CUDA context is unusable\n", ops[o],
                       j->variant, res.message);
                return 1;
            }
            if (rc) {
                printf("FAIL %s %s: %s\n", ops[o], j->variant, res.message);
                ++failures;
            } else if (getenv("LNTUNE_TEST_VERBOSE")) {
                printf("ok %s %s: max error %.3g ulp-units at %s\n", ops[o], j->variant,
                       res.max_error * (1 << 24), res.worst);
            }
            lntune_cuda_module_unload(cu, module);
        }
        for (size_t i = 0; i < nv_cache; ++i) lntune_verifier_destroy(vcache[i]);
        for (size_t i = 0; i < n; ++i) {
            free(jobs[i].variant);
            free(jobs[i].text);
            lntune_nvrtc_output_free(&compiled[i].out);
        }
        free(compiled);
        free(jobs);
    }
    lntune_gen_close(g);
    lntune_cuda_checker_destroy(checker);
    lntune_nvrtc_close(nv);
    lntune_cuda_close(cu);
    printf("%zu variants verified, %d failed\n", checked, failures);
    return failures ? 1 : 0;
}
