/*
 * lntune.h - the public API of liblntune, the LayerNorm/RMSNorm dispatcher.
 *
 * An app opens one handle per process (or per device), then calls lntune_layernorm or
 * lntune_rmsnorm. Each call runs the fastest kernel that `lntune` measured for that shape on this
 * machine, or a correct built-in kernel for a shape never tuned (lntune_query says which).
 * Functions return an LNTUNE_* code; lntune_errmsg gives the handle's message for the last
 * failure. The history of this API is in CHANGELOG.md.
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
#define LNTUNE_VERSION_MINOR 6
#define LNTUNE_VERSION_PATCH 0
#define LNTUNE_VERSION_STRING "0.6.0"

/* Return codes. Stable: new codes are only ever appended. */
#define LNTUNE_OK 0
#define LNTUNE_ERROR 1        /* internal error */
#define LNTUNE_EINVAL 2       /* a bad argument: a NULL pointer, H < 0, eps < 0, ... */
#define LNTUNE_ENOMEM 3       /* out of memory */
#define LNTUNE_ENOTFOUND 4    /* no such op, template, variant, record or database file */
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
 * gives every tensor that type.
 */
typedef enum lntune_dtype {
    LNTUNE_DTYPE_DEFAULT = 0,
    LNTUNE_F32 = 1,
    LNTUNE_F16 = 2,     /* IEEE binary16 */
    LNTUNE_BF16 = 3,    /* bfloat16; the output rounds to nearest (ties: see lntune_layernorm) */
    LNTUNE_I8 = 4,      /* y_dtype only: int8 codes of a scaled y (see y_scale) */
    LNTUNE_FP8_E4M3 = 5 /* y_dtype only: OCP fp8 e4m3 codes of a scaled y */
} lntune_dtype;

typedef enum lntune_device_kind {
    LNTUNE_DEVICE_CPU = 0,
    LNTUNE_DEVICE_CUDA = 1
} lntune_device_kind;

/*
 * Bits of lntune_args.flags and lntune_backward_args.flags; an unknown bit is LNTUNE_EINVAL.
 * LNTUNE_EPS_EXACT: eps is used as given, 0 included (ONNX's and PyTorch's eps = 0), by every
 * kernel; a row of equal values then divides by a variance of 0 or of rounding error. Without
 * it eps 0 means 1e-5.
 */
#define LNTUNE_EPS_EXACT 0x1u

#ifdef __cplusplus /* every field but struct_size value-initialized, without -Wextra's warning */
#define LNTUNE_INIT_(type)                                                                         \
    ([] {                                                                                          \
        type t_{};                                                                                 \
        t_.struct_size = sizeof t_;                                                                \
        return t_;                                                                                 \
    }())
#else
#define LNTUNE_INIT_(type)                                                                         \
    { .struct_size = sizeof(type) }
#endif
/*
 * Versioned structs (lntune_args, lntune_backward_args, lntune_kernel_info) start with
 * struct_size, which the library reads first: the struct grows at its end and the library reads
 * only the fields struct_size covers. Initialize one with its _INIT macro, which sets
 * struct_size to this header's sizeof and every other field to zero, then set the fields a call
 * needs. struct_size 0 (a struct only zero-filled) reads as this header's struct. A struct_size
 * between 0 and this struct's size is LNTUNE_EINVAL; a larger one (a newer header's) is served
 * when its bytes past this struct are all zero, else LNTUNE_EUNSUPPORTED.
 */

/*
 * One normalization call. Every field's zero value means "absent" or "the default".
 */
