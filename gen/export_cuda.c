/*
 * export_cuda.c - the CUDA half of `lntune export`: lntune_kernels.cu and lntune_kernels_cuda.h
 * (see export.h for what and why).
 *
 * As in the C half, the dispatch code is fixed text; only the kernels, the tables and the header
 * comment vary. Each winner is regenerated from its variant string for the compute capability of
 * the GPU row it was tuned on; the CUDA template puts a kernel's file-scope names in a namespace
 * named after its symbol, so one translation unit holds them all. The launch geometry of each
 * kernel comes from its source's launch line (runtime/cuda_launch.c), and the host code below
 * applies the same grid and shared memory rules.
 */
#include "export_internal.h"

#include "builtin.h"
#include "cuda_launch.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t id;
    char fingerprint[17], model[256];
    int cc; /* compute capability, 90 for sm_90 */
} gpu_row;

typedef struct {
    gpu_row *v;
    size_t n, cap;
    int oom;
    const char *only; /* lntune_export_config.gpu */
} gpu_list;

typedef struct {
    size_t gpu; /* index in gpu_list */
    char op[16], variant[512];
    int64_t H, tuned_rows, rows_lo, rows_hi;
    int affine, ok;
    double median_ns, gbps, copy_gbps, max_error;
    lntune_cuda_launch launch;
} cuda_winner;

typedef struct {
    cuda_winner *w;
    size_t n, cap;
    int oom;
    size_t gpu;  /* the GPU being collected */
    int skipped; /* rows of a dtype or op the CUDA export does not serve */
    const lntune_export_config *c;
    const char *gpu_name;
} cuda_list;

static int collect_gpu(void *ud, const lntune_db_hardware *hw) {
    gpu_list *l = ud;
    if (!hw->kind || strcmp(hw->kind, "cuda") != 0) return 0;
    if (l->only && (!hw->fingerprint || strcmp(l->only, hw->fingerprint) != 0)) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        gpu_row *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return 1;
        }
        l->v = v, l->cap = cap;
    }
    gpu_row *g = &l->v[l->n++];
    g->id = hw->id;
    snprintf(g->fingerprint, sizeof g->fingerprint, "%s", hw->fingerprint ? hw->fingerprint : "");
    snprintf(g->model, sizeof g->model, "%s", hw->model ? hw->model : "");
    g->cc = hw->compute_capability;
    return 0;
}

static int collect_best(void *ud, const lntune_db_key *key, const lntune_best *b) {
    cuda_list *l = ud;
    if (strcmp(key->target, "cuda") != 0) return 0;
    const int op = lntune_export_op_find(key->op);
    if (op < 0 || !lntune_export_ops[op].cuda || strcmp(key->dtype, "f32") != 0) {
        /* The CUDA path serves fp32 only; an op it does not know is never exported as another. */
        lntune_export_warn(l->c, "%s %s H=%lld on %s: %s; left out", key->op, key->dtype,
                           (long long)key->H, l->gpu_name,
                           op < 0 || !lntune_export_ops[op].cuda ? "op unknown to the CUDA export"
                                                                 : "the CUDA export is fp32 only");
        ++l->skipped;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cuda_winner *w = realloc(l->w, cap * sizeof *w);
        if (!w) {
            l->oom = 1;
            return 1;
        }
        l->w = w, l->cap = cap;
    }
    cuda_winner *w = &l->w[l->n++];
    memset(w, 0, sizeof *w);
    w->gpu = l->gpu;
    snprintf(w->op, sizeof w->op, "%s", key->op);
    snprintf(w->variant, sizeof w->variant, "%s", b->variant ? b->variant : "");
    w->H = key->H;
    w->tuned_rows = b->tuned_rows > 0 ? b->tuned_rows : key->rows;
    w->affine = key->affine;
    w->median_ns = b->median_ns, w->gbps = b->gbps, w->copy_gbps = b->copy_gbps;
    w->max_error = b->max_error;
    lntune_export_bucket_range(w->tuned_rows > 0 ? w->tuned_rows : 1, &w->rows_lo, &w->rows_hi);
    return 0;
}

