/*
 * export_cuda_backward.c - the backward in lntune_kernels.cu: the tuned pairs of each GPU
 * (`lntune --target cuda --backward`), each regenerated for its GPU's architecture; the runtime's
 * built-in backward pairs (gen/template/builtin.c: a block per row re-reading x and dy,
 * dgamma/dbeta from per-row-group partials summed in order by a second kernel), one per op, fusion
 * and (x, params) tuple, their element types chosen by #defines around the typed source; a table of
 * them all with their launch lines; and lntune_kernels_cuda_<op>_backward, which launches the tuned
 * pair of the call's GPU, op, fusion, types, H and nearest rows bucket, else the generic one, on
 * the caller's stream with its workspace allocated and freed on that stream (cudaMallocAsync), as
 * runtime/cuda_dispatch.c does.
 */
#include "export_internal.h"

#include "builtin.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "fusion.h"
#include "lntune.h"

#include <stdio.h>
#include <string.h>

/* The tuple key of the table: x, y as x, params (the forward's packing without a residual). */
static int backward_types(lntune_types t) {
    return t.x | t.x << 2 | t.params << 4;
}

/* One table row: the pair symbol, where it serves, and its launch lines. */
static void put_entry(lntune_export_buf *table, int gpu, int op, int fusion, lntune_types types,
                      int64_t H, int64_t rows_lo, int64_t rows_hi, const char *symbol,
                      const lntune_cuda_backward_launch *l) {
    lntune_export_put(table,
                      "    {%d, %d, %d, %d, INT64_C(%lld), INT64_C(%lld), INT64_C(%lld), "
                      "%s_impl::%s, %s_impl::%s_dgamma, %d, %d, %d, %d, INT64_C(%lld), "
                      "INT64_C(%lld), INT64_C(%lld), INT64_C(%lld)},\n",
                      gpu, op, fusion, backward_types(types), (long long)H, (long long)rows_lo,
                      (long long)rows_hi, symbol, symbol, symbol, symbol, l->main.block,
                      l->parts_per_block, l->finish_block, l->partials, (long long)l->max_grid,
                      (long long)l->main.smem, (long long)l->main.smem_per_h,
                      (long long)l->main.max_h);
}

/* Generates one pair (the built-in i of lntune_builtin_cuda_backward_variants with its types
 * left to macros, or the tuned variant for shape) for sm; its launch lines into *l. */
static int emit_pair(lntune_gen *g, int sm, const char *op, const char *variant,
                     const lntune_shape *shape, size_t builtin, const char *symbol,
                     lntune_source *src, lntune_cuda_backward_launch *l) {
    lntune_gen_set_cuda_arch(g, sm);
    int rc = variant ? lntune_gen_emit(g, "cuda", op, variant, shape, symbol, src)
                     : lntune_builtin_emit_cuda_backward(g, builtin, shape->fusion, symbol, src);
    if (rc == LNTUNE_OK && (rc = lntune_cuda_backward_launch_parse(src->text, l)) != LNTUNE_OK)
        lntune_source_free(src);
    return rc;
}

/* The tuned pairs, guarded to their GPU's architecture; the ones that no longer generate or
 * cannot serve their H are left out with a warning. */
static void emit_tuned(lntune_gen *g, const lntune_export_config *c,
                       const lntune_export_cuda_pair *tuned, size_t ntuned,
                       lntune_export_cuda_backward_out *out) {
    for (size_t i = 0; i < ntuned; ++i) {
        const lntune_export_cuda_pair *p = &tuned[i];
        char symbol[64];
        snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_b%zu", i);
        const lntune_shape shape = {.H = p->H, .types = p->types, .fusion = p->fusion};
        lntune_source src;
        lntune_cuda_backward_launch l;
        if (emit_pair(g, p->sm, p->base_op, p->variant, &shape, 0, symbol, &src, &l) != LNTUNE_OK) {
            lntune_export_warn(c,
                               "%s %s H=%lld on %s: variant '%s' no longer generates (%s); "
                               "left out",
                               p->op_text, p->dtype, (long long)p->H, p->gpu_name, p->variant,
                               lntune_gen_errmsg(g));
            ++out->skipped;
            continue;
        }
        if (l.main.max_h > 0 && p->H > l.main.max_h) {
            lntune_export_warn(c, "%s %s H=%lld on %s: '%s' serves H <= %lld only; left out",
                               p->op_text, p->dtype, (long long)p->H, p->gpu_name, p->variant,
                               (long long)l.main.max_h);
            ++out->skipped;
            lntune_source_free(&src);
            continue;
        }
        lntune_export_put_cuda_kernel(out->kernels, &src, symbol, p->sm,
                                      LNTUNE_EXPORT_GUARD_BACKWARD, NULL);
        put_entry(out->table, p->gpu, p->op, p->fusion, p->types, p->H, p->rows_lo, p->rows_hi,
                  symbol, &l);
        char rows[64];
        if (p->rows_hi == INT64_MAX)
            snprintf(rows, sizeof rows, "%lld-...", (long long)p->rows_lo);
        else
            snprintf(rows, sizeof rows, "%lld-%lld", (long long)p->rows_lo, (long long)p->rows_hi);
        lntune_export_put(out->comment,
                          " *   b%zu: g%d %s %s H=%lld rows %s (tuned at %lld): %s; %.0f ns, "
                          "%.1f GB/s (copy %.1f), max error %.3g\n",
                          i, p->gpu, p->op_text, p->dtype, (long long)p->H, rows,
                          (long long)p->tuned_rows, p->variant, p->median_ns, p->gbps, p->copy_gbps,
                          p->max_error);
        lntune_source_free(&src);
        ++out->exported;
    }
}

