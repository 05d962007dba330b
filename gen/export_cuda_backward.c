/*
 * export_cuda_backward.c - the backward in lntune_kernels.cu: the runtime's built-in backward
 * pairs (gen/builtin.c: a block per row re-reading x and dy, dgamma/dbeta from per-row-group
 * partials summed in order by a second kernel), one per op, fusion and (x, params) tuple, their
 * element types chosen by #defines around the typed source; a table of them and their launch
 * lines; and lntune_kernels_cuda_<op>_backward, which launches a pair on the caller's stream with
 * its workspace allocated and freed on that stream (cudaMallocAsync), as runtime/cuda_dispatch.c
 * does. No CUDA backward is tuned yet, so there are no tuned backward kernels to export.
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
    "    const int fusion = a.dresidual_out != nullptr;\n"
    "    const int types = xt | xt << 2 | pt << 4;\n"
    "    const backward_entry *e = nullptr;\n"
    "    for (int i = 0; i < NBACKWARD && !e; ++i)\n"
    "        if (backward_kernels[i].op == op && backward_kernels[i].fusion == fusion &&\n"
    "            backward_kernels[i].types == types)\n"
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
    "    if (smem > DEFAULT_SMEM)\n"
    "        return fail(LNTUNE_EUNSUPPORTED, \"H exceeds the backward kernel's shared memory\",\n"
    "                    cudaSuccess);\n"
    "    int64_t grid = (a.rows + e->parts_per_block - 1) / e->parts_per_block;\n"
    "    if (grid > e->max_grid) grid = e->max_grid;\n"
    "    if (e->partials && grid > WORKSPACE_FLOATS / a.H / e->parts_per_block) /* they stride */\n"
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

int lntune_export_cuda_backward(lntune_gen *g, int sm, const lntune_types *tuples, size_t n,
                                lntune_export_buf *kernels, lntune_export_buf *host,
                                lntune_export_buf *comment, char *msg, size_t msglen) {
    lntune_export_put(
        host, "namespace {\n\n"
              "typedef void (*backward_fn)(lntune_backward_kernel_args, float *, float *);\n"
              "typedef void (*finish_fn)(const float *, const float *, int64_t, int64_t, "
              "void *, void *);\n\n"
              "/* A backward pair and its launch lines (see each kernel's header "
              "comment). */\n"
              "struct backward_entry {\n"
              "    int op;     /* 0 layernorm, 1 rmsnorm */\n"
              "    int fusion; /* 1: dresidual_out added to dx */\n"
              "    int types;  /* x | x << 2 | params << 4; 0 fp32, 1 fp16, 2 bf16 */\n"
              "    backward_fn fn;\n"
              "    finish_fn finish;\n"
              "    int block, parts_per_block, finish_block, partials;\n"
              "    int64_t max_grid, smem, smem_per_h;\n"
              "};\n\n"
              "const backward_entry backward_kernels[] = {\n");
    size_t emitted = 0;
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
                const int fusion = fused ? LNTUNE_FUSION_RESIDUAL : LNTUNE_FUSION_NONE;
                const lntune_builtin_variant *v = &lntune_builtin_cuda_backward_variants[i];
                char symbol[160];
                snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_%s%s_%s", v->op,
                         fused ? "_residual" : "", tuple);
                lntune_gen_set_cuda_arch(g, sm);
                lntune_source src;
                int rc = lntune_builtin_emit_cuda_backward(g, i, fusion, symbol, &src);
                lntune_cuda_backward_launch l;
                if (rc == LNTUNE_OK &&
                    (rc = lntune_cuda_backward_launch_parse(src.text, &l)) != LNTUNE_OK)
                    lntune_source_free(&src);
                if (rc != LNTUNE_OK) {
                    snprintf(msg, msglen, "backward CUDA kernel %s: %s", symbol,
                             lntune_gen_errmsg(g));
                    return rc;
                }
                lntune_export_put_cuda_kernel(kernels, &src, symbol, sm, 0, &types);
                lntune_export_put(host,
                                  "    {%d, %d, %d, %s_impl::%s, %s_impl::%s_dgamma, %d, %d, %d, "
                                  "%d, INT64_C(%lld), INT64_C(%lld), INT64_C(%lld)},\n",
                                  strncmp(v->op, "rmsnorm", 7) == 0, fused, backward_types(types),
                                  symbol, symbol, symbol, symbol, l.main.block, l.parts_per_block,
                                  l.finish_block, l.partials, (long long)l.max_grid,
                                  (long long)l.main.smem, (long long)l.main.smem_per_h);
                lntune_export_put(comment, " *   %s %s%s: %s\n", v->op, tuple,
                                  fused ? " dresidual_out" : "", src.variant);
                lntune_source_free(&src);
                ++emitted;
            }
    }
    lntune_export_put(host, "};\nconstexpr int NBACKWARD = %zu;\n\n%s", emitted, host_text);
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