/* The fixed host code of lntune_kernels.cu, after the kernels and the tables. */
static const char dispatch_text[] =
    "constexpr int MAX_DEVICES = 64;\n"
    "constexpr int64_t DEFAULT_SMEM = 48 * 1024; /* more needs cudaFuncSetAttribute */\n"
    "constexpr int NGPUS = (int)(sizeof gpus / sizeof gpus[0]);\n"
    "constexpr int NKERNELS = (int)(sizeof kernels / sizeof kernels[0]);\n"
    "\n"
    "/* Per device ordinal: 0 not yet seen, g + 1 it is gpus[g], -1 it is none of them. */\n"
    "std::atomic<int> device_gpu[MAX_DEVICES];\n"
    "/* Per kernel: the devices (bits) whose shared memory limit it has already raised. */\n"
    "std::atomic<unsigned long long> smem_raised[NKERNELS];\n"
    "thread_local char message[512];\n"
    "\n"
    "int fail(int rc, const char *what, cudaError_t e)\n"
    "{\n"
    "    if (e != cudaSuccess)\n"
    "        snprintf(message, sizeof message, \"%s: %s (%s)\", what, cudaGetErrorName(e),\n"
    "                 cudaGetErrorString(e));\n"
    "    else\n"
    "        snprintf(message, sizeof message, \"%s\", what);\n"
    "    return rc;\n"
    "}\n"
    "\n"
    "/* Which of gpus the current device is: the same name and compute capability, else the same\n"
    " * compute capability. Looked up once per device. */\n"
    "int current_gpu(int *gpu, int *device)\n"
    "{\n"
    "    int dev = 0;\n"
    "    cudaError_t e = cudaGetDevice(&dev);\n"
    "    if (e != cudaSuccess) return fail(LNTUNE_ENODEVICE, \"cudaGetDevice\", e);\n"
    "    const bool cached = dev >= 0 && dev < MAX_DEVICES;\n"
    "    int known = cached ? device_gpu[dev].load(std::memory_order_acquire) : 0;\n"
    "    if (known == 0) {\n"
    "        int major = 0, minor = 0;\n"
    "        cudaDeviceProp prop;\n"
    "        if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) ||\n"
    "            (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) ||\n"
    "            (e = cudaGetDeviceProperties(&prop, dev)))\n"
    "            return fail(LNTUNE_ENODEVICE, \"reading the device's compute capability\", e);\n"
    "        const int cc = 10 * major + minor;\n"
    "        known = -1;\n"
    "        for (int g = 0; g < NGPUS && known < 0; ++g)\n"
    "            if (gpus[g].cc == cc && std::strcmp(gpus[g].name, prop.name) == 0) known = g + "
    "1;\n"
    "        for (int g = 0; g < NGPUS && known < 0; ++g)\n"
    "            if (gpus[g].cc == cc) known = g + 1;\n"
    "        if (known < 0) {\n"
    "            snprintf(message, sizeof message,\n"
    "                     \"device %d (%.200s, sm_%d) is none of the GPUs these kernels were \"\n"
    "                     \"tuned on (see lntune_kernels.cu)\",\n"
    "                     dev, prop.name, cc);\n"
    "            if (cached) device_gpu[dev].store(known, std::memory_order_release);\n"
    "            return LNTUNE_ENODEVICE;\n"
    "        }\n"
    "        if (cached) device_gpu[dev].store(known, std::memory_order_release);\n"
    "    }\n"
    "    if (known < 0)\n"
    "        return fail(LNTUNE_ENODEVICE, \"the current device is none of the GPUs these kernels "
    "\"\n"
    "                                      \"were tuned on\", cudaSuccess);\n"
    "    *gpu = known - 1;\n"
    "    *device = dev;\n"
    "    return LNTUNE_OK;\n"
    "}\n"
    "\n"
    "/* The winner of (gpu, op, H, affine) for rows: its bucket, else the nearest tuned bucket\n"
    " * (as liblntune and the exported C kernels choose); -1 if none. */\n"
    "int find_tuned(int gpu, int op, int64_t H, int affine, int64_t rows)\n"
    "{\n"
    "    int best = -1;\n"
    "    double best_distance = 0.0;\n"
    "    for (int i = 0; i < GENERIC; ++i) {\n"
    "        const kernel_entry *e = &kernels[i];\n"
    "        if (e->gpu != gpu || e->op != op || e->H != H || e->affine != affine) continue;\n"
    "        if (e->max_h > 0 && H > e->max_h) continue;\n"
    "        if (rows >= e->rows_lo && rows <= e->rows_hi) return i;\n"
    "        double d = rows < e->rows_lo ? (double)e->rows_lo / (double)rows\n"
    "                                     : (double)rows / (double)e->rows_hi;\n"
    "        if (best < 0 || d < best_distance) best = i, best_distance = d;\n"
    "    }\n"
    "    return best;\n"
    "}\n"
    "\n"
    "/* Launches kernels[i] as its launch line says (runtime/cuda_launch.c's rules). */\n"
    "int launch(int i, int device, const lntune_kernel_args &a, cudaStream_t stream)\n"
    "{\n"
    "    const kernel_entry *e = &kernels[i];\n"
    "    if (e->max_h > 0 && a.H > e->max_h)\n"
    "        return fail(LNTUNE_EUNSUPPORTED, \"H exceeds the kernel's shared memory\", "
    "cudaSuccess);\n"
    "    int64_t groups = (a.rows + e->rows_per_block - 1) / e->rows_per_block;\n"
    "    if (groups > INT32_MAX / e->cluster) groups = INT32_MAX / e->cluster;\n"
    "    const int64_t per_block = (a.H + e->cluster - 1) / e->cluster;\n"
    "    const int64_t smem = e->smem + e->smem_per_h * ((per_block + 3) / 4 * 4);\n"
    "    if (smem > DEFAULT_SMEM) {\n"
    "        const unsigned long long bit = 1ull << (device % 64);\n"
    "        if (device >= 64 || !(smem_raised[i].load(std::memory_order_acquire) & bit)) {\n"
    "            cudaError_t err = cudaFuncSetAttribute((const void *)e->fn,\n"
    "                                                   "
    "cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);\n"
    "            if (err != cudaSuccess)\n"
    "                return fail(LNTUNE_ERROR, \"cudaFuncSetAttribute (shared memory)\", err);\n"
    "            smem_raised[i].fetch_or(bit, std::memory_order_release);\n"
    "        }\n"
    "    }\n"
    "    e->fn<<<dim3((unsigned)(groups * e->cluster)), dim3((unsigned)e->block), (size_t)smem,\n"
    "            stream>>>(a);\n"
    "    cudaError_t err = cudaGetLastError();\n"
    "    return err == cudaSuccess ? LNTUNE_OK : fail(LNTUNE_ERROR, \"kernel launch\", err);\n"
    "}\n"
    "\n"
    "int run(int op, const lntune_kernel_args *args, cudaStream_t stream)\n"
    "{\n"
    "    if (!args || !args->x || !args->y || args->H <= 0 || args->rows < 0 ||\n"
    "        args->eps < 0.0f || args->eps != args->eps)\n"
    "        return fail(LNTUNE_EINVAL, \"NULL args, x or y, H <= 0, rows < 0, or eps < 0 or "
    "NaN\",\n"
    "                    cudaSuccess);\n"
    "    if (op == 1 && args->beta) return fail(LNTUNE_EINVAL, \"RMSNorm takes no beta\", "
    "cudaSuccess);\n"
    "    if (args->residual || args->residual_out)\n"
    "        return fail(LNTUNE_EUNSUPPORTED, \"residual is not supported\", cudaSuccess);\n"
    "    if (args->beta && !args->gamma)\n"
    "        return fail(LNTUNE_EUNSUPPORTED, \"beta without gamma is not supported\", "
    "cudaSuccess);\n"
    "    lntune_kernel_args a = *args;\n"
    "    if (a.x_stride == 0) a.x_stride = a.H;\n"
    "    if (a.y_stride == 0) a.y_stride = a.H;\n"
    "    if (a.x_stride < a.H || a.y_stride < a.H)\n"
    "        return fail(LNTUNE_EINVAL, \"a stride is neither 0 nor >= H\", cudaSuccess);\n"
    "    if (!(a.eps > 0.0f)) a.eps = 1e-5f;\n"
    "    if (a.rows == 0) return LNTUNE_OK;\n"
    "    int gpu = 0, device = 0;\n"
    "    int rc = current_gpu(&gpu, &device);\n"
    "    if (rc != LNTUNE_OK) return rc;\n"
    "    const int affine = a.gamma != nullptr;\n"
    "    const int i = find_tuned(gpu, op, a.H, affine, a.rows);\n"
    "    return launch(i >= 0 ? i : GENERIC + 2 * op + !affine, device, a, stream);\n"
    "}\n"
    "\n"
    "} // namespace\n"
    "\n"
    "extern \"C\" int lntune_kernels_cuda_layernorm(const lntune_kernel_args *args, "
    "cudaStream_t stream)\n"
    "{\n"
    "    return run(0, args, stream);\n"
    "}\n"
    "\n"
    "extern \"C\" int lntune_kernels_cuda_rmsnorm(const lntune_kernel_args *args, cudaStream_t "
    "stream)\n"
    "{\n"
    "    return run(1, args, stream);\n"
    "}\n"
    "\n"
    "extern \"C\" const char *lntune_kernels_cuda_errmsg(void)\n"
    "{\n"
    "    return message;\n"
    "}\n";

