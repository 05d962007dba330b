/*
 * cuda_check_backward.c - the backward verifier's suite on the device (cuda_check_backward.h).
 */
#include "cuda_check_backward.h"

#include "backward.h"
#include "cuda_guarded.h"
#include "lntune.h"
#include "typed_kernel.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STATS_ROWS = 4096 }; /* rows of saved mean and rstd a case may pass */
#define KERNEL_DEVICE_ERROR 99

/* One run's results on the host: dx's extent, each wanted workspace and output. */
typedef struct {
    unsigned char *dx;
    float *ws[2];          /* dgamma, dbeta workspaces: parts x H */
    unsigned char *out[2]; /* dgamma, dbeta: H of the params type */
} run_result;

struct lntune_cuda_backward_checker {
    lntune_cuda *cu;
    int64_t max_floats, max_h;
    uint64_t x, dy, dres, gamma, stats; /* inputs */
    lntune_cuda_guarded dx, ws[2], out[2];
    run_result runs[2];
    /* The pair of the suite in progress. */
    void *main, *finish;
    const lntune_cuda_backward_launch *launch;
    int halve; /* 1: kernel 1 on half the launch line's grid (rounded up) */
    int xtype, ptype;
    char message[1024];
};

static _Thread_local lntune_cuda_backward_checker *running;

static int device_error(lntune_cuda_backward_checker *c, const char *what) {
    snprintf(c->message, sizeof c->message, "%s: %s", what, lntune_cuda_errmsg(c->cu));
    return KERNEL_DEVICE_ERROR;
}

static int fail(lntune_cuda_backward_checker *c, const char *what) {
    snprintf(c->message, sizeof c->message, "%s", what);
    return KERNEL_DEVICE_ERROR;
}

/* An input copied to the device buffer at base (lntune_cuda_put_input). */
static int put(lntune_cuda_backward_checker *c, uint64_t base, const void *host, size_t bytes,
               const char *name, uint64_t *dev) {
    const int rc = lntune_cuda_put_input(c->cu, base, (size_t)c->max_floats * 4, host, bytes, dev);
    if (rc == LNTUNE_EOVERFLOW) return LNTUNE_KERNEL_EUNSUPPORTED;
    return rc ? device_error(c, name) : LNTUNE_KERNEL_OK;
}

static int guards(lntune_cuda_backward_checker *c, const lntune_cuda_guarded *g, uint64_t dev,
                  size_t bytes, const char *name) {
    return lntune_cuda_guarded_verify(c->cu, g, dev, bytes, name, c->message, sizeof c->message)
               ? KERNEL_DEVICE_ERROR
               : LNTUNE_KERNEL_OK;
}

/* Equal bits, or both NaN (payloads may differ between the CPU's and the GPU's arithmetic). */
static int same_value(int type, const void *a, const void *b, int64_t i) {
    const float u = typed_load(type, a, i), v = typed_load(type, b, i);
    if (isnan(u) || isnan(v)) return isnan(u) && isnan(v);
    return memcmp((const unsigned char *)a + i * (int64_t)lntune_type_size(type),
                  (const unsigned char *)b + i * (int64_t)lntune_type_size(type),
                  lntune_type_size(type)) == 0;
}

/*
 * One run of the pair on the case a (device pointers in d), grid blocks, parts workspace rows;
 * want[k]: gradient k (dgamma, dbeta) asked for. Results into r; every output's guards checked.
 */
