/*
 * builtin_isa.c - which copy of the CPU built-ins this process runs. liblntune is built for the
 * architecture's baseline (it runs on any x86-64), so its generic built-ins use 4-lane vectors
 * and portable fp16 conversions. On x86-64 it also carries the same kernels compiled for AVX2,
 * FMA and F16C (CMakeLists.txt, gen/builtin.c's lntune_builtin_avx2), run where the CPU and the
 * OS have those (__builtin_cpu_supports checks both). Decided once per process; a race between
 * first calls decides twice, alike.
 */
#include "builtin.h"
#include "lntune.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int chosen; /* 0: not yet; else LNTUNE_BUILTIN_* + 1 */

static int detect(void) {
    const char *forced = getenv("LNTUNE_BUILTIN_ISA");
    if (forced && strcmp(forced, "generic") == 0) return LNTUNE_BUILTIN_GENERIC;
#if defined(LNTUNE_HAVE_BUILTIN_AVX2) && defined(__x86_64__)
    __builtin_cpu_init(); /* may run before the constructors, from another library's */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        return LNTUNE_BUILTIN_AVX2;
#endif
    return LNTUNE_BUILTIN_GENERIC;
}

int lntune_builtin_level(void) {
    int level = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (!level) {
        level = detect() + 1;
        atomic_store_explicit(&chosen, level, memory_order_relaxed);
    }
    return level - 1;
}

const char *lntune_builtin_isa(void) {
    return lntune_builtin_level() == LNTUNE_BUILTIN_AVX2 ? "avx2" : "generic";
}
