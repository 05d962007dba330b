/*
 * test_runtime_dtypes.c - fp16 and bf16 through liblntune on the CPU.
 *
 * 1. core/half.h: 16 -> 32 bits over all 65536 patterns of each type against ldexp; 32 -> 16
 *    over random bit patterns, random values of every magnitude, each midpoint between
 *    neighbouring 16-bit values (and the floats either side of it) and edge cases, against
 *    round-to-nearest-even computed in double.
 * 2. Every (x, y, gamma/beta) tuple x op x affine kind x H x rows, dense and padded (with x, y,
 *    gamma and beta one element past their allocation's alignment), against the float64
 *    reference of the exactly upconverted inputs: every output element written, nothing outside
 *    the rows, rows at mean 1000 and of tiny variance, a NaN row and an Inf row, outputs in
 *    fp16's subnormal range and past its largest value.
 * 3. The database key of a tuple: tuned records keyed "bf16", "bf16/f32/f32" and "f32" for one
 *    shape each serve their own tuple and no other.
 *
 *   test_runtime_dtypes SCRATCH_DIR
 */
#include "dtypes.h"
#include "half.h"
#include "lntune.h"
#include "testutil.h"
#include "typed_bits.h"
#include "tunedb.h"

#include <string.h>

/* ---- types ---- */

/* ---- 1. conversions ---- */

/* v rounded to nearest even in a type of `bits` significand bits, normal exponents down to
 * emin, largest finite value max (beyond it: Inf). nearbyint rounds to nearest even. */
static double round_ref(double v, int bits, int emin, double max) {
    if (v == 0.0 || !isfinite(v)) return v;
    int e = ilogb(v);
    if (e < emin) e = emin;
    double r = ldexp(nearbyint(ldexp(fabs(v), bits - 1 - e)), e - bits + 1);
    return copysign(r > max ? INFINITY : r, v);
}

static const double f16_max = 65504.0, bf16_max = 0x1.fep127;

/* One 32 -> 16 conversion of each type against the reference; returns 1 when both agree. */
static int check_down(float f, char *why, size_t len) {
    const uint32_t u = lntune_f32_to_bits(f);
    const uint16_t h = lntune_f32_to_f16(f), b = lntune_f32_to_bf16(f);
    if (isnan(f)) {
        int ok = (h & 0x7c00) == 0x7c00 && (h & 0x0200) && (h >> 15) == (u >> 31) &&
                 (b & 0x7f80) == 0x7f80 && (b & 0x0040) && (b >> 15) == (u >> 31);
        if (!ok) snprintf(why, len, "NaN %08x -> f16 %04x, bf16 %04x", u, h, b);
        return ok;
    }
    const double want_h = round_ref(f, 11, -14, f16_max), want_b = round_ref(f, 8, -126, bf16_max);
    const double got_h = lntune_f16_to_f32(h), got_b = lntune_bf16_to_f32(b);
    int ok = got_h == want_h && signbit(got_h) == signbit(want_h) && got_b == want_b &&
             signbit(got_b) == signbit(want_b);
    if (!ok)
        snprintf(why, len, "%a (%08x) -> f16 %04x = %a (want %a), bf16 %04x = %a (want %a)",
                 (double)f, u, h, got_h, want_h, b, got_b, want_b);
    return ok;
}

