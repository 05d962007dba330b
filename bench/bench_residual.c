/*
 * bench_residual.c - lntune's fused residual LayerNorm against a residual add followed by
 * LayerNorm, in one process run (issue #6: >= 1.3x at rows=4096, H=4096).
 *
 *   bench_residual [--db PATH] [--rows N] [--H N] [--reps N] [--rep-ms MS] [--dtypes f32,bf16,f16]
 *
 * For fp32, bf16 and fp16 (x, y, gamma/beta and residual all of that type; --dtypes picks),
 * with residual_out (Pre-LN)
 * and without (Post-LN), it times interleaved (a round runs each candidate for at least rep-ms,
 * in a fresh order each round; the figure is the median over reps rounds):
 *  (a) lntune_layernorm with residual (and residual_out) through the runtime on the database;
 *  (b) residual_add (residual_add.h: plain or non-temporal stores, 1 or every thread; the best
 *      of the four in this run) writing s (to residual_out for Pre-LN, to a scratch buffer for
 *      Post-LN), then lntune_layernorm (unfused, tuned in the same database) reading s;
 *  (c) memcpy of the bytes (a) moves (x, residual read, y and residual_out written), on 1 and
 *      on every thread: the copy bandwidth of the fused call's bytes;
 *  (d) ONNX Runtime's SkipLayerNormalization (com.microsoft, the Add & Norm of its transformer
 *      models; intra_op_num_threads = every core), where bench/install-deps put the onnxruntime
 *      wheel (peers_ort.c); n/a with the reason otherwise, and left out, not failed, when its
 *      result disagrees with the reference: it is a peer, not the thing under test.
 * Before timing, every candidate's outputs (poisoned first) are checked against a float64
 * reference: y against the LayerNorm of s (of s rounded to its type for (b), which normalizes
 * the rounded s it reads; of the fp32 sum for (a) and (d)), s / residual_out bit for bit against
 * the fp32 sum rounded once.
 * Other processes' CPU use during each configuration is reported (busy.h).
 */
#define _GNU_SOURCE
#include "busy.h"
#include "dtypes.h"
#include "half_ref.h"
#include "lntune.h"
#include "peers.h"
#include "reference.h"
#include "residual_add.h"
#include "verify.h"
#include "clock.h"
#include "randn.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { FUSED, PAIR, COPY, PEER, MAX_CANDIDATES = 8, MAX_REPS = 101 };

typedef struct {
    int kind;
    residual_add_variant add; /* PAIR */
    int threads;              /* COPY */
    char name[48];
    double ms[MAX_REPS], median_ms;
} candidate;

typedef struct {
    int type, out; /* type: LNTUNE_TYPE_* of every tensor */
    int64_t rows, H, n;
    size_t es; /* element size */
    void *x, *r, *y, *ro, *s, *gamma, *beta, *ca, *cb;
    double bytes; /* what the fused call moves */
    lntune *ctx;
    void *ort;          /* (d)'s state, or NULL */
    char ort_note[160]; /* what (d) ran, or why it is n/a */
} config;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double randn(void) {
    return test_randn(&rng);
}

static int type_of(const config *c) {
    return c->type;
}

static void fill(const config *c, void *p, int64_t n, double offset, double spread) {
    for (int64_t i = 0; i < n; ++i)
        lntune_ref_store(type_of(c), p, i, (float)(offset + spread * randn()));
}

static void poison(const config *c, void *p) {
    const uint32_t bits = lntune_verify_poison(type_of(c));
    const uint16_t b16 = (uint16_t)bits;
    for (int64_t i = 0; i < c->n; ++i)
        memcpy((char *)p + (size_t)i * c->es, c->es == 2 ? (const void *)&b16 : &bits, c->es);
}

/* The memory copy of the fused call's bytes, split over threads. */
typedef struct {
    const char *from;
    char *to;
    size_t len;
} chunk;
static void *copy_chunk(void *arg) {
    const chunk *k = arg;
    memcpy(k->to, k->from, k->len);
    return NULL;
}
static void copy_bytes(const config *c, int threads) {
    enum { MAXT = 256 };
    const size_t half = (size_t)(c->bytes / 2), t = threads < 1      ? 1
                                                    : threads > MAXT ? MAXT
                                                                     : threads;
    chunk ks[MAXT];
    pthread_t ids[MAXT];
    int started[MAXT] = {0};
    for (size_t k = 0; k < t; ++k) {
        const size_t a = half / 64 * k / t * 64,
                     b = k == t - 1 ? half : half / 64 * (k + 1) / t * 64;
        ks[k] = (chunk){(const char *)c->ca + a, (char *)c->cb + a, b - a};
    }
    for (size_t k = 1; k < t; ++k)
        if (!(started[k] = pthread_create(&ids[k], NULL, copy_chunk, &ks[k]) == 0))
            copy_chunk(&ks[k]);
    copy_chunk(&ks[0]);
    for (size_t k = 1; k < t; ++k)
        if (started[k]) pthread_join(ids[k], NULL);
}

