/*
 * test_backward.c - the backward pass: the float64 reference gradients are the derivatives of
 * the forward (finite differences), the runtime's lntune_layernorm_backward and
 * lntune_rmsnorm_backward match them for every dtype tuple, with saved and recomputed
 * statistics, with and without gamma, on one thread and on the pool, their argument checks
 * refuse bad calls, and the backward verifier fails kernels with a wrong dx term or dgamma
 * partials that are not reduced across threads.
 */
#include "backward_check.h"
#include "check.h"
#include "randn.h"
#include "lntune.h"
#include "pool.h"
#include "reference.h"
#include "verify_backward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x1234567887654321ULL;

enum { FH = 37 };

/* Where the forward is differentiated: x, gamma, beta (LayerNorm only) and the loss's c. */
typedef struct {
    int op;
    double x[FH], gamma[FH], beta[FH], c[FH], eps;
} point;

/* L = sum_i c_i * y_i with y the forward in double (the definition being differentiated). */
static double loss(const void *at) {
    const point *p = at;
    double m = 0.0, ss = 0.0, l = 0.0;
    if (p->op == LNTUNE_OP_LAYERNORM) {
        for (int i = 0; i < FH; ++i) m += p->x[i];
        m /= FH;
    }
    for (int i = 0; i < FH; ++i) ss += (p->x[i] - m) * (p->x[i] - m);
    const double r = 1.0 / sqrt(ss / FH + p->eps);
    for (int i = 0; i < FH; ++i)
        l += p->c[i] * ((p->x[i] - m) * r * p->gamma[i] + (p->op == 0 ? p->beta[i] : 0.0));
    return l;
}

/* Central differences with step h agree with the analytic gradients to O(h^2). */
static void finite_differences(void) {
    const double h = 1e-5;
    for (int op = 0; op < 2; ++op) {
        point p = {.op = op, .eps = 1e-5};
        double dx[FH], dgamma[FH] = {0}, dbeta[FH] = {0};
        for (int i = 0; i < FH; ++i) {
            p.x[i] = 3.0 + test_randn(&rng);
            p.gamma[i] = 1.0 + 0.5 * test_randn(&rng);
            p.beta[i] = test_randn(&rng);
            p.c[i] = test_randn(&rng);
        }
        float xf[FH];
        double z[FH], m, rs;
        for (int i = 0; i < FH; ++i) xf[i] = (float)p.x[i];
        for (int i = 0; i < FH; ++i) p.x[i] = xf[i]; /* so the reference statistics are of x */
        lntune_reference_row((lntune_op)op, xf, FH, p.eps, z, &m, &rs);
        lntune_reference_backward_row((lntune_op)op, p.x, p.c, NULL, p.gamma, FH, m, rs, dx, dgamma,
                                      dbeta);
        double worst = 0.0;
        for (int i = 0; i < FH; ++i) {
            const double fdx = backward_central(loss, &p, p.x, i, h);
            const double fdg = backward_central(loss, &p, p.gamma, i, h);
            const double fdb = op == 0 ? backward_central(loss, &p, p.beta, i, h) : 0.0;
            const double e = fmax(fabs(fdx - dx[i]), fmax(fabs(fdg - dgamma[i]),
                                                          op == 0 ? fabs(fdb - dbeta[i]) : 0.0));
            if (e > worst) worst = e;
        }
        CHECK(worst < 1e-6,
              "%s: the reference dx, dgamma%s are the central differences of the "
              "forward (worst difference %.2e)",
              op ? "RMSNorm" : "LayerNorm", op ? "" : ", dbeta", worst);
    }
}

static const struct {
    int64_t rows, H;
    int saved, with_gamma; /* the forward's statistics given; gamma given */
} cases[] = {
    {5, 1, 1, 1},      /* H = 1 */
    {3, 1027, 0, 1},   /* odd H, recomputed */
    {7, 768, 1, 0},    /* no gamma */
    {128, 4097, 1, 1}, /* on the pool */
    {300, 1000, 0, 1}, /* pool, recomputed */
};
/* For the line of each op and type tuple: its kind of backward, and what the cases cover. */
static const char kind[] = "backward";
static const char covered[] =
    "built-in matches the float64 reference (H=1, odd H, no gamma, saved and "
    "recomputed statistics, one thread and the pool)";