static void test_conversions(void) {
    char why[256] = "";
    int bad_h = 0, bad_b = 0;
    for (uint32_t p = 0; p < 0x10000; ++p) {
        const uint16_t h = (uint16_t)p;
        const int s = h >> 15;
        /* fp16: 5 exponent bits (bias 15), 10 fraction bits. */
        int e = h >> 10 & 0x1f, m = h & 0x3ff;
        float got = lntune_f16_to_f32(h);
        uint32_t gu = lntune_f32_to_bits(got);
        int ok;
        if (e == 0x1f)
            ok = gu == ((uint32_t)s << 31 | 0x7f800000u | (uint32_t)m << 13); /* Inf, NaN payload */
        else {
            double want = (s ? -1 : 1) * ldexp(e ? m + 1024 : m, (e ? e : 1) - 25);
            ok = (double)got == want && (signbit(got) != 0) == s;
        }
        if (!ok && bad_h++ == 0) snprintf(why, sizeof why, "f16 %04x -> %a", h, (double)got);
        /* bf16: 8 exponent bits (bias 127), 7 fraction bits. */
        e = h >> 7 & 0xff, m = h & 0x7f;
        got = lntune_bf16_to_f32(h);
        gu = lntune_f32_to_bits(got);
        if (e == 0xff)
            ok = gu == (uint32_t)h << 16;
        else {
            double want = (s ? -1 : 1) * ldexp(e ? m + 128 : m, (e ? e : 1) - 134);
            ok = (double)got == want && (signbit(got) != 0) == s;
        }
        if (!ok && bad_b++ == 0) snprintf(why, sizeof why, "bf16 %04x -> %a", h, (double)got);
    }
    test_case(bad_h == 0 && bad_b == 0,
              "16 -> 32 bits, all 65536 patterns: %d fp16 and %d bf16 wrong %s", bad_h, bad_b, why);

    int bad = 0, n = 0;
    why[0] = '\0';
#define DOWN(f)                                                                                    \
    do {                                                                                           \
        char w_[256];                                                                              \
        ++n;                                                                                       \
        if (!check_down((f), w_, sizeof w_) && bad++ == 0) memcpy(why, w_, sizeof w_);             \
    } while (0)
    static const uint32_t edges[] = {
        0x00000000u, 0x80000000u, 0x3f800000u, 0x477fe000u, /* 0, -0, 1, 65504 */
        0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x477ff001u, /* around 65520, the first Inf */
        0x47800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, /* 65536, FLT_MAX, Inf */
        0xff800000u, 0x33800000u, 0x33000000u, 0xb3000000u, /* -Inf, 2^-24, 2^-25 (tie to 0) */
        0x33000001u, 0x33400000u, 0x38800000u, 0x387fc000u, /* 3*2^-26, 2^-14, largest sub */
        0x387fe000u, 0x387ff000u, 0x00800000u, 0x00000001u, /* ties near 2^-14, FLT_MIN, den. */
        0x807fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x7f7f8001u, /* bf16 max region */
        0x3f808000u, 0x3f818000u, 0x3f800001u, 0x3f807fffu, /* bf16 ties to even */
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, /* NaNs: quiet, signalling */
        0x7fffffffu, 0x7f802000u, 0x7f801fffu, 0x7f80ffffu, /* payloads in the low bits only */
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; ++i) DOWN(lntune_bits_to_f32(edges[i]));
    /* Midpoints between neighbouring finite values of fp16, then of bf16 (exact in float), and
     * the floats beside: up to the largest finite one, max, and the next power of two, beyond. */
    static const struct {
        float (*to_f32)(uint16_t);
        uint32_t max;
        double beyond;
    } types[] = {{lntune_f16_to_f32, 0x7bff, 65536.0}, {lntune_bf16_to_f32, 0x7f7f, 0x1p128}};
    for (size_t k = 0; k < 2; ++k)
        for (uint32_t p = 0; p <= types[k].max; ++p) {
            double lo = types[k].to_f32((uint16_t)p);
            double hi = p == types[k].max ? types[k].beyond : types[k].to_f32((uint16_t)(p + 1));
            float mid = (float)((lo + hi) / 2);
            for (int s = 0; s < 2; ++s) {
                float v = s ? -mid : mid;
                DOWN(v);
                DOWN(nextafterf(v, INFINITY));
                DOWN(nextafterf(v, -INFINITY));
            }
        }
    for (int i = 0; i < 1000000; ++i) {
        /* Random bit patterns (any exponent, NaNs included), then values from 2^-30 to 2^18. */
        DOWN(lntune_bits_to_f32((uint32_t)(test_uniform(&test_rng) * 4294967296.0)));
        float v =
            (float)ldexp(1.0 + test_uniform(&test_rng), (int)(test_uniform(&test_rng) * 49) - 30);
        DOWN(test_uniform(&test_rng) < 0.5 ? -v : v);
    }
#undef DOWN
    test_case(bad == 0, "32 -> 16 bits round to nearest even: %d of %d wrong %s", bad, n, why);
}

