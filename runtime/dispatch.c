/*
 * dispatch.c - the first call of a shape: which kernel serves it, from where.
 *
 * lntune_open opens the tuning database read-only and looks this machine's fingerprint up in
 * it. A database that is missing, unreadable, foreign, or has never seen this machine is not an
 * error: every shape then runs a built-in kernel, and LNTUNE_LOG=debug says why, once.
 *
 * The first call of a descriptor (op, dtype, H, rows bucket, affine) asks the database for the
 * best kernel of that bucket. Policy when the bucket has none: the nearest tuned bucket of the
 * same op, dtype, H and affine serves it (one bucket away first, the larger row count first on a
 * tie), since a kernel tuned for this H on this machine mostly beats the generic one. With no
 * tuned bucket of this H, the winner of the nearest H (by ratio, then rows bucket) whose kernel
 * reads H at run time serves it (the tuner verifies those at H = 1 and 17 besides the tuned H:
 * problem.c); with none the built-in does. On the CPU, a winner of another bucket or H serves
 * only a call on its side of the streaming crossover, and another H only rows aligned as its own
 * unless its stores are plain (serves(), with the figures that made the rule); where the nearest
 * H's does not, the next nearest tuned at the call's rows bucket is tried (take_if_serves).
 * The database keys dtype by the type tuple's text ("f32", "bf16", "bf16/f32/f32") and the
 * fusion in the op text ("layernorm+residual_out", fusion.h); a tuple with fp16/bf16 in it has
 * the typed built-in (builtin_typed.c), a residual call the residual built-in
 * (builtin_residual.c), where nothing was tuned.
 * The winner's shared object comes from its artifact and is loaded with lntune_load_shared, only
 * when the artifact's code hashes to the digest recorded when lntune stored it and the database
 * is this user's own (db_trust.c: nobody else may have written it);
 * nothing is ever compiled here. The resolved entry goes into the registry, and later calls
 * never come back to this file.
 *
 * Everything here runs under ctx->lock, which also makes the single SQLite handle safe.
 */
#define _GNU_SOURCE
#include "dispatch.h"

#include "builtin.h"
#include "builtin_policy.h"
#include "dtypes.h"
#include "fusion.h"
#include "loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lntune_loaded {
    char *key; /* artifact key: two best records may share one artifact */
    void *dl;
    int fd; /* the memfd it was loaded from, or -1; closed after dlclose */
    lntune_kernel_fn kernel;
    lntune_loaded *next;
};

static const char *const op_names[] = {"layernorm", "rmsnorm", "layernorm_backward",
                                       "rmsnorm_backward"};
static const char *const affine_names[] = {"no gamma/beta", "gamma", "beta only",
                                           "gamma + weight offset"};

/* Probes lntune_rows_bucket for the bucket list, in increasing row counts. */
static void find_buckets(lntune *ctx) {
    int64_t rows = 1;
    ctx->nbuckets = 0;
    while (rows > 0 && rows <= (INT64_C(1) << 48) && ctx->nbuckets < LNTUNE_MAX_BUCKETS) {
        int b = lntune_rows_bucket(rows);
        if (ctx->nbuckets == 0 || ctx->bucket_id[ctx->nbuckets - 1] != b) {
            ctx->bucket_id[ctx->nbuckets] = b;
            ctx->bucket_rows[ctx->nbuckets++] = rows;
        }
        rows = rows < 1024 ? rows + 1 : rows * 2; /* exact where buckets are narrow */
    }
}

/* The value of the environment variable name if it is a positive integer, else 0 (and, when set,
 * a debug line saying it was ignored). */
static long long env_positive(const lntune *ctx, const char *name) {
    const char *invalid = NULL;
    const long long set = lntune_env_positive(name, &invalid);
    if (invalid) lntune_ctx_debug(ctx, "%s='%s' is not a positive integer: ignored", name, invalid);
    return set;
}

/* The bytes (x read and y written) from which a built-in call stores y non-temporally, and the
 * row alignment it needs (core/builtin_policy.h): the crossovers the tuner measured at this many
 * threads (the nearest measured), when the database knows this machine. */