/* The runtime for op and types on case k, against the reference; returns failures. */
static int runtime_case(lntune *ctx, int op, int xt, int pt, size_t k) {
    const int64_t rows = cases[k].rows, H = cases[k].H;
    const int saved = cases[k].saved, with_gamma = cases[k].with_gamma;
    const size_t n = (size_t)(rows * H), xe = xt == LNTUNE_TYPE_F32 ? 4 : 2;
    const size_t pe = pt == LNTUNE_TYPE_F32 ? 4 : 2;
    void *x = backward_values(&rng, xt, n, op == 0 ? 100.0 : 0.0, 1.0);
    void *dy = backward_values(&rng, xt, n, 0, 1);
    void *gamma = with_gamma ? backward_values(&rng, pt, (size_t)H, 1.0, 0.5) : NULL;
    void *dx = malloc(n * xe), *dgamma = malloc((size_t)H * pe), *dbeta = malloc((size_t)H * pe);
    float *mean = malloc((size_t)rows * sizeof *mean), *rstd = malloc((size_t)rows * sizeof *rstd);
    memset(dx, 0xff, n * xe), memset(dgamma, 0xff, (size_t)H * pe),
        memset(dbeta, 0xff, (size_t)H * pe);
    lntune_backward_args a;
    backward_args(&a, ctx, op, xt, pt, rows, H, saved, x, dy, gamma, dx, dgamma, dbeta, mean, rstd);
    int rc = backward_call(ctx, op, &a);
    int failures = 0;
    char what[160];
    snprintf(what, sizeof what, "%s %s/%s rows=%lld H=%lld %s%s", op ? "rmsnorm" : "layernorm",
             lntune_type_name(xt), lntune_type_name(pt), (long long)rows, (long long)H,
             saved ? "saved stats" : "recomputed", with_gamma ? "" : ", no gamma");
    if (rc != LNTUNE_OK) {
        printf("FAIL %s: rc %d %s\n", what, rc, lntune_errmsg(ctx));
        failures++;
    } else {
        /* threads: the runtime uses 1 or every core; the bound takes the larger */
        failures += backward_differs(&a, op, mean, NULL, 0, what);
        /* a second call gives the same bits (deterministic reduction) */
        void *dg2 = malloc((size_t)H * pe);
        a.dgamma = dg2;
        EXPECT(backward_call(ctx, op, &a) == LNTUNE_OK, "second call");
        if (memcmp(dg2, dgamma, (size_t)H * pe) != 0) {
            printf("FAIL %s: dgamma differs between two identical calls\n", what);
            failures++;
        }
        free(dg2);
    }
    free(x), free(dy), free(gamma), free(dx), free(dgamma), free(dbeta), free(mean), free(rstd);
    return failures;
}

static void argument_checks(lntune *ctx) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dy[8] = {1}, dx[8], dg[8], mean[2], rstd[2];
    lntune_backward_args a = {0};
    a.rows = 2, a.H = 4, a.x = x, a.dy = dy, a.dx = dx;
    CHECK(lntune_layernorm_backward(ctx, &a) == LNTUNE_OK, "a zero-filled struct plus rows, H, "
                                                           "x, dy, dx is a valid call");
    lntune_backward_args b = a;
    b.dx = NULL;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_EINVAL &&
              strstr(lntune_errmsg(ctx), "dx is NULL"),
          "NULL dx: EINVAL (%s)", lntune_errmsg(ctx));
    b = a, b.H = 0, b.dgamma = dg;
    dg[0] = 42.0f;
    CHECK(lntune_rmsnorm_backward(ctx, &b) == LNTUNE_OK && dg[0] == 42.0f,
          "H = 0 is an empty call: nothing written");
    b = a, b.H = -1;
    CHECK(lntune_rmsnorm_backward(ctx, &b) == LNTUNE_EINVAL, "H < 0: EINVAL (%s)",
          lntune_errmsg(ctx));
    b = a, b.dbeta = dg;
    CHECK(lntune_rmsnorm_backward(ctx, &b) == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "dbeta"),
          "dbeta to RMSNorm: EINVAL (%s)", lntune_errmsg(ctx));
    b = a, b.mean = mean;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_EINVAL,
          "LayerNorm mean without rstd: "
          "EINVAL (%s)",
          lntune_errmsg(ctx));
    b = a, b.rstd = rstd;
    rstd[0] = rstd[1] = 1.0f;
    CHECK(lntune_rmsnorm_backward(ctx, &b) == LNTUNE_OK, "RMSNorm takes rstd alone");
    b = a, b.dy_stride = 3;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_EINVAL, "dy_stride < H: EINVAL (%s)",
          lntune_errmsg(ctx));
    b = a, b.dtype = (lntune_dtype)7;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_EINVAL, "unknown dtype: EINVAL");
    b = a, b.device = LNTUNE_DEVICE_CUDA, b.device_index = 63; /* (test_cuda_backward_dispatch) */
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_ENODEVICE,
          "CUDA backward on a device that does not exist: ENODEVICE (%s)", lntune_errmsg(ctx));
    b = a, b.rows = 0, b.dgamma = dg;
    dg[0] = 42.0f;
    CHECK(lntune_layernorm_backward(ctx, &b) == LNTUNE_OK && dg[0] == 42.0f, "rows = 0 is a no-op");
    CHECK(lntune_layernorm_backward(NULL, &a) == LNTUNE_EINVAL &&
              lntune_layernorm_backward(ctx, NULL) == LNTUNE_EINVAL,
          "NULL ctx or args: EINVAL");
}

