/*
 * cuda_dispatch.c - lntune_layernorm and lntune_rmsnorm on CUDA device memory.
 *
 * The first call on a device index opens the driver (dlopen'd, core/cuda/cuda_driver.c) and the
 * device's primary context, the one the CUDA runtime API shares, and looks the GPU's fingerprint
 * up in the tuning database. A failure (no libcuda, the stub driver, no such device) is kept, so
 * every later call on that index returns the same LNTUNE_ENODEVICE and message without trying
 * again: a machine does not grow a GPU while a process runs.
 *
 * The first call of a descriptor on a device picks its kernel with the CPU's policy
 * (dispatch.c): the tuned winner of the bucket or the nearest tuned bucket for target "cuda",
 * loaded from its artifact (the cubin for this exact GPU, else the PTX the driver compiles),
 * launched by the source's launch line; else the built-in of the op and affine kind: PTX built
 * in at build time, or, when the build had no NVRTC, its source compiled here with NVRTC at
 * first use. fp16/bf16 data and a residual are part of the descriptor and the database key as on
 * the CPU; their built-in is one source per op, affine kind and fusion, compiled with NVRTC at
 * first use for the call's element types (so, untuned, they need NVRTC at run time). A quantized
 * y and a weight offset are keyed the same way; their built-ins are typed too, one source per op,
 * affine kind, fusion and code type (a quantized y shapes the kernel). A tuned
 * variant that cannot serve H (over its max_h, more shared memory than the GPU has) leaves the
 * shape to the built-in. Kernels are shared by every descriptor that uses them and unloaded at
 * lntune_close.
 *
 * The backward (lntune_layernorm_backward / lntune_rmsnorm_backward on device memory) takes the
 * same policy: the pair tuned for the shape (its kernel and "<symbol>_dgamma", both launch lines
 * from the artifact's source), else the built-in backward pair of its op and fusion, compiled
 * with NVRTC for its element types at first use. Kernel 1 writes dx and per-row-group fp32
 * partials of dgamma/dbeta into a workspace, kernel 2 sums them in order into dgamma/dbeta. The
 * workspace is allocated and freed on the call's stream (cuMemAllocAsync), so concurrent calls
 * on other streams never share it and nothing synchronizes. Its rows (parts) are capped by
 * lntune_cuda_backward_call_grid, by rows and H only, so a call gives the same bits every time.
 *
 * Later calls take no lock: one registry lookup, then the launch. The calling thread's current
 * context is saved and restored around the launch, so an app on another device or context is
 * not disturbed.
 */
#include "cuda_dispatch.h"

#include "builtin.h"
#include "cuda_driver.h"
#include "cuda_fingerprint.h"
#include "cuda_launch.h"
#include "cuda_types.h"
#include "dispatch.h"
#include "fusion.h"
#include "hardware.h"
#include "nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_SMEM = 48 * 1024 }; /* dynamic shared memory a kernel gets without opting in */

struct lntune_gpu_kernel {
    lntune_cuda *cu;
    void *module;
    void *function; /* NULL: a built-in that could not be loaded, message says why */
    lntune_cuda_launch launch;
    void *finish; /* a backward pair's second kernel (<symbol>_dgamma); NULL for the forward */
    lntune_cuda_backward_launch backward;
    int64_t smem_allowed; /* dynamic shared memory the function may use */
    char *key;            /* the artifact key, or the built-in's symbol */
    char *message;
    lntune_gpu_kernel *next;
};

struct lntune_gpu {
    lntune_cuda *cu; /* NULL when the device could not be opened */
    int rc;          /* LNTUNE_OK, or why not (message) */
    char message[768];
    int known; /* the tuning database has this GPU: hardware_id is its row */
    int64_t hardware_id;
    lntune_gpu_kernel *kernels;
};

