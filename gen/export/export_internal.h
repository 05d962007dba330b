/*
 * export_internal.h - what export.c (the C kernels) and export_cuda.c (the CUDA kernels) share:
 * a growing text buffer, file writing, warnings, the rows range of a bucket and the ops table.
 */
#ifndef LNTUNE_EXPORT_INTERNAL_H
#define LNTUNE_EXPORT_INTERNAL_H

#include "export.h"
#include "generator.h"
#include "hardware.h"
#include "tuning_db.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lntune_export_buf {
    char *s;
    size_t len, cap;
    int oom;             /* a put ran out of memory: the text is incomplete */
    const char *missing; /* a file lntune_export_put_code did not find (a build fault) */
} lntune_export_buf;

/*
 * An op the export serves (export_ops.c). Its index in lntune_export_ops is its number in the
 * exported tables; the name is the database's op text and the suffix of the exported entry points
 * (lntune_kernels_<name>), so it is a C identifier.
 */
typedef struct lntune_export_op {
    const char *name;
    int takes_beta;  /* beta is accepted (else a call with beta is declined) */
    int centered;    /* the portable fp16/bf16 fallback subtracts the mean (LayerNorm) or not */
    int cuda;        /* the CUDA export serves it too (its fixed dispatch, under this index) */
    const char *doc; /* the formula, for the exported header */
} lntune_export_op;

#define LNTUNE_EXPORT_MAX_OPS 16 /* bounds the rows of lntune_export_ops */

extern const lntune_export_op lntune_export_ops[];
extern const size_t lntune_export_op_count;

/* The index of op text in lntune_export_ops, or -1 for an op the export does not know. */
int lntune_export_op_find(const char *name);

/*
 * Appends the exported portable kernels of every fp16/bf16 type tuple (export_typed.c): for each
 * op, one kernel per (x, y, params) tuple serving every affine kind, and the table
 * typed_generic[op][x][y][params] of them (NULL for all-fp32, which the fp32 generics serve);
 * then, for each tuple marked in used (indexed by lntune_types_packed, residual 0), the
 * generated generic kernels with gamma and with neither (gen/template/builtin.c), in the table
 * typed_builtin[op][affine][x][y][params]; with avx2, each of those twice, as
 * lntune_export_put_levels writes them, and a third time at AVX2's width with non-temporal
 * stores, in the table typed_streaming (all NULL without avx2). LNTUNE_OK, or the generator's
 * code (lntune_gen_errmsg says why).
 */
int lntune_export_put_typed_fallback(lntune_export_buf *b, lntune_gen *g,
                                     const unsigned char used[64], int avx2);

/*
 * Appends generated kernels of two levels under one name (gen/template/builtin.c's
 * lntune_builtin_avx2 and lntune_builtin_generic): avx2's text where the file is compiled for AVX2,
 * FMA and F16C (LNTUNE_KERNELS_AVX2, which the exported file defines), else generic's. avx2 NULL:
 * generic's alone.
 */
void lntune_export_put_levels(lntune_export_buf *b, const char *avx2, const char *generic);

/*
 * Appends fused_bf16_generic(op, affine, out, streams) (export_typed.c), which the residual
 * fallback asks first: with used (some winner is an all-bf16 fused call), liblntune's fused
 * all-bf16 built-ins at the file's level (their streaming copy for streams); else it returns
 * NULL. Their 24 kernels are left out of files that have no use for them. LNTUNE_ENOMEM or a
 * generator error.
 */
int lntune_export_put_fused_bf16(lntune_export_buf *b, lntune_gen *g, int used, int avx2);

/*
 * Appends the exported fallback of calls with a residual (export_typed.c), after the generic
 * kernels it calls (through unfused_generic and fused_bf16_generic): per op, one kernel per (x, y,
 * params, residual) tuple serving every affine kind and both fusions, and the table
 * residual_generic[op][x][y][params][residual]. A call past LNTUNE_KERNELS_STREAMING_BYTES
 * stores residual_out non-temporally (with avx2, where the file is compiled for AVX2).
 */
void lntune_export_put_residual_fallback(lntune_export_buf *b, int avx2);

/*
 * Appends the exported backward fallback (export_typed.c): per op, one portable kernel per
 * (fused with dresidual_out or not, x type, params type), and the table
 * generic_backward[op][fused][x][params] of them.
 */
void lntune_export_put_backward_fallback(lntune_export_buf *b);

/*
 * The tuned kernels' ISA (export_isa.c): each function of them carries target("...") of
 * cpu's x86 features, so that the file compiles with any flags, and the dispatch runs them only
 * where the CPU has those features. lntune_export_put_arch: LNTUNE_KERNELS_TUNED_ARCH (1 where
 * the file is compiled for cpu's architecture), after the file's includes;
 * lntune_export_put_tuned_begin and _end: around the tuned kernels' text (left out elsewhere);
 * lntune_export_put_tuned_usable: tuned_usable(), which the dispatch asks first.
 * lntune_export_target_text: the target text ("" off x86), for the header comment.
 */
void lntune_export_put_arch(lntune_export_buf *b, const lntune_cpu_info *cpu);
void lntune_export_put_tuned_begin(lntune_export_buf *b, const lntune_cpu_info *cpu);
void lntune_export_put_tuned_end(lntune_export_buf *b, const lntune_cpu_info *cpu);
void lntune_export_put_tuned_usable(lntune_export_buf *b, const lntune_cpu_info *cpu);
void lntune_export_target_text(const lntune_cpu_info *cpu, char *buf, size_t size);