/* ---- kernels the verifier must accept or refuse ---- */

/* A plain correct fp32 kernel (saved or recomputed statistics); `bug` breaks it. */
static int bug;
static int scalar_kernel(const lntune_backward_kernel_args *a, int64_t b, int64_t e, float *dg,
                         float *db, int rms) {
    const int64_t H = a->H;
    for (int64_t r = b; r < e; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        const float *dy = (const float *)a->dy + r * a->dy_stride;
        float *dx = (float *)a->dx + r * a->dx_stride;
        const float *gm = a->gamma;
        float mean = 0.0f, rstd;
        if (a->rstd) {
            mean = rms ? 0.0f : a->mean[r];
            rstd = a->rstd[r];
        } else {
            double s = 0.0, q = 0.0;
            for (int64_t i = 0; i < H && !rms; ++i) s += x[i];
            mean = (float)(s / H);
            for (int64_t i = 0; i < H; ++i) q += ((double)x[i] - mean) * ((double)x[i] - mean);
            rstd = (float)(1.0 / sqrt(q / H + a->eps));
        }
        double sg = 0.0, sgx = 0.0;
        for (int64_t i = 0; i < H; ++i) {
            const float xh = (x[i] - mean) * rstd, g = dy[i] * (gm ? gm[i] : 1.0f);
            sg += g, sgx += g * xh;
            if (dg && !(bug == 2 && b != 0)) dg[i] += dy[i] * xh; /* 2: only the first range */
            if (db) db[i] += dy[i];
        }
        const float mg = rms ? 0.0f : (float)(sg / H), mgx = (float)(sgx / H);
        for (int64_t i = 0; i < H; ++i) {
            const float xh = (x[i] - mean) * rstd, g = dy[i] * (gm ? gm[i] : 1.0f);
            dx[i] = rstd * (g - mg - (bug == 1 ? 0.0f : xh * mgx)); /* 1: the xhat term lost */
        }
    }
    return LNTUNE_KERNEL_OK;
}
static int ln_kernel(const lntune_backward_kernel_args *a, int64_t b, int64_t e, float *dg,
                     float *db) {
    return scalar_kernel(a, b, e, dg, db, 0);
}

static void verifier_catches(void) {
    const int64_t hs[] = {1, 5, 768, 4097};
    lntune_backward_verifier *v = NULL;
    lntune_types t = {0};
    CHECK(lntune_backward_verifier_create(LNTUNE_OP_LAYERNORM, t, hs, 4, 0, &v) == LNTUNE_OK,
          "a backward verifier for LayerNorm fp32");
    lntune_pool *pool = NULL;
    lntune_pool_create(3, &pool);
    lntune_verify_result res;
    bug = 0;
    int rc = lntune_backward_verifier_check(v, ln_kernel, 0, 3, pool, &res);
    CHECK(rc == LNTUNE_OK,
          "a correct scalar kernel passes on 3 threads (%d cases, worst %.3g "
          "at %s) %s",
          res.cases, res.max_error * (1 << 20), res.worst, res.message);
    bug = 1;
    rc = lntune_backward_verifier_check(v, ln_kernel, 0, 1, NULL, &res);
    CHECK(rc == LNTUNE_EVERIFY && strstr(res.message, "dx"),
          "a kernel without the xhat * mean(g xhat) term of dx fails: %s", res.message);
    bug = 2;
    rc = lntune_backward_verifier_check(v, ln_kernel, 0, 1, NULL, &res);
    CHECK(rc == LNTUNE_OK, "dgamma from the first row range only is right on one thread");
    rc = lntune_backward_verifier_check(v, ln_kernel, 0, 3, pool, &res);
    CHECK(rc == LNTUNE_EVERIFY && strstr(res.message, "dgamma"),
          "... and fails on 3 threads (dgamma not reduced across threads): %s", res.message);
    bug = 0;
    lntune_pool_destroy(pool);
    lntune_backward_verifier_destroy(v);
}

int main(void) {
    return backward_test_main(finite_differences, verifier_catches, argument_checks, runtime_case,
                              sizeof cases / sizeof *cases, kind, covered);
}
