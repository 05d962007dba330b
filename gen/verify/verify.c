/*
 * verify.c - the adversarial suite: data sets x layouts x H, poisoned outputs, guard zones,
 * and the error in units of the output's own rounding terms (see verify.h).
 *
 * With a residual (fusion), each data set is split into x and residual (residual_sets below),
 * the reference normalizes their fp32 sum, residual_out is checked bit for bit against that sum
 * rounded to the residual type, and the contiguous layout also checks mean and rstd.
 */
#include "verify.h"

#include "fusion.h"
#include "half_ref.h"
#include "lntune.h"
#include "heartbeat.h"
#include "verify_quant.h"

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

static const char *const dataset_names[DATASETS] = {"randn", "1000+randn", "1+1e-3*randn",
                                                    "constant rows", "NaN/Inf rows"};
/*
 * bf16 keeps 8 significand bits: its step is 4 at 1000 and 2^-8..2^-7 at 1, so spreads of 1 and
 * 1e-3 would round nearly every element to the mean (many rows to constants). Ten times the
 * spread keeps about two steps per sigma, and the mean still 100 sigmas away, so fp32 sums still
 * cancel. fp16 (0.5 at 1000, 2^-11..2^-10 at 1) keeps the fp32 sets.
 */
static const char *const dataset_names_bf16[DATASETS] = {"randn", "1000+10*randn", "1+1e-2*randn",
                                                         "constant rows", "NaN/Inf rows"};
/*
 * The same sets as x + residual: large opposite offsets that cancel in the sum (each input far
 * from the sum's mean of about 0), a tiny-variance sum on a large residual, constant sums of two
 * constants, and NaN, +Inf, -Inf (at the shift's element) and Inf - Inf from the residual.
 */
static const char *const residual_sets[DATASETS] = {
    "x randn + residual randn", "x 1000+randn + residual -1000+randn",
    "x 1e-3*randn + residual 100", "constant x + constant residual",
    "NaN/Inf in residual, +Inf x with -Inf residual"};

typedef struct {
    int64_t H;
    float *gamma, *beta;    /* values, as rounded to the params type */
    void *gamma_t, *beta_t; /* the same in the params type (gamma, beta themselves for fp32) */
    float *x[DATASETS];     /* ROWS x H values, logical layout, as rounded to the x type */
    void *xt[DATASETS];     /* the same in the x type (x itself for fp32) */
    float *r[DATASETS];     /* fusion: residual values, as rounded to the residual type */
    void *rt[DATASETS];     /* the same in the residual type (r itself for fp32) */
    void *sum[DATASETS];    /* fusion: residual_out's expected elements (fp32 x + r, rounded) */
    double *z[DATASETS];    /* reference (x - mean) * rstd */
    double *mean[DATASETS], *rstd[DATASETS];
} h_case;

struct lntune_verifier {
    lntune_op op;
    lntune_types types;
    int fusion;                 /* LNTUNE_FUSION_* */
    int rtype;                  /* the residual's type */
    size_t xsize, ysize, psize; /* bytes per element */
    size_t rsize;
    unsigned char *rbuf, *obuf; /* residual and residual_out layout buffers */
    uint32_t poison;            /* y's poison (lntune_verify_poison) */
    char misaligned[64];        /* the name of layout 1 */
    uint64_t seed, rng;
    size_t nh;
    h_case *cases;
    unsigned char *xbuf, *ybuf; /* layout buffers, sized for the largest H */
    /* A quantized y: every byte is some code, so each case runs twice, first with y poisoned
     * by QUANT_FIRST_POISON (its result kept in ycopy): a code never written shows as both
     * poisons. qscale: the static scale; scales: a scale per row, between two guards. */
    unsigned char *ycopy;
    float qscale;
    float scales[ROWS + 2];
    size_t buf_floats;
};

enum { QUANT_FIRST_POISON = 0x5a };

uint32_t lntune_verify_poison(int y_type) {
    if (lntune_type_quantized(y_type)) return 0xa5u;
    return y_type == LNTUNE_TYPE_F16 ? 0x7d5au : y_type == LNTUNE_TYPE_BF16 ? 0x7f85u : 0x7fa5a5a5u;
}

/*
 * Rounds v[0..n) to type in place and returns the values in type: v itself for fp32, else a new
 * array (NULL when out of memory).
 */
static void *to_type(int type, float *v, size_t n) {
    if (type == LNTUNE_TYPE_F32) return v;
    uint16_t *t = malloc(n * sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < n; ++i) {
        lntune_ref_store(type, t, (int64_t)i, v[i]);
        v[i] = (float)lntune_ref_load(type, t, (int64_t)i);
    }
    return t;
}

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

/*
 * What the large-mean sets add to the noise of row row at i, in sigmas: rows 1 and 2 start with
 * 32 elements (the sample a kernel may take its shift from) 100 and 0.45 sigmas off the rest,
 * where a one-pass variance from that shift has lost all of its digits, or is about to.
 */