/* Appends printf-formatted text. */
void lntune_export_put(lntune_export_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Creates dir (and its parents) when missing; refuses (LNTUNE_EIO, msg) when a file export
 * would write there (the C, header, CUDA and, with cmake, CMakeLists.txt files) exists and does
 * not say it was generated by lntune export: a user's file is never overwritten. */
int lntune_export_prepare_dir(const char *dir, int cmake, char *msg, size_t msglen);
/* Writes b to dir/name (aside, then renamed over it); LNTUNE_EIO with msg set on failure. */
int lntune_export_write_file(const char *dir, const char *name, const lntune_export_buf *b,
                             char *msg, size_t msglen);

/* One "lntune export: warning: ..." line to c->warnings, if set. */
void lntune_export_warn(const lntune_export_config *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The range of row counts [*lo, *hi] of rows' bucket (*hi is INT64_MAX for the last). */
void lntune_export_bucket_range(int64_t rows, int64_t *lo, int64_t *hi);

/* The text of a header built into gen with the engine ("lntune_kernel.h", "typed_kernel.h");
 * NULL if missing. */
const char *lntune_export_embedded(const char *name);

/*
 * Appends the text of exported/NAME ("cpu/pool.c"): the fixed code the exported files carry,
 * ordinary source files of the tree built into lntune (CMakeLists.txt embeds exported/). A
 * name not built in sets b->missing.
 */
void lntune_export_put_code(lntune_export_buf *b, const char *name);
/* The element types' numbers and lntune_kernels_types, for both exported headers (guarded). */
extern const char lntune_export_types_text[];

/* The text of include/lntune_kernel.h built into gen; NULL if missing. */
const char *lntune_export_abi_header(void);

/* Device code for one architecture only: other passes see empty kernels of the same names (of a
 * forward kernel, or of a backward pair). */
typedef enum {
    LNTUNE_EXPORT_UNGUARDED,
    LNTUNE_EXPORT_GUARD_FORWARD,
    LNTUNE_EXPORT_GUARD_BACKWARD
} lntune_export_guard;

/*
 * Appends a CUDA kernel's source, generated for compute capability sm, to text, guarded to sm as
 * guard says. types: the source's element types are left to macros (a typed built-in); #defines
 * of them frame it.
 */
void lntune_export_put_cuda_kernel(lntune_export_buf *text, const lntune_source *src,
                                   const char *symbol, int sm, lntune_export_guard guard,
                                   const lntune_types *types);

/* A tuned CUDA backward pair to export: its GPU (index in the exported GPU table, compute
 * capability, name), key and record. */
typedef struct lntune_export_cuda_pair {
    int gpu, sm;
    const char *gpu_name;
    const char *op_text, *dtype, *base_op, *variant; /* the database's texts; base_op: no fusion */
    int op;                                          /* 0 layernorm, 1 rmsnorm */
    int fusion;
    lntune_types types;
    int64_t H, tuned_rows, rows_lo, rows_hi;
    double median_ns, gbps, copy_gbps, max_error;
} lntune_export_cuda_pair;

/*
 * The CUDA export's backward (export_cuda_backward.c), generated: the tuned pairs (each
 * regenerated for its GPU's architecture, guarded to it; one that no longer generates is left out
 * with a warning to c and counted in skipped, the others in exported), then the built-in backward
 * pair of each op, fusion (none, dresidual_out) and (x, params) tuple of tuples (y ignored),
 * generated for sm, into kernels; their rows of the table (entries of them) into table; the
 * kernels' lines into comment. Message in msg on failure.
 */
typedef struct {
    lntune_export_buf *kernels, *table, *comment;
    int exported, skipped;
    size_t entries;
} lntune_export_cuda_backward_out;
int lntune_export_cuda_backward(lntune_gen *g, const lntune_export_config *c, int sm,
                                const lntune_export_cuda_pair *tuned, size_t ntuned,
                                const lntune_types *tuples, size_t n,
                                lntune_export_cuda_backward_out *out, char *msg, size_t msglen);
/* The backward's host code, from its generated table rows: the table, the host code and the
 * extern "C" entry points lntune_kernels_cuda_<op>_backward (after the forward's dispatch text,
 * whose helpers it uses). */
void lntune_export_cuda_backward_host(const lntune_export_buf *table, size_t entries,
                                      lntune_export_buf *host);
/* The backward's declarations and their documentation, for lntune_kernels_cuda.h. */
void lntune_export_cuda_backward_declare(lntune_export_buf *header);

/* The template hash the winner (key, variant) was measured with, or "" if unknown. */
void lntune_export_measured_hash(lntune_db *db, const lntune_db_key *key, const char *variant,
                                 char hash[17]);

/*
 * The CUDA half of an export (export_cuda.c), in the stages of the C half. Plan: reads db's GPU
 * hardware rows and winners (of c->gpu only, if set); db may be NULL (no database: *out NULL, an
 * error with c->gpu). Generate: every kernel of lntune_kernels.cu. Write: lntune_kernels.cu and
 * lntune_kernels_cuda.h (see export.h) when db holds CUDA winners; sets r->cuda_tuned,
 * r->cuda_gpus, r->cuda_written, and archs to the distinct compute capabilities for CMake
 * ("90;80"). Generate and write accept NULL (nothing to do); free accepts NULL.
 */
typedef struct lntune_export_cuda lntune_export_cuda;
int lntune_export_cuda_plan(lntune_db *db, const lntune_export_config *c, lntune_export_report *r,
                            lntune_export_cuda **out);
int lntune_export_cuda_generate(lntune_export_cuda *x, lntune_gen *g, const lntune_export_config *c,
                                lntune_export_report *r);
int lntune_export_cuda_write(lntune_export_cuda *x, const lntune_export_config *c,
                             lntune_export_report *r, char *archs, size_t archs_size);
void lntune_export_cuda_free(lntune_export_cuda *x);

#endif /* LNTUNE_EXPORT_INTERNAL_H */