/* Crossover name measured on this machine at the handle's threads (the nearest measured; *at
 * which, when at is not NULL), when the database knows it; else 0. */
static int64_t measured_crossover(const lntune *ctx, const char *name, int *at) {
    int64_t value = 0;
    if (!ctx->db || !ctx->cpu_known ||
        lntune_db_get_crossover(ctx->db, ctx->hardware_id, name, ctx->max_threads, &value, at, NULL,
                                0) != LNTUNE_OK)
        return 0;
    return value;
}

static void streaming_threshold(lntune *ctx) {
    const char *ignored = NULL;
    int at = 0;
    const int64_t measured = measured_crossover(ctx, LNTUNE_CROSSOVER_STREAMING_BYTES, &at);
    ctx->streaming_bytes = lntune_builtin_streaming_bytes(&ctx->cpu, measured, &ignored);
    const int64_t alignment =
        measured_crossover(ctx, LNTUNE_CROSSOVER_STREAMING_ROW_ALIGNMENT, NULL);
    const char *ignored_alignment = NULL;
    ctx->streaming_row_alignment =
        lntune_builtin_streaming_row_alignment(alignment, &ignored_alignment);
    if (ignored_alignment)
        lntune_ctx_debug(ctx,
                         "LNTUNE_STREAMING_ROW_ALIGNMENT='%s' is not a power of two up to 64: "
                         "ignored",
                         ignored_alignment);
    if (ignored)
        lntune_ctx_debug(ctx, "LNTUNE_STREAMING_BYTES='%s' is not a positive integer: ignored",
                         ignored);
    else if (measured > 0 && !getenv("LNTUNE_STREAMING_BYTES"))
        lntune_ctx_debug(ctx, "streaming crossover %lld bytes, measured at %d thread(s)",
                         (long long)measured, at);
}

/* The threads a CPU call may use: $LNTUNE_NUM_THREADS (for an app that runs threads of its own),
 * at most the CPUs this process may run on; else all of those. Not the online cores: under
 * taskset 1 on the 2-core Xeon the built-in ran two threads on one CPU at 0.56-0.63x of the
 * copy, where one thread reaches 0.94x. */
static void thread_limit(lntune *ctx) {
    const long long set = env_positive(ctx, "LNTUNE_NUM_THREADS");
    const int cores = lntune_cpu_usable_threads(&ctx->cpu);
    ctx->max_threads = set && set < cores ? (int)set : cores;
}

/* Says which built-ins this process runs, and a setting of them that was ignored. */
static void describe_builtins(const lntune *ctx) {
    const char *ignored = lntune_builtin_isa_ignored_setting();
    if (ignored)
        lntune_ctx_debug(ctx, "LNTUNE_BUILTIN_ISA='%s' is neither 'generic' nor 'auto': ignored",
                         ignored);
    if (lntune_builtin_streaming_kernel(LNTUNE_DESC_LAYERNORM, LNTUNE_DESC_GAMMA,
                                        (lntune_types){0}))
        lntune_ctx_debug(ctx,
                         "built-in CPU kernels: %s, non-temporal stores from %lld bytes of x and y "
                         "on rows of y aligned to %lld bytes",
                         lntune_builtin_isa(), (long long)ctx->streaming_bytes,
                         (long long)ctx->streaming_row_alignment);
    else
        lntune_ctx_debug(ctx, "built-in CPU kernels: %s", lntune_builtin_isa());
}

/* Sets the database's state (lntune_db_status) and its sentence. */
static void db_state(lntune *ctx, int state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void db_state(lntune *ctx, int state, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->db_why, sizeof ctx->db_why, fmt, ap);
    va_end(ap);
    ctx->db_state = state;
}

/* The tuning database, read-only, into ctx->db when it opens (and cpu_known when it knows this
 * CPU); any failure is a state (lntune_db_status) and a debug line, never an error. */
