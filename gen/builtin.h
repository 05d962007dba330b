/*
 * builtin.h - the generic kernels every lntune build carries: one per op and affine kind, for
 * any H and any row count, from the same templates as the tuned ones. liblntune compiles them in
 * (through the build-only tool tools/emit_builtin.c) and `lntune export` copies them as the
 * fallback of its dispatch table.
 */
#ifndef LNTUNE_GEN_BUILTIN_H
#define LNTUNE_GEN_BUILTIN_H

#include "generator.h"

#include <stddef.h>

typedef struct lntune_builtin_variant {
    const char *op;      /* "layernorm", "rmsnorm" */
    int affine;          /* 1: gamma (beta optional); 0: neither */
    const char *variant; /* the heuristic parameters: portable, no ISA beyond plain C vectors */
} lntune_builtin_variant;

extern const lntune_builtin_variant lntune_builtin_variants[];
extern const size_t lntune_builtin_variant_count;

/* The same for target "cuda", in the same order (op, then affine before plain). */
extern const lntune_builtin_variant lntune_builtin_cuda_variants[];
extern const size_t lntune_builtin_cuda_variant_count;

/* The kernel name of variant i under prefix: "<prefix>_<op>_affine" or "<prefix>_<op>_plain". */
void lntune_builtin_symbol(const char *prefix, size_t i, char *buf, size_t size);

/*
 * Generates every built-in variant into one translation unit (malloc'd *text), each kernel named
 * by lntune_builtin_symbol(prefix, i). On failure *text is NULL and lntune_gen_errmsg says why.
 */
int lntune_builtin_emit(lntune_gen *g, const char *prefix, char **text);

#endif /* LNTUNE_GEN_BUILTIN_H */
