/*
 * export_cuda.c - the CUDA half of `lntune export`: lntune_kernels.cu and lntune_kernels_cuda.h
 * (see export.h for what and why), in the C half's three stages (plan, generate, write).
 *
 * As in the C half, the dispatch code is fixed text; only the kernels, the tables and the header
 * comment vary. Each winner is regenerated from its variant string for the compute capability of
 * the GPU row it was tuned on; the CUDA template puts a kernel's file-scope names in a namespace
 * named after its symbol, so one translation unit holds them all. The launch geometry of each
 * kernel comes from its source's launch line (core/cuda/cuda_launch.c), and the host code below
 * applies the same grid and shared memory rules.
 */
#include "export_internal.h"

#include "builtin.h"
#include "cuda_launch.h"
#include "cuda_types.h"
#include "dtypes.h"
#include "fusion.h"
#include "lntune.h"
#include "problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t id;
    char fingerprint[17], model[256];
    int cc; /* compute capability, 90 for sm_90 */
} gpu_row;

typedef struct {
    gpu_row *v;
    size_t n, cap;
    int oom;
    const char *only; /* lntune_export_config.gpu */
} gpu_list;

typedef struct {
    size_t gpu;                          /* index in gpu_list */
    char op[32], dtype[24], base_op[32]; /* op and dtype: the database's text */
    char variant[512];
    int op_index; /* in lntune_export_ops */
    int fusion;   /* LNTUNE_FUSION_* */
    int backward; /* a gradient pair: exported by export_cuda_backward.c */
    lntune_types types;
    int64_t H, tuned_rows, rows_lo, rows_hi;
    int affine, ok; /* affine: the database key's */
    int offset;     /* a weight offset's winner ("+offset"; affine=offset) */
    double median_ns, gbps, copy_gbps, max_error;
    char measured[17]; /* the template hash it was measured with, "" unknown */
    lntune_cuda_launch launch;
} cuda_winner;

/* The dispatch table's affine (0 neither, 1 gamma, 3 gamma + offset), as the C export's. */
enum { TABLE_AFFINE_OFFSET = 3 };

static int table_affine(int affine, int offset) {
    return offset ? TABLE_AFFINE_OFFSET : affine != 0;
}

static const char *affine_text(int table) {
    return table == TABLE_AFFINE_OFFSET ? "gamma + offset" : table ? "affine" : "no affine";
}

typedef struct {
    cuda_winner *w;
    size_t n, cap;
    int oom;
    size_t gpu;  /* the GPU being collected */
    int skipped; /* rows of an op or dtype the CUDA export does not serve */
    const lntune_export_config *c;
    const char *gpu_name;
} cuda_list;

static int collect_gpu(void *ud, const lntune_db_hardware *hw) {
    gpu_list *l = ud;
    if (!hw->kind || strcmp(hw->kind, "cuda") != 0) return 0;
    if (l->only && (!hw->fingerprint || strcmp(l->only, hw->fingerprint) != 0)) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        gpu_row *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return 1;
        }
        l->v = v, l->cap = cap;
    }
    gpu_row *g = &l->v[l->n++];
    g->id = hw->id;
    snprintf(g->fingerprint, sizeof g->fingerprint, "%s", hw->fingerprint ? hw->fingerprint : "");
    snprintf(g->model, sizeof g->model, "%s", hw->model ? hw->model : "");
    g->cc = hw->compute_capability;
    return 0;
}

