/*
 * export.c - writes lntune_kernels.{c,h} (see export.h for what and why), in three stages that
 * lntune_export (at the end) runs in turn, the CUDA half's (export_cuda.c) beside each: read the
 * store into a plan, generate every kernel's text, write the files.
 *
 * The dispatch code of the exported file is fixed text below; the kernels, the tables, the entry
 * points (one pair per row of lntune_export_ops) and the header comment vary. The table keys on
 * (op, fusion, type tuple, H, affine, rows bucket) as the runtime's descriptor does: the tuple
 * packs as core/dtypes.h packs it (0 for all-fp32; the residual's type only when not x's) and
 * the rows buckets come from lntune_rows_bucket, so the exported code picks a winner exactly as
 * the runtime does: the winner of the call's bucket, else the nearest tuned bucket of the same
 * op, fusion, tuple, H and affine, else the nearest H's kernel that reads H at run time (a
 * winner's own, or its run-time-H twin, exported beside it), each only where it serves the call
 * (exported/cpu/dispatch.c), else the generic kernel of the tuple (fp32, and the fp16/bf16
 * tuples the winners have: the templates' built-in variants; the other tuples: export_typed.c's
 * portable kernels; with a residual: the residual fallback of export_typed.c around those; with
 * a quantized y: that of an fp32 y, quantized by exported/cpu/quant_fallback.c).
 */
#include "export_internal.h"

#include "builtin.h"
#include "builtin_policy.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"
#include "problem.h"
#include "tuning_db.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The table's affine of a weight-offset winner (0 neither, 1 gamma, 2 beta only: the rest). */
enum { EXPORT_AFFINE_OFFSET = 3 };

/* "affine", "no affine", "gamma + offset": a winner's affine in the header comment. */
static const char *affine_text(int affine) {
    return affine == EXPORT_AFFINE_OFFSET ? "gamma + offset" : affine ? "affine" : "no affine";
}

typedef struct {
    char op[32], dtype[24], variant[512], template_hash[17]; /* op: the database's text */
    char base_op[32];       /* op without the fusion: the template's op */
    int fusion;             /* LNTUNE_FUSION_* */
    int backward;           /* a gradient kernel (base_op "layernorm_backward", ...) */
    int op_index;           /* in lntune_export_ops */
    lntune_types types;     /* parsed from dtype */
    char twin_variant[512]; /* a fixed-H winner's run-time-H twin, "" if none */
    int64_t H, tuned_rows, rows_lo, rows_hi;
    int affine, threads;
    int any_alignment; /* plain stores: may serve rows less aligned than its own */
    int any_h;         /* 0 none, 1 the winner reads H at run time, 2 its twin does */
    double median_ns, gbps, copy_gbps, max_error;
    char measured[17]; /* the template hash it was measured with, "" unknown */
} winner;

typedef struct {
    winner *w;
    size_t n, cap;
    int oom;
    int skipped; /* rows of an op or dtype text this export does not know */
    const lntune_export_config *c;
} winner_list;

/* Every CPU winner of an op and type tuple the export knows; the others, each with a warning. */
static int collect(void *ud, const lntune_db_key *key, const lntune_best *b) {
    winner_list *l = ud;
    if (strcmp(key->target, "cpu") != 0) return 0;
    char base[32];
    int fusion = LNTUNE_FUSION_NONE, op = -1, backward = 0, offset = 0;
    lntune_op forward;
    const lntune_direction *dir;
    if (lntune_op_key_parse(key->op, base, sizeof base, &fusion, &offset) == 0 &&
        lntune_op_text_parse(base, &forward, &dir, NULL) == 0) {
        backward = dir->suffix[0] != '\0';
        op = lntune_export_op_find(lntune_op_name(forward));
        if (backward && fusion == LNTUNE_FUSION_RESIDUAL_OUT) op = -1; /* no such kernel */
    }
    lntune_types types;
    const int parsed = op >= 0 && lntune_types_parse(key->dtype, &types) == 0;
    if (!parsed || (offset && backward) || (backward && lntune_type_quantized(types.y))) {
        const char *why =
            !parsed  ? (op < 0 ? "op unknown to this export" : "dtype unknown to this export")
            : offset ? "op unknown to this export"
                     : "a quantized y has no backward";
        lntune_export_warn(l->c, "%s %s H=%lld: %s; left out", key->op, key->dtype,
                           (long long)key->H, why);
        ++l->skipped;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        winner *w = realloc(l->w, cap * sizeof *w);
        if (!w) {
            l->oom = 1;
            return 1;
        }
        l->w = w, l->cap = cap;
    }
    winner *w = &l->w[l->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->op, sizeof w->op, "%s", key->op);
    snprintf(w->base_op, sizeof w->base_op, "%s", base);
    w->fusion = fusion;
    w->backward = backward;
    snprintf(w->dtype, sizeof w->dtype, "%s", key->dtype);
    w->op_index = op;
    w->types = types;
    snprintf(w->variant, sizeof w->variant, "%s", b->variant ? b->variant : "");
    /* a twin without code was declined (it failed there) and serves nothing, as in liblntune */
    if (b->twin_variant && b->twin_artifact_key && !backward)
        snprintf(w->twin_variant, sizeof w->twin_variant, "%s", b->twin_variant);
    w->any_alignment = b->any_alignment;
    w->H = key->H;
    w->tuned_rows = b->tuned_rows > 0 ? b->tuned_rows : key->rows;
    w->affine = offset ? EXPORT_AFFINE_OFFSET : key->affine;
    w->threads = b->threads > 0 ? b->threads : 1;
    w->median_ns = b->median_ns, w->gbps = b->gbps, w->copy_gbps = b->copy_gbps;
    w->max_error = b->max_error;
    lntune_export_bucket_range(w->tuned_rows > 0 ? w->tuned_rows : 1, &w->rows_lo, &w->rows_hi);
    return 0;
}