static void open_database(lntune *ctx, const char *db_path) {
    char path[4096] = "";
    if (db_path)
        snprintf(path, sizeof path, "%s", db_path);
    else if (lntune_db_default_path(path, sizeof path) != LNTUNE_OK)
        path[0] = '\0';
    lntune_db *db = NULL;
    int rc = lntune_db_open(db_path, LNTUNE_DB_READONLY, &db);
    if (rc != LNTUNE_OK) {
        if (!path[0] || access(path, F_OK) != 0)
            db_state(ctx, LNTUNE_DB_MISSING, "no tuning database at %s",
                     path[0] ? path : "the default path (no $LNTUNE_DB, $XDG_CACHE_HOME or $HOME)");
        else
            db_state(ctx, LNTUNE_DB_UNUSABLE, "cannot use tuning database %s: %s", path,
                     db ? lntune_db_errmsg(db) : lntune_errstr(rc));
        lntune_ctx_debug(ctx, "no tuned kernels: %s; every shape runs a built-in kernel",
                         ctx->db_why);
        lntune_db_close(db);
        return;
    }
    rc = lntune_db_find_hardware(db, ctx->cpu.fingerprint, &ctx->hardware_id);
    if (rc != LNTUNE_OK && rc != LNTUNE_ENOTFOUND) {
        db_state(ctx, LNTUNE_DB_UNUSABLE, "tuning database %s has an error (%s)", path,
                 lntune_db_errmsg(db));
        lntune_ctx_debug(ctx, "no tuned kernels: %s; every shape runs a built-in kernel",
                         ctx->db_why);
        lntune_db_close(db);
        return;
    }
    /* Code is loaded only from a database nobody else can have written (db_trust.c); from any
     * other, every shape runs a built-in kernel (its crossovers, plain data, still apply). */
    ctx->code_trusted = lntune_db_code_trusted(path[0] ? path : NULL, ctx->code_why,
                                               sizeof ctx->code_why) == LNTUNE_OK;
    if (!ctx->code_trusted)
        lntune_ctx_debug(ctx, "no tuned kernels from %s: %s; every shape runs a built-in kernel",
                         path, ctx->code_why);
    /* Kept open when it does not know this CPU: it may know this machine's GPUs. */
    ctx->db = db;
    ctx->cpu_known = rc == LNTUNE_OK;
    if (!ctx->code_trusted)
        db_state(ctx, LNTUNE_DB_UNTRUSTED, "no tuned kernels from %s: %s", path, ctx->code_why);
    else if (!ctx->cpu_known)
        db_state(ctx, LNTUNE_DB_OTHER_MACHINE,
                 "tuning database %s has no record of this machine (%s)", path,
                 ctx->cpu.fingerprint);
    else
        db_state(ctx, LNTUNE_DB_OK, "tuning database %s, this machine is %s", path,
                 ctx->cpu.fingerprint);
    if (ctx->cpu_known)
        lntune_ctx_debug(ctx, "tuning database %s, this machine is %s", path, ctx->cpu.fingerprint);
    else
        lntune_ctx_debug(ctx,
                         "no tuned CPU kernels: tuning database %s has no record of this machine "
                         "(%s); every CPU shape runs a built-in kernel",
                         path, ctx->cpu.fingerprint);
}

int lntune_dispatch_open(lntune *ctx, const char *db_path) {
    lntune_cpu_info_get(&ctx->cpu);
    find_buckets(ctx);
    thread_limit(ctx);
    open_database(ctx, db_path);
    streaming_threshold(ctx);
    describe_builtins(ctx);
    return LNTUNE_OK;
}

void lntune_dispatch_close(lntune *ctx) {
    lntune_pool_destroy(atomic_load(&ctx->pool));
    atomic_store(&ctx->pool, NULL);
    lntune_registry_clear(&ctx->registry);
    for (lntune_loaded *l = ctx->loaded, *next; l; l = next) {
        next = l->next;
        dlclose(l->dl);
        if (l->fd >= 0) close(l->fd);
        free(l->key);
        free(l);
    }
    ctx->loaded = NULL;
    lntune_db_close(ctx->db);
    ctx->db = NULL;
}

