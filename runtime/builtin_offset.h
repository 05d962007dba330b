/*
 * builtin_offset.h - the built-in path of a call with a weight offset (lntune_args.weight_offset,
 * Gemma's y = norm(x) * (offset + gamma)).
 *
 * No built-in kernel is generated for it: the call's fp32 sums offset + gamma (each one fp32
 * addition of gamma widened exactly, what a tuned affine=offset kernel computes) and beta
 * widened to fp32 are formed in a buffer, and the built-in of the same tuple with fp32
 * gamma/beta runs on them. So every type, fusion and quantized y the built-ins serve is served
 * with an offset too, with the same arithmetic as a tuned kernel. The cost is one pass over H
 * elements a call (a few hundred nanoseconds at H = 4096), which only calls of a few rows notice:
 * those a tuned kernel serves after `lntune --weight-offset`.
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
