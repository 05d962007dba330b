/*
 * libcuda.c - a stand-in CUDA driver (libcuda.so.1) that runs on the CPU, so the CUDA tuner's
 * whole loop (compile, load, verify, time, choose, store) is tested where there is no GPU.
 *
 * Device memory is host memory. A launch computes the float64 reference of the op named by
 * $MOCK_CUDA_OP (layernorm or rmsnorm) into y, rounded to fp32, for the lntune_kernel_args it is
 * given. Each loaded module gets a number n (in load order); a launch advances a virtual clock,
 * which events read, by a cost of (200 + 37 n mod 101) us, so module timings differ and are
 * repeatable. Modules whose number is a multiple of $MOCK_CUDA_WRONG_EVERY (0: none) compute a
 * wrong answer AND are the fastest, so a tuner that picks a wrong kernel is caught.
 * A kernel whose name says rmsnorm or layernorm (liblntune's built-ins) computes that op instead.
 * $MOCK_CUDA_TYPES (lntune's dtype text, "bf16/bf16/f32/f32"; unset: all fp32) gives the
 * element types of x, y, gamma/beta and residual, which the kernel ABI does not carry. Given a
 * residual, a launch normalizes the fp32 sum x + residual and writes residual_out if given, as
 * lntune_args documents. The args' weight_offset is added to gamma (in fp32, as the kernels do).
 * A quantized y (types.y i8, i8row, e4m3, e4m3row) gets core/quant.h's codes of the fp32 y times
 * 1 / y_scale, or with a scale per row, of y * QMAX / absmax, the row's scale to y_scales.
 * (A wrong module's codes have bit 1 flipped.) $MOCK_CUDA_QUANT_FAULT makes it wrong for
 * tests/test_cuda_check_quant.c: "past" also writes y_scales[rows], "noscale" writes no scale,
 * "nooffset" ignores the weight offset. A backward pair (a kernel whose name says backward, or one
 * whose module also holds a
 * "<name>_dgamma", as the CUDA tuner's "lntune_norm") computes the float64 reference gradients
 * instead: kernel 1 writes dx and the dgamma/dbeta sums. The number of workspace rows (parts)
 * is not among its parameters: given the start of an allocation it zeroes all its rows and
 * writes the sums into row 0; given a pointer inside one (the checker's guarded buffers) it
 * takes parts = grid (a block per row group, the built-in's layout) and adds row r's terms into
 * row (r mod grid), so on this stand-in the checker finds the variants with several row groups
 * per block, or atomics over several blocks, wrong. The "_dgamma" second pass sums the parts in
 * order in fp32.
 * The types then come from $MOCK_CUDA_TYPES as x (x, dy, dx, dresidual_out) and params.
 * Only the entry points core/cuda/cuda_driver.c resolves exist.
 */
#include "dtypes.h"
#include "lntune_kernel.h"
#include "lntune_kernel_backward.h"
#include "quant.h"
#include "reference.h"
#include "typed_kernel.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_OUT_OF_MEMORY = 2 };

enum { FORWARD, BACKWARD, BACKWARD_FINISH };

typedef struct module module;

typedef struct {
    module *mod;
    int op;   /* -1: $MOCK_CUDA_OP; else the op its kernel's name says (the runtime's built-ins) */
    int kind; /* FORWARD, BACKWARD, BACKWARD_FINISH: from the kernel's name */
} function;

struct module {
    int number;
    int nfunctions;
    function functions[4];
};

static int modules_loaded;
static double clock_us;