static const char header_doc[] =
    " * Fill an lntune_kernel_args with device pointers (rows, H, x, y; gamma, beta, mean, rstd\n"
    " * optional; strides of 0 mean H, eps of 0 means 1e-5) and call one of the functions below.\n"
    " * It launches one kernel on stream on the current device (asynchronously, like any launch):\n"
    " * the tuned kernel of the call's shape, else the generic one. Thread-safe. Returns:\n"
    " *   LNTUNE_OK           launched (rows == 0: nothing to launch)\n"
    " *   LNTUNE_EINVAL       NULL args, x or y; H <= 0; rows < 0; eps < 0 or NaN; a stride\n"
    " *                       neither 0 nor >= H; RMSNorm with beta\n"
    " *   LNTUNE_EUNSUPPORTED residual or residual_out; beta without gamma\n"
    " *   LNTUNE_ENODEVICE    no current CUDA device, or it is none of the GPUs the kernels were\n"
    " *                       tuned on (its name and compute capability are checked on the first\n"
    " *                       call on each device)\n"
    " *   LNTUNE_ERROR        a CUDA call failed (the launch, or raising the shared memory limit)\n"
    " * lntune_kernels_cuda_errmsg() says why the calling thread's last call failed.\n";

static void generic_symbol(const lntune_builtin_variant *v, char *buf, size_t size) {
    snprintf(buf, size, "lntune_kernels_cuda_generic_%s_%s", v->op, v->affine ? "affine" : "plain");
}

