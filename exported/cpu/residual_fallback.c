/*
 * exported/cpu/residual_fallback.c - the generic fused Add & Norm of lntune_kernels.c: a row of
 * s = x + residual in fp32 (as runtime/builtin_residual_body.h forms it), rounded once into
 * residual_out if given, then normalized by the unfused generic kernel of an fp32 x with the
 * call's y and gamma/beta types. Only the element loops are instantiated per type (9 sums, 3
 * stores); the row loop is one function, so the fallback adds little to an app's compile time.
 * Copied after the generic kernels and the RESIDUAL_* macros (residual_vector_macros.h, or
 * their no-ops where the file is not compiled for AVX2).
 */
/* ---- residual add fallback: all-bf16 calls with gamma or neither take the fused kernel
 * where there is one; others s = x + residual in fp32 a row at a time, rounded into
 * residual_out if given, then the unfused generic kernel on s
 * (runtime/builtin_residual_body.h) ---- */
enum { RESIDUAL_STACK_FLOATS = 4096 };
typedef void (*residual_sum_fn)(float *s, const void *x, const void *r, int64_t H);
typedef void (*residual_store_fn)(void *out, const float *s, int64_t H, int nt);

#define RESIDUAL_SUM(X, R)                                                                         \
    static void residual_sum_##X##_##R(float *s, const void *x, const void *r, int64_t H) {        \
        int64_t i = 0;                                                                             \
        RESIDUAL_SUM8(X, R)                                                                        \
        for (; i < H; ++i) s[i] = typed_load(TYPED_##X, x, i) + typed_load(TYPED_##R, r, i);       \
    }
#define RESIDUAL_SUMS(X) RESIDUAL_SUM(X, F32) RESIDUAL_SUM(X, F16) RESIDUAL_SUM(X, BF16)
RESIDUAL_SUMS(F32)
RESIDUAL_SUMS(F16)
RESIDUAL_SUMS(BF16)
#define RESIDUAL_STORE(R)                                                                          \
    static void residual_store_##R(void *out, const float *s, int64_t H, int nt) {                 \
        int64_t i = 0;                                                                             \
        RESIDUAL_STORE8(R)                                                                         \
        (void)nt;                                                                                  \
        for (; i < H; ++i) typed_store(TYPED_##R, out, i, s[i]);                                   \
    }
RESIDUAL_STORE(F32)
RESIDUAL_STORE(F16)
RESIDUAL_STORE(BF16)
static const residual_sum_fn residual_sums[3][3] = {
    {residual_sum_F32_F32, residual_sum_F32_F16, residual_sum_F32_BF16},
    {residual_sum_F16_F32, residual_sum_F16_F16, residual_sum_F16_BF16},
    {residual_sum_BF16_F32, residual_sum_BF16_F16, residual_sum_BF16_BF16}};
static const residual_store_fn residual_stores[3] = {residual_store_F32, residual_store_F16,
                                                     residual_store_BF16};

static const void *residual_row(const void *base, int64_t r, int64_t stride, int type) {
    return (const unsigned char *)base + (size_t)(r * stride) * typed_size(type);
}

static int residual_norm(const lntune_kernel_args *a, int64_t begin, int64_t end, int op, int xt,
                         int yt, int pt, int rt) {
    const int affine = a->gamma ? 1 : a->beta ? 2 : 0;
    const int64_t residual_bytes = (int64_t)typed_size(rt) * (a->residual_out ? 2 : 1);
    const int streams =
        streaming_call(a, (int64_t)(typed_size(xt) + typed_size(yt)) + residual_bytes);
    if (xt == TYPED_BF16 && yt == xt && pt == xt && rt == xt && affine < 2) {
        const int out = a->residual_out != NULL;
        const lntune_kernel_fn fused = fused_bf16_generic(op, affine, out, streams);
        if (fused) return fused(a, begin, end);
    }
    const lntune_kernel_fn inner = unfused_generic(op, affine, TYPED_F32, yt, pt, streams);
    const int64_t H = a->H;
    float stack[RESIDUAL_STACK_FLOATS];
    float *s = H <= RESIDUAL_STACK_FLOATS ? stack : (float *)malloc((size_t)H * sizeof *s);
    if (!s) return 2; /* out of memory for the row */
    lntune_kernel_args one = *a;
    one.rows = 1;
    one.x_stride = one.y_stride = H;
    one.residual = NULL;
    one.residual_out = NULL;
    one.x = s;
    int rc = LNTUNE_KERNEL_OK;
    for (int64_t r = begin; r < end && rc == LNTUNE_KERNEL_OK; ++r) {
        residual_sums[xt][rt](s, residual_row(a->x, r, a->x_stride, xt),
                              residual_row(a->residual, r, a->residual_stride, rt), H);
        if (a->residual_out)
            residual_stores[rt](
                (void *)residual_row(a->residual_out, r, a->residual_out_stride, rt), s, H,
                streams);
        one.y = (void *)residual_row(a->y, r, a->y_stride, yt);
        one.mean = a->mean ? a->mean + r : NULL;
        one.rstd = a->rstd ? a->rstd + r : NULL;
        rc = inner(&one, 0, 1);
    }
    if (streams && a->residual_out) RESIDUAL_FENCE(); /* residual_out's stores, as the inner's */
    if (s != stack) free(s);
    return rc;
}
