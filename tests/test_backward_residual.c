/*
 * test_backward_residual.c - the backward of the fused Add & Norm (s = x + residual, y = Norm(s),
 * residual_out = s): the float64 reference's dx with dresidual_out is the derivative of the
 * forward with respect to x and to residual alike (finite differences through both), the
 * runtime's built-ins match the reference for every dtype tuple with dresidual_out (strided,
 * misaligned, in place), the argument checks cover the new fields, and the verifier fails a
 * kernel that ignores dresidual_out or does not take it.
 */
#include "backward_check.h"
#include "check.h"
#include "fusion.h"
#include "randn.h"
#include "lntune.h"
#include "pool.h"
#include "reference.h"
#include "verify_backward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x0ddba11cafef00dULL;

enum { FH = 29 };

/* Where the fused forward is differentiated: x, residual, gamma and the loss's c and e. */
typedef struct {
    int op;
    double x[FH], res[FH], gamma[FH], c[FH], e[FH], eps;
} point;

/* L = sum c_i y_i + sum e_i s_i: y = Norm(s) * gamma + beta feeds the loss through c, and
 * s = x + residual (residual_out) feeds the next block, whose gradient at s is e. */
static double loss(const void *at) {
    const point *p = at;
    double s[FH], m = 0.0, ss = 0.0, l = 0.0;
    for (int i = 0; i < FH; ++i) s[i] = p->x[i] + p->res[i];
    if (p->op == LNTUNE_OP_LAYERNORM) {
        for (int i = 0; i < FH; ++i) m += s[i];
        m /= FH;
    }
    for (int i = 0; i < FH; ++i) ss += (s[i] - m) * (s[i] - m);
    const double r = 1.0 / sqrt(ss / FH + p->eps);
    for (int i = 0; i < FH; ++i)
        l += p->c[i] * ((s[i] - m) * r * p->gamma[i] + 0.25) + p->e[i] * s[i];
    return l;
}

/* Central differences in x and in residual both give the reference's dx with dresidual_out. */
static void finite_differences(void) {
    const double h = 1e-5;
    for (int op = 0; op < 2; ++op) {
        point p = {.op = op, .eps = 1e-5};
        double s[FH], dx[FH];
        float sf[FH];
        for (int i = 0; i < FH; ++i) {
            p.x[i] = 2.0 + test_randn(&rng);
            p.res[i] = 0.5 * test_randn(&rng);
            p.gamma[i] = 1.0 + 0.5 * test_randn(&rng);
            p.c[i] = test_randn(&rng);
            p.e[i] = 3.0 * test_randn(&rng);
            sf[i] = (float)(p.x[i] + p.res[i]);
        }
        for (int i = 0; i < FH; ++i) { /* x + residual exact in fp32, so the statistics are s's */
            p.x[i] = sf[i] - p.res[i];
            s[i] = sf[i];
        }
        double z[FH], m, rs;
        lntune_reference_row((lntune_op)op, sf, FH, p.eps, z, &m, &rs);
        /* dy is c, dresidual_out is e */
        lntune_reference_backward_row((lntune_op)op, s, p.c, p.e, p.gamma, FH, m, rs, dx, NULL,
                                      NULL);
        double worst = 0.0, worst_plain = 0.0;
        for (int i = 0; i < FH; ++i) {
            const double fdx = backward_central(loss, &p, p.x, i, h);
            const double fdr = backward_central(loss, &p, p.res, i, h);
            worst = fmax(worst, fmax(fabs(fdx - dx[i]), fabs(fdr - dx[i])));
            worst_plain = fmax(worst_plain, fabs(fdx - (dx[i] - p.e[i])));
        }
        CHECK(worst < 1e-6,
              "%s: the reference dx with dresidual_out is the central difference of the fused "
              "forward in x and in residual (worst difference %.2e)",
              op ? "RMSNorm" : "LayerNorm", worst);
        CHECK(worst_plain > 1e-2,
              "%s: ... and without dresidual_out it is not (difference %.2e): the check can fail",
              op ? "RMSNorm" : "LayerNorm", worst_plain);
    }
}

static const struct {
    int64_t rows, H, ds; /* ds: dresidual_out's stride */
    int saved;           /* the forward's statistics given */
} cases[] = {
    {5, 1, 1, 1},         /* H = 1 */
    {3, 1027, 1027, 0},   /* odd H, recomputed */
    {7, 768, 777, 1},     /* strided */
    {128, 4097, 4100, 1}, /* on the pool */
};
/* For the line of each op and type tuple: its kind of backward, and what the cases cover. */
static const char kind[] = "fused residual backward";
static const char covered[] =
    "built-in dx = the norm's gradient + dresidual_out (H=1, odd H, strided, "
    "misaligned, pool, in place)";

