/*
 * test_cuda_runtime.c - device memory through the public API on any machine, GPU or not (the
 * GPU's answers are test_cuda_dispatch's):
 *   - bad arguments are LNTUNE_EINVAL, and beta without gamma, an in-place residual_out and
 *     y == x LNTUNE_EUNSUPPORTED on CUDA, before any driver is touched;
 *   - where lntune_cuda_open finds no GPU, a call is LNTUNE_ENODEVICE with the driver's reason
 *     in lntune_errmsg, the same on every later call, for any device index, fp16/bf16 and
 *     residual calls too, never a crash;
 *   - rows = 0 or H = 0 is a no-op whatever the device; a misaligned or overlapping y is
 *     LNTUNE_EINVAL there too;
 *   - the CUDA built-ins liblntune carries: one per op, affine kind and H, each with a launch
 *     line, and PTX for compute_80 naming its kernel wherever NVRTC was there at build time;
 *     and one typed source per op, affine kind (the weight offset's too), fusion and y (left to
 *     its macro, or each quantized type), without PTX (compiled at first use).
 */
#include "builtin.h"
#include "check.h"
#include "cuda_driver.h"
#include "dtypes.h"
#include "lntune.h"
#include "nvrtc.h"
#include "registry.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static lntune_args device_args(void) {
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = 4;
    a.H = 16;
    a.x = (const void *)(uintptr_t)0x7f0000001000; /* device addresses: never dereferenced */
    a.y = (void *)(uintptr_t)0x7f0000002000;
    a.device = LNTUNE_DEVICE_CUDA;
    return a;
}

static void check_rc(lntune *ctx, int op, lntune_args a, int want, const char *what) {
    int rc = op ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
    const char *msg = lntune_errmsg(ctx);
    CHECK(rc == want && (rc == LNTUNE_OK || (msg[0] && strstr(msg, "lntune_"))),
          "%s %s: rc %d (%s), want %d; message: %s", op ? "rmsnorm" : "layernorm", what, rc,
          lntune_errstr(rc), want, rc ? msg : "-");
}

/* check_rc of a call with device_args(), c, changed first by the expressions that follow. */
#define CHECK_CHANGED(op, want, what, ...)                                                         \
    do {                                                                                           \
        lntune_args c = device_args();                                                             \
        __VA_ARGS__;                                                                               \
        check_rc(ctx, op, c, want, what);                                                          \
    } while (0)

