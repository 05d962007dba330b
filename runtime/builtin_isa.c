/*
 * builtin_isa.c - which copy of the CPU built-ins this process runs. liblntune is built for the
 * architecture's baseline (it runs on any x86-64), so its generic built-ins use 4-lane vectors
 * and portable fp16 conversions. On x86-64 it also carries the same kernels compiled for AVX2,
 * FMA and F16C (CMakeLists.txt, gen/template/builtin.c's lntune_builtin_avx2), run where the CPU
 * and the OS have those (core/hardware.c's detection, the one the tuning fingerprint uses), and
 * its forward kernels once more for AVX-512 F/BW/VL, run where the CPU has that too
 * (LNTUNE_BUILTIN_ISA=avx2 keeps the AVX2 copy, =generic the baseline). Decided once per
 * process; a race between first calls decides twice, alike.
 */
#include "builtin.h"
#include "builtin_policy.h"
#include "hardware.h"
#include "lntune.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* What detect() chose: the ISA of the forward built-ins. */
enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512 };
static atomic_int chosen; /* 0: not yet; else ISA_* + 1 */

static int forced(const char *setting, const char *isa) {
    return setting && strcmp(setting, isa) == 0;
}

static int detect(void) {
    const char *setting = getenv("LNTUNE_BUILTIN_ISA");
    if (forced(setting, "generic")) return ISA_GENERIC;
    int isa = ISA_GENERIC;
#ifdef LNTUNE_HAVE_BUILTIN_AVX2
    if (lntune_builtin_avx2_usable(lntune_hw_isa())) isa = ISA_AVX2;
#endif
#ifdef LNTUNE_HAVE_BUILTIN_AVX512
    if (isa == ISA_AVX2 && !forced(setting, "avx2") &&
        lntune_builtin_avx512_usable(lntune_hw_isa()))
        isa = ISA_AVX512;
#endif
    return isa;
}

static int chosen_isa(void) {
    int isa = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (!isa) {
        isa = detect() + 1;
        atomic_store_explicit(&chosen, isa, memory_order_relaxed);
    }
    return isa - 1;
}

int lntune_builtin_level(void) {
    return chosen_isa() == ISA_GENERIC ? LNTUNE_BUILTIN_GENERIC : LNTUNE_BUILTIN_AVX2;
}

int lntune_builtin_forward_copy(int streaming) {
    switch (chosen_isa()) {
    case ISA_AVX512:
        return streaming ? LNTUNE_BUILTIN_AVX512_NT : LNTUNE_BUILTIN_AVX512;
    case ISA_AVX2:
        return streaming ? LNTUNE_BUILTIN_AVX2_NT : LNTUNE_BUILTIN_AVX2;
    default:
        return streaming ? -1 : LNTUNE_BUILTIN_GENERIC;
    }
}

const char *lntune_builtin_isa_ignored_setting(void) {
    const char *setting = getenv("LNTUNE_BUILTIN_ISA");
    return setting && !forced(setting, "generic") && !forced(setting, "avx2") &&
                   !forced(setting, "auto")
               ? setting
               : NULL;
}

const char *lntune_builtin_isa(void) {
    static const char *const names[] = {"generic", "avx2", "avx512"};
    return names[chosen_isa()];
}