static int collect_best(void *ud, const lntune_db_key *key, const lntune_best *b) {
    cuda_list *l = ud;
    if (strcmp(key->target, "cuda") != 0) return 0;
    char base[32];
    int fusion = LNTUNE_FUSION_NONE, offset = 0, op = -1;
    const lntune_direction *dir = NULL;
    lntune_op forward;
    lntune_types types;
    const char *why = NULL;
    if (lntune_op_key_parse(key->op, base, sizeof base, &fusion, &offset) == 0 &&
        lntune_op_text_parse(base, &forward, &dir, NULL) == 0)
        op = lntune_export_op_find(lntune_op_name(forward));
    const int backward = dir && dir->suffix[0];
    if ((backward && (offset || fusion == LNTUNE_FUSION_RESIDUAL_OUT)) || op < 0 ||
        !lntune_export_ops[op].cuda)
        why = "op unknown to the CUDA export"; /* no such kernel */
    else if (lntune_types_parse(key->dtype, &types) != 0 ||
             (backward && lntune_type_quantized(types.y)))
        why = "dtype unknown to the CUDA export";
    if (why) { /* never exported as something else */
        lntune_export_warn(l->c, "%s %s H=%lld on %s: %s; left out", key->op, key->dtype,
                           (long long)key->H, l->gpu_name, why);
        ++l->skipped;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cuda_winner *w = realloc(l->w, cap * sizeof *w);
        if (!w) {
            l->oom = 1;
            return 1;
        }
        l->w = w, l->cap = cap;
    }
    cuda_winner *w = &l->w[l->n++];
    memset(w, 0, sizeof *w);
    w->gpu = l->gpu;
    snprintf(w->op, sizeof w->op, "%s", key->op);
    snprintf(w->dtype, sizeof w->dtype, "%s", key->dtype);
    snprintf(w->base_op, sizeof w->base_op, "%s", base);
    w->op_index = op;
    w->fusion = fusion;
    w->backward = backward;
    w->types = types;
    snprintf(w->variant, sizeof w->variant, "%s", b->variant ? b->variant : "");
    w->H = key->H;
    w->tuned_rows = b->tuned_rows > 0 ? b->tuned_rows : key->rows;
    w->affine = key->affine;
    w->offset = offset;
    w->median_ns = b->median_ns, w->gbps = b->gbps, w->copy_gbps = b->copy_gbps;
    w->max_error = b->max_error;
    lntune_export_bucket_range(w->tuned_rows > 0 ? w->tuned_rows : 1, &w->rows_lo, &w->rows_hi);
    return 0;
}

static const char header_doc[] =
    " * Fill an lntune_kernel_args with device pointers (rows, H, x, y; gamma, beta, residual,\n"
    " * residual_out, mean, rstd optional; strides of 0 mean H, eps of 0 means 1e-5) and call one\n"
    " * of the functions below. lntune_kernels_cuda_<op>(args, stream) takes fp32 tensors;\n"
    " * lntune_kernels_cuda_<op>_v2(args, types, stream) takes x, y, gamma/beta and the residual\n"
    " * each as fp32, fp16 or bf16 (lntune_kernels_types, as in lntune_kernels.h: 0 means fp32\n"
    " * for x and x's type for the others; 16-bit tensors hold bit patterns). With residual,\n"
    " * y = Norm(x + residual), and residual_out (optional) receives x + residual.\n"
    " * A quantized y (types.y LNTUNE_KERNELS_I8 or _FP8_E4M3, as in lntune_kernels.h): the\n"
    " * codes of y / y_scale, or with y_scales (device memory, one float per row) of y scaled by\n"
    " * its row's absmax / the largest code, that scale written to y_scales. A weight offset\n"
    " * (weight_offset != 0, with gamma): y = Norm(x) * (offset + gamma).\n"
    " * A call launches one kernel on stream on the current device (asynchronously, like any\n"
    " * launch): the tuned kernel of the call's shape, else the generic one of its type tuple and\n"
    " * fusion. Generic kernels exist for every tuple and fusion some GPU's winner has, and for\n"
    " * all-fp32 with or without a residual. Thread-safe. Returns:\n"
    " *   LNTUNE_OK           launched (rows == 0: nothing to launch)\n"
    " *   LNTUNE_EINVAL       NULL args, x or y; H <= 0; rows < 0; eps < 0 or NaN; a stride\n"
    " *                       neither 0 nor >= H; a type outside 0..3 (y: 0..5); residual_out\n"
    " *                       without residual; RMSNorm with beta; a quantized y without\n"
    " *                       y_scales whose y_scale is not finite and >= 2^-126; a weight\n"
    " *                       offset that is not finite, or without gamma\n"
    " *   LNTUNE_EUNSUPPORTED beta without gamma; a type tuple or fusion no kernel was exported\n"
    " *                       for (the message names the tuning command that adds one)\n"
    " *   LNTUNE_ENODEVICE    no current CUDA device, or it is none of the GPUs the kernels were\n"
    " *                       tuned on (its name and compute capability are checked on the first\n"
    " *                       call on each device)\n"
    " *   LNTUNE_ERROR        a CUDA call failed (the launch, or raising the shared memory limit)\n"
    " * lntune_kernels_cuda_errmsg() says why the calling thread's last call failed.\n";

/* A generic kernel of the export: the built-in of an op and affine kind for a fusion and type
 * tuple. All-fp32 unfused ones without the offset are the fp32 built-ins; the others are the
 * typed built-in of their affine kind, fusion and quantized y (lntune_builtin_emit_cuda_kind),
 * its element types chosen by #defines around its source. */
