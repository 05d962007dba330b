/*
 * cc.h - runs a C compiler as a subprocess: source text in, object or shared object out, the
 * compiler's messages captured. A missing compiler is a failed job with a message, never a crash.
 */
#ifndef LNTUNE_CC_H
#define LNTUNE_CC_H

#include <stddef.h>

typedef struct lntune_cc_job {
    const char *source;   /* C source text, fed through a temporary file */
    const char *out_path; /* the object (or, with -shared in flags, shared object) to write */
    const char *const *extra_flags; /* NULL-terminated, may be NULL */
    int status;                     /* out: 0 on success, the compiler's exit code, or -1 */
    char *diag;                     /* out: the compiler's output (malloc'd, may be NULL) */
} lntune_cc_job;

/*
 * Compiles each job with `compiler flags... extra_flags... -x c FILE -o out_path`, running up to
 * parallel compilers at once. Returns the number of failed jobs.
 */
size_t lntune_cc_compile(const char *compiler, const char *const *flags, lntune_cc_job *jobs,
                         size_t n, int parallel);

/* Links objects into a shared object with the same compiler; 0 on success. */
int lntune_cc_link_shared(const char *compiler, const char *const *objs, size_t n,
                          const char *out_path, char **diag);

/* A new private directory under $TMPDIR (or /tmp); the caller frees the string. */
char *lntune_cc_tempdir(void);

/* Removes dir and the files in it (not recursive). */
void lntune_cc_remove_dir(const char *dir);

#endif /* LNTUNE_CC_H */
