/*
 * lntune.h - the public API of liblntune, the LayerNorm/RMSNorm dispatcher.
 *
 * An app opens one handle per process (or per device), then calls lntune_layernorm or
 * lntune_rmsnorm. Each call runs the fastest kernel that `lntune` measured for that shape on this
 * machine, or a correct built-in kernel for a shape never tuned. Functions return an LNTUNE_*
 * code; lntune_errmsg gives the handle's message for the last failure.
 */
#ifndef LNTUNE_H
#define LNTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LNTUNE_API
#else
#define LNTUNE_API __attribute__((visibility("default")))
#endif

#define LNTUNE_VERSION_MAJOR 0
#define LNTUNE_VERSION_MINOR 5
#define LNTUNE_VERSION_PATCH 0
#define LNTUNE_VERSION_STRING "0.5.0"

/* Return codes. Stable: new codes are only ever appended. */
#define LNTUNE_OK 0
#define LNTUNE_ERROR 1        /* internal error */
#define LNTUNE_EINVAL 2       /* a bad argument: NULL pointer, H = 0, eps <= 0, ... */
#define LNTUNE_ENOMEM 3       /* out of memory */
#define LNTUNE_ENOTFOUND 4    /* no such op, template, variant or record */
#define LNTUNE_EIO 5          /* file or process I/O failed */
#define LNTUNE_EDB 6          /* the tuning database is corrupt, foreign, newer, or unwritable */
#define LNTUNE_ETEMPLATE 7    /* a template failed: syntax, runtime, or a bad parameter */
#define LNTUNE_ECOMPILE 8     /* the compiler is missing or rejected the source */
#define LNTUNE_EUNSUPPORTED 9 /* valid request this build or machine cannot serve */
#define LNTUNE_EVERIFY 10     /* a kernel gave a wrong result */
#define LNTUNE_ENODEVICE 11   /* no usable GPU, driver or NVRTC */
#define LNTUNE_EOVERFLOW 12   /* rows x H or a stride does not fit in 64 bits */

/*
 * Element types. The zero value means "the default": fp32 for args.dtype, and args.dtype for
 * y_dtype and param_dtype, so that a zero-filled struct is all fp32 and setting dtype alone
 * gives every tensor that type. (0.1 numbered F32 0, F16 1, BF16 2.)
 */
typedef enum lntune_dtype {
    LNTUNE_DTYPE_DEFAULT = 0,
    LNTUNE_F32 = 1,
    LNTUNE_F16 = 2,     /* IEEE binary16 */
    LNTUNE_BF16 = 3,    /* bfloat16; the output rounds to nearest (ties: see lntune_layernorm) */
    LNTUNE_I8 = 4,      /* y_dtype only: int8 codes of a scaled y (see y_scale). New in 0.4 */
    LNTUNE_FP8_E4M3 = 5 /* y_dtype only: OCP fp8 e4m3 codes of a scaled y. New in 0.4 */
} lntune_dtype;

typedef enum lntune_device_kind {
    LNTUNE_DEVICE_CPU = 0,
    LNTUNE_DEVICE_CUDA = 1
} lntune_device_kind;

/*
 * One normalization call. Zero-fill it, then set rows, H, x and y (and eps, gamma, beta as
 * needed): every other field's zero value means "absent" or "the default".
 */
