/*
 * verify.c - the adversarial suite: data sets x layouts x H, poisoned outputs, guard zones,
 * and the error in units of the output's own rounding terms (see verify.h).
 */
#include "verify.h"

#include "lntune.h"
#include "sandbox.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const int64_t lntune_verify_standard_h[] = {1,    2,    3,    5,    17,    127,  768,
                                            1000, 4095, 4096, 4097, 12288, 65536};
const size_t lntune_verify_standard_h_count =
    sizeof lntune_verify_standard_h / sizeof lntune_verify_standard_h[0];

enum { ROWS = 7, GUARD = 64, DATASETS = 5, LAYOUTS = 3 };
static const float EPS = 1e-5f;
static const uint32_t POISON = 0x7fa5a5a5u; /* a signalling NaN no arithmetic produces */

static const char *const dataset_names[DATASETS] = {"randn", "1000+randn", "1+1e-3*randn",
                                                    "constant rows", "NaN/Inf rows"};
static const char *const layout_names[LAYOUTS] = {"contiguous", "x and y misaligned by 4 bytes",
                                                  "row strides H+5 (x), H+3 (y)"};

typedef struct {
    int64_t H;
    float *gamma, *beta;
    float *x[DATASETS];  /* ROWS x H, logical layout */
    double *z[DATASETS]; /* reference (x - mean) * rstd */
    double *mean[DATASETS], *rstd[DATASETS];
} h_case;

struct lntune_verifier {
    lntune_op op;
    uint64_t seed, rng;
    size_t nh;
    h_case *cases;
    float *xbuf, *ybuf; /* layout buffers, sized for the largest H */
    size_t buf_floats;
};

static uint64_t next_u64(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dULL;
}

static double uniform(uint64_t *s) /* in (0, 1) */
{
    return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double randn(uint64_t *s) {
    return sqrt(-2.0 * log(uniform(s))) * cos(6.283185307179586 * uniform(s));
}

static void fill_dataset(lntune_verifier *v, h_case *c, int d) {
    int64_t H = c->H;
    float *x = c->x[d];
    for (int r = 0; r < ROWS; ++r) {
        float constant = (float)(100.0 * randn(&v->rng));
        for (int64_t i = 0; i < H; ++i) {
            double g = randn(&v->rng);
            double val = d == 1 ? 1000.0 + g : d == 2 ? 1.0 + 1e-3 * g : d == 3 ? constant : g;
            x[r * H + i] = (float)val;
        }
    }
    if (d == 4) { /* row 1: a NaN; row 2: +Inf; row 3: -Inf first, where kernels take their shift */
        x[1 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H)] = NAN;
        x[2 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H)] = INFINITY;
        x[3 * H] = -INFINITY;
    }
    for (int r = 0; r < ROWS; ++r)
        lntune_reference_row(v->op, x + r * H, H, EPS, c->z[d] + r * H, &c->mean[d][r],
                             &c->rstd[d][r]);
}

