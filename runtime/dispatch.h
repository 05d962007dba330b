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

/*
 * The rows bucket a call of rows is keyed by (lntune_rows_bucket); under
 * LNTUNE_OPEN_BATCH_INVARIANT the largest for every call, so that one registry entry, resolved
 * by the first call whatever its rows (lntune_dispatch_find_best ignores them then), serves all.
 */
int lntune_dispatch_bucket(const lntune *ctx, int64_t rows);

/* A best record, copied out of the database's callback. */
typedef struct lntune_best_copy {
    int found;
    char variant[512];
    char artifact_key[128];
    int threads;
    int64_t tuned_rows;
    double median_ns;
    int64_t H;                  /* the record's: another H than the call's for a nearest-H winner */
    int any_alignment;          /* it may serve rows less aligned than its H's (tuning_db.h) */
    int64_t reach_lo, reach_hi; /* the H it serves no slower than the built-in; 0: no limit */
    char refused[320]; /* why the nearest winner that does not serve the call does not; or "" */
} lntune_best_copy;

/*
 * The best record of target ("cpu", "cuda") on hardware_id for d at rows, else for the nearest
 * tuned bucket, else of the nearest H that reads H at run time (the policy in dispatch.c);
 * under LNTUNE_OPEN_BATCH_INVARIANT the one of d's H tuned at the most rows, whatever rows.
 * LNTUNE_ENOTFOUND if none. Under ctx->lock.
 */
int lntune_dispatch_find_best(lntune *ctx, int64_t hardware_id, const char *target,
                              const lntune_desc *d, int64_t rows, lntune_best_copy *best);

/* "layernorm f32 H=768 rows=8 (bucket 1), gamma": what a debug line is about (rows <= 0: "any
 * rows (batch-invariant)"). */
void lntune_dispatch_describe(const lntune_desc *d, int64_t rows, char *buf, size_t size);
const char *lntune_dispatch_op_name(int op); /* "layernorm", "rmsnorm" */

/* The handle's pool, created on first use; NULL (run on one thread) if it cannot be. */
lntune_pool *lntune_dispatch_pool(lntune *ctx);

#endif /* LNTUNE_DISPATCH_H */