/* ---- 2. every tuple through the API ---- */

enum { AFFINE_NONE, AFFINE_GAMMA, AFFINE_GAMMA_BETA, AFFINE_BETA };
static const char *const affine_names[] = {"none", "gamma", "gamma+beta", "beta"};
enum { TAIL = 8 }; /* poisoned y elements past the last row */

typedef struct {
    lntune_types t;
    int op; /* LNTUNE_OP_* */
    int affine;
    int64_t H, rows;
    int padded;   /* row padding, and pointers one element past the allocation's alignment */
    double scale; /* of gamma and beta */
} dcase;

static void describe(const dcase *c, char *buf, size_t len) {
    char types[32];
    lntune_types_format(c->t, types, sizeof types);
    snprintf(buf, len, "%s %s H=%lld rows=%lld %s %s scale %g", lntune_op_name(c->op), types,
             (long long)c->H, (long long)c->rows, affine_names[c->affine],
             c->padded ? "padded+misaligned" : "dense", c->scale);
}

/* Stores at p[i] a nonzero value of type t near offset (uniform, standard deviation spread). */
static void put_random(int t, void *p, int64_t i, double offset, double spread) {
    do
        typed_store(t, p, i,
                    (float)(offset + spread * 1.7320508 * (2.0 * test_uniform(&test_rng) - 1.0)));
    while (typed_load(t, p, i) == 0.0);
}

/*
 * Runs one case and checks it. Returns its worst error as a fraction of the tolerance (<= 1
 * passes), or INFINITY with why filled in.
 *
 * Tolerance of an output element against ref = z * gamma + beta in double:
 *   |got - ref| <= 2^-20 * unit + 0.5 * ulp_y(|ref|) * (1 + 2^-7)
 * unit is the verifier's (gen/verify/verify.h). Why: the kernel's fp32 result f (statistics, then
 * (x - mean) * rstd * gamma + beta) is within a few fp32 roundings of its terms of ref, far inside
 * 2^-20 * unit, the whole tolerance of the fp32 kernels. got is f rounded once to y's type: no
 * farther from f than R, the y value nearest ref, so |got - ref| <= |R - ref| + 2 |f - ref|
 * <= 0.5 ulp_y(|ref|) + 2 |f - ref|, where 2 |f - ref| is still inside the first term. The 2^-7
 * keeps an exact tie (f half an ulp from both neighbours) from failing on ref's own double
 * rounding. fp32 y: its half ulp, 2^-24 |ref| <= 2^-24 unit, adds 1/16 of the first term. fp16 y:
 * Inf of ref's sign is right wherever |ref| + 2^-20 * unit reaches 65520 (the first value that
 * rounds to Inf), and the only right answer where |ref| - 2^-20 * unit does.
 */
