/*
 * builtin.c - the table of built-in kernels. The kernels themselves are generated at build time
 * by tools/emit_builtin.c from the templates (see gen/template/builtin.c for their parameters) into
 * lntune_builtin_kernels.c in the build directory, and on x86-64 into
 * lntune_builtin_kernels_avx2.c and (the forward ones) lntune_builtin_kernels_avx512.c too; only
 * their names appear here.
 *
 * The templates have no LayerNorm variant for beta without gamma (the tuner never measures
 * one), so that case is the plain kernel followed by adding beta: one extra pass over y, for
 * a combination that real models do not use.
 */
#include "builtin.h"

#include "fusion.h"
#include "registry.h"

#include <stddef.h>

/* Generated; names follow lntune_builtin_symbol(prefix, i) for the prefixes "lntune_builtin",
 * "lntune_builtin_avx2" and "lntune_builtin_avx2_nt" (tools/emit_builtin.c), and the typed and
 * backward tables are "<prefix>_typed" and "<prefix>_backward". */
#define DECLARE_FORWARD(prefix)                                                                    \
    int prefix##_layernorm_affine(const lntune_kernel_args *a, int64_t begin, int64_t end);        \
    int prefix##_layernorm_plain(const lntune_kernel_args *a, int64_t begin, int64_t end);         \
    int prefix##_rmsnorm_affine(const lntune_kernel_args *a, int64_t begin, int64_t end);          \
    int prefix##_rmsnorm_plain(const lntune_kernel_args *a, int64_t begin, int64_t end);           \
    extern const lntune_kernel_fn prefix##_typed[2][2][3][3][3];                                   \
    extern const lntune_kernel_fn prefix##_offset[2][3];
#define DECLARE_COPY(prefix)                                                                       \
    DECLARE_FORWARD(prefix)                                                                        \
    extern const lntune_kernel_fn prefix##_fused_bf16[2][2][2];
#define FP32_KERNELS(prefix)                                                                       \
    {                                                                                              \
        {prefix##_layernorm_plain, prefix##_layernorm_affine}, {                                   \
            prefix##_rmsnorm_plain, prefix##_rmsnorm_affine                                        \
        }                                                                                          \
    }
DECLARE_COPY(lntune_builtin)
extern const lntune_backward_kernel_fn lntune_builtin_backward[2][2][3][3];
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
DECLARE_COPY(lntune_builtin_avx2)
extern const lntune_backward_kernel_fn lntune_builtin_avx2_backward[2][2][3][3];
DECLARE_COPY(lntune_builtin_avx2_nt)
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
DECLARE_FORWARD(lntune_builtin_avx512)
DECLARE_FORWARD(lntune_builtin_avx512_nt)
#endif

/* [copy: LNTUNE_BUILTIN_*][op: LNTUNE_DESC_LAYERNORM, _RMSNORM][affine: 0 neither, 1 gamma] */
static const lntune_kernel_fn fp32_kernels[][2][2] = {
    FP32_KERNELS(lntune_builtin),
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    FP32_KERNELS(lntune_builtin_avx2),   FP32_KERNELS(lntune_builtin_avx2_nt),
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
    FP32_KERNELS(lntune_builtin_avx512), FP32_KERNELS(lntune_builtin_avx512_nt),
#endif
};
enum { COPIES = sizeof fp32_kernels / sizeof fp32_kernels[0] };

/* [copy]: the tables [op][affine][x][y][params] of every tuple but all-fp32 */
static const lntune_kernel_fn (*const generated_typed[COPIES])[2][3][3][3] = {
    lntune_builtin_typed,
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    lntune_builtin_avx2_typed,   lntune_builtin_avx2_nt_typed,
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
    lntune_builtin_avx512_typed, lntune_builtin_avx512_nt_typed,
#endif
};

/* [copy]: the tables [op][type] of the weight offset's kernels of one-type tuples */
static const lntune_kernel_fn (*const generated_offset[COPIES])[3] = {
    lntune_builtin_offset,
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    lntune_builtin_avx2_offset,   lntune_builtin_avx2_nt_offset,
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
    lntune_builtin_avx512_offset, lntune_builtin_avx512_nt_offset,
#endif
};

