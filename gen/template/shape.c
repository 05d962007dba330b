/*
 * shape.c - the --shape parser. Strict: digits only, each key once, no empty items, bounds
 * checked before any multiplication can overflow.
 */
#include "shape.h"

#include "dtypes.h"
#include "fusion.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_VALUES = 64 };

static int parse_number(const char *s, size_t len, int64_t max, int64_t *out) {
    int64_t v = 0;
    if (len == 0) return LNTUNE_EINVAL;
    for (size_t i = 0; i < len; ++i) {
        if (s[i] < '0' || s[i] > '9') return LNTUNE_EINVAL;
        if (v > (max - (s[i] - '0')) / 10) return LNTUNE_EOVERFLOW;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return LNTUNE_OK;
}

int lntune_shape_parse(const char *text, lntune_shape **list, size_t *count, char *err,
                       size_t errlen) {
    int64_t hs[MAX_VALUES], rows[MAX_VALUES];
    size_t nh = 0, nrows = 0;
    int64_t *current = NULL;
    size_t *ncurrent = NULL;
    int64_t max = 0;
    if (!text || !list || !count) {
        snprintf(err, errlen, "no shape given");
        return LNTUNE_EINVAL;
    }
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        const char *num = p;
        size_t numlen = len;
        if (eq) {
            size_t keylen = (size_t)(eq - p);
            if (keylen == 1 && p[0] == 'H') {
                current = hs, ncurrent = &nh, max = LNTUNE_SHAPE_MAX_H;
            } else if (keylen == 4 && memcmp(p, "rows", 4) == 0) {
                current = rows, ncurrent = &nrows, max = LNTUNE_SHAPE_MAX_ELEMENTS;
            } else {
                snprintf(err, errlen, "shape '%s': unknown key '%.*s' (expected H or rows)", text,
                         (int)keylen, p);
                return LNTUNE_EINVAL;
            }
            if (*ncurrent) {
                snprintf(err, errlen, "shape '%s': '%.*s' given twice", text, (int)keylen, p);
                return LNTUNE_EINVAL;
            }
            num = eq + 1;
            numlen = len - keylen - 1;
        } else if (!current) {
            snprintf(err, errlen, "shape '%s': expected H=N or rows=N", text);
            return LNTUNE_EINVAL;
        }
        int64_t v;
        int rc = parse_number(num, numlen, max, &v);
        if (rc == LNTUNE_OK && v == 0) rc = LNTUNE_EINVAL;
        if (rc != LNTUNE_OK) {
            snprintf(err, errlen, "shape '%s': '%.*s' is not %s", text, (int)numlen, num,
                     rc == LNTUNE_EOVERFLOW ? "in range" : "a positive whole number");
            return rc;
        }
        if (*ncurrent == MAX_VALUES) {
            snprintf(err, errlen, "shape '%s': more than %d values", text, MAX_VALUES);
            return LNTUNE_EINVAL;
        }
        current[(*ncurrent)++] = v;
        if (p[len] == '\0') break;
        p += len + 1;
    }
    if (nh == 0) {
        snprintf(err, errlen, "shape '%s': H is required", text);
        return LNTUNE_EINVAL;
    }
    if (nrows == 0) rows[nrows++] = 0; /* the tuner's default row count */
    for (size_t i = 0; i < nrows; ++i)
        for (size_t j = 0; j < nh; ++j)
            if (rows[i] > LNTUNE_SHAPE_MAX_ELEMENTS / hs[j]) {
                snprintf(err, errlen, "shape '%s': rows x H = %lld x %lld is too large", text,
                         (long long)rows[i], (long long)hs[j]);
                return LNTUNE_EOVERFLOW;
            }
    lntune_shape *grown = realloc(*list, (*count + nrows * nh) * sizeof **list);
    if (!grown) {
        snprintf(err, errlen, "out of memory");
        return LNTUNE_ENOMEM;
    }
    *list = grown;
    for (size_t i = 0; i < nrows; ++i)
        for (size_t j = 0; j < nh; ++j)
            grown[(*count)++] =
                (lntune_shape){.rows = rows[i], .H = hs[j], .affine = LNTUNE_AFFINE_ANY};
    return LNTUNE_OK;
}

int lntune_shape_kind(const char *dtype, int fusion, int backward, lntune_shape *kind, char *err,
                      size_t errlen) {
    memset(kind, 0, sizeof *kind);
    if (dtype && lntune_types_parse(dtype, &kind->types) != 0) {
        snprintf(err, errlen,
                 "unknown dtype '%s' (expected f32, f16 or bf16 for every tensor, or x/y/params "
                 "types such as bf16/bf16/f32)",
                 dtype);
        return LNTUNE_EINVAL;
    }
    /* The fusions and the direction combine with every dtype but these. */
    if (backward && kind->types.y != kind->types.x) {
        snprintf(err, errlen,
                 "--backward with dtype '%s': dx and dy have x's type, so give one type (bf16) "
                 "or x/x/params (bf16/bf16/f32)",
                 dtype);
        return LNTUNE_EINVAL;
    }
    /* The backward of the fused Add & Norm adds the gradient arriving at residual_out to dx;
     * without residual_out there is none, and the plain backward's dx is dresidual already. */
    if (backward && fusion == LNTUNE_FUSION_RESIDUAL) {
        snprintf(err, errlen,
                 "--backward with --residual=noout: a forward without residual_out passes no "
                 "gradient back through it, so the plain backward (no --residual) serves it; its "
                 "dx is also dresidual");
        return LNTUNE_EINVAL;
    }
    /* fusion.h's backward "residual": dresidual_out given */
    kind->fusion =
        backward && fusion == LNTUNE_FUSION_RESIDUAL_OUT ? LNTUNE_FUSION_RESIDUAL : fusion;
    return LNTUNE_OK;
}