typedef struct lntune_args {
    size_t struct_size; /* LNTUNE_ARGS_INIT sets it; see "Versioned structs" above */
    int64_t rows;
    int64_t H;
    float eps;          /* 0 means the default, 1e-5, unless flags has LNTUNE_EPS_EXACT */
    lntune_dtype dtype; /* of x; 0: fp32. Statistics are always fp32 or wider. */
    const void *x;
    void *y;           /* may be x itself, same stride and element size (in place; CPU only) */
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
     * (the same pointer and stride: an in-place update; CPU only, LNTUNE_EUNSUPPORTED on CUDA).
     * Both have residual_dtype elements, H a row, and a row stride (0: H, else >= H).
     */
    const void *residual;
    void *residual_out;
    int64_t residual_stride;     /* 0 means H */
    int64_t residual_out_stride; /* 0 means H */
    float *mean;                 /* optional, rows elements: each row's mean (0 for RMSNorm) */
    float *rstd;                 /* optional, rows elements: each row's 1 / sqrt(variance + eps) */
    /*
     * LNTUNE_DEVICE_CUDA: x, y, gamma, beta, residual, residual_out, mean, rstd and y_scales are
     * device addresses (CUdeviceptr values cast to pointers) on GPU device_index (the driver's
     * numbering, as CUDA_VISIBLE_DEVICES leaves it), in memory of that device's primary context,
     * the one the CUDA runtime API uses. The kernel is queued on stream (a CUstream of that
     * context; NULL: the legacy default stream) and the call returns without waiting for it. The
     * calling thread's current CUDA context is the same after the call as before. The CPU
     * requires device_index 0, stream NULL.
     */
    lntune_device_kind device;
    int device_index;
    void *stream;                /* CUstream for LNTUNE_DEVICE_CUDA */
    lntune_dtype y_dtype;        /* of y; 0: as dtype */
    lntune_dtype param_dtype;    /* of gamma and beta; 0: as dtype */
    lntune_dtype residual_dtype; /* of residual and residual_out; 0: as dtype */
    /*
     * Quantized y (y_dtype LNTUNE_I8 or LNTUNE_FP8_E4M3; y_scale and y_scales are read only
     * then): y is computed in fp32 as for a float y, then each element is stored as the code of
     * v = y / scale:
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
     * built-in on fp32 sums formed for the call, and on CUDA a typed built-in compiled with
     * NVRTC at first use.
     */
    float weight_offset;
    unsigned flags; /* LNTUNE_EPS_EXACT */
} lntune_args;

#define LNTUNE_ARGS_INIT LNTUNE_INIT_(lntune_args)

typedef struct lntune lntune; /* opaque; one per process or device */

/*
 * NULL db_path: $LNTUNE_DB, else $XDG_CACHE_HOME/lntune/tune.db (~/.cache/lntune/tune.db).
 * The database is opened read-only. A missing database, an unusable one (corrupt, not a tuning
 * database, a newer schema), one that never saw this machine, or one that others may write is
 * not an error: every CPU shape then runs a built-in kernel, lntune_db_status says why, and so
 * does LNTUNE_LOG=debug on stderr (and, once per shape, which kernel serves it). Fails only
 * when out of resources (LNTUNE_ENOMEM) or given out == NULL (LNTUNE_EINVAL); *out is NULL on
 * failure. A CPU call runs on up to every core (tuned kernels on the threads they were tuned
 * with), the handle's pool starting on its first multi-threaded call; $LNTUNE_NUM_THREADS=N
 * (read here) caps that at N, for an app whose own threads keep the cores busy (1: no pool).
 */
LNTUNE_API int lntune_open(const char *db_path, lntune **out);

/* Flags of lntune_open_flags. */
#define LNTUNE_OPEN_BATCH_INVARIANT 0x1u
#define LNTUNE_OPEN_STRICT 0x2u

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
 * calls are not covered: dgamma and dbeta sum over the rows of a call.
 * LNTUNE_OPEN_STRICT: fail where lntune_db_status would not return LNTUNE_DB_OK, with
 * LNTUNE_ENOTFOUND for a missing database and LNTUNE_EDB for any other (*out NULL; open without
 * it and call lntune_db_status for the reason, which LNTUNE_LOG=debug also prints).
 */
LNTUNE_API int lntune_open_flags(const char *db_path, unsigned flags, lntune **out);
LNTUNE_API void lntune_close(lntune *ctx); /* NULL is a no-op */

/* What lntune_db_status returns: the state of the handle's tuning database for the CPU. */
#define LNTUNE_DB_OK 0            /* opened, knows this machine, its tuned kernels may load */
#define LNTUNE_DB_MISSING 1       /* no file at the path (or no path: no $HOME) */
#define LNTUNE_DB_UNUSABLE 2      /* corrupt, not an lntune database, a newer schema, unreadable */
#define LNTUNE_DB_UNTRUSTED 3     /* someone else may write it: no code is loaded from it */
#define LNTUNE_DB_OTHER_MACHINE 4 /* no record of this machine's CPU (tuned elsewhere) */
/*
 * The state of ctx's tuning database as lntune_open found it: the first of the above that
 * applies, in that order. Every state but LNTUNE_DB_OK means every CPU shape runs a built-in
 * (CUDA devices look themselves up at their first call). *message (when message is not NULL)
 * gets a sentence saying which file and why, owned by ctx and valid until lntune_close. A NULL
 * ctx returns LNTUNE_DB_MISSING.
 */
LNTUNE_API int lntune_db_status(const lntune *ctx, const char **message);