lntune_pool *lntune_dispatch_pool(lntune *ctx) {
    pthread_mutex_lock(&ctx->lock);
    lntune_pool *pool = atomic_load_explicit(&ctx->pool, memory_order_acquire);
    if (!pool && ctx->max_threads > 1 && lntune_pool_create(ctx->max_threads, &pool) == LNTUNE_OK)
        atomic_store_explicit(&ctx->pool, pool, memory_order_release);
    pthread_mutex_unlock(&ctx->lock);
    return pool;
}

static int copy_best(void *ud, const lntune_best *b) {
    lntune_best_copy *c = ud;
    c->found = 1;
    snprintf(c->variant, sizeof c->variant, "%s", b->variant ? b->variant : "");
    snprintf(c->artifact_key, sizeof c->artifact_key, "%s", b->artifact_key ? b->artifact_key : "");
    c->threads = b->threads;
    c->tuned_rows = b->tuned_rows;
    c->median_ns = b->median_ns;
    c->H = b->H;
    c->any_alignment = b->any_alignment;
    c->reach_lo = b->reach_lo;
    c->reach_hi = b->reach_hi;
    return 0;
}

/* The bytes a call of d moves per element of x (fusion.h). */
static int64_t element_bytes(const lntune_desc *d) {
    return lntune_fusion_bytes_per_element(lntune_types_unpacked(lntune_desc_dtype(d)),
                                           lntune_desc_fusion(d));
}

/* The largest power of two (up to 64) dividing a row's bytes: where the next rows start. */
static int64_t row_alignment(int64_t H, size_t element) {
    const int64_t bytes = H * (int64_t)element;
    int64_t a = 1;
    while (a < 64 && bytes % (2 * a) == 0) a *= 2;
    return a;
}

/*
 * Whether a CPU winner tuned for another bucket or H may serve this call of rows x d->H. Its
 * tuned data must lie on the same side of the streaming crossover as the call's (a kernel tuned
 * to stream its stores past the caches loses on a call that fits in them, and the other way
 * round: a 2048x4096 winner ran 100x4096 at 0.73x its own tuned speed, below the built-in),
 * unless it stores plainly and the call fits (issue 56: an fp32 -> int8 RMSNorm winner of
 * 2048x4096, plain stores, was refused at 16x4096, where the quantized built-in ran), and
 * for another H the call's rows must be aligned at least as the tuned ones, unless its stores
 * are plain (any_alignment): non-temporal stores of a 4096x768 winner ran 4096x777 at 0.40x the
 * built-in's speed (Xeon), where a plain-store twin of the same winner ran 4096x1000 at 1.41-1.50x
 * and 4096x777 at 1.07-1.27x (Zen 4, 2 threads). And another H only within the winner's measured
 * reach, where it has one (schema.sql's version 8). A refusal is said in b->refused, the first
 * one kept (lntune_query reports it).
 */
static int serves(const lntune *ctx, const lntune_desc *d, int64_t rows, lntune_best_copy *b) {
    const int64_t bytes = element_bytes(d);
    const int streams = lntune_builtin_streams(rows * d->H, bytes, ctx->streaming_bytes);
    const char *why = NULL;
    const int tuned_streams =
        lntune_builtin_streams(b->tuned_rows * b->H, bytes, ctx->streaming_bytes);
    /* the store kind follows the call's size: a winner that stores plainly although tuned past
     * the crossover (plain stores won there) also serves a call that fits in the caches */
    if (tuned_streams != streams && !(b->any_alignment && tuned_streams && !streams)) {
        why = streams ? "was tuned on data that fits under the streaming crossover, this call "
                        "reaches it"
                      : "stores non-temporally and was tuned on data past the streaming "
                        "crossover, this call fits under it";
    } else if (b->H == d->H) {
        return 1;
    } else if ((b->reach_lo > 0 && d->H < b->reach_lo) || (b->reach_hi > 0 && d->H > b->reach_hi)) {
        /* another H: only within the reach the tuner measured (tuner.c's store_reach) */
        why = "reaches only H in its measured reach";
    } else {
        const lntune_types t = lntune_types_unpacked(lntune_desc_dtype(d));
        const size_t element = lntune_type_size(t.y) < lntune_type_size(t.x)
                                   ? lntune_type_size(t.y)
                                   : lntune_type_size(t.x);
        if (b->any_alignment || row_alignment(d->H, element) >= row_alignment(b->H, element))
            return 1;
        why = "stores non-temporally, on rows more aligned than this call's";
    }
    if (!b->refused[0]) /* the first refusal: the nearest winner's, what lntune_query says */
        snprintf(b->refused, sizeof b->refused,
                 "the winner of H=%lld at rows=%lld (reach H=%lld..%lld, 0: unmeasured) %s",
                 (long long)b->H, (long long)b->tuned_rows, (long long)b->reach_lo,
                 (long long)b->reach_hi, why);
    return 0;
}

