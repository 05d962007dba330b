/*
 * targets.c - the report's verdict on the CPU targets, computed from the records of the run
 * itself, so that a table and its verdict can never disagree. fp32 (issue #7):
 *   1. lntune tuned >= 0.9x the better copy at every bandwidth shape, at every thread count;
 *   2. never slower than oneDNN at any shape, and >= 1.3x oneDNN in geometric mean (LayerNorm:
 *      oneDNN 2.6 and 3.2 have no RMSNorm); where both oneDNN peers ran, against the faster of
 *      the two in each cell;
 *   3. <= 0.7 us per call at 1x4096, single thread.
 * fp16 and bf16 (issue #6): LayerNorm at 4096x4096 >= 0.85x the better copy, at every thread
 * count; and 2. as for fp32, for the record.
 * Each line says met or missed, and names every shape that misses with its figure.
 */
#include "bench.h"

#include <math.h>
#include <string.h>

#define COPY_RATIO_TARGET 0.9
#define HALF_COPY_RATIO_TARGET 0.85 /* fp16/bf16 LayerNorm, HALF_TARGET_ROWS x HALF_TARGET_H */
#define HALF_TARGET_ROWS 4096
#define HALF_TARGET_H 4096
#define ONEDNN_GEOMEAN_TARGET 1.3
#define LATENCY_TARGET_US 0.7

static const char *const ops[] = {"layernorm", "rmsnorm"};

static const char *op_label(const char *op) {
    return strcmp(op, "layernorm") == 0 ? "LayerNorm" : "RMSNorm";
}

/* The better copy of the shape at threads (GB/s), 0 if neither copy was measured. */
static double better_copy(const lntune_bench_records *rs, int threads, int64_t rows, int64_t H) {
    double best = 0.0;
    static const char *const copies[] = {"copy_memcpy", "copy_nt"};
    for (int i = 0; i < 2; ++i) {
        const lntune_bench_record *c = lntune_bench_find(rs, copies[i], "copy", threads, rows, H);
        if (c && c->us > 0 && c->gbps > best) best = c->gbps;
    }
    return best;
}

/* Starts a verdict line; the caller lists the misses (if any) after it. */
static void verdict(FILE *f, int met, const char *what) {
    fprintf(f, "- **%s** %s", met ? "met:" : "missed:", what);
}

/* Whether r is a cell of the copy target: a tuned bandwidth shape, or for 16-bit types only
 * LayerNorm at the shape. */
static int copy_cell(const lntune_bench_record *r, int half) {
    if (strcmp(r->impl, "lntune_tuned") || r->us <= 0 || lntune_bench_is_latency(r->rows, r->H))
        return 0;
    return !half || (strcmp(r->op, "layernorm") == 0 && r->rows == HALF_TARGET_ROWS &&
                     r->H == HALF_TARGET_H);
}

/* Target 1: every cell of the copy target against its better copy. */
static void copy_target(FILE *f, const lntune_bench_records *rs, int half) {
    const double target = half ? HALF_COPY_RATIO_TARGET : COPY_RATIO_TARGET;
    char what[128];
    if (half)
        snprintf(what, sizeof what, "lntune tuned LayerNorm %dx%d >= %.2fx the better copy",
                 HALF_TARGET_ROWS, HALF_TARGET_H, target);
    else
        snprintf(what, sizeof what,
                 "lntune tuned >= %.1fx the better copy at every bandwidth shape", target);
    int measured = 0, misses = 0;
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        const double limit = copy_cell(r, half) ? better_copy(rs, r->threads, r->rows, r->H) : 0.0;
        if (limit <= 0) continue;
        measured++;
        misses += r->gbps / limit < target;
    }
    if (!measured) {
        fprintf(f, "- **not measured:** %s\n", what);
        return;
    }
    verdict(f, misses == 0, what);
    fprintf(f, " (%d of %d shape x op x thread-count cells below)", misses, measured);
    const char *sep = ": ";
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        const double limit = copy_cell(r, half) ? better_copy(rs, r->threads, r->rows, r->H) : 0.0;
        if (limit > 0 && r->gbps / limit < target) {
            fprintf(f, "%s%s %lldx%lld %dt %.2fx", sep, op_label(r->op), (long long)r->rows,
                    (long long)r->H, r->threads, r->gbps / limit);
            sep = ", ";
        }
    }
    fprintf(f, "\n");
}