static lntune_args ln_args(const config *c, const void *x) {
    lntune_args a = {0};
    a.rows = c->rows, a.H = c->H, a.x = x, a.y = c->y, a.gamma = c->gamma, a.beta = c->beta;
    a.dtype = (lntune_dtype)(c->type + 1);
    return a;
}

/* One call of candidate k; returns the runtime's code. */
static int run(const config *c, const candidate *k) {
    if (k->kind == COPY) {
        copy_bytes(c, k->threads);
        return LNTUNE_OK;
    }
    if (k->kind == PEER) return lntune_bench_ort_skip_run(c->ort) ? LNTUNE_EINVAL : LNTUNE_OK;
    if (k->kind == FUSED) {
        lntune_args a = ln_args(c, c->x);
        a.residual = c->r;
        a.residual_out = c->out ? c->ro : NULL;
        return lntune_layernorm(c->ctx, &a);
    }
    void *s = c->out ? c->ro : c->s; /* Pre-LN: s is residual_out */
    residual_add(&k->add, c->x, c->r, s, c->n);
    lntune_args a = ln_args(c, s);
    return lntune_layernorm(c->ctx, &a);
}

/*
 * Checks candidate k's outputs against the float64 reference; returns the largest error (verify
 * unit) or INFINITY with a message on stdout at the first wrong element.
 */
static double check(const config *c, const candidate *k) {
    if (k->kind == COPY) {
        memset(c->cb, 0xa5, (size_t)(c->bytes / 2));
        copy_bytes(c, k->threads);
        return memcmp(c->ca, c->cb, (size_t)(c->bytes / 2)) == 0 ? 0.0 : INFINITY;
    }
    void *s = k->kind == PAIR ? (c->out ? c->ro : c->s) : c->out ? c->ro : NULL;
    poison(c, c->y);
    if (s) poison(c, s);
    if (run(c, k) != LNTUNE_OK) {
        printf("  %s: %s\n", k->name, k->kind == PEER ? "the call failed" : lntune_errmsg(c->ctx));
        return INFINITY;
    }
    const int t = type_of(c);
    float *sum = malloc((size_t)c->H * sizeof *sum);
    double *z = malloc((size_t)c->H * sizeof *z), worst = 0.0;
    for (int64_t row = 0; row < c->rows && worst < INFINITY; ++row) {
        const int64_t at = row * c->H;
        for (int64_t i = 0; i < c->H; ++i) {
            float v =
                (float)lntune_ref_load(t, c->x, at + i) + (float)lntune_ref_load(t, c->r, at + i);
            unsigned char want[4];
            lntune_ref_store(t, want, 0, v);
            if (s && memcmp((char *)s + (size_t)(at + i) * c->es, want, c->es) != 0) {
                printf("  %s: s[%lld][%lld] is not x + residual rounded once\n", k->name,
                       (long long)row, (long long)i);
                worst = INFINITY;
                break;
            }
            /* (b) normalizes the s it reads, rounded to its type; (a) the fp32 sum. */
            sum[i] = k->kind == PAIR ? (float)lntune_ref_load(t, want, 0) : v;
        }
        double m, rs;
        lntune_reference_row(LNTUNE_OP_LAYERNORM, sum, c->H, 1e-5, z, &m, &rs);
        for (int64_t i = 0; i < c->H && worst < INFINITY; ++i) {
            const double g = lntune_ref_load(t, c->gamma, i), b = lntune_ref_load(t, c->beta, i);
            const double ref = z[i] * g + b, got = lntune_ref_load(t, c->y, at + i);
            const double unit = (fabs(m) * rs + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
            double err = 0.0;
            if (!lntune_verify_element(t, ref, got, unit, &err)) {
                printf("  %s: y[%lld][%lld] = %g, reference %g\n", k->name, (long long)row,
                       (long long)i, got, ref);
                worst = INFINITY;
            } else if (err > worst) {
                worst = err;
            }
        }
    }
    free(sum), free(z);
    return worst;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p) memset(p, 0, bytes); /* pages touched before any timing */
    return p;
}

