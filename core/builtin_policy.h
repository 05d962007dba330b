/*
 * builtin_policy.h - how liblntune runs a built-in CPU kernel for a call: on how many threads,
 * and whether with non-temporal stores. One rule for the runtime (runtime/api.c,
 * runtime/api_backward.c) and the tuner, which times the built-in as liblntune would run it
 * untuned, beside the tuned finalists (gen/tune/cpu_target.c).
 */
#ifndef LNTUNE_BUILTIN_POLICY_H
#define LNTUNE_BUILTIN_POLICY_H

#include "hardware.h"

#include <stdint.h>

/* Threads for a built-in call over rows x H: every allowed one (max_threads) from 2^18 elements
 * and two rows, else one (a pool wake-up costs more than a small call). */
int lntune_builtin_threads(int64_t rows, int64_t H, int max_threads);

/*
 * The environment variable name as a positive integer, else 0; *invalid (may be NULL) is its
 * text when it was set but is not one (LNTUNE_NUM_THREADS, LNTUNE_STREAMING_BYTES), else NULL.
 */
long long lntune_env_positive(const char *name, const char **invalid);

/*
 * The bytes of x and y (and residuals) a call moves from which the built-in stores y
 * non-temporally: $LNTUNE_STREAMING_BYTES when it is a positive integer, else measured (the
 * crossover the tuner measured on this machine and stored: tuning_db.h) when positive, else the
 * last-level cache, which y would leave before anyone reads it. *ignored (may be NULL) is the
 * environment's text when it was set but not a positive integer, else NULL.
 */
int64_t lntune_builtin_streaming_bytes(const lntune_cpu_info *cpu, int64_t measured,
                                       const char **ignored);

/* Whether a built-in call of elements elements, bytes_per_element bytes each (x + y +
 * residuals), streams at streaming_bytes (above). */
int lntune_builtin_streams(int64_t elements, int64_t bytes_per_element, int64_t streaming_bytes);

/* Whether rows of H elements of y_size bytes keep every row's start 64-byte aligned (when the
 * first is), as the built-ins' widest non-temporal stores need: on other rows they store plainly,
 * and their streaming copy ran 4096x777 and 4096x1000 at 0.80-0.84x the plain one's speed. */
int lntune_builtin_rows_stream(int64_t H, int64_t y_size);

/* Whether a CPU with features isa (LNTUNE_ISA_*) runs the AVX2 + FMA + F16C copy of the built-ins
 * (where liblntune carries one: runtime/builtin_isa.c). */
int lntune_builtin_avx2_usable(uint32_t isa);
/* Whether it also runs the AVX-512 F/BW/VL copy of the forward built-ins (where liblntune has
 * one). */
int lntune_builtin_avx512_usable(uint32_t isa);

#endif /* LNTUNE_BUILTIN_POLICY_H */
