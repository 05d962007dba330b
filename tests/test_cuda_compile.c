/*
 * test_cuda_compile.c - every CUDA variant compiles, without a GPU: NVRTC turns each one into
 * a non-empty cubin and non-empty PTX for sm_80 and sm_90, for the generic space and for
 * H = 768, 4096, 16384. Also: NVRTC's log reaches the caller when a template yields bad CUDA,
 * and a missing NVRTC is LNTUNE_ENODEVICE, not a crash.
 *
 * Cost (2 cores, about 5 minutes when idle): a variant's code is the same for every shape unless
 * H is fixed, so each distinct source is compiled once per arch. -arch=sm_XX yields the cubin and
 * the PTX it came from (the very PTX --gpu-architecture=compute_XX gives), so every source of
 * both archs goes to a cubin and its PTX, each checked non-empty; every 8th also goes through a
 * separate compute_XX (PTX only) compile. LNTUNE_TEST_FULL=1 makes that every source too. Exits 77
 * (skipped) when no NVRTC can be loaded. For work on the templates: LNTUNE_TEST_QUICK=N compiles
 * only every Nth variant, LNTUNE_TEST_DRY=1 none.
 */
#include "check.h"
#include "cuda_launch.h"
#include "generator.h"
#include "lntune.h"
#include "nvrtc.h"
#include "clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A missing library named by LNTUNE_NVRTC is reported as "no device", with the path. */
static void test_missing_nvrtc(void) {
    const char *old = getenv("LNTUNE_NVRTC");
    char *saved = old ? strdup(old) : NULL;
    setenv("LNTUNE_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
    lntune_nvrtc *n = NULL;
    int rc = lntune_nvrtc_open(&n);
    EXPECT(rc == LNTUNE_ENODEVICE, "rc %d", rc);
    EXPECT(strstr(lntune_nvrtc_errmsg(n), "/nonexistent/libnvrtc.so.13") != NULL, "message '%s'",
           lntune_nvrtc_errmsg(n));
    lntune_nvrtc_output out;
    rc = lntune_nvrtc_compile(n, "extern \"C\" __global__ void k() {}", NULL, 90, LNTUNE_NVRTC_PTX,
                              NULL, &out);
    EXPECT(rc == LNTUNE_ENODEVICE, "compiling without NVRTC gave %d", rc);
    lntune_nvrtc_output_free(&out);
    lntune_nvrtc_close(n);
    if (saved)
        setenv("LNTUNE_NVRTC", saved, 1);
    else
        unsetenv("LNTUNE_NVRTC");
    free(saved);
}

/* A CUDA template whose output is not valid CUDA: the failure carries NVRTC's log. */
static void test_bad_source(const lntune_nvrtc *nv) {
    char dir[] = "/tmp/lntune-cuda-XXXXXX";
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp failed");
        return;
    }
    char sub[256], path[300];
    snprintf(sub, sizeof sub, "%s/cuda", dir);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/broken.lua", sub);
    FILE *f = fopen(path, "w");
    fputs("return lntune.family { op = 'broken', target = 'cuda', params = {},\n"
          "source = lntune.template [==[\n"
          "extern \"C\" __global__ void {{symbol}}(float *y)\n"
          "{\n"
          "    y[0] = 1.0f +;\n"
          "}\n"
          "]==] }\n",
          f);
    fclose(f);
    lntune_gen *g = NULL;
    int rc = lntune_gen_open(dir, &g);
    lntune_source src;
    if (rc == LNTUNE_OK) rc = lntune_gen_emit(g, "cuda", "broken", "", NULL, NULL, &src);
    EXPECT(rc == LNTUNE_OK, "emit: %s", lntune_gen_errmsg(g));
    if (rc == LNTUNE_OK) {
        lntune_nvrtc_output out;
        rc = lntune_nvrtc_compile(nv, src.text, "broken.cu", 90, LNTUNE_NVRTC_PTX, NULL, &out);
        EXPECT(rc == LNTUNE_ECOMPILE, "rc %d", rc);
        EXPECT(out.message && strstr(out.message, "broken.cu(") && strstr(out.message, "error"),
               "message '%s'", out.message ? out.message : "(none)");
        EXPECT(out.data == NULL && out.len == 0, "output on failure");
        lntune_nvrtc_output_free(&out);
        lntune_source_free(&src);
    }
    lntune_gen_close(g);
    remove(path);
    rmdir(sub);
    rmdir(dir);
}

