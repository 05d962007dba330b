/*
 * test_cuda_gpu.c - every CUDA variant of both ops gives the float64 reference's answer on a real
 * GPU, on the verifier's adversarial suite (gen/verify.h): randn, 1000 + randn, 1 + 1e-3 randn,
 * constant rows, NaN/Inf rows; contiguous rows, x and y misaligned by 4 bytes, row strides larger
 * than H; H in {1, 3, 17, 768, 1000, 4096, 4097, 12288, 65536}; y poisoned before each run, so an
 * element never written, or written outside the rows, is caught.
 *
 * The verifier runs CPU kernel functions; gpu_kernel below is one: it copies the case to the
 * device at the same alignment (mod 16 bytes) with poisoned guard zones around y, launches the
 * variant by its launch line, and copies y back. Variants with fixed H run at that H only;
 * shared-memory variants only up to their max_h.
 *
 * Exits 77 (skipped) when there is no GPU, no driver, or no NVRTC. Labelled `cuda` in ctest.
 */
#include "cuda_driver.h"
#include "cuda_launch.h"
#include "generator.h"
#include "lntune.h"
#include "nvrtc.h"
#include "verify.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const int64_t test_h[] = {1, 3, 17, 768, 1000, 4096, 4097, 12288, 65536};
enum { NH = sizeof test_h / sizeof test_h[0] };
static const int64_t fixed_shapes[] = {768, 4096, 12288};
enum { GUARD = 256, MAX_FLOATS = 8 * (65536 + 16) };
static const uint32_t POISON = 0x7fa5a5a5u; /* the verifier's poison */
#define KERNEL_DEVICE_ERROR 99

/* The variant gpu_kernel runs: the verifier's kernel functions take no user pointer. */
static struct {
    lntune_cuda *cu;
    void *function;
    lntune_cuda_launch launch;
    uint64_t dx, dy, dg, db; /* device buffers, 256-byte aligned */
    char message[1024];
} cur;

static size_t extent(int64_t rows, int64_t stride, int64_t H) {
    return (size_t)((rows - 1) * stride + H);
}

static int device_error(const char *what) {
    snprintf(cur.message, sizeof cur.message, "%s: %s", what, lntune_cuda_errmsg(cur.cu));
    return KERNEL_DEVICE_ERROR;
}

/* A lntune_kernel_fn that runs the current variant on the GPU. */
static int gpu_kernel(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end) {
    if (row_begin != 0 || row_end != a->rows) return LNTUNE_KERNEL_EUNSUPPORTED;
    lntune_cuda *cu = cur.cu;
    const size_t xn = extent(a->rows, a->x_stride, a->H), yn = extent(a->rows, a->y_stride, a->H);
    if (xn + 16 > MAX_FLOATS || yn + 16 > MAX_FLOATS) return LNTUNE_KERNEL_EUNSUPPORTED;
    /* Same misalignment as the host copy, so the kernel's alignment checks see what it would. */
    const uint64_t x = cur.dx + GUARD + (uintptr_t)a->x % 16;
    const uint64_t y = cur.dy + GUARD + (uintptr_t)a->y % 16;
    lntune_kernel_args d = *a;
    d.x = (const void *)(uintptr_t)x;
    d.y = (void *)(uintptr_t)y;
    if (lntune_cuda_htod(cu, x, a->x, xn * 4)) return device_error("copy x");
    if (lntune_cuda_fill32(cu, cur.dy, POISON, MAX_FLOATS + 2 * GUARD / 4))
        return device_error("poison y");
    if (lntune_cuda_htod(cu, y, a->y, yn * 4)) return device_error("copy y");
    if (a->gamma) {
        if (lntune_cuda_htod(cu, cur.dg, a->gamma, (size_t)a->H * 4))
            return device_error("copy gamma");
        d.gamma = (const void *)(uintptr_t)cur.dg;
    }
    if (a->beta) {
        if (lntune_cuda_htod(cu, cur.db, a->beta, (size_t)a->H * 4))
            return device_error("copy beta");
        d.beta = (const void *)(uintptr_t)cur.db;
    }
    const int64_t smem = lntune_cuda_launch_smem(&cur.launch, a->H);
    if (lntune_cuda_launch_kernel(cu, cur.function, lntune_cuda_launch_grid(&cur.launch, a->rows),
                                  cur.launch.block, smem, NULL, &d))
        return device_error("launch");
    if (lntune_cuda_sync(cu)) return device_error("kernel");
    if (lntune_cuda_dtoh(cu, a->y, y, yn * 4)) return device_error("copy y back");
    /* The guard zones around y on the device: the host's are checked by the verifier. */
    /* The zone before y is GUARD bytes plus y's misalignment (up to 12 bytes). */
    static uint32_t guard[(GUARD + 16) / 4];
    const uint64_t zones[2] = {cur.dy, y + yn * 4};
    for (int z = 0; z < 2; ++z) {
        size_t bytes = z == 0 ? (size_t)(y - cur.dy) : GUARD;
        if (lntune_cuda_dtoh(cu, guard, zones[z], bytes)) return device_error("copy guard");
        for (size_t i = 0; i < bytes / 4; ++i)
            if (guard[i] != POISON) {
                snprintf(cur.message, sizeof cur.message, "wrote %s y on the device",
                         z ? "past the end of" : "before");
                return KERNEL_DEVICE_ERROR;
            }
    }
    return LNTUNE_KERNEL_OK;
}

