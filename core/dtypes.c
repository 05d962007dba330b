/*
 * dtypes.c - names and database text of element-type tuples (dtypes.h).
 */
#include "dtypes.h"

#include <stdio.h>
#include <string.h>

static const char *const type_names[LNTUNE_TYPE_Y_COUNT] = {"f32",   "f16",  "bf16",   "i8",
                                                            "i8row", "e4m3", "e4m3row"};

const char *lntune_type_name(int type) {
    return type >= 0 && type < LNTUNE_TYPE_Y_COUNT ? type_names[type] : "?";
}

int lntune_type_parse(const char *name, size_t len) {
    for (int t = 0; t < LNTUNE_TYPE_Y_COUNT; ++t)
        if (strlen(type_names[t]) == len && memcmp(type_names[t], name, len) == 0) return t;
    return -1;
}

void lntune_types_format(lntune_types t, char *buf, size_t size) {
    if (t.residual)
        snprintf(buf, size, "%s/%s/%s/%s", lntune_type_name(t.x), lntune_type_name(t.y),
                 lntune_type_name(t.params), lntune_type_name(lntune_types_residual(t)));
    else if (t.x == t.y && t.x == t.params)
        snprintf(buf, size, "%s", lntune_type_name(t.x));
    else
        snprintf(buf, size, "%s/%s/%s", lntune_type_name(t.x), lntune_type_name(t.y),
                 lntune_type_name(t.params));
}

int lntune_types_parse(const char *text, lntune_types *out) {
    int parts[4], n = 0;
    if (!text || !out) return -1;
    for (const char *p = text;; ++n) {
        size_t len = strcspn(p, "/");
        if (n == 4 || (parts[n] = lntune_type_parse(p, len)) < 0) return -1;
        if (!p[len]) break;
        p += len + 1;
    }
    ++n;
    /* A quantized type is y's only: not x (nor a lone name for all), gamma/beta or residual. */
    for (int k = 0; k < n; ++k)
        if (k != 1 && lntune_type_quantized(parts[k])) return -1;
    out->x = (uint8_t)parts[0];
    out->y = (uint8_t)(n > 1 ? parts[1] : parts[0]);
    out->params = (uint8_t)(n > 2 ? parts[2] : parts[0]);
    out->residual = 0;
    if (n > 3) lntune_types_set_residual(out, parts[3]);
    return 0;
}
