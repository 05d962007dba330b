/*
 * test_builtin_quant.c - the untuned path of a quantized y stores exactly core/quant.h's codes
 * and scales of the float built-in's own fp32 y, in whichever copy of the row pass the process
 * runs (ctest runs it with LNTUNE_BUILTIN_ISA=generic, =avx2 and =auto: the baseline's 4 lanes,
 * AVX2's 8, AVX-512's 16 where the CPU has them; runtime/builtin_quant_wide.h).
 *
 *   test_builtin_quant
 *
 * For RMSNorm and LayerNorm, int8 and e4m3, static and per-row scales, at H around the vector
 * blocks (1, 15, 17, 31, 33, 63, 65, 4097): the same call with an fp32 y gives the y the codes
 * must be of; gamma puts NaN, +-Inf, values far past the largest code and values near 0 in some
 * lanes (a static scale saturates them; a per-row scale leaves NaN out of the row's largest |y|,
 * and an Inf row takes the factor 0). y is strided, and the call runs twice, on y poisoned 0x00
 * and 0xff, so that every code is written and no byte between rows or past the last one is.
 */
#include "check.h"
#include "dtypes.h"
#include "lntune.h"
#include "quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 6, GAP = 5, PAD = 64 };

/* gamma: mostly about 1, with NaN, +-Inf, huge and tiny lanes where special is set. */
static void fill(float *x, float *gamma, int64_t H, int special, uint32_t seed) {
    for (int64_t i = 0; i < ROWS * H; ++i) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f * 6.0f - 3.0f;
    }
    for (int64_t i = 0; i < H; ++i) {
        seed = seed * 1664525u + 1013904223u;
        gamma[i] = 0.25f + (float)(seed >> 8) / 16777216.0f * 2.0f;
        if (!special) continue;
        switch (i % 11) {
        case 2:
            gamma[i] = NAN;
            break;
        case 5:
            gamma[i] = 3e5f;
            break; /* saturates a static scale */
        case 7:
            gamma[i] = -7e4f;
            break; /* and below -128 / -448 */
        case 9:
            gamma[i] = 1e-6f;
            break; /* e4m3 subnormals and 0 */
        default:
            break;
        }
    }
    if (special && H > 3) gamma[H - 1] = INFINITY, gamma[H - 3] = -INFINITY;
}

/* quant.h's factor of a row of y: 1 / y_scale, or QMAX / absmax (NaN left out; 0 for 0 or Inf). */
static float row_inv(const float *y, int64_t H, int qtype, float y_scale, float *scale) {
    if (!lntune_type_row_scaled(qtype)) return 1.0f / y_scale;
    float m = 0.0f;
    for (int64_t i = 0; i < H; ++i)
        if (fabsf(y[i]) > m) m = fabsf(y[i]);
    const float qmax = (float)lntune_quant_max(qtype);
    *scale = m / qmax;
    return m > 0.0f ? qmax / m : 0.0f;
}

/* One call of op (ln: LayerNorm) at H, y of qtype; every code and scale exactly the reference's.
 * Returns the number of wrong codes, scales and bytes. */