/* Opens device index (under ctx->lock); NULL when out of memory. */
static lntune_gpu *gpu_open(lntune *ctx, int index) {
    if (ctx->gpus[index]) return ctx->gpus[index];
    lntune_gpu *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    lntune_cuda *cu = NULL;
    int rc = lntune_cuda_open(index, &cu);
    if (rc == LNTUNE_ENOMEM && !cu) {
        free(g);
        return NULL;
    }
    if (rc != LNTUNE_OK) {
        g->rc = rc == LNTUNE_ENOMEM ? LNTUNE_ENOMEM : LNTUNE_ENODEVICE;
        snprintf(g->message, sizeof g->message, "CUDA device %d: %s", index,
                 lntune_cuda_errmsg(cu));
        lntune_cuda_close(cu);
        lntune_ctx_debug(ctx, "%s", g->message);
        ctx->gpus[index] = g;
        return g;
    }
    lntune_cuda_restore_opener(cu); /* the app's thread keeps its context */
    g->cu = cu;
    const lntune_cuda_info *in = lntune_cuda_get_info(cu);
    lntune_gpu_info gi;
    lntune_cuda_gpu_info(in, &gi);
    if (ctx->db) {
        rc = lntune_db_find_hardware(ctx->db, gi.fingerprint, &g->hardware_id);
        g->known = rc == LNTUNE_OK;
    }
    lntune_ctx_debug(ctx, "CUDA device %d: %s, sm_%d, %d SMs, driver %d, fingerprint %s%s", index,
                     in->name, in->sm, in->multiprocessors, in->driver_version, gi.fingerprint,
                     !ctx->db   ? " (no tuning database)"
                     : g->known ? ""
                                : " (not in the tuning database: built-in kernels only)");
    ctx->gpus[index] = g;
    return g;
}

static lntune_gpu_kernel *find_kernel(lntune_gpu *g, const char *key) {
    for (lntune_gpu_kernel *k = g->kernels; k; k = k->next)
        if (strcmp(k->key, key) == 0) return k;
    return NULL;
}

static lntune_gpu_kernel *new_kernel(lntune_gpu *g, const char *key) {
    lntune_gpu_kernel *k = calloc(1, sizeof *k);
    if (!k || !(k->key = strdup(key))) {
        free(k);
        return NULL;
    }
    k->cu = g->cu;
    k->smem_allowed = DEFAULT_SMEM;
    return k;
}

static void add_kernel(lntune_gpu *g, lntune_gpu_kernel *k) {
    k->next = g->kernels;
    g->kernels = k;
}

/* NVRTC for the built-ins' sources, opened once per handle; NULL with why in err. */
static const lntune_nvrtc *get_nvrtc(lntune *ctx, char *err, size_t errlen) {
    if (!ctx->nvrtc_tried) {
        ctx->nvrtc_tried = 1;
        if (lntune_nvrtc_open(&ctx->nvrtc) != LNTUNE_OK) {
            snprintf(err, errlen, "%s", lntune_nvrtc_errmsg(ctx->nvrtc));
            lntune_nvrtc_close(ctx->nvrtc);
            ctx->nvrtc = NULL;
            return NULL;
        }
    }
    if (!ctx->nvrtc) snprintf(err, errlen, "NVRTC could not be loaded");
    return ctx->nvrtc;
}

static int is_backward(const lntune_desc *d) {
    return lntune_desc_op(d) >= LNTUNE_DESC_LAYERNORM_BACKWARD;
}

/* The built-in record serving d: for fp16/bf16, a quantized y, a weight offset, a residual or the
 * backward, the typed one of its op, affine kind, fusion and quantized y; else the first fp32 one
 * of its op and affine kind whose max_h admits H. */
static const lntune_builtin_cuda_kernel *builtin_record(const lntune_desc *d) {
    const int y = lntune_types_unpacked(lntune_desc_dtype(d)).y;
    const int quantized = lntune_type_quantized(y) ? y : 0;
    const int typed = lntune_desc_dtype(d) != 0 || lntune_desc_fusion(d) != LNTUNE_FUSION_NONE ||
                      lntune_desc_affine(d) == LNTUNE_DESC_GAMMA_OFFSET || is_backward(d);
    for (size_t i = 0; i < lntune_builtin_cuda_count; ++i) {
        const lntune_builtin_cuda_kernel *c = &lntune_builtin_cuda[i];
        if (c->op == lntune_desc_op(d) && c->affine == lntune_desc_affine(d) && c->typed == typed &&
            (!typed || (c->fusion == lntune_desc_fusion(d) && c->y == quantized)) &&
            (c->max_h == 0 || d->H <= c->max_h))
            return c;
    }
    return NULL;
}

