/*
 * context.c - lntune_open, lntune_db_status and lntune_close: the handle's messages
 * (messages.c), its dispatcher (dispatch.c) and, in a CUDA build, its GPUs (cuda_dispatch.c).
 */
#include "context.h"

#include "dispatch.h"
#ifdef LNTUNE_HAVE_CUDA
#include "cuda_dispatch.h"
#endif

#include <stdlib.h>
#include <string.h>

int lntune_open(const char *db_path, lntune **out) {
    return lntune_open_flags(db_path, 0, out);
}

int lntune_open_flags(const char *db_path, unsigned flags, lntune **out) {
    if (!out) return LNTUNE_EINVAL;
    *out = NULL;
    if (flags & ~(LNTUNE_OPEN_BATCH_INVARIANT | LNTUNE_OPEN_STRICT)) return LNTUNE_EINVAL;
    lntune *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return LNTUNE_ENOMEM;
    pthread_mutex_init(&ctx->lock, NULL);
    lntune_ctx_messages_init(ctx);
    const char *log = getenv("LNTUNE_LOG");
    ctx->debug = log && strcmp(log, "debug") == 0;
    ctx->batch_invariant = (flags & LNTUNE_OPEN_BATCH_INVARIANT) != 0;
    int rc = lntune_dispatch_open(ctx, db_path);
    if (rc == LNTUNE_OK && (flags & LNTUNE_OPEN_STRICT) && ctx->db_state != LNTUNE_DB_OK)
        rc = ctx->db_state == LNTUNE_DB_MISSING ? LNTUNE_ENOTFOUND : LNTUNE_EDB;
    if (rc != LNTUNE_OK) {
        lntune_close(ctx);
        return rc;
    }
    *out = ctx;
    return LNTUNE_OK;
}

int lntune_db_status(const lntune *ctx, const char **message) {
    if (message) *message = ctx ? ctx->db_why : "no lntune handle";
    return ctx ? ctx->db_state : LNTUNE_DB_MISSING;
}

void lntune_close(lntune *ctx) {
    if (!ctx) return;
#ifdef LNTUNE_HAVE_CUDA
    lntune_gpu_close_all(ctx); /* before the dispatcher: its kernels may run on the GPUs' */
#endif
    lntune_dispatch_close(ctx);
    lntune_ctx_messages_free(ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}
