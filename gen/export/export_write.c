/*
 * export_write.c - what every part of `lntune export` writes with: the growing text buffer, the
 * files, the warnings, the rows-bucket ranges, the template hash a winner was measured with, the
 * headers embedded at build time, and the #if levels of the generic kernels.
 */
#include "export_internal.h"

#include "cuda_types.h"
#include "embedded.h"
#include "dtypes.h"
#include "lntune.h"
#include "tuning_db.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lntune_export_put(lntune_export_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->oom) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The range of row counts in the bucket of rows: lntune_rows_bucket is monotone. */
void lntune_export_bucket_range(int64_t rows, int64_t *lo, int64_t *hi) {
    int b = lntune_rows_bucket(rows);
    int64_t a = 1, z = rows; /* lowest row count in the bucket, by bisection */
    while (a < z) {
        int64_t m = a + (z - a) / 2;
        if (lntune_rows_bucket(m) == b)
            z = m;
        else
            a = m + 1;
    }
    *lo = a;
    a = rows, z = INT64_C(1) << 62; /* highest */
    if (lntune_rows_bucket(z) == b) {
        *hi = INT64_MAX;
        return;
    }
    while (a + 1 < z) {
        int64_t m = a + (z - a) / 2;
        if (lntune_rows_bucket(m) == b)
            a = m;
        else
            z = m;
    }
    *hi = a;
}

typedef struct {
    const char *variant;
    char *hash;
    size_t size;
} hash_find;

static int find_hash(void *ud, const lntune_measurement *m) {
    hash_find *f = ud;
    if (m->variant && strcmp(m->variant, f->variant) == 0 && m->template_hash)
        snprintf(f->hash, f->size, "%s", m->template_hash);
    return 0;
}

void lntune_export_measured_hash(lntune_db *db, const lntune_db_key *key, const char *variant,
                                 char hash[17]) {
    hash[0] = '\0';
    hash_find f = {variant, hash, 17};
    lntune_db_each_measurement(db, key, NULL, find_hash, &f);
}

int lntune_export_write_file(const char *dir, const char *name, const lntune_export_buf *b,
                             char *msg, size_t msglen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b->s, 1, b->len, f) == b->len;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) snprintf(msg, msglen, "cannot write %.900s", path);
    return ok ? LNTUNE_OK : LNTUNE_EIO;
}

void lntune_export_warn(const lntune_export_config *c, const char *fmt, ...) {
    if (!c->warnings) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(c->warnings, "lntune export: warning: ");
    vfprintf(c->warnings, fmt, ap);
    fprintf(c->warnings, "\n");
    va_end(ap);
}

const char *lntune_export_embedded(const char *name) {
    const embedded_file *f = lntune_embedded_find(lntune_embedded_engine, name);
    return f ? f->text : NULL;
}

void lntune_export_put_code(lntune_export_buf *b, const char *name) {
    const embedded_file *f = lntune_embedded_find(lntune_embedded_exported, name);
    if (f)
        lntune_export_put(b, "%s", f->text);
    else
        b->missing = name;
}

/* Both exported headers declare it, so that an app may include both. */
const char lntune_export_types_text[] =
    "#ifndef LNTUNE_KERNELS_TYPES_DEFINED\n#define LNTUNE_KERNELS_TYPES_DEFINED\n"
    "#define LNTUNE_KERNELS_DEFAULT 0\n#define LNTUNE_KERNELS_F32 1\n"
    "#define LNTUNE_KERNELS_F16 2\n#define LNTUNE_KERNELS_BF16 3\n\n"
    "typedef struct lntune_kernels_types {\n"
    "    int x;        /* x; 0: fp32 */\n"
    "    int y;        /* y; 0: as x */\n"
    "    int params;   /* gamma and beta; 0: as x */\n"
    "    int residual; /* residual and residual_out; 0: as x */\n"
    "} lntune_kernels_types;\n#endif\n";

const char *lntune_export_abi_header(void) {
    return lntune_export_embedded("lntune_kernel.h");
}

void lntune_export_put_levels(lntune_export_buf *b, const char *avx2, const char *generic) {
    if (avx2)
        lntune_export_put(b, "#if LNTUNE_KERNELS_AVX2\n%s\n#else\n%s\n#endif\n", avx2, generic);
    else
        lntune_export_put(b, "%s\n", generic);
}

/* One CUDA kernel's source, for one GPU's architecture (guard) and types (see export_internal.h).
 */
void lntune_export_put_cuda_kernel(lntune_export_buf *text, const lntune_source *src,
                                   const char *symbol, int sm, lntune_export_guard guard,
                                   const lntune_types *types) {
    /* A GPU's kernels are device code only when compiling for its architecture (sm_90's
     * clusters do not compile for sm_80, and no other GPU runs them: see current_gpu).
     * Other passes see an empty kernel of the same name: every pass must declare the same
     * kernels, since nvcc makes the host's launch stubs from a device pass. */
    if (guard)
        lntune_export_put(text, "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ == %d\n", sm * 10);
    static const char names[4] = {'X', 'Y', 'P', 'R'};
    if (types) {
        const int t[4] = {types->x, types->y, types->params, lntune_types_residual(*types)};
        for (int i = 0; i < 4; ++i)
            lntune_export_put(text, "#define LNTUNE_%c_T %s\n", names[i],
                              lntune_cuda_type_name(t[i]));
    }
    lntune_export_put(text, "%s\n", src->text);
    if (types)
        for (int i = 0; i < 4; ++i) lntune_export_put(text, "#undef LNTUNE_%c_T\n", names[i]);
    if (guard == LNTUNE_EXPORT_GUARD_FORWARD)
        lntune_export_put(text,
                          "#else\nnamespace %s_impl {\nextern \"C\" __global__ void "
                          "%s(lntune_kernel_args) {} /* never launched here */\n}\n#endif\n\n",
                          symbol, symbol);
    if (guard == LNTUNE_EXPORT_GUARD_BACKWARD)
        lntune_export_put(text,
                          "#else\nnamespace %s_impl {\n/* never launched here */\n"
                          "extern \"C\" __global__ void %s(lntune_backward_kernel_args, float *, "
                          "float *) {}\n"
                          "extern \"C\" __global__ void %s_dgamma(const float *, const float *, "
                          "int64_t, int64_t, void *, void *) {}\n}\n#endif\n\n",
                          symbol, symbol, symbol);
}