/* The second kernel ("<symbol>_dgamma") and the launch lines of the backward pair k, whose
 * first kernel is loaded from source; 0, or -1 with err (the module unloaded). */
static int load_pair(lntune_cuda *cu, lntune_gpu_kernel *k, const char *source, const char *symbol,
                     char *err, size_t errlen) {
    char finish[300];
    snprintf(finish, sizeof finish, "%s_dgamma", symbol);
    if (lntune_cuda_backward_launch_parse(source, &k->backward) != LNTUNE_OK) {
        snprintf(err, errlen, "%s: its source has no backward launch line", symbol);
    } else if (lntune_cuda_module_function(cu, k->module, finish, &k->finish) != LNTUNE_OK) {
        snprintf(err, errlen, "no %s: %s", finish, lntune_cuda_errmsg(cu));
    } else {
        return 0;
    }
    lntune_cuda_module_unload(cu, k->module);
    k->module = k->function = NULL;
    return -1;
}

/*
 * The built-in kernel of d for d->H, loaded on first use: its PTX, else its source compiled with
 * NVRTC for this GPU (always, for a typed one: for the call's element types). Sets *k (function
 * NULL and a message on failure); returns LNTUNE_ENOMEM only.
 */
static int builtin_kernel(lntune *ctx, lntune_gpu *g, const lntune_desc *d,
                          lntune_gpu_kernel **out) {
    *out = NULL;
    const lntune_builtin_cuda_kernel *b = builtin_record(d);
    if (!b) return LNTUNE_ENOTFOUND; /* the build's table lacks this kind: a broken build */
    const lntune_types types = lntune_types_unpacked(lntune_desc_dtype(d));
    char key[192], tuple[24];
    lntune_types_format(types, tuple, sizeof tuple);
    snprintf(key, sizeof key, "%s%s%s", b->symbol, b->typed ? "/" : "", b->typed ? tuple : "");
    if ((*out = find_kernel(g, key))) return LNTUNE_OK;
    lntune_gpu_kernel *k = new_kernel(g, key);
    if (!k) return LNTUNE_ENOMEM;
    char err[1024] = "";
    const int parsed = lntune_cuda_launch_parse(b->source, &k->launch) == LNTUNE_OK;
    if (!parsed)
        snprintf(err, sizeof err, "built-in %s has no launch line", b->symbol);
    else if (b->typed)
        snprintf(err, sizeof err, "built-in %s for %s is compiled at first use", b->symbol, tuple);
    else if (!b->ptx)
        snprintf(err, sizeof err, "this build has no PTX for %s", b->symbol);
    else if (lntune_cuda_module_load(g->cu, b->ptx, b->symbol, &k->module, &k->function) !=
             LNTUNE_OK)
        snprintf(err, sizeof err, "loading the built-in PTX of %s: %s", b->symbol,
                 lntune_cuda_errmsg(g->cu));
    if (parsed && !k->function) {
        /* No usable PTX: compile the source for exactly this GPU (and these types). */
        char why[768] = "";
        lntune_cuda_type_options options;
        lntune_cuda_type_options_make(types, &options);
        const lntune_nvrtc *nv = get_nvrtc(ctx, why, sizeof why);
        lntune_nvrtc_output o;
        memset(&o, 0, sizeof o);
        if (nv && lntune_nvrtc_compile(nv, b->source, b->symbol, lntune_cuda_get_info(g->cu)->sm,
                                       LNTUNE_NVRTC_CUBIN, b->typed ? options.options : NULL,
                                       &o) != LNTUNE_OK)
            snprintf(why, sizeof why, "NVRTC: %.600s", o.message ? o.message : "failed");
        else if (nv && lntune_cuda_module_load(g->cu, o.data, b->symbol, &k->module,
                                               &k->function) != LNTUNE_OK)
            snprintf(why, sizeof why, "loading the cubin NVRTC made: %s",
                     lntune_cuda_errmsg(g->cu));
        lntune_nvrtc_output_free(&o);
        if (!k->function) {
            size_t n = strlen(err);
            snprintf(err + n, sizeof err - n, "; compiling its source at run time: %s", why);
        } else {
            lntune_ctx_debug(ctx, "built-in %s compiled with NVRTC (%s)", key, err);
        }
    }
    if (k->function && is_backward(d)) load_pair(g->cu, k, b->source, b->symbol, err, sizeof err);
    if (!k->function && !(k->message = strdup(err))) {
        free(k->key);
        free(k);
        return LNTUNE_ENOMEM;
    }
    add_kernel(g, k);
    *out = k;
    return LNTUNE_OK;
}

