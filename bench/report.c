/*
 * report.c - the markdown report: per thread count and op, a table of every implementation at
 * every shape (GB/s and the ratio to the better copy for bandwidth shapes, microseconds per call
 * for latency shapes), with busy-machine and disagreement marks, the reasons for every n/a, and
 * each implementation's largest error.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

static const char *const impl_order[] = {
    "lntune_tuned", "lntune_builtin", "lntune_export", "onednn", "onednn3",     "ort",
    "ggml",         "torch",          "torch_out",     "naive",  "copy_memcpy", "copy_nt"};
enum { NIMPL = sizeof impl_order / sizeof impl_order[0] };

const char *lntune_bench_impl_label(const char *impl) {
    static const char *const labels[][2] = {{"lntune_tuned", "lntune tuned"},
                                            {"lntune_builtin", "lntune built-in"},
                                            {"lntune_export", "lntune export"},
                                            {"onednn", "oneDNN 2"},
                                            {"onednn3", "oneDNN 3"},
                                            {"ort", "ONNX Runtime"},
                                            {"ggml", "ggml"},
                                            {"torch", "PyTorch"},
                                            {"torch_out", "PyTorch out="},
                                            {"naive", "naive C"},
                                            {"copy_memcpy", "memcpy"},
                                            {"copy_nt", "NT copy"}};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; ++i)
        if (strcmp(labels[i][0], impl) == 0) return labels[i][1];
    return impl;
}

/* The better of the two copies of the same bytes: the bandwidth limit of the shape. */
static double copy_limit(const lntune_bench_records *rs, int threads, int64_t rows, int64_t H) {
    double best = 0.0;
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        if (r->threads == threads && r->rows == rows && r->H == H && strcmp(r->op, "copy") == 0 &&
            r->us > 0 && r->gbps > best)
            best = r->gbps;
    }
    return best;
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

