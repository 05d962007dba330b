/*
 * test_args.c - every bad argument gets its documented code (runtime/api.c) and a message on the
 * handle, and never aborts; valid edge cases (rows = 0, zero-filled defaults) succeed.
 */
#include "half.h"
#include "lntune.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static float x[64], y[64], beta_[16];
static uint16_t hx[64], hy[64], bx[64], by[64]; /* x as fp16 and bf16, and 16-bit outputs */

static lntune_args valid(void) {
    lntune_args a;
    memset(&a, 0, sizeof a);
    a.rows = 4;
    a.H = 16;
    a.x = x;
    a.y = y;
    return a;
}

typedef struct {
    const char *what;
    int op; /* 0 layernorm, 1 rmsnorm */
    int want;
    void (*edit)(lntune_args *a);
} arg_case;

#define EDIT(name, body)                                                                           \
    static void name(lntune_args *a) {                                                             \
        body;                                                                                      \
    }
EDIT(null_x, a->x = NULL)
EDIT(null_y, a->y = NULL)
EDIT(zero_h, a->H = 0)
EDIT(negative_h, a->H = -3)
EDIT(negative_rows, a->rows = -1)
EDIT(negative_eps, a->eps = -1e-5f)
EDIT(nan_eps, a->eps = NAN)
EDIT(short_x_stride, a->x_stride = 15)
EDIT(negative_y_stride, a->y_stride = -16)
EDIT(bad_dtype, a->dtype = (lntune_dtype)7)
EDIT(bad_y_dtype, a->y_dtype = (lntune_dtype)9)
EDIT(bad_param_dtype, a->param_dtype = (lntune_dtype)4)
EDIT(f16, (a->dtype = LNTUNE_F16, a->x = hx, a->y = hy))
EDIT(bf16, (a->dtype = LNTUNE_BF16, a->x = bx, a->y = by))
EDIT(bf16_to_f32, (a->dtype = LNTUNE_BF16, a->y_dtype = a->param_dtype = LNTUNE_F32, a->x = bx,
                   a->gamma = beta_, a->beta = beta_))
EDIT(f32_to_f16, (a->y_dtype = LNTUNE_F16, a->param_dtype = LNTUNE_BF16, a->y = hy, a->gamma = by))
EDIT(f16_overflow_f32_y,
     (a->dtype = LNTUNE_F16, a->y_dtype = LNTUNE_F32, a->x = hx, a->y_stride = INT64_C(1) << 60))
EDIT(cuda_in_place, (a->device = LNTUNE_DEVICE_CUDA, a->residual = a->residual_out = y))
EDIT(cuda_bad_stride, (a->device = LNTUNE_DEVICE_CUDA, a->x_stride = 15))
EDIT(bad_device, a->device = (lntune_device_kind)5)
EDIT(cpu_stream, a->stream = (void *)x)
EDIT(cpu_index, a->device_index = 1)
static float res_[64], res_out_[64];
static uint16_t bres_[64];
EDIT(residual, a->residual = res_)
EDIT(residual_out, (a->residual = res_, a->residual_out = res_out_))
EDIT(residual_out_in_place, (a->residual = res_, a->residual_out = res_))
EDIT(residual_out_alone, a->residual_out = res_out_)
EDIT(residual_stride_alone, a->residual_stride = 16)
EDIT(residual_out_stride_alone, (a->residual = res_, a->residual_out_stride = 16))
EDIT(short_residual_stride, (a->residual = res_, a->residual_stride = 15))
EDIT(short_residual_out_stride,
     (a->residual = res_, a->residual_out = res_out_, a->residual_out_stride = 8))
EDIT(bad_residual_dtype, (a->residual = res_, a->residual_dtype = (lntune_dtype)4))
EDIT(residual_dtype_alone, a->residual_dtype = LNTUNE_BF16)
EDIT(bf16_residual_f32_x, (a->residual = bres_, a->residual_dtype = LNTUNE_BF16))
EDIT(residual_overflow,
     (a->residual = res_, a->residual_out = res_out_, a->residual_out_stride = INT64_C(1) << 60))
