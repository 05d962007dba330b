/*
 * peers_ort.c - ONNX Runtime's CPU execution provider ("ort"): a one-node ONNX model per problem,
 * LayerNormalization (opset 17: x, scale, bias) or RMSNormalization (opset 23: x, scale), with
 * gamma and beta as the model's initializers, as an exported model holds its weights. The
 * library is loaded at run time: bench/install-deps installs the onnxruntime CPU wheel into the
 * peers' environment, and the wheel ships onnxruntime/capi/libonnxruntime.so.VERSION, the C
 * library itself, whose only entry point is OrtGetApiBase. LNTUNE_BENCH_ORT=PATH picks another.
 *
 * The model is serialized here (the few protobuf fields of onnx.proto it needs; no onnx package),
 * and the session runs with intra_op_num_threads = the bench's threads, inter_op 1, the default
 * graph optimizations and spinning. x and y are the bench's buffers wrapped as OrtValues
 * (CreateTensorWithDataAsOrtValue), y passed to Run as a preallocated output, so a call is Run
 * on the same bytes as every other peer's, with no allocation of its output.
 *
 * OrtApi is a table of function pointers that ONNX Runtime only ever appends to, so the entries
 * used here keep their positions in every 1.x release; the positions below are those of
 * onnxruntime_c_api.h (include/onnxruntime/core/session/, microsoft/onnxruntime, API 13), and
 * load() checks the table on CreateStatus, GetErrorCode and GetErrorMessage before using it.
 */
#define _GNU_SOURCE
#include "peers.h"

#include "dtypes.h"
#include "lntune.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct OrtStatus OrtStatus;
typedef struct OrtEnv OrtEnv;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtValue OrtValue;
typedef struct OrtMemoryInfo OrtMemoryInfo;

typedef struct {
    const void *(*GetApi)(uint32_t version); /* const OrtApi * */
    const char *(*GetVersionString)(void);
} OrtApiBase;

/* Positions in struct OrtApi. */
enum {
    CREATE_STATUS = 0,
    GET_ERROR_CODE = 1,
    GET_ERROR_MESSAGE = 2,
    CREATE_ENV = 3,
    CREATE_SESSION_FROM_ARRAY = 8,
    RUN = 9,
    CREATE_SESSION_OPTIONS = 10,
    SET_INTRA_OP_NUM_THREADS = 24,
    SET_INTER_OP_NUM_THREADS = 25,
    CREATE_TENSOR_WITH_DATA_AS_ORT_VALUE = 49,
    CREATE_CPU_MEMORY_INFO = 69,
    RELEASE_ENV = 92,
    RELEASE_STATUS = 93,
    RELEASE_MEMORY_INFO = 94,
    RELEASE_SESSION = 95,
    RELEASE_VALUE = 96,
    RELEASE_SESSION_OPTIONS = 100,
    API_VERSION = 13 /* the newest of these entries is older than API 13 */
};
enum { ORT_FAIL = 1, ORT_LOGGING_LEVEL_ERROR = 3, OrtArenaAllocator = 1, OrtMemTypeDefault = 0 };
/* ONNXTensorElementDataType, as onnx.proto's TensorProto.DataType */
enum { ONNX_FLOAT = 1, ONNX_FLOAT16 = 10, ONNX_BFLOAT16 = 16 };

