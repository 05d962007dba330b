/*
 * cuda_check.c - the verifier's suite on the device (see cuda_check.h).
 */
#include "cuda_check.h"

#include "lntune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GUARD = 256 }; /* bytes of poison before and after y on the device */
#define KERNEL_DEVICE_ERROR 99

struct lntune_cuda_checker {
    lntune_cuda *cu;
    int64_t max_floats, max_h;
    uint64_t dx, dy, dg, db; /* device buffers; dx and dy with guard zones */
    /* The kernel of the run in progress, and its verifier's element sizes and poison. */
    void *function;
    const lntune_cuda_launch *launch;
    size_t xsize, ysize, psize;
    unsigned char poison[4]; /* ysize bytes */
    uint32_t poison_word;    /* the same, filling 4 bytes */
    char message[1024];
};

static _Thread_local lntune_cuda_checker *running;

static size_t extent(int64_t rows, int64_t stride, int64_t H) {
    return (size_t)((rows - 1) * stride + H);
}

static int device_error(lntune_cuda_checker *c, const char *what) {
    snprintf(c->message, sizeof c->message, "%s: %s", what, lntune_cuda_errmsg(c->cu));
    return KERNEL_DEVICE_ERROR;
}

/* Checks that the guard zones around y (of y_bytes) still hold the poison. */
static int guards_intact(lntune_cuda_checker *c, uint64_t y, size_t y_bytes) {
    unsigned char guard[GUARD + 16]; /* before y: GUARD plus y's misalignment */
    const uint64_t zones[2] = {c->dy, y + y_bytes};
    for (int z = 0; z < 2; ++z) {
        const size_t bytes = z == 0 ? (size_t)(y - c->dy) : GUARD;
        if (lntune_cuda_dtoh(c->cu, guard, zones[z], bytes))
            return device_error(c, "copy the guard zone back");
        for (size_t i = 0; i + c->ysize <= bytes; i += c->ysize)
            if (memcmp(guard + i, c->poison, c->ysize) != 0) {
                snprintf(c->message, sizeof c->message, "wrote %s y on the device",
                         z ? "past the end of" : "before");
                return KERNEL_DEVICE_ERROR;
            }
    }
    return LNTUNE_KERNEL_OK;
}

/* A lntune_kernel_fn that runs the running checker's kernel on the device. */
static int device_kernel(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end) {
    lntune_cuda_checker *c = running;
    if (row_begin != 0 || row_end != a->rows) return LNTUNE_KERNEL_EUNSUPPORTED;
    const size_t xb = extent(a->rows, a->x_stride, a->H) * c->xsize;
    const size_t yb = extent(a->rows, a->y_stride, a->H) * c->ysize;
    const size_t room = (size_t)c->max_floats * 4 - 64; /* less the largest misalignment */
    if (a->H > c->max_h || xb > room || yb > room) return LNTUNE_KERNEL_EUNSUPPORTED;
    /* Same misalignment as the host copy, so the kernel's alignment checks see what it would. */
    const uint64_t x = c->dx + GUARD + (uintptr_t)a->x % 16;
    const uint64_t y = c->dy + GUARD + (uintptr_t)a->y % 16;
    lntune_kernel_args d = *a;
    d.x = (const void *)(uintptr_t)x;
    d.y = (void *)(uintptr_t)y;
    d.mean = d.rstd = NULL;
    if (lntune_cuda_htod(c->cu, x, a->x, xb)) return device_error(c, "copy x");
    if (lntune_cuda_fill32(c->cu, c->dy, c->poison_word, (size_t)c->max_floats + 2 * GUARD / 4))
        return device_error(c, "poison y");
    if (lntune_cuda_htod(c->cu, y, a->y, yb)) return device_error(c, "copy y");
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
    const lntune_cuda_launch *l = c->launch;
    if (l->max_h && a->H > l->max_h) return LNTUNE_KERNEL_EUNSUPPORTED;
    if (lntune_cuda_launch_kernel(c->cu, c->function, lntune_cuda_launch_grid(l, a->rows), l->block,
                                  lntune_cuda_launch_smem(l, a->H), NULL, &d))
        return device_error(c, "launch");
    if (lntune_cuda_sync(c->cu)) return device_error(c, "kernel");
    if (lntune_cuda_dtoh(c->cu, a->y, y, yb)) return device_error(c, "copy y back");
    return guards_intact(c, y, yb);
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
    const size_t bytes = (size_t)max_floats * 4 + 2 * GUARD;
    if (lntune_cuda_alloc(cu, bytes, &c->dx) || lntune_cuda_alloc(cu, bytes, &c->dy) ||
        lntune_cuda_alloc(cu, (size_t)max_h * 4, &c->dg) ||
        lntune_cuda_alloc(cu, (size_t)max_h * 4, &c->db)) {
        lntune_cuda_checker_destroy(c);
        return LNTUNE_ENODEVICE;
    }
    *out = c;
    return LNTUNE_OK;
}

void lntune_cuda_checker_destroy(lntune_cuda_checker *c) {
    if (!c) return;
    lntune_cuda_free(c->cu, c->dx);
    lntune_cuda_free(c->cu, c->dy);
    lntune_cuda_free(c->cu, c->dg);
    lntune_cuda_free(c->cu, c->db);
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
    c->ysize = lntune_type_size(t.y);
    c->psize = lntune_type_size(t.params);
    const uint32_t p = lntune_verify_poison(t.y);
    const uint16_t p16 = (uint16_t)p;
    memcpy(c->poison, c->ysize == 4 ? (const void *)&p : (const void *)&p16, c->ysize);
    c->poison_word = c->ysize == 4 ? p : (uint32_t)p16 << 16 | p16;
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