typedef struct {
    int op;     /* index in lntune_export_ops */
    int affine; /* LNTUNE_AFFINE_NONE, _GAMMA or _OFFSET */
    int fusion;
    lntune_types types;
    char symbol[160];
    char variant[256]; /* the canonical variant, once generated */
    lntune_cuda_launch launch;
} cuda_generic;

typedef struct {
    cuda_generic *v;
    size_t n, cap;
} generic_list;

static int typed(const cuda_generic *k) {
    return k->fusion != LNTUNE_FUSION_NONE || !lntune_types_all_f32(k->types) ||
           k->affine == LNTUNE_AFFINE_OFFSET;
}

static int generic_table_affine(const cuda_generic *k) {
    return table_affine(k->affine != LNTUNE_AFFINE_NONE, k->affine == LNTUNE_AFFINE_OFFSET);
}

/* Adds the generic of (op, affine, fusion, types) unless present; -1 on OOM. */
static int generic_add_one(generic_list *l, int op, int affine, int fusion, lntune_types types) {
    for (size_t i = 0; i < l->n; ++i)
        if (l->v[i].op == op && l->v[i].affine == affine && l->v[i].fusion == fusion &&
            lntune_types_packed(l->v[i].types) == lntune_types_packed(types))
            return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cuda_generic *p = realloc(l->v, cap * sizeof *p);
        if (!p) return -1;
        l->v = p, l->cap = cap;
    }
    cuda_generic *k = &l->v[l->n++];
    memset(k, 0, sizeof *k);
    k->op = op, k->affine = affine, k->fusion = fusion, k->types = types;
    const char *name = lntune_export_ops[op].name, *kind = lntune_builtin_affine_name(affine);
    char tuple[24];
    lntune_types_format(types, tuple, sizeof tuple);
    for (char *p = tuple; *p; ++p)
        if (*p == '/') *p = '_';
    if (typed(k))
        snprintf(k->symbol, sizeof k->symbol, "lntune_kernels_cuda_generic_%s_%s_%s_%s", name, kind,
                 lntune_fusion_name(fusion), tuple);
    else
        snprintf(k->symbol, sizeof k->symbol, "lntune_kernels_cuda_generic_%s_%s", name, kind);
    return 0;
}

/* Adds the generics of (op, fusion, types) with and without gamma, and with the weight offset
 * when offset; -1 on OOM. */
static int generic_add(generic_list *l, int op, int fusion, lntune_types types, int offset) {
    if (generic_add_one(l, op, LNTUNE_AFFINE_GAMMA, fusion, types) != 0 ||
        generic_add_one(l, op, LNTUNE_AFFINE_NONE, fusion, types) != 0)
        return -1;
    return offset ? generic_add_one(l, op, LNTUNE_AFFINE_OFFSET, fusion, types) : 0;
}

/* Regenerates winner w for compute capability sm into text; its launch geometry and hash. */
static int emit_tuned(lntune_gen *g, int sm, cuda_winner *w, const char *symbol,
                      lntune_export_buf *text, char hash[17]) {
    lntune_gen_set_cuda_arch(g, sm);
    lntune_shape shape = {.H = w->H, .types = w->types, .fusion = w->fusion};
    if (w->offset) shape.affine = LNTUNE_AFFINE_OFFSET; /* the only space with affine=offset */
    lntune_source src;
    int rc = lntune_gen_emit(g, "cuda", w->base_op, w->variant, &shape, symbol, &src);
    if (rc != LNTUNE_OK) return rc;
    if ((rc = lntune_cuda_launch_parse(src.text, &w->launch)) == LNTUNE_OK) {
        lntune_export_put_cuda_kernel(text, &src, symbol, sm, LNTUNE_EXPORT_GUARD_FORWARD, NULL);
        snprintf(hash, 17, "%s", src.template_hash);
    }
    lntune_source_free(&src);
    return rc;
}

/* The index in lntune_builtin_cuda_variants of op's fp32 built-in with (or without) gamma. */
static size_t fp32_variant(const char *op, int gamma) {
    size_t i = 0;
    while (i + 1 < lntune_builtin_cuda_variant_count &&
           (strcmp(lntune_builtin_cuda_variants[i].op, op) != 0 ||
            lntune_builtin_cuda_variants[i].affine != gamma))
        ++i;
    return i;
}

