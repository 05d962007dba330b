/*
 * cuda_tuner.h - `lntune --target cuda`: the tuning job on a GPU. The planner of the CPU
 * (tuner.c: search and rigor, re-timing, finalists, tie rule, records; the same contract as on
 * the CPU) drives the CUDA target (cuda_target.c): variants compiled with NVRTC (cubin for the
 * device's exact architecture, plus PTX), run through the adversarial verifier on the device, and
 * timed with CUDA events against a device-to-device copy of the same bytes. Everything goes into
 * the same database as the CPU's, under the GPU's own hardware row. The ops may be the
 * gradients' ("layernorm_backward", "rmsnorm_backward"; shape fusion "residual": dresidual_out
 * given; dtype x or x/x/params): each pair is verified by the backward checker and timed as
 * liblntune runs it.
 */
#ifndef LNTUNE_CUDA_TUNER_H
#define LNTUNE_CUDA_TUNER_H

#include "tuner.h"

/*
 * The row count tuned when a shape gives none: 16384, the batch of tokens the GPU results are
 * quoted at. Inputs are rotated through buffers when x and y together would fit in 4x the L2.
 */
int64_t lntune_tune_cuda_default_rows(int64_t H);

/*
 * Tunes every op x shape of cfg on CUDA device device_index. Returns LNTUNE_ENODEVICE with a
 * message when there is no driver, GPU or NVRTC; otherwise as lntune_tune.
 */
int lntune_tune_cuda(const lntune_tune_config *cfg, int device_index, lntune_tune_result **results,
                     size_t *n, char *err, size_t errlen);

#endif /* LNTUNE_CUDA_TUNER_H */
