/*
 * registry.c - the writer side of the dispatch registry (see registry.h for the protocol).
 */
#include "registry.h"

#include <stdlib.h>

void lntune_registry_insert(lntune_registry *r, lntune_entry *e, uint64_t hash) {
    _Atomic(lntune_entry *) *slot = &r->slots[hash & (LNTUNE_REGISTRY_SLOTS - 1)];
    e->next = atomic_load_explicit(slot, memory_order_relaxed);
    atomic_store_explicit(slot, e, memory_order_release);
}

void lntune_registry_clear(lntune_registry *r) {
    for (int i = 0; i < LNTUNE_REGISTRY_SLOTS; ++i) {
        lntune_entry *e = atomic_load_explicit(&r->slots[i], memory_order_relaxed);
        while (e) {
            lntune_entry *next = e->next;
            free(e->variant);
            free(e->reason);
            free(e);
            e = next;
        }
        atomic_store_explicit(&r->slots[i], NULL, memory_order_relaxed);
    }
}