static struct {
    OrtStatus *(*CreateStatus)(int code, const char *msg);
    int (*GetErrorCode)(const OrtStatus *);
    const char *(*GetErrorMessage)(const OrtStatus *);
    OrtStatus *(*CreateEnv)(int level, const char *logid, OrtEnv **out);
    OrtStatus *(*CreateSessionFromArray)(const OrtEnv *, const void *model, size_t len,
                                         const OrtSessionOptions *, OrtSession **out);
    OrtStatus *(*Run)(OrtSession *, const void *run_options, const char *const *input_names,
                      const OrtValue *const *inputs, size_t ninputs,
                      const char *const *output_names, size_t noutputs, OrtValue **outputs);
    OrtStatus *(*CreateSessionOptions)(OrtSessionOptions **out);
    OrtStatus *(*SetIntraOpNumThreads)(OrtSessionOptions *, int);
    OrtStatus *(*SetInterOpNumThreads)(OrtSessionOptions *, int);
    OrtStatus *(*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo *, void *data, size_t len,
                                                 const int64_t *shape, size_t rank, int type,
                                                 OrtValue **out);
    OrtStatus *(*CreateCpuMemoryInfo)(int allocator_type, int mem_type, OrtMemoryInfo **out);
    void (*ReleaseEnv)(OrtEnv *);
    void (*ReleaseStatus)(OrtStatus *);
    void (*ReleaseMemoryInfo)(OrtMemoryInfo *);
    void (*ReleaseSession)(OrtSession *);
    void (*ReleaseValue)(OrtValue *);
    void (*ReleaseSessionOptions)(OrtSessionOptions *);
} ort;

static void *library; /* kept until exit once loaded, as oneDNN 3's */
static char version[24];
static OrtEnv *env;
static OrtMemoryInfo *cpu_memory;

/* The message of a failed call, into note, and the status released. Returns 1 if it failed. */
static int failed(OrtStatus *st, const char *what, char *note, size_t notelen) {
    if (!st) return 0;
    if (note)
        snprintf(note, notelen, "ONNX Runtime %s: %s: %s", version, what, ort.GetErrorMessage(st));
    ort.ReleaseStatus(st);
    return 1;
}

/* The wheel's library: LNTUNE_BENCH_ORT, else the newest match in the peers' site-packages. */
static int find_library(char *path, size_t pathlen, char *note, size_t notelen) {
    const char *set = getenv("LNTUNE_BENCH_ORT");
    if (set && set[0]) {
        snprintf(path, pathlen, "%s", set);
        return LNTUNE_OK;
    }
    char pattern[4200];
    snprintf(pattern, sizeof pattern,
             "%s/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.*",
             lntune_bench_peers_dir());
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        snprintf(note, notelen,
                 "no onnxruntime wheel in %s (bench/install-deps, or LNTUNE_BENCH_ORT=PATH)",
                 lntune_bench_peers_dir());
        return LNTUNE_EUNSUPPORTED;
    }
    snprintf(path, pathlen, "%s", g.gl_pathv[g.gl_pathc - 1]);
    globfree(&g);
    return LNTUNE_OK;
}

