/*
 * peers_onednn.c - oneDNN's layer normalization primitive (C API of oneDNN 2.x: Debian 12's
 * libdnnl-dev, 2.6), forward inference with scale and shift, on the CPU engine. src and dst take
 * the run's type; oneDNN 2.x takes scale and shift in fp32 only, so it gets the same values
 * widened (gamma_f32, beta_f32). oneDNN 2.6 has no RMSNorm primitive, so the bench reports it as
 * n/a rather than composing one that oneDNN does not ship. Compiled against the library only
 * where CMake found its header (LNTUNE_BENCH_HAVE_ONEDNN2); elsewhere the family is n/a.
 * oneDNN 3.x is peers_onednn3.c.
 */
#include "peers.h"

#include "dtypes.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>

#if LNTUNE_BENCH_HAVE_ONEDNN2

#include <dnnl.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4]; /* src, dst, scale, shift */
} state;

static int init(const lntune_bench_config *cfg, char *note, size_t notelen) {
    (void)cfg;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        snprintf(note, notelen, "oneDNN: no CPU engine");
        return LNTUNE_EUNSUPPORTED;
    }
    return LNTUNE_OK;
}

static void fini(void) {
    if (stream) dnnl_stream_destroy(stream);
    if (engine) dnnl_engine_destroy(engine);
    stream = NULL, engine = NULL;
}

static void close_state(void *st) {
    state *s = st;
    if (!s) return;
    for (int i = 0; i < 4; ++i)
        if (s->mem[i]) dnnl_memory_destroy(s->mem[i]);
    if (s->prim) dnnl_primitive_destroy(s->prim);
    free(s);
}

static int open_layernorm(const lntune_bench_problem *p, void **out, char *note, size_t notelen) {
    if (!engine) {
        snprintf(note, notelen, "oneDNN: no CPU engine");
        return LNTUNE_EUNSUPPORTED;
    }
    state *s = calloc(1, sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    dnnl_memory_desc_t data_md, w_md;
    dnnl_layer_normalization_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_dims_t dims = {p->rows, p->H}, wdims = {p->H};
    /* Scale and shift as two tensors: the layout PyTorch and lntune take (2.6 also has a packed
     * scaleshift, which would need a copy). */
    static const dnnl_data_type_t types[] = {dnnl_f32, dnnl_f16, dnnl_bf16}; /* LNTUNE_TYPE_* */
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&data_md, 2, dims, types[p->type], dnnl_ab);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&w_md, 1, wdims, dnnl_f32, dnnl_a);
    if (st == dnnl_success)
        st = dnnl_layer_normalization_forward_desc_init(
            &desc, dnnl_forward_inference, &data_md, NULL, p->eps, dnnl_use_scale | dnnl_use_shift);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL);
    if (st == dnnl_success) st = dnnl_primitive_create(&s->prim, pd);
    void *ptr[4] = {(void *)p->x, p->y, (void *)p->gamma_f32, (void *)p->beta_f32};
    for (int i = 0; i < 4 && st == dnnl_success; ++i)
        st = dnnl_memory_create(&s->mem[i], i < 2 ? &data_md : &w_md, engine, ptr[i]);
    const char *impl = NULL;
    if (st == dnnl_success &&
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(note, notelen, "oneDNN %s", impl);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) {
        if (st == dnnl_unimplemented)
            snprintf(note, notelen, "oneDNN %d.%d implements no %s layer normalization on this CPU",
                     DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, lntune_type_name(p->type));
        else
            snprintf(note, notelen, "oneDNN: status %d creating the primitive", (int)st);
        close_state(s);
        return LNTUNE_EUNSUPPORTED;
    }
    *out = s;
    return LNTUNE_OK;
}

static int run_layernorm(void *st) {
    state *s = st;
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, s->mem[0]},
                                    {DNNL_ARG_DST, s->mem[1]},
                                    {DNNL_ARG_SCALE, s->mem[2]},
                                    {DNNL_ARG_SHIFT, s->mem[3]}};
    if (dnnl_primitive_execute(s->prim, stream, 4, args) != dnnl_success) return 1;
    return dnnl_stream_wait(stream) != dnnl_success;
}

static int open_rmsnorm(const lntune_bench_problem *p, void **out, char *note, size_t notelen) {
    (void)p, (void)out;
    snprintf(note, notelen, "oneDNN %d.%d has no RMSNorm primitive", DNNL_VERSION_MAJOR,
             DNNL_VERSION_MINOR);
    return LNTUNE_EUNSUPPORTED;
}

static const lntune_bench_peer peers[] = {
    {"onednn", LNTUNE_BENCH_LAYERNORM, open_layernorm, run_layernorm, close_state},
    {"onednn", LNTUNE_BENCH_RMSNORM, open_rmsnorm, NULL, NULL},
};

const lntune_bench_family lntune_bench_onednn_family = {peers, sizeof peers / sizeof peers[0], init,
                                                        fini};

#else /* no oneDNN 2.x header in this build */

static int init_absent(const lntune_bench_config *cfg, char *note, size_t notelen) {
    (void)cfg;
    snprintf(note, notelen,
             "built without oneDNN 2.x (its header dnnl.h: libdnnl-dev, "
             "bench/install-deps)");
    return LNTUNE_EUNSUPPORTED;
}

static const lntune_bench_peer peers[] = {
    {"onednn", LNTUNE_BENCH_LAYERNORM, NULL, NULL, NULL},
    {"onednn", LNTUNE_BENCH_RMSNORM, NULL, NULL, NULL},
};

const lntune_bench_family lntune_bench_onednn_family = {peers, sizeof peers / sizeof peers[0],
                                                        init_absent, NULL};

#endif