static long env_long(const char *name) {
    const char *s = getenv(name);
    return s ? strtol(s, NULL, 10) : 0;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    return OK;
}
CUresult cuDriverGetVersion(int *v) {
    *v = 13000;
    return OK;
}
CUresult cuDeviceGetCount(int *n) {
    *n = 1;
    return OK;
}
CUresult cuDeviceGet(int *d, int i) {
    *d = i;
    return i == 0 ? OK : ERR_INVALID_VALUE;
}
CUresult cuDeviceGetName(char *name, int len, int d) {
    (void)d;
    strncpy(name, "lntune mock GPU", (size_t)len - 1);
    name[len - 1] = '\0';
    return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    switch (attr) {
    case 16:
        *v = 4;
        break; /* multiprocessors */
    case 37:
        *v = 256;
        break; /* memory bus bits */
    case 38:
        *v = 1 << 20;
        break; /* L2 bytes */
    case 75:
        *v = 9;
        break; /* compute capability major */
    case 76:
        *v = 0;
        break; /* minor */
    case 97:
        *v = 227 * 1024;
        break; /* shared memory per block, opt-in */
    default:
        *v = 0;
    }
    return OK;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) {
    (void)d;
    *ctx = (void *)&clock_us;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int d) {
    (void)d;
    return OK;
}
static _Thread_local void *current_ctx;
CUresult cuCtxSetCurrent(void *ctx) {
    current_ctx = ctx;
    return OK;
}
CUresult cuCtxGetCurrent(void **ctx) {
    *ctx = current_ctx;
    return OK;
}
CUresult cuCtxSynchronize(void) {
    return OK;
}
CUresult cuModuleLoadData(void **m, const void *image) {
    if (!image) return ERR_INVALID_VALUE;
    module *mod = calloc(1, sizeof *mod);
    if (!mod) return ERR_OUT_OF_MEMORY;
    mod->number = ++modules_loaded;
    *m = mod;
    return OK;
}
CUresult cuModuleUnload(void *m) {
    free(m);
    return OK;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    module *mod = m;
    if (!mod || !name || mod->nfunctions == 4) return ERR_INVALID_VALUE;
    function *fn = &mod->functions[mod->nfunctions++];
    fn->mod = mod;
    fn->op = strstr(name, "rmsnorm")     ? LNTUNE_OP_RMSNORM
             : strstr(name, "layernorm") ? LNTUNE_OP_LAYERNORM
                                         : -1;
    const size_t n = strlen(name);
    fn->kind = n > 7 && strcmp(name + n - 7, "_dgamma") == 0 ? BACKWARD_FINISH
               : strstr(name, "_backward")                   ? BACKWARD
                                                             : FORWARD;
    *f = fn;
    return OK;
}
CUresult cuFuncSetAttribute(void *f, int attr, int v) {
    (void)f, (void)attr, (void)v;
    return OK;
}

/* The kernel: the reference of every row, fp32-rounded (wrong modules add 1e-3). */
/* The live allocations' sizes, so that kernel 1 of a backward pair knows its workspace's rows
 * (see the header comment). Single-threaded, as every user of this stand-in is. */
enum { MAX_ALLOCATIONS = 256 };
static struct {
    void *p;
    size_t bytes;
} allocations[MAX_ALLOCATIONS];

/* Records p's size (bytes 0: p is freed). */
static void remember(void *p, size_t bytes) {
    for (int i = 0; i < MAX_ALLOCATIONS; ++i)
        if (allocations[i].p == (bytes ? NULL : p)) {
            allocations[i].p = bytes ? p : NULL;
            allocations[i].bytes = bytes;
            return;
        }
}

/* The size of the allocation starting at p; 0 if p starts none. */
static size_t allocation_bytes(const void *p) {
    for (int i = 0; p && i < MAX_ALLOCATIONS; ++i)
        if (allocations[i].p == p) return allocations[i].bytes;
    return 0;
}

/* The backward's types: x (x, dy, dx, dresidual_out) and params, from $MOCK_CUDA_TYPES. */
static int backward_types(lntune_types *t) {
    const char *types = getenv("MOCK_CUDA_TYPES");
    *t = (lntune_types){0};
    return types && lntune_types_parse(types, t) != 0 ? -1 : 0;
}

/* Kernel 1 of a backward pair: dx (wrong: off by 1e-3), and the dgamma/dbeta sums into the
 * workspaces (see the header comment). */