/*
 * The nearest-H walk: the nearest run-time-H winner takes the call where it serves it; else a
 * farther one that serves it and was tuned at the call's rows bucket. The walk is worth it: with
 * 1024's non-temporal winner nearest, RMSNorm 4096x1000 (rows of 32-byte alignment) ran the
 * built-in, where 768's plain-store winner of the same bucket ran it at 1.06-1.38x the built-in.
 * The bucket is the limit: without it, an 8x4096 winner (row groups, no prefetch: tuned for a
 * cache-resident call) ran LayerNorm 4096x777 at 0.27x of the copy, the built-in at 0.49x (Zen 4,
 * 2 threads, three runs each).
 */
typedef struct {
    const lntune *ctx;
    const lntune_desc *d;
    int64_t rows;
    int cpu, offered;
    lntune_best_copy *best;
} nearest_walk;

static int take_if_serves(void *ud, const lntune_best *b) {
    nearest_walk *w = ud;
    copy_best(w->best, b);
    const int first = w->offered++ == 0;
    if (!w->cpu) return w->best->found = 1;
    const int serving = serves(w->ctx, w->d, w->rows, w->best);
    w->best->found =
        serving && (first || lntune_rows_bucket(b->tuned_rows) == lntune_rows_bucket(w->rows));
    if (serving && !w->best->found && !w->best->refused[0])
        snprintf(w->best->refused, sizeof w->best->refused,
                 "the winner of H=%lld was tuned at rows=%lld, another rows bucket",
                 (long long)b->H, (long long)b->tuned_rows);
    return w->best->found;
}

int lntune_dispatch_bucket(const lntune *ctx, int64_t rows) {
    return ctx->batch_invariant && ctx->nbuckets > 0 ? ctx->bucket_id[ctx->nbuckets - 1]
                                                     : lntune_rows_bucket(rows);
}

/* Batch-invariant: the winner of d's H at the largest tuned bucket, the same for every call (no
 * nearest H, and no check that it suits the call's size: that would depend on the rows). */
static int find_invariant_best(lntune *ctx, lntune_db_key *key, lntune_best_copy *best) {
    for (int j = ctx->nbuckets - 1; j >= 0; --j) {
        key->rows = ctx->bucket_rows[j];
        int rc = lntune_db_get_best(ctx->db, key, copy_best, best);
        if (rc == LNTUNE_OK && best->found) return LNTUNE_OK;
        if (rc != LNTUNE_ENOTFOUND && rc != LNTUNE_OK) return rc;
        best->found = 0;
    }
    return LNTUNE_ENOTFOUND;
}

