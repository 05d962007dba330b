/*
 * cuda_check.c - the verifier's suite on the device (see cuda_check.h).
 */
#include "cuda_check.h"

#include "cuda_guarded.h"
#include "lntune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows of mean and rstd (and of a quantized y's scales) a run may ask for. */
enum { STATS_ROWS = 4096 };
#define KERNEL_DEVICE_ERROR 99

struct lntune_cuda_checker {
    lntune_cuda *cu;
    int64_t max_floats, max_h;
    uint64_t dx, dg, db, dstats; /* x, gamma, beta, mean and rstd */
    lntune_cuda_guarded y, residual, residual_out;
    lntune_cuda_guarded scales; /* a quantized y's scales per row (fp32) */
    /* The kernel of the run in progress and its verifier's element sizes. */
    void *function;
    const lntune_cuda_launch *launch;
    size_t xsize, psize;
    char message[1024];
};

static _Thread_local lntune_cuda_checker *running;

static int device_error(lntune_cuda_checker *c, const char *what) {
    snprintf(c->message, sizeof c->message, "%s: %s", what, lntune_cuda_errmsg(c->cu));
    return KERNEL_DEVICE_ERROR;
}

/* Poisons g, then copies bytes of host (an extent of rows) into it at host's misalignment. */
static int place(lntune_cuda_checker *c, lntune_cuda_guarded *g, const void *host, size_t bytes,
                 const char *name, uint64_t *dev) {
    const int rc = lntune_cuda_guarded_place(c->cu, g, host, bytes, dev);
    if (rc == LNTUNE_EOVERFLOW) return LNTUNE_KERNEL_EUNSUPPORTED;
    if (rc == LNTUNE_OK) return LNTUNE_KERNEL_OK;
    char what[64];
    snprintf(what, sizeof what, "copy %s", name);
    return device_error(c, what);
}

/* Checks that the guard zones around the bytes at dev in g still hold the poison. */
static int guards_intact(lntune_cuda_checker *c, const lntune_cuda_guarded *g, uint64_t dev,
                         size_t bytes, const char *name) {
    return lntune_cuda_guarded_verify(c->cu, g, dev, bytes, name, c->message, sizeof c->message)
               ? KERNEL_DEVICE_ERROR
               : LNTUNE_KERNEL_OK;
}

/* Copies the fused residual's tensors and the statistics to the device, into d. */
static int place_fused(lntune_cuda_checker *c, const lntune_kernel_args *a, lntune_kernel_args *d) {
    const size_t rb = lntune_cuda_extent(a->rows, a->residual_stride, a->H, c->residual.esize);
    const size_t ob = a->residual_out ? lntune_cuda_extent(a->rows, a->residual_out_stride, a->H,
                                                           c->residual_out.esize)
                                      : 0;
    if ((a->mean || a->rstd) && a->rows > STATS_ROWS) return LNTUNE_KERNEL_EUNSUPPORTED;
    uint64_t r, o;
    int rc = place(c, &c->residual, a->residual, rb, "residual", &r);
    if (rc) return rc;
    d->residual = (const void *)(uintptr_t)r;
    if (a->residual_out) {
        if ((rc = place(c, &c->residual_out, a->residual_out, ob, "residual_out", &o))) return rc;
        d->residual_out = (void *)(uintptr_t)o;
    }
    const size_t sb = (size_t)a->rows * sizeof(float);
    if (a->mean) {
        if (lntune_cuda_htod(c->cu, c->dstats, a->mean, sb)) return device_error(c, "copy mean");
        d->mean = (float *)(uintptr_t)c->dstats;
    }
    if (a->rstd) {
        const uint64_t at = c->dstats + STATS_ROWS * sizeof(float);
        if (lntune_cuda_htod(c->cu, at, a->rstd, sb)) return device_error(c, "copy rstd");
        d->rstd = (float *)(uintptr_t)at;
    }
    return LNTUNE_KERNEL_OK;
}

/* Copies back what a fused run wrote (and residual, which it must not have), guards checked. */
static int fetch_fused(lntune_cuda_checker *c, const lntune_kernel_args *a,
                       const lntune_kernel_args *d) {
    const uint64_t r = (uintptr_t)d->residual, o = (uintptr_t)d->residual_out;
    const size_t rb = lntune_cuda_extent(a->rows, a->residual_stride, a->H, c->residual.esize);
    int rc = guards_intact(c, &c->residual, r, rb, "residual");
    if (rc) return rc;
    /* The verifier checks that residual is unchanged: it gets the device's copy to check. */
    if (lntune_cuda_dtoh(c->cu, (void *)a->residual, r, rb))
        return device_error(c, "copy residual back");
    if (a->residual_out) {
        const size_t ob =
            lntune_cuda_extent(a->rows, a->residual_out_stride, a->H, c->residual_out.esize);
        if ((rc = guards_intact(c, &c->residual_out, o, ob, "residual_out"))) return rc;
        if (lntune_cuda_dtoh(c->cu, a->residual_out, o, ob))
            return device_error(c, "copy residual_out back");
    }
    const size_t sb = (size_t)a->rows * sizeof(float);
    if (a->mean && lntune_cuda_dtoh(c->cu, a->mean, (uintptr_t)d->mean, sb))
        return device_error(c, "copy mean back");
    if (a->rstd && lntune_cuda_dtoh(c->cu, a->rstd, (uintptr_t)d->rstd, sb))
        return device_error(c, "copy rstd back");
    return LNTUNE_KERNEL_OK;
}

