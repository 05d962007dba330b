/*
 * embedded.h - the text files built into gen by cmake/embed.cmake: the engine and the headers
 * the generated code includes, the templates, and exported/ (the fixed code of `lntune export`).
 * Each table ends with a NULL path; the layout is the one embed.cmake writes. In gen/common/:
 * gen/template/ reads the engine and the templates, gen/export/ the headers and exported/.
 */
#ifndef LNTUNE_EMBEDDED_H
#define LNTUNE_EMBEDDED_H

#include <stddef.h>
#include <string.h>

typedef struct {
    const char *path; /* relative to the embedded folder: "engine.lua", "cpu/norm.lua" */
    const char *text; /* NUL-terminated */
    size_t len;
} embedded_file;

extern const embedded_file lntune_embedded_engine[]; /* gen/template/engine.lua and the headers */
extern const embedded_file lntune_embedded_templates[]; /* templates/ */
extern const embedded_file lntune_embedded_exported[];  /* exported/ */

/* The file of files at path, or NULL. */
static inline const embedded_file *lntune_embedded_find(const embedded_file *files,
                                                        const char *path) {
    for (; files->path; ++files)
        if (strcmp(files->path, path) == 0) return files;
    return NULL;
}

#endif /* LNTUNE_EMBEDDED_H */
