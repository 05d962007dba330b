/*
 * registry.h - the dispatch registry: descriptor -> kernel, read without locks on every call.
 *
 * As in LIBXSMM, a descriptor is zero-filled and then filled, so that its bytes (padding
 * included) hash the same in every call and every run. The table is a fixed array of chains:
 * readers load a chain head with acquire order and walk entries that never change once
 * published; writers (the first call of a key, under the owner's mutex) push a fully built entry
 * with release order. Entries live until the registry is cleared at lntune_close, so a reader
 * never sees freed memory and there is no resize to race with.
 */
#ifndef LNTUNE_REGISTRY_H
#define LNTUNE_REGISTRY_H

#include "lntune_kernel.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* What a call asks for. Zero-fill (lntune_desc_init) before setting fields. */
typedef struct lntune_desc {
    uint8_t op;     /* LNTUNE_DESC_* */
    uint8_t dtype;  /* lntune_dtype */
    uint8_t affine; /* LNTUNE_DESC_* */
    uint8_t reserved;
    int32_t bucket; /* lntune_rows_bucket(rows) */
    int64_t H;
} lntune_desc;

enum { LNTUNE_DESC_LAYERNORM = 0, LNTUNE_DESC_RMSNORM = 1 };

enum {
    LNTUNE_DESC_NO_AFFINE = 0, /* neither gamma nor beta */
    LNTUNE_DESC_GAMMA = 1,     /* gamma, beta optional: what the tuner's affine=1 measures */
    LNTUNE_DESC_BETA_ONLY = 2, /* beta without gamma: built-in only */
};

typedef struct lntune_entry {
    lntune_desc desc;
    lntune_kernel_fn kernel;   /* tuned, or the built-in */
    lntune_kernel_fn fallback; /* the built-in; for a tuned kernel that declines the args */
    int threads;               /* the tuned thread count; 0: the built-in heuristic */
    struct lntune_entry *next;
} lntune_entry;

enum { LNTUNE_REGISTRY_SLOTS = 256 }; /* a power of two */

typedef struct lntune_registry {
    _Atomic(lntune_entry *) slots[LNTUNE_REGISTRY_SLOTS];
} lntune_registry;

static inline void lntune_desc_init(lntune_desc *d) {
    memset(d, 0, sizeof *d);
}

/* A 64-bit mix of the descriptor's two words (splitmix64's finalizer): fast and reproducible. */
static inline uint64_t lntune_desc_hash(const lntune_desc *d) {
    uint64_t w[2];
    memcpy(w, d, sizeof w);
    uint64_t h = w[0] * 0x9e3779b97f4a7c15ULL ^ w[1];
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
        if (memcmp(&e->desc, d, sizeof *d) == 0) return e;
    return NULL;
}

/* Publishes e (fully built) under hash. The caller holds the owner's mutex. */
void lntune_registry_insert(lntune_registry *r, lntune_entry *e, uint64_t hash);

/* Frees every entry. No reader may be running. */
void lntune_registry_clear(lntune_registry *r);

#endif /* LNTUNE_REGISTRY_H */