int lntune_verifier_create(lntune_op op, const int64_t *hs, size_t nh, uint64_t seed,
                           lntune_verifier **out) {
    if (!out || !hs || nh == 0) return LNTUNE_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < nh; ++i)
        if (hs[i] < 1 || hs[i] > (INT64_C(1) << 26)) return LNTUNE_EINVAL;
    lntune_verifier *v = calloc(1, sizeof *v);
    if (!v || !(v->cases = calloc(nh, sizeof *v->cases))) {
        free(v);
        return LNTUNE_ENOMEM;
    }
    v->op = op;
    v->nh = nh;
    v->seed = seed ? seed : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL + (uint64_t)clock();
    if (!v->seed) v->seed = 1;
    v->rng = v->seed;
    int64_t maxh = 0;
    for (size_t k = 0; k < nh; ++k) {
        h_case *c = &v->cases[k];
        int64_t H = c->H = hs[k];
        if (H > maxh) maxh = H;
        c->gamma = malloc((size_t)H * sizeof(float));
        c->beta = malloc((size_t)H * sizeof(float));
        if (!c->gamma || !c->beta) goto oom;
        for (int64_t i = 0; i < H; ++i) {
            c->gamma[i] = (float)(0.5 + uniform(&v->rng));
            c->beta[i] = (float)(2.0 * uniform(&v->rng) - 1.0);
        }
        for (int d = 0; d < DATASETS; ++d) {
            c->x[d] = malloc((size_t)(ROWS * H) * sizeof(float));
            c->z[d] = malloc((size_t)(ROWS * H) * sizeof(double));
            c->mean[d] = malloc(ROWS * sizeof(double));
            c->rstd[d] = malloc(ROWS * sizeof(double));
            if (!c->x[d] || !c->z[d] || !c->mean[d] || !c->rstd[d]) goto oom;
            fill_dataset(v, c, d);
        }
    }
    /* Room for the widest layout: strides of H + 5 plus a misalignment and two guard zones. */
    v->buf_floats = (size_t)(ROWS * (maxh + 8) + 2 * GUARD + 16);
    v->xbuf = aligned_alloc(64, (v->buf_floats * sizeof(float) + 63) / 64 * 64);
    v->ybuf = aligned_alloc(64, (v->buf_floats * sizeof(float) + 63) / 64 * 64);
    if (!v->xbuf || !v->ybuf) goto oom;
    *out = v;
    return LNTUNE_OK;
oom:
    lntune_verifier_destroy(v);
    return LNTUNE_ENOMEM;
}

void lntune_verifier_destroy(lntune_verifier *v) {
    if (!v) return;
    for (size_t k = 0; k < v->nh && v->cases; ++k) {
        h_case *c = &v->cases[k];
        free(c->gamma);
        free(c->beta);
        for (int d = 0; d < DATASETS; ++d) {
            free(c->x[d]);
            free(c->z[d]);
            free(c->mean[d]);
            free(c->rstd[d]);
        }
    }
    free(v->cases);
    free(v->xbuf);
    free(v->ybuf);
    free(v);
}

uint64_t lntune_verifier_seed(const lntune_verifier *v) {
    return v ? v->seed : 0;
}

static int is_poison(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u == POISON;
}

/* Same class and value within tolerance: NaN for NaN, the same infinity, else finite. */
static int compare(double ref, float got, double unit, double *err) {
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return isinf(got) && (ref > 0) == (got > 0);
    if (!isfinite(got)) return 0;
    *err = fabs((double)got - ref) / (unit > DBL_MIN ? unit : DBL_MIN);
    return 1;
}