typedef struct lntune_args {
    int64_t rows;
    int64_t H;
    float eps;          /* 0 means the default, 1e-5 */
    lntune_dtype dtype; /* of x; 0: fp32. Statistics are always fp32 or wider. */
    const void *x;
    void *y;
    const void *gamma; /* optional, H elements */
    const void *beta;  /* optional, H elements; LayerNorm only */
    int64_t x_stride;  /* elements between rows; 0 means H */
    int64_t y_stride;  /* 0 means H */
    /*
     * Fused residual add (Add & Norm: Post-LN's y = Norm(x + residual), and Pre-LN's pattern
     * with residual_out): with residual given, s = x + residual is formed in fp32 (both widened
     * exactly, one fp32 addition, correctly rounded: what x + residual gives in fp32), and y =
     * Norm(s) * gamma + beta as without it. residual_out (optional; needs residual) receives s
     * rounded once to residual_dtype (to nearest even, as y). residual_out may be residual itself
     * (the same pointer and stride: an in-place update); any other overlap of inputs and outputs
     * is undefined. Both have residual_dtype elements, H a row, and a row stride (0: H, else >= H).
     * CUDA: served by kernels tuned on that GPU (lntune --target cuda --residual), not in place
     * (residual_out == residual is LNTUNE_EUNSUPPORTED there), and not for untuned shapes.
     */
    const void *residual;
    void *residual_out;
    int64_t residual_stride;     /* 0 means H */
    int64_t residual_out_stride; /* 0 means H */
    float *mean;                 /* optional, rows elements: each row's mean (0 for RMSNorm) */
    float *rstd;                 /* optional, rows elements: each row's 1 / sqrt(variance + eps) */
    /*
     * LNTUNE_DEVICE_CUDA: x, y, gamma, beta, mean and rstd are device addresses (CUdeviceptr
     * values cast to pointers) on GPU device_index (the driver's numbering, as CUDA_VISIBLE_DEVICES
     * leaves it), in memory of that device's primary context, the one the CUDA runtime API uses.
     * The kernel is queued on stream (a CUstream of that context; NULL: the legacy default
     * stream) and the call returns without waiting for it. The calling thread's current CUDA
     * context is the same after the call as before. The CPU requires device_index 0, stream NULL.
     */
    lntune_device_kind device;
    int device_index;
    void *stream;             /* CUstream for LNTUNE_DEVICE_CUDA */
    lntune_dtype y_dtype;     /* of y; 0: as dtype */
    lntune_dtype param_dtype; /* of gamma and beta; 0: as dtype */
    /* of residual and residual_out; 0: as dtype. Read only when residual is given, so an app
     * built with the 0.2 header (whose struct ends before it) keeps working. */
    lntune_dtype residual_dtype;
    /*
     * Quantized y (y_dtype LNTUNE_I8 or LNTUNE_FP8_E4M3; read only then, so that an app built
     * with an older header keeps working): y is computed in fp32 as for a float y, then each
     * element is stored as the code of v = y / scale:
     *   LNTUNE_I8        NaN -> 0; else v clamped to [-128, 127], rounded to nearest, ties to
     *                    even (dequantize as code * scale)
     *   LNTUNE_FP8_E4M3  OCP e4m3, saturating: |v| clamped to 448 (Inf too), rounded to nearest
     *                    even (subnormals included); NaN -> 0x7f with v's sign
     * y_scales NULL: the static scale y_scale, one for the call (> 0, at least FLT_MIN and
     * finite, else LNTUNE_EINVAL). y_scales given (rows floats): a dynamic scale per row, written
     * there: absmax / 127 (int8) or / 448 (e4m3), absmax the largest |y| of the row (NaN left
     * out), and the row's codes are of y * (127 or 448) / absmax (all 0 where absmax is 0 or
     * Inf). Rounding: the kernels multiply by fp32 reciprocals, which may move a v lying within
     * a few fp32 roundings of a rounding boundary to the neighbouring code; nowhere else.
     * Both ops, with or without residual/residual_out, any x, gamma/beta and residual type.
     * CPU: shapes never tuned run the float built-in into a small buffer, then quantize it:
     * correct, slower than a tuned fused kernel (lntune --dtype f32/i8row ...: the type text
     * names "i8", "i8row", "e4m3", "e4m3row"). CUDA: the kernel tuned for the shape on that
     * GPU (lntune --target cuda --dtype ...), else a fused built-in of the op, affine kind,
     * fusion and code type, compiled with NVRTC at first use.
     */
    float y_scale;
    float *y_scales;
    /*
     * Weight offset (Gemma's zero-centred weights, offset 1): y = norm(x) * (weight_offset +
     * gamma) [+ beta], each weight_offset + gamma one fp32 addition of gamma widened exactly
     * (Gemma's 1.0 + weight.float()), then used as gamma. 0: none. Must be finite and needs
     * gamma (else LNTUNE_EINVAL); both ops, every type, with or without residual and a quantized
     * y. Shapes tuned for it (lntune --weight-offset) run their kernel; others, on the CPU, the
     * built-in on fp32 sums formed for the call, and on CUDA LNTUNE_EUNSUPPORTED. New in 0.5:
     * read only through lntune_layernorm_sized / lntune_rmsnorm_sized, which the macros below
     * call with this header's sizeof (lntune_args); see there.
     */
    float weight_offset;
} lntune_args;