static int run_pair(lntune_cuda_backward_checker *c, const lntune_backward_kernel_args *a,
                    lntune_backward_kernel_args *d, int64_t grid, int64_t parts, const int want[2],
                    run_result *r) {
    const lntune_cuda_backward_launch *l = c->launch;
    const size_t dxb = lntune_cuda_extent(a->rows, a->dx_stride, a->H, lntune_type_size(c->xtype));
    const size_t wsb = (size_t)(parts * a->H) * sizeof(float);
    const size_t outb = (size_t)a->H * lntune_type_size(c->ptype);
    uint64_t dx, ws[2] = {0, 0}, out[2] = {0, 0};
    int rc = lntune_cuda_guarded_place(c->cu, &c->dx, a->dx, dxb, &dx);
    for (int k = 0; k < 2 && rc == LNTUNE_OK; ++k) {
        if (!want[k]) continue;
        rc = lntune_cuda_guarded_place(c->cu, &c->ws[k], NULL, wsb, &ws[k]);
        if (rc == LNTUNE_OK && !l->partials) /* atomics add into a zeroed row */
            rc = lntune_cuda_fill32(c->cu, ws[k], 0, wsb / 4);
        if (rc == LNTUNE_OK) rc = lntune_cuda_guarded_place(c->cu, &c->out[k], NULL, outb, &out[k]);
    }
    if (rc == LNTUNE_EOVERFLOW) return LNTUNE_KERNEL_EUNSUPPORTED;
    if (rc) return device_error(c, "poison the outputs");
    d->dx = (void *)(uintptr_t)dx;
    if (lntune_cuda_backward_launch_pair(c->cu, c->main, c->finish, l, d, grid, ws, out, NULL))
        return device_error(c, "launch");
    if (lntune_cuda_sync(c->cu)) return device_error(c, "kernel");
    if ((rc = guards(c, &c->dx, dx, dxb, "dx"))) return rc;
    if (lntune_cuda_dtoh(c->cu, r->dx, dx, dxb)) return device_error(c, "copy dx back");
    static const char *const names[2][2] = {{"the dgamma workspace", "dgamma"},
                                            {"the dbeta workspace", "dbeta"}};
    for (int k = 0; k < 2; ++k) {
        if (!want[k]) continue;
        if ((rc = guards(c, &c->ws[k], ws[k], wsb, names[k][0])) ||
            (rc = guards(c, &c->out[k], out[k], outb, names[k][1])))
            return rc;
        if (lntune_cuda_dtoh(c->cu, r->ws[k], ws[k], wsb) ||
            lntune_cuda_dtoh(c->cu, r->out[k], out[k], outb))
            return device_error(c, "copy the gradients back");
    }
    return LNTUNE_KERNEL_OK;
}

/* Grows both workspaces (device and host) to hold bytes: a warp layout's many row groups. */
static int workspaces_for(lntune_cuda_backward_checker *c, size_t bytes) {
    if (bytes <= c->ws[0].capacity) return LNTUNE_KERNEL_OK;
    for (int k = 0; k < 2; ++k) {
        lntune_cuda_guarded_free(c->cu, &c->ws[k]);
        if (lntune_cuda_guarded_alloc(c->cu, bytes, LNTUNE_TYPE_F32, &c->ws[k]))
            return device_error(c, "allocate a workspace");
        for (int t = 0; t < 2; ++t) {
            float *grown = realloc(c->runs[t].ws[k], bytes);
            if (!grown) return fail(c, "out of memory");
            c->runs[t].ws[k] = grown;
        }
    }
    return LNTUNE_KERNEL_OK;
}