/* Generates one kernel into text; its launch geometry into *launch. */
static int emit_kernel(lntune_gen *g, int sm, const char *op, const char *variant, int64_t H,
                       const char *symbol, int guard, lntune_export_buf *text,
                       lntune_cuda_launch *launch, char hash[17]) {
    lntune_gen_set_cuda_arch(g, sm);
    lntune_shape shape = {.H = H};
    lntune_source src;
    int rc = lntune_gen_emit(g, "cuda", op, variant, H > 0 ? &shape : NULL, symbol, &src);
    if (rc != LNTUNE_OK) return rc;
    rc = lntune_cuda_launch_parse(src.text, launch);
    if (rc == LNTUNE_OK) {
        /* A GPU's kernels are device code only when compiling for its architecture (sm_90's
         * clusters do not compile for sm_80, and no other GPU runs them: see current_gpu).
         * Other passes see an empty kernel of the same name: every pass must declare the same
         * kernels, since nvcc makes the host's launch stubs from a device pass. */
        if (guard)
            lntune_export_put(text, "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ == %d\n",
                              sm * 10);
        lntune_export_put(text, "%s\n", src.text);
        if (guard)
            lntune_export_put(text,
                              "#else\nnamespace %s_impl {\nextern \"C\" __global__ void "
                              "%s(lntune_kernel_args) {} /* never launched here */\n}\n#endif\n\n",
                              symbol, symbol);
        if (hash) snprintf(hash, 17, "%s", src.template_hash);
    }
    lntune_source_free(&src);
    return rc;
}

static const char *row_range(const cuda_winner *w, char *buf, size_t size) {
    if (w->rows_hi == INT64_MAX)
        snprintf(buf, size, "%lld-...", (long long)w->rows_lo);
    else
        snprintf(buf, size, "%lld-%lld", (long long)w->rows_lo, (long long)w->rows_hi);
    return buf;
}

static void put_entry(lntune_export_buf *b, int gpu, int op, int64_t H, int affine, int64_t lo,
                      int64_t hi, const char *symbol, const lntune_cuda_launch *l) {
    lntune_export_put(b,
                      "    {%d, %d, INT64_C(%lld), %d, INT64_C(%lld), INT64_C(%lld), %s_impl::%s, "
                      "%d, %d, %d, %lld, %lld, %lld},\n",
                      gpu, op, (long long)H, affine, (long long)lo, (long long)hi, symbol, symbol,
                      l->block, l->rows_per_block, l->cluster, (long long)l->smem,
                      (long long)l->smem_per_h, (long long)l->max_h);
}

