/*
 * builtin.h - the kernels liblntune carries for every shape no one tuned.
 */
#ifndef LNTUNE_RUNTIME_BUILTIN_H
#define LNTUNE_RUNTIME_BUILTIN_H

#include "dtypes.h"
#include "lntune_kernel.h"
#include "lntune_kernel_backward.h"

#include <stddef.h>

/* The copies of the CPU built-ins: the generic one, the AVX2 one, the AVX2 forward kernels with
 * non-temporal stores (which serve large calls of the AVX2 level), and the forward kernels at
 * AVX-512's width, plain and non-temporal. */
enum {
    LNTUNE_BUILTIN_GENERIC,
    LNTUNE_BUILTIN_AVX2,
    LNTUNE_BUILTIN_AVX2_NT,
    LNTUNE_BUILTIN_AVX512,
    LNTUNE_BUILTIN_AVX512_NT
};
/* The level this process runs (builtin_isa.c) for residual, backward and beta-only calls:
 * LNTUNE_BUILTIN_GENERIC or _AVX2, decided once. */
int lntune_builtin_level(void);
/* The copy that serves forward calls (fp32 and typed): _AVX512 where the CPU has AVX-512 F/BW/VL
 * and the build carries that copy, else lntune_builtin_level(); with streaming, its
 * non-temporal copy (-1 at the generic level, which has none). */
int lntune_builtin_forward_copy(int streaming);
/* $LNTUNE_BUILTIN_ISA when it is none of "generic", "avx2" and "auto" (so ignored); else NULL. */
const char *lntune_builtin_isa_ignored_setting(void);

/*
 * The generated forward kernel of copy (LNTUNE_BUILTIN_*), op (LNTUNE_DESC_LAYERNORM or _RMSNORM),
 * affine kind (LNTUNE_DESC_GAMMA or _NO_AFFINE) and tuple t, all-fp32 included (builtin.c). NULL
 * for beta without gamma (no template variant), a copy this build lacks, or out of range.
 */
lntune_kernel_fn lntune_builtin_generated(int copy, int op, int affine, lntune_types t);

/*
 * The generated fused Add & Norm kernel of copy, op, affine kind (LNTUNE_DESC_GAMMA or
 * _NO_AFFINE) and fusion (LNTUNE_FUSION_RESIDUAL or _RESIDUAL_OUT) for x, residual, y and
 * gamma/beta all bf16, in the even/odd layout; NULL out of range. The residual built-ins call it
 * for that tuple (builtin_residual_body.h).
 */
lntune_kernel_fn lntune_builtin_fused_bf16_kernel(int copy, int op, int affine, int fusion);

/*
 * The weight offset's built-in (lntune_args.weight_offset, affine=offset) of op for tuple t,
 * unfused, of the forward copy this process runs (with streaming, its non-temporal copy): for
 * the tuples whose x, y and gamma/beta share one type; NULL for the others (and where the copy
 * does not exist), which run the gamma built-in on fp32 offset + gamma (builtin_offset.h).
 */
lntune_kernel_fn lntune_builtin_offset_kernel(int streaming, int op, lntune_types t);

/* The built-in kernel of op for an LNTUNE_DESC_* affine kind; NULL for RMSNorm with beta only. */
lntune_kernel_fn lntune_builtin_kernel(int op, int affine); /* LNTUNE_DESC_* op */

/*
 * The built-in kernel of op (LNTUNE_DESC_*) and affine kind (LNTUNE_DESC_GAMMA, _NO_AFFINE or
 * _BETA_ONLY) for a tuple with fp16 or bf16 in it (builtin_typed.c). NULL for the all-fp32
 * tuple (lntune_builtin_kernel serves it) and for an op or type out of range.
 */
lntune_kernel_fn lntune_builtin_typed_kernel(int op, int affine, lntune_types t);

/*
 * The built-in of op, affine kind (LNTUNE_DESC_GAMMA or _NO_AFFINE) and tuple t (any, all-fp32
 * included) with non-temporal stores and the next row prefetched: for calls whose x and y exceed
 * the cache, where plain stores would read every line of y before writing it. NULL where the
 * level this process runs has none (generic), for beta without gamma and out of range.
 */
lntune_kernel_fn lntune_builtin_streaming_kernel(int op, int affine, lntune_types t);

/*
 * The built-in backward kernel of op (LNTUNE_DESC_LAYERNORM or _RMSNORM), fused (1 for
 * LNTUNE_FUSION_RESIDUAL: dresidual_out given), x/dy/dx type and params type (LNTUNE_TYPE_*),
 * generated at build time (gen/template/builtin.c); NULL for an argument out of range.
 */
lntune_backward_kernel_fn lntune_builtin_backward_kernel(int op, int fused, int x, int params);

/*
 * The built-in kernel of op for a call with a residual (builtin_residual.c), for any tuple t
 * (its residual type included), of the level this process runs; one function serves every
 * affine kind and both fusions (residual_out written when given). NULL for an op or type out of
 * range.
 */
lntune_kernel_fn lntune_builtin_residual_kernel(int op, lntune_types t);
/* The same with non-temporal stores (residual_out and y), for calls whose bytes exceed the cache;
 * NULL where the level this process runs has none (generic) and out of range. */
lntune_kernel_fn lntune_builtin_residual_streaming_kernel(int op, lntune_types t);

/*
 * The CUDA built-ins (generated at build time by tools/emit_builtin.c into
 * lntune_builtin_cuda.c; their parameters are the CUDA templates' presets, see
 * gen/template/builtin.c): per op and affine kind, the first record whose max_h admits H serves an
 * all-fp32 call without a residual; the typed record of the call's fusion (and quantized y, if
 * any) serves every other call, compiled with NVRTC for its element types. Calls with a weight
 * offset (affine LNTUNE_DESC_GAMMA_OFFSET) and calls with a quantized y have typed records only.
 * The backward records (op LNTUNE_DESC_*_BACKWARD, affine LNTUNE_DESC_GAMMA: with or without
 * gamma) are typed pairs: the kernel and its "<symbol>_dgamma" second pass.
 */
typedef struct lntune_builtin_cuda_kernel {
    int op;          /* LNTUNE_DESC_LAYERNORM, _RMSNORM, _LAYERNORM_BACKWARD, _RMSNORM_BACKWARD */
    int affine;      /* LNTUNE_DESC_GAMMA, _NO_AFFINE or _GAMMA_OFFSET */
    long long max_h; /* serves H up to this; 0: any */
    const char *symbol; /* the kernel's name */
    const char *variant;
    const char *source; /* CUDA source, with its launch line */
    const char *ptx;    /* for compute_80; NULL when the build had no NVRTC, or typed */
    int typed;          /* element types from -DLNTUNE_X_T=... (Y, P, R): compiled at first use */
    int fusion;         /* LNTUNE_FUSION_* (typed ones only; the others serve no residual) */
    int y; /* the quantized LNTUNE_TYPE_* the source stores (typed ones); 0: y from LNTUNE_Y_T */
} lntune_builtin_cuda_kernel;

extern const lntune_builtin_cuda_kernel lntune_builtin_cuda[];
extern const size_t lntune_builtin_cuda_count;

#endif /* LNTUNE_RUNTIME_BUILTIN_H */