int lntune_dispatch_find_best(lntune *ctx, int64_t hardware_id, const char *target,
                              const lntune_desc *d, int64_t rows, lntune_best_copy *best) {
    const int cpu = strcmp(target, "cpu") == 0;
    best->refused[0] = '\0';
    char dtype[32], op[48];
    lntune_types_format(lntune_types_unpacked(lntune_desc_dtype(d)), dtype, sizeof dtype);
    const int affine = lntune_desc_affine(d), offset = affine == LNTUNE_DESC_GAMMA_OFFSET;
    lntune_op_key(op_names[lntune_desc_op(d)], lntune_desc_fusion(d), offset, op, sizeof op);
    lntune_db_key key = {
        hardware_id, target, op, dtype, d->H, rows, affine == LNTUNE_DESC_GAMMA || offset};
    if (ctx->batch_invariant) return find_invariant_best(ctx, &key, best);
    int rc = lntune_db_get_best(ctx->db, &key, copy_best, best);
    if (rc == LNTUNE_OK && best->found) return LNTUNE_OK;
    if (rc != LNTUNE_ENOTFOUND && rc != LNTUNE_OK) return rc;
    int at = -1;
    for (int i = 0; i < ctx->nbuckets; ++i)
        if (ctx->bucket_id[i] == lntune_desc_bucket(d)) at = i;
    for (int dist = 1; at >= 0 && dist < ctx->nbuckets; ++dist) {
        for (int side = 0; side < 2; ++side) {
            int j = side == 0 ? at + dist : at - dist;
            if (j < 0 || j >= ctx->nbuckets) continue;
            key.rows = ctx->bucket_rows[j];
            rc = lntune_db_get_best(ctx->db, &key, copy_best, best);
            if (rc == LNTUNE_OK && best->found && (!cpu || serves(ctx, d, rows, best)))
                return LNTUNE_OK;
            if (rc != LNTUNE_ENOTFOUND && rc != LNTUNE_OK) return rc;
            best->found = 0;
        }
    }
    key.rows = rows;
    nearest_walk walk = {ctx, d, rows, cpu, 0, best};
    rc = lntune_db_get_nearest_best(ctx->db, &key, take_if_serves, &walk);
    if (rc == LNTUNE_OK && best->found) return LNTUNE_OK;
    best->found = 0;
    return rc == LNTUNE_OK || rc == LNTUNE_ENOTFOUND ? LNTUNE_ENOTFOUND : rc;
}

typedef struct {
    lntune *ctx;
    void *dl;
    int fd;
    char symbol[256];
    char err[512];
} artifact_load;

static int load_artifact(void *ud, const lntune_artifact *a) {
    artifact_load *l = ud;
    snprintf(l->symbol, sizeof l->symbol, "%s", a->symbol ? a->symbol : "");
    if (!lntune_artifact_intact(a, l->err, sizeof l->err)) return 0;
    if (!a->shared)
        snprintf(l->err, sizeof l->err, "no shared object");
    else
        l->dl = lntune_load_shared(a->shared, a->shared_len, &l->fd, l->err, sizeof l->err);
    return 0;
}

/* The tuned kernel named by best, loading its artifact unless an earlier key loaded it. */
static lntune_kernel_fn tuned_kernel(lntune *ctx, const lntune_best_copy *best, char *err,
                                     size_t errlen) {
    if (!best->artifact_key[0]) { /* a winner imported as wisdom (db_wisdom.c): no code came */
        snprintf(err, errlen,
                 "no compiled kernel here (imported wisdom of another machine, or stale; "
                 "lntune --shape of this shape builds it)");
        return NULL;
    }
    for (lntune_loaded *l = ctx->loaded; l; l = l->next)
        if (strcmp(l->key, best->artifact_key) == 0) return l->kernel;
    artifact_load load = {ctx, NULL, -1, "", ""};
    int rc = lntune_db_get_artifact(ctx->db, best->artifact_key, load_artifact, &load);
    if (rc != LNTUNE_OK || !load.dl) {
        snprintf(err, errlen, "artifact %s: %s", best->artifact_key,
                 rc != LNTUNE_OK ? lntune_db_errmsg(ctx->db) : load.err);
        if (load.dl) dlclose(load.dl);
        if (load.fd >= 0) close(load.fd);
        return NULL;
    }
    lntune_kernel_fn fn = NULL;
    void *sym = load.symbol[0] ? dlsym(load.dl, load.symbol) : NULL;
    memcpy(&fn, &sym, sizeof fn); /* object-to-function pointer, as POSIX allows */
    lntune_loaded *l = fn ? calloc(1, sizeof *l) : NULL;
    if (!l || !(l->key = strdup(best->artifact_key))) {
        snprintf(err, errlen, fn ? "out of memory" : "artifact %s has no symbol '%s'",
                 best->artifact_key, load.symbol);
        free(l);
        dlclose(load.dl);
        if (load.fd >= 0) close(load.fd);
        return NULL;
    }
    l->dl = load.dl;
    l->fd = load.fd;
    l->kernel = fn;
    l->next = ctx->loaded;
    ctx->loaded = l;
    return fn;
}

