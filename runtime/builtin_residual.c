/*
 * builtin_residual.c - the built-in kernels of calls with a residual (y = Norm(x + residual),
 * optionally residual_out = x + residual), for every type tuple, for shapes no one tuned.
 *
 * Row by row: s = x + residual is formed in fp32 (each widened exactly, one fp32 addition) into a
 * row buffer, rounded once into residual_out if given, and the row buffer is normalized by the
 * built-in of the unfused call with an fp32 x (the generated fp32 built-ins, or the typed ones for
 * a 16-bit y or gamma/beta). So the numerics are exactly those of the unfused built-ins applied
 * to s. The row buffer stays in L1/L2; memory is read and written once, as the tuned kernels do.
 *
 * The kernel ABI carries no types, so each (op, x, y, params, residual) tuple is its own small
 * function around one inlined body.
 */
#include "builtin.h"

#include "dtypes.h"
#include "registry.h"
#include "typed_kernel.h"

#include <stdlib.h>

/* Rows up to this many elements use a stack buffer; longer ones one malloc per call. */
enum { STACK_FLOATS = 4096 };
/* Returned when the row buffer cannot be allocated (the runtime reports "returned 2"). */
enum { BUILTIN_ENOMEM = 2 };

#define RESIDUAL_INLINE static inline __attribute__((always_inline))

RESIDUAL_INLINE const void *row_of(const void *base, int64_t r, int64_t stride, int type) {
    return (const unsigned char *)base + (size_t)(r * stride) * lntune_type_size(type);
}

/* The unfused built-in that normalizes an fp32 row into y's and gamma/beta's types. */
static lntune_kernel_fn inner_kernel(const lntune_kernel_args *a, int op, int yt, int pt) {
    const int affine = a->gamma  ? LNTUNE_DESC_GAMMA
                       : a->beta ? LNTUNE_DESC_BETA_ONLY
                                 : LNTUNE_DESC_NO_AFFINE;
    if (yt == LNTUNE_TYPE_F32 && pt == LNTUNE_TYPE_F32) return lntune_builtin_kernel(op, affine);
    const lntune_types t = {LNTUNE_TYPE_F32, (uint8_t)yt, (uint8_t)pt, 0};
    return lntune_builtin_typed_kernel(op, affine, t);
}

RESIDUAL_INLINE int residual_norm(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end,
                                  int op, int xt, int yt, int pt, int rt) {
    if (!a->residual) return LNTUNE_KERNEL_EUNSUPPORTED;
    const int64_t H = a->H;
    const lntune_kernel_fn inner = inner_kernel(a, op, yt, pt);
    if (!inner) return LNTUNE_KERNEL_EUNSUPPORTED;
    float stack[STACK_FLOATS];
    float *s = H <= STACK_FLOATS ? stack : malloc((size_t)H * sizeof *s);
    if (!s) return BUILTIN_ENOMEM;
    lntune_kernel_args one = *a;
    one.rows = 1;
    one.x_stride = one.y_stride = H;
    one.residual = one.residual_out = NULL;
    one.x = s;
    int rc = LNTUNE_KERNEL_OK;
    for (int64_t r = row_begin; r < row_end && rc == LNTUNE_KERNEL_OK; ++r) {
        const void *x = row_of(a->x, r, a->x_stride, xt);
        const void *res = row_of(a->residual, r, a->residual_stride, rt);
        for (int64_t i = 0; i < H; ++i) s[i] = typed_load(xt, x, i) + typed_load(rt, res, i);
        if (a->residual_out) {
            void *out = (void *)row_of(a->residual_out, r, a->residual_out_stride, rt);
            for (int64_t i = 0; i < H; ++i) typed_store(rt, out, i, s[i]);
        }
        one.y = (void *)row_of(a->y, r, a->y_stride, yt);
        one.mean = a->mean ? a->mean + r : NULL;
        one.rstd = a->rstd ? a->rstd + r : NULL;
        rc = inner(&one, 0, 1);
    }
    if (s != stack) free(s);
    return rc;
}

/* Every (x, y, params, residual) tuple: four levels, each its own macro (a macro does not
 * expand inside itself). */
#define T4(M, X, Y, P) M(X, Y, P, F32) M(X, Y, P, F16) M(X, Y, P, BF16)
#define T3(M, X, Y) T4(M, X, Y, F32) T4(M, X, Y, F16) T4(M, X, Y, BF16)
#define T2(M, X) T3(M, X, F32) T3(M, X, F16) T3(M, X, BF16)
#define ALL_TUPLES(M) T2(M, F32) T2(M, F16) T2(M, BF16)

#define DEFINE_KERNELS(X, Y, P, R)                                                                 \
    static int layernorm_##X##_##Y##_##P##_##R(const lntune_kernel_args *a, int64_t b,             \
                                               int64_t e) {                                        \
        return residual_norm(a, b, e, LNTUNE_DESC_LAYERNORM, LNTUNE_TYPE_##X, LNTUNE_TYPE_##Y,     \
                             LNTUNE_TYPE_##P, LNTUNE_TYPE_##R);                                    \
    }                                                                                              \
    static int rmsnorm_##X##_##Y##_##P##_##R(const lntune_kernel_args *a, int64_t b, int64_t e) {  \
        return residual_norm(a, b, e, LNTUNE_DESC_RMSNORM, LNTUNE_TYPE_##X, LNTUNE_TYPE_##Y,       \
                             LNTUNE_TYPE_##P, LNTUNE_TYPE_##R);                                    \
    }
ALL_TUPLES(DEFINE_KERNELS)

#define TABLE_ENTRIES(X, Y, P, R)                                                                  \
    [LNTUNE_DESC_LAYERNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P][LNTUNE_TYPE_##R] =  \
        layernorm_##X##_##Y##_##P##_##R,                                                           \
    [LNTUNE_DESC_RMSNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P][LNTUNE_TYPE_##R] =    \
        rmsnorm_##X##_##Y##_##P##_##R,
static const lntune_kernel_fn residual_kernels[2][LNTUNE_TYPE_COUNT][LNTUNE_TYPE_COUNT]
                                              [LNTUNE_TYPE_COUNT][LNTUNE_TYPE_COUNT] = {
                                                  ALL_TUPLES(TABLE_ENTRIES)};

lntune_kernel_fn lntune_builtin_residual_kernel(int op, lntune_types t) {
    const int rt = lntune_types_residual(t);
    if ((op != LNTUNE_DESC_LAYERNORM && op != LNTUNE_DESC_RMSNORM) || t.x >= LNTUNE_TYPE_COUNT ||
        t.y >= LNTUNE_TYPE_COUNT || t.params >= LNTUNE_TYPE_COUNT || rt >= LNTUNE_TYPE_COUNT)
        return NULL;
    return residual_kernels[op][t.x][t.y][t.params][rt];
}