static CUresult backward_main(lntune_op op, unsigned gx, int wrong, void **params) {
    const lntune_backward_kernel_args *a = params[0];
    float *ws[2] = {(float *)(uintptr_t) * (const uint64_t *)params[1],
                    (float *)(uintptr_t) * (const uint64_t *)params[2]};
    lntune_types t;
    if (backward_types(&t) != 0) return ERR_INVALID_VALUE;
    const int64_t H = a->H;
    int64_t parts[2];
    for (int k = 0; k < 2; ++k) {
        const size_t whole = allocation_bytes(ws[k]) / sizeof(float) / (size_t)H;
        parts[k] = whole ? (int64_t)whole : (int64_t)gx;
        if (ws[k]) memset(ws[k], 0, (size_t)parts[k] * (size_t)H * sizeof(float));
        if (whole) parts[k] = 1; /* the sums into row 0 */
    }
    double *buf = malloc((size_t)H * 7 * sizeof *buf);
    float *xf = malloc((size_t)H * sizeof *xf);
    if (!buf || !xf) {
        free(buf), free(xf);
        return ERR_OUT_OF_MEMORY;
    }
    double *x = buf, *dy = x + H, *dres = dy + H, *g = dres + H, *dx = g + H, *dg = dx + H,
           *db = dg + H;
    for (int64_t r = 0; r < a->rows; ++r) {
        const size_t xs = typed_size(t.x);
        const void *xr = (const unsigned char *)a->x + r * a->x_stride * xs;
        const void *dyr = (const unsigned char *)a->dy + r * a->dy_stride * xs;
        const void *drr = a->dresidual_out ? (const unsigned char *)a->dresidual_out +
                                                 r * a->dresidual_out_stride * xs
                                           : NULL;
        for (int64_t i = 0; i < H; ++i) {
            xf[i] = typed_load(t.x, xr, i);
            x[i] = xf[i];
            dy[i] = typed_load(t.x, dyr, i);
            dres[i] = drr ? typed_load(t.x, drr, i) : 0.0;
            g[i] = a->gamma ? typed_load(t.params, a->gamma, i) : 1.0;
            dg[i] = db[i] = 0.0;
        }
        double mean, rstd;
        lntune_reference_row(op, xf, H, a->eps, dx, &mean, &rstd);
        if (a->rstd) rstd = a->rstd[r];
        if (a->mean) mean = a->mean[r];
        lntune_reference_backward_row(op, x, dy, drr ? dres : NULL, g, H, mean, rstd, dx, dg, db);
        void *dxr = (unsigned char *)a->dx + r * a->dx_stride * xs;
        for (int64_t i = 0; i < H; ++i) {
            typed_store(t.x, dxr, i, (float)(wrong ? dx[i] + 1e-3 : dx[i]));
            if (ws[0]) ws[0][(r % parts[0]) * H + i] += (float)dg[i];
            if (ws[1]) ws[1][(r % parts[1]) * H + i] += (float)db[i];
        }
    }
    free(buf), free(xf);
    return OK;
}