typedef struct {
    char *text;
    const char *body; /* text after the header comment, which names the shape */
    char *what;       /* "sm_90 layernorm H=4096 variant" for messages */
    int sm;
} job;

typedef struct {
    const lntune_nvrtc *nv;
    job *jobs;
    size_t n;
    atomic_size_t next;
    atomic_int failed;
    int full;             /* every source in both modes */
    double compile_ms[2]; /* PTX, cubin; per thread, summed after join */
    pthread_mutex_t lock;
} pool;

static void *worker(void *arg) {
    pool *p = arg;
    double ms[2] = {0, 0};
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) {
        const job *j = &p->jobs[i];
        for (int kind = 1; kind >= 0; --kind) {
            if (!p->full) { /* the sampling described at the top */
                if (kind == LNTUNE_NVRTC_PTX && i % 8 != 0) continue;
            }
            lntune_nvrtc_output out;
            int rc = lntune_nvrtc_compile(p->nv, j->text, "variant.cu", j->sm,
                                          (lntune_nvrtc_kind)kind, NULL, &out);
            ms[kind] += out.compile_ms;
            if (rc == LNTUNE_OK && kind == LNTUNE_NVRTC_CUBIN &&
                (out.ptx_len == 0 || !strstr(out.ptx, ".entry lntune_norm"))) {
                rc = LNTUNE_ECOMPILE;
            }
            if (rc != LNTUNE_OK || out.len == 0) {
                if (atomic_fetch_add(&p->failed, 1) < 5) {
                    pthread_mutex_lock(&p->lock);
                    fprintf(stderr, "%s to %s: rc %d\n%s\n", j->what, kind ? "cubin" : "PTX", rc,
                            out.message ? out.message : "(no message)");
                    pthread_mutex_unlock(&p->lock);
                }
            }
            lntune_nvrtc_output_free(&out);
        }
    }
    pthread_mutex_lock(&p->lock);
    p->compile_ms[0] += ms[0];
    p->compile_ms[1] += ms[1];
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Emits every variant for both ops, both archs and four shapes; each must have a launch line. */
static size_t collect(job **jobs, size_t *count, int quick) {
    static const int archs[] = {80, 90};
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    static const int64_t hs[] = {0, 768, 4096, 16384};
    lntune_gen *g = NULL;
    int rc = lntune_gen_open(NULL, &g);
    EXPECT(rc == LNTUNE_OK, "gen open: %s", lntune_gen_errmsg(g));
    size_t total = 0, cap = 0;
    for (size_t a = 0; a < 2; ++a) {
        lntune_gen_set_cuda_arch(g, archs[a]);
        for (size_t o = 0; o < 2; ++o)
            for (size_t h = 0; h < 4; ++h) {
                lntune_shape shape = {.H = hs[h]};
                char **list = NULL;
                size_t n = 0;
                rc = lntune_gen_variants(g, "cuda", ops[o], &shape, &list, &n);
                EXPECT(rc == LNTUNE_OK, "variants: %s", lntune_gen_errmsg(g));
                size_t clusters = 0;
                for (size_t i = 0; i < n; ++i)
                    clusters += strstr(list[i], "layout=cluster") != NULL;
                printf("sm_%d %-9s H=%-5lld %4zu variants (%zu with clusters)\n", archs[a], ops[o],
                       (long long)hs[h], n, clusters);
                EXPECT(archs[a] >= 90 || clusters == 0, "clusters offered for sm_%d", archs[a]);
                EXPECT(n > 0, "no variants");
                total += n;
                for (size_t i = 0; i < n; ++i) {
                    if (quick > 1 && i % (size_t)quick) continue;
                    lntune_source src;
                    rc = lntune_gen_emit(g, "cuda", ops[o], list[i], &shape, "lntune_norm", &src);
                    EXPECT(rc == LNTUNE_OK, "emit %s: %s", list[i], lntune_gen_errmsg(g));
                    if (rc) continue;
                    lntune_cuda_launch l;
                    EXPECT(lntune_cuda_launch_parse(src.text, &l) == LNTUNE_OK, "launch line of %s",
                           list[i]);
                    EXPECT(src.fixed_h == 0 || src.fixed_h == hs[h], "fixed_h of %s", list[i]);
                    if (*count == cap) {
                        cap = cap ? 2 * cap : 1024;
                        *jobs = realloc(*jobs, cap * sizeof **jobs);
                    }
                    job *j = &(*jobs)[(*count)++];
                    j->text = src.text;
                    const char *end = strstr(src.text, " */\n");
                    j->body = end ? end + 4 : src.text;
                    src.text = NULL;
                    size_t len = strlen(list[i]) + 64;
                    j->what = malloc(len);
                    snprintf(j->what, len, "sm_%d %s H=%lld %s", archs[a], ops[o], (long long)hs[h],
                             list[i]);
                    j->sm = archs[a];
                    lntune_source_free(&src);
                }
                lntune_gen_free_list(list, n);
            }
    }
    lntune_gen_close(g);
    return total;
}

