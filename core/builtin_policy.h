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

/* The names of the crossovers the tuner measures (gen/tune/crossover.h) and stores per machine
 * and thread count (tuning_db.h), which liblntune follows. */
#define LNTUNE_CROSSOVER_STREAMING_BYTES "streaming_bytes"
#define LNTUNE_CROSSOVER_STREAMING_ROW_ALIGNMENT "streaming_row_alignment"

/* The least alignment of row starts (bytes) on which the built-ins stream:
 * $LNTUNE_STREAMING_ROW_ALIGNMENT when it is a power of two up to 64, else measured (a power of
 * two from 4 to 64), else 64, the alignment of their widest non-temporal stores. *ignored (may
 * be NULL) is the environment's text when it was set but not such a number, else NULL. */
int64_t lntune_builtin_streaming_row_alignment(int64_t measured, const char **ignored);

/*
 * Whether rows of H elements of y_size bytes keep every row's start row_alignment-byte aligned
 * (when the first is; lntune_builtin_streaming_row_alignment), so that the built-ins stream them:
 * on other rows they store plainly. Machines differ: on the Xeon the streaming copy ran 4096x777
 * at 0.70-0.75x of the plain one's speed, on a Zen 4 2048x3001 at 1.4-1.8x.
 */
int lntune_builtin_rows_stream(int64_t H, int64_t y_size, int64_t row_alignment);

/* Whether a CPU with features isa (LNTUNE_ISA_*) runs the AVX2 + FMA + F16C copy of the built-ins
 * (where liblntune carries one: runtime/builtin_isa.c). */
int lntune_builtin_avx2_usable(uint32_t isa);
/* Whether it also runs the AVX-512 F/BW/VL copy of the forward built-ins (where liblntune has
 * one). */
int lntune_builtin_avx512_usable(uint32_t isa);

#endif /* LNTUNE_BUILTIN_POLICY_H */
