/*
 * context.h - the inside of an lntune handle, shared by the runtime's files and no one else.
 */
#ifndef LNTUNE_CONTEXT_H
#define LNTUNE_CONTEXT_H

#include "lntune.h"
#include "pool.h"
#include "registry.h"
#include "tuning_db.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct lntune_loaded lntune_loaded; /* an artifact dlopen'd by dispatch.c */
typedef struct lntune_msg lntune_msg;       /* one thread's message buffer (context.c) */
typedef struct lntune_gpu lntune_gpu;       /* one CUDA device in use (cuda_dispatch.c) */
struct lntune_nvrtc;

enum { LNTUNE_MAX_BUCKETS = 32, LNTUNE_MAX_GPUS = 64 };

struct lntune {
    lntune_registry registry; /* read without locks on every call */
    pthread_mutex_t lock;     /* serializes first calls: the DB, registry inserts, loads, pool */
    lntune_db *db;            /* NULL: no usable tuning database */
    int cpu_known;            /* the database knows this CPU: hardware_id is its row */
    int code_trusted;         /* its artifacts may be loaded (lntune_db_code_trusted) */
    char code_why[600];       /* else why not */
    int db_state;             /* LNTUNE_DB_OK, ...: what lntune_db_status returns */
    char db_why[1200];        /* and its sentence */
    int64_t hardware_id;
    lntune_cpu_info cpu;
    int64_t streaming_bytes;         /* built-in calls moving this much store non-temporally */
    int64_t streaming_row_alignment; /* on rows whose starts keep this alignment (bytes) */
    int max_threads;             /* threads a CPU call may use: $LNTUNE_NUM_THREADS, else cores */
    int debug;                   /* LNTUNE_LOG=debug */
    int batch_invariant;         /* LNTUNE_OPEN_BATCH_INVARIANT: one kernel for every rows */
    _Atomic(lntune_pool *) pool; /* created on the first multi-threaded call */
    lntune_loaded *loaded;
    lntune_gpu *gpus[LNTUNE_MAX_GPUS]; /* by device index, opened on its first call */
    struct lntune_nvrtc *nvrtc;        /* for CUDA built-ins a build without NVRTC left as source */
    int nvrtc_tried;
    /* The rows buckets of the best table in increasing order, each with a row count inside it,
     * found by probing lntune_rows_bucket, for the nearest-bucket search of dispatch.c. */
    int nbuckets;
    int bucket_id[LNTUNE_MAX_BUCKETS];
    int64_t bucket_rows[LNTUNE_MAX_BUCKETS];
    /* Messages: one buffer per thread per handle (a pthread key), listed so close frees all. */
    pthread_key_t msg_key;
    int have_msg_key;
    pthread_mutex_t msg_lock;
    lntune_msg *msgs;
};

/* The handle's message buffers (messages.c): set up by lntune_open, freed by lntune_close. */
void lntune_ctx_messages_init(lntune *ctx);
void lntune_ctx_messages_free(lntune *ctx);

/* Sets this thread's message on ctx (printf-style) and returns rc. */
int lntune_ctx_fail(lntune *ctx, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "lntune: ..." to stderr when LNTUNE_LOG=debug. */
void lntune_ctx_debug(const lntune *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* LNTUNE_CONTEXT_H */