typedef struct lntune lntune; /* opaque; one per process or device */

/*
 * NULL db_path: $LNTUNE_DB, else $XDG_CACHE_HOME/lntune/tune.db (~/.cache/lntune/tune.db).
 * The database is opened read-only. A missing database, a foreign one, or one that never saw
 * this machine is not an error: every shape then runs a built-in kernel, and LNTUNE_LOG=debug
 * says why on stderr (and, once per shape, which kernel serves it). Fails only when out of
 * resources (LNTUNE_ENOMEM) or given out == NULL (LNTUNE_EINVAL); *out is NULL on failure.
 * A CPU call runs on up to every core (tuned kernels on the threads they were tuned with), the
 * handle's pool starting on its first multi-threaded call; $LNTUNE_NUM_THREADS=N (read here)
 * caps that at N, for an app whose own threads keep the cores busy (1: no pool at all). New in
 * 0.4.
 */
LNTUNE_API int lntune_open(const char *db_path, lntune **out);

/* Flags of lntune_open_flags. */
#define LNTUNE_OPEN_BATCH_INVARIANT 0x1u

/*
 * lntune_open with flags (0: the same as lntune_open; an unknown bit: LNTUNE_EINVAL).
 * LNTUNE_OPEN_BATCH_INVARIANT: every row of a forward call (lntune_layernorm, lntune_rmsnorm)
 * gets the same bits in y, mean, rstd and residual_out whatever rows, threads or batch it comes
 * in: alone, among any other rows, at any place in them, from any number of threads. Without
 * it each rows bucket runs the kernel tuned for it, and two kernels round differently. With it
 * one kernel serves every row count of an op, types, affine kind and H: on the CPU the winner
 * tuned at the largest row count for that H (it may be slower on few rows than their own
 * winner), else the built-in, which then never switches to its non-temporal copy for large
 * calls (the same arithmetic, but another compiled kernel). Every CPU kernel lntune runs
 * computes each row on its own: the verifier checks that of every variant, bit for bit, as it
 * checks the values. A CUDA call uses the same choice (checked there only on a GPU). Backward
 * calls are not covered: dgamma and dbeta sum over the rows of a call. New in 0.4.
 */
LNTUNE_API int lntune_open_flags(const char *db_path, unsigned flags, lntune **out);
LNTUNE_API void lntune_close(lntune *ctx); /* NULL is a no-op */
/*
 * Normalize args->rows rows. Thread-safe: any number of threads may call with one handle. The
 * first call of a shape (op, dtypes, H, rows bucket, gamma/beta given, residual/residual_out
 * given) finds its kernel; every
 * later call is one lock-free lookup, with no SQL, file access or compilation. Returns:
 *   LNTUNE_OK           done (rows == 0 is a successful no-op)
 *   LNTUNE_EINVAL       ctx, args, x or y NULL; H <= 0; rows < 0; eps < 0 or NaN; a stride
 *                       neither 0 nor >= H; dtype or device out of range; device_index or stream
 *                       set for the CPU; beta given to RMSNorm; residual_out without residual; a
 *                       residual or residual_out stride without its pointer (residual_dtype
 *                       without residual is ignored)
 *   LNTUNE_EUNSUPPORTED on CUDA: beta without gamma; fp16/bf16 data or a residual for a shape
 *                       not tuned on that GPU; residual_out == residual. Any CUDA call in a
 *                       build with LNTUNE_CUDA=OFF
 *   LNTUNE_EOVERFLOW    rows x stride does not fit in the address space
 *   LNTUNE_ENODEVICE    CUDA: no driver (libcuda.so.1 is loaded at run time), the toolkit's
 *                       stub driver, no GPU, no device device_index, or no kernel this GPU can
 *                       load; the message says which. A device that failed once fails the same
 *                       way for the life of the handle.
 *   LNTUNE_ENOMEM, LNTUNE_ERROR  out of memory on a first call; a kernel failed (CUDA: the
 *                       launch was refused, e.g. a stream of another context; faults inside
 *                       the kernel surface in the app's next synchronizing CUDA call)
 * mean and rstd, when given, receive each row's statistics (mean 0 for RMSNorm).
 * The CPU serves fp32, fp16 and bf16 for x, y, gamma/beta and residual in any combination (dtype,
 * y_dtype, param_dtype, residual_dtype), with or without residual and residual_out: inputs
 * convert exactly to fp32, y is computed in fp32 and rounded once to its
 * type (to nearest, ties to even; overflow gives Inf, NaN stays NaN). One exception: a tuned
 * all-bf16 kernel may round ties away from zero (variant ties=away), which differs only where
 * the fp32 result lies exactly halfway between two bf16 values, within the same error bound. Each
 * pointer needs only the alignment of its element type. CUDA serves all of these too: the tuned
 * kernel of the shape on that GPU (lntune --target cuda [--dtype ...] [--residual]), else a
 * built-in; the built-ins of fp16/bf16 and residual calls are compiled with NVRTC at first use
 * (LNTUNE_ENODEVICE where NVRTC cannot be loaded). CUDA: the first call on a device_index opens it
 * and the first call of each shape loads its kernel (tuned for this GPU in the database, else built
 * in), both under a lock; later calls are one lookup and one kernel launch. Arguments are checked
 * as on the CPU before any driver call; rows == 0 returns LNTUNE_OK without touching the driver.
 */
