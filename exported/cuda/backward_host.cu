/*
 * exported/cuda/backward_host.cu - the host side of the backward in lntune_kernels.cu: the
 * pair of kernels of a call's types, its scratch partials and both launches. Copied after the
 * backward table (NBACKWARD entries).
 */
constexpr int64_t WORKSPACE_FLOATS = INT64_C(1) << 21; /* partials per gradient, at most */

int run_backward(int op, const lntune_backward_kernel_args *args, lntune_kernels_types t,
                 void *dgamma, void *dbeta, cudaStream_t stream) {
    static const char *const type_names[] = {"f32", "f16", "bf16"};
    const int xt = lntune_internal_type(t.x, 0), pt = lntune_internal_type(t.params, xt);
    if (!args || !args->x || !args->dy || !args->dx || args->H <= 0 || args->rows < 0 ||
        args->eps < 0.0f || args->eps != args->eps)
        return fail(LNTUNE_EINVAL, "NULL args, x, dy or dx, H <= 0, rows < 0, or eps < 0 or NaN",
                    cudaSuccess);
    if (xt < 0 || pt < 0)
        return fail(LNTUNE_EINVAL, "a type outside LNTUNE_KERNELS_DEFAULT..LNTUNE_KERNELS_BF16",
                    cudaSuccess);
    if (op == 1 && dbeta) return fail(LNTUNE_EINVAL, "RMSNorm has no dbeta", cudaSuccess);
    if (op == 0 && !args->mean != !args->rstd)
        return fail(LNTUNE_EINVAL, "LayerNorm takes both saved statistics or neither", cudaSuccess);
    lntune_backward_kernel_args a = *args;
    if (!lntune_complete_backward_args(&a))
        return fail(LNTUNE_EINVAL, "a stride is neither 0 nor >= H", cudaSuccess);
    if (a.rows == 0) return LNTUNE_OK;
    int gpu = 0, device = 0;
    int rc = current_gpu(&gpu, &device);
    if (rc != LNTUNE_OK) return rc;
    const int fusion = a.dresidual_out != nullptr;
    const int types = xt | xt << 2 | pt << 4;
    /* the tuned pair of the rows bucket, else of the nearest; else the generic one */
    const backward_entry *e = nullptr;
    double best_distance = 0.0;
    for (int i = 0; i < NBACKWARD; ++i) {
        const backward_entry *t = &backward_kernels[i];
        if (t->gpu != gpu || t->op != op || t->fusion != fusion || t->types != types ||
            t->H != a.H || (t->max_h > 0 && a.H > t->max_h))
            continue;
        if (a.rows >= t->rows_lo && a.rows <= t->rows_hi) {
            e = t;
            break;
        }
        const double d = a.rows < t->rows_lo ? (double)t->rows_lo / (double)a.rows
                                             : (double)a.rows / (double)t->rows_hi;
        if (!e || d < best_distance) e = t, best_distance = d;
    }
    for (int i = 0; i < NBACKWARD && !e; ++i)
        if (backward_kernels[i].gpu < 0 && backward_kernels[i].op == op &&
            backward_kernels[i].fusion == fusion && backward_kernels[i].types == types)
            e = &backward_kernels[i];
    if (!e) {
        snprintf(message, sizeof message,
                 "no backward kernel for x %s, gamma %s was exported (the CUDA export holds the "
                 "type tuples of its forward winners, and all-fp32)",
                 type_names[xt], type_names[pt]);
        return LNTUNE_EUNSUPPORTED;
    }
    const int64_t smem = e->smem + e->smem_per_h * ((a.H + 3) / 4 * 4);
    if (smem > DEFAULT_SMEM) {
        cudaError_t err = cudaFuncSetAttribute(
            (const void *)e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return fail(LNTUNE_ERROR, "cudaFuncSetAttribute (shared memory)", err);
    }
    int64_t grid = (a.rows + e->parts_per_block - 1) / e->parts_per_block;
    if (grid > e->max_grid) grid = e->max_grid;
    if (e->partials && grid > WORKSPACE_FLOATS / a.H / e->parts_per_block) /* they stride */
        grid = WORKSPACE_FLOATS / a.H / e->parts_per_block > 0
                   ? WORKSPACE_FLOATS / a.H / e->parts_per_block
                   : 1;
    const int64_t parts = e->partials ? grid * e->parts_per_block : 1;
    const size_t bytes = (size_t)(parts * a.H) * sizeof(float);
    void *const out[2] = {dgamma, dbeta};
    float *ws[2] = {nullptr, nullptr};
    cudaError_t err = cudaSuccess;
    for (int k = 0; k < 2 && err == cudaSuccess; ++k) {
        if (!out[k]) continue;
        err = cudaMallocAsync((void **)&ws[k], bytes, stream);
        if (err == cudaSuccess && !e->partials) err = cudaMemsetAsync(ws[k], 0, bytes, stream);
    }
    if (err == cudaSuccess) {
        e->fn<<<dim3((unsigned)grid), dim3((unsigned)e->block), (size_t)smem, stream>>>(a, ws[0],
                                                                                        ws[1]);
        if (ws[0] || ws[1])
            e->finish<<<dim3((unsigned)((a.H + e->finish_block - 1) / e->finish_block)),
                        dim3((unsigned)e->finish_block), 0, stream>>>(ws[0], ws[1], parts, a.H,
                                                                      dgamma, dbeta);
        err = cudaGetLastError();
    }
    for (int k = 0; k < 2; ++k)
        if (ws[k]) cudaFreeAsync(ws[k], stream);
    return err == cudaSuccess ? LNTUNE_OK : fail(LNTUNE_ERROR, "backward launch", err);
}

} // namespace

extern "C" int lntune_kernels_cuda_layernorm_backward(const lntune_backward_kernel_args *args,
                                                      lntune_kernels_types types, void *dgamma,
                                                      void *dbeta, cudaStream_t stream) {
    return run_backward(0, args, types, dgamma, dbeta, stream);
}

extern "C" int lntune_kernels_cuda_rmsnorm_backward(const lntune_backward_kernel_args *args,
                                                    lntune_kernels_types types, void *dgamma,
                                                    void *dbeta, cudaStream_t stream) {
    return run_backward(1, args, types, dgamma, dbeta, stream);
}