/*
 * Normalize args->rows rows. Thread-safe: any number of threads may call with one handle. The
 * first call of a shape (op, dtypes, H, rows bucket, gamma/beta given, residual/residual_out
 * given, weight offset or not) finds its kernel; every later call is one lock-free lookup, with
 * no SQL, file access or compilation. Returns:
 *   LNTUNE_OK           done. rows == 0 or H == 0 is an empty call: once the fields other than
 *                       pointers check out (sizes, eps, flags, dtypes, device fields, y_scale,
 *                       weight_offset finite),
 *                       it returns LNTUNE_OK reading and writing nothing, and every pointer may
 *                       be NULL (on CUDA it never touches the driver)
 *   LNTUNE_EINVAL       ctx, args, x or y NULL; H < 0; rows < 0; eps < 0 or NaN; an unknown
 *                       flags bit; a bad struct_size; a stride neither 0 nor >= H; dtype or
 *                       device out of range; device_index or stream set for the CPU; beta given
 *                       to RMSNorm; residual_out without residual; a residual or residual_out
 *                       stride without its pointer (residual_dtype without residual is
 *                       ignored); a weight_offset not finite or without gamma; a y_scale out of
 *                       range; a pointer not aligned to its element type; y overlapping x
 *                       (other than as x itself), residual or residual_out; residual_out
 *                       overlapping x, or residual other than as residual itself (two strided
 *                       matrices overlap where an element of one lies in a row of the other:
 *                       rows interleaved in one buffer do not)
 *   LNTUNE_EUNSUPPORTED on CUDA: beta without gamma; residual_out == residual; y == x (no GPU
 *                       has verified a kernel in place yet). Any CUDA call
 *                       in a build with LNTUNE_CUDA=OFF. A struct_size past this header's struct
 *                       with a nonzero byte there
 *   LNTUNE_EOVERFLOW    rows x stride does not fit in the address space
 *   LNTUNE_ENODEVICE    CUDA: no driver (libcuda.so.1 is loaded at run time), the toolkit's
 *                       stub driver, no GPU, no device device_index, no kernel this GPU can
 *                       load, or no NVRTC where a built-in must be compiled; the message says
 *                       which. A device that failed once fails the same way for the life of the
 *                       handle.
 *   LNTUNE_ENOMEM, LNTUNE_ERROR  out of memory on a first call; a kernel failed (CUDA: the
 *                       launch was refused, e.g. a stream of another context; faults inside
 *                       the kernel surface in the app's next synchronizing CUDA call)
 * mean and rstd, when given, receive each row's statistics (mean 0 for RMSNorm).
 * The CPU serves fp32, fp16 and bf16 for x, y, gamma/beta and residual in any combination (dtype,
 * y_dtype, param_dtype, residual_dtype), with or without residual and residual_out: inputs
 * convert exactly to fp32, y is computed in fp32 and rounded once to its type (to nearest, ties
 * to even; overflow gives Inf, NaN stays NaN). One exception: a tuned all-bf16 kernel may round
 * ties away from zero (variant ties=away), which differs only where the fp32 result lies exactly
 * halfway between two bf16 values, within the same error bound. Each pointer needs only the
 * alignment of its element type. CUDA serves all of these too: the tuned kernel of the shape on
 * that GPU (lntune --target cuda [--dtype ...] [--residual] [--weight-offset]), else a built-in;
 * the fp32 forward built-ins without residual, weight offset or quantized y come as PTX in
 * liblntune (built where the build had NVRTC), every other one is compiled with NVRTC at first
 * use (LNTUNE_ENODEVICE where NVRTC cannot be loaded). CUDA: the first call on a device_index opens
 * it and the first call of each shape loads its kernel (tuned for this GPU in the database, else
 * built in), both under a lock; later calls are one lookup and one kernel launch. Arguments are
 * checked as on the CPU before any driver call.
 */
LNTUNE_API int lntune_layernorm(lntune *ctx, const lntune_args *args);
LNTUNE_API int lntune_rmsnorm(lntune *ctx, const lntune_args *args);

/*
 * One backward (gradient) call: given dy, the gradient of the forward's output y, compute dx
 * and, when asked, dgamma (and dbeta for LayerNorm). Every field's zero value means "absent" or
 * "the default".
 */
typedef struct lntune_backward_args {
    size_t struct_size; /* LNTUNE_BACKWARD_ARGS_INIT sets it; see "Versioned structs" above */
    int64_t rows;
    int64_t H;
    float eps;                /* the forward's eps; 0 means 1e-5 unless flags has EPS_EXACT */
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
    unsigned flags;               /* LNTUNE_EPS_EXACT */
} lntune_backward_args;

#define LNTUNE_BACKWARD_ARGS_INIT LNTUNE_INIT_(lntune_backward_args)