int lntune_export_cuda_backward(lntune_gen *g, const lntune_export_config *c, int sm,
                                const lntune_export_cuda_pair *tuned, size_t ntuned,
                                const lntune_types *tuples, size_t n,
                                lntune_export_cuda_backward_out *out, char *msg, size_t msglen) {
    emit_tuned(g, c, tuned, ntuned, out);
    size_t emitted = (size_t)out->exported;
    for (size_t t = 0; t < n; ++t) {
        int seen = 0; /* a tuple listed twice is emitted once */
        for (size_t u = 0; u < t; ++u)
            seen |= backward_types(tuples[u]) == backward_types(tuples[t]);
        if (seen) continue;
        const lntune_types types = {tuples[t].x, tuples[t].x, tuples[t].params, 0};
        char tuple[24];
        lntune_types_format(types, tuple, sizeof tuple);
        for (char *p = tuple; *p; ++p)
            if (*p == '/') *p = '_';
        for (size_t i = 0; i < lntune_builtin_cuda_backward_variant_count; ++i)
            for (int fused = 0; fused < 2; ++fused) {
                const lntune_builtin_variant *v = &lntune_builtin_cuda_backward_variants[i];
                const lntune_shape shape = {
                    .types = types, .fusion = fused ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE};
                char symbol[160];
                snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_%s%s_%s", v->op,
                         fused ? "_residual" : "", tuple);
                lntune_source src;
                lntune_cuda_backward_launch l;
                int rc = emit_pair(g, sm, v->op, NULL, &shape, i, symbol, &src, &l);
                if (rc != LNTUNE_OK) {
                    snprintf(msg, msglen, "backward CUDA kernel %s: %s", symbol,
                             lntune_gen_errmsg(g));
                    return rc;
                }
                lntune_export_put_cuda_kernel(out->kernels, &src, symbol, sm,
                                              LNTUNE_EXPORT_UNGUARDED, &types);
                put_entry(out->table, -1, strncmp(v->op, "rmsnorm", 7) == 0, fused, types, 0, 1,
                          INT64_MAX, symbol, &l);
                lntune_export_put(out->comment, " *   %s %s%s: %s\n", v->op, tuple,
                                  fused ? " dresidual_out" : "", src.variant);
                lntune_source_free(&src);
                ++emitted;
            }
    }
    out->entries = emitted;
    return LNTUNE_OK;
}

void lntune_export_cuda_backward_host(const lntune_export_buf *table, size_t entries,
                                      lntune_export_buf *host) {
    lntune_export_put(
        host, "namespace {\n\n"
              "typedef void (*backward_fn)(lntune_backward_kernel_args, float *, float *);\n"
              "typedef void (*finish_fn)(const float *, const float *, int64_t, int64_t, void *, "
              "void *);\n\n"
              "/* A backward pair and its launch lines (see each kernel's header comment). */\n"
              "struct backward_entry {\n"
              "    int gpu;    /* index in gpus; -1: any (generic) */\n"
              "    int op;     /* 0 layernorm, 1 rmsnorm */\n"
              "    int fusion; /* 1: dresidual_out added to dx */\n"
              "    int types;  /* x | x << 2 | params << 4; 0 fp32, 1 fp16, 2 bf16 */\n"
              "    int64_t H;  /* 0: any */\n"
              "    int64_t rows_lo, rows_hi;\n"
              "    backward_fn fn;\n"
              "    finish_fn finish;\n"
              "    int block, parts_per_block, finish_block, partials;\n"
              "    int64_t max_grid, smem, smem_per_h, max_h;\n"
              "};\n\n"
              "/* The tuned pairs, then the generic ones. */\n"
              "const backward_entry backward_kernels[] = {\n");
    lntune_export_put(host, "%s", table->s ? table->s : "");
    lntune_export_put(host, "};\nconstexpr int NBACKWARD = %zu;\n\n", entries);
    lntune_export_put_code(host, "common/backward_args.h");
    lntune_export_put_code(host, "cuda/backward_host.cu");
}

void lntune_export_cuda_backward_declare(lntune_export_buf *header) {
    lntune_export_put(
        header,
        "/*\n"
        " * The backward: dx of a lntune_backward_kernel_args (device pointers: rows, H, x, dy, "
        "dx;\n"
        " * gamma, the forward's saved mean and rstd (LayerNorm: both or neither), "
        "dresidual_out\n"
        " * optional) and, when not NULL, dgamma and dbeta (H elements; RMSNorm: dbeta NULL).\n"
        " * types.x is the type of x, dy, dx and dresidual_out, types.params of gamma, dgamma "
        "and\n"
        " * dbeta. The generic pair of the call's op, fusion and tuple runs on stream: "
        "dgamma/dbeta\n"
        " * summed per row group in fp32 into scratch memory allocated and freed on that stream\n"
        " * (cudaMallocAsync), then in a fixed order (the same bits on every call). Tuples: those\n"
        " * of the forward winners, and all-fp32; another is LNTUNE_EUNSUPPORTED.\n"
        " */\n");
    static const char *const ops[] = {"layernorm", "rmsnorm"};
    for (int i = 0; i < 2; ++i)
        lntune_export_put(header,
                          "int lntune_kernels_cuda_%s_backward(const lntune_backward_kernel_args "
                          "*args,\n"
                          "                                    lntune_kernels_types types, void "
                          "*dgamma, void *dbeta,\n"
                          "                                    cudaStream_t stream);\n",
                          ops[i]);
}
