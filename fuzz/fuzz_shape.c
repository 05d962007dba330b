/*
 * fuzz_shape.c - libFuzzer target for the --shape parser (gen/template/shape.c): any text is either
 * refused with a message or parsed into shapes within the documented bounds.
 */
#include "lntune.h"
#include "shape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    lntune_shape *list = NULL;
    size_t count = 0;
    char err[256];
    int rc = lntune_shape_parse(text, &list, &count, err, sizeof err);
    if (rc == LNTUNE_OK) {
        if (count == 0) abort();
        for (size_t i = 0; i < count; ++i) {
            const lntune_shape *s = &list[i];
            if (s->H < 1 || s->H > LNTUNE_SHAPE_MAX_H || s->rows < 0) abort();
            if (s->rows > 0 && s->rows > LNTUNE_SHAPE_MAX_ELEMENTS / s->H) abort();
        }
    } else if (list || count || !memchr(err, '\0', sizeof err) || !err[0]) {
        abort(); /* a refusal leaves the list alone and says why */
    }
    free(list);
    free(text);
    return 0;
}