/* Where the exported generic kernels take AVX2's width: the app's compiler flags decide (the
 * tuned kernels carry their own target attributes: export_isa.c; these follow the file's
 * flags); and from which size of call they store non-temporally (that copy exists only at
 * AVX2's width). */
static void put_levels_switch(lntune_export_buf *b, int64_t streaming_bytes) {
    lntune_export_put(
        b,
        "/* The generic kernels (shapes no winner covers): 8-lane AVX2 with F16C conversions "
        "where\n"
        " * this file is compiled for AVX2, FMA and F16C (-march=native on such a CPU), else "
        "4-lane\n"
        " * portable vectors; -DLNTUNE_KERNELS_NO_AVX2 forces the latter. */\n"
        "#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && "
        "!defined(LNTUNE_KERNELS_NO_AVX2)\n"
        "#define LNTUNE_KERNELS_AVX2 1\n"
        "#else\n"
        "#define LNTUNE_KERNELS_AVX2 0\n"
        "#endif\n\n"
        "/* A generic call whose tensors (x, y, residual and residual_out) reach this many bytes\n"
        " * takes the AVX2 copy that stores non-temporally and prefetches the next row: its "
        "output\n"
        " * would leave the cache before anyone read it. The default is the crossover the tuner\n"
        " * measured on the machine this file was exported on (else its last-level cache);\n"
        " * -DLNTUNE_KERNELS_STREAMING_BYTES=N sets another. */\n"
        "#ifndef LNTUNE_KERNELS_STREAMING_BYTES\n"
        "#define LNTUNE_KERNELS_STREAMING_BYTES %lld\n"
        "#endif\n\n"
        "/* -DLNTUNE_KERNELS_BATCH_INVARIANT=1: every row of a forward call gets the same bits\n"
        " * in y, mean, rstd and residual_out whatever rows, threads or batch it comes in (as\n"
        " * liblntune's LNTUNE_OPEN_BATCH_INVARIANT): one kernel serves every row count of an op,\n"
        " * tuple, H and affine kind, the winner tuned at the most rows (else the generic one, "
        "which\n"
        " * then never switches to its non-temporal copy). The backward is not covered. */\n"
        "#ifndef LNTUNE_KERNELS_BATCH_INVARIANT\n"
        "#define LNTUNE_KERNELS_BATCH_INVARIANT 0\n"
        "#endif\n\n"
        "/* Whether a call of a->rows x a->H elements, element_bytes in all its tensors, streams. "
        "*/\n"
        "static int streaming_call(const lntune_kernel_args *a, int64_t element_bytes)\n"
        "{\n"
        "    return LNTUNE_KERNELS_AVX2 && !LNTUNE_KERNELS_BATCH_INVARIANT &&\n"
        "           a->rows * a->H >= (int64_t)(LNTUNE_KERNELS_STREAMING_BYTES) / element_bytes;\n"
        "}\n\n",
        (long long)streaming_bytes);
}

/*
 * The fp32 generic kernels of each op (the templates' built-in variants, already in the text) as
 * the table generic_f32[op][affine] (0 neither, 1 gamma, 2 beta only), with a beta-only wrapper
 * for the ops that take beta, and op_takes_beta[op].
 */
