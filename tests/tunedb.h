/*
 * tunedb.h - builds tuning databases for the runtime tests: a hardware row, and best records
 * whose artifacts hold real shared objects compiled from generated variants.
 *
 * Each tuned artifact's entry point is a wrapper that counts its calls in
 * lntune_test_tuned_calls, a symbol of the test program (linked with ENABLE_EXPORTS), so a test
 * can tell a tuned kernel from the built-in one by more than its (equally correct) output.
 */
#ifndef LNTUNE_TUNEDB_H
#define LNTUNE_TUNEDB_H

#include "best_record.h"
#include "cc.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"
#include "tuning_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lntune_test_tuned_calls; /* bumped by every tuned kernel call (see above) */

/* How a tuned artifact's wrapper behaves. */
enum { TUNED_RUNS = 0, TUNED_DECLINES = 1 };

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)n : 0;
    return buf;
}

/* Compiles C source into shared-object bytes with the default compiler; NULL on failure. */
static void *build_shared(const char *source, size_t *len) {
    static const char *const flags[] = {"-std=c11", "-O2", "-fPIC", "-c", "-x", "c", NULL};
    char *dir = lntune_cc_tempdir(), obj[4200], so[4200];
    if (!dir) return NULL;
    snprintf(obj, sizeof obj, "%s/k.o", dir);
    snprintf(so, sizeof so, "%s/k.so", dir);
    lntune_cc_job job = {source, obj, NULL, 0, NULL};
    const char *objs[] = {obj};
    char *diag = NULL, *bytes = NULL;
    if (lntune_cc_compile("cc", flags, &job, 1, 1) != 0)
        fprintf(stderr, "compile failed: %s\n", job.diag ? job.diag : "?");
    else if (lntune_cc_link_shared("cc", objs, 1, so, &diag) != 0)
        fprintf(stderr, "link failed: %s\n", diag ? diag : "?");
    else
        bytes = read_all(so, len);
    free(job.diag);
    free(diag);
    lntune_cc_remove_dir(dir);
    free(dir);
    return bytes;
}

/*
 * A new database at path (an old one removed) with a hardware row for cpu; *hw is its id.
 * Returns an LNTUNE_* code; *db is set either way (on failure, to a handle with the message).
 */
static int create_db_for(const char *path, const lntune_cpu_info *cpu, lntune_db **db,
                         int64_t *hw) {
    remove(path);
    *db = NULL;
    *hw = 0;
    int rc = lntune_db_open(path, 0, db);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(*db, cpu, "cc", hw);
    return rc;
}

/* A test's database for this machine: DIR/NAME, created with create_db_for. */
typedef struct {
    char path[4096];
    lntune_cpu_info cpu;
    lntune_db *db;
    int64_t hw;
} tunedb_file;

static int tunedb_create(tunedb_file *t, const char *dir, const char *name) __attribute__((unused));
static int tunedb_create(tunedb_file *t, const char *dir, const char *name) {
    snprintf(t->path, sizeof t->path, "%s/%s", dir, name);
    lntune_cpu_info_get(&t->cpu);
    return create_db_for(t->path, &t->cpu, &t->db, &t->hw);
}

/*
 * Generates variant for (op's text, dtype text, H), wraps it (see above), compiles it and stores
 * it as an artifact keyed key[96]; *traits: whether it reads H at run time and keeps its speed on
 * rows of any alignment (the source's). 0 on success.
 */
static int store_tuned_kernel(lntune_db *db, const char *op, const char *dtype, const char *variant,
                              int64_t H, int behaviour, const char *key, lntune_best *traits,
                              char *resolved, size_t resolved_size) __attribute__((unused));
static int store_tuned_kernel(lntune_db *db, const char *op, const char *dtype, const char *variant,
                              int64_t H, int behaviour, const char *key, lntune_best *traits,
                              char *resolved, size_t resolved_size) {
    lntune_gen *g = NULL;
    lntune_source src = {0};
    lntune_shape shape = {.H = H};
    char base[32];
    int offset = 0;
    if (lntune_types_parse(dtype, &shape.types) != 0 ||
        lntune_op_key_parse(op, base, sizeof base, &shape.fusion, &offset) != 0) {
        fprintf(stderr, "store_tuned_kernel: bad dtype %s or op %s\n", dtype, op);
        return -1;
    }
    shape.affine = offset ? LNTUNE_AFFINE_OFFSET : LNTUNE_AFFINE_ANY;
    int rc = lntune_gen_open(NULL, &g);
    if (rc == LNTUNE_OK) rc = lntune_gen_emit(g, "cpu", base, variant, &shape, "tuned_inner", &src);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "emit %s: %s\n", variant, g ? lntune_gen_errmsg(g) : lntune_errstr(rc));
        lntune_gen_close(g);
        return -1;
    }
    lntune_gen_close(g);
    size_t n = strlen(src.text) + 1024, so_len = 0;
    char *text = malloc(n);
    snprintf(text, n,
             "%s\nextern int lntune_test_tuned_calls;\n"
             "int tuned_entry(const lntune_kernel_args *a, int64_t b, int64_t e)\n{\n"
             "    __atomic_fetch_add(&lntune_test_tuned_calls, 1, __ATOMIC_RELAXED);\n"
             "    return %s;\n}\n",
             src.text,
             behaviour == TUNED_DECLINES ? "LNTUNE_KERNEL_EUNSUPPORTED" : "tuned_inner(a, b, e)");
    void *so = build_shared(text, &so_len);
    lntune_artifact art = {key, text, "cc", "-O2", "tuned_entry", NULL, 0, so, so_len, NULL, NULL};
    rc = so ? lntune_db_put_artifact(db, &art) : -1;
    if (rc != LNTUNE_OK) fprintf(stderr, "store_tuned_kernel: %s\n", lntune_db_errmsg(db));
    traits->any_h = !src.fixed_h;
    traits->any_alignment = src.any_alignment;
    snprintf(resolved, resolved_size, "%s", src.variant);
    free(so);
    free(text);
    lntune_source_free(&src);
    return rc == LNTUNE_OK ? 0 : -1;
}

