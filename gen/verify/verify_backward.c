/*
 * verify_backward.c - the adversarial suite for backward kernels and the comparison of any
 * backward result with the float64 reference gradients (error units in verify_backward.h).
 */
#include "verify_backward.h"

#include "fusion.h"
#include "half_ref.h"
#include "lntune.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 7, GUARD = 64, DATASETS = 5, LAYOUTS = 3 };
static const float EPS = 1e-5f;

static const char *const dataset_names[DATASETS] = {"randn", "1000+randn", "1+1e-3*randn",
                                                    "constant rows", "NaN/Inf rows"};
static const char *const layout_names[LAYOUTS] = {"contiguous", "misaligned by one element",
                                                  "strided"};

static inline uint32_t bits_at(const void *p, int64_t i, size_t size) {
    if (size == 4) {
        uint32_t u;
        memcpy(&u, (const unsigned char *)p + 4 * i, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, (const unsigned char *)p + 2 * i, 2);
    return h;
}

static void poison(void *p, int type, size_t n) {
    const uint32_t bits = lntune_verify_poison(type);
    for (size_t i = 0; i < n; ++i) {
        if (type == LNTUNE_TYPE_F32)
            memcpy((unsigned char *)p + 4 * i, &bits, 4);
        else
            ((uint16_t *)p)[i] = (uint16_t)bits;
    }
}

/* Checks one output element; 1 if acceptable. Non-finite references need a non-finite value. */
static int element(int type, double ref, const void *p, int64_t i, double unit, double *err) {
    const uint32_t bits = bits_at(p, i, lntune_type_size(type));
    *err = 0.0;
    if (bits == lntune_verify_poison(type)) return -1;
    const double got = lntune_ref_load(type, p, i);
    if (!isfinite(ref)) return !isfinite(got);
    return lntune_verify_element(type, ref, got, unit, err);
}

static int fail_at(lntune_verify_result *res, const char *what, const char *tensor, int64_t r,
                   int64_t i, double ref, double got, int unwritten) {
    if (unwritten)
        snprintf(res->message, sizeof res->message, "%s: %s[%" PRId64 "][%" PRId64 "] not written",
                 what, tensor, r, i);
    else
        snprintf(res->message, sizeof res->message,
                 "%s: %s[%" PRId64 "][%" PRId64 "] = %.9g, reference %.9g", what, tensor, r, i, got,
                 ref);
    return LNTUNE_EVERIFY;
}

int lntune_backward_compare(const lntune_backward_problem *p, const void *dx, const void *dgamma,
                            const void *dbeta, int threads, const char *what,
                            lntune_verify_result *res) {
    const int64_t H = p->H;
    const int xt = p->types.x, pt = p->types.params;
    const size_t xe = lntune_type_size(xt);
    const int LN = p->op == LNTUNE_OP_LAYERNORM;
    double *buf = malloc((size_t)H * 10 * sizeof *buf);
    float *rowf = malloc((size_t)H * sizeof *rowf);
    if (!buf || !rowf) {
        free(buf);
        free(rowf);
        snprintf(res->message, sizeof res->message, "%s: out of memory", what);
        return LNTUNE_ENOMEM;
    }
    double *x = buf, *dy = x + H, *g = dy + H, *ref = g + H, *dg = ref + H, *db = dg + H;
    double *dgu = db + H, *dbu = dgu + H, *z = dbu + H, *dres = z + H;
    memset(dg, 0, (size_t)H * 4 * sizeof *dg); /* dg, db, dgu, dbu */
    for (int64_t i = 0; p->gamma && i < H; ++i) g[i] = lntune_ref_load(pt, p->gamma, i);
    int rc = LNTUNE_OK;
    for (int64_t r = 0; r < p->rows && rc == LNTUNE_OK; ++r) {
        const unsigned char *xr = (const unsigned char *)p->x + (size_t)(r * p->x_stride) * xe;
        const unsigned char *dyr = (const unsigned char *)p->dy + (size_t)(r * p->dy_stride) * xe;
        for (int64_t i = 0; i < H; ++i) {
            x[i] = lntune_ref_load(xt, xr, i);
            dy[i] = lntune_ref_load(xt, dyr, i);
            rowf[i] = (float)x[i]; /* exact: x is fp32 or narrower */
        }
        const unsigned char *drr =
            p->dres ? (const unsigned char *)p->dres + (size_t)(r * p->dres_stride) * xe : NULL;
        for (int64_t i = 0; drr && i < H; ++i) dres[i] = lntune_ref_load(xt, drr, i);
        double m = 0.0, rs;
        if (p->rstd) { /* the fp32 statistics the kernel was given */
            m = LN ? p->mean[r] : 0.0;
            rs = p->rstd[r];
        } else {
            lntune_reference_row(p->op, rowf, H, p->eps, z, &m, &rs);
        }
        lntune_reference_backward_row(p->op, x, dy, drr ? dres : NULL, p->gamma ? g : NULL, H, m,
                                      rs, ref, dg, db);
        double a1 = 0.0, a2 = 0.0;
        const double shift = fabs(m) * rs + 1.0;
        for (int64_t i = 0; i < H; ++i) {
            const double gi = fabs(dy[i] * (p->gamma ? g[i] : 1.0)), xh = fabs((x[i] - m) * rs);
            a1 += gi;
            a2 += gi * (xh + shift);
            dgu[i] += fabs(dy[i]) * (xh + shift);
            dbu[i] += fabs(dy[i]);
        }
        a1 /= (double)H;
        a2 /= (double)H;
        const unsigned char *dxr = (const unsigned char *)dx + (size_t)(r * p->dx_stride) * xe;
        for (int64_t i = 0; i < H; ++i) {
            const double gi = fabs(dy[i] * (p->gamma ? g[i] : 1.0)), xh = fabs((x[i] - m) * rs);
            const double unit =
                rs * (gi + (LN ? a1 : 0.0) + (2.0 * xh + shift) * a2) + (drr ? fabs(dres[i]) : 0.0);
            double err;
            const int ok = element(xt, ref[i], dxr, i, unit, &err);
            if (ok != 1) {
                rc = fail_at(res, what, "dx", r, i, ref[i], lntune_ref_load(xt, dxr, i), ok < 0);
                break;
            }
            if (err > res->max_error) {
                res->max_error = err;
                res->worst_h = H;
                snprintf(res->worst, sizeof res->worst, "%s: dx[%" PRId64 "][%" PRId64 "]", what, r,
                         i);
            }
        }
    }
    /* dgamma/dbeta: (16 + n) u of the magnitudes, through the 16 u of lntune_verify_element. */
    const double scale = (16.0 + (double)p->rows + (double)threads) / 16.0;
    for (int t = 0; t < 2 && rc == LNTUNE_OK; ++t) {
        const void *out = t == 0 ? dgamma : dbeta;
        const double *want = t == 0 ? dg : db, *unit = t == 0 ? dgu : dbu;
        for (int64_t i = 0; out && i < H; ++i) {
            double err;
            const int ok = element(pt, want[i], out, i, unit[i] * scale, &err);
            if (ok != 1) {
                rc = fail_at(res, what, t == 0 ? "dgamma" : "dbeta", 0, i, want[i],
                             lntune_ref_load(pt, out, i), ok < 0);
                break;
            }
            if (err > res->max_error) {
                res->max_error = err;
                res->worst_h = H;
                snprintf(res->worst, sizeof res->worst, "%s: %s[%" PRId64 "]", what,
                         t == 0 ? "dgamma" : "dbeta", i);
            }
        }
    }
    free(buf);
    free(rowf);
    return rc;
}

/* ---- the suite ---- */

typedef struct {
    int64_t H;
    void *x[DATASETS], *dy[DATASETS]; /* ROWS x H in the x type */
    void *dres[DATASETS];             /* fused: dresidual_out, ROWS x H in the x type; else NULL */
    float *mean[DATASETS], *rstd[DATASETS];
    void *gamma; /* H in the params type */
} bcase;

struct lntune_backward_verifier {
    lntune_op op;
    lntune_types types;
    int fusion; /* LNTUNE_FUSION_NONE or _RESIDUAL */
    uint64_t seed, rng;
    size_t nh;
    bcase *cases;
};

static uint64_t next_u64(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dULL;
}

static double randn(uint64_t *s) {
    const double u1 = ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* n values of type from double v(i), rounded to nearest even. */
static void *typed(int type, size_t n) {
    return malloc(n * lntune_type_size(type));
}

static int fill(lntune_backward_verifier *v, bcase *c, int d) {
    const int64_t H = c->H;
    const int xt = v->types.x;
    /* bf16 keeps 8 bits: the spreads are ten times wider there, as in verify.c */
    const int bf16 = xt == LNTUNE_TYPE_BF16;
    const double spread1000 = bf16 ? 10.0 : 1.0, spread1 = bf16 ? 1e-2 : 1e-3;
    float *xf = malloc((size_t)(ROWS * H) * sizeof *xf);
    double *z = malloc((size_t)H * sizeof *z);
    c->x[d] = typed(xt, (size_t)(ROWS * H));
    c->dy[d] = typed(xt, (size_t)(ROWS * H));
    if (v->fusion) c->dres[d] = typed(xt, (size_t)(ROWS * H));
    c->mean[d] = malloc(ROWS * sizeof(float));
    c->rstd[d] = malloc(ROWS * sizeof(float));
    int ok =
        xf && z && c->x[d] && c->dy[d] && c->mean[d] && c->rstd[d] && (!v->fusion || c->dres[d]);
    /* dresidual_out: randn, or far larger than the norm's gradient (~1) in the large-mean set,
     * where an fp16 dx still holds it (3000 * a few sigma < 65504) */
    const double dres_scale = d == 1 ? 3000.0 : 1.0;
    for (int64_t i = 0; ok && v->fusion && i < ROWS * H; ++i)
        lntune_ref_store(xt, c->dres[d], i, (float)(dres_scale * randn(&v->rng)));
    for (int r = 0; ok && r < ROWS; ++r) {
        const double constant = 100.0 * randn(&v->rng);
        for (int64_t i = 0; i < H; ++i) {
            const double gsn = randn(&v->rng);
            const double val = d == 1   ? 1000.0 + spread1000 * gsn
                               : d == 2 ? 1.0 + spread1 * gsn
                               : d == 3 ? constant
                                        : gsn;
            lntune_ref_store(xt, c->x[d], r * H + i, (float)val);
            lntune_ref_store(xt, c->dy[d], r * H + i, (float)randn(&v->rng));
        }
    }
    if (ok && d == 4) { /* row 1: a NaN in x; row 3: +Inf in dy; row 5: -Inf first in x */
        lntune_ref_store(xt, c->x[d], 1 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H), NAN);
        lntune_ref_store(xt, c->dy[d], 3 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H),
                         INFINITY);
        lntune_ref_store(xt, c->x[d], 5 * H, -INFINITY);
        if (v->fusion) { /* row 2: a NaN in dresidual_out; row 6: -Inf last in it */
            lntune_ref_store(xt, c->dres[d], 2 * H + (int64_t)(next_u64(&v->rng) % (uint64_t)H),
                             NAN);
            lntune_ref_store(xt, c->dres[d], 6 * H + H - 1, -INFINITY);
        }
    }
    for (int r = 0; ok && r < ROWS; ++r) { /* the forward's statistics, as fp32 */
        for (int64_t i = 0; i < H; ++i) xf[i] = (float)lntune_ref_load(xt, c->x[d], r * H + i);
        double m, rs;
        lntune_reference_row(v->op, xf, H, EPS, z, &m, &rs);
        c->mean[d][r] = (float)m;
        c->rstd[d][r] = (float)rs;
    }
    free(xf);
    free(z);
    return ok;
}