/*
 * The runtime for op and types on case k, with dresidual_out at stride ds (offset by one
 * element: misaligned for fp32 vectors), against the reference; then in place (dx is
 * dresidual_out's buffer), which must give the same bits. Returns failures.
 */
static int runtime_case(lntune *ctx, int op, int xt, int pt, size_t k) {
    const int64_t rows = cases[k].rows, H = cases[k].H, ds = cases[k].ds;
    const int saved = cases[k].saved;
    const size_t n = (size_t)(rows * H), xe = xt == LNTUNE_TYPE_F32 ? 4 : 2;
    const size_t pe = pt == LNTUNE_TYPE_F32 ? 4 : 2, dn = (size_t)(rows * ds + 1);
    void *x = backward_values(&rng, xt, n, op == 0 ? 50.0 : 0.0, 1.0);
    void *dy = backward_values(&rng, xt, n, 0, 1);
    unsigned char *dres = backward_values(&rng, xt, dn, 0, 4.0);
    void *gamma = backward_values(&rng, pt, (size_t)H, 1.0, 0.5);
    void *dx = malloc(n * xe), *dgamma = malloc((size_t)H * pe), *dbeta = malloc((size_t)H * pe);
    unsigned char *inplace = malloc(dn * xe);
    float *mean = malloc((size_t)rows * sizeof *mean), *rstd = malloc((size_t)rows * sizeof *rstd);
    memset(dx, 0xff, n * xe);
    memcpy(inplace, dres, dn * xe);
    /* saved: the statistics of the runtime's forward of s = x */
    lntune_backward_args a;
    backward_args(&a, ctx, op, xt, pt, rows, H, saved, x, dy, gamma, dx, dgamma, dbeta, mean, rstd);
    a.dresidual_out = dres + xe, a.dresidual_out_stride = ds == H ? 0 : ds;
    int rc = backward_call(ctx, op, &a);
    int failures = 0;
    char what[200];
    snprintf(what, sizeof what, "%s %s/%s rows=%lld H=%lld dresidual_out stride %lld, %s",
             op ? "rmsnorm" : "layernorm", lntune_type_name(xt), lntune_type_name(pt),
             (long long)rows, (long long)H, (long long)ds, saved ? "saved stats" : "recomputed");
    if (rc != LNTUNE_OK) {
        printf("FAIL %s: rc %d %s\n", what, rc, lntune_errmsg(ctx));
        failures++;
    } else {
        failures += backward_differs(&a, op, mean, dres + xe, ds, what);
        /* in place: dx = dresidual_out's buffer, same stride */
        lntune_backward_args b = a;
        b.dresidual_out = inplace + xe, b.dx = inplace + xe, b.dx_stride = ds;
        EXPECT(backward_call(ctx, op, &b) == LNTUNE_OK, "in place");
        for (int64_t r = 0; r < rows; ++r)
            if (memcmp(inplace + (size_t)(1 + r * ds) * xe,
                       (unsigned char *)dx + (size_t)(r * H) * xe, (size_t)H * xe) != 0) {
                printf("FAIL %s: in place (dx = dresidual_out) differs in row %lld\n", what,
                       (long long)r);
                failures++;
                break;
            }
    }
    free(x), free(dy), free(dres), free(gamma), free(dx), free(dgamma), free(dbeta);
    free(inplace), free(mean), free(rstd);
    return failures;
}

static void argument_checks(lntune *ctx) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dy[8] = {1, -1}, dx[8], dres[8] = {0};
    lntune_backward_args a = {0};
    a.rows = 2, a.H = 4, a.x = x, a.dy = dy, a.dx = dx, a.dresidual_out = dres;
    CHECK(lntune_layernorm_backward(ctx, &a) == LNTUNE_OK, "dresidual_out with stride 0 (= H)");
    lntune_backward_args b = a;
    b.dresidual_out_stride = 3;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_EINVAL &&
              strstr(lntune_errmsg(ctx), "dresidual_out_stride"),
          "dresidual_out_stride < H: EINVAL (%s)", lntune_errmsg(ctx));
    b = a, b.dresidual_out = NULL, b.dresidual_out_stride = 2;
    CHECK(lntune_rmsnorm_backward(ctx, &b) == LNTUNE_EINVAL,
          "a bad dresidual_out_stride is refused without dresidual_out too");
    b = a, b.rows = INT64_C(1) << 40, b.dresidual_out_stride = INT64_C(1) << 30;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_EOVERFLOW,
          "rows x dresidual_out_stride past memory: EOVERFLOW (%s)", lntune_errmsg(ctx));
}

