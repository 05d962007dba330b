/*
 * builtin_offset.h - the built-in path of a call with a weight offset (lntune_args.weight_offset,
 * Gemma's y = norm(x) * (offset + gamma)) where no built-in reads the offset.
 *
 * Unfused calls whose x, y and gamma/beta share a float type have built-ins of their own
 * (affine=offset, lntune_builtin_offset_kernel). For the other tuples, fused calls and a
 * quantized y, the call's fp32 sums offset + gamma (each one fp32 addition of gamma widened
 * exactly, what an affine=offset kernel computes) and beta widened to fp32 are formed in a
 * buffer, and the built-in of the same tuple with fp32 gamma/beta runs on them: every type,
 * fusion and quantized y, with the same arithmetic. The cost is one pass over H elements a call
 * and that built-in's speed (untuned 2048x4096 bf16: 1.03 ms against 0.60 ms for the one-type
 * built-in, Xeon, 2 threads).
 */
#ifndef LNTUNE_BUILTIN_OFFSET_H
#define LNTUNE_BUILTIN_OFFSET_H

#include "lntune_kernel.h"

/*
 * Points a->gamma (and a->beta, when given) at fp32 arrays of a->weight_offset + gamma (and
 * beta), gamma and beta read as param_type (LNTUNE_TYPE_*). *buf receives the memory to free()
 * once the kernel has run. Returns 0, or -1 when out of memory (a unchanged).
 */
int lntune_offset_params(lntune_kernel_args *a, int param_type, float **buf);

#endif /* LNTUNE_BUILTIN_OFFSET_H */
