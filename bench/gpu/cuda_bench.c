/*
 * cuda_bench.c - times every CUDA variant against a device-to-device copy of the same bytes and
 * prints markdown tables to stdout. Not a tuner: it shows what the variant space reaches on this
 * GPU.
 *
 * rows = 16384: inputs rotate through buffers whose total exceeds the L2 cache (50 MB on H200)
 * several times, so every launch reads from HBM ("cold"). rows = 1 and 8: the same buffers every
 * launch (latency-bound; the time includes the launch). CUDA events, warm-up, then the median
 * of REPS launches. A variant is timed only after its output matched the float64 reference on
 * 8 rows of 1000 + randn (sanity only: tests/test_cuda_gpu.c is the real verifier).
 */
#include "cuda_driver.h"
#include "cuda_launch.h"
#include "generator.h"
#include "lntune.h"
#include "lntune_kernel.h"
#include "nvrtc.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REPS = 25, WARMUP = 3, CHECK_ROWS = 8 };
static const int64_t hs[] = {768, 1024, 4096, 8192, 16384};
static const int64_t row_counts[] = {16384, 8, 1};
static const double ROTATE_BYTES = 400e6; /* 8x the H200's L2 */

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "cuda_bench: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

typedef struct {
    char *variant, *text;
    int affine;
} job;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ULL;
static double randn(void) {
    double u[2];
    for (int i = 0; i < 2; ++i) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        u[i] = ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

typedef struct {
    lntune_cuda *cu;
    void *stream, *ev0, *ev1;
    uint64_t *x, *y; /* nbuf rotating buffers */
    int nbuf;
    uint64_t gamma, beta;
} bench;

/* Median ms of one launch; fn NULL times a DtoD copy of rows x H floats instead. */
static float time_one(bench *b, void *fn, const lntune_cuda_launch *l, int64_t rows, int64_t H,
                      int affine, int ln) {
    float t[REPS];
    const int nbuf = rows >= 1024 ? b->nbuf : 1;
    for (int r = -WARMUP; r < REPS; ++r) {
        const int k = (r + WARMUP) % nbuf;
        lntune_kernel_args a = {0};
        a.rows = rows;
        a.H = a.x_stride = a.y_stride = H;
        a.x = (const void *)(uintptr_t)b->x[k];
        a.y = (void *)(uintptr_t)b->y[k];
        a.eps = 1e-5f;
        if (affine) {
            a.gamma = (const void *)(uintptr_t)b->gamma;
            a.beta = ln ? (const void *)(uintptr_t)b->beta : NULL;
        }
        lntune_cuda_event_record(b->cu, b->ev0, b->stream);
        int rc =
            fn ? lntune_cuda_launch_kernel(b->cu, fn, lntune_cuda_launch_grid(l, rows), l->block,
                                           lntune_cuda_launch_smem(l, H), b->stream, &a)
               : lntune_cuda_dtod(b->cu, b->y[k], b->x[k], (size_t)(rows * H * 4), b->stream);
        if (rc) DIE("%s", lntune_cuda_errmsg(b->cu));
        lntune_cuda_event_record(b->cu, b->ev1, b->stream);
        float ms = 0;
        if (lntune_cuda_event_elapsed_ms(b->cu, b->ev0, b->ev1, &ms))
            DIE("%s", lntune_cuda_errmsg(b->cu));
        if (r >= 0) t[r] = ms;
    }
    qsort(t, REPS, sizeof t[0], cmp_float);
    return t[REPS / 2];
}

/* Runs the variant on CHECK_ROWS rows of 1000 + randn and compares with the reference. */
static int sane(bench *b, void *fn, const lntune_cuda_launch *l, int64_t H, int affine, int ln,
                const float *x, const float *g, const float *be, float *y, double *z) {
    lntune_kernel_args a = {0};
    a.rows = CHECK_ROWS;
    a.H = a.x_stride = a.y_stride = H;
    a.x = (const void *)(uintptr_t)b->x[0];
    a.y = (void *)(uintptr_t)b->y[0];
    a.eps = 1e-5f;
    if (affine) {
        a.gamma = (const void *)(uintptr_t)b->gamma;
        a.beta = ln ? (const void *)(uintptr_t)b->beta : NULL;
    }
    lntune_cuda_htod(b->cu, b->x[0], x, (size_t)(CHECK_ROWS * H * 4));
    if (lntune_cuda_launch_kernel(b->cu, fn, lntune_cuda_launch_grid(l, CHECK_ROWS), l->block,
                                  lntune_cuda_launch_smem(l, H), b->stream, &a) ||
        lntune_cuda_stream_sync(b->cu, b->stream))
        DIE("%s", lntune_cuda_errmsg(b->cu));
    lntune_cuda_dtoh(b->cu, y, b->y[0], (size_t)(CHECK_ROWS * H * 4));
    for (int64_t i = 0; i < CHECK_ROWS * H; ++i) {
        const int64_t c = i % H;
        double ref = affine ? z[i] * g[c] + (ln ? be[c] : 0.0) : z[i];
        if (!(fabs(y[i] - ref) <= 1e-4 * (fabs(ref) + 1.0))) return 0;
    }
    return 1;
}

int main(void) {
    lntune_cuda *cu = NULL;
    if (lntune_cuda_open(0, &cu)) DIE("%s", lntune_cuda_errmsg(cu));
    const lntune_cuda_info *info = lntune_cuda_get_info(cu);
    lntune_nvrtc *nv = NULL;
    if (lntune_nvrtc_open(&nv)) DIE("%s", lntune_nvrtc_errmsg(nv));
    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) || lntune_gen_set_cuda_arch(g, info->sm))
        DIE("%s", lntune_gen_errmsg(g));
    printf("## lntune CUDA variants on %s (sm_%d, %d SMs, L2 %.0f MB, driver %d, %s)\n\n",
           info->name, info->sm, info->multiprocessors, info->l2_bytes / 1e6, info->driver_version,
           lntune_nvrtc_describe(nv));
    printf("fp32 in/out, eps 1e-5, gamma and beta. GB/s counts x read once and y written once. "
           "Copy: cuMemcpyDtoD of the same bytes (read + write). rows = 16384 is cold (inputs "
           "rotated past L2); rows 1 and 8 are hot and include the launch.\n\n");

    bench b = {.cu = cu};
    const int64_t maxh = 16384, maxrows = 16384;
    const size_t bytes = (size_t)(maxh * maxrows * 4);
    b.nbuf = (int)ceil(ROTATE_BYTES / (2.0 * (double)bytes)) + 1;
    b.x = calloc((size_t)b.nbuf, sizeof *b.x);
    b.y = calloc((size_t)b.nbuf, sizeof *b.y);
    for (int i = 0; i < b.nbuf; ++i)
        if (lntune_cuda_alloc(cu, bytes, &b.x[i]) || lntune_cuda_alloc(cu, bytes, &b.y[i]) ||
            lntune_cuda_fill32(cu, b.x[i], 0x3f800000u, bytes / 4))
            DIE("%s", lntune_cuda_errmsg(cu));
    if (lntune_cuda_alloc(cu, maxh * 4, &b.gamma) || lntune_cuda_alloc(cu, maxh * 4, &b.beta) ||
        lntune_cuda_stream_create(cu, &b.stream) || lntune_cuda_event_create(cu, &b.ev0) ||
        lntune_cuda_event_create(cu, &b.ev1))
        DIE("%s", lntune_cuda_errmsg(cu));

    float *x = malloc(CHECK_ROWS * maxh * 4), *y = malloc(CHECK_ROWS * maxh * 4);
    float *gm = malloc(maxh * 4), *bt = malloc(maxh * 4);
    double *z = malloc(CHECK_ROWS * maxh * sizeof(double));
    for (int64_t i = 0; i < maxh; ++i) gm[i] = (float)(1.0 + 0.1 * randn()), bt[i] = (float)randn();
    lntune_cuda_htod(cu, b.gamma, gm, maxh * 4);
    lntune_cuda_htod(cu, b.beta, bt, maxh * 4);

    static const char *const ops[] = {"layernorm", "rmsnorm"};
    for (int o = 0; o < 2; ++o) {
        const int ln = o == 0;
        printf("### %s\n\n| rows | H | best variant | us | GB/s | copy GB/s | ratio to copy | "
               "variants timed (wrong) |\n|---:|---:|---|---:|---:|---:|---:|---:|\n",
               ops[o]);
        for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; ++hi) {
            const int64_t H = hs[hi];
            lntune_shape shape = {.H = H};
            char **list = NULL;
            size_t n = 0;
            if (lntune_gen_variants(g, "cuda", ops[o], &shape, &list, &n))
                DIE("%s", lntune_gen_errmsg(g));
            job *jobs = calloc(n, sizeof *jobs);
            for (size_t i = 0; i < n; ++i) {
                lntune_source src;
                if (lntune_gen_emit(g, "cuda", ops[o], list[i], &shape, "lntune_norm", &src))
                    DIE("%s", lntune_gen_errmsg(g));
                jobs[i].variant = list[i];
                jobs[i].text = src.text;
                jobs[i].affine = src.affine;
                free(src.variant);
            }
            lntune_nvrtc_job *compiled = calloc(n ? n : 1, sizeof *compiled);
            for (size_t i = 0; i < n; ++i) compiled[i].source = jobs[i].text;
            if (lntune_nvrtc_compile_many(nv, info->sm, LNTUNE_NVRTC_CUBIN, compiled, n, 0))
                DIE("cannot start the compile threads");

            for (int64_t i = 0; i < CHECK_ROWS * H; ++i) x[i] = (float)(1000.0 + randn());
            for (int r = 0; r < CHECK_ROWS; ++r) {
                double mean, rstd;
                lntune_reference_row((lntune_op)o, x + r * H, H, 1e-5, z + r * H, &mean, &rstd);
            }
            /* Only affine variants: the table compares like with like (PyTorch's affine LN). */
            float best[3] = {1e30f, 1e30f, 1e30f};
            const char *best_name[3] = {"-", "-", "-"};
            int timed = 0, wrong = 0;
            for (size_t i = 0; i < n; ++i) {
                job *j = &jobs[i];
                if (!j->affine) continue;
                if (compiled[i].rc) DIE("compile %s: %s", j->variant, compiled[i].out.message);
                lntune_cuda_launch l;
                void *module, *fn;
                if (lntune_cuda_launch_parse(j->text, &l) ||
                    lntune_cuda_module_load(cu, compiled[i].out.data, "lntune_norm", &module, &fn))
                    DIE("load %s: %s", j->variant, lntune_cuda_errmsg(cu));
                if (l.max_h && H > l.max_h) {
                    lntune_cuda_module_unload(cu, module);
                    continue;
                }
                int64_t smem = lntune_cuda_launch_smem(&l, H);
                if (smem > 48 * 1024) lntune_cuda_set_max_smem(cu, fn, smem);
                if (!sane(&b, fn, &l, H, 1, ln, x, gm, bt, y, z)) {
                    ++wrong;
                    fprintf(stderr, "WRONG %s H=%lld %s\n", ops[o], (long long)H, j->variant);
                } else {
                    ++timed;
                    for (int rc = 0; rc < 3; ++rc) {
                        float ms = time_one(&b, fn, &l, row_counts[rc], H, 1, ln);
                        if (ms < best[rc]) best[rc] = ms, best_name[rc] = j->variant;
                    }
                }
                lntune_cuda_module_unload(cu, module);
            }
            for (int rc = 0; rc < 3; ++rc) {
                const int64_t rows = row_counts[rc];
                const double gb = 2.0 * (double)(rows * H * 4) / 1e9;
                float copy = time_one(&b, NULL, NULL, rows, H, 0, 0);
                printf("| %lld | %lld | `%s` | %.1f | %.0f | %.0f | %.2f | %d (%d) |\n",
                       (long long)rows, (long long)H, best_name[rc], best[rc] * 1e3,
                       gb / (best[rc] / 1e3), gb / (copy / 1e3), copy / best[rc], timed, wrong);
            }
            fflush(stdout);
            for (size_t i = 0; i < n; ++i) {
                free(jobs[i].text);
                lntune_nvrtc_output_free(&compiled[i].out);
            }
            free(compiled);
            free(jobs);
            lntune_gen_free_list(list, n);
        }
        printf("\n");
    }
    return 0;
}