int main(void) {
    lntune *ctx = NULL;
    int rc = lntune_open(NULL, &ctx); /* $LNTUNE_DB from ctest: a path with no database */
    CHECK(rc == LNTUNE_OK, "open: rc %d", rc);
    if (rc != LNTUNE_OK) return 1;

    CHECK_CHANGED(0, LNTUNE_EINVAL, "H < 0", c.H = -1);
    CHECK_CHANGED(0, LNTUNE_OK, "H = 0 (empty), x and y NULL, device 7: no driver touched", c.H = 0,
                  c.x = NULL, c.y = NULL, c.device_index = 7);
    CHECK_CHANGED(1, LNTUNE_EINVAL, "y 2 bytes off", c.y = (char *)c.y + 2);
    CHECK_CHANGED(0, LNTUNE_EINVAL, "y overlapping x", c.y = (char *)c.x + 64);
    CHECK_CHANGED(1, LNTUNE_EUNSUPPORTED, "y == x (in place)", c.y = (void *)(uintptr_t)c.x);
    CHECK_CHANGED(1, LNTUNE_EINVAL, "x NULL", c.x = NULL);
    CHECK_CHANGED(0, LNTUNE_EINVAL, "y_stride < H", c.y_stride = 15);
    CHECK_CHANGED(0, LNTUNE_EINVAL, "eps NaN", c.eps = NAN);
    CHECK_CHANGED(1, LNTUNE_EINVAL, "RMSNorm with beta", c.beta = c.x);
    CHECK_CHANGED(0, LNTUNE_EUNSUPPORTED, "residual_out == residual (in place)",
                  c.residual = c.residual_out = (void *)(uintptr_t)0x7f0000003000);
    CHECK_CHANGED(0, LNTUNE_EUNSUPPORTED, "beta without gamma", c.beta = c.x);
    CHECK_CHANGED(0, LNTUNE_ENODEVICE, "device_index -1", c.device_index = -1);
    CHECK_CHANGED(0, LNTUNE_OK, "rows = 0", c.rows = 0, c.device_index = 7);

    lntune_cuda *cu = NULL;
    rc = lntune_cuda_open(0, &cu);
    if (rc == LNTUNE_ENODEVICE) {
        printf("no GPU here: %s\n", lntune_cuda_errmsg(cu));
        for (int i = 0; i < 2; ++i) { /* the second time from the kept failure */
            check_rc(ctx, i, device_args(), LNTUNE_ENODEVICE, "no GPU");
            CHECK(strstr(lntune_errmsg(ctx), "CUDA device 0") != NULL,
                  "  the message names the device");
        }
        CHECK_CHANGED(0, LNTUNE_ENODEVICE, "no GPU, device_index 3", c.device_index = 3);
        CHECK_CHANGED(0, LNTUNE_ENODEVICE, "no GPU, gamma and a stream", c.gamma = c.x,
                      c.stream = (void *)(uintptr_t)0x1234);
    }
    /* fp16/bf16 and the residual reach the device too (on a GPU they would run: the addresses
     * here are not real, so test_cuda_dispatch runs them there). */
    if (rc == LNTUNE_ENODEVICE) {
        CHECK_CHANGED(0, LNTUNE_ENODEVICE, "no GPU, fp16", c.dtype = LNTUNE_F16);
        CHECK_CHANGED(1, LNTUNE_ENODEVICE, "no GPU, bf16", c.dtype = LNTUNE_BF16);
        CHECK_CHANGED(0, LNTUNE_ENODEVICE, "no GPU, residual", c.residual = c.x);
    } else {
        printf("a GPU is here (%s): the no-GPU cases are not checked\n",
               rc == LNTUNE_OK ? lntune_cuda_get_info(cu)->name : lntune_cuda_errmsg(cu));
    }
    lntune_cuda_close(cu);
    /* The CPU is unaffected by a failed device. */
    float x[16], y[16];
    for (int i = 0; i < 16; ++i) x[i] = (float)i;
    lntune_args a = device_args();
    a.rows = 1;
    a.x = x;
    a.y = y;
    a.device = LNTUNE_DEVICE_CPU;
    check_rc(ctx, 0, a, LNTUNE_OK, "the CPU after the GPU calls");
    lntune_close(ctx);

    /* The built-in table. */
    lntune_nvrtc *nv = NULL;
    const int have_nvrtc = lntune_nvrtc_open(&nv) == LNTUNE_OK;
    lntune_nvrtc_close(nv);
    CHECK(lntune_builtin_cuda_count > 0, "%zu CUDA built-ins", lntune_builtin_cuda_count);
    for (size_t i = 0; i < lntune_builtin_cuda_count; ++i) {
        const lntune_builtin_cuda_kernel *k = &lntune_builtin_cuda[i];
        CHECK(k->source && strstr(k->source, "// lntune-cuda-launch: block=") &&
                  strstr(k->source, k->symbol),
              "%s: source with a launch line and the kernel", k->symbol);
        if (k->typed)
            CHECK(!k->ptx && strstr(k->source, "LNTUNE_X_T") &&
                      strstr(k->symbol, k->y ? lntune_type_name(k->y) : "_typed"),
                  "%s: typed (fusion %d, y %d): its types left to -DLNTUNE_X_T=..., no PTX",
                  k->symbol, k->fusion, k->y);
        else if (have_nvrtc)
            CHECK(k->ptx && strncmp(k->ptx, "//\n// Generated by NVIDIA NVVM Compiler", 39) == 0 &&
                      strstr(k->ptx, ".target sm_80") && strstr(k->ptx, k->symbol) &&
                      strlen(k->ptx) > 1000,
                  "%s: PTX for compute_80 (%zu bytes)", k->symbol, k->ptx ? strlen(k->ptx) : 0);
        else
            printf("no NVRTC here: the build's PTX is not checked (%s)\n",
                   k->ptx ? "present" : "absent");
    }
    /* Every op and affine kind has an fp32 built-in for every H, and a typed one (any H) per
     * fusion; so has every quantized y, and the weight offset (typed only) with every y. */
    const int64_t hs[] = {1, 1024, 1025, INT64_C(1) << 40};
    static const int affines[] = {LNTUNE_DESC_NO_AFFINE, LNTUNE_DESC_GAMMA,
                                  LNTUNE_DESC_GAMMA_OFFSET};
    static const int ys[] = {0, LNTUNE_TYPE_I8, LNTUNE_TYPE_I8_ROW, LNTUNE_TYPE_E4M3,
                             LNTUNE_TYPE_E4M3_ROW};
    for (int op = 0; op < 2; ++op)
        for (int ai = 0; ai < 3; ++ai) {
            const int affine = affines[ai];
            for (size_t h = 0; h < sizeof hs / sizeof hs[0] && affine != LNTUNE_DESC_GAMMA_OFFSET;
                 ++h) {
                const lntune_builtin_cuda_kernel *found = NULL;
                for (size_t i = 0; i < lntune_builtin_cuda_count && !found; ++i) {
                    const lntune_builtin_cuda_kernel *k = &lntune_builtin_cuda[i];
                    if (!k->typed && k->op == op && k->affine == affine &&
                        (!k->max_h || hs[h] <= k->max_h))
                        found = k;
                }
                CHECK(found, "op %d affine %d H = %lld: built-in %s", op, affine, (long long)hs[h],
                      found ? found->symbol : "none");
            }
            for (int fusion = 0; fusion < 3; ++fusion)
                for (int yi = 0; yi < 5; ++yi) {
                    int n = 0;
                    for (size_t i = 0; i < lntune_builtin_cuda_count; ++i) {
                        const lntune_builtin_cuda_kernel *k = &lntune_builtin_cuda[i];
                        n += k->typed && k->op == op && k->affine == affine &&
                             k->fusion == fusion && k->y == ys[yi] && !k->max_h;
                    }
                    CHECK(n == 1, "op %d affine %d fusion %d y %d: %d typed built-in(s)", op,
                          affine, fusion, ys[yi], n);
                }
        }
    /* The backward: per op, one typed pair with and one without dresidual_out, any H. */
    for (int op = LNTUNE_DESC_LAYERNORM_BACKWARD; op <= LNTUNE_DESC_RMSNORM_BACKWARD; ++op)
        for (int fusion = 0; fusion < 2; ++fusion) {
            int n = 0;
            for (size_t i = 0; i < lntune_builtin_cuda_count; ++i) {
                const lntune_builtin_cuda_kernel *k = &lntune_builtin_cuda[i];
                n += k->typed && k->op == op && k->affine == LNTUNE_DESC_GAMMA &&
                     k->fusion == fusion && !k->max_h &&
                     strstr(k->source, "// lntune-cuda-backward: dgamma=partials") != NULL;
            }
            CHECK(n == 1, "backward op %d fusion %d: %d built-in pair(s) with partials", op, fusion,
                  n);
        }
    return CHECK_SUMMARY();
}
