/*
 * test_args.c - every bad argument gets its documented code (lntune.h) and a message on the
 * handle, and never aborts; valid edge cases (empty calls with NULL pointers, zero-filled
 * defaults, rows of two tensors interleaved in one buffer, y = x in place, which gives the bits of
 * the same call out of place) succeed. Pointers misaligned for their type and outputs
 * overlapping inputs are refused (forward and backward), and so is a bad
 * struct_size of each versioned struct, while a newer header's struct with its extra bytes zero
 * is served.
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
EDIT(cuda_bad_stride, (a->device = LNTUNE_DEVICE_CUDA, a->x_stride = 15))
EDIT(bad_device, a->device = (lntune_device_kind)5)
EDIT(cpu_stream, a->stream = (void *)x)
EDIT(cpu_index, a->device_index = 1)
static float res_[64], res_out_[64], big_[256];
static uint16_t bres_[64];
EDIT(cuda_in_place, (a->device = LNTUNE_DEVICE_CUDA, a->residual = a->residual_out = res_))
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
EDIT(zero_h_null, (a->H = 0, a->x = NULL, a->y = NULL))
EDIT(zero_rows_null, (a->rows = 0, a->x = NULL, a->y = NULL, a->gamma = NULL))
EDIT(zero_rows_bad_dtype, (a->rows = 0, a->x = NULL, a->dtype = (lntune_dtype)7))
EDIT(zero_h_negative_rows, (a->H = 0, a->rows = -1))
EDIT(zero_h_bad_flags, (a->H = 0, a->flags = 0x80))
EDIT(bad_flags, a->flags = 0x2)
EDIT(eps_exact, (a->flags = LNTUNE_EPS_EXACT, a->eps = 0.0f))
EDIT(y_misaligned, a->y = (char *)y + 2)
EDIT(f16_y_odd, (a->y_dtype = LNTUNE_F16, a->y = (char *)hy + 1))
EDIT(bf16_y_even, (a->y_dtype = LNTUNE_BF16, a->y = (char *)hy + 2, a->H = 8))
EDIT(x_misaligned, a->x = (const char *)x + 1)
EDIT(gamma_misaligned, a->gamma = (const char *)beta_ + 2)
EDIT(mean_misaligned, (a->mean = (float *)((char *)res_ + 1), a->H = 8))
EDIT(y_is_x, a->y = x)
EDIT(y_is_x_other_stride, (a->x = a->y = big_, a->y_stride = 32))
EDIT(f16_y_over_f32_x, (a->y_dtype = LNTUNE_F16, a->y = x))
EDIT(y_overlaps_x, (a->x = big_, a->y = big_ + 8))
EDIT(y_overlaps_x_end, (a->x = big_ + 8, a->y = big_))
EDIT(y_rows_interleave_x, (a->x = big_, a->y = big_ + 16, a->x_stride = a->y_stride = 32))
EDIT(y_rows_hit_x, (a->x = big_, a->y = big_ + 17, a->x_stride = a->y_stride = 32))
EDIT(y_rows_other_stride, (a->x = big_, a->y = big_ + 16, a->x_stride = 32, a->y_stride = 64))
EDIT(y_last_row_hits_x, (a->x = big_ + 150, a->y = big_, a->y_stride = 48))
EDIT(y_overlaps_residual, (a->residual = big_, a->y = big_ + 4))
EDIT(residual_out_partly_residual, (a->residual = big_, a->residual_out = big_ + 16))
EDIT(residual_out_in_place_strided,
     (a->residual = a->residual_out = big_, a->residual_stride = 16, a->residual_out_stride = 32))
EDIT(residual_out_overlaps_y, (a->residual = res_, a->y = big_, a->residual_out = big_ + 8))
EDIT(residual_out_overlaps_x, (a->residual = res_, a->x = big_, a->residual_out = big_ + 63))

static const arg_case cases[] = {
    {"x NULL", 0, LNTUNE_EINVAL, null_x},
    {"y NULL", 1, LNTUNE_EINVAL, null_y},
    {"H = 0 is an empty call", 0, LNTUNE_OK, zero_h},
    {"H = 0 with x and y NULL", 1, LNTUNE_OK, zero_h_null},
    {"rows = 0 with x, y and gamma NULL", 0, LNTUNE_OK, zero_rows_null},
    {"rows = 0 with an unknown dtype", 0, LNTUNE_EINVAL, zero_rows_bad_dtype},
    {"H = 0 with rows < 0", 1, LNTUNE_EINVAL, zero_h_negative_rows},
    {"H = 0 with an unknown flag", 0, LNTUNE_EINVAL, zero_h_bad_flags},
    {"an unknown flags bit", 1, LNTUNE_EINVAL, bad_flags},
    {"eps 0 with LNTUNE_EPS_EXACT", 0, LNTUNE_OK, eps_exact},
    {"fp32 y 2 bytes off its alignment", 0, LNTUNE_EINVAL, y_misaligned},
    {"fp16 y at an odd address", 1, LNTUNE_EINVAL, f16_y_odd},
    {"bf16 y 2 bytes in: aligned for its type", 1, LNTUNE_OK, bf16_y_even},
    {"fp32 x 1 byte off its alignment", 0, LNTUNE_EINVAL, x_misaligned},
    {"fp32 gamma 2 bytes off", 0, LNTUNE_EINVAL, gamma_misaligned},
    {"mean 1 byte off", 0, LNTUNE_EINVAL, mean_misaligned},
    {"y = x (in place) on the CPU", 0, LNTUNE_OK, y_is_x},
    {"y = x with another stride", 1, LNTUNE_EINVAL, y_is_x_other_stride},
    {"fp16 y at fp32 x's address", 0, LNTUNE_EINVAL, f16_y_over_f32_x},
    {"y starting inside x", 1, LNTUNE_EINVAL, y_overlaps_x},
    {"x starting inside y", 0, LNTUNE_EINVAL, y_overlaps_x_end},
    {"rows of y between rows of x (one buffer, stride 2H)", 0, LNTUNE_OK, y_rows_interleave_x},
    {"rows of y one element into rows of x", 1, LNTUNE_EINVAL, y_rows_hit_x},
    {"rows of y interleaving x's with another stride, disjoint", 0, LNTUNE_OK, y_rows_other_stride},
    {"y's last row reaching x", 1, LNTUNE_EINVAL, y_last_row_hits_x},
    {"y overlapping residual", 0, LNTUNE_EINVAL, y_overlaps_residual},
    {"residual_out partly over residual", 1, LNTUNE_EINVAL, residual_out_partly_residual},
    {"residual_out = residual with another stride", 0, LNTUNE_EINVAL,
     residual_out_in_place_strided},
    {"residual_out overlapping y", 1, LNTUNE_EINVAL, residual_out_overlaps_y},
    {"residual_out overlapping x's last element", 0, LNTUNE_EINVAL, residual_out_overlaps_x},
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

/*
 * struct_size of each versioned struct: 0 (zero-filled) and the _INIT macro's are served; one
 * below the struct is LNTUNE_EINVAL; a newer header's larger struct is served with its extra
 * bytes zero and refused with one set.
 */