/* Generates generic kernel k (no cluster, no shared memory: any compute capability) into text. */
static int emit_generic(lntune_gen *g, int sm, cuda_generic *k, lntune_export_buf *text) {
    lntune_gen_set_cuda_arch(g, sm);
    const char *op = lntune_export_ops[k->op].name;
    const int y = lntune_type_quantized(k->types.y) ? k->types.y : LNTUNE_TYPE_F32;
    lntune_source src;
    const int is_typed = typed(k);
    int rc = is_typed
                 ? lntune_builtin_emit_cuda_kind(g, op, k->affine, y, k->fusion, k->symbol, &src)
                 : lntune_builtin_emit_cuda_generic(
                       g, fp32_variant(op, k->affine == LNTUNE_AFFINE_GAMMA), k->symbol, &src);
    if (rc != LNTUNE_OK) return rc;
    snprintf(k->variant, sizeof k->variant, "%s", src.variant);
    if ((rc = lntune_cuda_launch_parse(src.text, &k->launch)) == LNTUNE_OK)
        lntune_export_put_cuda_kernel(text, &src, k->symbol, sm, LNTUNE_EXPORT_UNGUARDED,
                                      is_typed ? &k->types : NULL);
    lntune_source_free(&src);
    return rc;
}

static const char *row_range(const cuda_winner *w, char *buf, size_t size) {
    if (w->rows_hi == INT64_MAX)
        snprintf(buf, size, "%lld-...", (long long)w->rows_lo);
    else
        snprintf(buf, size, "%lld-%lld", (long long)w->rows_lo, (long long)w->rows_hi);
    return buf;
}

static void put_entry(lntune_export_buf *b, int gpu, int op, int fusion, lntune_types types,
                      int64_t H, int affine, int64_t lo, int64_t hi, const char *symbol,
                      const lntune_cuda_launch *l) {
    lntune_export_put(b,
                      "    {%d, %d, %d, %d, INT64_C(%lld), %d, INT64_C(%lld), INT64_C(%lld), "
                      "%s_impl::%s, %d, %d, %d, %lld, %lld, %lld},\n",
                      gpu, op, fusion, lntune_types_packed(types), (long long)H, affine,
                      (long long)lo, (long long)hi, symbol, symbol, l->block, l->rows_per_block,
                      l->cluster, (long long)l->smem, (long long)l->smem_per_h,
                      (long long)l->max_h);
}

/* Generates every winner's kernel into text (a winner that no longer generates, or whose H its
 * launch line excludes, is left out with a warning); counts them in r. */
static void emit_winners(lntune_gen *g, const lntune_export_config *c, const gpu_list *gpus,
                         cuda_list *list, lntune_export_buf *text, lntune_export_report *r) {
    for (size_t i = 0; i < list->n; ++i) {
        cuda_winner *w = &list->w[i];
        if (w->backward) continue; /* export_cuda_backward.c's */
        const gpu_row *gr = &gpus->v[w->gpu];
        char symbol[64], hash[17] = "";
        snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_t%zu", i);
        if (emit_tuned(g, gr->cc, w, symbol, text, hash) != LNTUNE_OK) {
            lntune_export_warn(
                c, "%s %s H=%lld on %s: variant '%s' no longer generates (%s); left out", w->op,
                w->dtype, (long long)w->H, gr->model, w->variant, lntune_gen_errmsg(g));
            ++r->cuda_skipped;
            continue;
        }
        if (w->launch.max_h > 0 && w->H > w->launch.max_h) {
            lntune_export_warn(c, "%s %s H=%lld on %s: '%s' serves H <= %lld only; left out", w->op,
                               w->dtype, (long long)w->H, gr->model, w->variant,
                               (long long)w->launch.max_h);
            ++r->cuda_skipped;
            continue;
        }
        if (w->measured[0] && strcmp(w->measured, hash) != 0)
            lntune_export_warn(c,
                               "%s %s H=%lld on %s: the template changed since '%s' was measured "
                               "(hash %s, now %s); exporting the regenerated source: re-tune to "
                               "refresh its timing",
                               w->op, w->dtype, (long long)w->H, gr->model, w->variant, w->measured,
                               hash);
        w->ok = 1;
        ++r->cuda_tuned;
    }
}

/* The generic kernels: all-fp32 of every fusion, then each type tuple and fusion of a winner
 * (with the offset's for a weight offset's winner). */
static int collect_generics(const cuda_list *list, generic_list *gen) {
    const lntune_types f32 = {0};
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int f = 0; lntune_export_ops[op].cuda && f < LNTUNE_FUSION_COUNT; ++f)
            if (generic_add(gen, (int)op, f, f32, 0) != 0) return -1;
    for (size_t i = 0; i < list->n; ++i) {
        const cuda_winner *w = &list->w[i];
        if (w->ok && !w->backward &&
            generic_add(gen, w->op_index, w->fusion, w->types, w->offset) != 0)
            return -1;
    }
    return 0;
}