LNTUNE_API int lntune_layernorm(lntune *ctx, const lntune_args *args);
LNTUNE_API int lntune_rmsnorm(lntune *ctx, const lntune_args *args);
/*
 * The same, told the size of the caller's lntune_args, so that the struct can grow without
 * breaking an app built with an older header (as zlib's deflateInit passes sizeof (z_stream)):
 * fields past args_size are taken as zero, and a larger struct than this library knows (an app
 * built with a newer header) is served when its extra bytes are all zero, else refused with
 * LNTUNE_EUNSUPPORTED. args_size below 0.4's struct (offsetof weight_offset): LNTUNE_EINVAL.
 * An app compiled with this header calls these through the macros below, so lntune_rmsnorm(ctx,
 * &args) reads every field it declares. The plain functions keep 0.4's struct (no
 * weight_offset): what an app built before 0.5 calls, or a binding that calls the symbol by
 * name; such a binding passes its struct's size to the _sized functions instead. New in 0.5.
 */
LNTUNE_API int lntune_layernorm_sized(lntune *ctx, const lntune_args *args, size_t args_size);
LNTUNE_API int lntune_rmsnorm_sized(lntune *ctx, const lntune_args *args, size_t args_size);
#define lntune_layernorm(ctx, args) lntune_layernorm_sized((ctx), (args), sizeof(lntune_args))
#define lntune_rmsnorm(ctx, args) lntune_rmsnorm_sized((ctx), (args), sizeof(lntune_args))
/*
 * One backward (gradient) call: given dy, the gradient of the forward's output y, compute dx
 * and, when asked, dgamma (and dbeta for LayerNorm). Zero-fill it, then set rows, H, x, dy and
 * dx (and eps, gamma, mean, rstd, dgamma, dbeta as needed): every other field's zero value means
 * "absent" or "the default".
 */
typedef struct lntune_backward_args {
    int64_t rows;
    int64_t H;
    float eps;                /* the forward's eps; 0 means the default, 1e-5 */
    lntune_dtype dtype;       /* of x, dy and dx; 0: fp32 */
    lntune_dtype param_dtype; /* of gamma, dgamma and dbeta; 0: as dtype */
    const void *x;            /* the forward's input */
    const void *dy;
    const void *gamma; /* optional, H elements; NULL means ones (a forward without gamma) */
    /*
     * Optional, rows elements each: the forward's saved statistics (lntune_args.mean/rstd).
     * NULL: recomputed from x and eps as the forward computes them. LayerNorm takes both or
     * neither; RMSNorm reads rstd only (mean, if given, is ignored).
     */
    const float *mean;
    const float *rstd;
    void *dx;         /* required, rows x H */
    void *dgamma;     /* optional output, H elements: sum over rows of dy * xhat */
    void *dbeta;      /* optional output, H elements: sum over rows of dy; LayerNorm only */
    int64_t x_stride; /* elements between rows; 0 means H */
    int64_t dy_stride;
    int64_t dx_stride;
    lntune_device_kind device; /* LNTUNE_DEVICE_CUDA: device pointers, run on stream */
    int device_index;
    void *stream;
    /*
     * The fused Add & Norm (the forward called with a residual: s = x + residual, y = Norm(s),
     * residual_out = s). Pass s (the forward's residual_out) as x. dresidual_out, optional, rows x
     * H in dtype's type: the gradient arriving at residual_out from the next block. When given, dx
     * is the gradient w.r.t. s, the norm's gradient + dresidual_out, added in fp32 before dx's
     * single rounding; it is also the gradient w.r.t. residual (s = x + residual), so one tensor
     * serves both. dx may be dresidual_out's buffer (same stride: each element is read before it
     * is written). NULL: dx is the norm's gradient alone.
     */
    const void *dresidual_out;
    int64_t dresidual_out_stride; /* 0 means H */
} lntune_backward_args;

