/*
 * builtin_residual_body.h - the body of the residual built-ins (y = Norm(x + residual),
 * optionally residual_out = x + residual), for every type tuple, for shapes no one tuned.
 * Included once by each copy: builtin_residual.c (generic x86-64 or any other architecture) and
 * builtin_residual_avx2.c (compiled for AVX2 + FMA + F16C: the AVX2 copy and the one with
 * non-temporal stores), as the generated built-ins come in those copies (builtin.h).
 *
 * A block of rows at a time: s = x + residual is formed in fp32 (each widened exactly, one fp32
 * addition) into a buffer, rounded once into residual_out if given, and the buffer is normalized
 * by the generated built-in of the same copy for an fp32 x and the call's y and gamma/beta
 * types. So the numerics are exactly those of the unfused built-ins applied to s. The buffer
 * stays in L1; memory is read and written once, as the tuned kernels do. The all-bf16 tuple
 * (with gamma and beta, or neither) has generated fused kernels instead (gen/template/builtin.c).
 *
 * The including file defines RESIDUAL_VECTOR where it is compiled for AVX2 + F16C (then the sum
 * and residual_out loops are vector code), and expands RESIDUAL_COPY once per copy. The kernel
 * ABI carries no types, so each (op, x, y, params, residual) tuple is its own small function
 * around one inlined body.
 */
#include "builtin.h"

#include "dtypes.h"
#include "fusion.h"
#include "registry.h"
#include "typed_kernel.h"

#include <stdint.h>
#include <stdlib.h>

#ifdef RESIDUAL_VECTOR
#include "typed_vector.h"
#endif

/* Rows are summed into a buffer of up to BLOCK_FLOATS (16 KiB: in L1 while the inner kernel
 * reads it twice) and normalized a block at a time; a row longer than that is a block of its
 * own, in one malloc per call. */
enum { BLOCK_FLOATS = 4096 };
/* Returned when the row buffer cannot be allocated (the runtime reports "returned 2"). */
enum { BUILTIN_ENOMEM = 2 };

/* [op: LNTUNE_DESC_LAYERNORM, _RMSNORM][x][y][params][residual: LNTUNE_TYPE_*] */
typedef lntune_kernel_fn lntune_builtin_residual_table[2][LNTUNE_TYPE_COUNT][LNTUNE_TYPE_COUNT]
                                                      [LNTUNE_TYPE_COUNT][LNTUNE_TYPE_COUNT];
extern const lntune_builtin_residual_table lntune_builtin_residual_generic;
extern const lntune_builtin_residual_table lntune_builtin_residual_avx2;
extern const lntune_builtin_residual_table lntune_builtin_residual_avx2_nt;

#define RESIDUAL_INLINE static inline __attribute__((always_inline))

RESIDUAL_INLINE const void *row_of(const void *base, int64_t r, int64_t stride, int type) {
    return (const unsigned char *)base + (size_t)(r * stride) * lntune_type_size(type);
}

/* The unfused built-in of copy that normalizes an fp32 row into y's and gamma/beta's types. Beta
 * without gamma has no generated kernel: the level's own serves it in every copy. */
static lntune_kernel_fn inner_kernel(const lntune_kernel_args *a, int copy, int op, int yt,
                                     int pt) {
    const lntune_types t = {LNTUNE_TYPE_F32, (uint8_t)yt, (uint8_t)pt, 0};
    if (!a->gamma && a->beta)
        return lntune_types_all_f32(t) ? lntune_builtin_kernel(op, LNTUNE_DESC_BETA_ONLY)
                                       : lntune_builtin_typed_kernel(op, LNTUNE_DESC_BETA_ONLY, t);
    return lntune_builtin_generated(copy, op, a->gamma ? LNTUNE_DESC_GAMMA : LNTUNE_DESC_NO_AFFINE,
                                    t);
}

/* Element i of sum_row, in scalar code. */
RESIDUAL_INLINE void sum_element(int xt, int rt, const void *x, const void *res, float *s,
                                 void *out, int64_t i) {
    s[i] = typed_load(xt, x, i) + typed_load(rt, res, i);
    if (out) typed_store(rt, out, i, s[i]);
}

/* s = x + residual in fp32; out (optional) = s rounded to rt; nt: out stored non-temporally. */
RESIDUAL_INLINE void sum_row(int xt, int rt, const void *x, const void *res, float *s, void *out,
                             int64_t H, int nt) {
    int64_t i = 0;
#ifdef RESIDUAL_VECTOR
    /* Non-temporal stores need aligned addresses: scalars until out is aligned. */
    const uintptr_t align = rt == TYPED_F32 ? 31 : 15;
    if (out && nt)
        for (; i < H && (((uintptr_t)out + i * typed_size(rt)) & align) != 0; ++i)
            sum_element(xt, rt, x, res, s, out, i);
    for (; i + 8 <= H; i += 8) {
        const __m256 v = _mm256_add_ps(typed_load8(xt, (const char *)x + i * typed_size(xt)),
                                       typed_load8(rt, (const char *)res + i * typed_size(rt)));
        _mm256_storeu_ps(s + i, v);
        if (out) typed_store8(rt, (char *)out + i * typed_size(rt), v, nt);
    }
#else
    (void)nt;
#endif
    for (; i < H; ++i) sum_element(xt, rt, x, res, s, out, i);
}

