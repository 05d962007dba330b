/*
 * tuning_db.h - the SQLite tuning database: hardware fingerprints, every measured variant,
 * compiled artifacts, and the best variant per shape. The schema lives in schema.sql alone.
 *
 * Written by gen/ (the tuner) and read by runtime/ (dispatch) and the CLI (show, export).
 * A handle is used by one thread at a time; open one per thread. Every function returns an
 * LNTUNE_* code and leaves a message in lntune_db_errmsg on failure. Records passed to callbacks
 * (and their strings and blobs) are valid only during the callback.
 */
#ifndef LNTUNE_TUNING_DB_H
#define LNTUNE_TUNING_DB_H

#include "hardware.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct lntune_db lntune_db;

/* lntune_db_open flags. */
#define LNTUNE_DB_READONLY 0x1 /* never create, migrate or write */
#define LNTUNE_DB_FORCE 0x2    /* allow rewriting a database the checks would refuse */

/* $LNTUNE_DB, else $XDG_CACHE_HOME/lntune/tune.db, else $HOME/.cache/lntune/tune.db. */
int lntune_db_default_path(char *buf, size_t size);

/*
 * Opens (read-write: creates, with its directory, and migrates forward) the database at path
 * (NULL: the default path). Refuses with LNTUNE_EDB and a message, without modifying the file:
 * a file that is not SQLite, a SQLite file of another application, a newer schema version, a
 * corrupt file. WAL mode and a busy timeout are set on every read-write handle.
 * Like sqlite3_open, a failed open still sets *out (unless out is NULL or memory ran out) to a
 * handle that only carries the message: read lntune_db_errmsg, then lntune_db_close it.
 * LNTUNE_DB_FORCE renames a refused file to <path>.bak (with its -wal) and starts a new one;
 * never a valid lntune database of this schema that is only busy, locked or unreadable.
 */
int lntune_db_open(const char *path, int flags, lntune_db **out);
void lntune_db_close(lntune_db *db); /* NULL is a no-op */
const char *lntune_db_errmsg(const lntune_db *db);
const char *lntune_db_path(const lntune_db *db);

/*
 * Whether code stored in the database at path (NULL: the default path) may run in this process:
 * LNTUNE_OK when the file, its -wal and -shm files and its folder belong to this user (the
 * folder may be root's) and none is writable by group or others, as ssh asks of its keys; else
 * LNTUNE_EDB with why. liblntune loads no artifact of a database that fails (db_trust.c).
 */
int lntune_db_code_trusted(const char *path, char *why, size_t whylen);

/* What `lntune doctor` reports (lntune_db_doctor). */
typedef struct lntune_db_health {
    char path[4096];
    int opened;              /* liblntune can open it (read-only) */
    char open_error[512];    /* else why not (or what failed after the open) */
    int trusted;             /* lntune_db_code_trusted */
    char why[600];           /* else why not */
    int machine_known;       /* it holds results of this CPU */
    char fingerprint[17];    /* this CPU's */
    long long artifacts;     /* artifacts stored */
    long long intact;        /* of those, the ones whose code hashes to their recorded digest */
    char first_altered[320]; /* the first other one: its key and why */
    long long winners;       /* this CPU's winners (best rows) */
    long long loadable;      /* of those, the ones whose artifact is stored, intact and loadable */
    char first_unloadable[320]; /* the first other one: its key and why */
} lntune_db_health;

/* Fills h for the database at path (NULL: the default path); LNTUNE_OK when it could be read. */
int lntune_db_doctor(const char *path, lntune_db_health *h);
int lntune_db_schema_version(void); /* the version this build writes */

/*
 * Writes the database as wisdom: JSON lines of every machine with its measurements, winners and
 * crossovers, never machine code (db_wisdom.c has the format). *machines: how many machines were
 * written.
 */
int lntune_db_wisdom_export(lntune_db *db, FILE *f, int *machines);

/* What lntune_db_wisdom_import did: lines read, and the records it wrote. */
typedef struct lntune_wisdom_report {
    long lines, ignored; /* ignored: records of a kind this version does not know */
    long machines, machines_new, measurements, best, crossovers;
} lntune_wisdom_report;

/*
 * Merges wisdom (lntune_db_wisdom_export's lines) into db in one transaction: all of it or,
 * on any error, nothing. Machines are matched by fingerprint; a record replaces the one with the
 * same key only when it is newer (measured_at, chosen_at), so importing twice changes nothing.
 * A replaced winner of another variant loses its artifact: no code comes with wisdom.
 */
int lntune_db_wisdom_import(lntune_db *db, FILE *f, lntune_wisdom_report *r);

/* Imports the wisdom of the database at src_path (opened read-only) into db, as above; a
 * failure to read src_path leaves its message on db. */
int lntune_db_wisdom_merge(lntune_db *db, const char *src_path, lntune_wisdom_report *r);

/* Inserts (or finds) this machine's hardware row; *id receives its row id. */
int lntune_db_put_hardware(lntune_db *db, const lntune_cpu_info *cpu, const char *compiler,
                           int64_t *id);
