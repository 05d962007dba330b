/*
 * export_cuda_backward.c - the backward in lntune_kernels.cu: the tuned pairs of each GPU
 * (`lntune --target cuda --backward`), each regenerated for its GPU's architecture; the runtime's
 * built-in backward pairs (gen/builtin.c: a block per row re-reading x and dy, dgamma/dbeta from
 * per-row-group partials summed in order by a second kernel), one per op, fusion and (x, params)
 * tuple, their element types chosen by #defines around the typed source; a table of them all
 * with their launch lines; and lntune_kernels_cuda_<op>_backward, which launches the tuned pair
 * of the call's GPU, op, fusion, types, H and nearest rows bucket, else the generic one, on the
 * caller's stream with its workspace allocated and freed on that stream (cudaMallocAsync), as
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

/* The host code after the table: the launch, inside the file's anonymous namespace (whose
 * fail, message and internal_type the forward's dispatch text defined), then the entry points. */
static const char host_text[] =
    "constexpr int64_t WORKSPACE_FLOATS = INT64_C(1) << 21; /* partials per gradient, at most "
    "*/\n"
    "\n"
    "int run_backward(int op, const lntune_backward_kernel_args *args, lntune_kernels_types t,\n"
    "                 void *dgamma, void *dbeta, cudaStream_t stream)\n"
    "{\n"
    "    static const char *const type_names[] = {\"f32\", \"f16\", \"bf16\"};\n"
    "    const int xt = internal_type(t.x, 0), pt = internal_type(t.params, xt);\n"
    "    if (!args || !args->x || !args->dy || !args->dx || args->H <= 0 || args->rows < 0 ||\n"
    "        args->eps < 0.0f || args->eps != args->eps)\n"
    "        return fail(LNTUNE_EINVAL, \"NULL args, x, dy or dx, H <= 0, rows < 0, or eps < 0 or "
    "NaN\",\n"
    "                    cudaSuccess);\n"
    "    if (xt < 0 || pt < 0)\n"
    "        return fail(LNTUNE_EINVAL, \"a type outside "
    "LNTUNE_KERNELS_DEFAULT..LNTUNE_KERNELS_BF16\",\n"
    "                    cudaSuccess);\n"
    "    if (op == 1 && dbeta) return fail(LNTUNE_EINVAL, \"RMSNorm has no dbeta\", "
    "cudaSuccess);\n"
    "    if (op == 0 && !args->mean != !args->rstd)\n"
    "        return fail(LNTUNE_EINVAL, \"LayerNorm takes both saved statistics or neither\",\n"
    "                    cudaSuccess);\n"
    "    lntune_backward_kernel_args a = *args;\n"
    "    if (a.x_stride == 0) a.x_stride = a.H;\n"
    "    if (a.dy_stride == 0) a.dy_stride = a.H;\n"
    "    if (a.dx_stride == 0) a.dx_stride = a.H;\n"
    "    if (a.dresidual_out_stride == 0) a.dresidual_out_stride = a.H;\n"
    "    if (a.x_stride < a.H || a.dy_stride < a.H || a.dx_stride < a.H ||\n"
    "        (a.dresidual_out && a.dresidual_out_stride < a.H))\n"
    "        return fail(LNTUNE_EINVAL, \"a stride is neither 0 nor >= H\", cudaSuccess);\n"
    "    if (!(a.eps > 0.0f)) a.eps = 1e-5f;\n"
    "    if (a.rows == 0) return LNTUNE_OK;\n"
    "    int gpu = 0, device = 0;\n"
    "    int rc = current_gpu(&gpu, &device);\n"
    "    if (rc != LNTUNE_OK) return rc;\n"
    "    const int fusion = a.dresidual_out != nullptr;\n"
    "    const int types = xt | xt << 2 | pt << 4;\n"
    "    /* the tuned pair of the rows bucket, else of the nearest; else the generic one */\n"
    "    const backward_entry *e = nullptr;\n"
    "    double best_distance = 0.0;\n"
    "    for (int i = 0; i < NBACKWARD; ++i) {\n"
    "        const backward_entry *t = &backward_kernels[i];\n"
    "        if (t->gpu != gpu || t->op != op || t->fusion != fusion || t->types != types ||\n"
    "            t->H != a.H || (t->max_h > 0 && a.H > t->max_h))\n"
    "            continue;\n"
    "        if (a.rows >= t->rows_lo && a.rows <= t->rows_hi) {\n"
    "            e = t;\n"
    "            break;\n"
    "        }\n"
    "        const double d = a.rows < t->rows_lo ? (double)t->rows_lo / (double)a.rows\n"
    "                                             : (double)a.rows / (double)t->rows_hi;\n"
    "        if (!e || d < best_distance) e = t, best_distance = d;\n"
    "    }\n"
    "    for (int i = 0; i < NBACKWARD && !e; ++i)\n"
    "        if (backward_kernels[i].gpu < 0 && backward_kernels[i].op == op &&\n"
    "            backward_kernels[i].fusion == fusion && backward_kernels[i].types == types)\n"
    "            e = &backward_kernels[i];\n"
    "    if (!e) {\n"
    "        snprintf(message, sizeof message,\n"
    "                 \"no backward kernel for x %s, gamma %s was exported (the CUDA export holds "
    "the \"\n"
    "                 \"type tuples of its forward winners, and all-fp32)\",\n"
    "                 type_names[xt], type_names[pt]);\n"
    "        return LNTUNE_EUNSUPPORTED;\n"
    "    }\n"
    "    const int64_t smem = e->smem + e->smem_per_h * ((a.H + 3) / 4 * 4);\n"
    "    if (smem > DEFAULT_SMEM) {\n"
    "        cudaError_t err = cudaFuncSetAttribute((const void *)e->fn,\n"
    "                                               cudaFuncAttributeMaxDynamicSharedMemorySize,\n"
    "                                               (int)smem);\n"
    "        if (err != cudaSuccess)\n"
    "            return fail(LNTUNE_ERROR, \"cudaFuncSetAttribute (shared memory)\", err);\n"
    "    }\n"
    "    int64_t grid = (a.rows + e->parts_per_block - 1) / e->parts_per_block;\n"
    "    if (grid > e->max_grid) grid = e->max_grid;\n"
    "    if (e->partials && grid > WORKSPACE_FLOATS / a.H / e->parts_per_block) /* they stride "
    "*/\n"
    "        grid = WORKSPACE_FLOATS / a.H / e->parts_per_block > 0\n"
    "                   ? WORKSPACE_FLOATS / a.H / e->parts_per_block\n"
    "                   : 1;\n"
    "    const int64_t parts = e->partials ? grid * e->parts_per_block : 1;\n"
    "    const size_t bytes = (size_t)(parts * a.H) * sizeof(float);\n"
    "    void *const out[2] = {dgamma, dbeta};\n"
    "    float *ws[2] = {nullptr, nullptr};\n"
    "    cudaError_t err = cudaSuccess;\n"
    "    for (int k = 0; k < 2 && err == cudaSuccess; ++k) {\n"
    "        if (!out[k]) continue;\n"
    "        err = cudaMallocAsync((void **)&ws[k], bytes, stream);\n"
    "        if (err == cudaSuccess && !e->partials) err = cudaMemsetAsync(ws[k], 0, bytes, "
    "stream);\n"
    "    }\n"
    "    if (err == cudaSuccess) {\n"
    "        e->fn<<<dim3((unsigned)grid), dim3((unsigned)e->block), (size_t)smem, "
    "stream>>>(a, ws[0],\n"
    "                                                                               ws[1]);\n"
    "        if (ws[0] || ws[1])\n"
    "            e->finish<<<dim3((unsigned)((a.H + e->finish_block - 1) / e->finish_block)),\n"
    "                        dim3((unsigned)e->finish_block), 0, stream>>>(ws[0], ws[1], parts, "
    "a.H,\n"
    "                                                                     dgamma, dbeta);\n"
    "        err = cudaGetLastError();\n"
    "    }\n"
    "    for (int k = 0; k < 2; ++k)\n"
    "        if (ws[k]) cudaFreeAsync(ws[k], stream);\n"
    "    return err == cudaSuccess ? LNTUNE_OK : fail(LNTUNE_ERROR, \"backward launch\", err);\n"
    "}\n"
    "\n"
    "} // namespace\n"
    "\n"
    "extern \"C\" int lntune_kernels_cuda_layernorm_backward(const lntune_backward_kernel_args "
    "*args,\n"
    "                                                      lntune_kernels_types types, void "
    "*dgamma,\n"
    "                                                      void *dbeta, cudaStream_t stream)\n"
    "{\n"
    "    return run_backward(0, args, types, dgamma, dbeta, stream);\n"
    "}\n"
    "\n"
    "extern \"C\" int lntune_kernels_cuda_rmsnorm_backward(const lntune_backward_kernel_args "
    "*args,\n"
    "                                                    lntune_kernels_types types, void "
    "*dgamma,\n"
    "                                                    void *dbeta, cudaStream_t stream)\n"
    "{\n"
    "    return run_backward(1, args, types, dgamma, dbeta, stream);\n"
    "}\n";