typedef struct {
    char *variant, *text, *what;
    int64_t fixed_h;
    int affine;
    lntune_nvrtc_output out;
    int rc;
} job;

typedef struct {
    const lntune_nvrtc *nv;
    int sm;
    job *jobs;
    size_t n;
    atomic_size_t next;
} compile_pool;

static void *compile_worker(void *arg) {
    compile_pool *p = arg;
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) {
        job *j = &p->jobs[i];
        j->rc = lntune_nvrtc_compile(p->nv, j->text, "variant.cu", p->sm, LNTUNE_NVRTC_CUBIN, NULL,
                                     &j->out);
    }
    return NULL;
}

/* Emits every variant of op: the generic space plus the fixed-H variants of fixed_shapes. */
static size_t collect(lntune_gen *g, const char *op, job **jobs) {
    size_t n = 0, cap = 0;
    for (size_t s = 0; s <= sizeof fixed_shapes / sizeof fixed_shapes[0]; ++s) {
        lntune_shape shape = {0, s ? fixed_shapes[s - 1] : 0, 0};
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
            memset(j, 0, sizeof *j);
            j->variant = strdup(list[i]);
            j->text = src.text;
            j->fixed_h = src.fixed_h;
            j->affine = src.affine;
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
    cur.cu = cu;
    if (lntune_cuda_alloc(cu, MAX_FLOATS * 4 + 2 * GUARD, &cur.dx) ||
        lntune_cuda_alloc(cu, MAX_FLOATS * 4 + 2 * GUARD, &cur.dy) ||
        lntune_cuda_alloc(cu, 65536 * 4, &cur.dg) || lntune_cuda_alloc(cu, 65536 * 4, &cur.db)) {
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
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int nthreads = cores > 1 ? (int)(cores > 32 ? 32 : cores) : 1;
        compile_pool p = {.nv = nv, .sm = info->sm, .jobs = jobs, .n = n};
        atomic_init(&p.next, 0);
        time_t t0 = time(NULL);
        pthread_t th[32];
        for (int i = 0; i < nthreads; ++i) pthread_create(&th[i], NULL, compile_worker, &p);
        for (int i = 0; i < nthreads; ++i) pthread_join(th[i], NULL);
        printf("%s: %zu variants compiled for sm_%d in %ld s\n", ops[o], n, info->sm,
               (long)(time(NULL) - t0));
        lntune_verifier *vcache[16];
        int64_t vkey[16];
        size_t nv_cache = 0;
        for (size_t i = 0; i < n; ++i) {
            job *j = &jobs[i];
            if (j->rc) {
                printf("FAIL %s %s: compile: %s\n", ops[o], j->variant, j->out.message);
                ++failures;
                continue;
            }
            void *module = NULL;
            memset(cur.message, 0, sizeof cur.message);
            if (lntune_cuda_launch_parse(j->text, &cur.launch) ||
                lntune_cuda_module_load(cu, j->out.data, "lntune_norm", &module, &cur.function)) {
                printf("FAIL %s %s: load: %s\n", ops[o], j->variant, lntune_cuda_errmsg(cu));
                ++failures;
                continue;
            }
            const int64_t smem_max =
                lntune_cuda_launch_smem(&cur.launch, cur.launch.max_h ? cur.launch.max_h : 65536);
            if (smem_max > 48 * 1024 && cur.launch.smem_per_h)
                lntune_cuda_set_max_smem(cu, cur.function, smem_max);
            lntune_verifier *v =
                verifier_for((lntune_op)o, cur.launch.max_h, vcache, vkey, &nv_cache);
            lntune_verify_result res;
            rc = lntune_verifier_check(v, gpu_kernel, j->affine, j->fixed_h, 1, NULL, &res);
            ++checked;
            if (rc) {
                printf("FAIL %s %s: %s %s\n", ops[o], j->variant, res.message, cur.message);
                ++failures;
                if (strstr(cur.message, "kernel:")) { /* a fault poisons the context */
                    printf("stopping: the CUDA context is unusable after a kernel fault\n");
                    return 1;
                }
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
            lntune_nvrtc_output_free(&jobs[i].out);
        }
        free(jobs);
    }
    lntune_gen_close(g);
    lntune_cuda_free(cu, cur.dx);
    lntune_cuda_free(cu, cur.dy);
    lntune_cuda_free(cu, cur.dg);
    lntune_cuda_free(cu, cur.db);
    lntune_nvrtc_close(nv);
    lntune_cuda_close(cu);
    printf("%zu variants verified, %d failed\n", checked, failures);
    return failures ? 1 : 0;
}