static double start_offset(int row, int64_t i, int64_t H) {
    if (i >= 32 || 2 * i >= H) return 0.0;
    return row == 1 ? 100.0 : row == 2 ? 0.45 : 0.0;
}

/*
 * Data set d of a fused verifier (residual_sets): x and residual drawn and rounded to their
 * types, the reference of their fp32 sum, and residual_out's expected elements.
 */
static int fill_residual(lntune_verifier *v, h_case *c, int d) {
    const int64_t H = c->H, n = ROWS * H;
    float *x = c->x[d], *r = c->r[d];
    /* bf16 keeps 8 bits: the spreads grow as for the unfused sets (see dataset_names_bf16). */
    const int coarse = v->types.x == LNTUNE_TYPE_BF16 || v->rtype == LNTUNE_TYPE_BF16;
    const double spread = coarse ? 10.0 : 1.0, tiny = coarse ? 1e-1 : 1e-3;
    for (int row = 0; row < ROWS; ++row) {
        const float cx = (float)(100.0 * randn(&v->rng)), cr = (float)(10.0 * randn(&v->rng));
        for (int64_t i = 0; i < H; ++i) {
            const double g = randn(&v->rng), h = randn(&v->rng);
            double xv = g, rv = h;
            if (d == 1) xv = 1000.0 + spread * g, rv = -1000.0 + spread * h;
            if (d == 2) xv = tiny * (g + start_offset(row, i, H)), rv = 100.0;
            if (d == 3) xv = cx, rv = cr;
            x[row * H + i] = (float)xv;
            r[row * H + i] = (float)rv;
        }
    }
    if (d == 4) { /* residual: row 1 a NaN, row 2 +Inf, row 3 -Inf first; row 4: Inf - Inf */
        r[1 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H)] = NAN;
        r[2 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H)] = INFINITY;
        r[3 * H] = -INFINITY;
        const int64_t at = 4 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H);
        x[at] = INFINITY;
        r[at] = -INFINITY;
    }
    if (!(c->xt[d] = to_type(v->types.x, x, (size_t)n)) ||
        !(c->rt[d] = to_type(v->rtype, r, (size_t)n)))
        return 0;
    float *s = malloc((size_t)n * sizeof *s);
    c->sum[d] = malloc((size_t)n * lntune_type_size(v->rtype));
    if (!s || !c->sum[d]) {
        free(s);
        return 0;
    }
    for (int64_t i = 0; i < n; ++i) {
        s[i] = x[i] + r[i]; /* one fp32 addition: what the kernel must form */
        lntune_ref_store(v->rtype, c->sum[d], i, s[i]);
    }
    for (int row = 0; row < ROWS; ++row)
        lntune_reference_row(v->op, s + row * H, H, EPS, c->z[d] + row * H, &c->mean[d][row],
                             &c->rstd[d][row]);
    free(s);
    return 1;
}

static int fill_dataset(lntune_verifier *v, h_case *c, int d) {
    int64_t H = c->H;
    float *x = c->x[d];
    const int bf16 = v->types.x == LNTUNE_TYPE_BF16;
    const double spread1000 = bf16 ? 10.0 : 1.0, spread1 = bf16 ? 1e-2 : 1e-3;
    for (int r = 0; r < ROWS; ++r) {
        float constant = (float)(100.0 * randn(&v->rng));
        for (int64_t i = 0; i < H; ++i) {
            double g = randn(&v->rng) + (d == 1 ? start_offset(r, i, H) : 0.0);
            double val = d == 1   ? 1000.0 + spread1000 * g
                         : d == 2 ? 1.0 + spread1 * g
                         : d == 3 ? constant
                                  : g;
            x[r * H + i] = (float)val;
        }
    }
    if (v->fusion) return fill_residual(v, c, d);
    if (d == 4) { /* row 1: a NaN; row 2: +Inf; row 3: -Inf first, where kernels take their shift */
        x[1 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H)] = NAN;
        x[2 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H)] = INFINITY;
        x[3 * H] = -INFINITY;
    }
    if (!(c->xt[d] = to_type(v->types.x, x, (size_t)(ROWS * H)))) return 0;
    for (int r = 0; r < ROWS; ++r)
        lntune_reference_row(v->op, x + r * H, H, EPS, c->z[d] + r * H, &c->mean[d][r],
                             &c->rstd[d][r]);
    return 1;
}

int lntune_verifier_create_typed(lntune_op op, lntune_types types, const int64_t *hs, size_t nh,
                                 uint64_t seed, lntune_verifier **out) {
    return lntune_verifier_create_fused(op, types, LNTUNE_FUSION_NONE, hs, nh, seed, out);
}

