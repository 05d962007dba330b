/*
 * crossover.h - size crossovers of the built-in kernels, measured on this machine (the tuner
 * stores them: tuning_db.h's crossovers; liblntune follows them: core/builtin_policy.h).
 */
#ifndef LNTUNE_CROSSOVER_H
#define LNTUNE_CROSSOVER_H

#include "generator.h"
#include "hardware.h"
#include "jit.h"
#include "pool.h"

#include <stdint.h>

/*
 * The bytes of x and y a call moves from which the fp32 LayerNorm built-in with non-temporal
 * stores beats the plain one, on threads threads of pool (*bytes). Both are timed interleaved, as
 * the tuner times (timing.h), at 0.5 to 256 MiB moved, doubling, each run as liblntune runs it
 * (its threads: builtin_policy.h); the crossover is the smallest size from which the streaming
 * one wins (3% or more) at every size measured, not a point between that and the last size the
 * plain one won (through the public API, 100x4096 and 128x4096 (3.3 and 4.2 MB) ran 1.5x and
 * 1.25x faster plain, where a midpoint said 2.97 MB), twice the largest when it never wins.
 * *row_alignment: the least alignment of row starts in bytes (4 to 64) from which the streaming
 * one still wins, past that crossover, on rows of every alignment above it (H = 4096 + 8, + 4,
 * + 2, + 1 floats, in that order, at twice the crossover or 64 MiB); 64 where it wins on none
 * or the crossover lies past what is measured.
 * flags: the JIT's extra flags.
 * LNTUNE_EUNSUPPORTED where the CPU has no streaming built-in (runtime/builtin_isa.c); other
 * codes with the reason in err.
 */
int lntune_crossover_streaming(lntune_gen *g, lntune_jit *jit, lntune_pool *pool,
                               const lntune_cpu_info *cpu, const char *const *flags, int64_t *bytes,
                               int64_t *row_alignment, char *err, size_t errlen);

#endif /* LNTUNE_CROSSOVER_H */
