/*
 * exported/cpu/quant_fallback.c - a quantized y (types.y LNTUNE_KERNELS_I8 or
 * LNTUNE_KERNELS_FP8_E4M3) that no winner serves: the generic kernel of the call's tuple with an
 * fp32 y computes a few rows at a time into a buffer, whose codes (and scales) quant_rows.h
 * stores, as liblntune's built-in path does (runtime/builtin_quant.c). Copied after pool.c and
 * quant_rows.h.
 */
typedef struct {
    lntune_kernel_fn float_fn;
    const lntune_kernel_args *a;
    size_t x_bytes, residual_bytes;
    int e4m3;
} quant_job;

static int quant_part(const void *job, int i, int n) {
    const quant_job *j = job;
    return lntune_quant_rows(j->float_fn, j->a, j->a->rows * i / n, j->a->rows * (i + 1) / n,
                             j->x_bytes, j->residual_bytes, j->e4m3);
}

/* The call a (strides complete) on up to threads threads: float_fn's fp32 y stored as int8
 * codes, or e4m3 ones with e4m3; a scale per row where a->y_scales is given. */
static int run_quantized(lntune_kernel_fn float_fn, const lntune_kernel_args *a, int threads,
                         size_t x_bytes, size_t residual_bytes, int e4m3) {
    const quant_job job = {float_fn, a, x_bytes, residual_bytes, e4m3};
    int used;
    return run_parts(quant_part, &job, threads, a->rows, &used);
}
