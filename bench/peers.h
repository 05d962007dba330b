/*
 * peers.h - the in-process implementations the bench times, behind one small interface, so that
 * the runner treats lntune, oneDNN, ONNX Runtime, ggml, the naive kernel and the copies alike.
 * Each peers_*.c file exports a table of them; PyTorch runs in its own process (peers_torch.c).
 * The peers that are not part of the build (oneDNN 3.x, ONNX Runtime, ggml, PyTorch) come from
 * the folder bench/install-deps fills.
 */
#ifndef LNTUNE_BENCH_PEERS_H
#define LNTUNE_BENCH_PEERS_H

#include "bench.h"

#include <stddef.h>
#include <stdint.h>

enum { LNTUNE_BENCH_LAYERNORM = 0, LNTUNE_BENCH_RMSNORM = 1, LNTUNE_BENCH_COPY = 2 };

/*
 * One problem: y = norm(x) * gamma (+ beta), rows x H contiguous, x, y, gamma and beta of one
 * element type. gamma_f32 and beta_f32 hold the same values widened to fp32, for a peer that
 * takes its scale and shift only in fp32 (oneDNN 2.x and 3.2).
 */
typedef struct lntune_bench_problem {
    int64_t rows, H;
    float eps;
    int type;                     /* LNTUNE_TYPE_* (core/dtypes.h) */
    const void *x, *gamma, *beta; /* beta: LayerNorm only */
    void *y;
    const float *gamma_f32, *beta_f32;
    int threads;
} lntune_bench_problem;

typedef struct lntune_bench_peer {
    const char *impl; /* record key */
    int op;           /* LNTUNE_BENCH_* */
    /*
     * Prepares state for one problem (pointers included). Returns LNTUNE_OK, or another code
     * with the reason in note: the peer is then reported as n/a for this shape.
     */
    int (*open)(const lntune_bench_problem *p, void **state, char *note, size_t notelen);
    int (*run)(void *state); /* one call; non-zero on failure */
    void (*close)(void *state);
} lntune_bench_peer;

/* Process-wide setup of a peer family (e.g. opening the runtime); may be NULL. */
typedef struct lntune_bench_family {
    const lntune_bench_peer *peers;
    size_t npeers;
    int (*init)(const lntune_bench_config *cfg, char *note, size_t notelen);
    void (*fini)(void);
} lntune_bench_family;

extern const lntune_bench_family lntune_bench_naive_copy_family;
extern const lntune_bench_family lntune_bench_onednn_family;  /* 2.x; n/a without its header */
extern const lntune_bench_family lntune_bench_onednn3_family; /* libdnnl.so.3, at run time */
extern const lntune_bench_family lntune_bench_ort_family;     /* libonnxruntime, at run time */
extern const lntune_bench_family lntune_bench_ggml_family;    /* libggml-cpu.so, at run time */
extern const lntune_bench_family lntune_bench_lntune_family;  /* empty without the runtime */
extern const lntune_bench_family lntune_bench_export_family;  /* config's export_lib */

/*
 * ONNX Runtime's SkipLayerNormalization (com.microsoft: Add & Norm), for bench_residual:
 * y = LayerNorm(x + residual) * gamma + beta, and the sum into residual_out where it is not NULL;
 * all of one element type. open loads the library (peers_ort.c) on first use; it returns
 * LNTUNE_OK or another code with the reason in note (version and node on success).
 */
typedef struct lntune_bench_skip_problem {
    int64_t rows, H;
    float eps;
    int type; /* LNTUNE_TYPE_* */
    const void *x, *residual, *gamma, *beta;
    void *y, *residual_out;
    int threads;
} lntune_bench_skip_problem;
int lntune_bench_ort_skip_open(const lntune_bench_skip_problem *p, void **state, char *note,
                               size_t notelen);
int lntune_bench_ort_skip_run(void *state); /* non-zero on failure */
void lntune_bench_ort_skip_close(void *state);

/*
 * Runs the PyTorch script at cfg's threads on shapes and appends its records, with cfg's python,
 * else the peers folder's bin/python3 where there is one, else /usr/bin/python3. A missing
 * Python or torch adds n/a records saying so; it is not an error.
 */
int lntune_bench_torch(const lntune_bench_config *cfg, const lntune_bench_shape *shapes,
                       size_t nshapes, int threads, lntune_bench_records *out);

/* A peer's open_layernorm and open_rmsnorm over its open_norm(op, p, out, note, notelen). */
#define LNTUNE_BENCH_NORM_OPENERS(open_norm)                                                       \
    static int open_layernorm(const lntune_bench_problem *p, void **out, char *note,               \
                              size_t notelen) {                                                    \
        return open_norm(LNTUNE_BENCH_LAYERNORM, p, out, note, notelen);                           \
    }                                                                                              \
    static int open_rmsnorm(const lntune_bench_problem *p, void **out, char *note,                 \
                            size_t notelen) {                                                      \
        return open_norm(LNTUNE_BENCH_RMSNORM, p, out, note, notelen);                             \
    }

#endif /* LNTUNE_BENCH_PEERS_H */
