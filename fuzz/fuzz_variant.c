/*
 * fuzz_variant.c - libFuzzer target for the variant parser: lntune_gen_emit with a fuzzed
 * variant string against the built-in templates. Input: byte 0 picks the op, bytes 1-2 the
 * H (1..65536), the rest is the variant string. Emit either refuses with a message or returns
 * source whose canonical variant string emits the same source again.
 */
#include "generator.h"
#include "lntune.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lntune_gen *gen;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const ops[] = {"layernorm", "rmsnorm", "copy"};
    if (!gen && lntune_gen_open(NULL, &gen) != LNTUNE_OK) abort();
    if (size < 3) return 0;
    const char *op = ops[data[0] % 3];
    lntune_shape shape = {0, 1 + (data[1] | data[2] << 8), LNTUNE_AFFINE_ANY};
    char *variant = malloc(size - 2);
    if (!variant) return 0;
    memcpy(variant, data + 3, size - 3);
    variant[size - 3] = '\0';
    lntune_source src, again;
    if (lntune_gen_emit(gen, "cpu", op, variant, &shape, NULL, &src) == LNTUNE_OK) {
        if (!src.text || !src.variant) abort();
        if (lntune_gen_emit(gen, "cpu", op, src.variant, &shape, NULL, &again) != LNTUNE_OK)
            abort();
        if (strcmp(src.text, again.text) != 0) abort();
        lntune_source_free(&again);
        lntune_source_free(&src);
    } else if (!lntune_gen_errmsg(gen)[0]) {
        abort();
    }
    free(variant);
    return 0;
}
