/*
 * builtin_isa.c - which copy of the CPU built-ins this process runs. liblntune is built for the
 * architecture's baseline (it runs on any x86-64), so its generic built-ins use 4-lane vectors
 * and portable fp16 conversions. On x86-64 it also carries the same kernels compiled for AVX2,
 * FMA and F16C (CMakeLists.txt, gen/template/builtin.c's lntune_builtin_avx2), run where the CPU
 * and the OS have those (core/hardware.c's detection, the one the tuning fingerprint uses). Decided
 * once per process; a race between first calls decides twice, alike.
 */
#include "builtin.h"
#include "builtin_policy.h"
#include "hardware.h"
#include "lntune.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int chosen; /* 0: not yet; else LNTUNE_BUILTIN_* + 1 */

static int forced_generic(const char *setting) {
    return setting && strcmp(setting, "generic") == 0;
}

static int detect(void) {
    if (forced_generic(getenv("LNTUNE_BUILTIN_ISA"))) return LNTUNE_BUILTIN_GENERIC;
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    if (lntune_builtin_avx2_usable(lntune_hw_isa())) return LNTUNE_BUILTIN_AVX2;
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

const char *lntune_builtin_isa_ignored_setting(void) {
    const char *setting = getenv("LNTUNE_BUILTIN_ISA");
    return setting && !forced_generic(setting) && strcmp(setting, "auto") != 0 ? setting : NULL;
}

const char *lntune_builtin_isa(void) {
    return lntune_builtin_level() == LNTUNE_BUILTIN_AVX2 ? "avx2" : "generic";
}