static long check_call(lntune *ctx, int ln, int qtype, int64_t H, int special) {
    const int64_t ys = H + GAP;
    const size_t n = (size_t)(ROWS * H), qbytes = (size_t)(ROWS * ys + PAD);
    float *x = malloc(n * sizeof *x), *gamma = malloc((size_t)H * sizeof *gamma),
          *beta = calloc((size_t)H, sizeof *beta), *yf = malloc(n * sizeof *yf);
    unsigned char *q = malloc(qbytes);
    long wrong = 0;
    if (!x || !gamma || !beta || !yf || !q) {
        CHECK(0, "out of memory");
        wrong = 1;
        goto done;
    }
    fill(x, gamma, H, special, (uint32_t)(H * 31 + qtype * 7 + ln));
    lntune_args a = {0};
    a.rows = ROWS, a.H = H, a.x = x, a.gamma = gamma, a.beta = ln ? beta : NULL, a.y = yf;
    int rc = ln ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
    if (rc != LNTUNE_OK) {
        CHECK(0, "fp32 y: rc %d %s", rc, lntune_errmsg(ctx));
        wrong = 1;
        goto done;
    }
    const float y_scale = lntune_quant_is_e4m3(qtype) ? 0.05f : 0.02f;
    float scales[ROWS + 1];
    a.y = q, a.y_stride = ys, a.y_scale = y_scale;
    a.y_dtype = lntune_quant_is_e4m3(qtype) ? LNTUNE_FP8_E4M3 : LNTUNE_I8;
    a.y_scales = lntune_type_row_scaled(qtype) ? scales : NULL;
    for (int poison = 0x00; poison <= 0xff; poison += 0xff) {
        memset(q, poison, qbytes);
        for (int r = 0; r <= ROWS; ++r) scales[r] = NAN;
        rc = ln ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
        if (rc != LNTUNE_OK) {
            CHECK(0, "quantized y: rc %d %s", rc, lntune_errmsg(ctx));
            ++wrong;
            break;
        }
        for (int r = 0; r < ROWS; ++r) {
            const float *y = yf + r * H;
            float scale = 0.0f;
            const float inv = row_inv(y, H, qtype, y_scale, &scale);
            if (a.y_scales && memcmp(&scale, &scales[r], sizeof scale) != 0) {
                EXPECT(0, "row %d: scale %a, not %a", r, (double)scales[r], (double)scale);
                ++wrong;
            }
            for (int64_t i = 0; i < H; ++i) {
                const unsigned want = lntune_quant_code(qtype, (double)(y[i] * inv)),
                               got = q[r * ys + i];
                if (got != want && wrong < 8)
                    EXPECT(0, "row %d [%lld]: y %a * %a: code 0x%02x, not 0x%02x", r, (long long)i,
                           (double)y[i], (double)inv, got, want);
                wrong += got != want;
            }
            for (int64_t i = H; i < (r + 1 < ROWS ? ys : ys + PAD); ++i)
                wrong += q[r * ys + i] != poison;
        }
        if (!isnan(scales[ROWS])) ++wrong;
    }
done:
    CHECK(!wrong, "%s y %s H=%lld%s: %ld wrong", ln ? "layernorm" : "rmsnorm",
          lntune_type_name(qtype), (long long)H, special ? " (NaN, Inf, huge, tiny)" : "", wrong);
    free(x), free(gamma), free(beta), free(yf), free(q);
    return wrong;
}

int main(void) {
    lntune *ctx = NULL;
    if (lntune_open(getenv("LNTUNE_DB"), &ctx) != LNTUNE_OK) {
        CHECK(0, "lntune_open");
        return 1;
    }
    const char *forced = getenv("LNTUNE_BUILTIN_ISA");
    const char *isa = lntune_builtin_isa();
    /* generic forced runs the baseline pass; avx2 forced never the AVX-512 one (test_runtime
     * checks which copy the CPU gets) */
    const int generic = forced && strcmp(forced, "generic") == 0,
              avx2 = forced && strcmp(forced, "avx2") == 0;
    CHECK((!generic || strcmp(isa, "generic") == 0) && (!avx2 || strcmp(isa, "avx512") != 0),
          "LNTUNE_BUILTIN_ISA=%s: the %s copy", forced ? forced : "(unset)", isa);
    static const int64_t Hs[] = {1, 15, 17, 31, 33, 63, 65, 4097};
    static const int qtypes[] = {LNTUNE_TYPE_I8_ROW, LNTUNE_TYPE_E4M3_ROW, LNTUNE_TYPE_I8,
                                 LNTUNE_TYPE_E4M3};
    for (int ln = 0; ln < 2; ++ln)
        for (size_t t = 0; t < sizeof qtypes / sizeof *qtypes; ++t)
            for (size_t h = 0; h < sizeof Hs / sizeof *Hs; ++h)
                for (int special = 0; special < 2; ++special)
                    check_call(ctx, ln, qtypes[t], Hs[h], special);
    lntune_close(ctx);
    return CHECK_SUMMARY();
}