int lntune_backward_verifier_create(lntune_op op, lntune_types types, const int64_t *hs, size_t nh,
                                    uint64_t seed, lntune_backward_verifier **out) {
    return lntune_backward_verifier_create_fused(op, types, LNTUNE_FUSION_NONE, hs, nh, seed, out);
}

int lntune_backward_verifier_create_fused(lntune_op op, lntune_types types, int fusion,
                                          const int64_t *hs, size_t nh, uint64_t seed,
                                          lntune_backward_verifier **out) {
    *out = NULL;
    if (types.x >= LNTUNE_TYPE_COUNT || types.params >= LNTUNE_TYPE_COUNT) return LNTUNE_EINVAL;
    if (fusion != LNTUNE_FUSION_NONE && fusion != LNTUNE_FUSION_RESIDUAL) return LNTUNE_EINVAL;
    for (size_t i = 0; i < nh; ++i)
        if (hs[i] < 1 || hs[i] > (INT64_C(1) << 26)) return LNTUNE_EINVAL;
    lntune_backward_verifier *v = calloc(1, sizeof *v);
    if (!v || !(v->cases = calloc(nh ? nh : 1, sizeof *v->cases))) {
        free(v);
        return LNTUNE_ENOMEM;
    }
    v->op = op;
    v->types = types;
    v->types.y = types.x;
    v->fusion = fusion;
    v->seed = seed ? seed : ((uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL) | 1;
    v->rng = v->seed;
    v->nh = nh;
    for (size_t k = 0; k < nh; ++k) {
        bcase *c = &v->cases[k];
        c->H = hs[k];
        c->gamma = typed(types.params, (size_t)c->H);
        int ok = c->gamma != NULL;
        for (int64_t i = 0; ok && i < c->H; ++i)
            lntune_ref_store(types.params, c->gamma, i, (float)(1.0 + 0.5 * randn(&v->rng)));
        for (int d = 0; ok && d < DATASETS; ++d) ok = fill(v, c, d);
        if (!ok) {
            lntune_backward_verifier_destroy(v);
            return LNTUNE_ENOMEM;
        }
    }
    *out = v;
    return LNTUNE_OK;
}

lntune_types lntune_backward_verifier_types(const lntune_backward_verifier *v) {
    return v ? v->types : (lntune_types){0};
}

void lntune_backward_verifier_destroy(lntune_backward_verifier *v) {
    if (!v) return;
    for (size_t k = 0; v->cases && k < v->nh; ++k) {
        bcase *c = &v->cases[k];
        free(c->gamma);
        for (int d = 0; d < DATASETS; ++d) {
            free(c->x[d]);
            free(c->dy[d]);
            free(c->dres[d]);
            free(c->mean[d]);
            free(c->rstd[d]);
        }
    }
    free(v->cases);
    free(v);
}

/* Copies ROWS rows of H elements of size e from src (contiguous) to dst at stride. */
static void lay_out(void *dst, const void *src, int64_t H, int64_t stride, size_t e) {
    for (int r = 0; r < ROWS; ++r)
        memcpy((unsigned char *)dst + (size_t)(r * stride) * e,
               (const unsigned char *)src + (size_t)(r * H) * e, (size_t)H * e);
}

/* Whether every element of the dx buffer outside the rows still holds poison. */
static int guards_intact(const unsigned char *buf, size_t total, const unsigned char *dx, int64_t H,
                         int64_t stride, int type) {
    const size_t e = lntune_type_size(type);
    const uint32_t p = lntune_verify_poison(type);
    for (size_t i = 0; i < total; ++i) {
        const int64_t at = (int64_t)i - (int64_t)((dx - buf) / (ptrdiff_t)e);
        const int inside = at >= 0 && at < ROWS * stride && at % stride < H;
        if (!inside && bits_at(buf, (int64_t)i, e) != p) return 0;
    }
    return 1;
}

static int run_case(lntune_backward_verifier *v, const bcase *c, int d, int l, int saved,
                    int with_gamma, lntune_backward_kernel_fn kernel, int threads,
                    lntune_pool *pool, lntune_verify_result *res) {
    const int64_t H = c->H;
    const int xt = v->types.x, pt = v->types.params;
    const size_t e = lntune_type_size(xt);
    const int64_t xs = l == 2 ? H + 3 : H, dys = l == 2 ? H + 5 : H, dxs = l == 2 ? H + 7 : H;
    const int64_t drs = l == 2 ? H + 9 : H;
    const int64_t off = l == 1 ? 1 : 0;
    const size_t dx_total = (size_t)(2 * GUARD + ROWS * dxs + off);
    const int LN = v->op == LNTUNE_OP_LAYERNORM;
    threads = lntune_backward_threads(pool, threads, ROWS);
    unsigned char *xb = malloc((size_t)(ROWS * xs + off) * e);
    unsigned char *dyb = malloc((size_t)(ROWS * dys + off) * e);
    unsigned char *dxb = malloc(dx_total * e);
    unsigned char *drb = c->dres[d] ? malloc((size_t)(ROWS * drs + off) * e) : NULL;
    float *parts = malloc((size_t)(2 * (threads * H + 2 * GUARD)) * sizeof(float));
    unsigned char *outs = malloc((size_t)(2 * H) * lntune_type_size(pt));
    int rc = LNTUNE_ENOMEM;
    if (!xb || !dyb || !dxb || !parts || !outs || (c->dres[d] && !drb)) goto done;
    if (drb) lay_out(drb + off * e, c->dres[d], H, drs, e);
    lay_out(xb + off * e, c->x[d], H, xs, e);
    lay_out(dyb + off * e, c->dy[d], H, dys, e);
    poison(dxb, xt, dx_total);
    /* partials: [GUARD | dgamma parts | GUARD][GUARD | dbeta parts | GUARD], guards poisoned */
    const size_t span = (size_t)(threads * H + 2 * GUARD);
    poison(parts, LNTUNE_TYPE_F32, 2 * span);
    float *dgp = parts + GUARD, *dbp = LN ? parts + span + GUARD : NULL;
    unsigned char *dg = outs, *db = outs + (size_t)H * lntune_type_size(pt);
    poison(outs, pt, (size_t)(2 * H));
    unsigned char *dx = dxb + (size_t)(GUARD + off) * e;
    lntune_backward_kernel_args ka = {ROWS,
                                      H,
                                      xs,
                                      dys,
                                      dxs,
                                      xb + off * e,
                                      dyb + off * e,
                                      with_gamma ? c->gamma : NULL,
                                      saved ? c->mean[d] : NULL,
                                      saved ? c->rstd[d] : NULL,
                                      dx,
                                      EPS,
                                      drb ? drb + off * e : NULL,
                                      drb ? drs : 0};
    char what[256];
    snprintf(what, sizeof what,
             "H=%" PRId64 ", %s, %s, %s statistics, %s%s, %d thread(s), seed %" PRIu64, H,
             dataset_names[d], layout_names[l], saved ? "saved" : "recomputed",
             with_gamma ? "gamma" : "no gamma", drb ? ", dresidual_out" : "", threads, v->seed);
    const int krc = lntune_backward_run(pool, kernel, &ka, threads, dgp, dbp);
    res->cases++;
    if (krc != LNTUNE_KERNEL_OK) {
        snprintf(res->message, sizeof res->message, "%s: the kernel returned %d", what, krc);
        rc = LNTUNE_EVERIFY;
        goto done;
    }
    for (int t = 0; t < (LN ? 2 : 1); ++t) {
        const float *g0 = parts + (size_t)t * span, *g1 = g0 + GUARD + threads * H;
        for (int i = 0; i < GUARD; ++i)
            if (bits_at(g0, i, 4) != lntune_verify_poison(LNTUNE_TYPE_F32) ||
                bits_at(g1, i, 4) != lntune_verify_poison(LNTUNE_TYPE_F32)) {
                snprintf(res->message, sizeof res->message, "%s: wrote outside its %s partials",
                         what, t ? "dbeta" : "dgamma");
                rc = LNTUNE_EVERIFY;
                goto done;
            }
    }
    lntune_backward_reduce(dgp, threads, H, dg, pt);
    if (LN) lntune_backward_reduce(dbp, threads, H, db, pt);
    if (!guards_intact(dxb, dx_total, dx, H, dxs, xt)) {
        snprintf(res->message, sizeof res->message, "%s: wrote outside the rows of dx", what);
        rc = LNTUNE_EVERIFY;
        goto done;
    }
    lntune_backward_problem p = {v->op, v->types, ROWS, H,       ka.x,    ka.dy, ka.gamma,
                                 xs,    dys,      dxs,  ka.mean, ka.rstd, EPS,   ka.dresidual_out,
                                 drs};
    rc = lntune_backward_compare(&p, dx, dg, LN ? db : NULL, threads, what, res);
done:
    if (rc == LNTUNE_ENOMEM) snprintf(res->message, sizeof res->message, "out of memory");
    free(xb);
    free(dyb);
    free(dxb);
    free(drb);
    free(parts);
    free(outs);
    return rc;
}

int lntune_backward_verifier_check(lntune_backward_verifier *v, lntune_backward_kernel_fn kernel,
                                   int64_t fixed_h, int threads, lntune_pool *pool,
                                   lntune_verify_result *res) {
    memset(res, 0, sizeof *res);
    int ran = 0;
    for (size_t k = 0; k < v->nh; ++k) {
        const bcase *c = &v->cases[k];
        if (fixed_h && c->H != fixed_h) continue;
        ran = 1;
        for (int d = 0; d < DATASETS; ++d)
            for (int l = 0; l < LAYOUTS; ++l)
                for (int saved = 0; saved < 2; ++saved) {
                    /* without gamma in the strided layout only: its code path is the same */
                    for (int g = 1; g >= (l == 2 ? 0 : 1); --g) {
                        int rc = run_case(v, c, d, l, saved, g, kernel, threads, pool, res);
                        if (rc != LNTUNE_OK) return rc;
                    }
                }
    }
    if (!ran) {
        snprintf(res->message, sizeof res->message, "no H of the verifier is %" PRId64, fixed_h);
        return LNTUNE_EINVAL;
    }
    return LNTUNE_OK;
}