static int load(char *note, size_t notelen) {
    if (library) return LNTUNE_OK;
    char path[4096];
    int rc = find_library(path, sizeof path, note, notelen);
    if (rc != LNTUNE_OK) return rc;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(note, notelen, "dlopen: %s", dlerror());
        return LNTUNE_EIO;
    }
    const OrtApiBase *(*get_base)(void) = (const OrtApiBase *(*)(void))dlsym(h, "OrtGetApiBase");
    const OrtApiBase *base = get_base ? get_base() : NULL;
    void *const *api = base ? (void *const *)base->GetApi(API_VERSION) : NULL;
    if (!api) {
        snprintf(note, notelen, "%s: no OrtGetApiBase or no C API %d", path, API_VERSION);
        dlclose(h);
        return LNTUNE_EIO;
    }
    snprintf(version, sizeof version, "%s", base->GetVersionString());
    static const struct {
        int at;
        void **slot;
    } table[] = {
        {CREATE_STATUS, (void **)&ort.CreateStatus},
        {GET_ERROR_CODE, (void **)&ort.GetErrorCode},
        {GET_ERROR_MESSAGE, (void **)&ort.GetErrorMessage},
        {CREATE_ENV, (void **)&ort.CreateEnv},
        {CREATE_SESSION_FROM_ARRAY, (void **)&ort.CreateSessionFromArray},
        {RUN, (void **)&ort.Run},
        {CREATE_SESSION_OPTIONS, (void **)&ort.CreateSessionOptions},
        {SET_INTRA_OP_NUM_THREADS, (void **)&ort.SetIntraOpNumThreads},
        {SET_INTER_OP_NUM_THREADS, (void **)&ort.SetInterOpNumThreads},
        {CREATE_TENSOR_WITH_DATA_AS_ORT_VALUE, (void **)&ort.CreateTensorWithDataAsOrtValue},
        {CREATE_CPU_MEMORY_INFO, (void **)&ort.CreateCpuMemoryInfo},
        {RELEASE_ENV, (void **)&ort.ReleaseEnv},
        {RELEASE_STATUS, (void **)&ort.ReleaseStatus},
        {RELEASE_MEMORY_INFO, (void **)&ort.ReleaseMemoryInfo},
        {RELEASE_SESSION, (void **)&ort.ReleaseSession},
        {RELEASE_VALUE, (void **)&ort.ReleaseValue},
        {RELEASE_SESSION_OPTIONS, (void **)&ort.ReleaseSessionOptions},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
        if (!(*table[i].slot = api[table[i].at])) {
            snprintf(note, notelen, "ONNX Runtime %s: C API entry %d is empty", version,
                     table[i].at);
            dlclose(h);
            return LNTUNE_EIO;
        }
    /* The first entries, checked on a status of our own: a table laid out otherwise fails here. */
    OrtStatus *probe = ort.CreateStatus(ORT_FAIL, "lntune");
    const int table_ok = probe && ort.GetErrorCode(probe) == ORT_FAIL &&
                         strcmp(ort.GetErrorMessage(probe), "lntune") == 0;
    if (probe && table_ok) ort.ReleaseStatus(probe);
    if (!table_ok) {
        snprintf(note, notelen, "ONNX Runtime %s: its C API table is not laid out as expected",
                 version);
        dlclose(h);
        return LNTUNE_EIO;
    }
    library = h;
    return LNTUNE_OK;
}

static int init(const lntune_bench_config *cfg, char *note, size_t notelen) {
    (void)cfg;
    int rc = load(note, notelen);
    if (rc != LNTUNE_OK) return rc;
    if (failed(ort.CreateEnv(ORT_LOGGING_LEVEL_ERROR, "lntune-bench", &env), "CreateEnv", note,
               notelen) ||
        failed(ort.CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &cpu_memory),
               "CreateCpuMemoryInfo", note, notelen))
        return LNTUNE_EUNSUPPORTED;
    return LNTUNE_OK;
}

static void fini(void) {
    if (cpu_memory) ort.ReleaseMemoryInfo(cpu_memory);
    if (env) ort.ReleaseEnv(env);
    cpu_memory = NULL, env = NULL;
}

/* ---- The model: protobuf's wire format, the fields of onnx.proto that a one-node graph uses. */

typedef struct {
    uint8_t *b;
    size_t n, cap;
    int oom;
} pb;

static void pb_raw(pb *p, const void *v, size_t n) {
    if (p->oom) return;
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + n) cap *= 2;
        uint8_t *b = realloc(p->b, cap);
        if (!b) {
            p->oom = 1;
            return;
        }
        p->b = b, p->cap = cap;
    }
    memcpy(p->b + p->n, v, n);
    p->n += n;
}

static void pb_varint(pb *p, uint64_t v) {
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(p, t, k);
}

static void pb_int(pb *p, int field, int64_t v) { /* wire type 0 */
    pb_varint(p, (uint64_t)field << 3);
    pb_varint(p, (uint64_t)v);
}

static void pb_float(pb *p, int field, float v) { /* wire type 5, little-endian */
    pb_varint(p, (uint64_t)field << 3 | 5);
    pb_raw(p, &v, 4);
}

static void pb_bytes(pb *p, int field, const void *v, size_t n) { /* wire type 2 */
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, n);
    pb_raw(p, v, n);
}

static void pb_str(pb *p, int field, const char *s) {
    pb_bytes(p, field, s, strlen(s));
}

