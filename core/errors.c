/*
 * errors.c - the text of every LNTUNE_* return code, and the library version.
 */
#include "lntune.h"

static const char *const messages[] = {
    [LNTUNE_OK] = "ok",
    [LNTUNE_ERROR] = "internal error",
    [LNTUNE_EINVAL] = "invalid argument",
    [LNTUNE_ENOMEM] = "out of memory",
    [LNTUNE_ENOTFOUND] = "not found",
    [LNTUNE_EIO] = "input/output error",
    [LNTUNE_EDB] = "unusable tuning database",
    [LNTUNE_ETEMPLATE] = "template error",
    [LNTUNE_ECOMPILE] = "compilation failed",
    [LNTUNE_EUNSUPPORTED] = "not supported",
    [LNTUNE_EVERIFY] = "kernel gave a wrong result",
    [LNTUNE_ENODEVICE] = "no usable GPU",
    [LNTUNE_EOVERFLOW] = "size out of range",
};

const char *lntune_errstr(int rc) {
    if (rc < 0 || rc >= (int)(sizeof messages / sizeof messages[0]) || !messages[rc])
        return "unknown error code";
    return messages[rc];
}

const char *lntune_version(void) {
    return LNTUNE_VERSION_STRING;
}