/* Copies a quantized y's row scales (the verifier's poison where it expects a write) to the
 * device between poisoned guard zones, into d. */
static int place_scales(lntune_cuda_checker *c, const lntune_kernel_args *a,
                        lntune_kernel_args *d) {
    if (a->rows > STATS_ROWS) return LNTUNE_KERNEL_EUNSUPPORTED;
    uint64_t dev;
    const int rc =
        place(c, &c->scales, a->y_scales, (size_t)a->rows * sizeof(float), "y_scales", &dev);
    if (rc == LNTUNE_KERNEL_OK) d->y_scales = (float *)(uintptr_t)dev;
    return rc;
}

/* Copies the row scales back, their guard zones checked. */
static int fetch_scales(lntune_cuda_checker *c, const lntune_kernel_args *a,
                        const lntune_kernel_args *d) {
    const uint64_t dev = (uintptr_t)d->y_scales;
    const size_t bytes = (size_t)a->rows * sizeof(float);
    const int rc = guards_intact(c, &c->scales, dev, bytes, "y_scales");
    if (rc) return rc;
    if (lntune_cuda_dtoh(c->cu, a->y_scales, dev, bytes))
        return device_error(c, "copy y_scales back");
    return LNTUNE_KERNEL_OK;
}

/* A lntune_kernel_fn that runs the running checker's kernel on the device. */
static int device_kernel(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end) {
    lntune_cuda_checker *c = running;
    if (row_begin != 0 || row_end != a->rows) {
        /* Some rows of the call (the verifier's batch-invariance check): one launch over them
         * alone, as liblntune would make it for a call of those rows. */
        if (row_begin < 0 || row_end > a->rows || row_begin >= row_end)
            return LNTUNE_KERNEL_EUNSUPPORTED;
        lntune_kernel_args part = *a;
        part.rows = row_end - row_begin;
        part.x = (const unsigned char *)a->x + row_begin * a->x_stride * (int64_t)c->xsize;
        part.y = (unsigned char *)a->y + row_begin * a->y_stride * (int64_t)c->y.esize;
        if (a->residual)
            part.residual = (const unsigned char *)a->residual +
                            row_begin * a->residual_stride * (int64_t)c->residual.esize;
        if (a->residual_out)
            part.residual_out = (unsigned char *)a->residual_out +
                                row_begin * a->residual_out_stride * (int64_t)c->residual_out.esize;
        if (a->mean) part.mean = a->mean + row_begin;
        if (a->rstd) part.rstd = a->rstd + row_begin;
        if (a->y_scales) part.y_scales = a->y_scales + row_begin;
        return device_kernel(&part, 0, part.rows);
    }
    const size_t xb = lntune_cuda_extent(a->rows, a->x_stride, a->H, c->xsize);
    const size_t yb = lntune_cuda_extent(a->rows, a->y_stride, a->H, c->y.esize);
    const lntune_cuda_launch *l = c->launch;
    if (a->H > c->max_h || (l->max_h && a->H > l->max_h)) return LNTUNE_KERNEL_EUNSUPPORTED;
    lntune_kernel_args d = *a;
    d.mean = d.rstd = NULL;
    uint64_t x, y;
    int rc = lntune_cuda_put_input(c->cu, c->dx, (size_t)c->max_floats * 4, a->x, xb, &x);
    if (rc == LNTUNE_EOVERFLOW) return LNTUNE_KERNEL_EUNSUPPORTED;
    if (rc) return device_error(c, "copy x");
    d.x = (const void *)(uintptr_t)x;
    rc = place(c, &c->y, a->y, yb, "y", &y);
    if (rc) return rc;
    d.y = (void *)(uintptr_t)y;
    if (a->y_scales && (rc = place_scales(c, a, &d))) return rc;
    if (a->residual && (rc = place_fused(c, a, &d))) return rc;
    if (a->gamma) {
        if (lntune_cuda_htod(c->cu, c->dg, a->gamma, (size_t)a->H * c->psize))
            return device_error(c, "copy gamma");
        d.gamma = (const void *)(uintptr_t)c->dg;
    }
    if (a->beta) {
        if (lntune_cuda_htod(c->cu, c->db, a->beta, (size_t)a->H * c->psize))
            return device_error(c, "copy beta");
        d.beta = (const void *)(uintptr_t)c->db;
    }
    if (lntune_cuda_launch_kernel(c->cu, c->function, lntune_cuda_launch_grid(l, a->rows), l->block,
                                  lntune_cuda_launch_smem(l, a->H), NULL, &d))
        return device_error(c, "launch");
    if (lntune_cuda_sync(c->cu)) return device_error(c, "kernel");
    if ((rc = guards_intact(c, &c->y, y, yb, "y"))) return rc;
    if (lntune_cuda_dtoh(c->cu, a->y, y, yb)) return device_error(c, "copy y back");
    if (a->y_scales && (rc = fetch_scales(c, a, &d))) return rc;
    return a->residual ? fetch_fused(c, a, &d) : LNTUNE_KERNEL_OK;
}