/* A finished message as a field of p; the message is freed. */
static void pb_msg(pb *p, int field, pb *m) {
    if (m->oom) p->oom = 1;
    pb_bytes(p, field, m->b, m->n);
    free(m->b);
    *m = (pb){0};
}

/* ValueInfoProto: name, a tensor type (TypeProto.tensor_type) of elem_type and shape. */
static void value_info(pb *graph, int field, const char *name, int elem, const int64_t *dims,
                       int rank) {
    pb shape = {0}, tensor = {0}, type = {0}, vi = {0};
    for (int i = 0; i < rank; ++i) {
        pb dim = {0};
        pb_int(&dim, 1, dims[i]); /* Dimension.dim_value */
        pb_msg(&shape, 1, &dim);  /* TensorShapeProto.dim */
    }
    pb_int(&tensor, 1, elem);   /* TypeProto.Tensor.elem_type */
    pb_msg(&tensor, 2, &shape); /* .shape */
    pb_msg(&type, 1, &tensor);  /* TypeProto.tensor_type */
    pb_str(&vi, 1, name);       /* ValueInfoProto.name */
    pb_msg(&vi, 2, &type);      /* .type */
    pb_msg(graph, field, &vi);
}

/* TensorProto: dims, data_type, name, raw_data (little-endian, as the bench's buffers). */
static void initializer(pb *graph, const char *name, int elem, int64_t n, const void *data,
                        size_t es) {
    pb t = {0};
    pb_int(&t, 1, n);
    pb_int(&t, 2, elem);
    pb_str(&t, 8, name);
    pb_bytes(&t, 9, data, (size_t)n * es);
    pb_msg(graph, 5, &t); /* GraphProto.initializer */
}

/* One node: its graph inputs (fed at each Run), its initializers (gamma, beta) and its outputs
 * (an empty name skips an optional one; the others are the graph's outputs). */
typedef struct {
    const char *op_type, *domain; /* domain: "" (ONNX) or "com.microsoft" (opset 1) */
    int opset;                    /* of the default domain */
    int axis;                     /* 1: an axis = -1 attribute */
    const char *in[2];
    int nin;
    const char *init[2];
    const void *init_data[2];
    int ninit;
    const char *out[4];
    int nout;
    int64_t dims[3], H;
    int rank, elem, type;
    float eps;
} node_spec;

/* ModelProto: ir_version, opset_import, producer_name, graph (node, name, initializer, input,
 * output). */
static int build_model(const node_spec *n, pb *model) {
    pb node = {0}, attr = {0}, graph = {0}, opsetid = {0};
    for (int i = 0; i < n->nin; ++i) pb_str(&node, 1, n->in[i]); /* NodeProto.input */
    for (int i = 0; i < n->ninit; ++i) pb_str(&node, 1, n->init[i]);
    for (int i = 0; i < n->nout; ++i) pb_str(&node, 2, n->out[i]); /* .output */
    pb_str(&node, 3, "norm");
    pb_str(&node, 4, n->op_type);
    if (n->axis) {
        pb_str(&attr, 1, "axis"); /* AttributeProto: name, i, type INT (2) */
        pb_int(&attr, 3, -1);
        pb_int(&attr, 20, 2);
        pb_msg(&node, 5, &attr);
    }
    pb_str(&attr, 1, "epsilon"); /* name, f, type FLOAT (1) */
    pb_float(&attr, 2, n->eps);
    pb_int(&attr, 20, 1);
    pb_msg(&node, 5, &attr);
    if (n->domain[0]) pb_str(&node, 7, n->domain);
    pb_msg(&graph, 1, &node); /* GraphProto.node */
    pb_str(&graph, 2, "lntune_bench");
    for (int i = 0; i < n->ninit; ++i)
        initializer(&graph, n->init[i], n->elem, n->H, n->init_data[i], lntune_type_size(n->type));
    for (int i = 0; i < n->nin; ++i) value_info(&graph, 11, n->in[i], n->elem, n->dims, n->rank);
    for (int i = 0; i < n->nout; ++i)
        if (n->out[i][0]) value_info(&graph, 12, n->out[i], n->elem, n->dims, n->rank);
    pb_int(model, 1, n->opset >= 23 ? 11 : 8); /* ir_version: ONNX 1.18's for opset 23 */
    pb_str(&opsetid, 1, "");                   /* OperatorSetIdProto.domain */
    pb_int(&opsetid, 2, n->opset);             /* .version */
    pb_msg(model, 8, &opsetid);
    if (n->domain[0]) {
        pb_str(&opsetid, 1, n->domain);
        pb_int(&opsetid, 2, 1);
        pb_msg(model, 8, &opsetid);
    }
    pb_str(model, 2, "lntune bench"); /* producer_name */
    pb_msg(model, 7, &graph);
    return model->oom ? LNTUNE_ENOMEM : LNTUNE_OK;
}