static double run_case(lntune *ctx, const dcase *c, char *why, size_t len) {
    const lntune_types t = c->t;
    const int64_t H = c->H, rows = c->rows, pad = c->padded;
    const int64_t xs = pad ? H + 5 : H, ys = pad ? H + 3 : H, yn = rows * ys + pad + TAIL;
    const int has_gamma = c->affine == AFFINE_GAMMA || c->affine == AFFINE_GAMMA_BETA;
    const int has_beta = c->affine == AFFINE_GAMMA_BETA || c->affine == AFFINE_BETA;
    unsigned char *xb = malloc((size_t)(rows * xs + pad) * tsize(t.x));
    unsigned char *yb = malloc((size_t)yn * tsize(t.y));
    unsigned char *gb = malloc((size_t)(H + pad) * tsize(t.params));
    unsigned char *bb = malloc((size_t)(H + pad) * tsize(t.params));
    float *xf = malloc((size_t)(rows * H) * sizeof *xf);
    float *mean = malloc((size_t)(rows + 1) * sizeof *mean);
    float *rstd = malloc((size_t)(rows + 1) * sizeof *rstd);
    double *z = malloc((size_t)H * sizeof *z);
    void *x = xb + pad * tsize(t.x), *y = yb + pad * tsize(t.y);
    void *gamma = gb + pad * tsize(t.params), *beta = bb + pad * tsize(t.params);

    /* x: rows around 0, every fifth at 1000, one of tiny variance, a NaN row and an Inf row;
     * padding and the element before x are NaN, so reading them would show. */
    for (int64_t i = 0; i < rows * xs + pad; ++i) typed_store(t.x, xb, i, NAN);
    for (int64_t r = 0; r < rows; ++r) {
        const double offset = r % 5 == 1 ? 1000.0 : r == 2 ? 1.0 : 0.0;
        const double spread = r == 2 ? 1e-3 : 1.0;
        for (int64_t i = 0; i < H; ++i) put_random(t.x, x, r * xs + i, offset, spread);
        if (rows >= 7 && r == 3) typed_store(t.x, x, r * xs + H / 2, NAN);
        if (rows >= 7 && r == 4) typed_store(t.x, x, r * xs + H / 3, H % 2 ? INFINITY : -INFINITY);
        for (int64_t i = 0; i < H; ++i) xf[r * H + i] = (float)typed_load(t.x, x, r * xs + i);
    }
    for (int64_t i = 0; i < H; ++i) {
        put_random(t.params, gamma, i, c->scale, 0.5 * c->scale);
        put_random(t.params, beta, i, 0.0, c->scale);
    }
    for (int64_t i = 0; i < yn; ++i) set_raw(t.y, yb, i, poison[t.y]);
    for (int64_t r = 0; r <= rows; ++r) set_raw(LNTUNE_TYPE_F32, mean, r, poison[0]);
    for (int64_t r = 0; r <= rows; ++r) set_raw(LNTUNE_TYPE_F32, rstd, r, poison[0]);

    lntune_args a = {0};
    a.rows = rows;
    a.H = H;
    a.x = x;
    a.y = y;
    a.x_stride = pad ? xs : 0;
    a.y_stride = pad ? ys : 0;
    a.gamma = has_gamma ? gamma : NULL;
    a.beta = has_beta ? beta : NULL;
    const int with_stats = !(c->affine == AFFINE_GAMMA && !pad); /* NULL mean/rstd sometimes */
    a.mean = with_stats ? mean : NULL;
    a.rstd = with_stats ? rstd : NULL;
    /* The defaults, where they mean the same tuple: 0 for x is fp32, 0 for the others is x's. */
    a.dtype = t.x == LNTUNE_TYPE_F32 && rows == 1 ? LNTUNE_DTYPE_DEFAULT : (lntune_dtype)(t.x + 1);
    a.y_dtype = t.y == t.x && H % 2 ? LNTUNE_DTYPE_DEFAULT : (lntune_dtype)(t.y + 1);
    a.param_dtype =
        t.params == t.x && rows == 7 ? LNTUNE_DTYPE_DEFAULT : (lntune_dtype)(t.params + 1);
    const double eps = (double)1e-5f; /* eps 0: the default 1e-5f */
    int rc = c->op == LNTUNE_OP_LAYERNORM ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);

    double worst = 0.0;
    if (rc != LNTUNE_OK) {
        snprintf(why, len, "rc %d: %s", rc, lntune_errmsg(ctx));
        worst = INFINITY;
    }
    for (int64_t r = 0; r < rows && worst <= 1.0; ++r) {
        double m, rs;
        lntune_reference_row((lntune_op)c->op, xf + r * H, H, eps, z, &m, &rs);
        for (int64_t i = 0; i < H; ++i) {
            const int64_t at = r * ys + i;
            if (raw(t.y, y, at) == poison[t.y]) {
                snprintf(why, len, "y[%lld][%lld] not written", (long long)r, (long long)i);
                worst = INFINITY;
                break;
            }
            const double got = typed_load(t.y, y, at);
            const double g = has_gamma ? typed_load(t.params, gamma, i) : 1.0;
            const double b = has_beta ? typed_load(t.params, beta, i) : 0.0;
            const double ref = z[i] * g + b;
            const double unit = (fabs(m) * rs + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
            const double e32 = 0x1p-20 * unit;
            double err;
            if (isnan(ref))
                err = isnan(got) ? 0.0 : INFINITY;
            else if (isinf(ref))
                err = got == ref ? 0.0 : INFINITY;
            else if (isinf(got)) /* right only as fp16 overflow, when ref may reach 65520 */
                err = t.y == LNTUNE_TYPE_F16 && signbit(got) == signbit(ref) &&
                              fabs(ref) + e32 >= 65520.0
                          ? 0.0
                          : INFINITY;
            else if (isnan(got) || (t.y == LNTUNE_TYPE_F16 && fabs(ref) - e32 >= 65520.0))
                err = INFINITY; /* fp16 past 65520 must be Inf */
            else
                err = fabs(got - ref) / (e32 + 0.5 * ulp_of(t.y, fabs(ref)) * (1.0 + 0x1p-7));
            if (!(err <= worst)) worst = err;
            if (!(err <= 1.0)) {
                snprintf(why, len, "y[%lld][%lld] = %a (bits %x), want %a", (long long)r,
                         (long long)i, got, raw(t.y, y, at), ref);
                break;
            }
        }
        if (with_stats && worst <= 1.0) {
            const double want_m = c->op == LNTUNE_OP_LAYERNORM ? m : 0.0;
            int ok_m = isfinite(want_m) ? fabs(mean[r] - want_m) <= 1e-5 * (fabs(m) + 1.0 / rs)
                                        : !isfinite(mean[r]);
            int ok_r = isfinite(rs) ? fabs(rstd[r] - rs) <= 1e-5 * rs : !isfinite(rstd[r]);
            if (c->op == LNTUNE_OP_RMSNORM) ok_m = mean[r] == 0.0f;
            if (!ok_m || !ok_r) {
                snprintf(why, len, "row %lld: mean %g rstd %g, want %g, %g", (long long)r,
                         (double)mean[r], (double)rstd[r], want_m, rs);
                worst = INFINITY;
            }
        }
    }
    /* Nothing written outside the rows: the padding, the element before y, the tail. */
    for (int64_t i = 0; i < yn && worst <= 1.0; ++i) {
        const int64_t at = i - pad, r = at / ys;
        if (at >= 0 && r < rows && at % ys < H) continue;
        if (raw(t.y, yb, i) != poison[t.y]) {
            snprintf(why, len, "y element %lld (outside the rows) written", (long long)at);
            worst = INFINITY;
        }
    }
    if (worst <= 1.0 && (lntune_f32_to_bits(mean[rows]) != poison[0] ||
                         lntune_f32_to_bits(rstd[rows]) != poison[0] ||
                         (!with_stats && lntune_f32_to_bits(mean[0]) != poison[0]))) {
        snprintf(why, len, "mean/rstd written past rows (or when NULL)");
        worst = INFINITY;
    }
    free(xb), free(yb), free(gb), free(bb), free(xf), free(mean), free(rstd), free(z);
    return worst;
}

