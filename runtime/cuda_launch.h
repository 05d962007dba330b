/*
 * cuda_launch.h - how to launch a generated CUDA kernel: the grid, block and dynamic shared
 * memory, read from the "lntune-cuda-launch:" line that templates/cuda/norm.lua writes from its
 * properties (lntune_source carries only the CPU's properties so far).
 */
#ifndef LNTUNE_CUDA_LAUNCH_H
#define LNTUNE_CUDA_LAUNCH_H

#include <stdint.h>

typedef struct lntune_cuda_launch {
    int block;          /* threads per block */
    int rows_per_block; /* rows one block (one cluster, with clusters) serves per step */
    int cluster;        /* blocks per cluster (1: none) */
    int64_t smem;       /* dynamic shared memory bytes, plus... */
    int64_t smem_per_h; /* ...this many per float of the row slice a block caches */
    int64_t max_h;      /* the largest H the variant serves; 0: any */
} lntune_cuda_launch;

/* Reads the launch line of a generated source; LNTUNE_EINVAL if absent or malformed. */
int lntune_cuda_launch_parse(const char *source, lntune_cuda_launch *out);

/* Blocks (a multiple of the cluster size) and dynamic shared memory bytes for rows x H. */
int64_t lntune_cuda_launch_grid(const lntune_cuda_launch *l, int64_t rows);
int64_t lntune_cuda_launch_smem(const lntune_cuda_launch *l, int64_t H);

#endif /* LNTUNE_CUDA_LAUNCH_H */