EDIT(residual_mean_rstd, (a->residual = res_, a->mean = y + 32, a->rstd = y + 48, a->H = 8))
EDIT(overflow_rows, a->rows = INT64_C(1) << 62)
EDIT(overflow_stride, (a->x_stride = INT64_C(1) << 60, a->rows = 16))
EDIT(beta, a->beta = beta_)
EDIT(zero_rows, (a->rows = 0, a->x = x))
EDIT(beta_without_gamma, a->beta = beta_)
EDIT(mean_rstd, (a->mean = y + 32, a->rstd = y + 48, a->H = 8))
EDIT(nothing, (void)a)

static const arg_case cases[] = {
    {"x NULL", 0, LNTUNE_EINVAL, null_x},
    {"y NULL", 1, LNTUNE_EINVAL, null_y},
    {"H = 0", 0, LNTUNE_EINVAL, zero_h},
    {"H < 0", 1, LNTUNE_EINVAL, negative_h},
    {"rows < 0", 0, LNTUNE_EINVAL, negative_rows},
    {"eps < 0", 0, LNTUNE_EINVAL, negative_eps},
    {"eps NaN", 1, LNTUNE_EINVAL, nan_eps},
    {"x_stride < H", 0, LNTUNE_EINVAL, short_x_stride},
    {"y_stride < 0", 1, LNTUNE_EINVAL, negative_y_stride},
    {"unknown dtype", 0, LNTUNE_EINVAL, bad_dtype},
    {"unknown y_dtype", 1, LNTUNE_EINVAL, bad_y_dtype},
    {"unknown param_dtype", 0, LNTUNE_EINVAL, bad_param_dtype},
    {"fp16 on the CPU", 0, LNTUNE_OK, f16},
    {"bf16 on the CPU", 1, LNTUNE_OK, bf16},
    {"bf16 x, fp32 y, gamma and beta", 0, LNTUNE_OK, bf16_to_f32},
    {"fp32 x, fp16 y, bf16 gamma", 1, LNTUNE_OK, f32_to_f16},
    {"fp16 x, fp32 y: y's extent by 4-byte elements", 0, LNTUNE_EOVERFLOW, f16_overflow_f32_y},
    {"residual_out == residual on CUDA (in place) not served", 1, LNTUNE_EUNSUPPORTED,
     cuda_in_place},
    {"x_stride < H on CUDA", 0, LNTUNE_EINVAL, cuda_bad_stride},
    {"unknown device", 0, LNTUNE_EINVAL, bad_device},
    {"stream given for the CPU", 0, LNTUNE_EINVAL, cpu_stream},
    {"device_index given for the CPU", 1, LNTUNE_EINVAL, cpu_index},
    {"residual on the CPU", 0, LNTUNE_OK, residual},
    {"residual and residual_out on the CPU", 1, LNTUNE_OK, residual_out},
    {"residual_out = residual (in place)", 0, LNTUNE_OK, residual_out_in_place},
    {"residual_out without residual", 1, LNTUNE_EINVAL, residual_out_alone},
    {"residual_stride without residual", 0, LNTUNE_EINVAL, residual_stride_alone},
    {"residual_out_stride without residual_out", 1, LNTUNE_EINVAL, residual_out_stride_alone},
    {"residual_stride < H", 0, LNTUNE_EINVAL, short_residual_stride},
    {"residual_out_stride < H", 1, LNTUNE_EINVAL, short_residual_out_stride},
    {"unknown residual_dtype", 0, LNTUNE_EINVAL, bad_residual_dtype},
    {"residual_dtype without residual is ignored", 1, LNTUNE_OK, residual_dtype_alone},
    {"bf16 residual, fp32 x", 0, LNTUNE_OK, bf16_residual_f32_x},
    {"rows x residual_out_stride past 2^63 bytes", 1, LNTUNE_EOVERFLOW, residual_overflow},
    {"residual with mean and rstd outputs", 0, LNTUNE_OK, residual_mean_rstd},
    {"rows x H past 2^63 bytes", 0, LNTUNE_EOVERFLOW, overflow_rows},
    {"rows x stride past 2^63 bytes", 1, LNTUNE_EOVERFLOW, overflow_stride},
    {"RMSNorm with beta", 1, LNTUNE_EINVAL, beta},
    {"rows = 0 is a no-op", 0, LNTUNE_OK, zero_rows},
    {"LayerNorm beta without gamma", 0, LNTUNE_OK, beta_without_gamma},
    {"mean and rstd outputs", 0, LNTUNE_OK, mean_rstd},
    {"zero-filled args plus rows, H, x, y", 1, LNTUNE_OK, nothing},
};