/* Runs c, one more of *ncases; *worst and what (whatlen bytes) keep the worst error and the case
 * that made it. An error over the tolerance is printed with its reason. */
static void run_kept(lntune *ctx, const dcase *c, double *worst, char *what, size_t whatlen,
                     int *ncases) {
    char why[256] = "";
    const double err = run_case(ctx, c, why, sizeof why);
    ++*ncases;
    if (!(err <= *worst)) {
        *worst = err;
        describe(c, what, whatlen);
    }
    if (!(err <= 1.0)) printf("      %s: %s\n", what, why);
}

static void test_tuples(lntune *ctx) {
    static const int64_t hs[] = {1, 3, 17, 768, 4097};
    static const int64_t rows_list[] = {1, 7, 300};
    for (int tuple = 0; tuple < LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT;
         ++tuple) {
        const lntune_types t = {(uint8_t)(tuple / 9), (uint8_t)(tuple / 3 % 3),
                                (uint8_t)(tuple % 3), 0};
        for (int op = 0; op < 2; ++op) {
            for (int affine = 0; affine < 4; ++affine) {
                if (op == LNTUNE_OP_RMSNORM &&
                    (affine == AFFINE_GAMMA_BETA || affine == AFFINE_BETA))
                    continue; /* RMSNorm takes no beta */
                double worst = 0.0;
                int ncases = 0;
                char what[160] = "";
                for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; ++hi)
                    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri)
                        for (int pad = 0; pad < 2; ++pad) {
                            dcase c = {t, op, affine, hs[hi], rows_list[ri], pad, 1.0};
                            run_kept(ctx, &c, &worst, what, sizeof what, &ncases);
                        }
                /* gamma (and beta) at 2^-17 and 2^15: fp16 subnormal outputs, and overflow. */
                for (int s = 0; s < 2 && affine != AFFINE_NONE; ++s) {
                    dcase c = {t, op, affine, 768, 7, s, s ? 0x1p15 : 0x1p-17};
                    run_kept(ctx, &c, &worst, what, sizeof what, &ncases);
                }
                char types[32];
                lntune_types_format(t, types, sizeof types);
                test_case(worst <= 1.0,
                          "%s %s affine=%s: %d cases, worst %.3g of the tolerance (%s)",
                          lntune_op_name(op), types, affine_names[affine], ncases, worst, what);
            }
        }
    }
}

