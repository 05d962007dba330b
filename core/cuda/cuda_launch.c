/*
 * cuda_launch.c - parses the launch line of generated CUDA kernels and applies its rules (see
 * "Launch" in templates/cuda/norm.lua).
 */
#include "cuda_launch.h"

#include "lntune.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char marker[] = "// lntune-cuda-launch:";

int lntune_cuda_launch_parse(const char *source, lntune_cuda_launch *out) {
    if (!source || !out) return LNTUNE_EINVAL;
    memset(out, 0, sizeof *out);
    const char *line = strstr(source, marker);
    if (!line) return LNTUNE_EINVAL;
    int n = sscanf(line + sizeof marker - 1,
                   " block=%d rows_per_block=%d cluster=%d smem=%" SCNd64 " smem_per_h=%" SCNd64
                   " max_h=%" SCNd64,
                   &out->block, &out->rows_per_block, &out->cluster, &out->smem, &out->smem_per_h,
                   &out->max_h);
    if (n != 6 || out->block < 1 || out->block > 1024 || out->rows_per_block < 1 ||
        out->cluster < 1 || out->smem < 0 || out->smem_per_h < 0 || out->max_h < 0)
        return LNTUNE_EINVAL;
    return LNTUNE_OK;
}

int64_t lntune_cuda_launch_grid(const lntune_cuda_launch *l, int64_t rows) {
    /* Kernels stride over rows, so the grid may stop short of one block per row group. */
    const int64_t max_blocks = INT32_MAX / l->cluster;
    int64_t groups = (rows + l->rows_per_block - 1) / l->rows_per_block;
    if (groups > max_blocks) groups = max_blocks;
    return groups * l->cluster;
}

int64_t lntune_cuda_launch_smem(const lntune_cuda_launch *l, int64_t H) {
    /* The slice a block caches: H over the cluster, rounded up to 4 floats. */
    const int64_t per_block = (H + l->cluster - 1) / l->cluster;
    const int64_t slice = (per_block + 3) / 4 * 4;
    return l->smem + l->smem_per_h * slice;
}

static const char backward_marker[] = "// lntune-cuda-backward:";

int lntune_cuda_backward_launch_parse(const char *source, lntune_cuda_backward_launch *out) {
    if (!source || !out) return LNTUNE_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = lntune_cuda_launch_parse(source, &out->main);
    if (rc) return rc;
    const char *line = strstr(source, backward_marker);
    if (!line) return LNTUNE_EINVAL;
    char mode[16];
    int n = sscanf(line + sizeof backward_marker - 1,
                   " dgamma=%15[a-z] max_grid=%" SCNd64 " parts_per_block=%d finish_block=%d", mode,
                   &out->max_grid, &out->parts_per_block, &out->finish_block);
    const int partials = n >= 1 && strcmp(mode, "partials") == 0;
    if (n != 4 || (!partials && strcmp(mode, "atomic") != 0) || out->max_grid < 1 ||
        out->max_grid > INT32_MAX || out->parts_per_block < 1 || out->finish_block < 1 ||
        out->finish_block > 1024 || out->main.cluster != 1)
        return LNTUNE_EINVAL;
    out->partials = partials;
    return LNTUNE_OK;
}

int64_t lntune_cuda_backward_grid(const lntune_cuda_backward_launch *l, int64_t rows) {
    const int64_t grid = lntune_cuda_launch_grid(&l->main, rows);
    return grid < l->max_grid ? grid : l->max_grid;
}

int64_t lntune_cuda_backward_call_grid(const lntune_cuda_backward_launch *l, int64_t rows,
                                       int64_t H) {
    const int64_t grid = lntune_cuda_backward_grid(l, rows);
    if (!l->partials || H < 1) return grid;
    const int64_t most = LNTUNE_CUDA_BACKWARD_WORKSPACE_FLOATS / H / l->parts_per_block;
    return grid <= most ? grid : most > 0 ? most : 1;
}

int64_t lntune_cuda_backward_parts(const lntune_cuda_backward_launch *l, int64_t grid) {
    return l->partials ? grid * l->parts_per_block : 1;
}

int64_t lntune_cuda_backward_finish_grid(const lntune_cuda_backward_launch *l, int64_t H) {
    const int64_t grid = (H + l->finish_block - 1) / l->finish_block;
    return grid < INT32_MAX ? grid : INT32_MAX;
}

int lntune_cuda_backward_launch_pair(lntune_cuda *cu, void *main, void *finish,
                                     const lntune_cuda_backward_launch *l,
                                     const lntune_backward_kernel_args *a, int64_t grid,
                                     const uint64_t ws[2], const uint64_t out[2], void *stream) {
    lntune_backward_kernel_args by_value = *a; /* every parameter is passed by address */
    uint64_t w[2] = {ws[0], ws[1]}, o[2] = {out[0], out[1]};
    int64_t parts = lntune_cuda_backward_parts(l, grid), H = a->H;
    void *main_params[3] = {&by_value, &w[0], &w[1]};
    int rc = lntune_cuda_launch_params(cu, main, grid, l->main.block,
                                       lntune_cuda_launch_smem(&l->main, H), stream, main_params);
    if (rc != LNTUNE_OK || (!w[0] && !w[1])) return rc;
    void *finish_params[6] = {&w[0], &w[1], &parts, &H, &o[0], &o[1]};
    return lntune_cuda_launch_params(cu, finish, lntune_cuda_backward_finish_grid(l, H),
                                     l->finish_block, 0, stream, finish_params);
}