/* Inserts (or finds) a GPU's hardware row (kind "cuda"); nvrtc is the NVRTC version line. */
int lntune_db_put_gpu_hardware(lntune_db *db, const lntune_gpu_info *gpu, const char *nvrtc,
                               int64_t *id);
/* The row id of a fingerprint; LNTUNE_ENOTFOUND if the database has never seen it. */
int lntune_db_find_hardware(lntune_db *db, const char *fingerprint, int64_t *id);

typedef struct lntune_db_hardware {
    int64_t id;
    const char *fingerprint, *arch, *model, *features, *compiler;
    int family, model_id, stepping, cores;
    int64_t l1d_bytes, l2_bytes, l3_bytes;
    const char *kind; /* "cpu" or "cuda"; for a GPU, cores is its multiprocessor count */
    int compute_capability, memory_bus_bits, driver_version; /* GPUs only; else 0 */
} lntune_db_hardware;
int lntune_db_each_hardware(lntune_db *db, int (*cb)(void *ud, const lntune_db_hardware *hw),
                            void *ud);

/* What a measurement or best record is about. */
typedef struct lntune_db_key {
    int64_t hardware_id;
    const char *target; /* "cpu", "cuda" */
    const char *op;     /* "layernorm", "rmsnorm" */
    const char *dtype;  /* "f32", later "bf16", "f16->f32", ... */
    int64_t H;
    int64_t rows; /* measurements: the exact row count; best: any row count in the bucket */
    int affine;   /* 1: gamma (and beta) given; 0: neither */
} lntune_db_key;

/*
 * Rows buckets of the best table: 1, 2-8, 9-64, 65-512, 513-4096, 4097-32768, over 32768.
 * A kernel tuned for one row count serves the calls whose row count falls in its bucket.
 */
int lntune_rows_bucket(int64_t rows);

#define LNTUNE_STATUS_OK "ok"
#define LNTUNE_STATUS_WRONG "wrong"   /* failed verification: never timed, never chosen */
#define LNTUNE_STATUS_FAILED "failed" /* did not compile, or crashed */

typedef struct lntune_measurement {
    const char *variant;       /* canonical parameter string */
    const char *template_hash; /* measurements of an edited template are kept apart */
    const char *status;        /* LNTUNE_STATUS_* */
    const char *message;       /* why wrong or failed; may be NULL */
    const char *artifact_key;  /* may be NULL */
    double compile_ms;
    double median_ns, min_ns, max_ns; /* per call, all rows */
    double gbps;                      /* bytes moved (x read + y written) / median */
    double copy_gbps;                 /* the better memory copy of the same bytes, same run */
    double max_error;                 /* verifier error, in its unit */
} lntune_measurement;

/* Inserts or replaces the measurement of (key, variant, template_hash). */
int lntune_db_put_measurement(lntune_db *db, const lntune_db_key *key, const lntune_measurement *m);
/* Calls cb for each measurement of key (exact rows) with that template hash (NULL: any). */
int lntune_db_each_measurement(lntune_db *db, const lntune_db_key *key, const char *template_hash,
                               int (*cb)(void *ud, const lntune_measurement *m), void *ud);

/*
 * A head start for tuning key on another machine (lntune --seed-from): up to max variants that
 * machines other than key's hardware_id measured fastest for key's target, op, dtype, H and
 * affine at the row count nearest key's, their winners first; cb gets each in turn.
 */
int lntune_db_each_seed(lntune_db *db, const lntune_db_key *key, int max,
                        int (*cb)(void *ud, const char *variant), void *ud);

/* A compiled kernel: the source and its object and shared-object bytes. */
typedef struct lntune_artifact {
    const char *key; /* hash of source, flags and compiler version */
    const char *source;
    const char *compiler; /* the compiler's version line */
    const char *flags;
    const char *symbol; /* the kernel function's name */
    const void *object; /* relocatable object (may be NULL) */
    size_t object_len;
    const void *shared; /* shared object the runtime dlopens (may be NULL) */
    size_t shared_len;
    const char *ptx; /* CUDA: the PTX text (object then holds the cubin); may be NULL */
    /* Read only (put computes it): lntune_artifact_code_digest when the artifact was stored,
     * NULL for one stored before schema version 4's migration could record it. */
    const char *code_sha256;
} lntune_artifact;

/*
 * The digest of the code an artifact carries, as 64 hex digits: SHA-256 over source (the CUDA
 * runtime compiles a backward pair from it), shared, object and ptx, each preceded by its length
 * (8 bytes, little-endian; an absent one has length 0). liblntune loads an artifact only when
 * this matches its recorded code_sha256.
 */
void lntune_artifact_code_digest(const char *source, const void *shared, size_t shared_len,
                                 const void *object, size_t object_len, const char *ptx,
                                 char hex[65]);