static int by_arch_and_code(const void *a, const void *b) {
    const job *x = a, *y = b;
    if (x->sm != y->sm) return x->sm - y->sm;
    return strcmp(x->body, y->body);
}

/* Sorts jobs and moves one of each distinct (arch, code) to the front; returns how many. */
static size_t distinct(job *jobs, size_t n) {
    qsort(jobs, n, sizeof *jobs, by_arch_and_code);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
        if (kept && by_arch_and_code(&jobs[kept - 1], &jobs[i]) == 0) continue;
        job t = jobs[kept];
        jobs[kept++] = jobs[i];
        jobs[i] = t;
    }
    return kept;
}

static void test_every_variant(const lntune_nvrtc *nv) {
    const char *q = getenv("LNTUNE_TEST_QUICK");
    int quick = q ? atoi(q) : 0;
    job *jobs = NULL;
    size_t n = 0;
    double t0 = test_now_s();
    size_t total = collect(&jobs, &n, quick);
    size_t unique = distinct(jobs, n);
    printf("%zu variants in all (%zu emitted); %zu distinct (arch, source) pairs to compile on 2 "
           "threads\n",
           total, n, unique);
    printf("emitted in %.1f s\n", test_now_s() - t0);
    if (getenv("LNTUNE_TEST_DRY")) unique = 0; /* emit and count only */
    pool p = {.nv = nv, .jobs = jobs, .n = unique, .full = getenv("LNTUNE_TEST_FULL") != NULL};
    atomic_init(&p.next, 0);
    atomic_init(&p.failed, 0);
    pthread_mutex_init(&p.lock, NULL);
    pthread_t th[2];
    for (int i = 0; i < 2; ++i) pthread_create(&th[i], NULL, worker, &p);
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.lock);
    int failed = atomic_load(&p.failed);
    EXPECT(failed == 0, "%d compiles failed", failed);
    printf("compiled in %.1f s wall; NVRTC time: %.1f s to cubin (+PTX), %.1f s to PTX only\n",
           test_now_s() - t0, p.compile_ms[1] / 1e3, p.compile_ms[0] / 1e3);
    for (size_t i = 0; i < n; ++i) {
        free(jobs[i].text);
        free(jobs[i].what);
    }
    free(jobs);
}

int main(void) {
    test_missing_nvrtc();
    lntune_nvrtc *nv = NULL;
    int rc = lntune_nvrtc_open(&nv);
    if (rc == LNTUNE_ENODEVICE) {
        printf("skipped: %s\n", lntune_nvrtc_errmsg(nv));
        lntune_nvrtc_close(nv);
        return check_failures ? 1 : 77;
    }
    EXPECT(rc == LNTUNE_OK, "open: %s", lntune_nvrtc_errmsg(nv));
    if (rc != LNTUNE_OK) return 1;
    printf("%s, include path '%s'\n", lntune_nvrtc_describe(nv), lntune_nvrtc_include_dir(nv));
    test_bad_source(nv);
    test_every_variant(nv);
    lntune_nvrtc_close(nv);
    if (check_failures) {
        fprintf(stderr, "%d failure(s)\n", check_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
