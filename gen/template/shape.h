/*
 * shape.h - parses the --shape syntax: "H=4096", "rows=8192,H=4096", "H=768,1024,4096".
 * A bare number continues the list of the key before it; the result is every rows x H pair.
 * And the types and fusion the other options give every shape (--dtype, --residual).
 */
#ifndef LNTUNE_SHAPE_H
#define LNTUNE_SHAPE_H

#include "generator.h"

#include <stddef.h>

#define LNTUNE_SHAPE_MAX_H (INT64_C(1) << 31)
#define LNTUNE_SHAPE_MAX_ELEMENTS (INT64_C(1) << 40) /* rows x H: 4 TiB of fp32 */

/*
 * Appends the shapes text describes to *list (realloc'd; *count updated). On bad text returns
 * LNTUNE_EINVAL (or LNTUNE_EOVERFLOW) with a message in err, and leaves *list as it was.
 */
int lntune_shape_parse(const char *text, lntune_shape **list, size_t *count, char *err,
                       size_t errlen);

/*
 * What --dtype, --residual and --backward make of every shape: *kind (rows and H 0) gets dtype's
 * types (NULL: all fp32) and the fusion (LNTUNE_FUSION_*, fusion.h), which the backward, whose
 * "residual" means dresidual_out given, takes as LNTUNE_FUSION_RESIDUAL for RESIDUAL_OUT. Returns
 * LNTUNE_OK, or LNTUNE_EINVAL with the fault in err: an unknown dtype, a backward whose y type
 * is not x's (dx and dy have x's type), or the backward of a forward without residual_out (no
 * gradient passes back through it: the plain backward serves it).
 */
int lntune_shape_kind(const char *dtype, int fusion, int backward, lntune_shape *kind, char *err,
                      size_t errlen);

#endif /* LNTUNE_SHAPE_H */
