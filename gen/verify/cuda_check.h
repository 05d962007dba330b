/*
 * cuda_check.h - runs the verifier's adversarial suite (verify.h) on a CUDA kernel.
 *
 * The verifier calls CPU kernel functions; a checker stands in for one: it copies each case to
 * the device at the same alignment (mod 16 bytes) with poisoned guard zones around y, launches
 * the kernel by its launch line, copies y back and checks that nothing outside y was written.
 * One checker serves one thread at a time (the verifier's function pointer carries no user data,
 * so the running checker is held in a thread-local).
 */
#ifndef LNTUNE_CUDA_CHECK_H
#define LNTUNE_CUDA_CHECK_H

#include "cuda_driver.h"
#include "cuda_launch.h"
#include "verify.h"

typedef struct lntune_cuda_checker lntune_cuda_checker;

/*
 * Device buffers for rows x H cases up to max_floats floats (x or y; twice as many elements of a
 * 16-bit type) and H up to max_h. Element types are the verifier's (lntune_verifier_types).
 */
int lntune_cuda_checker_create(lntune_cuda *cu, int64_t max_floats, int64_t max_h,
                               lntune_cuda_checker **out);
void lntune_cuda_checker_destroy(lntune_cuda_checker *c); /* NULL is a no-op */

/*
 * Verifies function (launched as l says) with v, as lntune_verifier_check does for a CPU kernel.
 * LNTUNE_OK; LNTUNE_EVERIFY with res->message; LNTUNE_ENODEVICE when the device failed (a kernel
 * fault leaves the context unusable: message says so).
 */
int lntune_cuda_checker_run(lntune_cuda_checker *c, lntune_verifier *v, void *function,
                            const lntune_cuda_launch *l, int affine, int64_t fixed_h,
                            lntune_verify_result *res);

/* The device failure of the last run, "" if none. */
const char *lntune_cuda_checker_errmsg(const lntune_cuda_checker *c);

#endif /* LNTUNE_CUDA_CHECK_H */
