/*
 * export_isa.c - what lets lntune_kernels.c compile with any flags and still run the tuned
 * kernels as they were measured. The tuner compiles them with -march=native (gen/compile/jit.c);
 * an app compiles the file with its own flags, often none for the ISA, where their vector code
 * would be split into SSE halves (2.8x slower) or fail (-Wpsabi, builtins that need AVX). So
 * every function of the tuned kernels carries target("...") of this machine's ISA, the one its
 * fingerprint records, and the dispatch asks the CPU at run time whether it has all of it; where
 * it has not, or where the file is compiled for another architecture, the generic kernels serve
 * every call.
 */
#include "export_internal.h"

#include "hardware.h"

#include <stdio.h>
#include <string.h>

/*
 * This machine's x86 features as the tuned kernels use them: the name in gcc's and clang's
 * target("..."), the macro -march=native defined (the kernels' #ifs read __AVX2__ and
 * __AVX512BF16__), and the exported test of the CPU. F16C and AVX512-BF16 are read by cpuid,
 * since not every compiler's __builtin_cpu_supports knows them; each is listed after the
 * feature whose OS support it needs (AVX, AVX-512 F), which __builtin_cpu_supports checks.
 * AVX512-FP16 is left out: no template uses it, and gcc before 12 rejects its name.
 */
static const struct {
    uint32_t isa;
    const char *target, *macro, *check;
} x86_features[] = {
    {LNTUNE_ISA_SSE, "sse", "__SSE__", "__builtin_cpu_supports(\"sse\")"},
    {LNTUNE_ISA_SSE2, "sse2", "__SSE2__", "__builtin_cpu_supports(\"sse2\")"},
    {LNTUNE_ISA_SSE4_2, "sse4.2", "__SSE4_2__", "__builtin_cpu_supports(\"sse4.2\")"},
    {LNTUNE_ISA_AVX, "avx", "__AVX__", "__builtin_cpu_supports(\"avx\")"},
    {LNTUNE_ISA_AVX2, "avx2", "__AVX2__", "__builtin_cpu_supports(\"avx2\")"},
    {LNTUNE_ISA_FMA, "fma", "__FMA__", "__builtin_cpu_supports(\"fma\")"},
    {LNTUNE_ISA_F16C, "f16c", "__F16C__", "cpuid_bit(1, 0, 2, 29)"},
    {LNTUNE_ISA_AVX512F, "avx512f", "__AVX512F__", "__builtin_cpu_supports(\"avx512f\")"},
    {LNTUNE_ISA_AVX512BW, "avx512bw", "__AVX512BW__", "__builtin_cpu_supports(\"avx512bw\")"},
    {LNTUNE_ISA_AVX512VL, "avx512vl", "__AVX512VL__", "__builtin_cpu_supports(\"avx512vl\")"},
    {LNTUNE_ISA_AVX512BF16, "avx512bf16", "__AVX512BF16__", "cpuid_bit(7, 1, 0, 5)"},
};
enum { X86_FEATURES = sizeof x86_features / sizeof x86_features[0] };

static int is_x86(const lntune_cpu_info *cpu) {
    const char *a = cpu->arch;
    return strcmp(a, "x86_64") == 0 || strcmp(a, "amd64") == 0 ||
           (a[0] == 'i' && a[1] >= '3' && a[1] <= '6' && strcmp(a + 2, "86") == 0);
}

/* Whether the x86 features carry anything for cpu (its ISA has one of them). */
static int has_targets(const lntune_cpu_info *cpu) {
    for (int i = 0; is_x86(cpu) && i < X86_FEATURES; ++i)
        if (cpu->isa & x86_features[i].isa) return 1;
    return 0;
}

void lntune_export_target_text(const lntune_cpu_info *cpu, char *buf, size_t size) {
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; has_targets(cpu) && i < X86_FEATURES && used < size; ++i)
        if (cpu->isa & x86_features[i].isa) {
            int n =
                snprintf(buf + used, size - used, "%s%s", used ? "," : "", x86_features[i].target);
            if (n < 0) break;
            used += (size_t)n;
        }
}

void lntune_export_put_arch(lntune_export_buf *b, const lntune_cpu_info *cpu) {
    const char *arch = is_x86(cpu) ? "defined(__x86_64__) || defined(__i386__)"
                       : strcmp(cpu->arch, "aarch64") == 0 ? "defined(__aarch64__)"
                                                           : "1";
    lntune_export_put(b,
                      "/* 1 where this file is compiled for the architecture of the machine its "
                      "kernels were tuned\n * on (%s); elsewhere the tuned kernels are left out "
                      "and the generic ones serve every\n * call. */\n"
                      "#if %s\n#define LNTUNE_KERNELS_TUNED_ARCH 1\n%s#else\n"
                      "#define LNTUNE_KERNELS_TUNED_ARCH 0\n#endif\n\n",
                      cpu->arch[0] ? cpu->arch : "unknown", arch,
                      has_targets(cpu) ? "#include <cpuid.h>\n" : "");
}

