/*
 * hardware.c - the CPU fingerprint: model, family/model/stepping, ISA features, core count and
 * cache sizes, hashed into the 16-hex-digit key of every tuning record.
 */
#define _GNU_SOURCE
#include "hardware.h"

#include <sched.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static const char *const feature_names[LNTUNE_ISA_COUNT] = {
    "sse",     "sse2",     "sse4_2",   "avx",        "avx2",       "fma", "f16c",
    "avx512f", "avx512bw", "avx512vl", "avx512bf16", "avx512fp16", "neon"};

const char *lntune_hw_feature_name(int i) {
    return i >= 0 && i < LNTUNE_ISA_COUNT ? feature_names[i] : NULL;
}

void lntune_hw_features_string(uint32_t isa, char *buf, int size) {
    int used = 0;
    if (size <= 0) return;
    buf[0] = '\0';
    for (int i = 0; i < LNTUNE_ISA_COUNT && used < size; ++i) {
        if (!(isa & (1u << i))) continue;
        int n =
            snprintf(buf + used, (size_t)(size - used), "%s%s", used ? "," : "", feature_names[i]);
        if (n < 0) break;
        used += n;
    }
}

uint64_t lntune_fnv1a(uint64_t h, const void *data, uint64_t len) {
    const unsigned char *p = data;
    for (uint64_t i = 0; i < len; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

uint32_t lntune_hw_isa(void) {
    uint32_t isa = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse")) isa |= LNTUNE_ISA_SSE;
    if (__builtin_cpu_supports("sse2")) isa |= LNTUNE_ISA_SSE2;
    if (__builtin_cpu_supports("sse4.2")) isa |= LNTUNE_ISA_SSE4_2;
    if (__builtin_cpu_supports("avx")) isa |= LNTUNE_ISA_AVX;
    if (__builtin_cpu_supports("avx2")) isa |= LNTUNE_ISA_AVX2;
    if (__builtin_cpu_supports("fma")) isa |= LNTUNE_ISA_FMA;
    if (__builtin_cpu_supports("avx512f")) isa |= LNTUNE_ISA_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) isa |= LNTUNE_ISA_AVX512BW;
    if (__builtin_cpu_supports("avx512vl")) isa |= LNTUNE_ISA_AVX512VL;
    /* F16C, AVX512-BF16 and AVX512-FP16 are not in every compiler's __builtin_cpu_supports. */
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29))) isa |= LNTUNE_ISA_F16C;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) isa |= LNTUNE_ISA_AVX512BF16;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23))) isa |= LNTUNE_ISA_AVX512FP16;
#elif defined(__aarch64__)
    isa |= LNTUNE_ISA_NEON;
#endif
    return isa;
}

static void read_model_name(char *out, size_t size) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Model", 5) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        for (++v; *v == ' ' || *v == '\t'; ++v) {
        }
        snprintf(out, size, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    fclose(f);
}

/* Cache size of a level from sysfs (the portable source in containers), in bytes. */
static int64_t cache_bytes(int level, int data) {
    for (int index = 0; index < 8; ++index) {
        char path[128], buf[64];
        int lvl = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fscanf(f, "%d", &lvl) != 1) lvl = 0;
        fclose(f);
        if (lvl != level) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
        if (!(f = fopen(path, "r"))) continue;
        if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
        fclose(f);
        if (data && strncmp(buf, "Instruction", 11) == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if (!(f = fopen(path, "r"))) continue;
        long long n = 0;
        char unit = 0;
        int got = fscanf(f, "%lld%c", &n, &unit);
        fclose(f);
        if (got < 1) continue;
        return unit == 'K' ? n * 1024 : unit == 'M' ? n * 1024 * 1024 : n;
    }
    return 0;
}

int lntune_cpu_usable_threads(const lntune_cpu_info *info) {
    const int cores = info && info->cores > 0 ? info->cores : 1;
#ifdef __linux__
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        const int n = CPU_COUNT(&allowed);
        if (n > 0 && n < cores) return n;
    }
#endif
    return cores;
}

int64_t lntune_cpu_last_level_cache(const lntune_cpu_info *info) {
    return info->l3_bytes > 0   ? info->l3_bytes
           : info->l2_bytes > 0 ? info->l2_bytes
                                : INT64_C(32) << 20;
}

void lntune_cpu_info_get(lntune_cpu_info *info) {
    memset(info, 0, sizeof *info);
#if defined(__x86_64__)
    snprintf(info->arch, sizeof info->arch, "x86_64");
#elif defined(__aarch64__)
    snprintf(info->arch, sizeof info->arch, "aarch64");
#else
    snprintf(info->arch, sizeof info->arch, "unknown");
#endif
    read_model_name(info->model, sizeof info->model);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        int base_family = (a >> 8) & 0xf, ext_family = (a >> 20) & 0xff;
        int base_model = (a >> 4) & 0xf, ext_model = (a >> 16) & 0xf;
        info->family = base_family == 0xf ? base_family + ext_family : base_family;
        info->model_id =
            base_family == 0x6 || base_family == 0xf ? (ext_model << 4) | base_model : base_model;
        info->stepping = a & 0xf;
    }
#endif
    info->isa = lntune_hw_isa();
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    info->cores = n > 0 ? (int)n : 1;
    info->l1d_bytes = cache_bytes(1, 1);
    info->l2_bytes = cache_bytes(2, 1);
    info->l3_bytes = cache_bytes(3, 1);

    char text[512];
    int len =
        snprintf(text, sizeof text, "%s|%s|%d|%d|%d|%u|%d|%lld|%lld|%lld", info->arch, info->model,
                 info->family, info->model_id, info->stepping, info->isa, info->cores,
                 (long long)info->l1d_bytes, (long long)info->l2_bytes, (long long)info->l3_bytes);
    uint64_t h = lntune_fnv1a(LNTUNE_FNV_INIT, text, (uint64_t)(len > 0 ? len : 0));
    snprintf(info->fingerprint, sizeof info->fingerprint, "%016llx", (unsigned long long)h);
}

void lntune_gpu_info_finish(lntune_gpu_info *g) {
    char text[512];
    int len =
        snprintf(text, sizeof text, "cuda|%.*s|%d|%d|%lld|%d", (int)sizeof g->name - 1, g->name,
                 g->sm, g->multiprocessors, (long long)g->l2_bytes, g->bus_width_bits);
    if (len >= (int)sizeof text) len = (int)sizeof text - 1;
    uint64_t h = lntune_fnv1a(LNTUNE_FNV_INIT, text, (uint64_t)(len > 0 ? len : 0));
    snprintf(g->fingerprint, sizeof g->fingerprint, "%016llx", (unsigned long long)h);
}