/* The header comment of lntune_kernels.cu; the architectures into archs ("90;80"). */
static void put_file_comment(lntune_export_buf *out, const gpu_list *gpus, const cuda_list *list,
                             const generic_list *gen, const lntune_export_buf *backward,
                             char *archs, size_t archs_size) {
    lntune_export_put(out, "/*\n * generated by lntune export; do not edit.\n *\n");
    lntune_export_buf gencode = {0};
    for (size_t i = 0; i < gpus->n; ++i) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d", gpus->v[i].cc);
        if (strstr(archs, cc) || strlen(archs) + strlen(cc) + 2 >= archs_size) continue;
        if (archs[0]) strcat(archs, ";");
        strcat(archs, cc);
        lntune_export_put(&gencode, " -gencode arch=compute_%s,code=sm_%s", cc, cc);
    }
    lntune_export_put(out,
                      " * Build with the CUDA runtime only, for the architecture of each GPU "
                      "below:\n"
                      " *   nvcc -std=c++17%s -c lntune_kernels.cu\n *\n"
                      " * GPUs (a call runs the kernels of the one the current device is, by name "
                      "and compute\n"
                      " * capability, else by compute capability alone):\n",
                      gencode.s ? gencode.s : "");
    free(gencode.s);
    for (size_t i = 0; i < gpus->n; ++i)
        lntune_export_put(out, " *   g%zu: %s, sm_%d, fingerprint %s\n", i, gpus->v[i].model,
                          gpus->v[i].cc, gpus->v[i].fingerprint);
    lntune_export_put(out, " *\n * tuned kernels (GPU op dtype H rows-bucket affine: variant; "
                           "launch; median time,\n"
                           " * bandwidth, verified max error):\n");
    for (size_t i = 0; i < list->n; ++i) {
        const cuda_winner *w = &list->w[i];
        if (!w->ok) continue;
        char rows[64];
        lntune_export_put(
            out,
            " *   c%zu: g%zu %s %s H=%lld rows %s (tuned at %lld) %s: %s; "
            "block=%d rows_per_block=%d cluster=%d smem=%lld+%lld/float max_h=%lld; "
            "%.0f ns, %.1f GB/s (copy %.1f), max error %.3g\n",
            i, w->gpu, w->op, w->dtype, (long long)w->H, row_range(w, rows, sizeof rows),
            (long long)w->tuned_rows, affine_text(table_affine(w->affine, w->offset)), w->variant,
            w->launch.block, w->launch.rows_per_block, w->launch.cluster, (long long)w->launch.smem,
            (long long)w->launch.smem_per_h, (long long)w->launch.max_h, w->median_ns, w->gbps,
            w->copy_gbps, w->max_error);
    }
    int forward = 0;
    for (size_t i = 0; i < list->n; ++i) forward += list->w[i].ok;
    if (forward == 0) lntune_export_put(out, " *   (none)\n");
    lntune_export_put(out, " *\n * generic kernels (op dtype fusion affine: variant), for the "
                           "shapes no winner covers:\n");
    for (size_t i = 0; i < gen->n; ++i) {
        const cuda_generic *k = &gen->v[i];
        char tuple[24];
        lntune_types_format(k->types, tuple, sizeof tuple);
        lntune_export_put(out, " *   %s %s %s %s: %s\n", lntune_export_ops[k->op].name, tuple,
                          lntune_fusion_name(k->fusion), affine_text(generic_table_affine(k)),
                          k->variant);
    }
    lntune_export_put(out,
                      " *\n * backward pairs (tuned: GPU op dtype H rows-bucket: variant; time; "
                      "generic: op dtype\n * fusion: variant):\n%s",
                      backward->s ? backward->s : "");
    lntune_export_put(out, " */\n#include \"lntune_kernels_cuda.h\"\n\n"
                           "#include <atomic>\n#include <cstdint>\n#include <cstdio>\n"
                           "#include <cstring>\n\n");
}

