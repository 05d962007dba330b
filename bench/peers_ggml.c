/*
 * peers_ggml.c - ggml, the tensor library under llama.cpp ("ggml"): its CPU backend running the
 * graph llama.cpp builds for a norm layer. LayerNorm is ggml_norm, then ggml_mul by gamma and
 * ggml_add of beta (llama.cpp's build_norm for LLM_NORM); RMSNorm is ggml_rms_norm then ggml_mul
 * by gamma, which the CPU backend fuses into one pass (ggml_cpu_try_fuse_ops) as it does under
 * llama.cpp. Every node's output is the bench's y, as ggml-alloc places an op that can run in
 * place on its input's buffer; the graph is built once per problem and each call is
 * ggml_backend_graph_compute on the CPU backend at the bench's thread count
 * (ggml_backend_cpu_set_n_threads). fp32 only: ggml's CPU norm and rms_norm read f32 rows (and
 * abort on others), the type llama.cpp keeps its activations in.
 *
 * The library is loaded at run time: bench/install-deps builds ggml's CPU library alone (no BLAS,
 * no other backend, GGML_NATIVE) from the sources vendored in the llama-cpp-python sdist into
 * $LNTUNE_BENCH_PEERS/ggml; LNTUNE_BENCH_GGML=PATH names another libggml-cpu.so. ggml has no
 * stable ABI, but the functions called here take and return opaque handles or plain values only
 * (no struct ggml_tensor field is touched: the tensors get their memory through
 * ggml_backend_tensor_alloc on buffers that wrap the bench's own), and ggml_init_params has been
 * { mem_size, mem_buffer, no_alloc } since ggml's first release. Declarations from the pinned
 * release's include/ggml.h, ggml-backend.h and ggml-cpu.h (ggml 0.25.3, llama-cpp-python 0.3.36).
 */
#define _GNU_SOURCE
#include "peers.h"

#include "dtypes.h"
#include "lntune.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ggml_context;
struct ggml_tensor;
struct ggml_cgraph;
typedef struct ggml_backend *ggml_backend_t;
typedef struct ggml_backend_buffer *ggml_backend_buffer_t;
struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
enum { GGML_TYPE_F32 = 0, GGML_STATUS_SUCCESS = 0 };

static struct {
    const char *(*version)(void);
    const char *(*commit)(void);
    size_t (*tensor_overhead)(void);
    size_t (*graph_overhead)(void);
    struct ggml_context *(*init)(struct ggml_init_params);
    void (*free)(struct ggml_context *);
    struct ggml_tensor *(*new_tensor_1d)(struct ggml_context *, int type, int64_t ne0);
    struct ggml_tensor *(*new_tensor_2d)(struct ggml_context *, int type, int64_t ne0, int64_t ne1);
    struct ggml_tensor *(*norm)(struct ggml_context *, struct ggml_tensor *, float eps);
    struct ggml_tensor *(*rms_norm)(struct ggml_context *, struct ggml_tensor *, float eps);
    struct ggml_tensor *(*mul)(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *);
    struct ggml_tensor *(*add)(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *);
    struct ggml_cgraph *(*new_graph)(struct ggml_context *);
    void (*build_forward_expand)(struct ggml_cgraph *, struct ggml_tensor *);
    ggml_backend_t (*backend_cpu_init)(void);
    void (*backend_cpu_set_n_threads)(ggml_backend_t, int);
    void (*backend_free)(ggml_backend_t);
    ggml_backend_buffer_t (*backend_cpu_buffer_from_ptr)(void *, size_t);
    void (*backend_buffer_free)(ggml_backend_buffer_t);
    int (*backend_tensor_alloc)(ggml_backend_buffer_t, struct ggml_tensor *, void *addr);
    int (*backend_graph_compute)(ggml_backend_t, struct ggml_cgraph *);
} api;