/* ---- 3. database keys ---- */

int dtype_tuned_calls[3]; /* bumped by the tuned artifacts below (the program exports it) */

/* A tuned record for (op, dtype text, H, rows' bucket, gamma) on hw whose kernel bumps
 * dtype_tuned_calls[counter], then declines (the built-in runs) or writes bf16 1.0 into y. */
static int put_dtype_tuned(lntune_db *db, int64_t hw, const char *op, const char *dtype, int64_t H,
                           int64_t rows, int counter, int declines) {
    char source[1024], key[64];
    snprintf(source, sizeof source,
             "#include \"%s/lntune_kernel.h\"\n"
             "extern int dtype_tuned_calls[3];\n"
             "int tuned_entry(const lntune_kernel_args *a, int64_t b, int64_t e) {\n"
             "    __atomic_fetch_add(&dtype_tuned_calls[%d], 1, __ATOMIC_RELAXED);\n"
             "    if (%d) return LNTUNE_KERNEL_EUNSUPPORTED;\n"
             "    for (int64_t r = b; r < e; ++r)\n"
             "        for (int64_t i = 0; i < a->H; ++i)\n"
             "            ((uint16_t *)a->y)[r * a->y_stride + i] = 0x3f80;\n"
             "    return LNTUNE_KERNEL_OK;\n"
             "}\n",
             LNTUNE_TEST_INCLUDE, counter, declines);
    size_t so_len = 0;
    void *so = build_shared(source, &so_len);
    snprintf(key, sizeof key, "test-dtype-%d", counter);
    lntune_artifact art = {key, source, "cc",   "-O2", "tuned_entry", NULL,
                           0,   so,     so_len, NULL,  NULL};
    lntune_db_key k = {hw, "cpu", op, dtype, H, rows, 1};
    lntune_best best = tunedb_best("handwritten", key, 1, rows);
    int rc = so ? lntune_db_put_artifact(db, &art) : LNTUNE_ECOMPILE;
    if (rc == LNTUNE_OK) rc = lntune_db_set_best(db, &k, &best);
    free(so);
    return rc;
}

static int calls_now(int i) {
    return __atomic_load_n(&dtype_tuned_calls[i], __ATOMIC_RELAXED);
}

