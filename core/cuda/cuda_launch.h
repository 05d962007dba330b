/*
 * cuda_launch.h - how to launch a generated CUDA kernel: the grid, block and dynamic shared
 * memory, read from the "lntune-cuda-launch:" line that templates/cuda/norm.lua writes from its
 * properties (lntune_source carries only the CPU's properties so far).
 */
#ifndef LNTUNE_CUDA_LAUNCH_H
#define LNTUNE_CUDA_LAUNCH_H

#include "cuda_driver.h"
#include "lntune_kernel_backward.h"

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

/*
 * A backward kernel pair (templates/cuda/norm_backward.lua, "Launch" and "Kernel ABI" there):
 * kernel 1 (dx, dgamma/dbeta terms into fp32 workspaces) launched by its forward-style line,
 * kernel 2 (SYMBOL_dgamma: the workspaces summed and converted) by the "lntune-cuda-backward:"
 * line. The runtime launches its built-in backward by them (cuda_dispatch.c).
 */
typedef struct lntune_cuda_backward_launch {
    lntune_cuda_launch main; /* kernel 1 */
    int partials;            /* 1: a workspace row per row group; 0: atomics into one row */
    int64_t max_grid;        /* kernel 1's blocks at most */
    int parts_per_block;     /* partials: workspace rows per block of kernel 1 */
    int finish_block;        /* kernel 2's threads per block */
} lntune_cuda_backward_launch;

/* Reads both launch lines of a backward source; LNTUNE_EINVAL if either is absent or malformed. */
int lntune_cuda_backward_launch_parse(const char *source, lntune_cuda_backward_launch *out);

/* Kernel 1's blocks for rows: one per row group, at most max_grid. */
int64_t lntune_cuda_backward_grid(const lntune_cuda_backward_launch *l, int64_t rows);

/* The partials a call of the runtime (and the tuner, which times what it will run) keeps per
 * gradient at most: kernel 1 runs fewer blocks (the kernels stride over the rows) so that
 * parts x H stays under it. */
#define LNTUNE_CUDA_BACKWARD_WORKSPACE_FLOATS (INT64_C(1) << 21)

/* The grid a call of rows x H runs: lntune_cuda_backward_grid, capped for the workspace by rows
 * and H only, so that a call gives the same bits every time. */
int64_t lntune_cuda_backward_call_grid(const lntune_cuda_backward_launch *l, int64_t rows,
                                       int64_t H);

/* Workspace rows of H floats per gradient for a kernel 1 of grid blocks (kernel 2's parts):
 * grid x parts_per_block with partials (every float written by kernel 1), else 1 (zeroed by the
 * host before kernel 1). */
int64_t lntune_cuda_backward_parts(const lntune_cuda_backward_launch *l, int64_t grid);

/* Kernel 2's blocks for H columns. */
int64_t lntune_cuda_backward_finish_grid(const lntune_cuda_backward_launch *l, int64_t H);

/*
 * Launches a backward pair on stream (the ABI of templates/cuda/norm_backward.lua): kernel 1
 * (main) on grid blocks with args a (device addresses) and the workspaces ws[0] (dgamma) and
 * ws[1] (dbeta), 0 for a gradient not wanted, of lntune_cuda_backward_parts(l, grid) rows; then,
 * when either is wanted, kernel 2 (finish) summing them into out[0] / out[1]. The caller zeroes
 * the workspaces of an atomic pair first. LNTUNE_OK, or the driver's code (lntune_cuda_errmsg).
 */
int lntune_cuda_backward_launch_pair(lntune_cuda *cu, void *main, void *finish,
                                     const lntune_cuda_backward_launch *l,
                                     const lntune_backward_kernel_args *a, int64_t grid,
                                     const uint64_t ws[2], const uint64_t out[2], void *stream);

#endif /* LNTUNE_CUDA_LAUNCH_H */
