/*
 * peers_onednn3.c - oneDNN 3.x's layer normalization primitive ("onednn3"), forward inference
 * with scale and shift, on the CPU engine; and its RMS mode where the library has one. The
 * library is loaded at run time: bench/install-deps puts the onednn-cpu-gomp wheel (oneDNN 3.2),
 * which ships libdnnl.so.3 and no headers, in the peers' environment, and this file declares the
 * few types, values and functions of the C API it calls. 3.x's handles are opaque, so that is
 * all it needs; oneDNN keeps its C ABI within a major version, so any libdnnl.so.3 will do
 * (LNTUNE_BENCH_ONEDNN3=PATH picks another one).
 *
 * Sources of every declaration below: oneDNN's include/oneapi/dnnl/ headers (oneapi-src/oneDNN):
 * dnnl_types.h of a 3.2-era revision (668ee49: format tags, prop kinds, normalization flags,
 * queries, DNNL_ARG_*, dnnl_exec_arg_t, the handle types), dnnl.h and dnnl_common_types.h of 3.x
 * revisions (the functions' signatures; status, data types, engine kind, stream flags,
 * dnnl_version_t), which 3.x's stable C ABI keeps as 3.2 has them; the 3.2 reference ("Intel
 * oneAPI Deep Neural Network Developer Guide and Reference 2023-2": dnnl_query_t, the layer
 * normalization functions) lists the same. Checked against the wheel's library itself: it
 * exports every function named here (and no _v2 layer normalization), dnnl_version() says 3.2.0,
 * and its dnnl_dt2str, dnnl_fmt_tag2str, dnnl_prop_kind2str, dnnl_engine_kind2str and
 * dnnl_status2str name the values used here f16/bf16/f32, a/ab, forward_inference, cpu and
 * success/invalid_arguments/unimplemented.
 *
 * src and dst take the run's type; 3.2's layer normalization takes scale and shift in fp32 only
 * (the _v2 creation function with their own data type came later), so, as for oneDNN 2.x, they
 * get the same values widened. 3.2 has no RMSNorm: dnnl_rms_norm (0x20 in the later headers that
 * have it) is not among its normalization flags. The peer asks for it all the same, so that a later
 * libdnnl.so.3 that knows the flag is measured, and reports the library's refusal as n/a otherwise.
 *
 * Loaded with RTLD_DEEPBIND: where the oneDNN 2.x peer is compiled in, libdnnl.so.2 is in the
 * global scope, and 2.6 and 3.2 export 182 of the same symbols (dnnl_memory_create; internals such
 * as the object dnnl::impl::glob_zero_md); libdnnl.so.3's own references must bind to its own. The
 * library stays loaded until exit: its OpenMP and primitive-cache state outlives fini.
 */
#define _GNU_SOURCE
#include "peers.h"

