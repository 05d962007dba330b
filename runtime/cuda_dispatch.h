/*
 * cuda_dispatch.h - lntune_layernorm and lntune_rmsnorm on a CUDA device (cuda_dispatch.c).
 */
#ifndef LNTUNE_CUDA_DISPATCH_H
#define LNTUNE_CUDA_DISPATCH_H

#include "context.h"
#include "dtypes.h"
#include "lntune_kernel_backward.h"

/*
 * Runs op (LNTUNE_DESC_*) for args already checked by api.c (rows > 0, device CUDA), with its
 * resolved element types, fusion (fusion.h) and kernel args ka (device addresses, strides and
 * eps resolved): finds the kernel (the first call of a shape on a device opens the device and
 * loads it, under ctx->lock), then launches it on args->stream. fn names the API function in
 * messages. An untuned shape of fp16/bf16 data or a residual gets the typed built-in, compiled
 * with NVRTC for its element types at first use (LNTUNE_ENODEVICE where NVRTC cannot be loaded).
 */
int lntune_gpu_run(lntune *ctx, const lntune_args *args, int op, lntune_types types, int fusion,
                   const lntune_kernel_args *ka, const char *fn);

/*
 * The registry entry serving args (checked by api.c, rows > 0 and H > 0, device CUDA) on its
 * device, after the refusals of a CUDA call (no such device_index, beta without gamma,
 * residual_out == residual): the entry lntune_gpu_run launches, resolved on the shape's first
 * call (the device opened, the kernel loaded). lntune_query asks it.
 */
int lntune_gpu_entry(lntune *ctx, const lntune_args *args, int op, lntune_types types, int fusion,
                     const char *fn, const lntune_entry **e);

/*
 * The backward of op (LNTUNE_DESC_LAYERNORM or _RMSNORM) on a CUDA device, for args checked by
 * api_backward.c (rows > 0): types packs x (x, dy, dx) and params, fusion is
 * LNTUNE_FUSION_RESIDUAL when dresidual_out is given, kb the kernel args (device addresses,
 * strides and eps resolved). Runs the built-in backward pair on args->stream (see
 * cuda_dispatch.c), its dgamma/dbeta workspace allocated and freed on that stream.
 */
int lntune_gpu_run_backward(lntune *ctx, const lntune_backward_args *args, int op,
                            lntune_types types, int fusion, const lntune_backward_kernel_args *kb,
                            const char *fn);

/* Unloads every module and releases every device of ctx. No call may be running. */
void lntune_gpu_close_all(lntune *ctx);

#endif /* LNTUNE_CUDA_DISPATCH_H */