const char *lntune_dispatch_op_name(int op) {
    return op_names[op];
}

void lntune_dispatch_describe(const lntune_desc *d, int64_t rows, char *buf, size_t size) {
    char dtype[32];
    lntune_types_format(lntune_types_unpacked(lntune_desc_dtype(d)), dtype, sizeof dtype);
    char op[48];
    lntune_op_key(op_names[lntune_desc_op(d)], lntune_desc_fusion(d),
                  lntune_desc_affine(d) == LNTUNE_DESC_GAMMA_OFFSET, op, sizeof op);
    if (rows <= 0) /* a batch-invariant handle's: one kernel for every row count */
        snprintf(buf, size, "%s %s H=%lld, any rows (batch-invariant), %s", op, dtype,
                 (long long)d->H, affine_names[lntune_desc_affine(d)]);
    else
        snprintf(buf, size, "%s %s H=%lld rows=%lld (bucket %d), %s", op, dtype, (long long)d->H,
                 (long long)rows, (int)lntune_desc_bucket(d), affine_names[lntune_desc_affine(d)]);
}

/* ", tuned for H=N" when best was tuned for another H than d's (a nearest-H winner), else "". */
static const char *nearest_h(const lntune_best_copy *best, const lntune_desc *d, char *buf,
                             size_t size) {
    if (best->H == d->H) return "";
    snprintf(buf, size, ", tuned for H=%lld", (long long)best->H);
    return buf;
}

/* The forward built-in of d's op, affine kind and fusion for the tuple types (float y). */
static lntune_kernel_fn float_builtin(const lntune_desc *d, int op, lntune_types types) {
    return lntune_desc_fusion(d) != LNTUNE_FUSION_NONE ? lntune_builtin_residual_kernel(op, types)
           : lntune_types_all_f32(types)
               ? lntune_builtin_kernel(op, lntune_desc_affine(d))
               : lntune_builtin_typed_kernel(op, lntune_desc_affine(d), types);
}