typedef struct {
    lntune_gpu *g;
    lntune_gpu_kernel *k;
    int backward; /* a pair: also its second kernel and backward launch line */
    char err[768];
} tuned_load;

/* lntune_db_get_artifact's callback: the cubin, else the PTX, and the launch line. */
static int load_tuned(void *ud, const lntune_artifact *a) {
    tuned_load *l = ud;
    lntune_cuda *cu = l->g->cu;
    lntune_gpu_kernel *k = l->k;
    if (!lntune_artifact_intact(a, l->err, sizeof l->err)) return 0;
    if (!a->source || lntune_cuda_launch_parse(a->source, &k->launch) != LNTUNE_OK) {
        snprintf(l->err, sizeof l->err, "its source has no launch line");
        return 0;
    }
    if (!a->symbol || !a->symbol[0]) {
        snprintf(l->err, sizeof l->err, "it names no kernel symbol");
        return 0;
    }
    char cubin_err[300] = "no cubin";
    if (a->object && a->object_len > 0) {
        if (lntune_cuda_module_load(cu, a->object, a->symbol, &k->module, &k->function) ==
            LNTUNE_OK) {
            if (l->backward) load_pair(cu, k, a->source, a->symbol, l->err, sizeof l->err);
            return 0;
        }
        snprintf(cubin_err, sizeof cubin_err, "cubin: %s", lntune_cuda_errmsg(cu));
    }
    if (a->ptx && a->ptx[0]) {
        if (lntune_cuda_module_load(cu, a->ptx, a->symbol, &k->module, &k->function) == LNTUNE_OK) {
            if (l->backward) load_pair(cu, k, a->source, a->symbol, l->err, sizeof l->err);
            return 0;
        }
        snprintf(l->err, sizeof l->err, "%s; PTX: %s", cubin_err, lntune_cuda_errmsg(cu));
    } else {
        snprintf(l->err, sizeof l->err, "%s; no PTX", cubin_err);
    }
    return 0;
}