/* A lntune_backward_kernel_fn that runs the running checker's pair on the device, twice. */
static int device_backward(const lntune_backward_kernel_args *a, int64_t row_begin, int64_t row_end,
                           float *dgamma_part, float *dbeta_part) {
    lntune_cuda_backward_checker *c = running;
    const lntune_cuda_backward_launch *l = c->launch;
    if (row_begin != 0 || row_end != a->rows || a->H > c->max_h ||
        (l->main.max_h && a->H > l->main.max_h) || a->rows > STATS_ROWS)
        return LNTUNE_KERNEL_EUNSUPPORTED;
    const size_t e = lntune_type_size(c->xtype);
    lntune_backward_kernel_args d = *a;
    uint64_t p;
    int rc;
    if ((rc = put(c, c->x, a->x, lntune_cuda_extent(a->rows, a->x_stride, a->H, e), "copy x", &p)))
        return rc;
    d.x = (const void *)(uintptr_t)p;
    if ((rc = put(c, c->dy, a->dy, lntune_cuda_extent(a->rows, a->dy_stride, a->H, e), "copy dy",
                  &p)))
        return rc;
    d.dy = (const void *)(uintptr_t)p;
    if (a->dresidual_out) {
        const size_t bytes = lntune_cuda_extent(a->rows, a->dresidual_out_stride, a->H, e);
        if ((rc = put(c, c->dres, a->dresidual_out, bytes, "copy dresidual_out", &p))) return rc;
        d.dresidual_out = (const void *)(uintptr_t)p;
    }
    if (a->gamma) {
        if (lntune_cuda_htod(c->cu, c->gamma, a->gamma, (size_t)a->H * lntune_type_size(c->ptype)))
            return device_error(c, "copy gamma");
        d.gamma = (const void *)(uintptr_t)c->gamma;
    }
    const size_t sb = (size_t)a->rows * sizeof(float);
    if (a->mean) {
        if (lntune_cuda_htod(c->cu, c->stats, a->mean, sb)) return device_error(c, "copy mean");
        d.mean = (const float *)(uintptr_t)c->stats;
    }
    if (a->rstd) {
        const uint64_t at = c->stats + STATS_ROWS * sizeof(float);
        if (lntune_cuda_htod(c->cu, at, a->rstd, sb)) return device_error(c, "copy rstd");
        d.rstd = (const float *)(uintptr_t)at;
    }
    int64_t grid = lntune_cuda_backward_grid(l, a->rows);
    if (c->halve) grid = (grid + 1) / 2;
    const int64_t parts = lntune_cuda_backward_parts(l, grid);
    if ((rc = workspaces_for(c, (size_t)(parts * a->H) * sizeof(float)))) return rc;
    const int want[2] = {dgamma_part != NULL, dbeta_part != NULL};
    for (int t = 0; t < 2; ++t)
        if ((rc = run_pair(c, a, &d, grid, parts, want, &c->runs[t]))) return rc;

    /* Determinism, the second pass's sums, and the verifier's share. */
    const run_result *r0 = &c->runs[0], *r1 = &c->runs[1];
    for (int64_t row = 0; row < a->rows; ++row)
        for (int64_t i = 0; i < a->H; ++i)
            if (!same_value(c->xtype, r0->dx, r1->dx, row * a->dx_stride + i))
                return fail(c, "dx differs between two runs");
    memcpy(a->dx, r0->dx, lntune_cuda_extent(a->rows, a->dx_stride, a->H, e));
    float *parts_out[2] = {dgamma_part, dbeta_part};
    unsigned char *sum = (unsigned char *)c->runs[1].dx; /* scratch: dx is compared already */
    for (int k = 0; k < 2; ++k) {
        if (!want[k]) continue;
        lntune_backward_reduce(r0->ws[k], (int)parts, a->H, sum, c->ptype);
        for (int64_t i = 0; i < a->H; ++i) {
            if (!same_value(c->ptype, r0->out[k], sum, i))
                return fail(c, k ? "dbeta is not the sum of its workspace"
                                 : "dgamma is not the sum of its workspace");
            if (l->partials && !same_value(c->ptype, r0->out[k], r1->out[k], i))
                return fail(c, k ? "dbeta differs between two runs (partials)"
                                 : "dgamma differs between two runs (partials)");
            parts_out[k][i] += typed_load(c->ptype, r0->out[k], i);
        }
    }
    return LNTUNE_KERNEL_OK;
}

