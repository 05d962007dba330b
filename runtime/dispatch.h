/*
 * dispatch.h - everything an lntune handle does off the hot path: opening the tuning database,
 * resolving a descriptor to a kernel on its first call, and creating the thread pool.
 */
#ifndef LNTUNE_DISPATCH_H
#define LNTUNE_DISPATCH_H

#include "context.h"

/* Opens db_path read-only and finds this machine in it. An unusable database is not an error. */
int lntune_dispatch_open(lntune *ctx, const char *db_path);
/* Releases the pool, the registry, loaded kernels and the database. No call may be running. */
void lntune_dispatch_close(lntune *ctx);

/*
 * The registry entry of d (hash = lntune_desc_hash(d)), resolving and inserting it first if no
 * call has asked for it yet. rows is the calling row count, inside d's bucket.
 */
int lntune_dispatch_resolve(lntune *ctx, const lntune_desc *d, uint64_t hash, int64_t rows,
                            const lntune_entry **out);

/* The handle's pool, created on first use; NULL (run on one thread) if it cannot be. */
lntune_pool *lntune_dispatch_pool(lntune *ctx);

#endif /* LNTUNE_DISPATCH_H */