static void section(FILE *f, const lntune_bench_records *rs, int threads, const char *op) {
    fprintf(f, "\n## %s, %d thread%s\n\n| shape |",
            strcmp(op, "layernorm") ? "RMSNorm" : "LayerNorm", threads, threads > 1 ? "s" : "");
    for (int i = 0; i < NIMPL; ++i) fprintf(f, " %s |", lntune_bench_impl_label(impl_order[i]));
    fprintf(f, "\n|---|");
    for (int i = 0; i < NIMPL; ++i) fprintf(f, "---:|");
    fprintf(f, "\n");
    int busy = 0, flagged = 0;
    double busiest = 0.0;
    /* Shapes in the order they were measured. */
    for (size_t s = 0; s < rs->n; ++s) {
        const lntune_bench_record *k = &rs->r[s];
        if (k->threads != threads) continue;
        int first = 1;
        for (size_t j = 0; j < s; ++j)
            if (rs->r[j].threads == threads && rs->r[j].rows == k->rows && rs->r[j].H == k->H)
                first = 0;
        if (!first) continue;
        const int lat = lntune_bench_is_latency(k->rows, k->H);
        const double limit = copy_limit(rs, threads, k->rows, k->H);
        fprintf(f, "| %lldx%lld%s |", (long long)k->rows, (long long)k->H, lat ? " (latency)" : "");
        for (int i = 0; i < NIMPL; ++i) {
            const lntune_bench_record *r =
                lntune_bench_find(rs, impl_order[i], op, threads, k->rows, k->H);
            if (!r || r->us < 0) {
                fprintf(f, " n/a |");
                continue;
            }
            if (lat)
                fprintf(f, " %.2f us", r->us);
            else if (limit > 0)
                fprintf(f, " %.1f GB/s (%.2fx)", r->gbps, r->gbps / limit);
            else
                fprintf(f, " %.1f GB/s", r->gbps);
            if (r->busy > LNTUNE_BENCH_BUSY_CORES) fprintf(f, " \\*"), busy = 1;
            if (r->flagged) fprintf(f, " !"), flagged = 1;
            if (r->busy > busiest) busiest = r->busy;
            fprintf(f, " |");
        }
        fprintf(f, "\n");
    }
    if (busy)
        fprintf(f,
                "\n\\* busy machine: other processes used more than %.2f cores on average while "
                "this was measured (up to %.2f cores in this table); treat it as noisy.\n",
                LNTUNE_BENCH_BUSY_CORES, busiest);
    if (flagged)
        fprintf(f, "\n! disagrees with the float64 reference by more than %.2g (verifier unit).\n",
                LNTUNE_BENCH_TOLERANCE);
    /* Each implementation's largest error, and why anything is n/a (each reason once). */
    fprintf(f, "\nMax error vs float64 (verifier unit, over all shapes):");
    for (int i = 0; i < NIMPL; ++i) {
        double worst = -1.0;
        for (size_t j = 0; j < rs->n; ++j) {
            const lntune_bench_record *r = &rs->r[j];
            if (r->threads == threads && strcmp(r->impl, impl_order[i]) == 0 &&
                (strcmp(r->op, op) == 0 || strcmp(r->op, "copy") == 0) && r->max_error > worst)
                worst = r->max_error;
        }
        if (worst >= 0) fprintf(f, " %s %.2g;", lntune_bench_impl_label(impl_order[i]), worst);
    }
    fprintf(f, "\n");
    int listed = 0;
    for (int i = 0; i < NIMPL; ++i) {
        const char *said = NULL;
        for (size_t j = 0; j < rs->n; ++j) {
            const lntune_bench_record *r = &rs->r[j];
            if (r->threads != threads || strcmp(r->impl, impl_order[i]) != 0 ||
                strcmp(r->op, op) != 0 || !r->note[0] || (said && strcmp(said, r->note) == 0))
                continue;
            /* A measured peer's note says what was called, where more than one thing could be. */
            if (r->us >= 0 && strncmp(impl_order[i], "torch", 5) != 0 &&
                strcmp(impl_order[i], "ort") != 0 && strcmp(impl_order[i], "ggml") != 0)
                continue;
            fprintf(f, "%s- %s: %s%s\n", listed ? "" : "\n", lntune_bench_impl_label(impl_order[i]),
                    r->us < 0 ? "n/a: " : "", r->note);
            said = r->note, listed = 1;
        }
    }
}

void lntune_bench_write_markdown(FILE *f, const lntune_bench_records *rs, const char *title) {
    fprintf(f, "# %s\n\n", title ? title : "lntune benchmarks");
    const char *dtype = lntune_bench_records_dtype(rs);
    if (strcmp(dtype, "f32") == 0)
        fprintf(f, "fp32 forward");
    else
        fprintf(
            f,
            "%s forward: x, y, gamma and beta in %s (the oneDNN peers get the same gamma and beta "
            "widened to fp32, the only type 2.x and 3.2 take); the error of a %s y is against half "
            "an "
            "ulp of %s, scaled so that 2^-20 is the verifier's bound",
            dtype, dtype, dtype, dtype);
    fprintf(f, ", y = norm(x) * gamma (+ beta), rows x H contiguous. GB/s counts x read "
               "once and y written once; the ratio is to the better of the two copies of the same "
               "bytes (memcpy, non-temporal stores) in the same run. Median per-call time of at "
               "least 7 interleaved repetitions of at least 50 ms each, each after untimed calls "
               "until the caches settle (a loop of that call). Latency shapes: microseconds "
               "per call.\n");
    int threads[16], nt = 0;
    for (size_t i = 0; i < rs->n; ++i) {
        int seen = 0;
        for (int j = 0; j < nt; ++j) seen |= threads[j] == rs->r[i].threads;
        if (!seen && nt < 16) threads[nt++] = rs->r[i].threads;
    }
    qsort(threads, (size_t)nt, sizeof threads[0], cmp_int);
    lntune_bench_write_targets(f, rs);
    for (int t = 0; t < nt; ++t) {
        section(f, rs, threads[t], "layernorm");
        section(f, rs, threads[t], "rmsnorm");
    }
}