/* Calls cb for every artifact, in key order, until it returns non-zero. */
int lntune_db_each_artifact(lntune_db *db, int (*cb)(void *ud, const lntune_artifact *a), void *ud);
/* 1 when a's code hashes to its recorded code_sha256; else 0 and why. */
int lntune_artifact_intact(const lntune_artifact *a, char *why, size_t whylen);

/* 1 when db holds the artifact named key (NULL or "": none) and its code is intact. */
int lntune_db_artifact_intact(lntune_db *db, const char *key);

int lntune_db_put_artifact(lntune_db *db, const lntune_artifact *a);
/* LNTUNE_ENOTFOUND if no artifact has that key. */
int lntune_db_get_artifact(lntune_db *db, const char *key,
                           int (*cb)(void *ud, const lntune_artifact *a), void *ud);

typedef struct lntune_best {
    const char *variant;
    const char *artifact_key;
    int threads;
    int64_t tuned_rows; /* the row count it was measured at */
    double median_ns, gbps, copy_gbps, max_error;
    double naive_ns; /* the naive two-pass kernel, same run */
    int any_h;       /* the kernel reads H at run time: it may serve other H (schema.sql) */
    int64_t H;       /* read back: the record's H (set_best takes the key's) */
    /* Read back: a fixed-H winner's run-time-H twin (schema.sql's version 5; variant NULL:
     * never tried; artifact key NULL: declined; median NaN: not timed). */
    const char *twin_variant, *twin_artifact_key;
    double twin_median_ns;
    /* The kernel keeps its speed on rows of any alignment (plain stores; schema.sql's version 6):
     * it may serve an H whose rows are less aligned than its own. A twin shares its winner's. */
    int any_alignment;
    /* The spread of its speed against the copy over its final runs (schema.sql's version 7:
     * quartiles of copy time / its time; NaN: not measured so), and why it was measured under
     * load (NULL: quietly; such a winner is measured again by the next tune of its shape). */
    double ratio_lo, ratio_hi;
    const char *under_load;
    /* Read back: the H from reach_lo to reach_hi its run-time-H kernel serves no slower than the
     * built-in (schema.sql's version 8; 0: not measured, no limit). set_best clears them. */
    int64_t reach_lo, reach_hi;
} lntune_best;

/* Sets the winner for key's rows bucket (BEGIN IMMEDIATE; replaces any earlier one). */
int lntune_db_set_best(lntune_db *db, const lntune_db_key *key, const lntune_best *b);
/* Adds a run-time-H twin (variant, its stored artifact, its median at the tuned shape) to key's
 * fixed-H winner; artifact_key NULL records a twin tried and declined, which serves nothing;
 * set_best clears it. LNTUNE_ENOTFOUND when the bucket has no fixed-H winner. */
int lntune_db_set_twin(lntune_db *db, const lntune_db_key *key, const char *variant,
                       const char *artifact_key, double median_ns);
/* Sets the reach of key's winner (its run-time-H kernel: the winner, or its twin): the H from lo
 * to hi (each > 0, lo <= key's H <= hi) it serves. LNTUNE_ENOTFOUND when the bucket has none. */
int lntune_db_set_reach(lntune_db *db, const lntune_db_key *key, int64_t lo, int64_t hi);
/* The winner for key's rows bucket, to cb (whatever it returns); LNTUNE_ENOTFOUND if none. */
int lntune_db_get_best(lntune_db *db, const lntune_db_key *key,
                       int (*cb)(void *ud, const lntune_best *b), void *ud);
/* A size crossover measured on hardware row hw (schema.sql's crossovers): name at threads, with
 * the template hash it was measured with (replaces an earlier one). */
int lntune_db_put_crossover(lntune_db *db, int64_t hw, const char *name, int threads, int64_t value,
                            const char *template_hash);
/* The crossover name of hw measured at threads, else at the nearest thread count (the lower on a
 * tie): its value, the threads it was measured at (measured_threads may be NULL) and its template
 * hash (hash may be NULL) into hash[size]. LNTUNE_ENOTFOUND if none. */
int lntune_db_get_crossover(lntune_db *db, int64_t hw, const char *name, int threads,
                            int64_t *value, int *measured_threads, char *hash, size_t size);
/* The kernels reading H at run time (any_h winners, and fixed-H winners' twins, handed over
 * as the winner with any_h set) of key's hardware, target, op, dtype and affine, the nearest
 * key's H first (by ratio; then the nearest rows bucket, then the smaller H): each to cb until
 * cb returns non-zero, taking that one. LNTUNE_ENOTFOUND if cb took none. */
int lntune_db_get_nearest_best(lntune_db *db, const lntune_db_key *key,
                               int (*cb)(void *ud, const lntune_best *b), void *ud);
/* Every winner of one hardware row (0: of all), with its key, ordered by target, op, dtype, H. */
int lntune_db_each_best(lntune_db *db, int64_t hardware_id,
                        int (*cb)(void *ud, const lntune_db_key *key, const lntune_best *b),
                        void *ud);

#endif /* LNTUNE_TUNING_DB_H */