/* The tuple key of the table: x, y as x, params (the forward's packing without a residual). */
static int backward_types(lntune_types t) {
    return t.x | t.x << 2 | t.params << 4;
}

/* One table row: the pair symbol, where it serves, and its launch lines. */
static void put_entry(lntune_export_buf *host, int gpu, int op, int fusion, lntune_types types,
                      int64_t H, int64_t rows_lo, int64_t rows_hi, const char *symbol,
                      const lntune_cuda_backward_launch *l) {
    lntune_export_put(host,
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
        put_entry(out->host, p->gpu, p->op, p->fusion, p->types, p->H, p->rows_lo, p->rows_hi,
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
    lntune_export_put(
        out->host,
        "namespace {\n\n"
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
                put_entry(out->host, -1, strncmp(v->op, "rmsnorm", 7) == 0, fused, types, 0, 1,
                          INT64_MAX, symbol, &l);
                lntune_export_put(out->comment, " *   %s %s%s: %s\n", v->op, tuple,
                                  fused ? " dresidual_out" : "", src.variant);
                lntune_source_free(&src);
                ++emitted;
            }
    }
    lntune_export_put(out->host, "};\nconstexpr int NBACKWARD = %zu;\n\n%s", emitted, host_text);
    return LNTUNE_OK;
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