static void test_database_keys(const char *scratch) {
    char path[4096];
    snprintf(path, sizeof path, "%s/dtypes.db", scratch);
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    lntune_db *db = NULL;
    int64_t hw = 0;
    const int64_t H = 96, rows = 8;
    int rc = create_db_for(path, &cpu, &db, &hw);
    if (rc == LNTUNE_OK) rc = put_dtype_tuned(db, hw, "layernorm", "bf16", H, rows, 0, 0);
    if (rc == LNTUNE_OK) rc = put_dtype_tuned(db, hw, "layernorm", "bf16/f32/f32", H, rows, 1, 1);
    if (rc == LNTUNE_OK) rc = put_dtype_tuned(db, hw, "layernorm", "f32", H, rows, 2, 1);
    test_case(rc == LNTUNE_OK, "a database with records keyed bf16, bf16/f32/f32, f32: rc %d %s",
              rc, db && rc ? lntune_db_errmsg(db) : "");
    lntune_db_close(db);
    lntune *ctx = NULL;
    if (rc != LNTUNE_OK || lntune_open(path, &ctx) != LNTUNE_OK) return;

    /* All-bf16: its tuned kernel (writing 1.0) runs, and its output is the call's. */
    uint16_t x[8 * 96], y[8 * 96], g[96];
    for (int i = 0; i < 8 * 96; ++i) put_random(LNTUNE_TYPE_BF16, x, i, 0.0, 1.0);
    for (int i = 0; i < 96; ++i) put_random(LNTUNE_TYPE_BF16, g, i, 1.0, 0.5);
    lntune_args a = {0};
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.gamma = g, a.dtype = LNTUNE_BF16;
    int before[3] = {calls_now(0), calls_now(1), calls_now(2)};
    rc = lntune_layernorm(ctx, &a);
    int all_one = 1;
    for (int i = 0; i < 8 * 96; ++i) all_one &= y[i] == 0x3f80;
    test_case(rc == LNTUNE_OK && calls_now(0) > before[0] && calls_now(1) == before[1] &&
                  calls_now(2) == before[2] && all_one,
              "bf16 runs the record keyed bf16, and only it: rc %d, calls %d/%d/%d, its output %s",
              rc, calls_now(0) - before[0], calls_now(1) - before[1], calls_now(2) - before[2],
              all_one ? "returned" : "not returned");

    /* bf16 x with fp32 y and gamma: the record keyed bf16/f32/f32 declines; the built-in serves. */
    static const struct {
        lntune_types t;
        int counter; /* -1: no record */
    } calls[] = {{{LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0}, 1},
                 {{LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0}, 2},
                 {{LNTUNE_TYPE_F16, LNTUNE_TYPE_F16, LNTUNE_TYPE_F16, 0}, -1},
                 {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, 0}, -1}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
        char why[256] = "", what[160];
        dcase c = {calls[i].t, LNTUNE_OP_LAYERNORM, AFFINE_GAMMA_BETA, H, rows, 0, 1.0};
        describe(&c, what, sizeof what);
        for (int k = 0; k < 3; ++k) before[k] = calls_now(k);
        double err = run_case(ctx, &c, why, sizeof why);
        int ok = err <= 1.0;
        for (int k = 0; k < 3; ++k) ok &= (calls_now(k) > before[k]) == (k == calls[i].counter);
        test_case(ok, "%s: %s, calls %d/%d/%d, error %.3g of the tolerance %s", what,
                  calls[i].counter < 0 ? "no record: built-in" : "its record declines, built-in",
                  calls_now(0) - before[0], calls_now(1) - before[1], calls_now(2) - before[2], err,
                  why);
    }
    lntune_close(ctx);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_runtime_dtypes SCRATCH_DIR\n");
        return 2;
    }
    test_conversions();
    char path[4096];
    snprintf(path, sizeof path, "%s/missing/none.db", argv[1]);
    lntune *ctx = NULL;
    int rc = lntune_open(path, &ctx);
    if (test_case(rc == LNTUNE_OK, "open without a database: rc %d", rc)) test_tuples(ctx);
    lntune_close(ctx);
    test_database_keys(argv[1]);
    return test_summary();
}