/*
 * The gradients of lntune_layernorm / lntune_rmsnorm, with xhat = (x - mean) * rstd (RMSNorm:
 * x * rstd) and g = dy * gamma:
 *   LayerNorm dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); RMSNorm drops the mean(g) term
 *   dgamma = sum over rows of dy * xhat;  dbeta = sum over rows of dy
 * dgamma and dbeta are overwritten (not accumulated into); they are summed in fp32, per thread
 * then across threads in a fixed order (the same bits for the same thread count), and written
 * in param_dtype. dx is computed in fp32 and rounded once to dtype. Same threading and first-call
 * rules as the forward. Returns LNTUNE_OK (rows == 0: a no-op that leaves dgamma/dbeta alone),
 * or LNTUNE_EINVAL (ctx, args, x, dy or dx NULL; H <= 0; rows < 0; eps < 0 or NaN; a stride
 * (dresidual_out_stride included) neither 0 nor >= H; a dtype out of range; only one of mean/rstd
 * to LayerNorm; dbeta to RMSNorm; device_index or stream set), LNTUNE_EOVERFLOW, LNTUNE_ENOMEM,
 * and on a CUDA device LNTUNE_ENODEVICE (no such device, or no NVRTC to compile the built-in
 * backward for the call's types at first use) and LNTUNE_ERROR (a failed launch). On a CUDA
 * device the call is asynchronous on args.stream: a pair of kernels (tuned with `lntune --target
 * cuda --backward`, else built in) whose dgamma/dbeta partials sit in scratch memory allocated
 * and freed on that stream (cuMemAllocAsync: a CUDA 11.2 or newer driver); with partials (the
 * built-in's) they are summed in a fixed order, so a call gives the same bits every time.
 */
LNTUNE_API int lntune_layernorm_backward(lntune *ctx, const lntune_backward_args *args);
LNTUNE_API int lntune_rmsnorm_backward(lntune *ctx, const lntune_backward_args *args);
/*
 * The message of the calling thread's last failed call on ctx (each thread has its own, so
 * concurrent failures never mix). Owned by ctx; valid until that thread's next failure on ctx
 * or lntune_close; never NULL.
 */
LNTUNE_API const char *lntune_errmsg(const lntune *ctx);
LNTUNE_API const char *lntune_errstr(int rc); /* static text; never NULL */
LNTUNE_API const char *lntune_version(void);
/*
 * The instruction set of the built-in CPU kernels, which serve every shape the database has no
 * tuned kernel for: "avx512" (AVX-512 F/BW/VL besides the below: the forward kernels at 16
 * lanes, residual and backward calls as "avx2"), "avx2" (x86-64 with AVX2, FMA and F16C: 8-lane
 * vectors, hardware fp16 conversions) or "generic" (the architecture's baseline: 4-lane vectors,
 * fp16 converted in portable C). Decided at the first call in the process;
 * LNTUNE_BUILTIN_ISA=generic in the environment forces "generic", =avx2 at most "avx2" (any
 * other value leaves the choice to the CPU; LNTUNE_LOG=debug names a value other than "auto").
 * Static text.
 * The "avx2" and "avx512" built-ins store y (and residual_out) non-temporally in calls whose
 * bytes (x, y, and residual and residual_out when given) reach the crossover the tuner measured
 * on this machine (stored in the database), else the last-level cache's size, or
 * $LNTUNE_STREAMING_BYTES (read by lntune_open). New in 0.4.
 */
LNTUNE_API const char *lntune_builtin_isa(void);

#ifdef __cplusplus
}
#endif

#endif /* LNTUNE_H */