/* The GPU and kernel tables of lntune_kernels.cu: the tuned kernels, then the generic ones. */
static void put_tables(lntune_export_buf *out, const gpu_list *gpus, const cuda_list *list,
                       const generic_list *gen) {
    lntune_export_put(out,
                      "namespace {\n\n"
                      "typedef void (*kernel_fn)(lntune_kernel_args);\n\n"
                      "struct gpu_entry {\n    const char *name; /* as the CUDA runtime reports "
                      "it */\n    int cc;           /* compute capability: 90 for sm_90 */\n};\n\n"
                      "const gpu_entry gpus[] = {\n");
    for (size_t i = 0; i < gpus->n; ++i) {
        lntune_export_put(out, "    {\"");
        for (const char *p = gpus->v[i].model; *p; ++p)
            lntune_export_put(out, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        lntune_export_put(out, "\", %d},\n", gpus->v[i].cc);
    }
    lntune_export_put(out,
                      "};\n\n"
                      "/* A kernel and its launch line (see the header comment of each). */\n"
                      "struct kernel_entry {\n"
                      "    int gpu;    /* index in gpus; -1: any (generic) */\n"
                      "    int op;     /* 0 layernorm, 1 rmsnorm */\n"
                      "    int fusion; /* 0 none, 1 residual, 2 residual and residual_out */\n"
                      "    int types;  /* x | y << 2 | params << 4 | (residual + 1, when fused "
                      "and not x's) << 6;\n"
                      "                   0 fp32, 1 fp16, 2 bf16; a quantized y: y 3, its kind "
                      "<< 8 (0 int8,\n"
                      "                   1 int8 per row, 2 e4m3, 3 e4m3 per row) */\n"
                      "    int64_t H;  /* 0: any */\n"
                      "    int affine; /* 0 neither, 1 gamma (beta optional), 3 gamma + offset "
                      "*/\n"
                      "    int64_t rows_lo, rows_hi;\n"
                      "    kernel_fn fn;\n"
                      "    int block, rows_per_block, cluster;\n"
                      "    int64_t smem, smem_per_h, max_h;\n"
                      "};\n\n"
                      "/* The tuned kernels, then the generic ones from GENERIC on. */\n"
                      "const kernel_entry kernels[] = {\n");
    int ntuned = 0;
    for (size_t i = 0; i < list->n; ++i) {
        const cuda_winner *w = &list->w[i];
        if (!w->ok) continue;
        char symbol[64];
        snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_t%zu", i);
        put_entry(out, (int)w->gpu, w->op_index, w->fusion, w->types, w->H,
                  table_affine(w->affine, w->offset), w->rows_lo, w->rows_hi, symbol, &w->launch);
        ++ntuned;
    }
    for (size_t i = 0; i < gen->n; ++i) {
        const cuda_generic *k = &gen->v[i];
        put_entry(out, -1, k->op, k->fusion, k->types, 0, generic_table_affine(k), 1, INT64_MAX,
                  k->symbol, &k->launch);
    }
    lntune_export_put(out, "};\nconstexpr int GENERIC = %d;\n\n", ntuned);
}

/* lntune_kernels_cuda.h */
static void put_cuda_header(lntune_export_buf *header, const gpu_list *gpus) {
    lntune_export_put(header, "/*\n * lntune_kernels_cuda.h - generated by lntune export; do not "
                              "edit.\n *\n"
                              " * CUDA LayerNorm and RMSNorm tuned on");
    for (size_t i = 0; i < gpus->n; ++i)
        lntune_export_put(header, "%s %s (sm_%d)", i ? "," : "", gpus->v[i].model, gpus->v[i].cc);
    lntune_export_put(header, "; see\n * lntune_kernels.cu. For C and C++.\n *\n%s */\n",
                      header_doc);
    lntune_export_put(header, "#ifndef LNTUNE_KERNELS_CUDA_H\n#define LNTUNE_KERNELS_CUDA_H\n\n"
                              "#include <cuda_runtime_api.h>\n\n");
    const char *abi = lntune_export_abi_header();
    const char *bwd = lntune_export_embedded("lntune_kernel_backward.h");
    lntune_export_put(header, "%s\n%s\n", abi ? abi : "#error no ABI header\n",
                      bwd ? bwd : "#error no backward ABI header\n");
    lntune_export_put(header,
                      "/* The codes of lntune.h (identical definitions, so both may be included). "
                      "*/\n"
                      "#define LNTUNE_OK %d\n#define LNTUNE_ERROR %d\n#define LNTUNE_EINVAL %d\n"
                      "#define LNTUNE_EUNSUPPORTED %d\n#define LNTUNE_ENODEVICE %d\n\n"
                      "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n%s\n",
                      LNTUNE_OK, LNTUNE_ERROR, LNTUNE_EINVAL, LNTUNE_EUNSUPPORTED, LNTUNE_ENODEVICE,
                      lntune_export_types_text);
    for (size_t i = 0; i < lntune_export_op_count; ++i) {
        const char *op = lntune_export_ops[i].name;
        if (!lntune_export_ops[i].cuda) continue;
        lntune_export_put(header,
                          "int lntune_kernels_cuda_%s(const lntune_kernel_args *args, "
                          "cudaStream_t stream);\n"
                          "int lntune_kernels_cuda_%s_v2(const lntune_kernel_args *args, "
                          "lntune_kernels_types types,\n"
                          "                              cudaStream_t stream);\n",
                          op, op);
    }
    lntune_export_cuda_backward_declare(header);
    lntune_export_put(header,
                      "const char *lntune_kernels_cuda_errmsg(void);\n\n"
                      "#ifdef __cplusplus\n}\n#endif\n\n#endif /* LNTUNE_KERNELS_CUDA_H */\n");
}

/* The CUDA half of an export: its plan (read from the store), then its generated code. */
struct lntune_export_cuda {
    gpu_list gpus;
    cuda_list list;
    lntune_types *tuples; /* backward: all-fp32, then every winner's tuple (its (x, params)) */
    lntune_export_cuda_pair *pairs; /* the tuned backward pairs */
    size_t npairs;
    /* generated */
    generic_list gen;
    lntune_export_buf kernels, bwd_table, bwd_comment;
    size_t bwd_entries;
};

void lntune_export_cuda_free(lntune_export_cuda *x) {
    if (!x) return;
    free(x->kernels.s), free(x->bwd_table.s), free(x->bwd_comment.s);
    free(x->tuples);
    free(x->pairs);
    free(x->gpus.v);
    free(x->list.w);
    free(x->gen.v);
    free(x);
}

/* The GPUs and their winners (each with the template hash it was measured with), and the
 * backward's pairs and tuples. */
static int read_winners(lntune_db *db, const lntune_export_config *c, lntune_export_cuda *x,
                        lntune_export_report *r) {
    gpu_list *gpus = &x->gpus;
    cuda_list *list = &x->list;
    int rc = lntune_db_each_hardware(db, collect_gpu, gpus);
    for (size_t i = 0; rc == LNTUNE_OK && !gpus->oom && i < gpus->n; ++i) {
        list->gpu = i;
        list->gpu_name = gpus->v[i].model;
        rc = lntune_db_each_best(db, gpus->v[i].id, collect_best, list);
    }
    r->cuda_skipped += list->skipped;
    if (rc != LNTUNE_OK || gpus->oom || list->oom) {
        snprintf(r->message, sizeof r->message, "reading the GPU winners: %s",
                 gpus->oom || list->oom ? "out of memory" : lntune_db_errmsg(db));
        return rc == LNTUNE_OK ? LNTUNE_ENOMEM : rc;
    }
    if (c->gpu && gpus->n == 0) {
        snprintf(r->message, sizeof r->message, "--gpu %s: no such GPU in %s", c->gpu,
                 lntune_db_path(db));
        return LNTUNE_ENOTFOUND;
    }
    for (size_t i = 0; i < list->n; ++i) {
        cuda_winner *w = &list->w[i];
        lntune_db_key key = {gpus->v[w->gpu].id, "cuda",   w->op, w->dtype, w->H,
                             w->tuned_rows,      w->affine};
        lntune_export_measured_hash(db, &key, w->variant, w->measured);
    }
    if (!(x->tuples = calloc(list->n + 1, sizeof *x->tuples)) ||
        !(x->pairs = calloc(list->n + 1, sizeof *x->pairs))) {
        snprintf(r->message, sizeof r->message, "out of memory");
        return LNTUNE_ENOMEM;
    }
    for (size_t i = 0; i < list->n; ++i) {
        const cuda_winner *w = &list->w[i];
        x->tuples[i + 1] = w->types;
        if (w->backward)
            x->pairs[x->npairs++] = (lntune_export_cuda_pair){(int)w->gpu,
                                                              gpus->v[w->gpu].cc,
                                                              gpus->v[w->gpu].model,
                                                              w->op,
                                                              w->dtype,
                                                              w->base_op,
                                                              w->variant,
                                                              w->op_index,
                                                              w->fusion,
                                                              w->types,
                                                              w->H,
                                                              w->tuned_rows,
                                                              w->rows_lo,
                                                              w->rows_hi,
                                                              w->median_ns,
                                                              w->gbps,
                                                              w->copy_gbps,
                                                              w->max_error};
    }
    return LNTUNE_OK;
}

int lntune_export_cuda_plan(lntune_db *db, const lntune_export_config *c, lntune_export_report *r,
                            lntune_export_cuda **out) {
    *out = NULL;
    if (!db) {
        if (c->gpu) {
            snprintf(r->message, sizeof r->message, "--gpu %s: no tuning database", c->gpu);
            return LNTUNE_ENOTFOUND;
        }
        return LNTUNE_OK;
    }
    lntune_export_cuda *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(r->message, sizeof r->message, "out of memory");
        return LNTUNE_ENOMEM;
    }
    x->gpus.only = c->gpu;
    x->list.c = c;
    int rc = read_winners(db, c, x, r);
    if (rc != LNTUNE_OK) {
        lntune_export_cuda_free(x);
        return rc;
    }
    *out = x;
    return LNTUNE_OK;
}