/* A winner record with the tests' stock figures (1 us, 10 GB/s against a 20 GB/s copy). */
static inline lntune_best tunedb_best(const char *variant, const char *artifact_key, int threads,
                                      int64_t rows) {
    return test_best(variant, artifact_key, threads, rows, 1000.0, 10.0, 20.0, 1e-7, 2000.0);
}

/*
 * Stores a tuned kernel for (op, dtype text, H, rows' bucket, affine) on hardware hw: variant
 * generated for H, the types and the fusion of op's text ("layernorm+residual_out"), wrapped
 * (see above), compiled, saved as an artifact, and made the best. 0 on success.
 */
static int put_tuned_typed(lntune_db *db, int64_t hw, const char *op, const char *dtype,
                           const char *variant, int64_t H, int64_t rows, int affine, int threads,
                           int behaviour) __attribute__((unused));
static int put_tuned_typed(lntune_db *db, int64_t hw, const char *op, const char *dtype,
                           const char *variant, int64_t H, int64_t rows, int affine, int threads,
                           int behaviour) {
    char key[96], resolved[512] = ""; /* resolved: filled by store_tuned_kernel */
    snprintf(key, sizeof key, "test-%s-%s-%lld-%lld-%d-%d", op, dtype, (long long)H,
             (long long)rows, affine, behaviour);
    lntune_best best = tunedb_best(resolved, key, threads, rows);
    if (store_tuned_kernel(db, op, dtype, variant, H, behaviour, key, &best, resolved,
                           sizeof resolved))
        return -1;
    lntune_db_key k = {hw, "cpu", op, dtype, H, rows, affine};
    const int rc = lntune_db_set_best(db, &k, &best);
    if (rc != LNTUNE_OK) fprintf(stderr, "put_tuned: %s\n", lntune_db_errmsg(db));
    return rc == LNTUNE_OK ? 0 : -1;
}

/* Adds variant (h=runtime) as the run-time-H twin of the fp32 fixed-H winner put_tuned stored
 * for (op, H, rows' bucket, affine). 0 on success. */
static int put_twin(lntune_db *db, int64_t hw, const char *op, const char *variant, int64_t H,
                    int64_t rows, int affine) __attribute__((unused));
static int put_twin(lntune_db *db, int64_t hw, const char *op, const char *variant, int64_t H,
                    int64_t rows, int affine) {
    char key[96], resolved[512];
    lntune_best traits = {0};
    snprintf(key, sizeof key, "twin-%s-%lld-%lld-%d", op, (long long)H, (long long)rows, affine);
    if (store_tuned_kernel(db, op, "f32", variant, H, TUNED_RUNS, key, &traits, resolved,
                           sizeof resolved) ||
        !traits.any_h)
        return -1;
    lntune_db_key k = {hw, "cpu", op, "f32", H, rows, affine};
    const int rc = lntune_db_set_twin(db, &k, resolved, key, 1100.0);
    if (rc != LNTUNE_OK) fprintf(stderr, "put_twin: %s\n", lntune_db_errmsg(db));
    return rc == LNTUNE_OK ? 0 : -1;
}

/* put_tuned_typed for fp32. */
static int put_tuned(lntune_db *db, int64_t hw, const char *op, const char *variant, int64_t H,
                     int64_t rows, int affine, int threads, int behaviour) __attribute__((unused));
static int put_tuned(lntune_db *db, int64_t hw, const char *op, const char *variant, int64_t H,
                     int64_t rows, int affine, int threads, int behaviour) {
    return put_tuned_typed(db, hw, op, "f32", variant, H, rows, affine, threads, behaviour);
}

/* A copy of this machine's description under another fingerprint. */
static void other_machine(lntune_cpu_info *cpu) __attribute__((unused));
static void other_machine(lntune_cpu_info *cpu) {
    lntune_cpu_info_get(cpu);
    snprintf(cpu->model, sizeof cpu->model, "Some Other CPU");
    snprintf(cpu->fingerprint, sizeof cpu->fingerprint, "00000000deadbeef");
}

#endif /* LNTUNE_TUNEDB_H */
