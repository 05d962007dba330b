/*
 * cuda_driver.h - the CUDA driver API through dlopen("libcuda.so.1"), so that liblntune links
 * and runs on machines without a GPU or a driver. No library, the stub driver
 * (CUDA_ERROR_STUB_LIBRARY from cuInit) or no device all mean LNTUNE_ENODEVICE with a message.
 *
 * A handle holds the driver and the primary context of one device, current on the thread that
 * opened it (and made current again by lntune_cuda_bind on any other). Device memory is a
 * uint64_t (CUdeviceptr); modules, functions, events and streams are opaque pointers.
 */
#ifndef LNTUNE_CUDA_DRIVER_H
#define LNTUNE_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef struct lntune_cuda lntune_cuda;

typedef struct lntune_cuda_info {
    char name[256]; /* "NVIDIA H200" */
    int sm;         /* compute capability as 10 * major + minor: 90 */
    int multiprocessors;
    int64_t l2_bytes;
    int64_t max_smem_per_block; /* with opt-in (cuFuncSetAttribute) */
    int bus_width_bits;
    int driver_version; /* 13000 for 13.0 */
} lntune_cuda_info;

/* Like sqlite3_open, *out is set even on failure (except LNTUNE_ENOMEM): read the message, then
 * close it. */
int lntune_cuda_open(int device_index, lntune_cuda **out);
void lntune_cuda_close(lntune_cuda *c); /* NULL is a no-op */
const char *lntune_cuda_errmsg(const lntune_cuda *c);
const lntune_cuda_info *lntune_cuda_get_info(const lntune_cuda *c);
int lntune_cuda_bind(lntune_cuda *c); /* makes the context current on this thread */
/* Like bind, for a library called by an app: *saved receives the thread's current context
 * (NULL: none), which lntune_cuda_leave makes current again. Costs one driver call when the
 * context is current already (the app uses the same device's primary context). */
int lntune_cuda_enter(lntune_cuda *c, void **saved);
void lntune_cuda_leave(lntune_cuda *c, void *saved);
/* Makes current again, on the thread that called lntune_cuda_open, the context it had before. */
void lntune_cuda_restore_opener(lntune_cuda *c);

/* Modules: a cubin or PTX image, and one kernel in it. */
int lntune_cuda_module_load(lntune_cuda *c, const void *image, const char *symbol, void **module,
                            void **function);
void lntune_cuda_module_unload(lntune_cuda *c, void *module); /* NULL is a no-op */
/* Another kernel of a loaded module (a backward pair's second kernel); LNTUNE_ENOTFOUND. */
int lntune_cuda_module_function(lntune_cuda *c, void *module, const char *symbol, void **function);
/* Lets function use up to bytes of dynamic shared memory (needed above 48 KiB). */
int lntune_cuda_set_max_smem(lntune_cuda *c, void *function, int64_t bytes);
/* Launches function on a 1-D grid with one parameter block (e.g. lntune_kernel_args). */
int lntune_cuda_launch_kernel(lntune_cuda *c, void *function, int64_t grid, int block, int64_t smem,
                              void *stream, void *param);
/* The same with the kernel's parameters one pointer each, in order (cuLaunchKernel's params). */
int lntune_cuda_launch_params(lntune_cuda *c, void *function, int64_t grid, int block, int64_t smem,
                              void *stream, void **params);

/* Memory. */
int lntune_cuda_alloc(lntune_cuda *c, size_t bytes, uint64_t *ptr);
void lntune_cuda_free(lntune_cuda *c, uint64_t ptr); /* 0 is a no-op */
/* Stream-ordered (cuMemAllocAsync, cuMemFreeAsync, cuMemsetD32Async): no synchronization, so a
 * library may hold scratch memory for the kernels of one call on the caller's stream.
 * LNTUNE_ENODEVICE from a driver older than CUDA 11.2, which lacks them. */
int lntune_cuda_alloc_async(lntune_cuda *c, size_t bytes, void *stream, uint64_t *ptr);
void lntune_cuda_free_async(lntune_cuda *c, uint64_t ptr, void *stream); /* 0 is a no-op */
int lntune_cuda_fill32_async(lntune_cuda *c, uint64_t dst, uint32_t value, size_t count,
                             void *stream);
int lntune_cuda_htod(lntune_cuda *c, uint64_t dst, const void *src, size_t bytes);
int lntune_cuda_dtoh(lntune_cuda *c, void *dst, uint64_t src, size_t bytes);
int lntune_cuda_dtod(lntune_cuda *c, uint64_t dst, uint64_t src, size_t bytes, void *stream);
int lntune_cuda_fill32(lntune_cuda *c, uint64_t dst, uint32_t value, size_t count);

/* Streams and events (timing). */
int lntune_cuda_stream_create(lntune_cuda *c, void **stream);
int lntune_cuda_stream_sync(lntune_cuda *c, void *stream);
void lntune_cuda_stream_destroy(lntune_cuda *c, void *stream);
int lntune_cuda_event_create(lntune_cuda *c, void **event);
int lntune_cuda_event_record(lntune_cuda *c, void *event, void *stream);
int lntune_cuda_event_elapsed_ms(lntune_cuda *c, void *start, void *end, float *ms); /* syncs end */
void lntune_cuda_event_destroy(lntune_cuda *c, void *event);
int lntune_cuda_sync(lntune_cuda *c); /* the whole context; reports kernel faults */

#endif /* LNTUNE_CUDA_DRIVER_H */
