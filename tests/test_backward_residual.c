/*
 * test_backward_residual.c - the backward of the fused Add & Norm (s = x + residual, y = Norm(s),
 * residual_out = s): the float64 reference's dx with dresidual_out is the derivative of the
 * forward with respect to x and to residual alike (finite differences through both), the
 * runtime's built-ins match the reference for every dtype tuple with dresidual_out (strided,
 * misaligned, in place), the argument checks cover the new fields, and the verifier fails a
 * kernel that ignores dresidual_out or does not take it.
 */
#include "check.h"
#include "randn.h"
#include "lntune.h"
#include "pool.h"
#include "reference.h"
#include "verify_backward.h"

#include "fusion.h"
#include "half_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x0ddba11cafef00dULL;
static double randn(void) {
    return test_randn(&rng);
}

enum { FH = 29 };

/* L = sum c_i y_i + sum e_i s_i: y = Norm(s) * gamma + beta feeds the loss through c, and
 * s = x + residual (residual_out) feeds the next block, whose gradient at s is e. */
static double loss(int op, const double *x, const double *res, const double *gamma, const double *c,
                   const double *e, double eps) {
    double s[FH], m = 0.0, ss = 0.0, l = 0.0;
    for (int i = 0; i < FH; ++i) s[i] = x[i] + res[i];
    if (op == LNTUNE_OP_LAYERNORM) {
        for (int i = 0; i < FH; ++i) m += s[i];
        m /= FH;
    }
    for (int i = 0; i < FH; ++i) ss += (s[i] - m) * (s[i] - m);
    const double r = 1.0 / sqrt(ss / FH + eps);
    for (int i = 0; i < FH; ++i) l += c[i] * ((s[i] - m) * r * gamma[i] + 0.25) + e[i] * s[i];
    return l;
}