int lntune_cuda_checker_create(lntune_cuda *cu, int64_t max_floats, int64_t max_h,
                               lntune_cuda_checker **out) {
    if (!out) return LNTUNE_EINVAL;
    *out = NULL;
    if (!cu || max_floats < 16 || max_h < 1) return LNTUNE_EINVAL;
    lntune_cuda_checker *c = calloc(1, sizeof *c);
    if (!c) return LNTUNE_ENOMEM;
    c->cu = cu;
    c->max_floats = max_floats;
    c->max_h = max_h;
    const size_t bytes = (size_t)max_floats * 4;
    if (lntune_cuda_alloc(cu, bytes, &c->dx) ||
        lntune_cuda_guarded_alloc(cu, bytes, LNTUNE_TYPE_F32, &c->y) ||
        lntune_cuda_guarded_alloc(cu, bytes, LNTUNE_TYPE_F32, &c->residual) ||
        lntune_cuda_guarded_alloc(cu, bytes, LNTUNE_TYPE_F32, &c->residual_out) ||
        lntune_cuda_alloc(cu, (size_t)max_h * 4, &c->dg) ||
        lntune_cuda_alloc(cu, (size_t)max_h * 4, &c->db) ||
        lntune_cuda_alloc(cu, 2 * STATS_ROWS * sizeof(float), &c->dstats) ||
        /* room for the host copy's misalignment (place: up to 15 bytes) */
        lntune_cuda_guarded_alloc(cu, (STATS_ROWS + 4) * sizeof(float), LNTUNE_TYPE_F32,
                                  &c->scales)) {
        lntune_cuda_checker_destroy(c);
        return LNTUNE_ENODEVICE;
    }
    *out = c;
    return LNTUNE_OK;
}

void lntune_cuda_checker_destroy(lntune_cuda_checker *c) {
    if (!c) return;
    lntune_cuda_free(c->cu, c->dx);
    lntune_cuda_guarded_free(c->cu, &c->y);
    lntune_cuda_guarded_free(c->cu, &c->residual);
    lntune_cuda_guarded_free(c->cu, &c->residual_out);
    lntune_cuda_free(c->cu, c->dg);
    lntune_cuda_free(c->cu, c->db);
    lntune_cuda_free(c->cu, c->dstats);
    lntune_cuda_guarded_free(c->cu, &c->scales);
    free(c);
}

int lntune_cuda_checker_run(lntune_cuda_checker *c, lntune_verifier *v, void *function,
                            const lntune_cuda_launch *l, int affine, int64_t fixed_h,
                            lntune_verify_result *res) {
    if (!c || !v || !function || !l || !res) return LNTUNE_EINVAL;
    c->function = function;
    c->launch = l;
    const lntune_types t = lntune_verifier_types(v);
    c->xsize = lntune_type_size(t.x);
    c->psize = lntune_type_size(t.params);
    lntune_cuda_guarded_set_type(&c->y, t.y);
    lntune_cuda_guarded_set_type(&c->residual, lntune_types_residual(t));
    lntune_cuda_guarded_set_type(&c->residual_out, lntune_types_residual(t));
    c->message[0] = '\0';
    running = c;
    int rc = lntune_verifier_check(v, device_kernel, affine, fixed_h, 1, NULL, res);
    running = NULL;
    if (c->message[0]) {
        size_t len = strlen(res->message);
        snprintf(res->message + len, sizeof res->message - len, " (%s)", c->message);
        if (strstr(c->message, "kernel:") || strstr(c->message, "launch:")) return LNTUNE_ENODEVICE;
    }
    return rc;
}

const char *lntune_cuda_checker_errmsg(const lntune_cuda_checker *c) {
    return c ? c->message : "";
}
