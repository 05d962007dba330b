/*
 * backward_check.h - what the backward tests (test_backward, test_backward_residual) share: typed
 * random buffers, a runtime backward call of op (0: LayerNorm, 1: RMSNorm) set up with or without
 * the forward's saved statistics, its outputs compared with the float64 reference, and the order
 * of a test's parts.
 */
#ifndef LNTUNE_TEST_BACKWARD_CHECK_H
#define LNTUNE_TEST_BACKWARD_CHECK_H

#include "check.h"
#include "half_ref.h"
#include "lntune.h"
#include "randn.h"
#include "verify_backward.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* n elements of type, offset + spread * N(0, 1) drawn from *rng; malloc'd. */
static inline void *backward_values(uint64_t *rng, int type, size_t n, double offset,
                                    double spread) {
    void *p = malloc(n * (type == LNTUNE_TYPE_F32 ? 4 : 2));
    for (size_t k = 0; k < n; ++k)
        lntune_ref_store(type, p, (int64_t)k, (float)(offset + spread * test_randn(rng)));
    return p;
}

/* The central difference (f(v + h e_i) - f(v - h e_i)) / 2h of f, which reads v through at;
 * v[i] is restored. */
static inline double backward_central(double (*f)(const void *at), const void *at, double *v, int i,
                                      double h) {
    const double vi = v[i];
    v[i] = vi + h;
    const double up = f(at);
    v[i] = vi - h;
    const double down = f(at);
    v[i] = vi;
    return (up - down) / (2 * h);
}

static inline int backward_call(lntune *ctx, int op, const lntune_backward_args *a) {
    return op ? lntune_rmsnorm_backward(ctx, a) : lntune_layernorm_backward(ctx, a);
}

/*
 * a: the backward of op on rows x H, x and dy (and dx) of type xt, gamma (and dgamma, dbeta) of
 * pt; dbeta for LayerNorm only. With saved, mean and rstd (rows floats each) first receive the
 * statistics of the runtime's forward of x, and the call is given them (RMSNorm: rstd alone).
 */
static inline void backward_args(lntune_backward_args *a, lntune *ctx, int op, int xt, int pt,
                                 int64_t rows, int64_t H, int saved, void *x, void *dy, void *gamma,
                                 void *dx, void *dgamma, void *dbeta, float *mean, float *rstd) {
    if (saved) {
        lntune_args f = {0};
        void *y = malloc((size_t)(rows * H) * (xt == LNTUNE_TYPE_F32 ? 4 : 2));
        f.rows = rows, f.H = H, f.dtype = (lntune_dtype)(xt + 1);
        f.param_dtype = (lntune_dtype)(pt + 1);
        f.x = x, f.y = y, f.gamma = gamma, f.mean = mean, f.rstd = rstd;
        EXPECT((op ? lntune_rmsnorm(ctx, &f) : lntune_layernorm(ctx, &f)) == LNTUNE_OK, "forward");
        free(y);
    }
    memset(a, 0, sizeof *a);
    a->rows = rows, a->H = H, a->dtype = (lntune_dtype)(xt + 1);
    a->param_dtype = (lntune_dtype)(pt + 1);
    a->x = x, a->dy = dy, a->gamma = gamma, a->dx = dx, a->dgamma = dgamma;
    a->dbeta = op == 0 ? dbeta : NULL;
    if (saved) a->mean = op == 0 ? mean : NULL, a->rstd = rstd;
}

/*
 * The outputs of the call a (contiguous rows) against the float64 reference, with the saved
 * statistics mean and rstd when a had them and dres (stride ds; NULL: none) added to dx; 1, the
 * failure printed, when they differ.
 */
static inline int backward_differs(const lntune_backward_args *a, int op, const float *mean,
                                   const void *dres, int64_t ds, const char *what) {
    const int xt = (int)a->dtype - 1, pt = (int)a->param_dtype - 1;
    /* The reference reads RMSNorm's rstd with a mean of 0 beside it. */
    lntune_backward_problem p = {.op = (lntune_op)op, .rows = a->rows, .H = a->H};
    p.types = (lntune_types){.x = (uint8_t)xt, .y = (uint8_t)xt, .params = (uint8_t)pt};
    p.x = a->x, p.dy = a->dy, p.gamma = a->gamma;
    p.x_stride = p.dy_stride = p.dx_stride = a->H;
    p.mean = a->rstd ? mean : NULL, p.rstd = a->rstd, p.eps = 1e-5f;
    p.dres = dres, p.dres_stride = ds;
    lntune_verify_result res = {0};
    if (lntune_backward_compare(&p, a->dx, a->dgamma, a->dbeta, 64, what, &res) == LNTUNE_OK)
        return 0;
    printf("FAIL %s\n", res.message);
    return 1;
}

/* one(ctx, op, xt, pt, k) for each case k < ncases of every op and (x, params) type tuple: a
 * line for each op and tuple, saying that the op's kind of backward passed what (the cases). */
static inline void backward_all_tuples(lntune *ctx, size_t ncases,
                                       int (*one)(lntune *, int, int, int, size_t),
                                       const char *kind, const char *what) {
    for (int op = 0; op < 2; ++op)
        for (int xt = 0; xt < 3; ++xt)
            for (int pt = 0; pt < 3; ++pt) {
                int f = 0;
                for (size_t k = 0; k < ncases; ++k) f += one(ctx, op, xt, pt, k);
                check_failures += f;
                printf("%s: %s %s %s/%s: %s\n", f ? "FAIL" : "ok", op ? "rmsnorm" : "layernorm",
                       kind, lntune_type_name(xt), lntune_type_name(pt), what);
            }
}

/* A backward test's parts in order, the runtime's on a handle that names no database: then
 * backward_all_tuples with one, ncases, kind and what. */
static inline int backward_test_main(void (*finite_differences)(void),
                                     void (*verifier_catches)(void),
                                     void (*argument_checks)(lntune *),
                                     int (*one)(lntune *, int, int, int, size_t), size_t ncases,
                                     const char *kind, const char *what) {
    finite_differences();
    verifier_catches();
    lntune *ctx = NULL;
    CHECK(lntune_open(NULL, &ctx) == LNTUNE_OK, "open (LNTUNE_DB names no database)");
    argument_checks(ctx);
    backward_all_tuples(ctx, ncases, one, kind, what);
    lntune_close(ctx);
    return CHECK_SUMMARY();
}

#endif /* LNTUNE_TEST_BACKWARD_CHECK_H */
