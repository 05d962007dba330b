/*
 * export_ops.c - the ops `lntune export` knows: one row each. A database row of any other op
 * (a fused or backward op newer than this export) is left out with a warning, never exported as
 * something it is not. Adding an op is adding a row here, plus its built-in variants (builtin.c)
 * for the generic fp32 kernel, whose knob values are its template's "builtin" presets.
 */
#include "export_internal.h"

#include <string.h>

const lntune_export_op lntune_export_ops[] = {
    {"layernorm", 1, 1, 1, "y = (x - mean) * rstd * gamma + beta"},
    {"rmsnorm", 0, 0, 1, "y = x * rstd * gamma"},
};
const size_t lntune_export_op_count = sizeof lntune_export_ops / sizeof lntune_export_ops[0];

int lntune_export_op_find(const char *name) {
    for (size_t i = 0; name && i < lntune_export_op_count; ++i)
        if (strcmp(lntune_export_ops[i].name, name) == 0) return (int)i;
    return -1;
}