/* One configuration: check, time interleaved, print a result line. Returns 0 when all right. */
static int bench_config(config *c, int reps, double rep_ms, int cores) {
    c->n = c->rows * c->H;
    c->es = lntune_type_size(c->type);
    c->bytes = (double)c->n * (double)c->es * (c->out ? 4.0 : 3.0);
    const size_t nb = (size_t)c->n * c->es;
    c->x = alloc(nb), c->r = alloc(nb), c->y = alloc(nb), c->ro = alloc(nb), c->s = alloc(nb);
    c->gamma = alloc((size_t)c->H * c->es), c->beta = alloc((size_t)c->H * c->es);
    c->ca = alloc((size_t)(c->bytes / 2)), c->cb = alloc((size_t)(c->bytes / 2));
    if (!c->x || !c->r || !c->y || !c->ro || !c->s || !c->gamma || !c->beta || !c->ca || !c->cb) {
        printf("out of memory\n");
        return 1;
    }
    fill(c, c->x, c->n, 0.0, 1.0);
    fill(c, c->r, c->n, 0.5, 2.0);
    fill(c, c->gamma, c->H, 1.0, 0.3);
    fill(c, c->beta, c->H, 0.0, 0.5);
    memset(c->ca, 0x3c, (size_t)(c->bytes / 2));
    candidate k[MAX_CANDIDATES];
    int nk = 0;
    k[nk++] = (candidate){.kind = FUSED, .name = "fused"};
    for (int nt = 0; nt < 2; ++nt)
        for (int all = 0; all < 2 && (all == 0 || cores > 1); ++all) {
            candidate p = {.kind = PAIR, .add = {c->type, nt, all ? cores : 1}};
            snprintf(p.name, sizeof p.name, "add(%s,%dt)+layernorm", nt ? "nt" : "plain",
                     p.add.threads);
            k[nk++] = p;
        }
    for (int all = 0; all < 2 && (all == 0 || cores > 1); ++all) {
        candidate p = {.kind = COPY, .threads = all ? cores : 1};
        snprintf(p.name, sizeof p.name, "copy(%dt)", p.threads);
        k[nk++] = p;
    }
    const lntune_bench_skip_problem sp = {
        c->rows, c->H, 1e-5f, c->type, c->x, c->r, c->gamma, c->beta, c->y, c->out ? c->ro : NULL,
        cores};
    if (lntune_bench_ort_skip_open(&sp, &c->ort, c->ort_note, sizeof c->ort_note) == LNTUNE_OK)
        k[nk++] = (candidate){.kind = PEER, .name = "ort SkipLayerNorm"};
    int wrong = 0;
    double err[MAX_CANDIDATES];
    for (int i = 0; i < nk; ++i) {
        err[i] = check(c, &k[i]);
        if (k[i].kind == PEER && !(err[i] < INFINITY)) { /* the last one: left out */
            snprintf(c->ort_note, sizeof c->ort_note, "disagrees with the reference: left out");
            --nk;
            break;
        }
        wrong += !(err[i] < INFINITY);
    }
    if (wrong) {
        lntune_bench_ort_skip_close(c->ort);
        return 1;
    }
    lntune_busy_sample b0, b1;
    lntune_busy_sample_now(&b0);
    int order[MAX_CANDIDATES];
    for (int i = 0; i < nk; ++i) order[i] = i;
    for (int rep = 0; rep < reps; ++rep) {
        for (int i = nk - 1; i > 0; --i) { /* a fresh order each round */
            rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
            const int j = (int)(rng % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int o = 0; o < nk; ++o) {
            candidate *q = &k[order[o]];
            int calls = 0;
            const double t0 = 1e3 * test_now_s();
            double t1;
            do {
                if (run(c, q) != LNTUNE_OK) return 1;
                calls++;
            } while ((t1 = 1e3 * test_now_s()) - t0 < rep_ms);
            q->ms[rep] = (t1 - t0) / calls;
        }
    }
    lntune_busy_sample_now(&b1);
    for (int i = 0; i < nk; ++i) {
        qsort(k[i].ms, (size_t)reps, sizeof(double), cmp);
        k[i].median_ms = k[i].ms[reps / 2];
    }
    int best_pair = -1, best_copy = -1;
    for (int i = 0; i < nk; ++i) {
        if (k[i].kind == PAIR && (best_pair < 0 || k[i].median_ms < k[best_pair].median_ms))
            best_pair = i;
        if (k[i].kind == COPY && (best_copy < 0 || k[i].median_ms < k[best_copy].median_ms))
            best_copy = i;
    }
    const double busy = lntune_busy_other_cores(&b0, &b1);
    printf("\n%s %s, %lldx%lld, fused moves %.1f MB; %d reps of >= %.0f ms; other processes: "
           "%.2f cores\n",
           lntune_type_name(c->type),
           c->out ? "Pre-LN (residual_out)" : "Post-LN (no residual_out)", (long long)c->rows,
           (long long)c->H, c->bytes * 1e-6, reps, rep_ms, busy);
    for (int i = 0; i < nk; ++i)
        printf("  %-24s %9.3f ms  (min %.3f, max %.3f)  %6.2f GB/s of the fused bytes  max error "
               "%.3g\n",
               k[i].name, k[i].median_ms, k[i].ms[0], k[i].ms[reps - 1],
               c->bytes / (k[i].median_ms * 1e6), err[i]);
    printf("  ONNX Runtime: %s%s\n", k[nk - 1].kind == PEER ? "" : "n/a: ", c->ort_note);
    printf("RESULT | %s | %s | %.3f | %.3f (%s) | %.2fx | %.2f | %.2f (%s) | %.2f |\n",
           lntune_type_name(c->type), c->out ? "yes" : "no", k[0].median_ms, k[best_pair].median_ms,
           k[best_pair].name, k[best_pair].median_ms / k[0].median_ms,
           c->bytes / (k[0].median_ms * 1e6), c->bytes / (k[best_copy].median_ms * 1e6),
           k[best_copy].name, busy);
    lntune_bench_ort_skip_close(c->ort);
    free(c->x), free(c->r), free(c->y), free(c->ro), free(c->s), free(c->gamma), free(c->beta);
    free(c->ca), free(c->cb);
    return 0;
}

int main(int argc, char **argv) {
    const char *db = NULL, *dtypes = "f32,bf16,f16";
    int64_t rows = 4096, H = 4096;
    int reps = 7;
    double rep_ms = 50;
    for (int i = 1; i < argc; ++i) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) break;
        if (strcmp(argv[i], "--db") == 0)
            db = v, ++i;
        else if (strcmp(argv[i], "--rows") == 0)
            rows = atoll(v), ++i;
        else if (strcmp(argv[i], "--H") == 0)
            H = atoll(v), ++i;
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(v), ++i;
        else if (strcmp(argv[i], "--rep-ms") == 0)
            rep_ms = atof(v), ++i;
        else if (strcmp(argv[i], "--dtypes") == 0)
            dtypes = v, ++i;
    }
    int types[LNTUNE_TYPE_COUNT], ntypes = 0;
    for (const char *p = dtypes; *p;) {
        const size_t len = strcspn(p, ",");
        const int t = lntune_type_parse(p, len);
        if (t < 0 || t >= LNTUNE_TYPE_COUNT || ntypes == LNTUNE_TYPE_COUNT) {
            fprintf(stderr, "bench_residual: --dtypes takes f32, bf16 and f16, comma-separated\n");
            return 2;
        }
        types[ntypes++] = t;
        p += len + (p[len] == ',');
    }
    if (reps < 7) reps = 7;
    if (reps > MAX_REPS) reps = MAX_REPS;
    if (rep_ms < 50) rep_ms = 50;
    if (rows < 1 || H < 64 || (rows * H) % 64) {
        fprintf(stderr, "bench_residual: rows x H must be a multiple of 64 (H >= 64)\n");
        return 2;
    }
    const int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    lntune *ctx = NULL;
    if (lntune_open(db, &ctx) != LNTUNE_OK) {
        fprintf(stderr, "bench_residual: %s\n", lntune_errmsg(ctx));
        return 1;
    }
    printf("bench_residual: LayerNorm, database %s, %d cores\n", db ? db : "(default)", cores);
    printf("RESULT | dtype | residual_out | fused ms | add+LN ms (best) | (b)/(a) | fused GB/s | "
           "copy GB/s (best) | busy cores |\n");
    int rc = 0;
    for (int k = 0; k < ntypes; ++k)
        for (int out = 1; out >= 0; --out) {
            config c = {.type = types[k], .out = out, .rows = rows, .H = H, .ctx = ctx};
            if (bench_config(&c, reps, rep_ms, cores)) {
                printf("%s %s: a result disagrees with the reference or a call failed\n",
                       lntune_type_name(types[k]), out ? "Pre-LN" : "Post-LN");
                rc = 1;
            }
            fflush(stdout);
        }
    lntune_close(ctx);
    return rc;
}
