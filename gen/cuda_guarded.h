/*
 * cuda_guarded.h - a device buffer whose tensor is surrounded by poison, for the device
 * checkers (cuda_check.c, cuda_check_backward.c): a write outside the tensor's extent, or an
 * element never written, is seen when the buffer comes back.
 */
#ifndef LNTUNE_CUDA_GUARDED_H
#define LNTUNE_CUDA_GUARDED_H

#include "cuda_driver.h"

#include <stddef.h>
#include <stdint.h>

enum { LNTUNE_CUDA_GUARD = 256 }; /* bytes of poison before and after the tensor */

typedef struct lntune_cuda_guarded {
    uint64_t base;
    size_t capacity;         /* bytes a tensor may take, its misalignment included */
    size_t esize;            /* element bytes */
    unsigned char poison[4]; /* esize bytes */
    uint32_t word;           /* the poison filling 4 bytes */
} lntune_cuda_guarded;

/* Allocates room for capacity bytes plus the guards; poison of type (verify.h's). */
int lntune_cuda_guarded_alloc(lntune_cuda *cu, size_t capacity, int type, lntune_cuda_guarded *g);
void lntune_cuda_guarded_free(lntune_cuda *cu, lntune_cuda_guarded *g);
void lntune_cuda_guarded_set_type(lntune_cuda_guarded *g, int type);

/*
 * Poisons the whole buffer, then copies bytes of host (NULL: none) to *dev, which sits after the
 * front guard at host's misalignment (mod 16; 0 without host). LNTUNE_EOVERFLOW if bytes do not
 * fit; else the driver's code.
 */
int lntune_cuda_guarded_place(lntune_cuda *cu, lntune_cuda_guarded *g, const void *host,
                              size_t bytes, uint64_t *dev);

/* 0 if the poison around the bytes at dev is intact; 1 written before, 2 after; -1 device error. */
int lntune_cuda_guarded_intact(lntune_cuda *cu, const lntune_cuda_guarded *g, uint64_t dev,
                               size_t bytes);

/* lntune_cuda_guarded_intact with its message in msg (name: the tensor's): LNTUNE_OK, else
 * LNTUNE_EVERIFY (written outside, or the device failed: msg says which). */
int lntune_cuda_guarded_verify(lntune_cuda *cu, const lntune_cuda_guarded *g, uint64_t dev,
                               size_t bytes, const char *name, char *msg, size_t msglen);

#endif /* LNTUNE_CUDA_GUARDED_H */