int lntune_verifier_create_fused(lntune_op op, lntune_types types, int fusion, const int64_t *hs,
                                 size_t nh, uint64_t seed, lntune_verifier **out) {
    if (!out || !hs || nh == 0 || fusion < 0 || fusion >= LNTUNE_FUSION_COUNT) return LNTUNE_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < nh; ++i)
        if (hs[i] < 1 || hs[i] > (INT64_C(1) << 26)) return LNTUNE_EINVAL;
    if (types.x >= LNTUNE_TYPE_COUNT || types.y >= LNTUNE_TYPE_Y_COUNT ||
        types.params >= LNTUNE_TYPE_COUNT)
        return LNTUNE_EINVAL;
    lntune_verifier *v = calloc(1, sizeof *v);
    if (!v || !(v->cases = calloc(nh, sizeof *v->cases))) {
        free(v);
        return LNTUNE_ENOMEM;
    }
    v->op = op;
    v->types = types;
    v->fusion = fusion;
    v->rtype = lntune_types_residual(types);
    v->rsize = lntune_type_size(v->rtype);
    v->xsize = lntune_type_size(types.x);
    v->ysize = lntune_type_size(types.y);
    v->psize = lntune_type_size(types.params);
    v->poison = lntune_verify_poison(types.y);
    v->qscale = lntune_quant_test_scale(types.y);
    if (v->xsize == v->ysize)
        snprintf(v->misaligned, sizeof v->misaligned, "x and y misaligned by %zu bytes", v->xsize);
    else
        snprintf(v->misaligned, sizeof v->misaligned, "x misaligned by %zu bytes, y by %zu",
                 v->xsize, v->ysize);
    if (fusion) /* residual and residual_out too, by one element of their type */
        snprintf(v->misaligned, sizeof v->misaligned, "every tensor misaligned by one element");
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
        if (!(c->gamma_t = to_type(types.params, c->gamma, (size_t)H)) ||
            !(c->beta_t = to_type(types.params, c->beta, (size_t)H)))
            goto oom;
        for (int d = 0; d < DATASETS; ++d) {
            c->x[d] = malloc((size_t)(ROWS * H) * sizeof(float));
            if (fusion && !(c->r[d] = malloc((size_t)(ROWS * H) * sizeof(float)))) goto oom;
            c->z[d] = malloc((size_t)(ROWS * H) * sizeof(double));
            c->mean[d] = malloc(ROWS * sizeof(double));
            c->rstd[d] = malloc(ROWS * sizeof(double));
            if (!c->x[d] || !c->z[d] || !c->mean[d] || !c->rstd[d]) goto oom;
            if (!fill_dataset(v, c, d)) goto oom;
        }
    }
    /*
     * Room for the widest layout: strides of H + 5 plus a misalignment and two guard zones, in
     * fp32 whatever the types, so that a kernel writing fp32 into a 16-bit y overruns into the
     * guard zone, not past the allocation.
     */
    v->buf_floats = (size_t)(ROWS * (maxh + 8) + 2 * GUARD + 16);
    v->xbuf = aligned_alloc(64, (v->buf_floats * sizeof(float) + 63) / 64 * 64);
    v->ybuf = aligned_alloc(64, (v->buf_floats * sizeof(float) + 63) / 64 * 64);
    if (lntune_type_quantized(types.y) && !(v->ycopy = malloc(v->buf_floats))) goto oom;
    if (!v->xbuf || !v->ybuf) goto oom;
    if (fusion) {
        v->rbuf = aligned_alloc(64, (v->buf_floats * sizeof(float) + 63) / 64 * 64);
        v->obuf = aligned_alloc(64, (v->buf_floats * sizeof(float) + 63) / 64 * 64);
        if (!v->rbuf || !v->obuf) goto oom;
    }
    *out = v;
    return LNTUNE_OK;
oom:
    lntune_verifier_destroy(v);
    return LNTUNE_ENOMEM;
}

int lntune_verifier_create(lntune_op op, const int64_t *hs, size_t nh, uint64_t seed,
                           lntune_verifier **out) {
    const lntune_types f32 = {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0};
    return lntune_verifier_create_typed(op, f32, hs, nh, seed, out);
}

void lntune_verifier_destroy(lntune_verifier *v) {
    if (!v) return;
    for (size_t k = 0; k < v->nh && v->cases; ++k) {
        h_case *c = &v->cases[k];
        if (c->gamma_t != c->gamma) free(c->gamma_t);
        if (c->beta_t != c->beta) free(c->beta_t);
        free(c->gamma);
        free(c->beta);
        for (int d = 0; d < DATASETS; ++d) {
            if (c->xt[d] != c->x[d]) free(c->xt[d]);
            if (c->rt[d] != c->r[d]) free(c->rt[d]);
            free(c->x[d]);
            free(c->r[d]);
            free(c->sum[d]);
            free(c->z[d]);
            free(c->mean[d]);
            free(c->rstd[d]);
        }
    }
    free(v->cases);
    free(v->xbuf);
    free(v->ybuf);
    free(v->ycopy);
    free(v->rbuf);
    free(v->obuf);
    free(v);
}

uint64_t lntune_verifier_seed(const lntune_verifier *v) {
    return v ? v->seed : 0;
}

