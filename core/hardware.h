/*
 * hardware.h - what this machine is: the CPU fingerprint that keys every tuning record, and the
 * ISA features the templates choose from. Used by gen/ (templates, tuner) and runtime/ (lookup).
 */
#ifndef LNTUNE_HARDWARE_H
#define LNTUNE_HARDWARE_H

#include <stdint.h>

/* ISA features, in the order of lntune_hw_feature_names. */
enum {
    LNTUNE_ISA_SSE = 1u << 0,
    LNTUNE_ISA_SSE2 = 1u << 1,
    LNTUNE_ISA_SSE4_2 = 1u << 2,
    LNTUNE_ISA_AVX = 1u << 3,
    LNTUNE_ISA_AVX2 = 1u << 4,
    LNTUNE_ISA_FMA = 1u << 5,
    LNTUNE_ISA_F16C = 1u << 6,
    LNTUNE_ISA_AVX512F = 1u << 7,
    LNTUNE_ISA_AVX512BW = 1u << 8,
    LNTUNE_ISA_AVX512VL = 1u << 9,
    LNTUNE_ISA_AVX512BF16 = 1u << 10,
    LNTUNE_ISA_AVX512FP16 = 1u << 11,
    LNTUNE_ISA_NEON = 1u << 12,
    LNTUNE_ISA_COUNT = 13
};

typedef struct lntune_cpu_info {
    char arch[16];   /* "x86_64", "aarch64", ... */
    char model[128]; /* e.g. "Intel(R) Xeon(R) Processor @ 2.80GHz" */
    int family, model_id, stepping;
    uint32_t isa; /* LNTUNE_ISA_* bits */
    int cores;    /* online logical CPUs */
    int64_t l1d_bytes, l2_bytes, l3_bytes;
    char fingerprint[17]; /* 16 hex digits: a hash of every field above */
} lntune_cpu_info;

/* Fills info for this machine. Never fails: unknown fields stay 0 or empty. */
void lntune_cpu_info_get(lntune_cpu_info *info);
/* The last-level cache in bytes (L3, else L2; 32 MiB where neither is known): the size past which
 * a kernel's output leaves the cache before anyone reads it. */
int64_t lntune_cpu_last_level_cache(const lntune_cpu_info *info);
/* The CPUs this process may run on (its affinity mask: taskset, a container's cpuset), at most
 * info->cores; info->cores where the mask cannot be read. The threads a call may use: more
 * would share cores (info->cores stays every online CPU: it keys the fingerprint). */
int lntune_cpu_usable_threads(const lntune_cpu_info *info);
/* The LNTUNE_ISA_* features of this CPU (the OS's support of AVX state included): info->isa. */
uint32_t lntune_hw_isa(void);

/*
 * A CUDA device, as the tuning database keys it. The fingerprint hashes name, compute
 * capability, multiprocessors, L2 and memory bus: two cards of one model share their tunings,
 * whatever their driver. Filled by the caller (from the driver), then lntune_gpu_info_finish.
 */
typedef struct lntune_gpu_info {
    char name[256]; /* "NVIDIA H200" */
    int sm;         /* compute capability, 10 * major + minor: 90 */
    int multiprocessors;
    int64_t l2_bytes;
    int bus_width_bits;
    int driver_version; /* 13000 for 13.0; recorded, not hashed */
    char fingerprint[17];
} lntune_gpu_info;

/* Computes g->fingerprint from the other fields. */
void lntune_gpu_info_finish(lntune_gpu_info *g);

/* The name of ISA bit i ("avx512f"), or NULL past the last. */
const char *lntune_hw_feature_name(int i);

/* Writes the features as "avx,avx2,..." into buf (always terminated). */
void lntune_hw_features_string(uint32_t isa, char *buf, int size);

/* 64-bit FNV-1a of len bytes, continuing from h (start with LNTUNE_FNV_INIT). */
#define LNTUNE_FNV_INIT 0xcbf29ce484222325ULL
uint64_t lntune_fnv1a(uint64_t h, const void *data, uint64_t len);

#endif /* LNTUNE_HARDWARE_H */