/* A failure on another thread leaves this thread's message alone. */
static void *fail_elsewhere(void *p) {
    lntune_args a = valid();
    a.H = -1;
    return (void *)(intptr_t)lntune_layernorm(p, &a);
}

int main(void) {
    lntune *ctx = NULL;
    int rc = lntune_open(NULL, &ctx); /* $LNTUNE_DB from ctest: a path with no database */
    if (!test_case(rc == LNTUNE_OK, "open with the default path: rc %d", rc)) return 1;
    test_fill(x, 64, 0.0, 1.0);
    test_fill(res_, 64, 0.0, 1.0);
    for (int i = 0; i < 64; ++i) hx[i] = lntune_f32_to_f16(x[i]), bx[i] = lntune_f32_to_bf16(x[i]);
    for (int i = 0; i < 64; ++i) bres_[i] = lntune_f32_to_bf16(res_[i]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        lntune_args a = valid();
        cases[i].edit(&a);
        rc = cases[i].op ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
        const char *msg = lntune_errmsg(ctx);
        test_case(rc == cases[i].want, "%s %s: rc %d (%s), want %d; message: %s",
                  cases[i].op ? "rmsnorm" : "layernorm", cases[i].what, rc, lntune_errstr(rc),
                  cases[i].want, rc ? msg : "-");
        if (rc != LNTUNE_OK)
            test_case(msg && strstr(msg, cases[i].op ? "lntune_rmsnorm" : "lntune_layernorm"),
                      "  the message names the function");
    }
    lntune_args a = valid();
    test_case(lntune_layernorm(NULL, &a) == LNTUNE_EINVAL, "NULL handle: LNTUNE_EINVAL");
    test_case(lntune_rmsnorm(ctx, NULL) == LNTUNE_EINVAL &&
                  strstr(lntune_errmsg(ctx), "args is NULL"),
              "NULL args: LNTUNE_EINVAL, message '%s'", lntune_errmsg(ctx));
    pthread_t t;
    void *other_rc = NULL;
    pthread_create(&t, NULL, fail_elsewhere, ctx);
    pthread_join(t, &other_rc);
    test_case((intptr_t)other_rc == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "args is NULL"),
              "messages are per thread: another thread's failure left '%s'", lntune_errmsg(ctx));
    test_case(strlen(lntune_errmsg(NULL)) > 0, "errmsg(NULL): '%s'", lntune_errmsg(NULL));
    test_case(lntune_open(NULL, NULL) == LNTUNE_EINVAL, "open with out NULL: LNTUNE_EINVAL");
    test_case(strcmp(lntune_errstr(LNTUNE_EOVERFLOW), "size out of range") == 0 &&
                  strcmp(lntune_errstr(999), "unknown error code") == 0,
              "errstr knows the codes");
    test_case(strcmp(lntune_version(), LNTUNE_VERSION_STRING) == 0, "version %s", lntune_version());
    lntune_close(ctx);
    return test_summary();
}