#include "dtypes.h"
#include "lntune.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dnnl_common_types.h */
typedef int dnnl_status_t; /* dnnl_status_t: */
enum { dnnl_success = 0, dnnl_invalid_arguments = 2, dnnl_unimplemented = 3 };
typedef int dnnl_data_type_t; /* dnnl_data_type_t: */
enum { dnnl_f16 = 1, dnnl_bf16 = 2, dnnl_f32 = 3 };
typedef int dnnl_engine_kind_t; /* dnnl_engine_kind_t: */
enum { dnnl_cpu = 1 };
enum { dnnl_stream_default_flags = 0x1U }; /* dnnl_stream_flags_t: dnnl_stream_in_order */
#define DNNL_MAX_NDIMS 12
typedef int64_t dnnl_dim_t;
typedef dnnl_dim_t dnnl_dims_t[DNNL_MAX_NDIMS];
typedef struct {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_t;
typedef struct dnnl_engine *dnnl_engine_t;
typedef struct dnnl_stream *dnnl_stream_t;

/* dnnl_types.h */
typedef int dnnl_format_tag_t; /* dnnl_format_tag_t: */
enum { dnnl_a = 2, dnnl_ab = 3 };
typedef int dnnl_prop_kind_t; /* dnnl_prop_kind_t: */
enum { dnnl_forward_inference = 96 };
/* dnnl_normalization_flags_t (dnnl_rms_norm: from the headers after 3.2) */
enum { dnnl_use_scale = 0x2U, dnnl_use_shift = 0x4U, dnnl_rms_norm = 0x20U };
typedef int dnnl_query_t; /* dnnl_query_t: */
enum { dnnl_query_impl_info_str = 8 };
#define DNNL_ARG_SRC 1
#define DNNL_ARG_DST 17
#define DNNL_ARG_SCALE 51
#define DNNL_ARG_SHIFT 52
typedef struct dnnl_memory_desc *dnnl_memory_desc_t;
typedef const struct dnnl_memory_desc *const_dnnl_memory_desc_t;
typedef struct dnnl_memory *dnnl_memory_t;
typedef struct dnnl_primitive_desc *dnnl_primitive_desc_t;
typedef const struct dnnl_primitive_desc *const_dnnl_primitive_desc_t;
typedef const struct dnnl_primitive_attr *const_dnnl_primitive_attr_t;
typedef struct dnnl_primitive *dnnl_primitive_t;
typedef const struct dnnl_primitive *const_dnnl_primitive_t;
typedef struct {
    int arg;
    dnnl_memory_t memory;
} dnnl_exec_arg_t;

/* dnnl.h (dnnl_version, engine and stream functions: dnnl_common.h, which dnnl.h includes) */
static struct {
    const dnnl_version_t *(*version)(void);
    const char *(*status2str)(dnnl_status_t);
    dnnl_status_t (*engine_create)(dnnl_engine_t *, dnnl_engine_kind_t, size_t);
    dnnl_status_t (*engine_destroy)(dnnl_engine_t);
    dnnl_status_t (*stream_create)(dnnl_stream_t *, dnnl_engine_t, unsigned);
    dnnl_status_t (*stream_wait)(dnnl_stream_t);
    dnnl_status_t (*stream_destroy)(dnnl_stream_t);
    dnnl_status_t (*memory_desc_create_with_tag)(dnnl_memory_desc_t *, int, const dnnl_dims_t,
                                                 dnnl_data_type_t, dnnl_format_tag_t);
    dnnl_status_t (*memory_desc_destroy)(dnnl_memory_desc_t);
    dnnl_status_t (*memory_create)(dnnl_memory_t *, const_dnnl_memory_desc_t, dnnl_engine_t,
                                   void *);
    dnnl_status_t (*memory_destroy)(dnnl_memory_t);
    dnnl_status_t (*layer_normalization_forward_primitive_desc_create)(
        dnnl_primitive_desc_t *, dnnl_engine_t, dnnl_prop_kind_t, const_dnnl_memory_desc_t src,
        const_dnnl_memory_desc_t dst, const_dnnl_memory_desc_t stat, float epsilon, unsigned flags,
        const_dnnl_primitive_attr_t);
    dnnl_status_t (*primitive_desc_query)(const_dnnl_primitive_desc_t, dnnl_query_t, int, void *);
    dnnl_status_t (*primitive_desc_destroy)(dnnl_primitive_desc_t);
    dnnl_status_t (*primitive_create)(dnnl_primitive_t *, const_dnnl_primitive_desc_t);
    dnnl_status_t (*primitive_execute)(const_dnnl_primitive_t, dnnl_stream_t, int,
                                       const dnnl_exec_arg_t *);
    dnnl_status_t (*primitive_destroy)(dnnl_primitive_t);
} api;

static const struct {
    const char *name;
    void **slot;
} symbols[] = {
    {"dnnl_version", (void **)&api.version},
    {"dnnl_status2str", (void **)&api.status2str},
    {"dnnl_engine_create", (void **)&api.engine_create},
    {"dnnl_engine_destroy", (void **)&api.engine_destroy},
    {"dnnl_stream_create", (void **)&api.stream_create},
    {"dnnl_stream_wait", (void **)&api.stream_wait},
    {"dnnl_stream_destroy", (void **)&api.stream_destroy},
    {"dnnl_memory_desc_create_with_tag", (void **)&api.memory_desc_create_with_tag},
    {"dnnl_memory_desc_destroy", (void **)&api.memory_desc_destroy},
    {"dnnl_memory_create", (void **)&api.memory_create},
    {"dnnl_memory_destroy", (void **)&api.memory_destroy},
    {"dnnl_layer_normalization_forward_primitive_desc_create",
     (void **)&api.layer_normalization_forward_primitive_desc_create},
    {"dnnl_primitive_desc_query", (void **)&api.primitive_desc_query},
    {"dnnl_primitive_desc_destroy", (void **)&api.primitive_desc_destroy},
    {"dnnl_primitive_create", (void **)&api.primitive_create},
    {"dnnl_primitive_execute", (void **)&api.primitive_execute},
    {"dnnl_primitive_destroy", (void **)&api.primitive_destroy},
};

/* RTLD_DEEPBIND is refused by AddressSanitizer's runtime; see open_library. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static void *library; /* kept until exit once loaded */
static char version[32];
static dnnl_engine_t engine;
static dnnl_stream_t stream;

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4]; /* src, dst, scale, shift */
    int nargs;
} state;

