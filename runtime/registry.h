/*
 * registry.h - the dispatch registry: descriptor -> kernel, read without locks on every call.
 *
 * As in LIBXSMM, a descriptor is fully defined (see lntune_desc), so that it hashes the same in
 * every call and every run. The table is a fixed array of chains:
 * readers load a chain head with acquire order and walk entries that never change once
 * published; writers (the first call of a key, under the owner's mutex) push a fully built entry
 * with release order. Entries live until the registry is cleared at lntune_close, so a reader
 * never sees freed memory and there is no resize to race with.
 */
#ifndef LNTUNE_REGISTRY_H
#define LNTUNE_REGISTRY_H

#include "lntune_kernel.h"
#include "lntune_kernel_backward.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What a call asks for: op, dtype (the packed type tuple), affine kind, fusion (fusion.h), device
 * and rows bucket packed into one word, H in the other (device: 0 for the CPU, 1 + device_index
 * for CUDA). Every bit is defined (no padding to
 * forget to zero), and the hash and the comparison read two integers that were just computed in
 * registers, never bytes stored a moment before (a store-forwarding stall costs more than the rest
 * of the lookup).
 */
typedef struct lntune_desc {
    uint64_t kind; /* op (4 bits) | dtype (12: lntune_types_packed) << 4 | affine << 16 |
                      fusion << 20 | device << 24 | (uint32_t)bucket << 32 */
    int64_t H;
} lntune_desc;

enum {
    LNTUNE_DESC_LAYERNORM = 0,
    LNTUNE_DESC_RMSNORM = 1,
    LNTUNE_DESC_LAYERNORM_BACKWARD = 2, /* backward descriptors: dtype packs (x/dy/dx, params) */
    LNTUNE_DESC_RMSNORM_BACKWARD = 3,
};

enum {
    LNTUNE_DESC_NO_AFFINE = 0, /* neither gamma nor beta */
    LNTUNE_DESC_GAMMA = 1,     /* gamma, beta optional: what the tuner's affine=1 measures */
    LNTUNE_DESC_BETA_ONLY = 2, /* beta without gamma: built-in only */
    /* gamma with a weight offset, beta optional: the tuner's affine=2 (its built-in is the
     * GAMMA one of fp32 gamma/beta, on sums formed for the call: builtin_offset.h) */
    LNTUNE_DESC_GAMMA_OFFSET = 3,
};

typedef struct lntune_gpu_kernel lntune_gpu_kernel; /* cuda_dispatch.c */

typedef struct lntune_entry {
    lntune_desc desc;
    const lntune_gpu_kernel *gpu; /* CUDA entries: the kernel, tuned or built-in; else NULL */
    lntune_kernel_fn kernel;      /* tuned, or the built-in */
    lntune_kernel_fn fallback;    /* the built-in; for a tuned kernel that declines the args */
    /* A quantized y: no built-in (kernel NULL unless tuned, fallback NULL); this float built-in
     * of the same tuple with an fp32 y, whose rows builtin_quant.h quantizes. */
    lntune_kernel_fn quant_float;
    /* The built-in with non-temporal stores, for built-in calls of at least streaming_elements
     * (rows x H); NULL: none (see lntune_builtin_streaming_kernel), or rows of H less aligned
     * than this machine streams well (lntune_builtin_rows_stream). */
    lntune_kernel_fn streaming;
    int64_t streaming_elements;
    /* A weight offset whose built-ins (fallback, streaming, quant_float) take fp32 gamma/beta:
     * api.c forms offset + gamma for them (builtin_offset.h). 0: they read the offset. */
    int offset_params;
    lntune_backward_kernel_fn backward;          /* backward entries: tuned, or the built-in */
    lntune_backward_kernel_fn backward_fallback; /* backward entries: the built-in */
    int threads; /* the tuned thread count; 0: the built-in heuristic */
    /* What lntune_query reports (the decision of dispatch.c or cuda_dispatch.c), owned by the
     * entry: the tuned winner's variant (NULL: a built-in serves), the H and rows it was tuned
     * at, and why this kernel (the text of the debug line). */
    char *variant;
    char *reason;
    int64_t tuned_H, tuned_rows;
    struct lntune_entry *next;
} lntune_entry;

enum { LNTUNE_REGISTRY_SLOTS = 256 }; /* a power of two */

typedef struct lntune_registry {
    _Atomic(lntune_entry *) slots[LNTUNE_REGISTRY_SLOTS];
} lntune_registry;

static inline lntune_desc lntune_desc_make(int op, int dtype, int affine, int fusion,
                                           int32_t bucket, int64_t H) {
    lntune_desc d = {(uint64_t)(op & 0xf) | (uint64_t)(dtype & 0xfff) << 4 |
                         (uint64_t)(affine & 0xf) << 16 | (uint64_t)(fusion & 0xf) << 20 |
                         (uint64_t)(uint32_t)bucket << 32,
                     H};
    return d;
}

static inline int lntune_desc_op(const lntune_desc *d) {
    return (int)(d->kind & 0xf);
}
static inline int lntune_desc_dtype(const lntune_desc *d) {
    return (int)(d->kind >> 4 & 0xfff);
}
static inline int lntune_desc_affine(const lntune_desc *d) {
    return (int)(d->kind >> 16 & 0xf);
}
static inline int lntune_desc_fusion(const lntune_desc *d) {
    return (int)(d->kind >> 20 & 0xf);
}
static inline int lntune_desc_device(const lntune_desc *d) {
    return (int)(d->kind >> 24 & 0xff);
}
static inline int32_t lntune_desc_bucket(const lntune_desc *d) {
    return (int32_t)(uint32_t)(d->kind >> 32);
}

static inline uint64_t lntune_desc_hash(const lntune_desc *d) {
    uint64_t h = d->kind * 0x9e3779b97f4a7c15ULL ^ (uint64_t)d->H;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

static inline const lntune_entry *lntune_registry_find(const lntune_registry *r,
                                                       const lntune_desc *d, uint64_t hash) {
    const lntune_entry *e = atomic_load_explicit(
        (_Atomic(lntune_entry *) *)&r->slots[hash & (LNTUNE_REGISTRY_SLOTS - 1)],
        memory_order_acquire);
    for (; e; e = e->next)
        if (e->desc.kind == d->kind && e->desc.H == d->H) return e;
    return NULL;
}

/* Publishes e (fully built) under hash. The caller holds the owner's mutex. */
void lntune_registry_insert(lntune_registry *r, lntune_entry *e, uint64_t hash);

/* Frees every entry. No reader may be running. */
void lntune_registry_clear(lntune_registry *r);

#endif /* LNTUNE_REGISTRY_H */
