/*
 * problem.h - what a kernel is verified and timed on, for either direction. The forward and the
 * backward differ only in what this file holds, as a table of per-direction functions
 * (lntune_direction): the buffers and kernel arguments, the verifier, and the bytes one call
 * moves (with the memory copy of as many bytes). The tuner's search, sandbox, timing and
 * storage, and `lntune verify` / `lntune time`, are one code path for both.
 *
 * Op texts (templates and the tuning database): "layernorm", "rmsnorm" (forward),
 * "layernorm_backward", "rmsnorm_backward" (backward: lntune_kernel_backward.h).
 */
#ifndef LNTUNE_PROBLEM_H
#define LNTUNE_PROBLEM_H

#include "dtypes.h"
#include "generator.h"
#include "lntune_kernel.h"
#include "pool.h"
#include "reference.h"
#include "sandbox.h"
#include "timing.h"
#include "verify.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lntune_direction lntune_direction;

/*
 * One op x shape x types, with its data. Forward: args is the kernels' call, x and y in fp32-sized
 * buffers. Backward: call is the kernels' call; args only names the two buffers that hold its
 * large tensors (x: x then dy, y: dx), which the sandbox's worker copies (sandbox.h).
 */
typedef struct lntune_problem {
    const lntune_direction *dir;
    lntune_op op;
    const char *op_text;
    lntune_types types; /* backward: y is x's type (dx and dy are) */
    int fusion; /* LNTUNE_FUSION_* (fusion.h); backward: none or RESIDUAL (dresidual_out given) */
    int64_t rows, H;
    double bytes; /* moved by one call: x + y (+ residual, residual_out), or x + dy (+ dres) + dx */
    lntune_kernel_args args;      /* see above */
    lntune_kernel_args copy_args; /* the copy of the same bytes, on the same buffers */
    lntune_backward_call call;    /* backward only */
    void *mem[8];                 /* what init allocated */
} lntune_problem;

struct lntune_direction {
    const char *name;   /* "forward", "backward" */
    const char *suffix; /* of the op text: "", "_backward" */
    /* Allocates and fills p's buffers (p->op, types, rows, H set), for up to max_threads. */
    int (*init)(lntune_problem *p, int max_threads);
    /* The adversarial suite for op in types at each of hs (verify.h, verify_backward.h). */
    int (*verifier_create)(lntune_op op, lntune_types types, int fusion, const int64_t *hs,
                           size_t nh, uint64_t seed, void **out);
    void (*verifier_destroy)(void *v);
    /* fn (loaded as lntune_kernel_fn, of this direction's ABI) verified in process. */
    int (*check)(void *v, lntune_kernel_fn fn, const lntune_source *src, int threads,
                 lntune_pool *pool, lntune_verify_result *res);
    /* c[k].fn verified in the sandbox's worker. */
    void (*sandbox_verify)(void *v, lntune_sandbox_check *c, size_t n, lntune_pool *pool,
                           lntune_sandbox_outcome *out);
    /* A timed candidate of fn on p. */
    lntune_timed (*candidate)(const lntune_problem *p, lntune_kernel_fn fn, int threads);
};

/*
 * The op and direction of an op text, with the text's static copy in *canonical (may be NULL).
 * Returns 0, or -1 for an unknown text.
 */
int lntune_op_text_parse(const char *text, lntune_op *op, const lntune_direction **dir,
                         const char **canonical);

/* The op text of op in direction backward (0 or 1): "rmsnorm_backward". */
const char *lntune_op_text(lntune_op op, int backward);

/* The direction's name ("forward", "backward") of an op text with any fusion suffix (fusion.h,
 * "layernorm_backward+residual"), as the tuning database keys it; "?" for a text not known. */
const char *lntune_op_direction(const char *op_key);

/*
 * Fills p for op_text at rows x H in types and fusion, with data that is the same every run. A
 * backward op's types must have y equal to x, and its fusion be none or LNTUNE_FUSION_RESIDUAL
 * (dresidual_out given; LNTUNE_EINVAL otherwise). max_threads sizes the backward partials. Free
 * with lntune_problem_free.
 */
int lntune_problem_init(lntune_problem *p, const char *op_text, lntune_types types, int fusion,
                        int64_t rows, int64_t H, int max_threads);
void lntune_problem_free(lntune_problem *p); /* NULL is a no-op */

/* The verifier of p's direction at H = 1, 17 and p's H. */
int lntune_problem_verifier(const lntune_problem *p, void **out);

/*
 * The memory copy that moves the bytes of a (rows of x read, y written and, with a residual,
 * residual read and residual_out written, in types): the same rows and x and y buffers,
 * H x lntune_fusion_bytes_per_element (fusion.h) / 8 floats a row (rounded up), no gamma, beta or
 * residual. x and y must each hold that many floats a row. Used by the tuner and `lntune time` as
 * the bandwidth baseline.
 */
lntune_kernel_args lntune_tune_copy_args(const lntune_kernel_args *a, lntune_types types,
                                         int fusion);

#endif /* LNTUNE_PROBLEM_H */