/* [copy]: the tables [op][affine][0 residual, 1 residual_out] of the all-bf16 Add & Norm (the
 * AVX-512 copy has none: residual calls run the AVX2 one) */
static const lntune_kernel_fn (*const generated_fused_bf16[])[2][2] = {
    lntune_builtin_fused_bf16,
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    lntune_builtin_avx2_fused_bf16,
    lntune_builtin_avx2_nt_fused_bf16,
#endif
};

/* [copy]: the tables [op][fused][x][params] (the streaming copy has none) */
static const lntune_backward_kernel_fn (*const backward_kernels[])[2][3][3] = {
    lntune_builtin_backward,
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    lntune_builtin_avx2_backward,
#endif
};

lntune_kernel_fn lntune_builtin_generated(int copy, int op, int affine, lntune_types t) {
    if (copy < 0 || copy >= COPIES || (op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) ||
        (affine != LNTUNE_DESC_GAMMA && affine != LNTUNE_DESC_NO_AFFINE) ||
        t.x >= LNTUNE_TYPE_COUNT || t.y >= LNTUNE_TYPE_COUNT || t.params >= LNTUNE_TYPE_COUNT)
        return NULL;
    const int gamma = affine == LNTUNE_DESC_GAMMA;
    return lntune_types_all_f32(t) ? fp32_kernels[copy][op][gamma]
                                   : generated_typed[copy][op][gamma][t.x][t.y][t.params];
}

lntune_kernel_fn lntune_builtin_offset_kernel(int streaming, int op, lntune_types t) {
    const int copy = lntune_builtin_forward_copy(streaming);
    if (copy < 0 || copy >= COPIES || (op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) ||
        t.x >= LNTUNE_TYPE_COUNT || t.y != t.x || t.params != t.x)
        return NULL;
    return generated_offset[copy][op][t.x];
}

enum { FUSED_COPIES = sizeof generated_fused_bf16 / sizeof generated_fused_bf16[0] };

lntune_kernel_fn lntune_builtin_fused_bf16_kernel(int copy, int op, int affine, int fusion) {
    if (copy < 0 || copy >= FUSED_COPIES ||
        (op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) ||
        (affine != LNTUNE_DESC_GAMMA && affine != LNTUNE_DESC_NO_AFFINE) ||
        (fusion != LNTUNE_FUSION_RESIDUAL && fusion != LNTUNE_FUSION_RESIDUAL_OUT))
        return NULL;
    return generated_fused_bf16[copy][op][affine == LNTUNE_DESC_GAMMA]
                               [fusion == LNTUNE_FUSION_RESIDUAL_OUT];
}

static int layernorm_beta_only(const lntune_kernel_args *a, int64_t begin, int64_t end) {
    lntune_kernel_args plain = *a;
    plain.beta = NULL;
    int rc = fp32_kernels[lntune_builtin_level()][LNTUNE_DESC_LAYERNORM][0](&plain, begin, end);
    if (rc != LNTUNE_KERNEL_OK) return rc;
    const float *beta = a->beta;
    for (int64_t r = begin; r < end; ++r) {
        float *y = (float *)a->y + r * a->y_stride;
        for (int64_t i = 0; i < a->H; ++i) y[i] += beta[i];
    }
    return LNTUNE_KERNEL_OK;
}

lntune_kernel_fn lntune_builtin_kernel(int op, int affine) {
    if (affine == LNTUNE_DESC_BETA_ONLY)
        return op == LNTUNE_DESC_LAYERNORM ? layernorm_beta_only : NULL;
    return lntune_builtin_generated(lntune_builtin_forward_copy(0), op, affine, (lntune_types){0});
}

lntune_kernel_fn lntune_builtin_streaming_kernel(int op, int affine, lntune_types t) {
    return lntune_builtin_generated(lntune_builtin_forward_copy(1), op, affine, t);
}

lntune_backward_kernel_fn lntune_builtin_backward_kernel(int op, int fused, int x, int params) {
    if ((op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) || fused < 0 || fused > 1 ||
        x < 0 || x >= LNTUNE_TYPE_COUNT || params < 0 || params >= LNTUNE_TYPE_COUNT)
        return NULL;
    return backward_kernels[lntune_builtin_level()][op][fused][x][params];
}