static const struct {
    const char *name;
    void **slot;
} symbols[] = {
    {"ggml_version", (void **)&api.version},
    {"ggml_commit", (void **)&api.commit},
    {"ggml_tensor_overhead", (void **)&api.tensor_overhead},
    {"ggml_graph_overhead", (void **)&api.graph_overhead},
    {"ggml_init", (void **)&api.init},
    {"ggml_free", (void **)&api.free},
    {"ggml_new_tensor_1d", (void **)&api.new_tensor_1d},
    {"ggml_new_tensor_2d", (void **)&api.new_tensor_2d},
    {"ggml_norm", (void **)&api.norm},
    {"ggml_rms_norm", (void **)&api.rms_norm},
    {"ggml_mul", (void **)&api.mul},
    {"ggml_add", (void **)&api.add},
    {"ggml_new_graph", (void **)&api.new_graph},
    {"ggml_build_forward_expand", (void **)&api.build_forward_expand},
    {"ggml_backend_cpu_init", (void **)&api.backend_cpu_init},
    {"ggml_backend_cpu_set_n_threads", (void **)&api.backend_cpu_set_n_threads},
    {"ggml_backend_free", (void **)&api.backend_free},
    {"ggml_backend_cpu_buffer_from_ptr", (void **)&api.backend_cpu_buffer_from_ptr},
    {"ggml_backend_buffer_free", (void **)&api.backend_buffer_free},
    {"ggml_backend_tensor_alloc", (void **)&api.backend_tensor_alloc},
    {"ggml_backend_graph_compute", (void **)&api.backend_graph_compute},
};

static void *library; /* kept until exit once loaded */
static char version[48];
static ggml_backend_t backend;

static int load(char *note, size_t notelen) {
    if (library) return LNTUNE_OK;
    char fallback[4096];
    const char *path = getenv("LNTUNE_BENCH_GGML");
    if (!path || !path[0]) {
        snprintf(fallback, sizeof fallback, "%s/ggml/lib/libggml-cpu.so", lntune_bench_peers_dir());
        path = fallback;
    }
    if (access(path, R_OK) != 0) {
        snprintf(note, notelen, "no %s (bench/install-deps, or LNTUNE_BENCH_GGML=PATH)", path);
        return LNTUNE_EUNSUPPORTED;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(note, notelen, "dlopen: %s", dlerror());
        return LNTUNE_EIO;
    }
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; ++i)
        if (!(*symbols[i].slot = dlsym(h, symbols[i].name))) { /* its libggml-base.so too */
            snprintf(note, notelen, "%s lacks %s: not the ggml this bench knows", path,
                     symbols[i].name);
            dlclose(h);
            return LNTUNE_EIO;
        }
    const char *commit = api.commit(); /* "unknown" when built from a source archive */
    snprintf(version, sizeof version, "%s%s%s%s", api.version(),
             strcmp(commit, "unknown") ? " (" : "", strcmp(commit, "unknown") ? commit : "",
             strcmp(commit, "unknown") ? ")" : "");
    library = h;
    return LNTUNE_OK;
}

static int init(const lntune_bench_config *cfg, char *note, size_t notelen) {
    (void)cfg;
    int rc = load(note, notelen);
    if (rc != LNTUNE_OK) return rc;
    if (!(backend = api.backend_cpu_init())) {
        snprintf(note, notelen, "ggml %s: no CPU backend", version);
        return LNTUNE_EUNSUPPORTED;
    }
    return LNTUNE_OK;
}

static void fini(void) {
    if (backend) api.backend_free(backend);
    backend = NULL;
}

enum { NBUF = 4 }; /* x, y, gamma, beta */

typedef struct {
    struct ggml_context *ctx;
    struct ggml_cgraph *graph;
    ggml_backend_buffer_t buf[NBUF];
} state;

static void close_state(void *st) {
    state *s = st;
    if (!s) return;
    for (int i = 0; i < NBUF; ++i)
        if (s->buf[i]) api.backend_buffer_free(s->buf[i]);
    if (s->ctx) api.free(s->ctx);
    free(s);
}

