/*
 * test_copy.c - every copy variant (templates/cpu/copy.lua, the bandwidth every kernel is
 * measured against) compiles and copies exactly: H = 1, 17, 4097, rows 7, contiguous, y
 * misaligned by 4 bytes (non-temporal variants stream from the first aligned float), and strided.
 * The tuner skips a copy variant that fails, so a broken one would silently weaken "the better
 * copy" (it once did: every non-temporal variant failed to compile).
 */
#include "build.h"
#include "check.h"
#include "generator.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    lntune_gen *g = NULL;
    CHECK(lntune_gen_open(NULL, &g) == LNTUNE_OK, "generator opens");
    char **list = NULL;
    size_t n = 0;
    lntune_shape any = {.affine = LNTUNE_AFFINE_ANY};
    CHECK(lntune_gen_variants(g, "cpu", "copy", &any, &list, &n) == LNTUNE_OK && n > 8,
          "%zu copy variants", n);
    char **texts = calloc(n, sizeof *texts);
    for (size_t i = 0; i < n; ++i) {
        char symbol[32];
        snprintf(symbol, sizeof symbol, "copy_%zu", i);
        lntune_source src;
        CHECK(lntune_gen_emit(g, "cpu", "copy", list[i], &any, symbol, &src) == LNTUNE_OK,
              "emit %s", list[i]);
        texts[i] = src.text;
        src.text = NULL;
        lntune_source_free(&src);
    }
    lntune_library *lib = NULL;
    char *diag = NULL;
    int rc = lntune_build_library(lntune_default_compiler(), NULL, (const char *const *)texts, n, 2,
                                  &lib, &diag);
    CHECK(rc == LNTUNE_OK, "all %zu copy variants compile: %s", n, diag ? diag : "");
    static const int64_t hs[] = {1, 17, 4097};
    enum { ROWS = 7 };
    for (size_t i = 0; lib && i < n; ++i) {
        char symbol[32];
        snprintf(symbol, sizeof symbol, "copy_%zu", i);
        lntune_kernel_fn fn = lntune_library_kernel(lib, symbol);
        int bad = !fn;
        for (size_t h = 0; h < 3 && !bad; ++h) {
            const int64_t H = hs[h];
            for (int layout = 0; layout < 3 && !bad; ++layout) {
                const int64_t stride = layout == 2 ? H + 5 : H, off = layout == 1 ? 1 : 0;
                const size_t len = (size_t)(ROWS * stride + 32);
                const size_t bytes = (len * 4 + 127) / 64 * 64; /* a multiple of the alignment */
                float *x = aligned_alloc(64, bytes), *y = aligned_alloc(64, bytes);
                for (size_t k = 0; k < len; ++k) x[k] = (float)k + 0.5f, y[k] = -1.0f;
                lntune_kernel_args a = {.rows = ROWS,
                                        .H = H,
                                        .x_stride = stride,
                                        .y_stride = stride,
                                        .x = x + off,
                                        .y = y + off};
                bad = fn(&a, 0, ROWS) != LNTUNE_KERNEL_OK;
                for (int64_t r = 0; r < ROWS && !bad; ++r)
                    for (int64_t c = 0; c < stride && !bad; ++c) {
                        const float want = c < H ? x[off + r * stride + c] : -1.0f;
                        bad = y[off + r * stride + c] != want;
                    }
                free(x);
                free(y);
            }
        }
        CHECK(!bad, "%s copies exactly", list[i]);
    }
    lntune_library_close(lib);
    free(diag);
    for (size_t i = 0; i < n; ++i) free(texts[i]);
    free(texts);
    lntune_gen_free_list(list, n);
    lntune_gen_close(g);
    return CHECK_SUMMARY();
}