/*
 * The gradients of lntune_layernorm / lntune_rmsnorm, with xhat = (x - mean) * rstd (RMSNorm:
 * x * rstd) and g = dy * gamma:
 *   LayerNorm dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); RMSNorm drops the mean(g) term
 *   dgamma = sum over rows of dy * xhat;  dbeta = sum over rows of dy
 * dgamma and dbeta are overwritten (not accumulated into); they are summed in fp32, per thread
 * then across threads in a fixed order (the same bits for the same thread count), and written
 * in param_dtype. dx is computed in fp32 and rounded once to dtype. Same threading and first-call
 * rules as the forward. Returns LNTUNE_OK (an empty call, rows == 0 or H == 0, checked and
 * served as the forward's: nothing is read or written, dgamma/dbeta included, and every pointer
 * may be NULL), or LNTUNE_EINVAL (ctx, args, x, dy or dx NULL; H < 0; rows < 0; eps < 0 or NaN;
 * an unknown flags bit; a bad struct_size; a stride (dresidual_out_stride included) neither 0
 * nor >= H; a dtype out of range; only one of mean/rstd to LayerNorm; dbeta to RMSNorm;
 * device_index or stream set for the CPU; a pointer not aligned to its element type; dx
 * overlapping x or dy, or dresidual_out other than as its own buffer), LNTUNE_EUNSUPPORTED (a
 * struct_size past this header's struct with a nonzero byte there), LNTUNE_EOVERFLOW,
 * LNTUNE_ENOMEM, and on a CUDA device LNTUNE_ENODEVICE (no such device, or no NVRTC to compile
 * the built-in backward for the call's types at first use) and LNTUNE_ERROR (a failed launch).
 * On a CUDA device the call is asynchronous on args.stream: a pair of kernels (tuned with
 * `lntune --target cuda --backward`, else built in) whose dgamma/dbeta partials sit in scratch
 * memory allocated and freed on that stream (cuMemAllocAsync: a CUDA 11.2 or newer driver); with
 * partials (the built-in's) they are summed in a fixed order, so a call gives the same bits every
 * time.
 */
LNTUNE_API int lntune_layernorm_backward(lntune *ctx, const lntune_backward_args *args);
LNTUNE_API int lntune_rmsnorm_backward(lntune *ctx, const lntune_backward_args *args);

/* The ops of lntune_query. */
#define LNTUNE_LAYERNORM 0
#define LNTUNE_RMSNORM 1

/* lntune_kernel_info.served_by */
#define LNTUNE_SERVED_BUILTIN 0 /* a built-in kernel */
#define LNTUNE_SERVED_TUNED 1   /* a kernel tuned on this machine, from the database */
#define LNTUNE_SERVED_NONE 2    /* an empty call (rows == 0 or H == 0): no kernel runs */

/*
 * Which kernel serves a call (lntune_query). Strings are owned by the handle and valid until
 * lntune_close; never NULL.
 */
typedef struct lntune_kernel_info {
    size_t struct_size;  /* LNTUNE_KERNEL_INFO_INIT sets it; see "Versioned structs" above */
    int served_by;       /* LNTUNE_SERVED_* */
    int threads;         /* tuned: the threads it runs on (CPU; 0 on CUDA); else 0 */
    int64_t tuned_H;     /* tuned: the H its winner was tuned at (another H: it reads H at run
                            time and this H lies within its reach); else 0 */
    int64_t tuned_rows;  /* tuned: the rows it was tuned at; else 0 */
    const char *variant; /* tuned: its variant's parameters ("vec=8,acc=2,..."); else "" */
    const char *reason;  /* why this kernel, and for a built-in why no tuned one serves */
} lntune_kernel_info;

#define LNTUNE_KERNEL_INFO_INIT LNTUNE_INIT_(lntune_kernel_info)

/*
 * Says which kernel lntune_layernorm (op LNTUNE_LAYERNORM) or lntune_rmsnorm (LNTUNE_RMSNORM)
 * would run for args, into *info, without running it: args are checked as the call checks them
 * (the same codes and messages; the data is never read), then the shape is resolved as its first
 * call resolves it (the same decision, which loads the tuned kernel or, on CUDA, opens the device
 * and loads the kernel, so that a call after it takes the fast path). Returns LNTUNE_OK or the
 * code the call would return before running a kernel; LNTUNE_EINVAL too for an unknown op or
 * info NULL. A tuned kernel may still decline a call's arguments when it runs (its checks are
 * stricter than the shape), and the built-in then serves it.
 */
LNTUNE_API int lntune_query(lntune *ctx, int op, const lntune_args *args, lntune_kernel_info *info);

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
 * $LNTUNE_STREAMING_BYTES (read by lntune_open).
 */
LNTUNE_API const char *lntune_builtin_isa(void);

#ifdef __cplusplus
}
#endif

#endif /* LNTUNE_H */