static int open_library(char *note, size_t notelen) {
    if (library) return LNTUNE_OK;
    char fallback[4096];
    const char *path = getenv("LNTUNE_BENCH_ONEDNN3");
    if (!path || !path[0]) {
        snprintf(fallback, sizeof fallback, "%s/lib/libdnnl.so.3", lntune_bench_peers_dir());
        path = fallback;
    }
    if (access(path, R_OK) != 0) {
        snprintf(note, notelen, "no %s (bench/install-deps, or LNTUNE_BENCH_ONEDNN3=PATH)", path);
        return LNTUNE_EUNSUPPORTED;
    }
#if defined(UNDER_ASAN) && LNTUNE_BENCH_HAVE_ONEDNN2
    snprintf(note, notelen, "not loaded under AddressSanitizer (RTLD_DEEPBIND, beside oneDNN 2)");
    return LNTUNE_EUNSUPPORTED;
#else
#ifdef UNDER_ASAN /* alone in the process: its own symbols are the only ones */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
#else
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
    if (!h) {
        snprintf(note, notelen, "dlopen: %s", dlerror());
        return LNTUNE_EIO;
    }
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; ++i)
        if (!(*symbols[i].slot = dlsym(h, symbols[i].name))) {
            snprintf(note, notelen, "%s lacks %s: not oneDNN 3.x", path, symbols[i].name);
            dlclose(h);
            return LNTUNE_EIO;
        }
    const dnnl_version_t *v = api.version();
    if (v->major != 3) {
        snprintf(note, notelen, "%s is oneDNN %d.%d, not 3.x", path, v->major, v->minor);
        dlclose(h);
        return LNTUNE_EUNSUPPORTED;
    }
    snprintf(version, sizeof version, "%d.%d.%d", v->major, v->minor, v->patch);
    library = h;
    return LNTUNE_OK;
#endif
}

static int init(const lntune_bench_config *cfg, char *note, size_t notelen) {
    (void)cfg;
    int rc = open_library(note, notelen);
    if (rc != LNTUNE_OK) return rc;
    if (api.engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        api.stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        snprintf(note, notelen, "oneDNN %s: no CPU engine", version);
        return LNTUNE_EUNSUPPORTED;
    }
    return LNTUNE_OK;
}

static void fini(void) {
    if (stream) api.stream_destroy(stream);
    if (engine) api.engine_destroy(engine);
    stream = NULL, engine = NULL;
}

static void close_state(void *st) {
    state *s = st;
    if (!s) return;
    for (int i = 0; i < 4; ++i)
        if (s->mem[i]) api.memory_destroy(s->mem[i]);
    if (s->prim) api.primitive_destroy(s->prim);
    free(s);
}

