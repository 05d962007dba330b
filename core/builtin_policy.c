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

int lntune_builtin_rows_stream(int64_t H, int64_t y_size) {
    return (H * y_size) % 64 == 0;
}