static int put_generic_f32(lntune_export_buf *b, int avx2, char *msg, size_t msglen) {
    char plain[LNTUNE_EXPORT_MAX_OPS][128], affine[LNTUNE_EXPORT_MAX_OPS][128];
    if (lntune_export_op_count > LNTUNE_EXPORT_MAX_OPS) {
        snprintf(msg, msglen, "more ops than LNTUNE_EXPORT_MAX_OPS");
        return LNTUNE_ERROR;
    }
    for (size_t op = 0; op < lntune_export_op_count; ++op) {
        plain[op][0] = affine[op][0] = '\0';
        for (size_t i = 0; i < lntune_builtin_variant_count; ++i)
            if (strcmp(lntune_builtin_variants[i].op, lntune_export_ops[op].name) == 0)
                lntune_builtin_symbol("lntune_kernels_generic", i,
                                      lntune_builtin_variants[i].affine ? affine[op] : plain[op],
                                      sizeof plain[op]);
        if (!plain[op][0] || !affine[op][0]) {
            snprintf(msg, msglen, "op %s has no built-in variants (gen/template/builtin.c)",
                     lntune_export_ops[op].name);
            return LNTUNE_ERROR;
        }
        if (lntune_export_ops[op].takes_beta)
            lntune_export_put(
                b,
                "/* Beta without gamma: the generic plain kernel, then beta added. */\n"
                "static int generic_%s_beta_only(const lntune_kernel_args *a, int64_t begin, "
                "int64_t end)\n{\n"
                "    lntune_kernel_args plain = *a;\n"
                "    plain.beta = NULL;\n"
                "    int rc = %s(&plain, begin, end);\n"
                "    for (int64_t r = begin; rc == LNTUNE_KERNEL_OK && r < end; ++r) {\n"
                "        float *y = (float *)a->y + r * a->y_stride;\n"
                "        for (int64_t i = 0; i < a->H; ++i) y[i] += ((const float *)a->beta)[i];\n"
                "    }\n    return rc;\n}\n\n",
                lntune_export_ops[op].name, plain[op]);
    }
    lntune_export_put(b, "/* [op][affine]: 0 neither, 1 gamma (beta optional), 2 beta only. */\n"
                         "static const lntune_kernel_fn generic_f32[][3] = {\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op) {
        char beta_only[160] = "NULL";
        if (lntune_export_ops[op].takes_beta)
            snprintf(beta_only, sizeof beta_only, "generic_%s_beta_only",
                     lntune_export_ops[op].name);
        lntune_export_put(b, "    {%s, %s, %s},\n", plain[op], affine[op], beta_only);
    }
    lntune_export_put(b, "};\n\n/* [op][affine: 0 neither, 1 gamma]: generic_f32's copy with "
                         "non-temporal stores;\n * NULL: none. */\n"
                         "static const lntune_kernel_fn streaming_f32[][2] = {\n");
    if (avx2) lntune_export_put(b, "#if LNTUNE_KERNELS_AVX2\n");
    for (size_t op = 0; avx2 && op < lntune_export_op_count; ++op) {
        char streaming[2][128];
        for (int k = 0; k < 2; ++k) /* the generic's name with "streaming" for "generic" */
            snprintf(streaming[k], sizeof streaming[k], "lntune_kernels_streaming%s",
                     (k ? affine[op] : plain[op]) + strlen("lntune_kernels_generic"));
        lntune_export_put(b, "    {%s, %s},\n", streaming[0], streaming[1]);
    }
    if (avx2) lntune_export_put(b, "#else\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        lntune_export_put(b, "    {NULL, NULL},\n");
    if (avx2) lntune_export_put(b, "#endif\n");
    lntune_export_put(b, "};\n\nstatic const int op_takes_beta[] = {");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        lntune_export_put(b, "%s%d", op ? ", " : "", lntune_export_ops[op].takes_beta);
    lntune_export_put(b, "};\n\n");
    return LNTUNE_OK;
}

/* The generic kernels' variants: the templates' presets of the levels the file carries. */
static void put_generic_variants(lntune_export_buf *b, lntune_gen *g, int avx2) {
    const struct {
        const lntune_builtin_level *level;
        const char *where;
    } levels[] = {
        {&lntune_builtin_generic, ""},
        {&lntune_builtin_avx2, ", where the file is compiled for AVX2, FMA and F16C"},
        {&lntune_builtin_avx2_streaming, ", there from LNTUNE_KERNELS_STREAMING_BYTES"},
    };
    for (size_t l = 0; l < (avx2 ? 3u : 1u); ++l) {
        lntune_export_put(b, " *   preset %s%s:\n", levels[l].level->preset, levels[l].where);
        for (size_t i = 0; i < lntune_builtin_variant_count; ++i) {
            char *variant = NULL;
            lntune_builtin_variant_string(g, levels[l].level, i, &variant);
            lntune_export_put(b, " *     %s %s: %s\n", lntune_builtin_variants[i].op,
                              lntune_builtin_variants[i].affine ? "affine" : "no affine",
                              variant ? variant : lntune_gen_errmsg(g));
            free(variant);
        }
    }
}

static void write_header_comment(lntune_export_buf *b, const lntune_cpu_info *cpu,
                                 const winner_list *l, const int *ok, const char *db_note,
                                 const lntune_export_buf *generic_variants) {
    char features[256], target[256];
    lntune_hw_features_string(cpu->isa, features, sizeof features);
    lntune_export_target_text(cpu, target, sizeof target);
    lntune_export_put(b, "/*\n * generated by lntune export; do not edit.\n *\n");
    lntune_export_put(b, " * hardware: %s (fingerprint %s), %s, %d logical CPUs\n", cpu->model,
                      cpu->fingerprint, features, cpu->cores);
    if (target[0])
        lntune_export_put(
            b,
            " * Compiles with any flags, no -march needed: the tuned kernels (measured with\n"
            " * -march=native) carry target(\"%s\")\n"
            " * and run where the CPU has all of it (checked at run time); on other CPUs, and "
            "compiled\n"
            " * for another architecture, the generic kernels serve every call "
            "(-DLNTUNE_KERNELS_FORCE_GENERIC:\n"
            " * on any CPU). The generic kernels take AVX2's width where the file is compiled for "
            "AVX2,\n * FMA and F16C (-march=native on such a CPU).\n",
            target);
    else
        lntune_export_put(b, " * Compiles with any flags; compiled for another architecture, "
                             "the generic kernels serve\n * every call "
                             "(-DLNTUNE_KERNELS_FORCE_GENERIC: here too).\n");
    if (db_note) lntune_export_put(b, " * %s\n", db_note);
    lntune_export_put(
        b, " *\n * tuned kernels (op dtype H rows-bucket affine: variant, threads, median time,\n"
           " * bandwidth, verified max error in units of 2^-24 of the output's terms):\n");
    int any = 0;
    for (size_t i = 0; i < l->n; ++i) {
        const winner *w = &l->w[i];
        if (!ok[i]) continue;
        any = 1;
        char hi[32];
        if (w->rows_hi == INT64_MAX)
            snprintf(hi, sizeof hi, "...");
        else
            snprintf(hi, sizeof hi, "%lld", (long long)w->rows_hi);
        lntune_export_put(
            b,
            " *   t%zu: %s %s H=%lld rows %lld-%s (tuned at %lld) %s: %s, %d thread(s), "
            "%.0f ns, %.1f GB/s (copy %.1f), max error %.3g\n",
            i, w->op, w->dtype, (long long)w->H, (long long)w->rows_lo, hi,
            (long long)w->tuned_rows, affine_text(w->affine), w->variant, w->threads, w->median_ns,
            w->gbps, w->copy_gbps, w->max_error);
    }
    if (!any) lntune_export_put(b, " *   (none)\n");
    lntune_export_put(b, " *\n * generic kernels (any shape no winner covers), the templates' "
                         "presets:\n");
    lntune_export_put(b, "%s", generic_variants->s ? generic_variants->s : "");
    lntune_export_put(b, " *   fp16/bf16 tuples of a winner: the same presets for that tuple;"
                         " the others,\n *   and beta without gamma: portable kernels, one per "
                         "op and tuple\n */\n");
}

static int count_gpu(void *ud, const lntune_db_hardware *hw) {
    if (strcmp(hw->kind, "cuda") == 0) ++*(int *)ud;
    return 0;
}

/*
 * Opens the database and reads this CPU's winners into list (*hw: its hardware row). A database
 * that is missing, refused, or holds no results of this machine (neither its CPU nor a GPU) is
 * an error: exporting it would write generic kernels where the user expects tuned ones. A GPU
 * database without this CPU is a warning (its CPU kernels are the generic ones).
 */
static int read_winners(const lntune_export_config *c, const char *fingerprint, lntune_db **db,
                        int64_t *hw, winner_list *list, char *note, size_t notelen,
                        lntune_export_report *r) {
    int rc = lntune_db_open(c->db_path, LNTUNE_DB_READONLY, db);
    if (rc != LNTUNE_OK) {
        snprintf(r->message, sizeof r->message,
                 "%s; tune first (lntune --shape H=N), or --generic-only for the generic kernels "
                 "alone",
                 *db ? lntune_db_errmsg(*db) : lntune_errstr(rc));
        return rc;
    }
    int gpus = 0;
    rc = lntune_db_find_hardware(*db, fingerprint, hw);
    if (rc == LNTUNE_ENOTFOUND &&
        (rc = lntune_db_each_hardware(*db, count_gpu, &gpus)) == LNTUNE_OK) {
        if (!gpus) {
            snprintf(r->message, sizeof r->message,
                     "the tuning database %s holds no results of this machine (%s): tune here "
                     "first, or --generic-only for the generic kernels alone",
                     lntune_db_path(*db), fingerprint);
            return LNTUNE_ENOTFOUND;
        }
        snprintf(note, notelen,
                 "the tuning database %s has no record of this machine's CPU: generic CPU "
                 "kernels only",
                 lntune_db_path(*db));
        lntune_export_warn(c, "%s", note);
        return LNTUNE_OK;
    }
    if (rc == LNTUNE_OK) rc = lntune_db_each_best(*db, *hw, collect, list);
    if (rc != LNTUNE_OK || list->oom) {
        snprintf(r->message, sizeof r->message, "reading the winners: %s",
                 list->oom ? "out of memory" : lntune_db_errmsg(*db));
        return list->oom ? LNTUNE_ENOMEM : rc;
    }
    return LNTUNE_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Plan: what the store says, read before anything is generated or written                    */

typedef struct {
    lntune_cpu_info cpu;
    winner_list list; /* this CPU's winners, each with the template hash it was measured with */
    lntune_db *db;    /* NULL: none read (--generic-only) */
    int64_t hw;       /* this CPU's hardware row (0: none) */
    int64_t streaming_bytes;  /* where the generic kernels store non-temporally */
    int avx2;                 /* the generic kernels come at AVX2's width too (x86-64) */
    char note[600];           /* a line of the header comment about the database; "" none */
    lntune_export_cuda *cuda; /* the CUDA half */
} export_plan;

static int read_plan(const lntune_export_config *c, export_plan *p, lntune_export_report *r) {
    lntune_cpu_info_get(&p->cpu);
    snprintf(r->fingerprint, sizeof r->fingerprint, "%s", p->cpu.fingerprint);
    p->list.c = c;
    if (c->generic_only)
        snprintf(p->note, sizeof p->note,
                 "--generic-only: the generic kernels alone, no tuning database read");
    int rc = c->generic_only ? LNTUNE_OK
                             : read_winners(c, p->cpu.fingerprint, &p->db, &p->hw, &p->list,
                                            p->note, sizeof p->note, r);
    if (rc != LNTUNE_OK) return rc;
    for (size_t i = 0; i < p->list.n; ++i) {
        winner *w = &p->list.w[i];
        lntune_db_key key = {p->hw,
                             "cpu",
                             w->op,
                             w->dtype,
                             w->H,
                             w->tuned_rows,
                             w->affine == EXPORT_AFFINE_OFFSET ? 1 : w->affine};
        lntune_export_measured_hash(p->db, &key, w->variant, w->measured);
    }
    /* The generic kernels, at AVX2's width too where the file may be compiled for it, and there
     * once more with non-temporal stores for large calls. */
    p->avx2 = strcmp(p->cpu.arch, "x86_64") == 0;
    int64_t crossover = 0; /* measured by the tuner on this machine, at every core */
    if (lntune_db_get_crossover(p->db, p->hw, LNTUNE_CROSSOVER_STREAMING_BYTES, p->cpu.cores,
                                &crossover, NULL, NULL, 0) != LNTUNE_OK)
        crossover = 0;
    p->streaming_bytes = crossover > 0 ? crossover : lntune_cpu_last_level_cache(&p->cpu);
    if ((rc = lntune_export_cuda_plan(p->db, c, r, &p->cuda)) != LNTUNE_OK) return rc;
    /* Then, before anything is generated or written: DIR made, no file of a user's in the way. */
    return lntune_export_prepare_dir(c->out_dir, c->cmake, r->message, sizeof r->message);
}

/* ------------------------------------------------------------------------------------------ */
/* Generate: every kernel's text, from the templates                                          */

typedef struct {
    int *ok;                            /* per winner: its kernel is in kernels */
    int max_threads;                    /* every core, and every winner's count */
    lntune_export_buf kernels;          /* tuned, generic and fallback kernels */
    lntune_export_buf generic_variants; /* the header comment's lines of the generic variants */
} export_code;

/* The tuned kernels of p's winners into code->kernels; a winner that no longer generates is left
 * out with a warning (code->ok[i] 0). */
static void generate_tuned(const export_plan *p, lntune_gen *g, const lntune_export_config *c,
                           export_code *code, lntune_export_report *r) {
    if (p->list.n) lntune_export_put_tuned_begin(&code->kernels, &p->cpu);
    for (size_t i = 0; i < p->list.n; ++i) {
        winner *w = &p->list.w[i];
        char symbol[64];
        snprintf(symbol, sizeof symbol, "lntune_kernels_t%zu", i);
        lntune_shape shape = {.H = w->H, .types = w->types, .fusion = w->fusion};
        if (w->affine == EXPORT_AFFINE_OFFSET) shape.affine = LNTUNE_AFFINE_OFFSET;
        lntune_source src;
        if (lntune_gen_emit(g, "cpu", w->base_op, w->variant, &shape, symbol, &src) != LNTUNE_OK) {
            lntune_export_warn(c, "%s %s H=%lld: variant '%s' no longer generates (%s); left out",
                               w->op, w->dtype, (long long)w->H, w->variant, lntune_gen_errmsg(g));
            ++r->skipped;
            continue;
        }
        if (w->measured[0] && strcmp(w->measured, src.template_hash) != 0)
            lntune_export_warn(
                c,
                "%s %s H=%lld: the template changed since '%s' was measured (hash %s, now %s); "
                "exporting the regenerated source: re-tune to refresh its timing",
                w->op, w->dtype, (long long)w->H, w->variant, w->measured, src.template_hash);
        lntune_export_put(&code->kernels, "%s\n", src.text);
        w->any_h = !w->backward && !src.fixed_h;
        lntune_source_free(&src);
        if (!w->backward && !w->any_h && w->twin_variant[0]) {
            /* the twin serves the H it was not tuned for, as liblntune's nearest-H rule does */
            snprintf(symbol, sizeof symbol, "lntune_kernels_t%zu_h", i);
            lntune_source twin = {0};
            if (lntune_gen_emit(g, "cpu", w->base_op, w->twin_variant, &shape, symbol, &twin) ==
                    LNTUNE_OK &&
                !twin.fixed_h) {
                lntune_export_put(&code->kernels, "%s\n", twin.text);
                w->any_h = 2;
            } else {
                lntune_export_warn(c,
                                   "%s %s H=%lld: its run-time-H twin '%s' does not generate "
                                   "(%s); only H=%lld takes the winner",
                                   w->op, w->dtype, (long long)w->H, w->twin_variant,
                                   lntune_gen_errmsg(g), (long long)w->H);
            }
            lntune_source_free(&twin);
        }
        code->ok[i] = 1;
        ++r->tuned;
        if (w->threads > code->max_threads) code->max_threads = w->threads;
    }
    if (p->list.n) lntune_export_put_tuned_end(&code->kernels, &p->cpu);
}

/* The generic kernels and the fallbacks into code->kernels, after the tuned ones. */
static int generate_generic(const export_plan *p, lntune_gen *g, export_code *code,
                            lntune_export_report *r) {
    const int avx2 = p->avx2;
    lntune_export_buf *kernels = &code->kernels;
    put_levels_switch(kernels, p->streaming_bytes);
    char *generic = NULL, *wide = NULL, *streaming = NULL;
    int rc;
    if ((rc = lntune_builtin_emit(g, &lntune_builtin_generic, "lntune_kernels_generic",
                                  &generic)) != LNTUNE_OK ||
        (avx2 && (rc = lntune_builtin_emit(g, &lntune_builtin_avx2, "lntune_kernels_generic",
                                           &wide)) != LNTUNE_OK) ||
        (avx2 && (rc = lntune_builtin_emit(g, &lntune_builtin_avx2_streaming,
                                           "lntune_kernels_streaming", &streaming)) != LNTUNE_OK)) {
        free(generic);
        free(wide);
        snprintf(r->message, sizeof r->message, "%s", lntune_gen_errmsg(g));
        return rc;
    }
    lntune_export_put_levels(kernels, wide, generic);
    if (streaming) lntune_export_put(kernels, "#if LNTUNE_KERNELS_AVX2\n%s\n#endif\n", streaming);
    free(generic);
    free(wide);
    free(streaming);
    /* The generated generics of the winners' tuples (fused: of the fp32 sum with their y and
     * gamma/beta types, which the residual fallback normalizes), and whether a winner is an
     * all-bf16 fused call (then the fused all-bf16 built-ins come too). */
    unsigned char used[64] = {0};
    int fused_bf16 = 0;
    for (size_t i = 0; i < p->list.n; ++i) {
        const winner *w = &p->list.w[i];
        if (!code->ok[i] || w->backward) continue;
        /* a weight offset's generic: of fp32 gamma/beta (exported/cpu/dispatch.c forms them);
         * a quantized y's: of an fp32 y (exported/cpu/quant_fallback.c quantizes it) */
        lntune_types t = {w->fusion ? LNTUNE_TYPE_F32 : w->types.x,
                          lntune_type_quantized(w->types.y) ? LNTUNE_TYPE_F32 : w->types.y,
                          w->affine == EXPORT_AFFINE_OFFSET ? LNTUNE_TYPE_F32 : w->types.params, 0};
        used[lntune_types_packed(t)] = lntune_types_packed(t) != 0;
        const int b = LNTUNE_TYPE_BF16;
        fused_bf16 |= w->fusion != LNTUNE_FUSION_NONE && w->types.x == b && w->types.y == b &&
                      w->types.params == b && lntune_types_residual(w->types) == b;
    }
    if ((rc = lntune_export_put_typed_fallback(kernels, g, used, avx2)) != LNTUNE_OK) {
        snprintf(r->message, sizeof r->message, "%s", lntune_gen_errmsg(g));
        return rc;
    }
    if ((rc = put_generic_f32(kernels, avx2, r->message, sizeof r->message)) != LNTUNE_OK)
        return rc;
    lntune_export_put_code(kernels, "cpu/unfused_generic.c");
    if ((rc = lntune_export_put_fused_bf16(kernels, g, fused_bf16, avx2)) != LNTUNE_OK) {
        snprintf(r->message, sizeof r->message, "%s", lntune_gen_errmsg(g));
        return rc;
    }
    lntune_export_put_residual_fallback(kernels, avx2);
    lntune_export_put_backward_fallback(kernels);
    put_generic_variants(&code->generic_variants, g, avx2);
    return LNTUNE_OK;
}

static int generate(const export_plan *p, lntune_gen *g, const lntune_export_config *c,
                    export_code *code, lntune_export_report *r) {
    code->max_threads = 1;
    if (!(code->ok = calloc(p->list.n ? p->list.n : 1, sizeof *code->ok))) return LNTUNE_ENOMEM;
    generate_tuned(p, g, c, code, r);
    int rc = generate_generic(p, g, code, r);
    if (rc != LNTUNE_OK) return rc;
    r->skipped += p->list.skipped;
    if (p->cpu.cores > code->max_threads) code->max_threads = p->cpu.cores;
    return lntune_export_cuda_generate(p->cuda, g, c, r);
}
/* ------------------------------------------------------------------------------------------ */
/* Write: the files, from the plan and the generated code                                     */

/* lntune_kernels.c */
static void put_source(lntune_export_buf *out, const export_plan *p, const export_code *code) {
    write_header_comment(out, &p->cpu, &p->list, code->ok, p->note[0] ? p->note : NULL,
                         &code->generic_variants);
    lntune_export_put(out, "#define _POSIX_C_SOURCE 200809L\n#include \"lntune_kernels.h\"\n\n");
    lntune_export_put(out, "#include <math.h>\n#include <pthread.h>\n#include <stdatomic.h>\n"
                           "#include <stddef.h>\n"
                           "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n");
    lntune_export_put_arch(out, &p->cpu);
    lntune_export_put(out,
                      "/* The threads a call may use: every core of the machine this file was "
                      "exported on, and\n * every winner's count. -DLNTUNE_KERNELS_MAX_THREADS=N "
                      "(N >= 1) caps it, for an app whose\n * own threads keep the cores busy; 1 "
                      "starts no thread. */\n"
                      "#ifndef LNTUNE_KERNELS_MAX_THREADS\n#define LNTUNE_KERNELS_MAX_THREADS "
                      "%d\n#endif\n\n",
                      code->max_threads);
    lntune_export_put(out, "%s\n", code->kernels.s ? code->kernels.s : "");
    lntune_export_put(out,
                      "typedef struct {\n    int op; /* index in op_takes_beta */\n"
                      "    int fusion; /* 0 none, 1 residual, 2 residual and residual_out */\n"
                      "    int types; /* x | y << 2 | params << 4 | residual << 6; 0 fp32, 1 fp16, "
                      "2 bf16;\n                  residual: 0 as x, else its type + 1; y 3: "
                      "quantized, its kind\n                  (int8, int8 per row, e4m3, e4m3 "
                      "per row) << 8 */\n"
                      "    int64_t H;\n    int affine;\n    int64_t rows_lo, rows_hi;\n"
                      "    lntune_kernel_fn fn; /* a forward kernel, or */\n"
                      "    lntune_backward_kernel_fn backward; /* a backward one */\n"
                      "    int threads;\n"
                      "    /* forward: fn or its twin where it reads H at run time (it may "
                      "serve another H),\n     * else NULL; whether it stores plainly (serves "
                      "rows of any alignment); the\n     * rows it was tuned at */\n"
                      "    lntune_kernel_fn any_h;\n    int any_alignment;\n"
                      "    int64_t tuned_rows;\n} tuned_entry;\n\n");
    lntune_export_put_tuned_usable(out, &p->cpu);
    lntune_export_put(out, "static const tuned_entry tuned[] = {\n#if LNTUNE_KERNELS_TUNED_ARCH\n");
    for (size_t i = 0; i < p->list.n; ++i) {
        const winner *w = &p->list.w[i];
        if (!code->ok[i]) continue;
        char fn[48], any_h[56] = "NULL";
        snprintf(fn, sizeof fn, "lntune_kernels_t%zu", i);
        if (w->any_h) snprintf(any_h, sizeof any_h, "%s%s", fn, w->any_h == 2 ? "_h" : "");
        lntune_export_put(
            out,
            "    {%d, %d, %d, INT64_C(%lld), %d, INT64_C(%lld), INT64_C(%lld), %s, %s, "
            "%d, %s, %d, INT64_C(%lld)}, /* %s %s */\n",
            w->op_index, w->fusion, lntune_types_packed(w->types), (long long)w->H, w->affine,
            (long long)w->rows_lo, (long long)w->rows_hi, w->backward ? "NULL" : fn,
            w->backward ? fn : "NULL", w->threads, any_h, w->any_alignment,
            (long long)w->tuned_rows, w->op, w->dtype);
    }
    lntune_export_put(out,
                      "#endif\n    {0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0} /* keeps the "
                      "table non-empty */\n"
                      "};\n\n");
    lntune_export_put_code(out, "cpu/pool.c");
    const char *quant_rows = lntune_export_embedded("quant_rows.h");
    lntune_export_put(out, "/* ---- a quantized y's rows (core/quant_rows.h) ---- */\n%s\n",
                      quant_rows ? quant_rows
                                 : "#error lntune was built without core/quant_rows.h\n");
    lntune_export_put_code(out, "cpu/quant_fallback.c");
    lntune_export_put_code(out, "common/forward_args.h");
    lntune_export_put_code(out, "cpu/dispatch.c");
    lntune_export_put_code(out, "common/backward_args.h");
    lntune_export_put_code(out, "cpu/backward_dispatch.c");
    for (size_t i = 0; i < lntune_export_op_count; ++i)
        lntune_export_put(
            out,
            "int lntune_kernels_%s(const lntune_kernel_args *args)\n{\n"
            "    const lntune_kernels_types fp32 = {0, 0, 0, 0};\n"
            "    return run(%zu, args, fp32);\n}\n\n"
            "int lntune_kernels_%s_v2(const lntune_kernel_args *args, "
            "lntune_kernels_types types)\n{\n    return run(%zu, args, types);\n}\n\n"
            "int lntune_kernels_%s_backward(const lntune_backward_kernel_args *args,\n"
            "                               lntune_kernels_types types, void *dgamma, void "
            "*dbeta)\n"
            "{\n    return run_backward(%zu, args, types, dgamma, dbeta);\n}\n\n",
            lntune_export_ops[i].name, i, lntune_export_ops[i].name, i, lntune_export_ops[i].name,
            i);
}

/* lntune_kernels.h; LNTUNE_ERROR when lntune was built without the ABI headers. */
static int put_header(lntune_export_buf *header, const export_plan *p) {
    const char *abi = lntune_export_abi_header();
    lntune_export_put(
        header,
        "/*\n * lntune_kernels.h - generated by lntune export; do not edit.\n *\n"
        " * LayerNorm and RMSNorm tuned for one machine (%s); see lntune_kernels.c.\n"
        " * Fill an lntune_kernel_args (rows, H, x, y; gamma, beta, mean, rstd optional;\n"
        " * strides of 0 mean H, eps of 0 means 1e-5) and call one of the functions below.\n"
        " * lntune_kernels_<op>(args) takes fp32 x, y, gamma and beta. "
        "lntune_kernels_<op>_v2(args,\n"
        " * types) takes x, y and gamma/beta each as fp32, fp16 or bf16 (LNTUNE_KERNELS_F32, "
        "_F16,\n"
        " * _BF16: lntune.h's lntune_dtype numbers; 0 means fp32 for x and x's type for y and\n"
        " * params, so a zeroed types is all fp32 and setting x alone gives every tensor its "
        "type).\n"
        " * 16-bit tensors hold uint16_t bit patterns, aligned to 2 bytes; strides count "
        "elements.\n"
        " * Inputs widen exactly to fp32, statistics are fp32 (mean, rstd), y is computed in fp32\n"
        " * and rounded once to its type (to nearest even; overflow gives Inf).\n"
        " * Add & Norm: with args->residual (types.residual; 0: as x), y = Norm(x + residual),\n"
        " * the sum formed in fp32 (one addition of the exactly widened inputs); with\n"
        " * args->residual_out too, that sum is also written, rounded once to the residual type.\n"
        " * Weight offset (Gemma): args->weight_offset != 0 gives y = norm(x) * (offset + gamma)\n"
        " * [+ beta], offset + gamma one fp32 addition of gamma widened exactly; needs gamma.\n"
        " * Quantized y (types.y LNTUNE_KERNELS_I8 or LNTUNE_KERNELS_FP8_E4M3; y holds 1-byte\n"
        " * codes, y_stride counts them): the fp32 y, then the code of v = y / scale: int8: NaN\n"
        " * -> 0, else v clamped to [-128, 127] and rounded to nearest even; e4m3 (OCP): |v|\n"
        " * clamped to 448, rounded to nearest even, NaN -> 0x7f with v's sign. The scale: the\n"
        " * static args->y_scale (finite, >= FLT_MIN) when args->y_scales is NULL; else one per\n"
        " * row, written to y_scales[row]: absmax / 127 (or / 448), absmax the row's largest |y|\n"
        " * (NaN left out), the codes of y * (127 or 448) / absmax (y * 0 where absmax is 0 or\n"
        " * Inf). liblntune's lntune_args describes the same (y_dtype, y_scale, y_scales).\n"
        " * They return LNTUNE_KERNEL_OK, or LNTUNE_KERNEL_EUNSUPPORTED for arguments no\n"
        " * kernel serves (NULL x or y, H <= 0, a stride < H, residual_out without residual,\n"
        " * RMSNorm with beta, a type outside 0..3 (y: 0..5), a weight offset without gamma or\n"
        " * not finite, a static scale out of range). Every type tuple, fusion and shape is\n"
        " * served: a tuned kernel where the database had one, else a generic one.\n"
        " * Backward: lntune_kernels_<op>_backward(args, types, dgamma, dbeta) fills dx of an\n"
        " * lntune_backward_kernel_args (rows, H, x, dy, dx; gamma, the forward's saved mean and\n"
        " * rstd (LayerNorm: both or neither), dresidual_out for the fused Add & Norm optional)\n"
        " * and, when not NULL, dgamma and dbeta (H elements; RMSNorm: dbeta must be NULL).\n"
        " * types.x is the type of x, dy, dx and dresidual_out, types.params of gamma, dgamma\n"
        " * and dbeta; dgamma/dbeta are summed in fp32 per thread, then in thread order.\n"
        " * Thread-safe; multi-threaded winners share one pool, and a call that finds it\n"
        " * busy runs on the calling thread.\n */\n",
        p->cpu.fingerprint);
    lntune_export_put(header, "#ifndef LNTUNE_KERNELS_H\n#define LNTUNE_KERNELS_H\n\n%s\n",
                      abi ? abi : "");
    /* The backward ABI (its own include guard) after the forward's. */
    const char *bwd = lntune_export_embedded("lntune_kernel_backward.h");
    lntune_export_put(header, "%s\n", bwd ? bwd : "");
    lntune_export_put(header, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n%s\n",
                      lntune_export_types_text);
    for (size_t i = 0; i < lntune_export_op_count; ++i)
        lntune_export_put(
            header,
            "/* %s */\nint lntune_kernels_%s(const lntune_kernel_args *args);\n"
            "int lntune_kernels_%s_v2(const lntune_kernel_args *args, "
            "lntune_kernels_types types);\n"
            "int lntune_kernels_%s_backward(const lntune_backward_kernel_args *args,\n"
            "                               lntune_kernels_types types, void *dgamma, "
            "void *dbeta);\n\n",
            lntune_export_ops[i].doc, lntune_export_ops[i].name, lntune_export_ops[i].name,
            lntune_export_ops[i].name);
    lntune_export_put(header, "#ifdef __cplusplus\n}\n#endif\n\n#endif /* LNTUNE_KERNELS_H */\n");
    return abi && bwd ? LNTUNE_OK : LNTUNE_ERROR;
}

static int write_c_files(const export_plan *p, const export_code *code,
                         const lntune_export_config *c, lntune_export_report *r) {
    lntune_export_buf out = {0}, header = {0};
    put_source(&out, p, code);
    const int abi = put_header(&header, p) == LNTUNE_OK;
    int rc;
    if (out.missing || code->kernels.missing) {
        rc = LNTUNE_ERROR;
        snprintf(r->message, sizeof r->message, "exported/%s is not built into this lntune",
                 out.missing ? out.missing : code->kernels.missing);
    } else if (out.oom || header.oom || code->kernels.oom || code->generic_variants.oom || !abi) {
        rc = abi ? LNTUNE_ENOMEM : LNTUNE_ERROR;
        snprintf(r->message, sizeof r->message, "%s", abi ? "out of memory" : "no ABI header");
    } else {
        rc = lntune_export_write_file(c->out_dir, "lntune_kernels.c", &out, r->message,
                                      sizeof r->message);
        if (rc == LNTUNE_OK)
            rc = lntune_export_write_file(c->out_dir, "lntune_kernels.h", &header, r->message,
                                          sizeof r->message);
    }
    free(out.s), free(header.s);
    return rc;
}

/* CMakeLists.txt, for add_subdirectory; archs: the CUDA file's compute capabilities ("90;80"). */
static int write_cmake(const export_plan *p, const lntune_export_config *c, const char *archs,
                       lntune_export_report *r) {
    lntune_export_buf cm = {0};
    lntune_export_put(
        &cm,
        "# generated by lntune export; do not edit.\n"
        "# add_subdirectory() this folder, then link lntune_kernels. No -march needed: the "
        "tuned\n"
        "# kernels (of machine %s) carry target attributes and run where the CPU has\n"
        "# their ISA, else the generic kernels do. Those take AVX2's width only where "
        "compiled for\n"
        "# AVX2, FMA and F16C: -DCMAKE_C_FLAGS=-march=native, for a library that then runs "
        "on such\n"
        "# CPUs only.\n"
        "cmake_minimum_required(VERSION 3.16)\n"
        "project(lntune_kernels LANGUAGES C)\n"
        "find_package(Threads REQUIRED)\n"
        "add_library(lntune_kernels STATIC lntune_kernels.c)\n"
        "target_include_directories(lntune_kernels PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})\n"
        "target_compile_features(lntune_kernels PRIVATE c_std_11)\n"
        "target_compile_options(lntune_kernels PRIVATE -O3)\n"
        "target_link_libraries(lntune_kernels PUBLIC Threads::Threads m)\n",
        p->cpu.fingerprint);
    if (r->cuda_written)
        lntune_export_put(
            &cm,
            "\n# The CUDA kernels (lntune_kernels_cuda), where CMake finds a CUDA compiler.\n"
            "include(CheckLanguage)\n"
            "check_language(CUDA)\n"
            "if(CMAKE_CUDA_COMPILER)\n"
            "  enable_language(CUDA)\n"
            "  find_package(CUDAToolkit REQUIRED)\n"
            "  add_library(lntune_kernels_cuda STATIC lntune_kernels.cu)\n"
            "  target_include_directories(lntune_kernels_cuda PUBLIC "
            "${CMAKE_CURRENT_SOURCE_DIR})\n"
            "  # The compute capabilities the kernels were tuned on.\n"
            "  set_target_properties(lntune_kernels_cuda PROPERTIES CUDA_ARCHITECTURES \"%s\"\n"
            "                        CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)\n"
            "  # Apps in C link it with their own linker, adding the C++ runtime nvcc's launch "
            "stubs use.\n"
            "  set(CMAKE_CUDA_LINKER_PREFERENCE_PROPAGATES OFF)\n"
            "  target_link_libraries(lntune_kernels_cuda PUBLIC CUDA::cudart "
            "$<$<NOT:$<CXX_COMPILER_ID:MSVC>>:stdc++>)\n"
            "endif()\n",
            archs);
    int rc = cm.oom ? LNTUNE_ENOMEM
                    : lntune_export_write_file(c->out_dir, "CMakeLists.txt", &cm, r->message,
                                               sizeof r->message);
    free(cm.s);
    return rc;
}

int lntune_export(const lntune_export_config *c, lntune_export_report *r) {
    memset(r, 0, sizeof *r);
    if (!c || !c->out_dir) {
        snprintf(r->message, sizeof r->message, "no output directory");
        return LNTUNE_EINVAL;
    }
    /* Three stages: read the store into a plan (and make DIR), generate every kernel, write. */
    export_plan plan = {0};
    export_code code = {0};
    lntune_gen *g = NULL;
    char archs[64] = "";
    int rc = read_plan(c, &plan, r);
    if (rc == LNTUNE_OK && (rc = lntune_gen_open(NULL, &g)) != LNTUNE_OK)
        snprintf(r->message, sizeof r->message, "%s", g ? lntune_gen_errmsg(g) : lntune_errstr(rc));
    if (rc == LNTUNE_OK) rc = generate(&plan, g, c, &code, r);
    lntune_gen_close(g);
    if (rc == LNTUNE_OK) rc = write_c_files(&plan, &code, c, r);
    if (rc == LNTUNE_OK) rc = lntune_export_cuda_write(plan.cuda, c, r, archs, sizeof archs);
    if (rc == LNTUNE_OK && c->cmake) rc = write_cmake(&plan, c, archs, r);
    if (rc == LNTUNE_ENOMEM && !r->message[0])
        snprintf(r->message, sizeof r->message, "out of memory");
    lntune_export_cuda_free(plan.cuda);
    lntune_db_close(plan.db);
    free(plan.list.w);
    free(code.ok);
    free(code.kernels.s), free(code.generic_variants.s);
    return rc;
}