static int open_norm(int op, const lntune_bench_problem *p, void **out, char *note,
                     size_t notelen) {
    if (!backend) {
        snprintf(note, notelen, "ggml: no CPU backend");
        return LNTUNE_EUNSUPPORTED;
    }
    if (p->type != LNTUNE_TYPE_F32) {
        snprintf(note, notelen, "ggml's CPU norm and rms_norm take f32 rows only, not %s",
                 lntune_type_name(p->type));
        return LNTUNE_EUNSUPPORTED;
    }
    const int rms = op == LNTUNE_BENCH_RMSNORM;
    state *s = calloc(1, sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    /* Metadata only: tensors and the graph; their data is the bench's buffers. */
    const struct ggml_init_params params = {8 * api.tensor_overhead() + api.graph_overhead(), NULL,
                                            true};
    if (!(s->ctx = api.init(params))) {
        free(s);
        return LNTUNE_ENOMEM;
    }
    const size_t bytes = (size_t)(p->rows * p->H) * sizeof(float), wbytes = (size_t)p->H * 4;
    void *const ptrs[NBUF] = {(void *)p->x, p->y, (void *)p->gamma, (void *)p->beta};
    const size_t sizes[NBUF] = {bytes, bytes, wbytes, wbytes};
    for (int i = 0; i < (rms ? 3 : NBUF); ++i)
        if (!(s->buf[i] = api.backend_cpu_buffer_from_ptr(ptrs[i], sizes[i]))) {
            close_state(s);
            return LNTUNE_ENOMEM;
        }
    /* ne0 is the contiguous dimension: a row of H, rows of them. */
    struct ggml_tensor *x = api.new_tensor_2d(s->ctx, GGML_TYPE_F32, p->H, p->rows);
    struct ggml_tensor *g = api.new_tensor_1d(s->ctx, GGML_TYPE_F32, p->H);
    struct ggml_tensor *b = rms ? NULL : api.new_tensor_1d(s->ctx, GGML_TYPE_F32, p->H);
    struct ggml_tensor *nodes[3];
    int n = 0;
    nodes[n] = rms ? api.rms_norm(s->ctx, x, p->eps) : api.norm(s->ctx, x, p->eps);
    ++n;
    nodes[n] = api.mul(s->ctx, nodes[n - 1], g);
    ++n;
    if (!rms) nodes[n] = api.add(s->ctx, nodes[n - 1], b), ++n;
    int st = api.backend_tensor_alloc(s->buf[0], x, ptrs[0]);
    if (st == GGML_STATUS_SUCCESS) st = api.backend_tensor_alloc(s->buf[2], g, ptrs[2]);
    if (st == GGML_STATUS_SUCCESS && b) st = api.backend_tensor_alloc(s->buf[3], b, ptrs[3]);
    for (int i = 0; i < n && st == GGML_STATUS_SUCCESS; ++i)
        st = api.backend_tensor_alloc(s->buf[1], nodes[i], ptrs[1]); /* in place, in y */
    if (st != GGML_STATUS_SUCCESS) {
        snprintf(note, notelen, "ggml %s: placing the tensors failed (%d)", version, st);
        close_state(s);
        return LNTUNE_EUNSUPPORTED;
    }
    s->graph = api.new_graph(s->ctx);
    api.backend_cpu_set_n_threads(backend, p->threads); /* every problem of a run has the same */
    api.build_forward_expand(s->graph, nodes[n - 1]);
    snprintf(note, notelen, "ggml %s CPU backend, %s, %d thread%s", version,
             rms ? "rms_norm then mul (fused)" : "norm, mul, add", p->threads,
             p->threads > 1 ? "s" : "");
    *out = s;
    return LNTUNE_OK;
}

LNTUNE_BENCH_NORM_OPENERS(open_norm)

static int run(void *st) {
    state *s = st;
    return api.backend_graph_compute(backend, s->graph) != GGML_STATUS_SUCCESS;
}

static const lntune_bench_peer peers[] = {
    {"ggml", LNTUNE_BENCH_LAYERNORM, open_layernorm, run, close_state},
    {"ggml", LNTUNE_BENCH_RMSNORM, open_rmsnorm, run, close_state},
};

const lntune_bench_family lntune_bench_ggml_family = {peers, sizeof peers / sizeof peers[0], init,
                                                      fini};