/* The faster oneDNN (2.x, 3.x) of r's cell, or NULL where neither was measured. */
static const lntune_bench_record *onednn_of(const lntune_bench_records *rs,
                                            const lntune_bench_record *r) {
    static const char *const peers[] = {"onednn", "onednn3"};
    const lntune_bench_record *best = NULL;
    for (int i = 0; i < 2; ++i) {
        const lntune_bench_record *d =
            lntune_bench_find(rs, peers[i], r->op, r->threads, r->rows, r->H);
        if (d && d->us > 0 && (!best || d->us < best->us)) best = d;
    }
    return best;
}

/* Target 2: lntune tuned against oneDNN, shape by shape (time ratio), and in geometric mean. */
static void onednn_target(FILE *f, const lntune_bench_records *rs) {
    double log_sum = 0.0;
    int pairs = 0, slower = 0, seen[2] = {0, 0}; /* cells that had oneDNN 2, oneDNN 3 */
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        if (strcmp(r->impl, "lntune_tuned") || r->us <= 0) continue;
        const lntune_bench_record *d = onednn_of(rs, r);
        if (!d) continue;
        log_sum += log(d->us / r->us);
        pairs++;
        slower += r->us > d->us;
        for (int k = 0; k < 2; ++k) {
            const lntune_bench_record *e =
                lntune_bench_find(rs, k ? "onednn3" : "onednn", r->op, r->threads, r->rows, r->H);
            seen[k] += e && e->us > 0;
        }
    }
    if (!pairs) {
        fprintf(f, "- **not measured:** lntune tuned against oneDNN\n");
        return;
    }
    const char *which = seen[0] && seen[1] ? "the faster of oneDNN 2 and 3"
                        : seen[1]          ? "oneDNN 3"
                                           : "oneDNN 2";
    char what[96];
    snprintf(what, sizeof what, "never slower than %s", which);
    verdict(f, slower == 0, what);
    fprintf(f, " (%d of %d cells slower)", slower, pairs);
    const char *sep = ": ";
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        if (strcmp(r->impl, "lntune_tuned") || r->us <= 0) continue;
        const lntune_bench_record *d = onednn_of(rs, r);
        if (d && r->us > d->us) {
            fprintf(f, "%s%s %lldx%lld %dt %.2fx %s's speed", sep, op_label(r->op),
                    (long long)r->rows, (long long)r->H, r->threads, d->us / r->us,
                    lntune_bench_impl_label(d->impl));
            sep = ", ";
        }
    }
    const double geomean = exp(log_sum / pairs);
    fprintf(f, "\n");
    verdict(f, geomean >= ONEDNN_GEOMEAN_TARGET, "");
    fprintf(f, ">= %.1fx %s in geometric mean: %.2fx over %d cells\n", ONEDNN_GEOMEAN_TARGET, which,
            geomean, pairs);
}

/* Target 3: 1x4096 at one thread, each op. */
static void latency_target(FILE *f, const lntune_bench_records *rs) {
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; ++k) {
        const lntune_bench_record *r = lntune_bench_find(rs, "lntune_tuned", ops[k], 1, 1, 4096);
        if (!r || r->us <= 0) {
            fprintf(f, "- **not measured:** %s 1x4096 at 1 thread\n", op_label(ops[k]));
            continue;
        }
        verdict(f, r->us <= LATENCY_TARGET_US, "");
        fprintf(f, "%s 1x4096 at 1 thread <= %.1f us: %.2f us\n", op_label(ops[k]),
                LATENCY_TARGET_US, r->us);
    }
}

void lntune_bench_write_targets(FILE *f, const lntune_bench_records *rs) {
    const int half = strcmp(lntune_bench_records_dtype(rs), "f32") != 0;
    fprintf(f, "\n## Targets (issue #%d), from this run's figures\n\n", half ? 6 : 7);
    copy_target(f, rs, half);
    onednn_target(f, rs);
    if (!half) latency_target(f, rs);
}