enum { MAXV = 4 };

typedef struct {
    OrtSession *session;
    OrtValue *in[2], *out[MAXV];
    const char *in_names[2], *out_names[MAXV];
    size_t nin, nout;
} state;

static void close_state(void *st) {
    state *s = st;
    if (!s) return;
    for (size_t i = 0; i < s->nin; ++i)
        if (s->in[i]) ort.ReleaseValue(s->in[i]);
    for (size_t i = 0; i < s->nout; ++i)
        if (s->out[i]) ort.ReleaseValue(s->out[i]);
    if (s->session) ort.ReleaseSession(s->session);
    free(s);
}

/*
 * A session of one node at threads, its graph inputs wrapping in_data and its outputs out_data
 * (one per non-empty output name). Returns LNTUNE_OK or a code with ORT's message in note.
 */
static int open_node(const node_spec *n, void *const *in_data, void *const *out_data, int threads,
                     void **out, char *note, size_t notelen) {
    pb model = {0};
    int rc = build_model(n, &model);
    state *s = rc == LNTUNE_OK ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        free(model.b);
        return rc == LNTUNE_OK ? LNTUNE_ENOMEM : rc;
    }
    size_t elements = 1;
    for (int i = 0; i < n->rank; ++i) elements *= (size_t)n->dims[i];
    const size_t bytes = elements * lntune_type_size(n->type);
    char what[80];
    snprintf(what, sizeof what, "%s (%s opset %d)", n->op_type, n->domain[0] ? n->domain : "ONNX",
             n->domain[0] ? 1 : n->opset);
    OrtSessionOptions *opts = NULL;
    int bad =
        failed(ort.CreateSessionOptions(&opts), "session options", note, notelen) ||
        failed(ort.SetIntraOpNumThreads(opts, threads), "intra_op_num_threads", note, notelen) ||
        failed(ort.SetInterOpNumThreads(opts, 1), "inter_op_num_threads", note, notelen) ||
        failed(ort.CreateSessionFromArray(env, model.b, model.n, opts, &s->session), what, note,
               notelen);
    for (int i = 0; i < n->nin && !bad; ++i) {
        s->in_names[s->nin] = n->in[i];
        bad = failed(ort.CreateTensorWithDataAsOrtValue(cpu_memory, in_data[i], bytes, n->dims,
                                                        (size_t)n->rank, n->elem, &s->in[s->nin++]),
                     "wrapping an input", note, notelen);
    }
    for (int i = 0, k = 0; i < n->nout && !bad; ++i) {
        if (!n->out[i][0]) continue;
        s->out_names[s->nout] = n->out[i];
        bad =
            failed(ort.CreateTensorWithDataAsOrtValue(cpu_memory, out_data[k++], bytes, n->dims,
                                                      (size_t)n->rank, n->elem, &s->out[s->nout++]),
                   "wrapping an output", note, notelen);
    }
    if (opts) ort.ReleaseSessionOptions(opts);
    free(model.b);
    if (bad) {
        close_state(s);
        return LNTUNE_EUNSUPPORTED;
    }
    snprintf(note, notelen, "ONNX Runtime %s CPU, %s, intra_op_num_threads %d, preallocated out",
             version, what, threads);
    *out = s;
    return LNTUNE_OK;
}

