/*
 * cuda_driver.c - the CUDA driver API resolved with dlsym from libcuda.so.1. cuda.h is not
 * included, so this builds where no toolkit is installed; the handful of types, enum values and
 * versioned entry-point names below are those of the driver ABI (stable since CUDA 4).
 */
#include "cuda_driver.h"

#include "lntune.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_EVENT_DEFAULT = 0,
    CU_STREAM_NON_BLOCKING = 1,
};

typedef struct {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream); /* CUDA 11.2+; NULL if absent */
    CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*GetErrorString)(CUresult, const char **);
} driver_api;

struct lntune_cuda {
    void *lib;
    driver_api api;
    CUdevice device;
    CUcontext ctx;
    CUcontext before; /* current on the opening thread before lntune_cuda_open */
    lntune_cuda_info info;
    char errmsg[1024];
};

static void set_error(lntune_cuda *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
}

static const char *result_text(const lntune_cuda *c, CUresult r) {
    const char *s = NULL;
    if (c->api.GetErrorString && c->api.GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    return "unknown CUDA error";
}

/* A failed driver call: the message names the call and the driver's text; rc is LNTUNE_ERROR
 * for faults (a kernel that crashed, out of memory reported as ENOMEM). */
static int fail(lntune_cuda *c, const char *call, CUresult r) {
    set_error(c, "%s failed: %s (CUresult %d)", call, result_text(c, r), r);
    return r == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? LNTUNE_ENOMEM : LNTUNE_ERROR;
}

#define CALL(c, name, ...)                                                                         \
    do {                                                                                           \
        CUresult r_ = (c)->api.name(__VA_ARGS__);                                                  \
        if (r_ != CUDA_SUCCESS) return fail((c), "cu" #name, r_);                                  \
    } while (0)

/* Entry points by exported name; later names are the ABI's versioned ones (_v2). */
static int resolve(lntune_cuda *c) {
    static const struct {
        const char *names[2];
        size_t offset;
        int required;
    } table[] = {
#define ENTRY(field, a, b, req) {{a, b}, offsetof(driver_api, field), req}
        ENTRY(Init, "cuInit", NULL, 1),
        ENTRY(DriverGetVersion, "cuDriverGetVersion", NULL, 1),
        ENTRY(DeviceGetCount, "cuDeviceGetCount", NULL, 1),
        ENTRY(DeviceGet, "cuDeviceGet", NULL, 1),
        ENTRY(DeviceGetName, "cuDeviceGetName", NULL, 1),
        ENTRY(DeviceGetAttribute, "cuDeviceGetAttribute", NULL, 1),
        ENTRY(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, 1),
        ENTRY(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",
              1),
        ENTRY(CtxSetCurrent, "cuCtxSetCurrent", NULL, 1),
        ENTRY(CtxGetCurrent, "cuCtxGetCurrent", NULL, 1),
        ENTRY(CtxSynchronize, "cuCtxSynchronize", NULL, 1),
        ENTRY(ModuleLoadData, "cuModuleLoadData", NULL, 1),
        ENTRY(ModuleUnload, "cuModuleUnload", NULL, 1),
        ENTRY(ModuleGetFunction, "cuModuleGetFunction", NULL, 1),
        ENTRY(FuncSetAttribute, "cuFuncSetAttribute", NULL, 1),
        ENTRY(LaunchKernel, "cuLaunchKernel", NULL, 1),
        ENTRY(MemAlloc, "cuMemAlloc_v2", NULL, 1),
        ENTRY(MemFree, "cuMemFree_v2", NULL, 1),
        ENTRY(MemAllocAsync, "cuMemAllocAsync", NULL, 0),
        ENTRY(MemFreeAsync, "cuMemFreeAsync", NULL, 0),
        ENTRY(MemsetD32Async, "cuMemsetD32Async", NULL, 0),
        ENTRY(MemcpyHtoD, "cuMemcpyHtoD_v2", NULL, 1),
        ENTRY(MemcpyDtoH, "cuMemcpyDtoH_v2", NULL, 1),
        ENTRY(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL, 1),
        ENTRY(MemsetD32, "cuMemsetD32_v2", NULL, 1),
        ENTRY(EventCreate, "cuEventCreate", NULL, 1),
        ENTRY(EventRecord, "cuEventRecord", NULL, 1),
        ENTRY(EventSynchronize, "cuEventSynchronize", NULL, 1),
        ENTRY(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", 1),
        ENTRY(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy", 1),
        ENTRY(StreamCreate, "cuStreamCreate", NULL, 1),
        ENTRY(StreamSynchronize, "cuStreamSynchronize", NULL, 1),
        ENTRY(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", 1),
        ENTRY(GetErrorString, "cuGetErrorString", NULL, 0),
#undef ENTRY
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        void *sym = dlsym(c->lib, table[i].names[0]);
        if (!sym && table[i].names[1]) sym = dlsym(c->lib, table[i].names[1]);
        if (!sym && table[i].required) {
            set_error(c, "CUDA driver libcuda.so.1 lacks %s (driver too old)", table[i].names[0]);
            return LNTUNE_ENODEVICE;
        }
        /* dlsym returns data pointers; POSIX guarantees they convert to function pointers. */
        memcpy((char *)&c->api + table[i].offset, &sym, sizeof sym);
    }
    return LNTUNE_OK;
}

static int attribute(lntune_cuda *c, int attr) {
    int v = 0;
    if (c->api.DeviceGetAttribute(&v, attr, c->device) != CUDA_SUCCESS) return 0;
    return v;
}

int lntune_cuda_open(int device_index, lntune_cuda **out) {
    if (!out) return LNTUNE_EINVAL;
    lntune_cuda *c = calloc(1, sizeof *c);
    *out = c;
    if (!c) return LNTUNE_ENOMEM;
    if (!(c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
        const char *why = dlerror();
        set_error(c, "no CUDA driver: cannot load libcuda.so.1 (%s); running on the CPU only",
                  why ? why : "not found");
        return LNTUNE_ENODEVICE;
    }
    int rc = resolve(c);
    if (rc) return rc;
    CUresult r = c->api.Init(0);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        set_error(c, "the CUDA driver found is the toolkit's stub library, not a real driver "
                     "(CUDA_ERROR_STUB_LIBRARY); running on the CPU only");
        return LNTUNE_ENODEVICE;
    }
    if (r == CUDA_ERROR_NO_DEVICE) {
        set_error(c, "the CUDA driver reports no GPU (CUDA_ERROR_NO_DEVICE)");
        return LNTUNE_ENODEVICE;
    }
    if (r != CUDA_SUCCESS) {
        set_error(c, "cuInit failed: %s (CUresult %d); no usable GPU", result_text(c, r), r);
        return LNTUNE_ENODEVICE;
    }
    int count = 0;
    if (c->api.DeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
        set_error(c, "the CUDA driver reports no GPU");
        return LNTUNE_ENODEVICE;
    }
    if (device_index < 0 || device_index >= count) {
        set_error(c, "no CUDA device %d (this machine has %d)", device_index, count);
        return LNTUNE_ENODEVICE;
    }
    if ((r = c->api.DeviceGet(&c->device, device_index)) != CUDA_SUCCESS) {
        fail(c, "cuDeviceGet", r);
        return LNTUNE_ENODEVICE;
    }
    if ((r = c->api.DevicePrimaryCtxRetain(&c->ctx, c->device)) != CUDA_SUCCESS) {
        fail(c, "cuDevicePrimaryCtxRetain", r);
        c->ctx = NULL;
        return LNTUNE_ENODEVICE;
    }
    if (c->api.CtxGetCurrent(&c->before) != CUDA_SUCCESS) c->before = NULL;
    if ((r = c->api.CtxSetCurrent(c->ctx)) != CUDA_SUCCESS) return fail(c, "cuCtxSetCurrent", r);
    lntune_cuda_info *in = &c->info;
    if (c->api.DeviceGetName(in->name, sizeof in->name, c->device) != CUDA_SUCCESS)
        snprintf(in->name, sizeof in->name, "CUDA device %d", device_index);
    in->sm = 10 * attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
             attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    in->multiprocessors = attribute(c, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    in->l2_bytes = attribute(c, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    in->max_smem_per_block = attribute(c, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    in->bus_width_bits = attribute(c, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    c->api.DriverGetVersion(&in->driver_version);
    return LNTUNE_OK;
}

void lntune_cuda_close(lntune_cuda *c) {
    if (!c) return;
    if (c->ctx) c->api.DevicePrimaryCtxRelease(c->device);
    if (c->lib) dlclose(c->lib);
    free(c);
}

const char *lntune_cuda_errmsg(const lntune_cuda *c) {
    return c ? c->errmsg : "out of memory";
}

const lntune_cuda_info *lntune_cuda_get_info(const lntune_cuda *c) {
    return c && c->ctx ? &c->info : NULL;
}

int lntune_cuda_bind(lntune_cuda *c) {
    if (!c || !c->ctx) return LNTUNE_ENODEVICE;
    CALL(c, CtxSetCurrent, c->ctx);
    return LNTUNE_OK;
}

int lntune_cuda_enter(lntune_cuda *c, void **saved) {
    *saved = NULL;
    if (!c || !c->ctx) return LNTUNE_ENODEVICE;
    CUcontext cur = NULL;
    CALL(c, CtxGetCurrent, &cur);
    *saved = cur;
    if (cur != c->ctx) CALL(c, CtxSetCurrent, c->ctx);
    return LNTUNE_OK;
}

void lntune_cuda_restore_opener(lntune_cuda *c) {
    lntune_cuda_leave(c, c ? c->before : NULL);
}

void lntune_cuda_leave(lntune_cuda *c, void *saved) {
    if (c && c->ctx && saved != (void *)c->ctx) c->api.CtxSetCurrent((CUcontext)saved);
}

int lntune_cuda_module_load(lntune_cuda *c, const void *image, const char *symbol, void **module,
                            void **function) {
    if (!c || !c->ctx || !image || !symbol || !module || !function) return LNTUNE_EINVAL;
    CUmodule m = NULL;
    CALL(c, ModuleLoadData, &m, image);
    int rc = lntune_cuda_module_function(c, m, symbol, function);
    if (rc != LNTUNE_OK) {
        c->api.ModuleUnload(m);
        return rc;
    }
    *module = m;
    return LNTUNE_OK;
}

int lntune_cuda_module_function(lntune_cuda *c, void *module, const char *symbol, void **function) {
    if (!c || !c->ctx || !module || !symbol || !function) return LNTUNE_EINVAL;
    CUfunction f = NULL;
    CUresult r = c->api.ModuleGetFunction(&f, (CUmodule)module, symbol);
    if (r != CUDA_SUCCESS) {
        fail(c, "cuModuleGetFunction", r);
        return LNTUNE_ENOTFOUND;
    }
    *function = f;
    return LNTUNE_OK;
}

void lntune_cuda_module_unload(lntune_cuda *c, void *module) {
    if (c && c->ctx && module) c->api.ModuleUnload((CUmodule)module);
}

int lntune_cuda_set_max_smem(lntune_cuda *c, void *function, int64_t bytes) {
    if (!c || !c->ctx || !function || bytes < 0 || bytes > INT32_MAX) return LNTUNE_EINVAL;
    CALL(c, FuncSetAttribute, (CUfunction)function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         (int)bytes);
    return LNTUNE_OK;
}

int lntune_cuda_launch_kernel(lntune_cuda *c, void *function, int64_t grid, int block, int64_t smem,
                              void *stream, void *param) {
    void *params[1] = {param};
    return lntune_cuda_launch_params(c, function, grid, block, smem, stream, params);
}

int lntune_cuda_launch_params(lntune_cuda *c, void *function, int64_t grid, int block, int64_t smem,
                              void *stream, void **params) {
    if (!c || !c->ctx || !function || !params || grid < 1 || grid > INT32_MAX || block < 1 ||
        smem < 0 || smem > INT32_MAX)
        return LNTUNE_EINVAL;
    CALL(c, LaunchKernel, (CUfunction)function, (unsigned)grid, 1, 1, (unsigned)block, 1, 1,
         (unsigned)smem, (CUstream)stream, params, NULL);
    return LNTUNE_OK;
}

int lntune_cuda_alloc(lntune_cuda *c, size_t bytes, uint64_t *ptr) {
    if (!c || !c->ctx || !ptr) return LNTUNE_EINVAL;
    *ptr = 0;
    CALL(c, MemAlloc, ptr, bytes ? bytes : 1);
    return LNTUNE_OK;
}

void lntune_cuda_free(lntune_cuda *c, uint64_t ptr) {
    if (c && c->ctx && ptr) c->api.MemFree(ptr);
}

int lntune_cuda_alloc_async(lntune_cuda *c, size_t bytes, void *stream, uint64_t *ptr) {
    if (!c || !c->ctx || !ptr) return LNTUNE_EINVAL;
    *ptr = 0;
    if (!c->api.MemAllocAsync || !c->api.MemFreeAsync || !c->api.MemsetD32Async) {
        set_error(c, "the CUDA driver lacks stream-ordered allocation (cuMemAllocAsync, "
                     "CUDA 11.2 and later)");
        return LNTUNE_ENODEVICE;
    }
    CALL(c, MemAllocAsync, ptr, bytes ? bytes : 1, (CUstream)stream);
    return LNTUNE_OK;
}

void lntune_cuda_free_async(lntune_cuda *c, uint64_t ptr, void *stream) {
    if (c && c->ctx && ptr && c->api.MemFreeAsync) c->api.MemFreeAsync(ptr, (CUstream)stream);
}

int lntune_cuda_fill32_async(lntune_cuda *c, uint64_t dst, uint32_t value, size_t count,
                             void *stream) {
    if (!c || !c->ctx || !c->api.MemsetD32Async) return LNTUNE_EINVAL;
    CALL(c, MemsetD32Async, dst, value, count, (CUstream)stream);
    return LNTUNE_OK;
}

int lntune_cuda_htod(lntune_cuda *c, uint64_t dst, const void *src, size_t bytes) {
    if (!c || !c->ctx) return LNTUNE_EINVAL;
    CALL(c, MemcpyHtoD, dst, src, bytes);
    return LNTUNE_OK;
}

int lntune_cuda_dtoh(lntune_cuda *c, void *dst, uint64_t src, size_t bytes) {
    if (!c || !c->ctx) return LNTUNE_EINVAL;
    CALL(c, MemcpyDtoH, dst, src, bytes);
    return LNTUNE_OK;
}

int lntune_cuda_dtod(lntune_cuda *c, uint64_t dst, uint64_t src, size_t bytes, void *stream) {
    if (!c || !c->ctx) return LNTUNE_EINVAL;
    CALL(c, MemcpyDtoDAsync, dst, src, bytes, (CUstream)stream);
    return LNTUNE_OK;
}

int lntune_cuda_fill32(lntune_cuda *c, uint64_t dst, uint32_t value, size_t count) {
    if (!c || !c->ctx) return LNTUNE_EINVAL;
    CALL(c, MemsetD32, dst, value, count);
    return LNTUNE_OK;
}

int lntune_cuda_stream_create(lntune_cuda *c, void **stream) {
    if (!c || !c->ctx || !stream) return LNTUNE_EINVAL;
    CALL(c, StreamCreate, (CUstream *)stream, CU_STREAM_NON_BLOCKING);
    return LNTUNE_OK;
}

int lntune_cuda_stream_sync(lntune_cuda *c, void *stream) {
    if (!c || !c->ctx) return LNTUNE_EINVAL;
    CALL(c, StreamSynchronize, (CUstream)stream);
    return LNTUNE_OK;
}

void lntune_cuda_stream_destroy(lntune_cuda *c, void *stream) {
    if (c && c->ctx && stream) c->api.StreamDestroy((CUstream)stream);
}

int lntune_cuda_event_create(lntune_cuda *c, void **event) {
    if (!c || !c->ctx || !event) return LNTUNE_EINVAL;
    CALL(c, EventCreate, (CUevent *)event, CU_EVENT_DEFAULT);
    return LNTUNE_OK;
}

int lntune_cuda_event_record(lntune_cuda *c, void *event, void *stream) {
    if (!c || !c->ctx || !event) return LNTUNE_EINVAL;
    CALL(c, EventRecord, (CUevent)event, (CUstream)stream);
    return LNTUNE_OK;
}

int lntune_cuda_event_elapsed_ms(lntune_cuda *c, void *start, void *end, float *ms) {
    if (!c || !c->ctx || !start || !end || !ms) return LNTUNE_EINVAL;
    CALL(c, EventSynchronize, (CUevent)end);
    CALL(c, EventElapsedTime, ms, (CUevent)start, (CUevent)end);
    return LNTUNE_OK;
}

void lntune_cuda_event_destroy(lntune_cuda *c, void *event) {
    if (c && c->ctx && event) c->api.EventDestroy((CUevent)event);
}

int lntune_cuda_sync(lntune_cuda *c) {
    if (!c || !c->ctx) return LNTUNE_EINVAL;
    CALL(c, CtxSynchronize);
    return LNTUNE_OK;
}
