/*
 * generator.h - turns a template family plus a variant string into kernel source.
 *
 * A handle owns one Lua state with the template engine (gen/template/engine.lua) loaded. It is not
 * thread-safe: use one handle per thread. Every failure returns an LNTUNE_* code and leaves a
 * message, naming the template file and line where one is at fault, in lntune_gen_errmsg.
 */
#ifndef LNTUNE_GENERATOR_H
#define LNTUNE_GENERATOR_H

#include "dtypes.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lntune_gen lntune_gen;

/* What a variant is generated for; 0 means "any". */
typedef struct lntune_shape {
    int64_t rows;
    int64_t H;
    int affine;         /* LNTUNE_AFFINE_ANY, or only variants for calls with (without) gamma */
    lntune_types types; /* element types; zero: all fp32 */
    int fusion;         /* LNTUNE_FUSION_* (fusion.h): the call's residual add; 0: none */
    int generic_types;  /* CUDA: element types left to macros set at compile time (types unused) */
} lntune_shape;

#define LNTUNE_AFFINE_ANY 0
#define LNTUNE_AFFINE_GAMMA 1
#define LNTUNE_AFFINE_NONE 2
#define LNTUNE_AFFINE_OFFSET 3 /* gamma with a weight offset: norm(x) * (offset + gamma) */

/* One generated kernel and what its caller must know to run it. */
typedef struct lntune_source {
    char *text;             /* the C (or CUDA) source */
    char *variant;          /* canonical parameter string, launch parameters included */
    char template_hash[17]; /* hash of the template files and the engine */
    int threads;            /* threads to split rows across (launch parameter) */
    int affine; /* 1: needs gamma (beta optional); 2: gamma and the weight offset; 0: neither */
    int64_t fixed_h;   /* the only H the kernel serves, or 0 for any */
    int any_alignment; /* as fast on rows of any alignment as on its tuned H's (plain stores) */
    char cflags[128];  /* extra compiler flags the variant asks for */
} lntune_source;

/*
 * template_dir: directories separated by ':' searched before the templates built into the
 * binary (a file there overrides the built-in one of the same name); NULL: $LNTUNE_TEMPLATE_DIR.
 */
int lntune_gen_open(const char *template_dir, lntune_gen **out);
void lntune_gen_close(lntune_gen *g); /* NULL is a no-op */
const char *lntune_gen_errmsg(const lntune_gen *g);

/* The GPU CUDA templates generate for, as host.sm (80 for sm_80, 90 for sm_90); 0 unsets it. */
int lntune_gen_set_cuda_arch(lntune_gen *g, int sm);

/* Every valid variant of target/op for shape, as canonical strings; free with lntune_gen_free_list.
 */
int lntune_gen_variants(lntune_gen *g, const char *target, const char *op,
                        const lntune_shape *shape, char ***list, size_t *count);
void lntune_gen_free_list(char **list, size_t count);

/* Generate for a CPU with these LNTUNE_ISA_* features (the variant space and the code follow
 * them) instead of the host's; 0 restores the host's. For code built with matching -m flags. */
void lntune_gen_set_isa(lntune_gen *g, uint32_t isa);

/* Generate for a machine with this many cores (thread counts in the space stop there). */
void lntune_gen_set_cores(lntune_gen *g, int cores);

/* The parameter space of target/op, one "name: v1 v2 ... - doc" line each (for --help). */
int lntune_gen_describe(lntune_gen *g, const char *target, const char *op, char **text);

/* The knobs target/op's template declares family = true, comma-separated (malloc'd *csv; "" when
 * none): the tuner's final holds the best variant of each of their values. */
int lntune_gen_families(lntune_gen *g, const char *target, const char *op, char **csv);

/*
 * The canonical variant string (malloc'd *variant) of the preset name that target/op's template
 * declares (its presets table: the built-in kernels' "builtin", CUDA's "naive" ...) for shape
 * (NULL: any H, all fp32; its affine picks affine=fused or none) on the host as set (ISA, CUDA
 * architecture). LNTUNE_ENOTFOUND: no such op or preset; LNTUNE_EINVAL: the preset's knob values
 * are not a valid variant for shape; LNTUNE_ETEMPLATE: the preset itself failed. On failure
 * *variant is NULL and lntune_gen_errmsg says why.
 */
int lntune_gen_preset(lntune_gen *g, const char *target, const char *op, const char *name,
                      const lntune_shape *shape, char **variant);

/* Generates the source of one variant; symbol names the kernel function (NULL: "lntune_kernel"). */
int lntune_gen_emit(lntune_gen *g, const char *target, const char *op, const char *variant,
                    const lntune_shape *shape, const char *symbol, lntune_source *out);
void lntune_source_free(lntune_source *s); /* frees the fields, not s; NULL is a no-op */

#endif /* LNTUNE_GENERATOR_H */
