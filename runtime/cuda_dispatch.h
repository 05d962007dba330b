/*
 * cuda_dispatch.h - lntune_layernorm and lntune_rmsnorm on a CUDA device (cuda_dispatch.c).
 */
#ifndef LNTUNE_CUDA_DISPATCH_H
#define LNTUNE_CUDA_DISPATCH_H

#include "context.h"

/*
 * Runs op (LNTUNE_DESC_*) for args already checked by api.c (rows > 0, device CUDA, f32): finds
 * the kernel (the first call of a shape on a device opens the device and loads it, under
 * ctx->lock), then launches it on args->stream. fn names the API function in messages.
 */
int lntune_gpu_run(lntune *ctx, const lntune_args *args, int op, const char *fn);

/* Unloads every module and releases every device of ctx. No call may be running. */
void lntune_gpu_close_all(lntune *ctx);

#endif /* LNTUNE_CUDA_DISPATCH_H */