lntune_types lntune_verifier_types(const lntune_verifier *v) {
    const lntune_types f32 = {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0};
    return v ? v->types : f32;
}

int lntune_verifier_fusion(const lntune_verifier *v) {
    return v ? v->fusion : LNTUNE_FUSION_NONE;
}

/* The bits of element i of y (or of a guard zone), of size bytes. */
static inline uint32_t bits_at(const unsigned char *y, int64_t i, size_t size) {
    if (size == 1) return y[i];
    if (size == 4) {
        uint32_t u;
        memcpy(&u, y + 4 * i, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, y + 2 * i, 2);
    return h;
}

static inline int is_poison(const lntune_verifier *v, const unsigned char *y, int64_t i) {
    return bits_at(y, i, v->ysize) == v->poison;
}

/* The value of an element of type whose bits are u. */
static inline double value_of(int type, uint32_t u) {
    if (type == LNTUNE_TYPE_F32) {
        float f;
        memcpy(&f, &u, sizeof f);
        return (double)f;
    }
    return type == LNTUNE_TYPE_F16 ? lntune_ref_f16_decode((uint16_t)u)
                                   : lntune_ref_bf16_decode((uint16_t)u);
}

/* Step between neighbours of type (fp16 or bf16) at magnitude a, subnormal steps included. */
static double ulp_at(int type, double a) {
    const double least = type == LNTUNE_TYPE_BF16 ? ldexp(1.0, -133) : ldexp(1.0, -24);
    int e = 0;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): the step is 2^(e - significand bits) */
    const double u = ldexp(1.0, e - (type == LNTUNE_TYPE_BF16 ? 8 : 11));
    return a > 0.0 && u > least ? u : least;
}

static inline int element_ok(int y_type, double ref, double got, double unit, double *err) {
    *err = 0.0;
    /* Same class: NaN for NaN, the same infinity, else finite (fp32: exactly the rule it had). */
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return isinf(got) && (ref > 0) == (got > 0);
    if (y_type == LNTUNE_TYPE_F32) {
        if (!isfinite(got)) return 0;
        *err = fabs(got - ref) / (unit > DBL_MIN ? unit : DBL_MIN);
        return *err <= LNTUNE_VERIFY_TOLERANCE;
    }
    const double e32 = LNTUNE_VERIFY_TOLERANCE * unit;
    if (isnan(got)) return 0;
    if (isinf(got)) {
        const double max = y_type == LNTUNE_TYPE_F16 ? 65504.0 : lntune_ref_bf16_decode(0x7f7f);
        return (got > 0) == (ref > 0) && fabs(ref) + e32 > max;
    }
    const double bound = e32 + 0.5 * ulp_at(y_type, fabs(ref) + e32) * (1.0 + 1.0 / 128);
    *err = fabs(got - ref) / bound * LNTUNE_VERIFY_TOLERANCE;
    return fabs(got - ref) <= bound;
}

int lntune_verify_element(int y_type, double ref, double got, double unit, double *err) {
    return element_ok(y_type, ref, got, unit, err);
}

/*
 * The weight offset of data set d's runs of a kernel of that affine kind (2: with an offset):
 * Gemma's 1, and 0.5 in every other set, so that a kernel must read it, not assume it.
 */
static inline float case_offset(int affine, int d) {
    return affine == 2 ? (d % 2 ? 0.5f : 1.0f) : 0.0f;
}

/*
 * The float64 reference y of element i of row r of data set d, and its error unit: the scale of
 * the fp32 rounding errors a kernel may make there (verify.h). The weight offset's fp32 sum
 * offset + gamma is one such rounding.
 */
static inline void reference_y(const lntune_verifier *v, const h_case *c, int d, int r, int64_t i,
                               int affine, double *ref, double *unit) {
    const int ln = v->op == LNTUNE_OP_LAYERNORM;
    const double mean = c->mean[d][r], rstd = c->rstd[d][r], z = c->z[d][r * c->H + i];
    const double g = affine ? c->gamma[i] + case_offset(affine, d) : 1.0;
    const double b = affine && ln ? c->beta[i] : 0.0;
    *ref = z * g + b;
    *unit = (fabs(mean) * rstd + fabs(z) + 1.0) * fabs(g) + fabs(b);
}

/*
 * Checks the rows of y (and that x is unchanged) after a run of data set d. y_type is a
 * constant at each call: inlined, each type gets its own loop, and fp32 the loop it had.
 */