void lntune_export_put_tuned_begin(lntune_export_buf *b, const lntune_cpu_info *cpu) {
    lntune_export_put(b, "/* ---- the tuned kernels ---- */\n#if LNTUNE_KERNELS_TUNED_ARCH\n");
    if (!has_targets(cpu)) return;
    char target[256];
    lntune_export_target_text(cpu, target, sizeof target);
    lntune_export_put(
        b,
        "/* Compiled for the ISA they were measured with, whatever this file's flags: every "
        "function\n * down to the end of the tuned kernels carries target(\"%s\").\n"
        " * gcc's pragma also defines the ISA's macros (__AVX2__, ...) the kernels' #ifs read, "
        "as\n * -march=native did when they were measured; clang's does not, so they are defined "
        "here\n * for these kernels alone. They run where tuned_usable() finds all of it in the "
        "CPU. */\n"
        "#if defined(__clang__)\n"
        "#pragma clang attribute push(__attribute__((target(\"%s\"))), apply_to = function)\n",
        target, target);
    for (int i = 0; i < X86_FEATURES; ++i)
        if (cpu->isa & x86_features[i].isa)
            lntune_export_put(b, "#pragma push_macro(\"%s\")\n#undef %s\n#define %s 1\n",
                              x86_features[i].macro, x86_features[i].macro, x86_features[i].macro);
    lntune_export_put(b, "#else\n#pragma GCC push_options\n#pragma GCC target(\"%s\")\n#endif\n\n",
                      target);
}

void lntune_export_put_tuned_end(lntune_export_buf *b, const lntune_cpu_info *cpu) {
    if (has_targets(cpu)) {
        lntune_export_put(b, "#if defined(__clang__)\n");
        for (int i = X86_FEATURES - 1; i >= 0; --i)
            if (cpu->isa & x86_features[i].isa)
                lntune_export_put(b, "#pragma pop_macro(\"%s\")\n", x86_features[i].macro);
        lntune_export_put(b,
                          "#pragma clang attribute pop\n#else\n#pragma GCC pop_options\n#endif\n");
    }
    lntune_export_put(b, "#endif /* LNTUNE_KERNELS_TUNED_ARCH */\n\n");
}

void lntune_export_put_tuned_usable(lntune_export_buf *b, const lntune_cpu_info *cpu) {
    lntune_export_put(
        b, "/* Whether the tuned kernels run here: the file is compiled for their architecture "
           "and the CPU\n * has the ISA they were compiled for (decided once; a race between "
           "first calls decides\n * twice, alike). Where not, the generic kernels serve every "
           "call; -DLNTUNE_KERNELS_FORCE_GENERIC\n * takes that path on any CPU (the tuned "
           "kernels are still compiled). */\n"
           "#if LNTUNE_KERNELS_TUNED_ARCH && !defined(LNTUNE_KERNELS_FORCE_GENERIC)\n");
    const int cpuid = has_targets(cpu) && (cpu->isa & (LNTUNE_ISA_F16C | LNTUNE_ISA_AVX512BF16));
    if (cpuid)
        lntune_export_put(b, "/* Whether cpuid leaf, subleaf sets bit of register reg (0 eax, 1 "
                             "ebx, 2 ecx, 3 edx). */\n"
                             "static int cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int "
                             "bit)\n{\n"
                             "    unsigned r[4];\n"
                             "    return __get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], "
                             "&r[3]) && (r[reg] >> bit & 1u);\n"
                             "}\n\n");
    lntune_export_put(b, "static int cpu_has_tuned_isa(void)\n{\n");
    if (has_targets(cpu)) {
        lntune_export_put(b, "    __builtin_cpu_init();\n    return ");
        int n = 0;
        for (int i = 0; i < X86_FEATURES; ++i)
            if (cpu->isa & x86_features[i].isa)
                lntune_export_put(b, "%s%s", n++ ? " &&\n           " : "", x86_features[i].check);
        lntune_export_put(b, ";\n}\n\n");
    } else {
        lntune_export_put(b, "    return 1;\n}\n\n");
    }
    lntune_export_put(b, "static int tuned_usable(void)\n{\n"
                         "    static atomic_int known; /* 0: not yet; 1: no; 2: yes */\n"
                         "    int k = atomic_load_explicit(&known, memory_order_relaxed);\n"
                         "    if (!k) {\n"
                         "        k = cpu_has_tuned_isa() ? 2 : 1;\n"
                         "        atomic_store_explicit(&known, k, memory_order_relaxed);\n"
                         "    }\n"
                         "    return k == 2;\n"
                         "}\n"
                         "#else\n"
                         "static int tuned_usable(void)\n{\n    return 0;\n}\n"
                         "#endif\n\n");
}