/* One run: lays out data set d in layout l, runs the kernel, and checks every element. */
static int run_case(lntune_verifier *v, const h_case *c, int d, int l, lntune_kernel_fn kernel,
                    int affine, int threads, lntune_pool *pool, lntune_verify_result *res) {
    const int64_t H = c->H;
    const int64_t xs = l == 2 ? H + 5 : H, ys = l == 2 ? H + 3 : H;
    const int64_t shift = l == 1 ? 1 : 0;
    float *x = v->xbuf + GUARD + shift, *y = v->ybuf + GUARD + shift;
    const size_t ylen = (size_t)(GUARD + shift + ROWS * ys + GUARD);
    for (size_t i = 0; i < ylen; ++i) memcpy(&v->ybuf[i], &POISON, sizeof POISON);
    for (int r = 0; r < ROWS; ++r) memcpy(x + r * xs, c->x[d] + r * H, (size_t)H * sizeof(float));

    lntune_kernel_args a = {0};
    a.rows = ROWS;
    a.H = H;
    a.x_stride = xs;
    a.y_stride = ys;
    a.x = x;
    a.y = y;
    a.eps = EPS;
    const int ln = v->op == LNTUNE_OP_LAYERNORM;
    if (affine) {
        a.gamma = c->gamma;
        a.beta = ln ? c->beta : NULL;
    }
    const char *where_fmt = "H=%" PRId64 ", %s, %s, seed %" PRIu64 ": ";
    char where[200];
    snprintf(where, sizeof where, where_fmt, H, dataset_names[d], layout_names[l], v->seed);
    lntune_sandbox_progress(-1); /* a heartbeat for the worker's time limit */
    int rc = lntune_pool_run_kernel(pool, kernel, &a, threads);
    res->cases++;
    if (rc != LNTUNE_KERNEL_OK) {
        snprintf(res->message, sizeof res->message, "%skernel returned %d", where, rc);
        return 0;
    }
    for (size_t i = 0; i < (size_t)(GUARD + shift); ++i)
        if (!is_poison(v->ybuf[i])) {
            snprintf(res->message, sizeof res->message, "%swrote before y", where);
            return 0;
        }
    for (int r = 0; r < ROWS; ++r) {
        if (memcmp(x + r * xs, c->x[d] + r * H, (size_t)H * sizeof(float)) != 0) {
            snprintf(res->message, sizeof res->message, "%swrote into x (row %d)", where, r);
            return 0;
        }
        const double mean = c->mean[d][r], rstd = c->rstd[d][r];
        for (int64_t i = 0; i < ys; ++i) {
            float got = y[r * ys + i];
            if (i >= H) { /* the gap between rows of a strided y */
                if (!is_poison(got)) {
                    snprintf(res->message, sizeof res->message,
                             "%swrote between rows (row %d, column %" PRId64 ")", where, r, i);
                    return 0;
                }
                continue;
            }
            if (is_poison(got)) {
                snprintf(res->message, sizeof res->message, "%snever wrote y[%d][%" PRId64 "]",
                         where, r, i);
                return 0;
            }
            const double z = c->z[d][r * H + i];
            const double g = affine ? c->gamma[i] : 1.0, b = affine && ln ? c->beta[i] : 0.0;
            const double ref = z * g + b;
            const double unit = (fabs(mean) * rstd + fabs(z) + 1.0) * fabs(g) + fabs(b);
            double err = 0.0;
            if (!compare(ref, got, unit, &err) || err > LNTUNE_VERIFY_TOLERANCE) {
                snprintf(res->message, sizeof res->message,
                         "%sy[%d][%" PRId64 "] = %.9g, reference %.9g (error %.3g > %.3g)", where,
                         r, i, (double)got, ref, err, LNTUNE_VERIFY_TOLERANCE);
                if (err > res->max_error) res->max_error = err;
                return 0;
            }
            if (err > res->max_error) {
                res->max_error = err;
                res->worst_h = H;
                snprintf(res->worst, sizeof res->worst, "%sy[%d][%" PRId64 "]", where, r, i);
            }
        }
    }
    for (const float *p = y + ROWS * ys; p < v->ybuf + ylen; ++p)
        if (!is_poison(*p)) {
            snprintf(res->message, sizeof res->message, "%swrote past the end of y", where);
            return 0;
        }
    return 1;
}

int lntune_verifier_check(lntune_verifier *v, lntune_kernel_fn kernel, int affine, int64_t fixed_h,
                          int threads, lntune_pool *pool, lntune_verify_result *res) {
    if (!v || !kernel || !res) return LNTUNE_EINVAL;
    memset(res, 0, sizeof *res);
    int found = 0;
    for (size_t k = 0; k < v->nh; ++k) {
        const h_case *c = &v->cases[k];
        if (fixed_h && c->H != fixed_h) continue;
        found = 1;
        for (int d = 0; d < DATASETS; ++d)
            for (int l = 0; l < LAYOUTS; ++l)
                if (!run_case(v, c, d, l, kernel, affine, threads, pool, res))
                    return LNTUNE_EVERIFY;
    }
    if (!found) {
        snprintf(res->message, sizeof res->message, "the verifier has no inputs for H=%" PRId64,
                 fixed_h);
        return LNTUNE_EINVAL;
    }
    return LNTUNE_OK;
}