/* ---- kernels the fused verifier must accept or refuse ---- */

static int ignore_dres; /* 1: a kernel that leaves dresidual_out out of dx */
static int scalar_kernel(const lntune_backward_kernel_args *a, int64_t b, int64_t e, float *dg,
                         float *db) {
    const int64_t H = a->H;
    if (!a->dresidual_out) return LNTUNE_KERNEL_EUNSUPPORTED;
    for (int64_t r = b; r < e; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        const float *dy = (const float *)a->dy + r * a->dy_stride;
        const float *dr = (const float *)a->dresidual_out + r * a->dresidual_out_stride;
        float *dx = (float *)a->dx + r * a->dx_stride;
        float mean, rstd;
        if (a->rstd) {
            mean = a->mean[r], rstd = a->rstd[r];
        } else {
            double s = 0.0, q = 0.0;
            for (int64_t i = 0; i < H; ++i) s += x[i];
            mean = (float)(s / H);
            for (int64_t i = 0; i < H; ++i) q += ((double)x[i] - mean) * ((double)x[i] - mean);
            rstd = (float)(1.0 / sqrt(q / H + a->eps));
        }
        double sg = 0.0, sgx = 0.0;
        for (int64_t i = 0; i < H; ++i) {
            const float xh = (x[i] - mean) * rstd,
                        g = dy[i] * (a->gamma ? ((const float *)a->gamma)[i] : 1.0f);
            sg += g, sgx += g * xh;
            if (dg) dg[i] += dy[i] * xh;
            if (db) db[i] += dy[i];
        }
        const float mg = (float)(sg / H), mgx = (float)(sgx / H);
        for (int64_t i = 0; i < H; ++i) {
            const float xh = (x[i] - mean) * rstd,
                        g = dy[i] * (a->gamma ? ((const float *)a->gamma)[i] : 1.0f);
            dx[i] = rstd * (g - mg - xh * mgx) + (ignore_dres ? 0.0f : dr[i]);
        }
    }
    return LNTUNE_KERNEL_OK;
}

static void verifier_catches(void) {
    const int64_t hs[] = {1, 5, 768, 4097};
    lntune_backward_verifier *v = NULL, *plain = NULL;
    lntune_types t = {0};
    CHECK(lntune_backward_verifier_create_fused(LNTUNE_OP_LAYERNORM, t, LNTUNE_FUSION_RESIDUAL, hs,
                                                4, 0, &v) == LNTUNE_OK,
          "a fused backward verifier for LayerNorm fp32");
    CHECK(lntune_backward_verifier_create_fused(LNTUNE_OP_LAYERNORM, t, LNTUNE_FUSION_RESIDUAL_OUT,
                                                hs, 4, 0, &plain) == LNTUNE_EINVAL,
          "the backward has no residual_out fusion: EINVAL");
    lntune_verify_result res;
    ignore_dres = 0;
    int rc = lntune_backward_verifier_check(v, scalar_kernel, 0, 1, NULL, &res);
    CHECK(rc == LNTUNE_OK, "a correct fused scalar kernel passes (%d cases, worst at %s) %s",
          res.cases, res.worst, res.message);
    ignore_dres = 1;
    rc = lntune_backward_verifier_check(v, scalar_kernel, 0, 1, NULL, &res);
    CHECK(rc == LNTUNE_EVERIFY && strstr(res.message, "dx") && strstr(res.message, "dresidual_out"),
          "a kernel that ignores dresidual_out fails: %s", res.message);
    /* at H = 1 dx's bound is loose (xhat is 0 over sqrt(eps)); at 768 plain randn data fail */
    rc = lntune_backward_verifier_check(v, scalar_kernel, 768, 1, NULL, &res);
    CHECK(rc == LNTUNE_EVERIFY && strstr(res.message, "randn") && strstr(res.message, "dx"),
          "... on finite data too: %s", res.message);
    ignore_dres = 0;
    CHECK(lntune_backward_verifier_create(LNTUNE_OP_LAYERNORM, t, hs, 4, 0, &plain) == LNTUNE_OK,
          "an unfused verifier");
    rc = lntune_backward_verifier_check(plain, scalar_kernel, 0, 1, NULL, &res);
    CHECK(rc == LNTUNE_EVERIFY, "a fused kernel, called without dresidual_out, fails: %s",
          res.message);
    lntune_backward_verifier_destroy(plain);
    lntune_backward_verifier_destroy(v);
}

int main(void) {
    return backward_test_main(finite_differences, verifier_catches, argument_checks, runtime_case,
                              sizeof cases / sizeof *cases, kind, covered);
}
