/*
 * cuda_guarded.c - poisoned device buffers for the device checkers (see cuda_guarded.h).
 */
#include "cuda_guarded.h"

#include "dtypes.h"
#include "lntune.h"
#include "verify.h"

#include <stdio.h>
#include <string.h>

void lntune_cuda_guarded_set_type(lntune_cuda_guarded *g, int type) {
    const uint32_t p = lntune_verify_poison(type);
    g->esize = lntune_type_size(type);
    /* the poison repeated over 4 bytes: an element of 4, 2 or 1 bytes (a quantized y's code) */
    g->word = g->esize == 4   ? p
              : g->esize == 2 ? (p & 0xffffu) * 0x10001u
                              : (p & 0xffu) * 0x1010101u;
    memcpy(g->poison, &g->word, g->esize); /* the same bytes in either order */
}

int lntune_cuda_guarded_alloc(lntune_cuda *cu, size_t capacity, int type, lntune_cuda_guarded *g) {
    memset(g, 0, sizeof *g);
    g->capacity = (capacity + 3) / 4 * 4;
    lntune_cuda_guarded_set_type(g, type);
    const int rc = lntune_cuda_alloc(cu, g->capacity + 2 * LNTUNE_CUDA_GUARD, &g->base);
    if (rc) g->capacity = 0; /* nothing fits */
    return rc;
}

void lntune_cuda_guarded_free(lntune_cuda *cu, lntune_cuda_guarded *g) {
    lntune_cuda_free(cu, g->base);
    g->base = 0;
    g->capacity = 0;
}

int lntune_cuda_guarded_place(lntune_cuda *cu, lntune_cuda_guarded *g, const void *host,
                              size_t bytes, uint64_t *dev) {
    const size_t shift = host ? (uintptr_t)host % 16 : 0;
    if (bytes + shift > g->capacity) return LNTUNE_EOVERFLOW;
    *dev = g->base + LNTUNE_CUDA_GUARD + shift;
    int rc = lntune_cuda_fill32(cu, g->base, g->word, g->capacity / 4 + LNTUNE_CUDA_GUARD / 2);
    if (rc == LNTUNE_OK && host) rc = lntune_cuda_htod(cu, *dev, host, bytes);
    return rc;
}

int lntune_cuda_put_input(lntune_cuda *cu, uint64_t base, size_t capacity, const void *host,
                          size_t bytes, uint64_t *dev) {
    *dev = base + (uintptr_t)host % 16;
    if (bytes + 16 > capacity) return LNTUNE_EOVERFLOW;
    return lntune_cuda_htod(cu, *dev, host, bytes);
}

/* 0 if the poison around the bytes at dev is intact; 1 written before, 2 after; -1 device error. */
static int intact(lntune_cuda *cu, const lntune_cuda_guarded *g, uint64_t dev, size_t bytes) {
    unsigned char guard[LNTUNE_CUDA_GUARD + 16]; /* before: the guard plus the misalignment */
    const uint64_t zones[2] = {g->base, dev + bytes};
    for (int z = 0; z < 2; ++z) {
        const size_t n = z == 0 ? (size_t)(dev - g->base) : LNTUNE_CUDA_GUARD;
        if (lntune_cuda_dtoh(cu, guard, zones[z], n)) return -1;
        for (size_t i = 0; i + g->esize <= n; i += g->esize)
            if (memcmp(guard + i, g->poison, g->esize) != 0) return z + 1;
    }
    return 0;
}

int lntune_cuda_guarded_verify(lntune_cuda *cu, const lntune_cuda_guarded *g, uint64_t dev,
                               size_t bytes, const char *name, char *msg, size_t msglen) {
    const int rc = intact(cu, g, dev, bytes);
    if (rc < 0)
        snprintf(msg, msglen, "copy a guard zone back: %s", lntune_cuda_errmsg(cu));
    else if (rc > 0)
        snprintf(msg, msglen, "wrote %s %s on the device", rc == 2 ? "past the end of" : "before",
                 name);
    return rc == 0 ? LNTUNE_OK : LNTUNE_EVERIFY;
}