/* The tuned kernel of best, loaded unless an earlier descriptor loaded it; NULL with err. */
static lntune_gpu_kernel *tuned_kernel(lntune *ctx, lntune_gpu *g, const lntune_best_copy *best,
                                       int backward, char *err, size_t errlen) {
    lntune_gpu_kernel *k = find_kernel(g, best->artifact_key);
    if (k) return k;
    if (!(k = new_kernel(g, best->artifact_key))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    tuned_load l = {g, k, backward, ""};
    int rc = lntune_db_get_artifact(ctx->db, best->artifact_key, load_tuned, &l);
    if (rc != LNTUNE_OK || !k->function) {
        snprintf(err, errlen, "artifact %s: %.600s", best->artifact_key,
                 rc != LNTUNE_OK ? lntune_db_errmsg(ctx->db) : l.err);
        lntune_cuda_module_unload(g->cu, k->module);
        free(k->key);
        free(k);
        return NULL;
    }
    add_kernel(g, k);
    return k;
}

/* Lets k use the dynamic shared memory H needs; 0 when it cannot. */
static int allow_smem(lntune_gpu *g, lntune_gpu_kernel *k, int64_t H) {
    const int64_t smem = lntune_cuda_launch_smem(&k->launch, H);
    if (smem <= k->smem_allowed) return 1;
    if (smem > lntune_cuda_get_info(g->cu)->max_smem_per_block ||
        lntune_cuda_set_max_smem(g->cu, k->function, smem) != LNTUNE_OK)
        return 0;
    k->smem_allowed = smem;
    return 1;
}

/* The first call of d on device index: the registry entry, inserted. Takes ctx->lock. */
static int resolve(lntune *ctx, const lntune_desc *d, uint64_t hash, int64_t rows, int index,
                   const char *fn, const lntune_entry **out) {
    pthread_mutex_lock(&ctx->lock);
    const lntune_entry *found = lntune_registry_find(&ctx->registry, d, hash);
    if (found) {
        pthread_mutex_unlock(&ctx->lock);
        *out = found;
        return LNTUNE_OK;
    }
    int rc = LNTUNE_OK;
    lntune_gpu *g = gpu_open(ctx, index);
    if (!g || g->rc != LNTUNE_OK) {
        rc = g ? lntune_ctx_fail(ctx, g->rc, "%s: %s", fn, g->message)
               : lntune_ctx_fail(ctx, LNTUNE_ENOMEM, "%s: out of memory opening CUDA device %d", fn,
                                 index);
        pthread_mutex_unlock(&ctx->lock);
        return rc;
    }
    void *saved = NULL;
    if ((rc = lntune_cuda_enter(g->cu, &saved)) != LNTUNE_OK) {
        rc = lntune_ctx_fail(ctx, LNTUNE_ENODEVICE, "%s: CUDA device %d: %s", fn, index,
                             lntune_cuda_errmsg(g->cu));
        pthread_mutex_unlock(&ctx->lock);
        return rc;
    }
    char what[160];
    lntune_dispatch_describe(d, ctx->batch_invariant ? 0 : rows, what, sizeof what);
    lntune_gpu_kernel *k = NULL;
    char why[1024] = "";
    lntune_best_copy best;
    memset(&best, 0, sizeof best);
    if (!ctx->db) {
        snprintf(why, sizeof why, "no tuning database");
    } else if (!g->known) {
        snprintf(why, sizeof why, "the tuning database has no record of this GPU");
    } else if (!ctx->code_trusted) {
        snprintf(why, sizeof why, "tuned kernels not loaded: %.900s", ctx->code_why);
    } else if (lntune_dispatch_find_best(ctx, g->hardware_id, "cuda", d, rows, &best) !=
               LNTUNE_OK) {
        snprintf(why, sizeof why, "not tuned on this GPU");
    } else {
        char err[900] = "";
        k = tuned_kernel(ctx, g, &best, is_backward(d), err, sizeof err);
        if (!k) {
            snprintf(why, sizeof why, "tuned %.200s unusable: %.700s", best.variant, err);
        } else if (k->launch.max_h > 0 && d->H > k->launch.max_h) {
            snprintf(why, sizeof why, "tuned %s serves H <= %lld", best.variant,
                     (long long)k->launch.max_h);
            k = NULL;
        } else if (!allow_smem(g, k, d->H)) {
            snprintf(why, sizeof why, "tuned %s needs more shared memory than the GPU allows",
                     best.variant);
            k = NULL;
        }
    }
    char reason[1400] = "";
    const int tuned = k != NULL;
    if (k) {
        snprintf(reason, sizeof reason, "tuned %s, measured %.0f ns at rows=%lld", best.variant,
                 best.median_ns, (long long)best.tuned_rows);
        lntune_ctx_debug(ctx, "%s on CUDA device %d: %s", what, index, reason);
    } else if ((rc = builtin_kernel(ctx, g, d, &k)) != LNTUNE_OK) {
        rc = rc == LNTUNE_ENOMEM
                 ? lntune_ctx_fail(ctx, rc, "%s: out of memory loading a CUDA kernel", fn)
                 : lntune_ctx_fail(ctx, LNTUNE_ERROR,
                                   "%s: this build has no built-in CUDA kernel for %s", fn, what);
    } else if (!k->function && is_backward(d)) {
        rc =
            lntune_ctx_fail(ctx, LNTUNE_ENODEVICE, "%s: CUDA device %d: no built-in kernel: %.600s",
                            fn, index, k->message);
    } else if (!k->function) {
        rc = lntune_ctx_fail(ctx, LNTUNE_ENODEVICE,
                             "%s: CUDA device %d: no built-in kernel: %.600s; and no tuned one "
                             "(%.200s): lntune --target cuda [--dtype ...] [--residual] "
                             "[--weight-offset] --shape H=%lld would tune one",
                             fn, index, k->message, why, (long long)d->H);
    } else if (!allow_smem(g, k, d->H)) { /* the built-ins use none: a broken build */
        rc = lntune_ctx_fail(ctx, LNTUNE_ERROR,
                             "%s: CUDA device %d: built-in %s cannot run H = %lld", fn, index,
                             k->key, (long long)d->H);
    } else {
        snprintf(reason, sizeof reason, "built-in %s (%s)", k->key, why);
        lntune_ctx_debug(ctx, "%s on CUDA device %d: %s", what, index, reason);
    }
    lntune_entry *e = rc == LNTUNE_OK ? calloc(1, sizeof *e) : NULL;
    if (e && (!(e->reason = strdup(reason)) || (tuned && !(e->variant = strdup(best.variant))))) {
        free(e->reason);
        free(e);
        e = NULL;
    }
    if (e && tuned) {
        e->tuned_H = best.H;
        e->tuned_rows = best.tuned_rows;
    }
    if (rc == LNTUNE_OK && !e)
        rc = lntune_ctx_fail(ctx, LNTUNE_ENOMEM, "%s: out of memory resolving a kernel", fn);
    if (e) {
        e->desc = *d;
        e->gpu = k;
        lntune_registry_insert(&ctx->registry, e, hash);
        *out = e;
    }
    lntune_cuda_leave(g->cu, saved);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

/* The entry of (op, types, affine, fusion, rows, H) on device index: the registry's, else
 * resolved. */
static int find(lntune *ctx, int op, lntune_types types, int affine, int fusion, int64_t rows,
                int64_t H, int index, const char *fn, const lntune_entry **e) {
    lntune_desc d = lntune_desc_make(op, lntune_types_packed(types), affine, fusion,
                                     lntune_dispatch_bucket(ctx, rows), H);
    d.kind |= (uint64_t)(index + 1) << 24;
    const uint64_t hash = lntune_desc_hash(&d);
    if ((*e = lntune_registry_find(&ctx->registry, &d, hash))) return LNTUNE_OK;
    return resolve(ctx, &d, hash, rows, index, fn, e);
}

int lntune_gpu_entry(lntune *ctx, const lntune_args *a, int op, lntune_types types, int fusion,
                     const char *fn, const lntune_entry **e) {
    const int index = a->device_index;
    if (index < 0 || index >= LNTUNE_MAX_GPUS)
        return lntune_ctx_fail(ctx, LNTUNE_ENODEVICE, "%s: no CUDA device %d", fn, index);
    if (!a->gamma && a->beta)
        return lntune_ctx_fail(ctx, LNTUNE_EUNSUPPORTED,
                               "%s: beta without gamma is not served on a CUDA device", fn);
    if (a->residual_out && a->residual_out == a->residual) /* no GPU has verified it in place */
        return lntune_ctx_fail(ctx, LNTUNE_EUNSUPPORTED,
                               "%s: residual_out == residual (in place) is not served on a CUDA "
                               "device; give residual_out its own buffer",
                               fn);
    if (a->y == a->x) /* nor y in place */
        return lntune_ctx_fail(ctx, LNTUNE_EUNSUPPORTED,
                               "%s: y == x (in place) is not served on a CUDA device; give y its "
                               "own buffer",
                               fn);
    const int affine = a->weight_offset != 0.0f ? LNTUNE_DESC_GAMMA_OFFSET
                       : a->gamma               ? LNTUNE_DESC_GAMMA
                                                : LNTUNE_DESC_NO_AFFINE;
    return find(ctx, op, types, affine, fusion, a->rows, a->H, index, fn, e);
}

int lntune_gpu_run(lntune *ctx, const lntune_args *a, int op, lntune_types types, int fusion,
                   const lntune_kernel_args *ka, const char *fn) {
    const int index = a->device_index;
    const lntune_entry *e;
    int rc = lntune_gpu_entry(ctx, a, op, types, fusion, fn, &e);
    if (rc != LNTUNE_OK) return rc;
    const lntune_gpu_kernel *k = e->gpu;

    lntune_kernel_args by_value = *ka; /* the launch's one parameter block, by value */
    void *saved = NULL;
    if ((rc = lntune_cuda_enter(k->cu, &saved)) == LNTUNE_OK) {
        rc = lntune_cuda_launch_kernel(
            k->cu, k->function, lntune_cuda_launch_grid(&k->launch, a->rows), k->launch.block,
            lntune_cuda_launch_smem(&k->launch, a->H), a->stream, &by_value);
        lntune_cuda_leave(k->cu, saved);
    }
    if (rc != LNTUNE_OK)
        return lntune_ctx_fail(ctx, LNTUNE_ERROR, "%s: CUDA device %d: %s", fn, index,
                               lntune_cuda_errmsg(k->cu));
    return LNTUNE_OK;
}

int lntune_gpu_run_backward(lntune *ctx, const lntune_backward_args *a, int op, lntune_types types,
                            int fusion, const lntune_backward_kernel_args *kb, const char *fn) {
    const int index = a->device_index;
    if (index < 0 || index >= LNTUNE_MAX_GPUS)
        return lntune_ctx_fail(ctx, LNTUNE_ENODEVICE, "%s: no CUDA device %d", fn, index);
    const lntune_entry *e;
    int rc = find(ctx, LNTUNE_DESC_LAYERNORM_BACKWARD + op, types, LNTUNE_DESC_GAMMA, fusion,
                  a->rows, a->H, index, fn, &e);
    if (rc != LNTUNE_OK) return rc;
    const lntune_gpu_kernel *k = e->gpu;
    const lntune_cuda_backward_launch *l = &k->backward;
    const int64_t grid = lntune_cuda_backward_call_grid(l, a->rows, a->H);
    const int64_t parts = lntune_cuda_backward_parts(l, grid);
    const size_t floats = (size_t)parts * (size_t)a->H;
    const uint64_t out[2] = {(uint64_t)(uintptr_t)a->dgamma, (uint64_t)(uintptr_t)a->dbeta};
    uint64_t ws[2] = {0, 0};
    void *saved = NULL;
    if ((rc = lntune_cuda_enter(k->cu, &saved)) == LNTUNE_OK) {
        for (int i = 0; i < 2 && rc == LNTUNE_OK; ++i) {
            if (!out[i]) continue;
            rc = lntune_cuda_alloc_async(k->cu, floats * sizeof(float), a->stream, &ws[i]);
            if (rc == LNTUNE_OK && !l->partials) /* atomics add into a zeroed row */
                rc = lntune_cuda_fill32_async(k->cu, ws[i], 0, floats, a->stream);
        }
        if (rc == LNTUNE_OK)
            rc = lntune_cuda_backward_launch_pair(k->cu, k->function, k->finish, l, kb, grid, ws,
                                                  out, a->stream);
        const char *why = rc != LNTUNE_OK ? lntune_cuda_errmsg(k->cu) : NULL;
        if (why)
            rc = lntune_ctx_fail(ctx,
                                 rc == LNTUNE_ENOMEM || rc == LNTUNE_ENODEVICE ? rc : LNTUNE_ERROR,
                                 "%s: CUDA device %d: %s", fn, index, why);
        for (int i = 0; i < 2; ++i) lntune_cuda_free_async(k->cu, ws[i], a->stream);
        lntune_cuda_leave(k->cu, saved);
    } else {
        rc = lntune_ctx_fail(ctx, LNTUNE_ERROR, "%s: CUDA device %d: %s", fn, index,
                             lntune_cuda_errmsg(k->cu));
    }
    return rc;
}

void lntune_gpu_close_all(lntune *ctx) {
    for (int i = 0; i < LNTUNE_MAX_GPUS; ++i) {
        lntune_gpu *g = ctx->gpus[i];
        if (!g) continue;
        void *saved = NULL;
        const int entered = g->cu && lntune_cuda_enter(g->cu, &saved) == LNTUNE_OK;
        for (lntune_gpu_kernel *k = g->kernels, *next; k; k = next) {
            next = k->next;
            if (entered) lntune_cuda_module_unload(g->cu, k->module);
            free(k->key);
            free(k->message);
            free(k);
        }
        if (entered) lntune_cuda_leave(g->cu, saved);
        lntune_cuda_close(g->cu);
        free(g);
        ctx->gpus[i] = NULL;
    }
    lntune_nvrtc_close(ctx->nvrtc);
    ctx->nvrtc = NULL;
    ctx->nvrtc_tried = 0;
}
