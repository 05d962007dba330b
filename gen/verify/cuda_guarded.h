/*
 * cuda_guarded.h - device buffers for the device checkers (cuda_check.c,
 * cuda_check_backward.c): a tensor surrounded by poison, so that a write outside its extent, or
 * an element never written, is seen when the buffer comes back; and inputs placed at their host
 * copy's misalignment.
 */
#ifndef LNTUNE_CUDA_GUARDED_H
#define LNTUNE_CUDA_GUARDED_H

#include "cuda_driver.h"

#include <stddef.h>
#include <stdint.h>

enum { LNTUNE_CUDA_GUARD = 256 }; /* bytes of poison before and after the tensor */

/* Bytes from the first element of rows x H at stride (elements) to the last, of esize each. */
static inline size_t lntune_cuda_extent(int64_t rows, int64_t stride, int64_t H, size_t esize) {
    return (size_t)((rows - 1) * stride + H) * esize;
}

/*
 * Copies bytes of host into the device buffer at base (capacity bytes) at host's misalignment
 * (mod 16), so that a kernel's alignment checks see what they would on the host; *dev: where.
 * LNTUNE_EOVERFLOW if they do not fit; else the driver's code.
 */
int lntune_cuda_put_input(lntune_cuda *cu, uint64_t base, size_t capacity, const void *host,
                          size_t bytes, uint64_t *dev);

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

/* Whether the poison around the bytes at dev is intact: LNTUNE_OK, else LNTUNE_EVERIFY with msg
 * saying what (written before or past the tensor, name; or the device failed). */
int lntune_cuda_guarded_verify(lntune_cuda *cu, const lntune_cuda_guarded *g, uint64_t dev,
                               size_t bytes, const char *name, char *msg, size_t msglen);

#endif /* LNTUNE_CUDA_GUARDED_H */
