/*
 * builtin_typed.c - the built-in kernels of every fp16/bf16 type tuple (x, y, gamma/beta), for
 * shapes no one tuned: the generated, vectorized ones (gen/template/builtin.c,
 * lntune_builtin_emit_typed) with gamma or with neither, and the generic body below for beta
 * without gamma, which the templates have no variant of. fp32 has its own generated built-ins
 * (builtin.c).
 *
 * The generated ones have the fp32 built-ins' numerics (fp32 partial sums added into double),
 * rounded once to y's type. For beta without gamma, the kernel ABI carries no types, so each (op,
 * x, y, params) tuple is its own function: one generic body (typed_kernel.h's typed_norm, which
 * the exported file's fallback is too), inlined with its types as constants, so that each
 * instance's loads and stores are straight-line conversions. Portable C (the runtime is built
 * without -march), for every level. Its sums are all in double (see typed_kernel.h).
 */
#include "builtin.h"

#include "dtypes.h"
#include "registry.h"
#include "typed_kernel.h"

_Static_assert((int)TYPED_F32 == LNTUNE_TYPE_F32 && (int)TYPED_F16 == LNTUNE_TYPE_F16 &&
                   (int)TYPED_BF16 == LNTUNE_TYPE_BF16,
               "typed_kernel.h numbers the types as dtypes.h does");

/* Every tuple but all-fp32, as (x, y, params). */
#define TYPED_TUPLES(M)                                                                            \
    M(F32, F32, F16)                                                                               \
    M(F32, F32, BF16)                                                                              \
    M(F32, F16, F32)                                                                               \
    M(F32, F16, F16)                                                                               \
    M(F32, F16, BF16)                                                                              \
    M(F32, BF16, F32)                                                                              \
    M(F32, BF16, F16)                                                                              \
    M(F32, BF16, BF16)                                                                             \
    M(F16, F32, F32)                                                                               \
    M(F16, F32, F16)                                                                               \
    M(F16, F32, BF16)                                                                              \
    M(F16, F16, F32)                                                                               \
    M(F16, F16, F16)                                                                               \
    M(F16, F16, BF16)                                                                              \
    M(F16, BF16, F32)                                                                              \
    M(F16, BF16, F16)                                                                              \
    M(F16, BF16, BF16)                                                                             \
    M(BF16, F32, F32)                                                                              \
    M(BF16, F32, F16)                                                                              \
    M(BF16, F32, BF16)                                                                             \
    M(BF16, F16, F32)                                                                              \
    M(BF16, F16, F16)                                                                              \
    M(BF16, F16, BF16)                                                                             \
    M(BF16, BF16, F32)                                                                             \
    M(BF16, BF16, F16)                                                                             \
    M(BF16, BF16, BF16)

#define DEFINE_KERNELS(X, Y, P)                                                                    \
    static int layernorm_##X##_##Y##_##P(const lntune_kernel_args *a, int64_t b, int64_t e) {      \
        return typed_norm(a, b, e, /*centered=*/1, LNTUNE_TYPE_##X, LNTUNE_TYPE_##Y,               \
                          LNTUNE_TYPE_##P);                                                        \
    }                                                                                              \
    static int rmsnorm_##X##_##Y##_##P(const lntune_kernel_args *a, int64_t b, int64_t e) {        \
        return typed_norm(a, b, e, /*centered=*/0, LNTUNE_TYPE_##X, LNTUNE_TYPE_##Y,               \
                          LNTUNE_TYPE_##P);                                                        \
    }
TYPED_TUPLES(DEFINE_KERNELS)

#define TABLE_ENTRIES(X, Y, P)                                                                     \
    [LNTUNE_DESC_LAYERNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P] =                   \
        layernorm_##X##_##Y##_##P,                                                                 \
    [LNTUNE_DESC_RMSNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P] =                     \
        rmsnorm_##X##_##Y##_##P,
static const lntune_kernel_fn typed_kernels[2][LNTUNE_TYPE_COUNT][LNTUNE_TYPE_COUNT]
                                           [LNTUNE_TYPE_COUNT] = {TYPED_TUPLES(TABLE_ENTRIES)};

lntune_kernel_fn lntune_builtin_typed_kernel(int op, int affine, lntune_types t) {
    if ((op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) || t.x >= LNTUNE_TYPE_COUNT ||
        t.y >= LNTUNE_TYPE_COUNT || t.params >= LNTUNE_TYPE_COUNT || lntune_types_all_f32(t))
        return NULL;
    lntune_kernel_fn fn = lntune_builtin_generated(lntune_builtin_forward_copy(0), op, affine, t);
    return fn ? fn : typed_kernels[op][t.x][t.y][t.params];
}