static int open_norm(int op, const lntune_bench_problem *p, void **out, char *note,
                     size_t notelen) {
    if (!env) {
        snprintf(note, notelen, "ONNX Runtime: no environment");
        return LNTUNE_EUNSUPPORTED;
    }
    static const int elems[] = {ONNX_FLOAT, ONNX_FLOAT16, ONNX_BFLOAT16}; /* LNTUNE_TYPE_* */
    const int rms = op == LNTUNE_BENCH_RMSNORM;
    const node_spec n = {.op_type = rms ? "RMSNormalization" : "LayerNormalization",
                         .domain = "",
                         .opset = rms ? 23 : 17,
                         .axis = 1,
                         .in = {"x"},
                         .nin = 1,
                         .init = {"gamma", "beta"},
                         .init_data = {p->gamma, p->beta},
                         .ninit = rms ? 1 : 2,
                         .out = {"y"},
                         .nout = 1,
                         .dims = {p->rows, p->H},
                         .H = p->H,
                         .rank = 2,
                         .elem = elems[p->type],
                         .type = p->type,
                         .eps = p->eps};
    void *const in[] = {(void *)p->x}, *const outs[] = {p->y};
    return open_node(&n, in, outs, p->threads, out, note, notelen);
}

LNTUNE_BENCH_NORM_OPENERS(open_norm)

static int run(void *st) {
    state *s = st;
    OrtValue *outv[MAXV];
    memcpy(outv, s->out, sizeof outv);
    OrtStatus *r = ort.Run(s->session, NULL, s->in_names, (const OrtValue *const *)s->in, s->nin,
                           s->out_names, s->nout, outv);
    if (r) {
        ort.ReleaseStatus(r);
        return 1;
    }
    return memcmp(outv, s->out, sizeof outv) != 0; /* Run must have written into the bench's */
}

int lntune_bench_ort_skip_open(const lntune_bench_skip_problem *p, void **out, char *note,
                               size_t notelen) {
    if (!env && init(NULL, note, notelen) != LNTUNE_OK) return LNTUNE_EUNSUPPORTED;
    static const int elems[] = {ONNX_FLOAT, ONNX_FLOAT16, ONNX_BFLOAT16}; /* LNTUNE_TYPE_* */
    /* SkipLayerNormalization's outputs: output, mean, inv_std_var, input_skip_bias_sum. Its
     * input is [batch, sequence, hidden]: one batch of rows. */
    const node_spec n = {.op_type = "SkipLayerNormalization",
                         .domain = "com.microsoft",
                         .opset = 17,
                         .in = {"x", "skip"},
                         .nin = 2,
                         .init = {"gamma", "beta"},
                         .init_data = {p->gamma, p->beta},
                         .ninit = 2,
                         .out = {"y", "", "", "sum"},
                         .nout = p->residual_out ? 4 : 1,
                         .dims = {1, p->rows, p->H},
                         .H = p->H,
                         .rank = 3,
                         .elem = elems[p->type],
                         .type = p->type,
                         .eps = p->eps};
    void *const in[] = {(void *)p->x, (void *)p->residual}, *const outs[] = {p->y, p->residual_out};
    return open_node(&n, in, outs, p->threads, out, note, notelen);
}

int lntune_bench_ort_skip_run(void *st) {
    return run(st);
}

void lntune_bench_ort_skip_close(void *st) {
    close_state(st);
}

static const lntune_bench_peer peers[] = {
    {"ort", LNTUNE_BENCH_LAYERNORM, open_layernorm, run, close_state},
    {"ort", LNTUNE_BENCH_RMSNORM, open_rmsnorm, run, close_state},
};

const lntune_bench_family lntune_bench_ort_family = {peers, sizeof peers / sizeof peers[0], init,
                                                     fini};
