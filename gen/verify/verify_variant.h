/*
 * verify_variant.h - `lntune verify`: one CPU variant emitted, compiled and run on the
 * adversarial suite against the float64 reference (verify.h; the backward's: verify_backward.h).
 */
#ifndef LNTUNE_VERIFY_VARIANT_H
#define LNTUNE_VERIFY_VARIANT_H

#include "shape.h"
#include "verify.h"

typedef struct lntune_verify_variant_result {
    char variant[512];          /* the canonical parameter string verified */
    lntune_verify_result check; /* cases, max error and where; the first failure */
} lntune_verify_variant_result;

/*
 * Verifies variant of op (op text: "layernorm", "rmsnorm_backward") at shape (NULL: run-time H,
 * all fp32, unfused) with the standard H set, or the variant's own H. Returns LNTUNE_OK,
 * LNTUNE_EVERIFY (r->check.message says where), or another code with a message in err:
 * LNTUNE_EINVAL / LNTUNE_ENOTFOUND for a variant or op the templates refuse, others for a
 * compile or memory failure.
 */
int lntune_verify_variant(const char *op, const char *variant, const lntune_shape *shape,
                          lntune_verify_variant_result *r, char *err, size_t errlen);

#endif /* LNTUNE_VERIFY_VARIANT_H */