/* Kernel 2: the parts of each column summed in order in fp32, stored in the params type. */
static CUresult backward_finish(void **params) {
    const float *ws[2] = {(const float *)(uintptr_t) * (const uint64_t *)params[0],
                          (const float *)(uintptr_t) * (const uint64_t *)params[1]};
    const int64_t parts = *(const int64_t *)params[2], H = *(const int64_t *)params[3];
    void *out[2] = {(void *)(uintptr_t) * (const uint64_t *)params[4],
                    (void *)(uintptr_t) * (const uint64_t *)params[5]};
    lntune_types t;
    if (backward_types(&t) != 0 || parts < 1) return ERR_INVALID_VALUE;
    for (int k = 0; k < 2; ++k)
        for (int64_t i = 0; ws[k] && i < H; ++i) {
            float s = ws[k][i];
            for (int64_t p = 1; p < parts; ++p) s += ws[k][p * H + i];
            typed_store(t.params, out[k], i, s);
        }
    return OK;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
    (void)gy, (void)gz, (void)by, (void)bz, (void)smem, (void)stream, (void)extra;
    if (!f || !params || gx == 0 || bx == 0 || bx > 1024) return ERR_INVALID_VALUE;
    const function *fn = f;
    const module *mod = fn->mod;
    int kind = fn->kind;
    for (int i = 0; i < mod->nfunctions && kind == FORWARD; ++i)
        if (mod->functions[i].kind == BACKWARD_FINISH) kind = BACKWARD; /* the pair's first */
    const char *op_env = getenv("MOCK_CUDA_OP");
    const lntune_op which = fn->op >= 0                                ? (lntune_op)fn->op
                            : op_env && strcmp(op_env, "rmsnorm") == 0 ? LNTUNE_OP_RMSNORM
                                                                       : LNTUNE_OP_LAYERNORM;
    const long every = env_long("MOCK_CUDA_WRONG_EVERY");
    const int wrong = every > 0 && mod->number % every == 0;
    if (kind == BACKWARD_FINISH) return backward_finish(params);
    clock_us += wrong ? 50.0 : 200.0 + (double)((37 * mod->number) % 101);
    if (kind == BACKWARD) return backward_main(which, gx, wrong, params);
    const lntune_kernel_args *a = params[0];
    lntune_types t = {0};
    const char *types = getenv("MOCK_CUDA_TYPES");
    if (types && lntune_types_parse(types, &t) != 0) return ERR_INVALID_VALUE;
    const int rt = lntune_types_residual(t), quant = lntune_type_quantized(t.y);
    const char *fault = getenv("MOCK_CUDA_QUANT_FAULT");
    const int no_offset = fault && strcmp(fault, "nooffset") == 0;
    const int no_scale = fault && strcmp(fault, "noscale") == 0;
    const int scale_past = fault && strcmp(fault, "past") == 0;
    double *z = malloc((size_t)a->H * sizeof *z);
    float *s = malloc((size_t)a->H * sizeof *s);
    if (!z || !s) {
        free(z), free(s);
        return ERR_OUT_OF_MEMORY;
    }
    for (int64_t r = 0; r < a->rows; ++r) {
        const void *x = (const unsigned char *)a->x + r * a->x_stride * typed_size(t.x);
        void *y = (unsigned char *)a->y + r * a->y_stride * (quant ? 1 : typed_size(t.y));
        const void *res = a->residual ? (const unsigned char *)a->residual +
                                            r * a->residual_stride * typed_size(rt)
                                      : NULL;
        for (int64_t i = 0; i < a->H; ++i)
            s[i] = typed_load(t.x, x, i) + (res ? typed_load(rt, res, i) : 0.0f);
        if (a->residual_out) {
            void *out =
                (unsigned char *)a->residual_out + r * a->residual_out_stride * typed_size(rt);
            for (int64_t i = 0; i < a->H; ++i) typed_store(rt, out, i, s[i]);
        }
        double mean, rstd;
        lntune_reference_row(which, s, a->H, a->eps, z, &mean, &rstd);
        float amax = 0.0f;
        for (int64_t i = 0; i < a->H; ++i) {
            double v = z[i];
            if (a->gamma)
                v *= typed_load(t.params, a->gamma, i) + (no_offset ? 0.0f : a->weight_offset);
            if (a->beta) v += typed_load(t.params, a->beta, i);
            s[i] = (float)(wrong ? v + 1e-3 : v); /* s: y from here on */
            if (fabsf(s[i]) > amax) amax = fabsf(s[i]);
        }
        if (!quant) {
            for (int64_t i = 0; i < a->H; ++i) typed_store(t.y, y, i, s[i]);
        } else {
            const float qmax = (float)lntune_quant_max(t.y);
            float qinv = 1.0f / a->y_scale;
            if (lntune_type_row_scaled(t.y)) {
                if (!no_scale) a->y_scales[r] = amax / qmax;
                if (scale_past && r == a->rows - 1) a->y_scales[a->rows] = 0.0f;
                qinv = amax > 0.0f ? qmax / amax : 0.0f;
            }
            for (int64_t i = 0; i < a->H; ++i)
                ((unsigned char *)y)[i] = /* a wrong module's codes: off by two steps */
                    (unsigned char)(lntune_quant_code(t.y, s[i] * qinv) ^ (wrong ? 2u : 0u));
        }
        if (a->mean) a->mean[r] = (float)mean;
        if (a->rstd) a->rstd[r] = (float)rstd;
    }
    free(z), free(s);
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!m) return ERR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    remember(m, bytes);
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    remember((void *)(uintptr_t)p, 0);
    free((void *)(uintptr_t)p);
    return OK;
}
/* Stream order is program order here. The allocation is poisoned (NaN) so that a kernel that
 * reads a part it never wrote shows. */
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t bytes, void *stream) {
    (void)stream;
    CUresult r = cuMemAlloc_v2(p, bytes);
    if (r == OK) memset((void *)(uintptr_t)*p, 0xff, bytes);
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr p, void *stream) {
    (void)stream;
    return cuMemFree_v2(p);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
    memcpy((void *)(uintptr_t)d, s, n);
    return OK;
}
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
    memcpy(d, (const void *)(uintptr_t)s, n);
    return OK;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *stream) {
    (void)stream;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    clock_us += 180.0; /* the copy: faster than any correct kernel */
    return OK;
}
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
    uint32_t *p = (uint32_t *)(uintptr_t)d;
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return OK;
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *stream) {
    (void)stream;
    return cuMemsetD32_v2(d, v, n);
}
CUresult cuEventCreate(void **e, unsigned flags) {
    (void)flags;
    *e = calloc(1, sizeof(double));
    return *e ? OK : ERR_OUT_OF_MEMORY;
}
CUresult cuEventRecord(void *e, void *stream) {
    (void)stream;
    *(double *)e = clock_us;
    return OK;
}
CUresult cuEventSynchronize(void *e) {
    (void)e;
    return OK;
}
CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) {
    *ms = (float)((*(double *)b - *(double *)a) * 1e-3);
    return OK;
}
CUresult cuEventDestroy_v2(void *e) {
    free(e);
    return OK;
}
CUresult cuStreamCreate(void **s, unsigned flags) {
    (void)flags;
    *s = malloc(1);
    return *s ? OK : ERR_OUT_OF_MEMORY;
}
CUresult cuStreamSynchronize(void *s) {
    (void)s;
    return OK;
}
CUresult cuStreamDestroy_v2(void *s) {
    free(s);
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == OK ? "no error" : "mock CUDA error";
    return OK;
}
/* NVRTC looks this private table up in a loaded driver; the stand-in has none to give. */
CUresult cuGetExportTable(const void **table, const void *id) {
    (void)id;
    *table = NULL;
    return 801; /* CUDA_ERROR_NOT_SUPPORTED */
}
