/*
 * export.h - `lntune export`: this machine's tuned kernels as plain C for apps that want no
 * runtime library (FFTW's wisdom, frozen into code).
 *
 * Writes lntune_kernels.c and lntune_kernels.h (and, on request, a CMakeLists.txt for
 * add_subdirectory) into a directory: every winner of this machine's hardware in the tuning
 * database, regenerated from its variant string for its H with a unique name, a dispatch table
 * on (op, dtype, H, affine, rows bucket), the generic built-in kernels for everything else, and
 * a small persistent pthread pool for multi-threaded winners. The files need only libc, libm and
 * pthreads, and compile with -std=c11 -Wall -Wextra -Werror under gcc and clang, with no -march:
 * the tuned kernels carry target attributes of this machine's ISA and run only where the CPU has
 * it, the generic kernels elsewhere (export_isa.c).
 *
 * Types: winners of every (x, y, gamma/beta) tuple are exported, keyed as the runtime keys them.
 * lntune_kernels_<op>(args) is fp32, as in every earlier export; lntune_kernels_<op>_v2(args,
 * types) takes any tuple (lntune_dtype's numbers, 0 the same defaults as lntune_args). A tuple no
 * winner covers runs export_typed.c's portable kernel of that tuple. Ops are the rows of
 * lntune_export_ops (export_ops.c); a database row of any other op or of unparsable dtype text is
 * left out with one warning line, never exported as something else.
 *
 * Fusion and backward: the op text's "+residual" / "+residual_out" (fusion.h) and "_backward"
 * rows are exported too. Both entry points above take args.residual (and residual_out), the
 * residual's type in types.residual; lntune_kernels_<op>_backward(args, types, dgamma, dbeta)
 * runs the gradient (lntune_kernel_backward.h's args, dresidual_out for the fused backward) with
 * per-thread fp32 partials reduced in thread order, as the runtime does. What no winner covers
 * runs export_typed.c's fallbacks: the fp32 sum of a row normalized by the unfused generic
 * kernels, and a portable backward kernel per (x, params) tuple.
 *
 * CUDA: when the database holds CUDA winners (best rows of target "cuda": every type tuple and
 * fusion; backward rows, whose shapes the generic backward pairs serve, and unknown ops or types
 * are left out with a warning), export also writes lntune_kernels.cu and lntune_kernels_cuda.h: the
 * winners of every GPU hardware row (or of config->gpu's only), each regenerated for its row's
 * compute capability, generic kernels for every other shape, and host code that launches them with
 * the grid and shared memory their launch lines give. The generic kernels are builtin.h's: the fp32
 * ones, and the typed built-in (element types chosen by #defines around its source) for fp32
 * with either fusion and for each (op, fusion, type tuple) a winner has. Every tuple would be
 * 400-odd kernels; a call of a tuple none of them serves is LNTUNE_EUNSUPPORTED, and its
 * message names the tuning command that adds it. The backward (export_cuda_backward.c) is the
 * runtime's built-in pair for all-fp32 and each (x, params) tuple of a winner, both fusions:
 * lntune_kernels_cuda_<op>_backward(args, types, dgamma, dbeta, stream). There is no GPU to detect
 * at export time, so the GPU is chosen at run time: on the first call on a device, its name and
 * compute capability select the GPU row (the same name and capability, else the same capability); a
 * device matching none is LNTUNE_ENODEVICE, never a crash. Entry points:
 * lntune_kernels_cuda_layernorm/_rmsnorm(const lntune_kernel_args *, cudaStream_t) on fp32 device
 * pointers, and _v2(args, types, stream) for any type tuple (lntune_kernel_args and
 * lntune_kernels_types, not lntune_args, so that the files need nothing of lntune), with LNTUNE_*
 * codes. The file compiles with nvcc -std=c++17 for the architectures of its GPU rows (each row's
 * kernels are device code for its own architecture only, so an sm_80 row and an sm_90 row's
 * clusters share one file) and needs only the CUDA runtime. With no CUDA winners no CUDA file is
 * written (a stale one from an earlier export is left alone, and CMakeLists.txt then does not name
 * it). --cmake adds the target lntune_kernels_cuda where check_language(CUDA) finds a compiler.
 *
 * Sources are regenerated rather than copied from the artifacts, so that each kernel gets a name
 * of its own and one translation unit holds them all. If the template changed since the winner
 * was measured (its measurement's template hash differs from the current one), the regenerated
 * kernel is not the measured one: export warns and still writes it, since the variant is what
 * the tuner chose and the generated code is verified-by-construction from the same template the
 * runtime's built-ins come from. Re-tune to refresh the timings recorded in the header.
 */
#ifndef LNTUNE_EXPORT_H
#define LNTUNE_EXPORT_H

#include <stdio.h>

typedef struct lntune_export_config {
    const char *out_dir; /* must exist */
    const char *db_path; /* NULL: the default database */
    int cmake;           /* also write CMakeLists.txt */
    FILE *warnings;      /* warnings, one a line (may be NULL) */
    const char *gpu;     /* CUDA: export the winners of this GPU fingerprint only (NULL: all) */
    int generic_only;    /* read no database: the generic kernels alone, on purpose */
} lntune_export_config;

typedef struct lntune_export_report {
    int tuned;            /* tuned kernels written */
    int skipped;          /* winners left out, each with a warning */
    char fingerprint[17]; /* this machine */
    int cuda_tuned;       /* CUDA kernels written (lntune_kernels.cu) */
    int cuda_skipped;     /* CUDA winners left out, each with a warning */
    int cuda_gpus;        /* GPU hardware rows they came from */
    int cuda_written;     /* lntune_kernels.cu and lntune_kernels_cuda.h were written */
    char message[1024];   /* why it failed */
} lntune_export_report;

/*
 * Exports. A database that is missing (LNTUNE_ENOTFOUND), refused (LNTUNE_EDB) or holds no
 * results of this machine, neither its CPU nor a GPU (LNTUNE_ENOTFOUND), is an error and nothing
 * is written, unless config->generic_only asks for the generic kernels alone. A database of GPUs
 * only is a warning: the CPU file then holds the generic kernels. Returns an LNTUNE_* code;
 * report->message says why on failure.
 */
int lntune_export(const lntune_export_config *config, lntune_export_report *report);

#endif /* LNTUNE_EXPORT_H */