static inline __attribute__((always_inline)) int
check_rows(const lntune_verifier *v, const h_case *c, int d, const unsigned char *x, int64_t xs,
           const unsigned char *y, int64_t ys, int affine, const char *where,
           lntune_verify_result *res, int y_type) {
    const int64_t H = c->H;
    const size_t xe = v->xsize, ye = y_type == LNTUNE_TYPE_F32 ? 4 : 2;
    const unsigned char *xt = c->xt[d];
    for (int r = 0; r < ROWS; ++r) {
        if (memcmp(x + r * xs * (int64_t)xe, xt + r * H * (int64_t)xe, (size_t)H * xe) != 0) {
            snprintf(res->message, sizeof res->message, "%swrote into x (row %d)", where, r);
            return 0;
        }
        for (int64_t i = 0; i < ys; ++i) {
            if (i >= H) { /* the gap between rows of a strided y */
                if (bits_at(y, r * ys + i, ye) != v->poison) {
                    snprintf(res->message, sizeof res->message,
                             "%swrote between rows (row %d, column %" PRId64 ")", where, r, i);
                    return 0;
                }
                continue;
            }
            const uint32_t bits = bits_at(y, r * ys + i, ye);
            if (bits == v->poison) {
                snprintf(res->message, sizeof res->message, "%snever wrote y[%d][%" PRId64 "]",
                         where, r, i);
                return 0;
            }
            const double got = value_of(y_type, bits);
            double ref, unit;
            reference_y(v, c, d, r, i, affine, &ref, &unit);
            double err = 0.0;
            if (!element_ok(y_type, ref, got, unit, &err)) {
                snprintf(res->message, sizeof res->message,
                         "%sy[%d][%" PRId64 "] = %.9g, reference %.9g (error %.3g > %.3g)", where,
                         r, i, got, ref, err, LNTUNE_VERIFY_TOLERANCE);
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
    return 1;
}

/*
 * check_rows for a quantized y: x unchanged; every code written (not both poisons, of this run
 * and of the first: first) and the same in both runs; the gaps of a strided y untouched; each
 * row's codes (and scale) as lntune_quant_check_row has them.
 */
static int check_quant_rows(const lntune_verifier *v, const h_case *c, int d,
                            const unsigned char *x, int64_t xs, const unsigned char *y,
                            const unsigned char *first, int64_t ys, int affine, const float *scales,
                            const char *where, lntune_verify_result *res) {
    const int64_t H = c->H;
    const size_t xe = v->xsize;
    double *yref = malloc((size_t)H * sizeof *yref), *unit = malloc((size_t)H * sizeof *unit);
    int ok = yref && unit;
    if (!ok) snprintf(res->message, sizeof res->message, "%sout of memory", where);
    for (int r = 0; ok && r < ROWS; ++r) {
        if (memcmp(x + r * xs * (int64_t)xe, c->xt[d] + r * H * (int64_t)xe, (size_t)H * xe)) {
            snprintf(res->message, sizeof res->message, "%swrote into x (row %d)", where, r);
            ok = 0;
            break;
        }
        for (int64_t i = 0; ok && i < ys; ++i) {
            const unsigned char got = y[r * ys + i], before = first[r * ys + i];
            if (i >= H && (got != v->poison || before != QUANT_FIRST_POISON))
                snprintf(res->message, sizeof res->message,
                         "%swrote between rows (row %d, column %" PRId64 ")", where, r, i);
            else if (i < H && got == v->poison && before == QUANT_FIRST_POISON)
                snprintf(res->message, sizeof res->message, "%snever wrote y[%d][%" PRId64 "]",
                         where, r, i);
            else if (i < H && got != before)
                snprintf(res->message, sizeof res->message,
                         "%sy[%d][%" PRId64 "] is 0x%02x in one run and 0x%02x in another", where,
                         r, i, got, before);
            else
                continue;
            ok = 0;
        }
        for (int64_t i = 0; ok && i < H; ++i)
            reference_y(v, c, d, r, i, affine, &yref[i], &unit[i]);
        char msg[400];
        if (ok && !lntune_quant_check_row(v->types.y, yref, unit, H, y + r * ys, v->qscale,
                                          scales + r, 0, msg, sizeof msg)) {
            snprintf(res->message, sizeof res->message, "%srow %d: %.300s", where, r, msg);
            ok = 0;
        }
    }
    free(yref);
    free(unit);
    return ok;
}

/*
 * Fusion: residual unchanged (row stride rs), residual_out (row stride os; NULL without one)
 * equal bit for bit to the rounded fp32 sum (a NaN for a NaN, whatever its payload), never
 * written between rows or in its guard zones (obase: the start of its poisoned buffer, olen
 * elements), and mean/rstd, when given, as the reference's within the tolerance.
 */
static int check_residual(const lntune_verifier *v, const h_case *c, int d,
                          const unsigned char *res, int64_t rs, const unsigned char *obase,
                          const unsigned char *out, int64_t os, int64_t olen, const float *mean,
                          const float *rstd, const char *where, lntune_verify_result *res_) {
    const int64_t H = c->H;
    const size_t re = v->rsize;
    const uint32_t poison = lntune_verify_poison(v->rtype);
    for (int r = 0; r < ROWS; ++r)
        if (memcmp(res + r * rs * (int64_t)re,
                   (const unsigned char *)c->rt[d] + r * H * (int64_t)re, (size_t)H * re) != 0) {
            snprintf(res_->message, sizeof res_->message, "%swrote into residual (row %d)", where,
                     r);
            return 0;
        }
    if (out) {
        const int64_t before = (int64_t)((out - obase) / (ptrdiff_t)re);
        for (int64_t i = 0; i < olen; ++i) {
            const int64_t at = i - before, r = at / os, col = at % os;
            const uint32_t bits = bits_at(obase, i, re);
            if (at >= 0 && r < ROWS && col < H) {
                const uint32_t want = bits_at(c->sum[d], r * H + col, re);
                const int nan = isnan(value_of(v->rtype, want));
                if (nan ? !isnan(value_of(v->rtype, bits)) : bits != want) {
                    snprintf(res_->message, sizeof res_->message,
                             "%s%s residual_out[%" PRId64 "][%" PRId64 "] = %.9g, want x + "
                             "residual = %.9g exactly",
                             where, bits == poison ? "never wrote" : "wrong", r, col,
                             value_of(v->rtype, bits), value_of(v->rtype, want));
                    return 0;
                }
            } else if (bits != poison) {
                snprintf(res_->message, sizeof res_->message, "%swrote residual_out %s", where,
                         at < 0      ? "before its first row"
                         : r >= ROWS ? "past its end"
                                     : "between rows");
                return 0;
            }
        }
    }
    for (int r = 0; mean && r < ROWS; ++r) {
        const double m = c->mean[d][r], rs_ = c->rstd[d][r];
        if (!isfinite(m) || !isfinite(rs_)) continue; /* a NaN/Inf row: y says NaN already */
        const double em = fabs((double)mean[r] - m) * rs_ / (fabs(m) * rs_ + 1.0);
        const double er = fabs((double)rstd[r] - rs_) / (rs_ > 0.0 ? rs_ : 1.0); /* Inf rows: 0 */
        if (!(em <= LNTUNE_VERIFY_TOLERANCE) || !(er <= LNTUNE_VERIFY_TOLERANCE)) {
            snprintf(res_->message, sizeof res_->message,
                     "%smean[%d] = %.9g, rstd[%d] = %.9g; reference %.9g, %.9g (errors %.3g, %.3g)",
                     where, r, (double)mean[r], r, (double)rstd[r], m, rs_, em, er);
            return 0;
        }
    }
    return 1;
}

/* Fills n elements of esize bytes (1, 2 or 4) at p with poison (lntune_verify_poison's value). */
static void poison_fill(unsigned char *p, int64_t n, size_t esize, uint32_t poison) {
    const uint16_t poison16 = (uint16_t)poison;
    const uint8_t poison8 = (uint8_t)poison;
    const void *src = esize == 4   ? (const void *)&poison
                      : esize == 2 ? (const void *)&poison16
                                   : &poison8;
    for (int64_t i = 0; i < n; ++i) memcpy(p + (size_t)i * esize, src, esize);
}

/*
 * Whether every row of the call just checked (a, its outputs in place) gets the same bits when it
 * comes in other calls: each row alone, then the two parts of each split of the rows, every
 * output poisoned again before each. A row's result must not depend on the rows that share its
 * call, its place in them, or how liblntune's threads split them (its thread count is the
 * machine's): batch invariance, which lntune_open_flags promises under
 * LNTUNE_OPEN_BATCH_INVARIANT. A rows=4 LayerNorm once took a second statistics pass for all
 * four rows when one of them needed it.
 */
static int check_batch_invariance(const lntune_verifier *v, lntune_kernel_fn kernel,
                                  const lntune_kernel_args *a, const char *where,
                                  lntune_verify_result *res) {
    const size_t ybytes = (size_t)(ROWS * a->y_stride) * v->ysize;
    const size_t obytes = a->residual_out ? (size_t)(ROWS * a->residual_out_stride) * v->rsize : 0;
    unsigned char *want = malloc(ybytes + obytes + 3 * ROWS * sizeof(float));
    if (!want) {
        snprintf(res->message, sizeof res->message, "%sout of memory", where);
        return 0;
    }
    float *want_stats = (float *)(want + ybytes + obytes);
    memcpy(want, a->y, ybytes);
    if (obytes) memcpy(want + ybytes, a->residual_out, obytes);
    if (a->mean) memcpy(want_stats, a->mean, ROWS * sizeof(float));
    if (a->rstd) memcpy(want_stats + ROWS, a->rstd, ROWS * sizeof(float));
    if (a->y_scales) memcpy(want_stats + 2 * ROWS, a->y_scales, ROWS * sizeof(float));
    int ok = 1;
    /* Patterns 0 .. ROWS-1: row p alone (the others stay poisoned); ROWS + k: [0, k+1), [k+1,
     * ROWS). Rows [r0, r1) are computed, by one call or by two split at row split. */
    for (int p = 0; ok && p < 2 * ROWS - 1; ++p) {
        poison_fill(a->y, ROWS * a->y_stride, v->ysize, v->poison);
        if (obytes)
            poison_fill(a->residual_out, ROWS * a->residual_out_stride, v->rsize,
                        lntune_verify_poison(v->rtype));
        if (a->mean) memset(a->mean, 0xff, ROWS * sizeof(float));
        if (a->rstd) memset(a->rstd, 0xff, ROWS * sizeof(float));
        if (a->y_scales) memset(a->y_scales, 0xff, ROWS * sizeof(float));
        const int r0 = p < ROWS ? p : 0, r1 = p < ROWS ? p + 1 : ROWS, split = p - ROWS + 1;
        int rc = p < ROWS ? kernel(a, r0, r1) : kernel(a, 0, split);
        if (p >= ROWS && rc == LNTUNE_KERNEL_OK) rc = kernel(a, split, ROWS);
        char how[48];
        if (p < ROWS)
            snprintf(how, sizeof how, "computed alone");
        else
            snprintf(how, sizeof how, "in a call split at row %d", split);
        if (rc != LNTUNE_KERNEL_OK) {
            snprintf(res->message, sizeof res->message, "%skernel returned %d for rows %s", where,
                     rc, how);
            ok = 0;
            break;
        }
        for (int r = r0; ok && r < r1; ++r) {
            const size_t yrow = (size_t)(r * a->y_stride) * v->ysize,
                         ylen = (size_t)a->H * v->ysize;
            const size_t orow = obytes ? (size_t)(r * a->residual_out_stride) * v->rsize : 0;
            const char *what =
                memcmp((const unsigned char *)a->y + yrow, want + yrow, ylen) != 0 ? "y"
                : obytes && memcmp((const unsigned char *)a->residual_out + orow,
                                   want + ybytes + orow, (size_t)a->H * v->rsize) != 0
                    ? "residual_out"
                : a->mean && memcmp(&a->mean[r], &want_stats[r], sizeof(float)) != 0        ? "mean"
                : a->rstd && memcmp(&a->rstd[r], &want_stats[ROWS + r], sizeof(float)) != 0 ? "rstd"
                : a->y_scales &&
                        memcmp(&a->y_scales[r], &want_stats[2 * ROWS + r], sizeof(float)) != 0
                    ? "scale"
                    : NULL;
            if (what) {
                snprintf(res->message, sizeof res->message,
                         "%srow %d's %s has other bits %s than in one call of all %d rows: a "
                         "row's result must not depend on the rows that share its call (batch "
                         "invariance)",
                         where, r, what, how, ROWS);
                ok = 0;
            }
        }
    }
    free(want);
    return ok;
}

/* One run: lays out data set d in layout l, runs the kernel, and checks every element. */
static int run_case(lntune_verifier *v, const h_case *c, int d, int l, lntune_kernel_fn kernel,
                    int affine, int threads, lntune_pool *pool, lntune_verify_result *res) {
    const int64_t H = c->H;
    const int64_t xs = l == 2 ? H + 5 : H, ys = l == 2 ? H + 3 : H;
    const int64_t shift = l == 1 ? 1 : 0; /* one element of each tensor's type */
    const size_t xe = v->xsize, ye = v->ysize;
    unsigned char *x = v->xbuf + (GUARD + shift) * (int64_t)xe;
    unsigned char *y = v->ybuf + (GUARD + shift) * (int64_t)ye;
    const int64_t ylen = GUARD + shift + ROWS * ys + GUARD; /* poisoned elements of ybuf */
    poison_fill(v->ybuf, ylen, ye, v->poison);
    const unsigned char *xt = c->xt[d];
    for (int r = 0; r < ROWS; ++r)
        memcpy(x + r * xs * (int64_t)xe, xt + r * H * (int64_t)xe, (size_t)H * xe);

    lntune_kernel_args a = {0};
    a.rows = ROWS;
    a.H = H;
    a.x_stride = xs;
    a.y_stride = ys;
    a.x = x;
    a.y = y;
    a.eps = EPS;
    /* Fusion: residual (stride H + 7) and residual_out (H + 2) in their own poisoned buffers. */
    const int64_t rs = l == 2 ? H + 7 : H, os = l == 2 ? H + 2 : H;
    const int64_t olen = GUARD + shift + ROWS * os + GUARD;
    unsigned char *resid = v->rbuf + (GUARD + shift) * (int64_t)v->rsize;
    unsigned char *out = v->obuf + (GUARD + shift) * (int64_t)v->rsize;
    float stats[2 * ROWS];
    if (v->fusion) {
        const unsigned char *rt = c->rt[d];
        for (int r = 0; r < ROWS; ++r)
            memcpy(resid + r * rs * (int64_t)v->rsize, rt + r * H * (int64_t)v->rsize,
                   (size_t)H * v->rsize);
        a.residual = resid;
        a.residual_stride = rs;
        if (v->fusion == LNTUNE_FUSION_RESIDUAL_OUT) {
            poison_fill(v->obuf, olen, v->rsize, lntune_verify_poison(v->rtype));
            a.residual_out = out;
            a.residual_out_stride = os;
        }
        if (l == 0) { /* mean and rstd, poisoned */
            for (int i = 0; i < 2 * ROWS; ++i) stats[i] = NAN;
            a.mean = stats;
            a.rstd = stats + ROWS;
        }
    }
    const int ln = v->op == LNTUNE_OP_LAYERNORM;
    if (affine) {
        a.gamma = c->gamma_t;
        a.beta = ln ? c->beta_t : NULL;
        a.weight_offset = case_offset(affine, d);
    }
    const char *const layout = l == 0   ? "contiguous"
                               : l == 1 ? v->misaligned
                               : v->fusion
                                   ? "strides H+5, H+3, H+7, H+2 (x, y, residual, residual_out)"
                                   : "row strides H+5 (x), H+3 (y)";
    const char *const *names = v->fusion                        ? residual_sets
                               : v->types.x == LNTUNE_TYPE_BF16 ? dataset_names_bf16
                                                                : dataset_names;
    const char *where_fmt = "H=%" PRId64 ", %s, %s, seed %" PRIu64 ": ";
    char where[200];
    snprintf(where, sizeof where, where_fmt, H, names[d], layout, v->seed);
    lntune_heartbeat(-1); /* a heartbeat for the worker's time limit */
    const int quant = lntune_type_quantized(v->types.y);
    float *scales = v->scales + 1; /* a guard on either side */
    if (quant) {                   /* the first of two runs (see ycopy) */
        a.y_scale = v->qscale;
        if (lntune_type_row_scaled(v->types.y)) a.y_scales = scales;
        poison_fill(v->ybuf, ylen, 1, QUANT_FIRST_POISON);
        const int rc = lntune_pool_run_kernel(pool, kernel, &a, threads);
        if (rc != LNTUNE_KERNEL_OK) {
            snprintf(res->message, sizeof res->message, "%skernel returned %d", where, rc);
            return 0;
        }
        memcpy(v->ycopy, v->ybuf, (size_t)ylen);
        poison_fill(v->ybuf, ylen, 1, v->poison);
        for (int i = 0; i < ROWS + 2; ++i) v->scales[i] = NAN;
    }
    int rc = lntune_pool_run_kernel(pool, kernel, &a, threads);
    res->cases++;
    if (rc != LNTUNE_KERNEL_OK) {
        snprintf(res->message, sizeof res->message, "%skernel returned %d", where, rc);
        return 0;
    }
    /* The guard zones first: an overrun (say fp32 written to a 16-bit y) also garbles y. */
    for (int64_t i = 0; i < GUARD + shift; ++i)
        if (!is_poison(v, v->ybuf, i)) {
            snprintf(res->message, sizeof res->message, "%swrote before y", where);
            return 0;
        }
    for (int64_t i = ROWS * ys; i < ylen - GUARD - shift; ++i)
        if (!is_poison(v, y, i)) {
            snprintf(res->message, sizeof res->message, "%swrote past the end of y", where);
            return 0;
        }
    if (v->fusion && !check_residual(v, c, d, resid, rs, v->obuf, a.residual_out ? out : NULL, os,
                                     olen, a.mean, a.rstd, where, res))
        return 0;
    if (quant && !(isnan(v->scales[0]) && isnan(v->scales[ROWS + 1]))) {
        snprintf(res->message, sizeof res->message, "%swrote outside the rows' scales", where);
        return 0;
    }
    int ok;
    switch (quant ? -1 : v->types.y) { /* a loop for each type */
    case -1:
        ok = check_quant_rows(v, c, d, x, xs, y, v->ycopy + (y - v->ybuf), ys, affine, scales,
                              where, res);
        break;
    case LNTUNE_TYPE_F16:
        ok = check_rows(v, c, d, x, xs, y, ys, affine, where, res, LNTUNE_TYPE_F16);
        break;
    case LNTUNE_TYPE_BF16:
        ok = check_rows(v, c, d, x, xs, y, ys, affine, where, res, LNTUNE_TYPE_BF16);
        break;
    default:
        ok = check_rows(v, c, d, x, xs, y, ys, affine, where, res, LNTUNE_TYPE_F32);
        break;
    }
    /* In every layout, where a row's alignment decides where a loop starts (non-temporal
     * stores); past H = 4097 in the contiguous one only, which keeps the check to a third of a
     * variant's verification (the rows of 12288 and 65536 elements repeated 13 times in each
     * layout doubled it). */
    if (!ok) return 0;
    return l != 0 && H > 4097 ? 1 : check_batch_invariance(v, kernel, &a, where, res);
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
    if (lntune_type_quantized(v->types.y) &&
        !lntune_quant_probes(v->op, v->types, v->fusion, kernel, affine, fixed_h, threads, pool,
                             res))
        return LNTUNE_EVERIFY;
    return LNTUNE_OK;
}