int lntune_export_cuda_generate(lntune_export_cuda *x, lntune_gen *g, const lntune_export_config *c,
                                lntune_export_report *r) {
    if (!x || x->list.n == 0) return LNTUNE_OK; /* no CUDA winners: no CUDA files (export.h) */
    const int sm = x->gpus.v[0].cc;             /* the generic kernels' */
    emit_winners(g, c, &x->gpus, &x->list, &x->kernels, r);
    int rc = LNTUNE_OK;
    if (collect_generics(&x->list, &x->gen) != 0) {
        rc = LNTUNE_ENOMEM;
        snprintf(r->message, sizeof r->message, "out of memory");
    }
    for (size_t i = 0; rc == LNTUNE_OK && i < x->gen.n; ++i)
        if ((rc = emit_generic(g, sm, &x->gen.v[i], &x->kernels)) != LNTUNE_OK)
            snprintf(r->message, sizeof r->message, "generic CUDA kernel %s: %s",
                     x->gen.v[i].symbol, lntune_gen_errmsg(g));
    /* The backward: the tuned pairs; generic pairs for all-fp32 and every winner's (x, params). */
    lntune_export_cuda_backward_out bwd = {&x->kernels, &x->bwd_table, &x->bwd_comment, 0, 0, 0};
    if (rc == LNTUNE_OK &&
        (rc = lntune_export_cuda_backward(g, c, sm, x->pairs, x->npairs, x->tuples, x->list.n + 1,
                                          &bwd, r->message, sizeof r->message)) == LNTUNE_OK) {
        r->cuda_tuned += bwd.exported;
        r->cuda_skipped += bwd.skipped;
        x->bwd_entries = bwd.entries;
    }
    lntune_gen_set_cuda_arch(g, 0);
    return rc;
}