/* LayerNorm with scale and shift, or RMSNorm (dnnl_rms_norm) with scale alone. */
static int open_norm(int op, const lntune_bench_problem *p, void **out, char *note,
                     size_t notelen) {
    if (!engine) {
        snprintf(note, notelen, "oneDNN 3: no CPU engine");
        return LNTUNE_EUNSUPPORTED;
    }
    state *s = calloc(1, sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    const int rms = op == LNTUNE_BENCH_RMSNORM;
    const unsigned flags = rms ? dnnl_rms_norm | dnnl_use_scale : dnnl_use_scale | dnnl_use_shift;
    static const dnnl_data_type_t types[] = {dnnl_f32, dnnl_f16, dnnl_bf16}; /* LNTUNE_TYPE_* */
    const dnnl_dims_t dims = {p->rows, p->H}, wdims = {p->H};
    dnnl_memory_desc_t data_md = NULL, w_md = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const char *step = "memory descriptors"; /* the step that failed, for the note */
    dnnl_status_t st = api.memory_desc_create_with_tag(&data_md, 2, dims, types[p->type], dnnl_ab);
    if (st == dnnl_success) st = api.memory_desc_create_with_tag(&w_md, 1, wdims, dnnl_f32, dnnl_a);
    if (st == dnnl_success) {
        step = "primitive descriptor";
        st = api.layer_normalization_forward_primitive_desc_create(
            &pd, engine, dnnl_forward_inference, data_md, data_md, NULL, p->eps, flags, NULL);
    }
    if (st == dnnl_success) step = "primitive", st = api.primitive_create(&s->prim, pd);
    void *ptr[4] = {(void *)p->x, p->y, (void *)p->gamma_f32, (void *)p->beta_f32};
    s->nargs = rms ? 3 : 4; /* RMSNorm: no shift */
    for (int i = 0; i < s->nargs && st == dnnl_success; ++i)
        step = "memory", st = api.memory_create(&s->mem[i], i < 2 ? data_md : w_md, engine, ptr[i]);
    const char *impl = NULL;
    if (st == dnnl_success &&
        api.primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(note, notelen, "oneDNN %s %s", version, impl);
    if (pd) api.primitive_desc_destroy(pd);
    if (w_md) api.memory_desc_destroy(w_md);
    if (data_md) api.memory_desc_destroy(data_md);
    if (st != dnnl_success) {
        const int pd_step = strcmp(step, "primitive descriptor") == 0;
        if (pd_step && rms && st == dnnl_invalid_arguments)
            snprintf(note, notelen,
                     "oneDNN %s has no RMSNorm (layer normalization refuses dnnl_rms_norm: %s)",
                     version, api.status2str(st));
        else if (pd_step && st == dnnl_unimplemented)
            snprintf(note, notelen, "oneDNN %s implements no %s %s normalization on this CPU",
                     version, lntune_type_name(p->type), rms ? "RMS" : "layer");
        else
            snprintf(note, notelen, "oneDNN %s: creating the %s: %s", version, step,
                     api.status2str(st));
        close_state(s);
        return LNTUNE_EUNSUPPORTED;
    }
    *out = s;
    return LNTUNE_OK;
}

LNTUNE_BENCH_NORM_OPENERS(open_norm)

static int run(void *st) {
    state *s = st;
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, s->mem[0]},
                                    {DNNL_ARG_DST, s->mem[1]},
                                    {DNNL_ARG_SCALE, s->mem[2]},
                                    {DNNL_ARG_SHIFT, s->mem[3]}};
    if (api.primitive_execute(s->prim, stream, s->nargs, args) != dnnl_success) return 1;
    return api.stream_wait(stream) != dnnl_success;
}

static const lntune_bench_peer peers[] = {
    {"onednn3", LNTUNE_BENCH_LAYERNORM, open_layernorm, run, close_state},
    {"onednn3", LNTUNE_BENCH_RMSNORM, open_rmsnorm, run, close_state},
};

const lntune_bench_family lntune_bench_onednn3_family = {peers, sizeof peers / sizeof peers[0],
                                                         init, fini};
