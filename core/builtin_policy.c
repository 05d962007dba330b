/*
 * builtin_policy.c - see builtin_policy.h.
 */
#include "builtin_policy.h"

#include <stdlib.h>

#define PARALLEL_ELEMENTS (INT64_C(1) << 18)

int lntune_builtin_threads(int64_t rows, int64_t H, int max_threads) {
    return rows > 1 && rows * H >= PARALLEL_ELEMENTS && max_threads > 1 ? max_threads : 1;
}

long long lntune_env_positive(const char *name, const char **invalid) {
    const char *env = getenv(name);
    char *end = NULL;
    const long long set = env ? strtoll(env, &end, 10) : 0;
    const int valid = env && *env && end && !*end && set > 0;
    if (invalid) *invalid = env && !valid ? env : NULL;
    return valid ? set : 0;
}

int64_t lntune_builtin_streaming_bytes(const lntune_cpu_info *cpu, int64_t measured,
                                       const char **ignored) {
    const long long set = lntune_env_positive("LNTUNE_STREAMING_BYTES", ignored);
    if (set) return set;
    return measured > 0 ? measured : lntune_cpu_last_level_cache(cpu);
}

int lntune_builtin_streams(int64_t elements, int64_t bytes_per_element, int64_t streaming_bytes) {
    return bytes_per_element > 0 && elements >= streaming_bytes / bytes_per_element;
}

int lntune_builtin_avx2_usable(uint32_t isa) {
    const uint32_t avx2 = LNTUNE_ISA_AVX2 | LNTUNE_ISA_FMA | LNTUNE_ISA_F16C;
    return (isa & avx2) == avx2;
}

int lntune_builtin_avx512_usable(uint32_t isa) {
    const uint32_t avx512 = LNTUNE_ISA_AVX512F | LNTUNE_ISA_AVX512BW | LNTUNE_ISA_AVX512VL;
    return lntune_builtin_avx2_usable(isa) && (isa & avx512) == avx512;
}

/* a when it is a power of two from least to 64, else 0. */
static int64_t alignment_or_zero(long long a, int64_t least) {
    for (int64_t p = least; p <= 64; p *= 2)
        if (a == p) return p;
    return 0;
}

int64_t lntune_builtin_streaming_row_alignment(int64_t measured, const char **ignored) {
    const long long set = lntune_env_positive("LNTUNE_STREAMING_ROW_ALIGNMENT", ignored);
    if (set && alignment_or_zero(set, 1)) return set;
    if (set && ignored) *ignored = getenv("LNTUNE_STREAMING_ROW_ALIGNMENT");
    return alignment_or_zero(measured, 4) ? measured : 64;
}

int lntune_builtin_rows_stream(int64_t H, int64_t y_size, int64_t row_alignment) {
    return row_alignment > 0 && (H * y_size) % row_alignment == 0;
}