int lntune_export_cuda_write(lntune_export_cuda *x, const lntune_export_config *c,
                             lntune_export_report *r, char *archs, size_t archs_size) {
    archs[0] = '\0';
    if (!x || x->list.n == 0) return LNTUNE_OK;
    lntune_export_buf out = {0}, header = {0}, bwd_host = {0};
    lntune_export_cuda_backward_host(&x->bwd_table, x->bwd_entries, &bwd_host);
    put_file_comment(&out, &x->gpus, &x->list, &x->gen, &x->bwd_comment, archs, archs_size);
    lntune_export_put(&out, "%s", x->kernels.s ? x->kernels.s : "");
    put_tables(&out, &x->gpus, &x->list, &x->gen);
    lntune_export_put_code(&out, "common/forward_args.h");
    lntune_export_put_code(&out, "cuda/dispatch.cu");
    lntune_export_put(&out, "\n%s", bwd_host.s ? bwd_host.s : "");
    put_cuda_header(&header, &x->gpus);
    int rc = LNTUNE_OK;
    if (out.missing || bwd_host.missing) {
        rc = LNTUNE_ERROR;
        snprintf(r->message, sizeof r->message, "exported/%s is not built into this lntune",
                 out.missing ? out.missing : bwd_host.missing);
    } else if (out.oom || header.oom || x->kernels.oom || bwd_host.oom || x->bwd_table.oom ||
               x->bwd_comment.oom) {
        rc = LNTUNE_ENOMEM;
        snprintf(r->message, sizeof r->message, "out of memory");
    } else {
        rc = lntune_export_write_file(c->out_dir, "lntune_kernels.cu", &out, r->message,
                                      sizeof r->message);
        if (rc == LNTUNE_OK)
            rc = lntune_export_write_file(c->out_dir, "lntune_kernels_cuda.h", &header, r->message,
                                          sizeof r->message);
        r->cuda_written = rc == LNTUNE_OK;
        r->cuda_gpus = (int)x->gpus.n;
    }
    free(out.s), free(header.s), free(bwd_host.s);
    return rc;
}