int lntune_dispatch_resolve(lntune *ctx, const lntune_desc *d, uint64_t hash, int64_t rows,
                            const lntune_entry **out) {
    pthread_mutex_lock(&ctx->lock);
    const lntune_entry *found = lntune_registry_find(&ctx->registry, d, hash);
    if (found) { /* another thread resolved it while we waited */
        pthread_mutex_unlock(&ctx->lock);
        *out = found;
        return LNTUNE_OK;
    }
    lntune_entry *e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&ctx->lock);
        return lntune_ctx_fail(ctx, LNTUNE_ENOMEM, "out of memory resolving a kernel");
    }
    e->desc = *d;
    lntune_types types = lntune_types_unpacked(lntune_desc_dtype(d));
    const int op = lntune_desc_op(d), backward = op >= LNTUNE_DESC_LAYERNORM_BACKWARD;
    const int fusion = lntune_desc_fusion(d);
    /* A weight offset: a one-type unfused float call has its own built-in; every other runs
     * the gamma built-in of fp32 gamma/beta on offset + gamma (builtin_offset.h). */
    lntune_desc bd = *d;
    lntune_kernel_fn offset_builtin = NULL;
    if (!backward && lntune_desc_affine(d) == LNTUNE_DESC_GAMMA_OFFSET) {
        if (fusion == LNTUNE_FUSION_NONE)
            offset_builtin = lntune_builtin_offset_kernel(0, op, types); /* NULL: quantized y */
        if (!offset_builtin) {
            e->offset_params = 1;
            types.params = LNTUNE_TYPE_F32;
            bd = lntune_desc_make(op, lntune_types_packed(types), LNTUNE_DESC_GAMMA, fusion,
                                  lntune_desc_bucket(d), d->H);
        }
    }
    if (backward)
        e->backward = e->backward_fallback = lntune_builtin_backward_kernel(
            op - LNTUNE_DESC_LAYERNORM_BACKWARD, lntune_desc_fusion(d) == LNTUNE_FUSION_RESIDUAL,
            types.x, types.params);
    else if (lntune_type_quantized(types.y)) /* no built-in: the float one, then quantized */
        e->quant_float = float_builtin(
            &bd, op, (lntune_types){types.x, LNTUNE_TYPE_F32, types.params, types.residual});
    else
        e->kernel = e->fallback = offset_builtin ? offset_builtin : float_builtin(&bd, op, types);
    if (!backward && !lntune_type_quantized(types.y)) { /* the streaming copy of a float y */
        const int64_t bytes = element_bytes(d);
        /* Rows less aligned than this machine streams well never stream (builtin_policy.h); nor
         * any call of a batch-invariant handle: by their size calls would run two compiled
         * kernels. */
        if (!ctx->batch_invariant &&
            lntune_builtin_rows_stream(d->H, (int64_t)lntune_type_size(types.y),
                                       ctx->streaming_row_alignment))
            e->streaming = offset_builtin ? lntune_builtin_offset_kernel(1, op, types)
                           : fusion == LNTUNE_FUSION_NONE
                               ? lntune_builtin_streaming_kernel(op, lntune_desc_affine(&bd), types)
                               : lntune_builtin_residual_streaming_kernel(op, types);
        e->streaming_elements = ctx->streaming_bytes / bytes;
    }
    char what[160], why[1400];
    lntune_dispatch_describe(d, ctx->batch_invariant ? 0 : rows, what, sizeof what);
    lntune_best_copy best = {0};
    if (!ctx->db || !ctx->cpu_known) {
        snprintf(why, sizeof why, "built-in kernel (no tuning database for this machine: %s)",
                 ctx->db_why);
    } else if (lntune_desc_affine(d) == LNTUNE_DESC_BETA_ONLY) {
        snprintf(why, sizeof why, "built-in kernel (beta without gamma is never tuned)");
    } else if (!ctx->code_trusted) {
        snprintf(why, sizeof why, "built-in kernel (tuned kernels not loaded: %s)", ctx->code_why);
    } else if (lntune_dispatch_find_best(ctx, ctx->hardware_id, "cpu", d, rows, &best) !=
               LNTUNE_OK) {
        snprintf(why, sizeof why, "built-in kernel (not tuned on this machine%s%s)",
                 best.refused[0] ? "; " : "", best.refused);
    } else {
        char err[768], near[64];
        lntune_kernel_fn fn = tuned_kernel(ctx, &best, err, sizeof err);
        if (!fn) {
            snprintf(why, sizeof why, "built-in kernel (tuned %s unusable: %s)", best.variant, err);
        } else {
            if (backward) /* the artifact's symbol has the backward ABI (the tuner stored it) */
                memcpy(&e->backward, &fn, sizeof fn);
            else
                e->kernel = fn;
            e->threads = best.threads > 0 ? best.threads : 1;
            e->variant = strdup(best.variant);
            e->tuned_H = best.H;
            e->tuned_rows = best.tuned_rows;
            snprintf(why, sizeof why, "tuned %s, %d thread(s), measured %.0f ns at rows=%lld%s",
                     best.variant, e->threads, best.median_ns, (long long)best.tuned_rows,
                     nearest_h(&best, d, near, sizeof near));
        }
    }
    lntune_ctx_debug(ctx, "%s: %s", what, why);
    e->reason = strdup(why);
    if (!e->reason || (e->tuned_H && !e->variant)) {
        free(e->variant);
        free(e->reason);
        free(e);
        pthread_mutex_unlock(&ctx->lock);
        return lntune_ctx_fail(ctx, LNTUNE_ENOMEM, "out of memory resolving a kernel");
    }
    lntune_registry_insert(&ctx->registry, e, hash);
    pthread_mutex_unlock(&ctx->lock);
    *out = e;
    return LNTUNE_OK;
}
