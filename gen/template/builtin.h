/*
 * builtin.h - the generic kernels every lntune build carries: one per op and affine kind, for
 * any H and any row count, from the same templates as the tuned ones. liblntune compiles them in
 * (through the build-only tool tools/emit_builtin.c) and `lntune export` copies them as the
 * fallback of its dispatch table. Their knob values are the templates' presets
 * (lntune_gen_preset): "builtin" and its levels' in templates/cpu/, "builtin" and
 * "builtin_warp" in templates/cuda/.
 */
#ifndef LNTUNE_GEN_BUILTIN_H
#define LNTUNE_GEN_BUILTIN_H

#include "generator.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lntune_builtin_variant {
    const char *op; /* "layernorm", "rmsnorm" */
    int affine;     /* 1: gamma (beta optional); 0: neither (the preset's call) */
} lntune_builtin_variant;

extern const lntune_builtin_variant lntune_builtin_variants[];
extern const size_t lntune_builtin_variant_count;

/* The same for target "cuda", in the same order (op, then affine before plain). */
extern const lntune_builtin_variant lntune_builtin_cuda_variants[];
extern const size_t lntune_builtin_cuda_variant_count;

/* The kernel name of variant i under prefix: "<prefix>_<op>_affine" or "<prefix>_<op>_plain". */
void lntune_builtin_symbol(const char *prefix, size_t i, char *buf, size_t size);

/*
 * An instruction set the CPU built-ins are generated for. liblntune carries the generic copy, and
 * on x86-64 an AVX2 copy too (compiled with -mavx2 -mfma -mf16c), and runs the best one the CPU
 * has (runtime/builtin_isa.c). The variants are the CPU templates' preset of the level, for each
 * call's op, affine kind, types and fusion.
 */
typedef struct lntune_builtin_level {
    const char *name;   /* "generic", "avx2", "avx512" */
    const char *preset; /* "builtin", "builtin_avx2", "builtin_avx2_streaming" */
    uint32_t isa;       /* LNTUNE_ISA_* features the code may use; 0: the build host's */
} lntune_builtin_level;

extern const lntune_builtin_level lntune_builtin_generic; /* what lntune export copies */
extern const lntune_builtin_level lntune_builtin_avx2;
/* The AVX2 forward kernels once more with non-temporal stores and the next row prefetched, for
 * calls whose data exceed the cache (the runtime's choice, runtime/api.c). */
extern const lntune_builtin_level lntune_builtin_avx2_streaming;
/* The forward kernels (fp32 and typed, plain and streaming) once more for AVX-512 F/BW/VL, which
 * the runtime runs where the CPU has it; residual and backward calls keep the AVX2 copy. */
extern const lntune_builtin_level lntune_builtin_avx512;
extern const lntune_builtin_level lntune_builtin_avx512_streaming;

/*
 * The variant (malloc'd *variant) the tuner times as the built-in of op for shape at level, as
 * liblntune runs it on threads threads (core/builtin_policy.h): the level's preset, with its
 * launch knob threads set, on the generator's host as set.
 */
int lntune_builtin_run_variant(lntune_gen *g, const lntune_builtin_level *level, const char *op,
                               const lntune_shape *shape, int threads, char **variant);

/*
 * The level liblntune runs (runtime/builtin_isa.c) on a CPU with features isa (LNTUNE_ISA_*), for
 * a forward call without a residual (forward_unfused) or another one, with or without
 * non-temporal stores: AVX-512 for the former where this build carries that copy, else AVX2,
 * else generic (which has no streaming copy: liblntune runs its plain one, returned then).
 */
const lntune_builtin_level *lntune_builtin_level_for(uint32_t isa, int forward_unfused,
                                                     int streaming);

/* The canonical variant (malloc'd *variant) of built-in i of lntune_builtin_variants at level for
 * all-fp32 calls, as lntune_builtin_emit generates it. */
int lntune_builtin_variant_string(lntune_gen *g, const lntune_builtin_level *level, size_t i,
                                  char **variant);

/*
 * Generates every built-in variant at level into one translation unit (malloc'd *text), each
 * kernel named by lntune_builtin_symbol(prefix, i). On failure *text is NULL and
 * lntune_gen_errmsg says why.
 */
int lntune_builtin_emit(lntune_gen *g, const lntune_builtin_level *level, const char *prefix,
                        char **text);

/*
 * Generates the forward built-ins of every tuple but all-fp32 (lntune_builtin_emit's), each
 * variant of lntune_builtin_variants for each (x, y, gamma/beta) type, into one translation unit
 * (malloc'd *text), named "<prefix>_<op>_<affine|plain>_<x>_<y>_<params>", followed by the table
 * `const lntune_kernel_fn <prefix>_typed[2][2][3][3][3]` indexed [op: 0 LayerNorm, 1 RMSNorm]
 * [affine: 0 plain, 1 gamma][x][y][params] (LNTUNE_TYPE_*; NULL for all-fp32).
 */
int lntune_builtin_emit_typed(lntune_gen *g, const lntune_builtin_level *level, const char *prefix,
                              char **text);
/* One of them: variant i of lntune_builtin_variants for tuple t (not all fp32), and its name. */
int lntune_builtin_emit_typed_one(lntune_gen *g, const lntune_builtin_level *level, size_t i,
                                  lntune_types t, const char *symbol, lntune_source *src);
void lntune_builtin_typed_symbol(const char *prefix, size_t i, lntune_types t, char *buf,
                                 size_t size);

/*
 * Generates the fused Add & Norm built-ins of the all-bf16 tuple (x, residual, y, gamma/beta), each
 * variant of lntune_builtin_variants (the level's preset for that tuple and fusion) for fusion
 * residual and residual_out, into one translation unit (malloc'd *text), named
 * "<prefix>_<op>_<affine|plain>_bf16_<fusion>", followed by the table `const lntune_kernel_fn
 * <prefix>_fused_bf16[2][2][2]` indexed [op][affine: 0 plain, 1 gamma][0 residual, 1 residual_out].
 */