RESIDUAL_INLINE int residual_norm(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end,
                                  int copy, int op, int xt, int yt, int pt, int rt) {
    if (!a->residual) return LNTUNE_KERNEL_EUNSUPPORTED;
    /* All bf16, with gamma or neither: the generated fused kernel, which never leaves the even/odd
     * layout (the path below narrows y and residual_out with lane shuffles). */
    if (xt == LNTUNE_TYPE_BF16 && yt == xt && pt == xt && rt == xt && (a->gamma || !a->beta)) {
        const lntune_kernel_fn fused = lntune_builtin_fused_bf16_kernel(
            copy, op, a->gamma ? LNTUNE_DESC_GAMMA : LNTUNE_DESC_NO_AFFINE,
            a->residual_out ? LNTUNE_FUSION_RESIDUAL_OUT : LNTUNE_FUSION_RESIDUAL);
        if (fused) return fused(a, row_begin, row_end);
    }
    const int64_t H = a->H;
    const lntune_kernel_fn inner = inner_kernel(a, copy, op, yt, pt);
    if (!inner) return LNTUNE_KERNEL_EUNSUPPORTED;
    /* Short rows share one inner call (its setup, and in the non-temporal copy its closing
     * fence) a block; a row of BLOCK_FLOATS or more is a block of its own. */
    int64_t block = H < BLOCK_FLOATS ? BLOCK_FLOATS / H : 1;
    if (block > row_end - row_begin) block = row_end - row_begin;
    float stack[BLOCK_FLOATS] __attribute__((aligned(64)));
    float *s = block * H <= BLOCK_FLOATS ? stack : malloc((size_t)(block * H) * sizeof *s);
    if (!s) return BUILTIN_ENOMEM;
    lntune_kernel_args rows = *a;
    rows.x_stride = H;
    rows.residual = rows.residual_out = NULL;
    rows.x = s;
    int rc = LNTUNE_KERNEL_OK;
    for (int64_t r0 = row_begin; r0 < row_end && rc == LNTUNE_KERNEL_OK; r0 += block) {
        const int64_t n = row_end - r0 < block ? row_end - r0 : block;
        for (int64_t j = 0; j < n; ++j) {
            const int64_t r = r0 + j;
            void *out = a->residual_out
                            ? (void *)row_of(a->residual_out, r, a->residual_out_stride, rt)
                            : NULL;
            sum_row(xt, rt, row_of(a->x, r, a->x_stride, xt),
                    row_of(a->residual, r, a->residual_stride, rt), s + j * H, out, H,
                    copy == LNTUNE_BUILTIN_AVX2_NT);
        }
        rows.rows = n;
        rows.y = (void *)row_of(a->y, r0, a->y_stride, yt);
        rows.mean = a->mean ? a->mean + r0 : NULL;
        rows.rstd = a->rstd ? a->rstd + r0 : NULL;
        rc = inner(&rows, 0, n);
    }
#ifdef RESIDUAL_VECTOR
    if (copy == LNTUNE_BUILTIN_AVX2_NT) _mm_sfence(); /* residual_out's stores, as the inner's */
#endif
    if (s != stack) free(s);
    return rc;
}

/* Every (x, y, params, residual) tuple: four levels, each its own macro (a macro does not
 * expand inside itself). */
#define T4(M, C, X, Y, P) M(C, X, Y, P, F32) M(C, X, Y, P, F16) M(C, X, Y, P, BF16)
#define T3(M, C, X, Y) T4(M, C, X, Y, F32) T4(M, C, X, Y, F16) T4(M, C, X, Y, BF16)
#define T2(M, C, X) T3(M, C, X, F32) T3(M, C, X, F16) T3(M, C, X, BF16)
#define ALL_TUPLES(M, C) T2(M, C, F32) T2(M, C, F16) T2(M, C, BF16)

#define DEFINE_KERNELS(C, X, Y, P, R)                                                              \
    static int C##_layernorm_##X##_##Y##_##P##_##R(const lntune_kernel_args *a, int64_t b,         \
                                                   int64_t e) {                                    \
        return residual_norm(a, b, e, LNTUNE_BUILTIN_##C, LNTUNE_DESC_LAYERNORM, LNTUNE_TYPE_##X,  \
                             LNTUNE_TYPE_##Y, LNTUNE_TYPE_##P, LNTUNE_TYPE_##R);                   \
    }                                                                                              \
    static int C##_rmsnorm_##X##_##Y##_##P##_##R(const lntune_kernel_args *a, int64_t b,           \
                                                 int64_t e) {                                      \
        return residual_norm(a, b, e, LNTUNE_BUILTIN_##C, LNTUNE_DESC_RMSNORM, LNTUNE_TYPE_##X,    \
                             LNTUNE_TYPE_##Y, LNTUNE_TYPE_##P, LNTUNE_TYPE_##R);                   \
    }

#define TABLE_ENTRIES(C, X, Y, P, R)                                                               \
    [LNTUNE_DESC_LAYERNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P][LNTUNE_TYPE_##R] =  \
        C##_layernorm_##X##_##Y##_##P##_##R,                                                       \
    [LNTUNE_DESC_RMSNORM][LNTUNE_TYPE_##X][LNTUNE_TYPE_##Y][LNTUNE_TYPE_##P][LNTUNE_TYPE_##R] =    \
        C##_rmsnorm_##X##_##Y##_##P##_##R,

/* The kernels of copy C (GENERIC, AVX2, AVX2_NT) and their table, named NAME. */
#define RESIDUAL_COPY(C, NAME)                                                                     \
    ALL_TUPLES(DEFINE_KERNELS, C)                                                                  \
    const lntune_builtin_residual_table NAME = {ALL_TUPLES(TABLE_ENTRIES, C)};
