/*
 * common.c - what the command files of app/ share (see app_internal.h).
 */
#include "app_internal.h"

#include "fusion.h"
#include "json_string.h"
#include "lntune.h"
#include "problem.h"
#include "reference.h"
#include "shape.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int app_usage(FILE *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(err, "lntune: ");
    vfprintf(err, fmt, ap);
    fprintf(err, "\nTry 'lntune --help'.\n");
    va_end(ap);
    return LNT_EXIT_USAGE;
}

/* The usage fault of app_shapes_parse: s holds nothing afterwards. */
static int shapes_fault(app_shapes *s, FILE *err, const char *msg) {
    app_shapes_free(s);
    return app_usage(err, "%s", msg);
}

int app_shapes_parse(const lnt_app_options *o, FILE *err, app_shapes *s) {
    memset(s, 0, sizeof *s);
    char msg[1024];
    for (int i = 0; i < o->nshapes; ++i)
        if (lntune_shape_parse(o->shapes[i], &s->shapes, &s->n, msg, sizeof msg) != LNTUNE_OK)
            return shapes_fault(s, err, msg);
    const int fusion = o->residual == LNT_APP_RESIDUAL_OUT     ? LNTUNE_FUSION_RESIDUAL_OUT
                       : o->residual == LNT_APP_RESIDUAL_NOOUT ? LNTUNE_FUSION_RESIDUAL
                                                               : LNTUNE_FUSION_NONE;
    if (lntune_shape_kind(o->dtype, fusion, o->backward, &s->kind, msg, sizeof msg) != LNTUNE_OK)
        return shapes_fault(s, err, msg);
    if (o->weight_offset) {
        if (o->backward)
            return shapes_fault(s, err,
                                "--weight-offset is of the forward ops only (the backward takes "
                                "the summed weights offset + gamma as its gamma)");
        s->kind.affine = LNTUNE_AFFINE_OFFSET;
    }
    s->given = o->dtype || o->residual || o->weight_offset;
    for (size_t i = 0; i < s->n; ++i) {
        s->shapes[i].types = s->kind.types;
        s->shapes[i].fusion = s->kind.fusion;
        s->shapes[i].affine = s->kind.affine;
    }
    return LNT_EXIT_OK;
}

void app_shapes_free(app_shapes *s) {
    free(s->shapes);
    s->shapes = NULL;
    s->n = 0;
}

const lntune_shape *app_the_shape(const app_shapes *s) {
    return s->n ? &s->shapes[0] : s->given ? &s->kind : NULL;
}

int app_check_op_target(const lnt_app_options *o, const app_shapes *s, int need_variant,
                        FILE *err) {
    if (!o->op) return app_usage(err, "%s", "--op is required (layernorm or rmsnorm)");
    if (lntune_op_parse(o->op) < 0)
        return app_usage(err, "unknown op '%s' (expected layernorm or rmsnorm)", o->op);
    if (!o->target) return app_usage(err, "%s", "--target is required (cpu or cuda)");
    if (strcmp(o->target, "cpu") != 0 && strcmp(o->target, "cuda") != 0)
        return app_usage(err, "unknown target '%s' (expected cpu or cuda)", o->target);
    if (need_variant && !o->nvariants) return app_usage(err, "%s", "--variant is required");
    if (s->n > 1) return app_usage(err, "%s", "give one shape");
    return LNT_EXIT_OK;
}

const char *app_op_text(const lnt_app_options *o) {
    return lntune_op_text((lntune_op)lntune_op_parse(o->op), o->backward);
}

int app_db_exit(int rc) {
    return rc == LNTUNE_EDB ? LNT_EXIT_DB : LNT_EXIT_FAIL;
}

int app_gen_exit(int rc) {
    return rc == LNTUNE_EINVAL || rc == LNTUNE_ENOTFOUND ? LNT_EXIT_USAGE : LNT_EXIT_FAIL;
}

void app_json_number(FILE *f, const char *fmt, double v) {
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

void app_json_text(FILE *f, const char *s) {
    if (s)
        lntune_json_string(f, s);
    else
        fputs("null", f);
}

void app_json_field(FILE *f, const char *key, const char *s, int first) {
    fprintf(f, "%s\"%s\": ", first ? "" : ", ", key);
    app_json_text(f, s);
}

const char *app_duration(double s, char *buf, size_t size) {
    const long t = isfinite(s) && s > 0 ? (long)(s + 0.5) : 0;
    if (t < 100)
        snprintf(buf, size, "%ld s", t);
    else if (t < 3600)
        snprintf(buf, size, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf(buf, size, "%ld h %02ld min", t / 3600, t / 60 % 60);
    return buf;
}