int lntune_export_cuda(lntune_db *db, lntune_gen *g, const lntune_export_config *c,
                       lntune_export_report *r, char *archs, size_t archs_size) {
    archs[0] = '\0';
    if (!db) {
        if (c->gpu) {
            snprintf(r->message, sizeof r->message, "--gpu %s: no tuning database", c->gpu);
            return LNTUNE_ENOTFOUND;
        }
        return LNTUNE_OK;
    }
    gpu_list gpus = {.only = c->gpu};
    cuda_list list = {.c = c};
    lntune_export_buf kernels = {0}, out = {0}, header = {0};
    int rc = lntune_db_each_hardware(db, collect_gpu, &gpus);
    for (size_t i = 0; rc == LNTUNE_OK && !gpus.oom && i < gpus.n; ++i) {
        list.gpu = i;
        list.gpu_name = gpus.v[i].model;
        rc = lntune_db_each_best(db, gpus.v[i].id, collect_best, &list);
    }
    r->cuda_skipped += list.skipped;
    if (rc != LNTUNE_OK || gpus.oom || list.oom) {
        snprintf(r->message, sizeof r->message, "reading the GPU winners: %s",
                 gpus.oom || list.oom ? "out of memory" : lntune_db_errmsg(db));
        if (rc == LNTUNE_OK) rc = LNTUNE_ENOMEM;
        goto done;
    }
    if (c->gpu && gpus.n == 0) {
        snprintf(r->message, sizeof r->message, "--gpu %s: no such GPU in %s", c->gpu,
                 lntune_db_path(db));
        rc = LNTUNE_ENOTFOUND;
        goto done;
    }
    if (list.n == 0) goto done; /* no CUDA winners: no CUDA files (see export.h) */

    /* The tuned kernels, each for its GPU's compute capability. */
    for (size_t i = 0; i < list.n; ++i) {
        cuda_winner *w = &list.w[i];
        const gpu_row *gr = &gpus.v[w->gpu];
        char symbol[64], hash[17] = "", measured[17];
        snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_t%zu", i);
        if (emit_kernel(g, gr->cc, w->op, w->variant, w->H, symbol, 1, &kernels, &w->launch,
                        hash) != LNTUNE_OK) {
            lntune_export_warn(c,
                               "%s H=%lld on %s: variant '%s' no longer generates (%s); left out",
                               w->op, (long long)w->H, gr->model, w->variant, lntune_gen_errmsg(g));
            ++r->cuda_skipped;
            continue;
        }
        if (w->launch.max_h > 0 && w->H > w->launch.max_h) {
            lntune_export_warn(c, "%s H=%lld on %s: '%s' serves H <= %lld only; left out", w->op,
                               (long long)w->H, gr->model, w->variant, (long long)w->launch.max_h);
            ++r->cuda_skipped;
            continue;
        }
        lntune_db_key key = {gr->id, "cuda", w->op, "f32", w->H, w->tuned_rows, w->affine};
        lntune_export_measured_hash(db, &key, w->variant, measured);
        if (measured[0] && strcmp(measured, hash) != 0)
            lntune_export_warn(c,
                               "%s H=%lld on %s: the template changed since '%s' was measured "
                               "(hash %s, now %s); exporting the regenerated source: re-tune to "
                               "refresh its timing",
                               w->op, (long long)w->H, gr->model, w->variant, measured, hash);
        w->ok = 1;
        ++r->cuda_tuned;
    }
    /* The generic kernels: no cluster, no shared memory, so any compute capability. */
    lntune_cuda_launch generic[8];
    for (size_t i = 0; i < lntune_builtin_cuda_variant_count && i < 8; ++i) {
        char symbol[128];
        const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
        generic_symbol(v, symbol, sizeof symbol);
        if ((rc = emit_kernel(g, gpus.v[0].cc, v->op, v->variant, 0, symbol, 0, &kernels,
                              &generic[i], NULL)) != LNTUNE_OK) {
            snprintf(r->message, sizeof r->message, "generic CUDA kernel %s: %s", v->variant,
                     lntune_gen_errmsg(g));
            goto done;
        }
    }

    /* lntune_kernels.cu: header comment. */
    lntune_export_put(&out, "/*\n * generated by lntune export; do not edit.\n *\n");
    lntune_export_buf gencode = {0};
    for (size_t i = 0; i < gpus.n; ++i) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d", gpus.v[i].cc);
        if (strstr(archs, cc) || strlen(archs) + strlen(cc) + 2 >= archs_size) continue;
        if (archs[0]) strcat(archs, ";");
        strcat(archs, cc);
        lntune_export_put(&gencode, " -gencode arch=compute_%s,code=sm_%s", cc, cc);
    }
    lntune_export_put(&out,
                      " * Build with the CUDA runtime only, for the architecture of each GPU "
                      "below:\n"
                      " *   nvcc -std=c++17%s -c lntune_kernels.cu\n *\n"
                      " * GPUs (a call runs the kernels of the one the current device is, by name "
                      "and compute\n"
                      " * capability, else by compute capability alone):\n",
                      gencode.s ? gencode.s : "");
    free(gencode.s);
    for (size_t i = 0; i < gpus.n; ++i)
        lntune_export_put(&out, " *   g%zu: %s, sm_%d, fingerprint %s\n", i, gpus.v[i].model,
                          gpus.v[i].cc, gpus.v[i].fingerprint);
    lntune_export_put(&out, " *\n * tuned kernels (GPU op dtype H rows-bucket affine: variant; "
                            "launch; median time,\n"
                            " * bandwidth, verified max error):\n");
    for (size_t i = 0; i < list.n; ++i) {
        const cuda_winner *w = &list.w[i];
        if (!w->ok) continue;
        char rows[64];
        lntune_export_put(&out,
                          " *   c%zu: g%zu %s f32 H=%lld rows %s (tuned at %lld) %s: %s; "
                          "block=%d rows_per_block=%d cluster=%d smem=%lld+%lld/float max_h=%lld; "
                          "%.0f ns, %.1f GB/s (copy %.1f), max error %.3g\n",
                          i, w->gpu, w->op, (long long)w->H, row_range(w, rows, sizeof rows),
                          (long long)w->tuned_rows, w->affine ? "affine" : "no affine", w->variant,
                          w->launch.block, w->launch.rows_per_block, w->launch.cluster,
                          (long long)w->launch.smem, (long long)w->launch.smem_per_h,
                          (long long)w->launch.max_h, w->median_ns, w->gbps, w->copy_gbps,
                          w->max_error);
    }
    if (r->cuda_tuned == 0) lntune_export_put(&out, " *   (none)\n");
    lntune_export_put(&out, " *\n * generic kernels (any shape no winner covers):\n");
    for (size_t i = 0; i < lntune_builtin_cuda_variant_count; ++i)
        lntune_export_put(&out, " *   %s %s: %s\n", lntune_builtin_cuda_variants[i].op,
                          lntune_builtin_cuda_variants[i].affine ? "affine" : "no affine",
                          lntune_builtin_cuda_variants[i].variant);
    lntune_export_put(&out, " */\n#include \"lntune_kernels_cuda.h\"\n\n"
                            "#include <atomic>\n#include <cstdint>\n#include <cstdio>\n"
                            "#include <cstring>\n\n");
    lntune_export_put(&out, "%s", kernels.s ? kernels.s : "");

    /* The tables. */
    lntune_export_put(&out,
                      "namespace {\n\n"
                      "typedef void (*kernel_fn)(lntune_kernel_args);\n\n"
                      "struct gpu_entry {\n    const char *name; /* as the CUDA runtime reports "
                      "it */\n    int cc;           /* compute capability: 90 for sm_90 */\n};\n\n"
                      "const gpu_entry gpus[] = {\n");
    for (size_t i = 0; i < gpus.n; ++i) {
        lntune_export_put(&out, "    {\"");
        for (const char *p = gpus.v[i].model; *p; ++p)
            lntune_export_put(&out, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        lntune_export_put(&out, "\", %d},\n", gpus.v[i].cc);
    }
    lntune_export_put(&out,
                      "};\n\n"
                      "/* A kernel and its launch line (see the header comment of each). */\n"
                      "struct kernel_entry {\n"
                      "    int gpu;   /* index in gpus; -1: any (generic) */\n"
                      "    int op;    /* 0 layernorm, 1 rmsnorm */\n"
                      "    int64_t H; /* 0: any */\n"
                      "    int affine;\n"
                      "    int64_t rows_lo, rows_hi;\n"
                      "    kernel_fn fn;\n"
                      "    int block, rows_per_block, cluster;\n"
                      "    int64_t smem, smem_per_h, max_h;\n"
                      "};\n\n"
                      "/* The tuned kernels, then the generic ones from GENERIC on (layernorm "
                      "affine, plain,\n"
                      " * rmsnorm affine, plain). */\n"
                      "const kernel_entry kernels[] = {\n");
    int ntuned = 0;
    for (size_t i = 0; i < list.n; ++i) {
        const cuda_winner *w = &list.w[i];
        if (!w->ok) continue;
        char symbol[64];
        snprintf(symbol, sizeof symbol, "lntune_kernels_cuda_t%zu", i);
        put_entry(&out, (int)w->gpu, lntune_export_op_find(w->op), w->H, w->affine, w->rows_lo,
                  w->rows_hi, symbol, &w->launch);
        ++ntuned;
    }
    for (size_t i = 0; i < lntune_builtin_cuda_variant_count; ++i) {
        char symbol[128];
        const lntune_builtin_variant *v = &lntune_builtin_cuda_variants[i];
        generic_symbol(v, symbol, sizeof symbol);
        put_entry(&out, -1, lntune_export_op_find(v->op), 0, v->affine, 1, INT64_MAX, symbol,
                  &generic[i]);
    }
    lntune_export_put(&out, "};\nconstexpr int GENERIC = %d;\n\n", ntuned);
    lntune_export_put(&out, "%s", dispatch_text);

    /* lntune_kernels_cuda.h */
    lntune_export_put(&header, "/*\n * lntune_kernels_cuda.h - generated by lntune export; do not "
                               "edit.\n *\n"
                               " * CUDA LayerNorm and RMSNorm tuned on");
    for (size_t i = 0; i < gpus.n; ++i)
        lntune_export_put(&header, "%s %s (sm_%d)", i ? "," : "", gpus.v[i].model, gpus.v[i].cc);
    lntune_export_put(&header, "; see\n * lntune_kernels.cu. For C and C++.\n *\n%s */\n",
                      header_doc);
    lntune_export_put(&header, "#ifndef LNTUNE_KERNELS_CUDA_H\n#define LNTUNE_KERNELS_CUDA_H\n\n"
                               "#include <cuda_runtime_api.h>\n\n");
    const char *abi = lntune_export_abi_header();
    lntune_export_put(&header, "%s\n", abi ? abi : "#error no ABI header\n");
    lntune_export_put(&header,
                      "/* The codes of lntune.h (identical definitions, so both may be included). "
                      "*/\n"
                      "#define LNTUNE_OK %d\n#define LNTUNE_ERROR %d\n#define LNTUNE_EINVAL %d\n"
                      "#define LNTUNE_EUNSUPPORTED %d\n#define LNTUNE_ENODEVICE %d\n\n"
                      "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
                      "int lntune_kernels_cuda_layernorm(const lntune_kernel_args *args, "
                      "cudaStream_t stream);\n"
                      "int lntune_kernels_cuda_rmsnorm(const lntune_kernel_args *args, "
                      "cudaStream_t stream);\n"
                      "const char *lntune_kernels_cuda_errmsg(void);\n\n"
                      "#ifdef __cplusplus\n}\n#endif\n\n#endif /* LNTUNE_KERNELS_CUDA_H */\n",
                      LNTUNE_OK, LNTUNE_ERROR, LNTUNE_EINVAL, LNTUNE_EUNSUPPORTED,
                      LNTUNE_ENODEVICE);
    if (out.oom || header.oom || kernels.oom) {
        rc = LNTUNE_ENOMEM;
        snprintf(r->message, sizeof r->message, "out of memory");
        goto done;
    }
    rc = lntune_export_write_file(c->out_dir, "lntune_kernels.cu", &out, r->message,
                                  sizeof r->message);
    if (rc == LNTUNE_OK)
        rc = lntune_export_write_file(c->out_dir, "lntune_kernels_cuda.h", &header, r->message,
                                      sizeof r->message);
    r->cuda_written = rc == LNTUNE_OK;
    r->cuda_gpus = (int)gpus.n;
done:
    if (g) lntune_gen_set_cuda_arch(g, 0);
    free(kernels.s), free(out.s), free(header.s);
    free(gpus.v);
    free(list.w);
    return rc;
}
