/*
 * nvrtc.h - compiles generated CUDA source to PTX and cubin with NVRTC, opened with dlopen so
 * that lntune builds and runs where no CUDA toolkit is installed.
 *
 * The library is $LNTUNE_NVRTC if set (and nothing else), else libnvrtc.so / libnvrtc.so.13 /
 * libnvrtc.so.12 / libnvrtc.so.11.2 (Debian's package) from the loader's path, else the same names
 * in /usr/local/cuda/lib64. The include path handed to every compile is $LNTUNE_CUDA_INCLUDE, else
 * ../include next to the library. Opening fails with LNTUNE_ENODEVICE and a message when no NVRTC
 * can be loaded.
 *
 * A handle is immutable after lntune_nvrtc_open, so lntune_nvrtc_compile may run on many threads
 * at once; each compile reports into its own lntune_nvrtc_output.
 */
#ifndef LNTUNE_NVRTC_H
#define LNTUNE_NVRTC_H

#include <stddef.h>

typedef struct lntune_nvrtc lntune_nvrtc;

/*
 * Loads NVRTC. Like sqlite3_open, *out is set even on failure (except LNTUNE_ENOMEM), so the
 * message can be read from it; close it in either case.
 */
int lntune_nvrtc_open(lntune_nvrtc **out);
void lntune_nvrtc_close(lntune_nvrtc *n); /* NULL is a no-op */
const char *lntune_nvrtc_errmsg(const lntune_nvrtc *n);

/* "NVRTC 13.0 (/usr/local/cuda/lib64/libnvrtc.so.13)"; empty when not loaded. */
const char *lntune_nvrtc_describe(const lntune_nvrtc *n);
int lntune_nvrtc_version(const lntune_nvrtc *n, int *major, int *minor);
const char *lntune_nvrtc_include_dir(const lntune_nvrtc *n); /* "" if none was found */

typedef enum lntune_nvrtc_kind {
    LNTUNE_NVRTC_PTX = 0,  /* --gpu-architecture=compute_XX: PTX text for the driver's JIT */
    LNTUNE_NVRTC_CUBIN = 1 /* -arch=sm_XX: machine code for exactly that architecture, and the
                              PTX it came from (the same as compute_XX's) */
} lntune_nvrtc_kind;

typedef struct lntune_nvrtc_output {
    void *data; /* malloc'd PTX (NUL-terminated) or cubin bytes */
    size_t len; /* bytes, without PTX's terminating NUL */
    char *ptx;  /* LNTUNE_NVRTC_CUBIN only: the PTX of the same compile (malloc'd) */
    size_t ptx_len;
    char *message;     /* malloc'd on failure: what went wrong and the NVRTC log; else NULL */
    double compile_ms; /* wall time of nvrtcCompileProgram */
} lntune_nvrtc_output;

/*
 * Compiles source (name is the file name used in NVRTC's messages) for compute capability sm
 * (80, 90, ...), with extra_options (NULL-terminated, may be NULL). Thread-safe.
 * LNTUNE_ECOMPILE when NVRTC rejects the source or yields nothing (an empty cubin included);
 * out->message holds the log.
 */
int lntune_nvrtc_compile(const lntune_nvrtc *n, const char *source, const char *name, int sm,
                         lntune_nvrtc_kind kind, const char *const *extra_options,
                         lntune_nvrtc_output *out);
void lntune_nvrtc_output_free(lntune_nvrtc_output *out); /* frees the fields; NULL is a no-op */

/* One source of a batch: filled by the caller (source, name), then rc and out by the compile. */
typedef struct lntune_nvrtc_job {
    const char *source;
    const char *name;           /* NULL: "variant.cu" */
    const char *const *options; /* extra options, NULL-terminated; NULL: none */
    int rc;
    lntune_nvrtc_output out;
} lntune_nvrtc_job;

/*
 * Compiles jobs[0..count) for sm, kind on threads threads (0: every online core, at most 64),
 * each job's result in its rc and out. Returns LNTUNE_OK, or LNTUNE_ENOMEM/LNTUNE_ERROR when the
 * threads could not be started (then no job ran).
 */
int lntune_nvrtc_compile_many(const lntune_nvrtc *n, int sm, lntune_nvrtc_kind kind,
                              lntune_nvrtc_job *jobs, size_t count, int threads);

#endif /* LNTUNE_NVRTC_H */
