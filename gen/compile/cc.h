/*
 * cc.h - the compile pipeline's first step, which the others run on: which C compiler (one rule
 * for every caller), the flags every kernel gets, and running the compiler as a subprocess,
 * source in, object or shared object out, its messages captured. build.c (objects, one shared
 * object, dlopen) and jit.c (an object, the on-disk cache, the LLVM ORC JIT) are the next steps.
 * A missing compiler is a failed job with a message, never a crash.
 */
#ifndef LNTUNE_CC_H
#define LNTUNE_CC_H

#include <stddef.h>

/* The compiler: $LNTUNE_CC, else the first of clang-14 and clang found on PATH, else "cc". */
const char *lntune_default_compiler(void);

/* Flags every kernel is compiled with, NULL-terminated ("-std=c11", "-O3", "-march=native",
 * "-fPIC"); each step adds its own input and output flags after the caller's. */
extern const char *const lntune_kernel_cflags[];

/* What a process wrote to one stream (malloc'd, NUL-terminated when not NULL). */
typedef struct lntune_cc_output {
    char *data;
    size_t len, cap;
} lntune_cc_output;

/*
 * Runs argv (argv[0] looked up on PATH) with input on its stdin, collecting stdout into out and
 * stderr into err (either may be NULL: discarded). Returns 0 with *status set (the exit code, or
 * 128 + signal), or an errno value when the process could not be started. Thread-safe.
 */
int lntune_cc_run(const char *const *argv, const char *input, size_t input_len,
                  lntune_cc_output *out, lntune_cc_output *err, int *status);

typedef struct lntune_cc_job {
    const char *source;   /* C source text, fed on the compiler's stdin */
    const char *out_path; /* the object (or, with -shared in flags, shared object) to write */
    const char *const *extra_flags; /* NULL-terminated, may be NULL */
    int status;                     /* out: 0 on success, the compiler's exit code, or -1 */
    char *diag;                     /* out: the compiler's messages (malloc'd, may be NULL) */
} lntune_cc_job;

/* Runs worker(arg) on up to parallel threads (at most n), the calling thread one of them: a
 * failed pthread_create only costs parallelism. The compile batches of cc.c and jit.c. */
void lntune_cc_run_workers(void *(*worker)(void *), void *arg, size_t n, int parallel);

/*
 * Compiles each job with `compiler flags... extra_flags... -x c - -o out_path`, running up to
 * parallel compilers at once. Returns the number of failed jobs.
 */
size_t lntune_cc_compile(const char *compiler, const char *const *flags, lntune_cc_job *jobs,
                         size_t n, int parallel);

/* Links objects into a shared object with the same compiler; 0 on success, else the compiler's
 * exit code or -1 (*diag, when diag is not NULL: its messages, malloc'd, may be NULL). */
int lntune_cc_link_shared(const char *compiler, const char *const *objs, size_t n,
                          const char *out_path, char **diag);

/* A new private directory under $TMPDIR (or /tmp); the caller frees the string. */
char *lntune_cc_tempdir(void);

/* Removes dir and the files in it (not recursive). */
void lntune_cc_remove_dir(const char *dir);

#endif /* LNTUNE_CC_H */
