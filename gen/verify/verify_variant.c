/*
 * verify_variant.c - `lntune verify` (see verify_variant.h).
 */
#include "verify_variant.h"

#include "build.h"
#include "generator.h"
#include "lntune.h"
#include "pool.h"
#include "problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lntune_verify_variant(const char *op, const char *variant, const lntune_shape *shape,
                          lntune_verify_variant_result *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    lntune_op norm;
    const lntune_direction *dir = NULL;
    if (!op || lntune_op_text_parse(op, &norm, &dir, NULL) != 0) {
        snprintf(err, errlen, "unknown op '%s'", op ? op : "(none)");
        return LNTUNE_EINVAL;
    }
    lntune_gen *g = NULL;
    lntune_source src;
    int rc = lntune_gen_open(NULL, &g);
    if (rc == LNTUNE_OK) rc = lntune_gen_emit(g, "cpu", op, variant, shape, NULL, &src);
    if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "%s", g ? lntune_gen_errmsg(g) : lntune_errstr(rc));
        lntune_gen_close(g);
        return rc;
    }
    lntune_gen_close(g);
    snprintf(r->variant, sizeof r->variant, "%s", src.variant);
    const char *cc = lntune_default_compiler();
    const char *extra[] = {src.cflags[0] ? src.cflags : NULL, NULL};
    const char *text = src.text;
    lntune_library *lib = NULL;
    char *diag = NULL;
    rc = lntune_build_library(cc, extra, &text, 1, 1, &lib, &diag);
    if (rc != LNTUNE_OK) {
        snprintf(err, errlen, "%s failed: %s", cc, diag ? diag : lntune_errstr(rc));
        free(diag);
        lntune_source_free(&src);
        return rc;
    }
    const int64_t *hs = src.fixed_h ? &src.fixed_h : lntune_verify_standard_h;
    const size_t nh = src.fixed_h ? 1 : lntune_verify_standard_h_count;
    const lntune_types types = shape ? shape->types : (lntune_types){0};
    const int fusion = shape ? shape->fusion : 0;
    void *v = NULL;
    lntune_pool *pool = NULL;
    rc = dir->verifier_create(norm, types, fusion, hs, nh, 0, &v);
    if (rc == LNTUNE_OK && src.threads > 1) rc = lntune_pool_create(src.threads, &pool);
    if (rc == LNTUNE_OK)
        rc = dir->check(v, lntune_library_kernel(lib, "lntune_kernel"), &src, src.threads, pool,
                        &r->check);
    if (rc != LNTUNE_OK && rc != LNTUNE_EVERIFY) snprintf(err, errlen, "%s", lntune_errstr(rc));
    lntune_pool_destroy(pool);
    if (v) dir->verifier_destroy(v);
    lntune_library_close(lib);
    lntune_source_free(&src);
    return rc;
}