static void check_struct_sizes(lntune *ctx) {
    lntune_args init = LNTUNE_ARGS_INIT, a = valid();
    test_case(init.struct_size == sizeof(lntune_args) && init.rows == 0 && init.x == NULL,
              "LNTUNE_ARGS_INIT: struct_size %zu, every other field 0", init.struct_size);
    a.struct_size = sizeof a;
    test_case(lntune_layernorm(ctx, &a) == LNTUNE_OK, "lntune_args.struct_size = sizeof: served");
    const size_t bad[] = {1, sizeof(size_t), sizeof a - 1};
    for (int i = 0; i < 3; ++i) {
        a.struct_size = bad[i];
        const int rc = lntune_rmsnorm(ctx, &a);
        test_case(rc == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "struct_size"),
                  "lntune_args.struct_size = %zu refused: %s", bad[i], lntune_errmsg(ctx));
    }
    struct {
        lntune_args a;
        unsigned char more[24];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.a = valid();
    newer.a.struct_size = sizeof newer;
    test_case(lntune_layernorm(ctx, &newer.a) == LNTUNE_OK,
              "a newer header's lntune_args with its extra bytes 0: served");
    newer.more[5] = 1;
    int rc = lntune_layernorm(ctx, &newer.a);
    test_case(rc == LNTUNE_EUNSUPPORTED && strstr(lntune_errmsg(ctx), "newer"),
              "a newer lntune_args with a field set there: refused: %s", lntune_errmsg(ctx));

    float dy[64], dx[64];
    test_fill(dy, 64, 0.0, 1.0);
    lntune_backward_args b = LNTUNE_BACKWARD_ARGS_INIT;
    b.rows = 4, b.H = 16, b.x = x, b.dy = dy, b.dx = dx;
    test_case(b.struct_size == sizeof b && lntune_layernorm_backward(ctx, &b) == LNTUNE_OK,
              "LNTUNE_BACKWARD_ARGS_INIT: served");
    b.struct_size = sizeof b - 4;
    rc = lntune_rmsnorm_backward(ctx, &b);
    test_case(rc == LNTUNE_EINVAL && strstr(lntune_errmsg(ctx), "struct_size"),
              "lntune_backward_args.struct_size below the struct refused: %s", lntune_errmsg(ctx));
    struct {
        lntune_backward_args b;
        unsigned char more[16];
    } newer_b;
    memset(&newer_b, 0, sizeof newer_b);
    newer_b.b = b;
    newer_b.b.struct_size = sizeof newer_b;
    test_case(lntune_layernorm_backward(ctx, &newer_b.b) == LNTUNE_OK,
              "a newer lntune_backward_args with its extra bytes 0: served");
    newer_b.more[15] = 9;
    test_case(lntune_layernorm_backward(ctx, &newer_b.b) == LNTUNE_EUNSUPPORTED,
              "a newer lntune_backward_args with a field set there: refused");
}