/* Central differences in x and in residual both give the reference's dx with dresidual_out. */
static void finite_differences(void) {
    const double eps = 1e-5, h = 1e-5;
    for (int op = 0; op < 2; ++op) {
        double x[FH], res[FH], s[FH], gamma[FH], dy[FH], dres[FH], dx[FH];
        float sf[FH];
        for (int i = 0; i < FH; ++i) {
            x[i] = 2.0 + randn();
            res[i] = 0.5 * randn();
            gamma[i] = 1.0 + 0.5 * randn();
            dy[i] = randn();
            dres[i] = 3.0 * randn();
            sf[i] = (float)(x[i] + res[i]);
        }
        for (int i = 0; i < FH; ++i) { /* x + residual exact in fp32, so the statistics are s's */
            x[i] = sf[i] - res[i];
            s[i] = sf[i];
        }
        double z[FH], m, rs;
        lntune_reference_row((lntune_op)op, sf, FH, eps, z, &m, &rs);
        lntune_reference_backward_row((lntune_op)op, s, dy, dres, gamma, FH, m, rs, dx, NULL, NULL);
        double worst = 0.0, worst_plain = 0.0;
        for (int i = 0; i < FH; ++i) {
            double xp[FH], rp[FH];
            memcpy(xp, x, sizeof xp), memcpy(rp, res, sizeof rp);
            xp[i] = x[i] + h;
            double up = loss(op, xp, res, gamma, dy, dres, eps);
            xp[i] = x[i] - h;
            const double fdx = (up - loss(op, xp, res, gamma, dy, dres, eps)) / (2 * h);
            rp[i] = res[i] + h;
            up = loss(op, x, rp, gamma, dy, dres, eps);
            rp[i] = res[i] - h;
            const double fdr = (up - loss(op, x, rp, gamma, dy, dres, eps)) / (2 * h);
            worst = fmax(worst, fmax(fabs(fdx - dx[i]), fabs(fdr - dx[i])));
            worst_plain = fmax(worst_plain, fabs(fdx - (dx[i] - dres[i])));
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

/* Fills n elements of type with values offset + spread * randn. */
static void *typed_values(int type, size_t n, double offset, double spread) {
    void *p = malloc(n * (type == LNTUNE_TYPE_F32 ? 4 : 2));
    for (size_t k = 0; k < n; ++k)
        lntune_ref_store(type, p, (int64_t)k, (float)(offset + spread * randn()));
    return p;
}

/*
 * The runtime for op and types on rows x H with dresidual_out at stride ds (offset by one
 * element: misaligned for fp32 vectors), against the reference; then in place (dx is
 * dresidual_out's buffer), which must give the same bits. Returns failures.
 */
static int runtime_case(lntune *ctx, int op, int xt, int pt, int64_t rows, int64_t H, int64_t ds,
                        int saved) {
    const size_t n = (size_t)(rows * H), xe = xt == LNTUNE_TYPE_F32 ? 4 : 2;
    const size_t pe = pt == LNTUNE_TYPE_F32 ? 4 : 2, dn = (size_t)(rows * ds + 1);
    void *x = typed_values(xt, n, op == 0 ? 50.0 : 0.0, 1.0), *dy = typed_values(xt, n, 0, 1);
    unsigned char *dres = typed_values(xt, dn, 0, 4.0);
    void *gamma = typed_values(pt, (size_t)H, 1.0, 0.5);
    void *dx = malloc(n * xe), *dgamma = malloc((size_t)H * pe), *dbeta = malloc((size_t)H * pe);
    unsigned char *inplace = malloc(dn * xe);
    float *mean = malloc((size_t)rows * sizeof *mean), *rstd = malloc((size_t)rows * sizeof *rstd);
    memset(dx, 0xff, n * xe);
    memcpy(inplace, dres, dn * xe);
    if (saved) { /* the forward's statistics, from the runtime's forward of s = x */
        lntune_args f = {0};
        void *y = malloc(n * xe);
        f.rows = rows, f.H = H, f.dtype = (lntune_dtype)(xt + 1),
        f.param_dtype = (lntune_dtype)(pt + 1);
        f.x = x, f.y = y, f.gamma = gamma, f.mean = mean, f.rstd = rstd;
        EXPECT((op ? lntune_rmsnorm(ctx, &f) : lntune_layernorm(ctx, &f)) == LNTUNE_OK, "forward");
        free(y);
    }
    lntune_backward_args a = {0};
    a.rows = rows, a.H = H, a.dtype = (lntune_dtype)(xt + 1),
    a.param_dtype = (lntune_dtype)(pt + 1);
    a.x = x, a.dy = dy, a.gamma = gamma, a.dx = dx, a.dgamma = dgamma;
    a.dbeta = op == 0 ? dbeta : NULL;
    a.dresidual_out = dres + xe, a.dresidual_out_stride = ds == H ? 0 : ds;
    if (saved) a.mean = op == 0 ? mean : NULL, a.rstd = rstd;
    int rc = op ? lntune_rmsnorm_backward(ctx, &a) : lntune_layernorm_backward(ctx, &a);
    int failures = 0;
    char what[200];
    snprintf(what, sizeof what, "%s %s/%s rows=%lld H=%lld dresidual_out stride %lld, %s",
             op ? "rmsnorm" : "layernorm", lntune_type_name(xt), lntune_type_name(pt),
             (long long)rows, (long long)H, (long long)ds, saved ? "saved stats" : "recomputed");
    if (rc != LNTUNE_OK) {
        printf("FAIL %s: rc %d %s\n", what, rc, lntune_errmsg(ctx));
        failures++;
    } else {
        lntune_backward_problem p = {(lntune_op)op,
                                     {.x = (uint8_t)xt, .y = (uint8_t)xt, .params = (uint8_t)pt},
                                     rows,
                                     H,
                                     x,
                                     dy,
                                     gamma,
                                     H,
                                     H,
                                     H,
                                     saved ? mean : NULL,
                                     saved ? rstd : NULL,
                                     1e-5f,
                                     dres + xe,
                                     ds};
        lntune_verify_result res = {0};
        if (lntune_backward_compare(&p, dx, dgamma, op == 0 ? dbeta : NULL, 64, what, &res) !=
            LNTUNE_OK) {
            printf("FAIL %s\n", res.message);
            failures++;
        }
        /* in place: dx = dresidual_out's buffer, same stride */
        lntune_backward_args b = a;
        b.dresidual_out = inplace + xe, b.dx = inplace + xe, b.dx_stride = ds;
        EXPECT((op ? lntune_rmsnorm_backward(ctx, &b) : lntune_layernorm_backward(ctx, &b)) ==
                   LNTUNE_OK,
               "in place");
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

static void runtime_all_tuples(lntune *ctx) {
    for (int op = 0; op < 2; ++op)
        for (int xt = 0; xt < 3; ++xt)
            for (int pt = 0; pt < 3; ++pt) {
                int f = 0;
                f += runtime_case(ctx, op, xt, pt, 5, 1, 1, 1);         /* H = 1 */
                f += runtime_case(ctx, op, xt, pt, 3, 1027, 1027, 0);   /* odd H, recomputed */
                f += runtime_case(ctx, op, xt, pt, 7, 768, 777, 1);     /* strided */
                f += runtime_case(ctx, op, xt, pt, 128, 4097, 4100, 1); /* on the pool */
                check_failures += f;
                printf("%s: %s fused residual backward %s/%s: built-in dx = the norm's gradient + "
                       "dresidual_out (H=1, odd H, strided, misaligned, pool, in place)\n",
                       f ? "FAIL" : "ok", op ? "rmsnorm" : "layernorm", lntune_type_name(xt),
                       lntune_type_name(pt));
            }
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

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    finite_differences();
    verifier_catches();
    lntune *ctx = NULL;
    CHECK(lntune_open(NULL, &ctx) == LNTUNE_OK, "open (LNTUNE_DB names no database)");
    argument_checks(ctx);
    runtime_all_tuples(ctx);
    lntune_close(ctx);
    return CHECK_SUMMARY();
}