int lntune_cuda_backward_checker_create(lntune_cuda *cu, int64_t max_floats, int64_t max_h,
                                        lntune_cuda_backward_checker **out) {
    if (!out) return LNTUNE_EINVAL;
    *out = NULL;
    if (!cu || max_floats < 16 || max_h < 1 || max_h > max_floats) return LNTUNE_EINVAL;
    lntune_cuda_backward_checker *c = calloc(1, sizeof *c);
    if (!c) return LNTUNE_ENOMEM;
    c->cu = cu;
    c->max_floats = max_floats;
    c->max_h = max_h;
    const size_t bytes = (size_t)max_floats * 4;
    int rc = lntune_cuda_alloc(cu, bytes, &c->x) || lntune_cuda_alloc(cu, bytes, &c->dy) ||
             lntune_cuda_alloc(cu, bytes, &c->dres) ||
             lntune_cuda_alloc(cu, (size_t)max_h * 4, &c->gamma) ||
             lntune_cuda_alloc(cu, 2 * STATS_ROWS * sizeof(float), &c->stats) ||
             lntune_cuda_guarded_alloc(cu, bytes, LNTUNE_TYPE_F32, &c->dx);
    for (int k = 0; k < 2 && !rc; ++k)
        rc = lntune_cuda_guarded_alloc(cu, bytes, LNTUNE_TYPE_F32, &c->ws[k]) ||
             lntune_cuda_guarded_alloc(cu, (size_t)max_h * 4, LNTUNE_TYPE_F32, &c->out[k]);
    if (rc) {
        lntune_cuda_backward_checker_destroy(c);
        return LNTUNE_ENODEVICE;
    }
    for (int t = 0; t < 2 && !rc; ++t) {
        run_result *r = &c->runs[t];
        r->dx = malloc(bytes);
        r->ws[0] = malloc(bytes);
        r->ws[1] = malloc(bytes);
        r->out[0] = malloc((size_t)max_h * 4);
        r->out[1] = malloc((size_t)max_h * 4);
        rc = !r->dx || !r->ws[0] || !r->ws[1] || !r->out[0] || !r->out[1];
    }
    if (rc) {
        lntune_cuda_backward_checker_destroy(c);
        return LNTUNE_ENOMEM;
    }
    *out = c;
    return LNTUNE_OK;
}

void lntune_cuda_backward_checker_destroy(lntune_cuda_backward_checker *c) {
    if (!c) return;
    lntune_cuda_free(c->cu, c->x);
    lntune_cuda_free(c->cu, c->dy);
    lntune_cuda_free(c->cu, c->dres);
    lntune_cuda_free(c->cu, c->gamma);
    lntune_cuda_free(c->cu, c->stats);
    lntune_cuda_guarded_free(c->cu, &c->dx);
    for (int k = 0; k < 2; ++k) {
        lntune_cuda_guarded_free(c->cu, &c->ws[k]);
        lntune_cuda_guarded_free(c->cu, &c->out[k]);
    }
    for (int t = 0; t < 2; ++t) {
        free(c->runs[t].dx);
        free(c->runs[t].ws[0]);
        free(c->runs[t].ws[1]);
        free(c->runs[t].out[0]);
        free(c->runs[t].out[1]);
    }
    free(c);
}

int lntune_cuda_backward_checker_run(lntune_cuda_backward_checker *c, lntune_backward_verifier *v,
                                     void *main, void *dgamma, const lntune_cuda_backward_launch *l,
                                     int64_t fixed_h, lntune_verify_result *res) {
    if (!c || !v || !main || !dgamma || !l || !res) return LNTUNE_EINVAL;
    const lntune_types t = lntune_backward_verifier_types(v);
    c->main = main;
    c->finish = dgamma;
    c->launch = l;
    c->xtype = t.x;
    c->ptype = t.params;
    lntune_cuda_guarded_set_type(&c->dx, t.x);
    for (int k = 0; k < 2; ++k) {
        lntune_cuda_guarded_set_type(&c->ws[k], LNTUNE_TYPE_F32);
        lntune_cuda_guarded_set_type(&c->out[k], t.params);
    }
    c->message[0] = '\0';
    int rc = LNTUNE_OK, cases = 0;
    running = c;
    for (int halve = 0; halve < 2 && rc == LNTUNE_OK; ++halve) {
        c->halve = halve;
        rc = lntune_backward_verifier_check(v, device_backward, fixed_h, 1, NULL, res);
        cases += res->cases;
    }
    running = NULL;
    res->cases = cases;
    if (c->message[0]) {
        size_t len = strlen(res->message);
        snprintf(res->message + len, sizeof res->message - len, " (%s%s)",
                 c->halve ? "half the grid: " : "", c->message);
        if (strstr(c->message, "kernel:") || strstr(c->message, "launch:")) return LNTUNE_ENODEVICE;
    }
    return rc;
}