/* In place (y = x) on the CPU gives the bits of the same call out of place. */
static void check_in_place(lntune *ctx) {
    enum { N = 8 * 300 };
    static float in[N], out[N], buf[N], r[N], g[300];
    static uint16_t hin[N], hout[N], hbuf[N];
    test_fill(in, N, 1.0, 3.0);
    test_fill(r, N, 0.0, 1.0);
    test_fill(g, 300, 1.0, 0.2);
    for (int i = 0; i < N; ++i) hin[i] = lntune_f32_to_bf16(in[i]);
    for (int k = 0; k < 6; ++k) {
        const int rms = k % 2, bf16 = k / 2 == 1, residual = k / 2 == 2;
        lntune_args a = LNTUNE_ARGS_INIT;
        a.rows = 8, a.H = 300, a.gamma = g, a.param_dtype = LNTUNE_F32;
        a.dtype = bf16 ? LNTUNE_BF16 : LNTUNE_F32;
        a.residual = residual ? r : NULL;
        a.x = bf16 ? (const void *)hin : in;
        a.y = bf16 ? (void *)hout : out;
        int rc = rms ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
        memcpy(buf, in, sizeof buf);
        memcpy(hbuf, hin, sizeof hbuf);
        a.x = a.y = bf16 ? (void *)hbuf : buf;
        if (rc == LNTUNE_OK) rc = rms ? lntune_rmsnorm(ctx, &a) : lntune_layernorm(ctx, &a);
        const int same =
            bf16 ? memcmp(hbuf, hout, sizeof hout) == 0 : memcmp(buf, out, sizeof out) == 0;
        test_case(rc == LNTUNE_OK && same, "%s %s%s in place: the bits of the call out of place",
                  rms ? "rmsnorm" : "layernorm", bf16 ? "bf16" : "fp32",
                  residual ? " with residual" : "");
    }
}

/* The backward's checks: empty calls, flags, alignment, dx overlapping its inputs. */
static void check_backward(lntune *ctx) {
    static float dy[256], dx[256], g[16], dg[16];
    test_fill(dy, 256, 0.0, 1.0);
    test_fill(g, 16, 1.0, 0.1);
    lntune_backward_args v = LNTUNE_BACKWARD_ARGS_INIT;
    v.rows = 4, v.H = 16, v.x = x, v.dy = dy, v.dx = dx, v.gamma = g, v.dgamma = dg;
    const struct {
        const char *what;
        int want;
        lntune_backward_args b;
    } bcases[] = {
        {"valid", LNTUNE_OK, v},
        {"H = 0 with every pointer NULL", LNTUNE_OK, {.struct_size = sizeof v, .rows = 4, .H = 0}},
        {"rows = 0 with every pointer NULL",
         LNTUNE_OK,
         {.struct_size = sizeof v, .rows = 0, .H = 16}},
        {"rows = 0 with an unknown flag", LNTUNE_EINVAL, {.rows = 0, .H = 16, .flags = 0x4}},
        {"H < 0", LNTUNE_EINVAL, {.rows = 1, .H = -1}},
        {"an unknown flags bit",
         LNTUNE_EINVAL,
         {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dx, .flags = 0x10}},
        {"eps 0 with LNTUNE_EPS_EXACT",
         LNTUNE_OK,
         {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dx, .flags = LNTUNE_EPS_EXACT}},
        {"dx 2 bytes off",
         LNTUNE_EINVAL,
         {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = (char *)dx + 2}},
        {"dgamma 1 byte off",
         LNTUNE_EINVAL,
         {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dx, .dgamma = (char *)dg + 1}},
        {"dx = dy", LNTUNE_EINVAL, {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dy}},
        {"dx partly over dy", LNTUNE_EINVAL, {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dy + 20}},
        {"dx partly over x", LNTUNE_EINVAL, {.rows = 4, .H = 16, .x = dy, .dy = x, .dx = dy + 63}},
        {"dx rows between dy's rows",
         LNTUNE_OK,
         {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dy + 16, .dy_stride = 32, .dx_stride = 32}},
        {"dx = dresidual_out, same stride",
         LNTUNE_OK,
         {.rows = 4, .H = 16, .x = x, .dy = dy, .dx = dx, .dresidual_out = dx}},
        {"dx = dresidual_out, another stride",
         LNTUNE_EINVAL,
         {.rows = 4,
          .H = 16,
          .x = x,
          .dy = dy,
          .dx = dx,
          .dresidual_out = dx,
          .dresidual_out_stride = 32}},
    };
    for (size_t i = 0; i < sizeof bcases / sizeof bcases[0]; ++i) {
        const int rc = lntune_layernorm_backward(ctx, &bcases[i].b);
        test_case(rc == bcases[i].want, "layernorm_backward %s: rc %d, want %d; message: %s",
                  bcases[i].what, rc, bcases[i].want, rc ? lntune_errmsg(ctx) : "-");
    }
}

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
    check_struct_sizes(ctx);
    check_backward(ctx);
    check_in_place(ctx);
    lntune_close(ctx);
    return test_summary();
}
