/*
 * cuda_check_backward.h - runs the backward verifier's suite (verify_backward.h) on a CUDA
 * backward kernel pair (templates/cuda/norm_backward.lua: kernel 1 for dx and the dgamma/dbeta
 * workspaces, SYMBOL_dgamma for their sum).
 *
 * As cuda_check.h does for the forward, a checker stands in for a CPU kernel: it copies each
 * case to the device at the same alignment (mod 16 bytes), poisons dx, both workspaces and both
 * outputs with guard zones around them, launches the pair and hands dx, dgamma and dbeta back to
 * the verifier. Beyond the verifier's own checks, each case runs twice: dx must come out bit for
 * bit the same, and so must dgamma and dbeta with dgamma=partials (no atomics); dgamma and dbeta
 * must equal lntune_backward_reduce of the downloaded workspaces (every partial written: the
 * workspace is NaN-poisoned). The whole suite runs at the launch line's grid and again at half
 * of it (fewer blocks than row groups: the kernels' stride loops).
 */
#ifndef LNTUNE_CUDA_CHECK_BACKWARD_H
#define LNTUNE_CUDA_CHECK_BACKWARD_H

#include "cuda_driver.h"
#include "cuda_launch.h"
#include "verify_backward.h"

typedef struct lntune_cuda_backward_checker lntune_cuda_backward_checker;

/* Device buffers for cases of up to max_floats elements per tensor and H up to max_h. */
int lntune_cuda_backward_checker_create(lntune_cuda *cu, int64_t max_floats, int64_t max_h,
                                        lntune_cuda_backward_checker **out);
void lntune_cuda_backward_checker_destroy(lntune_cuda_backward_checker *c); /* NULL: no-op */

/*
 * Verifies the pair (main launched as l->main says, dgamma the SYMBOL_dgamma kernel) with v at
 * fixed_h (0: every H of v). LNTUNE_OK; LNTUNE_EVERIFY with res->message; LNTUNE_ENODEVICE when
 * the device failed (a kernel fault leaves the context unusable: the message says so).
 */
int lntune_cuda_backward_checker_run(lntune_cuda_backward_checker *c, lntune_backward_verifier *v,
                                     void *main, void *dgamma, const lntune_cuda_backward_launch *l,
                                     int64_t fixed_h, lntune_verify_result *res);

#endif /* LNTUNE_CUDA_CHECK_BACKWARD_H */