int lntune_builtin_emit_fused_bf16(lntune_gen *g, const lntune_builtin_level *level,
                                   const char *prefix, char **text);

/*
 * The weight offset's built-ins (affine=offset: y = norm(x) * (offset + gamma)) of the tuples
 * whose x, y and gamma/beta share one type, unfused: "<prefix>_<op>_offset_<type>", followed by
 * the table `const lntune_kernel_fn <prefix>_offset[2][3]` indexed [op][type]. (Other tuples
 * run the gamma built-in of fp32 gamma/beta on offset + gamma: runtime/builtin_offset.h.)
 */
int lntune_builtin_emit_offset(lntune_gen *g, const lntune_builtin_level *level, const char *prefix,
                               char **text);

/*
 * Generates the built-in backward kernels of every (op, fusion, x/dy/dx type, params type) into
 * one translation unit (malloc'd *text), named "<prefix>_<op>[_residual]_<x>_<params>", followed
 * by the table `const lntune_backward_kernel_fn <prefix>_backward[2][2][3][3]` indexed [op][fused:
 * 0, or 1 for dresidual_out given][x type][params type] (LNTUNE_DESC_* op, LNTUNE_TYPE_* types).
 */
int lntune_builtin_emit_backward(lntune_gen *g, const lntune_builtin_level *level,
                                 const char *prefix, char **text);

/*
 * liblntune's CUDA built-ins for short rows: per op and affine kind, served for H <= max_h; the
 * generic lntune_builtin_cuda_variants serve every other H.
 */
typedef struct lntune_builtin_cuda_variant {
    const char *op;
    int affine;
    int64_t max_h;
    const char *name;   /* "warp": the symbol's suffix */
    const char *preset; /* the CUDA templates' preset: "builtin_warp" */
} lntune_builtin_cuda_variant;

extern const lntune_builtin_cuda_variant lntune_builtin_cuda_short_variants[];
extern const size_t lntune_builtin_cuda_short_variant_count;

typedef struct lntune_nvrtc lntune_nvrtc;

/* The CUDA built-in i of lntune_builtin_cuda_variants for all-fp32 unfused calls. */
int lntune_builtin_emit_cuda_generic(lntune_gen *g, size_t i, const char *symbol,
                                     lntune_source *src);

/*
 * The typed CUDA built-in of a forward call with fp16/bf16 data, a residual (fusion,
 * LNTUNE_FUSION_*), a weight offset or a quantized y: the preset "builtin" of op ("layernorm" or
 * "rmsnorm") for affine LNTUNE_AFFINE_NONE, _GAMMA or _OFFSET (Gemma's gamma + weight_offset),
 * its element types left to macros (lntune_shape.generic_types), set for a call's types by
 * lntune_cuda_type_options (core/cuda_types.h) or by #defines before the source (lntune
 * export). y: LNTUNE_TYPE_F32 for a y left to its macro like the other tensors, or a quantized
 * type (LNTUNE_TYPE_I8 ... _E4M3_ROW), which the source is generated for: its code and its
 * scale (per row: one more pass) shape the kernel. Named by the symbol function
 * "<prefix>_cuda_<op>_<plain|affine|offset>_<typed|code type>[_<fusion>]".
 */
int lntune_builtin_emit_cuda_kind(lntune_gen *g, const char *op, int affine, int y, int fusion,
                                  const char *symbol, lntune_source *src);
/* "plain", "affine" or "offset": an affine kind (LNTUNE_AFFINE_*) in the CUDA built-ins' names
 * (and lntune export's generic kernels'). */
const char *lntune_builtin_affine_name(int affine);
void lntune_builtin_cuda_kind_symbol(const char *prefix, const char *op, int affine, int y,
                                     int fusion, char *symbol, size_t size);

/*
 * The CUDA built-in backward: variant i of lntune_builtin_cuda_backward_variants (op
 * "layernorm_backward" or "rmsnorm_backward") for fusion LNTUNE_FUSION_NONE or _RESIDUAL
 * (dresidual_out given), types x_t (x, dy, dx, dresidual_out) and p_t (gamma, dgamma, dbeta)
 * left to macros as above; the pair's second kernel is "<symbol>_dgamma". Named
 * "<prefix>_cuda_<op>_typed[_residual]" by the symbol function.
 */
extern const lntune_builtin_variant lntune_builtin_cuda_backward_variants[];
extern const size_t lntune_builtin_cuda_backward_variant_count;
int lntune_builtin_emit_cuda_backward(lntune_gen *g, size_t i, int fusion, const char *symbol,
                                      lntune_source *src);
void lntune_builtin_cuda_backward_symbol(const char *prefix, size_t i, int fusion, char *symbol,
                                         size_t size);

/*
 * Generates the C file liblntune compiles for its CUDA built-ins: a table of
 * lntune_builtin_cuda_kernel records (runtime/builtin.h) with each variant's CUDA source and, when
 * nv is not NULL, its PTX for compute_80 (the driver JITs it for any sm_80+ GPU): the fp32 ones
 * (short rows first), the typed ones of lntune_builtin_emit_cuda_kind (every op, affine kind,
 * y and fusion), then the backward pairs. A compile failure is an error (LNTUNE_ECOMPILE, the log
 * in lntune_gen_errmsg is not set: *message receives it).
 */
int lntune_builtin_emit_cuda(lntune_gen *g, const lntune_nvrtc *nv, const char *prefix, char **text,
                             char **message);

#endif /* LNTUNE_GEN_BUILTIN_H */
