/*
 * export_driver.c - runs the kernels of an `lntune export` (lntune_kernels.h) against the float64
 * reference. Compiled by test_export.sh with each compiler together with the exported file.
 *
 * 1. fp32 through lntune_kernels_<op>(args), the entry points of every earlier export: the tuned
 *    shapes, untuned ones, every affine kind, one and many rows (the multi-threaded winner and
 *    the generic kernels' pool), padded strides, and declined arguments.
 * 2. Type tuples through lntune_kernels_<op>_v2(args, types): those export_makedb tuned (bf16,
 *    f16, f16/bf16/f32) at their tuned H and rows, the same tuples at untuned H (odd, 1), a tuple
 *    with no winner at all, and fp32 again. Pointers sit one element past an aligned address
 *    with padded rows; y, mean and rstd are poisoned first, and every element inside the rows must
 *    be written and none outside. Types outside the enum are declined.
 * 2b. The weight offset (args.weight_offset, offsets 1 and -0.5): export_makedb's rmsnorm+offset
 *    bf16 winner at its shape, the same at an untuned H, a mixed tuple with beta and a fused
 *    call (the generic kernels on fp32 offset + gamma); an offset without gamma or NaN declined.
 * 2c. A quantized y (int8, fp8 e4m3; static and per-row scales): export_makedb's two winners at
 *    their shapes, and the fallback (the generic fp32 y quantized) at untuned shapes, tuples,
 *    with beta, the residual, a weight offset, on many rows; bad scales and types declined
 *    (export_quant_check.h).
 * 3. Add & Norm through the same entry points (args.residual, and residual_out): the two fused
 *    winners of export_makedb at their tuned shapes, untuned H, a tuple and residual type no
 *    winner has, each fusion; y against the reference of the fp32 sum x + residual, residual_out
 *    bit for bit that sum rounded to the residual type, poisoned and guarded as y.
 * 4. Backward through lntune_kernels_<op>_backward: the two backward winners of export_makedb
 *    at their tuned shapes and untuned H, fp32 and bf16/bf16/f32, statistics saved and
 *    recomputed, with gamma and without, with dresidual_out and without; dx, dgamma and dbeta
 *    against the float64 reference gradients within gen/verify/verify_backward.h's bounds, dx
 * poisoned and every element checked, nothing written between its rows.
 * 5. Concurrent callers (alone with the argument "concurrent", which test_export.sh runs under
 *    ThreadSanitizer): threads calling at once, each on its own tensors, a tuned multi-threaded
 *    shape and an untuned one, so that calls share the pool or find it busy; every output checked.
 * 5b. Untuned H (fp32, through -DLNTUNE_KERNELS_TRACE, which test_export.sh sets): layernorm
 *    H=770 served by the run-time-H twin of export_makedb's fixed-H 768 winner, rmsnorm H=4000
 *    by its 4096 winner, rmsnorm H=1536 by its non-temporal 2048 winner (rows as aligned) but
 *    H=2047 (less aligned rows) by the generic kernel at 40 rows and by the 1024 winner at 600
 *    (its rows bucket); batch-invariant, each by the generic one.
 *    Every result is checked against the reference.
 * 6. Compiled with -DLNTUNE_KERNELS_BATCH_INVARIANT=1: rows computed in one call of 600, alone,
 *    and 7 at a time give the same bits in y, mean and rstd (and residual_out): the layernorm
 *    fp32 H=768 that export_makedb tuned at two row counts (two kernels without the option), a
 *    2-thread winner, an untuned shape and a fused one, the generic kernels' streaming switch
 *    at its lowest (test_export.sh adds -DLNTUNE_KERNELS_STREAMING_BYTES=1).
 * 7. The tuned kernels' ISA (alone, with the arguments "isa CASES": test_export_isa.sh, on the
 *    export of `export_makedb PATH isa CASES`, compiled without -m flags): each winner of CASES
 *    at its shape against the reference, served by its tuned kernel. Compiled with
 *    -DLNTUNE_KERNELS_FORCE_GENERIC (the dispatch's path on a CPU without the tuned kernels'
 *    ISA), by the generic one, as no call takes a tuned kernel in 5b either.
 */
#include "half_ref.h"
#include "lntune_kernels.h"
#include "testutil.h"
#include "typed_bits.h"

#include <pthread.h>
#include <string.h>

/* One fp32 call of op (0 LayerNorm, 1 RMSNorm) on rows x H with x rows x_stride apart, gamma and
 * beta as asked, on fresh data; its return code, and its error against the float64 reference
 * into *err (INFINITY when it failed). */
static int fp32_call(int op, int64_t H, int64_t rows, int64_t x_stride, int gamma, int beta,
                     double *err) {
    float *x = malloc((size_t)(rows * x_stride) * 4), *y = malloc((size_t)(rows * H) * 4);
    float *g = malloc((size_t)H * 4), *b = malloc((size_t)H * 4);
    test_fill(x, rows * x_stride, 5.0, 2.0);
    test_fill(g, H, 1.0, 0.2);
    test_fill(b, H, 0.0, 0.5);
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.x_stride = x_stride;
    a.gamma = gamma ? g : NULL;
    a.beta = beta ? b : NULL;
    const int rc = op ? lntune_kernels_rmsnorm(&a) : lntune_kernels_layernorm(&a);
    *err = rc ? INFINITY
              : test_error((lntune_op)op, x, x_stride, y, H, rows, H, a.gamma, a.beta, 1e-5, NULL,
                           NULL);
    free(x), free(y), free(g), free(b);
    return rc;
}

static void test_fp32(void) {
    static const int64_t hs[] = {768, 4096, 1, 17, 1000};
    static const int64_t rows_list[] = {1, 40, 4096};
    for (int op = 0; op < 2; ++op)
        for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; ++hi)
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri)
                for (int affine = 0; affine < 4; ++affine) {
                    if (op == 1 && affine >= 2) continue;
                    int64_t H = hs[hi], rows = rows_list[ri], xs = H + (int64_t)(affine & 1) * 3;
                    double err;
                    const int rc =
                        fp32_call(op, H, rows, xs, affine == 1 || affine == 2, affine >= 2, &err);
                    test_case(rc == LNTUNE_KERNEL_OK && err <= TOLERANCE,
                              "%s H=%lld rows=%lld affine=%d x_stride=%lld: rc %d, error %.3g",
                              op ? "rmsnorm" : "layernorm", (long long)H, (long long)rows, affine,
                              (long long)xs, rc, err);
                }
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4;
    test_case(lntune_kernels_layernorm(&a) == LNTUNE_KERNEL_EUNSUPPORTED,
              "NULL x and y are declined");
}

/* ---- 5b. untuned H: the nearest H's run-time-H kernel ---- */

#ifdef LNTUNE_KERNELS_TRACE
#ifndef LNTUNE_KERNELS_BATCH_INVARIANT
#define LNTUNE_KERNELS_BATCH_INVARIANT 0 /* the exported file's default */
#endif
#ifdef LNTUNE_KERNELS_FORCE_GENERIC
#define FORCE_GENERIC 1 /* no call takes a tuned kernel */
#else
#define FORCE_GENERIC 0
#endif
static int traced_calls, traced_other_h; /* atomics: test_concurrent's threads report too */

void LNTUNE_KERNELS_TRACE(int entry, int other_h) {
    (void)entry;
    __atomic_fetch_add(&traced_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&traced_other_h, other_h, __ATOMIC_RELAXED);
}

static void test_nearest_h(void) {
    static const struct {
        int op;
        int64_t H, rows;
        int gamma, beta, served;
        const char *what;
    } cases[] = {
        {0, 770, 40, 1, 1, 1, "the twin of the fixed-H 768 winner (plain stores)"},
        {1, 4000, 4096, 0, 0, 1, "the 4096 winner"},
        {1, 1536, 40, 1, 0, 1, "the non-temporal 2048 winner, on rows as aligned"},
        {1, 2047, 40, 1, 0, 0,
         "the generic kernel: the 2048 winner stores non-temporally, the 1024 one is of another "
         "rows bucket"},
        {1, 2047, 600, 1, 0, 1, "the 1024 winner of this rows bucket, past 2048's (non-temporal)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        const int64_t H = cases[k].H, rows = cases[k].rows;
        const int op = cases[k].op;
        traced_calls = traced_other_h = 0;
        double err;
        const int rc = fp32_call(op, H, rows, H, cases[k].gamma, cases[k].beta, &err);
        const int want = cases[k].served && !LNTUNE_KERNELS_BATCH_INVARIANT && !FORCE_GENERIC;
        test_case(rc == LNTUNE_KERNEL_OK && err <= TOLERANCE && traced_calls == want &&
                      traced_other_h == want,
                  "untuned %s H=%lld rows=%lld: %s%s (tuned calls %d, of another H %d), error "
                  "%.3g",
                  op ? "rmsnorm" : "layernorm", (long long)H, (long long)rows,
                  FORCE_GENERIC && cases[k].served ? "forced generic, the generic kernel, not "
                  : LNTUNE_KERNELS_BATCH_INVARIANT && cases[k].served
                      ? "batch-invariant, the generic kernel, not "
                      : "",
                  cases[k].what, traced_calls, traced_other_h, err);
    }
}
#endif

/* ---- 2. type tuples ---- */

static const char *const type_names[] = {"f32", "f16", "bf16"};

/* A nonzero value of type t near offset (uniform, standard deviation spread) at p[i]. */
static void put_random(int t, void *p, int64_t i, double offset, double spread) {
    do
        lntune_ref_store(
            t, p, i, (float)(offset + spread * 1.7320508 * (2.0 * test_uniform(&test_rng) - 1.0)));
    while (lntune_ref_load(t, p, i) == 0.0);
}

typedef struct {
    int x, y, params; /* LNTUNE_TYPE_* */
} tuple;

/* Fills n elements of type t from i on with the bits of NaN: padding a kernel must not read. */
static void fill_nan(int t, void *p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) lntune_ref_store(t, p, i, NAN);
}

/*
 * One call of op on tuple t, checked; returns the worst error as a fraction of the tolerance (<= 1
 * passes), or INFINITY with why set. The tolerance is test_runtime_dtypes's: the fp32 kernels'
 * 2^-20 of the terms, plus half an ulp of y's type (y is rounded once), plus 2^-7 of that for ties.
 * fusion 1 adds a residual of type rt (normalized: x + residual in fp32), 2 residual_out too.
 */
static double run_typed(int op, tuple t, int64_t H, int64_t rows, int affine, int fusion, int rt,
                        float offset, char *why, size_t len) {
    enum { PAD = 1, TAIL = 8 };
    const int64_t xs = H + 5, ys = H + 3, yn = rows * ys + PAD + TAIL;
    const int64_t rs = H + 7, os = H + 2, on = rows * os + PAD + TAIL;
    const int has_gamma = affine == 1 || affine == 2, has_beta = affine >= 2;
    unsigned char *xb = malloc((size_t)(rows * xs + PAD) * tsize(t.x));
    unsigned char *yb = malloc((size_t)yn * tsize(t.y));
    unsigned char *gb = malloc((size_t)(H + PAD) * tsize(t.params));
    unsigned char *bb = malloc((size_t)(H + PAD) * tsize(t.params));
    float *xf = malloc((size_t)(rows * H) * sizeof *xf);
    float *mean = malloc((size_t)(rows + 1) * sizeof *mean);
    float *rstd = malloc((size_t)(rows + 1) * sizeof *rstd);
    double *z = malloc((size_t)H * sizeof *z);
    unsigned char *rb = malloc((size_t)(rows * rs + PAD) * tsize(rt));
    unsigned char *ob = malloc((size_t)on * tsize(rt));
    /* One element past malloc's alignment: misaligned for every vector width. */
    void *x = xb + PAD * tsize(t.x), *y = yb + PAD * tsize(t.y);
    void *res = rb + PAD * tsize(rt), *out = ob + PAD * tsize(rt);
    void *gamma = gb + PAD * tsize(t.params), *beta = bb + PAD * tsize(t.params);

    /* Rows around 0, every fifth at 1000, one of tiny variance, a NaN row and an Inf row;
     * x's padding is NaN, so reading it would show. */
    fill_nan(t.x, xb, rows * xs + PAD);
    fill_nan(rt, rb, rows * rs + PAD);
    for (int64_t r = 0; r < rows; ++r) {
        const double offset = r % 5 == 1 ? 1000.0 : r == 2 ? 1.0 : 0.0;
        const double spread = r == 2 ? 1e-3 : 1.0;
        for (int64_t i = 0; i < H; ++i) put_random(t.x, x, r * xs + i, offset, spread);
        if (rows >= 7 && r == 3) lntune_ref_store(t.x, x, r * xs + H / 2, NAN);
        if (rows >= 7 && r == 4) lntune_ref_store(t.x, x, r * xs + H / 3, INFINITY);
        for (int64_t i = 0; fusion && i < H; ++i) put_random(rt, res, r * rs + i, 0.5, 1.0);
        /* The normalized row: x, or the one fp32 addition x + residual of the widened inputs. */
        for (int64_t i = 0; i < H; ++i)
            xf[r * H + i] = (float)lntune_ref_load(t.x, x, r * xs + i) +
                            (fusion ? (float)lntune_ref_load(rt, res, r * rs + i) : 0.0f);
    }
    for (int64_t i = 0; i < H; ++i) {
        put_random(t.params, gamma, i, 1.0, 0.5);
        put_random(t.params, beta, i, 0.0, 1.0);
    }
    for (int64_t i = 0; i < yn; ++i) set_raw(t.y, yb, i, poison[t.y]);
    for (int64_t i = 0; i < on; ++i) set_raw(rt, ob, i, poison[rt]);
    for (int64_t r = 0; r <= rows; ++r) set_raw(LNTUNE_TYPE_F32, mean, r, poison[0]);
    for (int64_t r = 0; r <= rows; ++r) set_raw(LNTUNE_TYPE_F32, rstd, r, poison[0]);

    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.x_stride = xs, a.y_stride = ys;
    a.gamma = has_gamma ? gamma : NULL;
    a.beta = has_beta ? beta : NULL;
    a.mean = mean, a.rstd = rstd;
    a.weight_offset = offset;
    if (fusion) a.residual = res, a.residual_stride = rs;
    if (fusion == 2) a.residual_out = out, a.residual_out_stride = os;
    /* Public numbers (internal + 1); 0 where it means the same type (y, params, residual: as x). */
    lntune_kernels_types types = {.x = t.x + 1,
                                  .y = t.y == t.x ? 0 : t.y + 1,
                                  .params = t.params == t.x ? 0 : t.params + 1,
                                  .residual = rt == t.x ? 0 : rt + 1};
    int rc = op ? lntune_kernels_rmsnorm_v2(&a, types) : lntune_kernels_layernorm_v2(&a, types);

    double worst = 0.0;
    if (rc != LNTUNE_KERNEL_OK) {
        snprintf(why, len, "rc %d", rc);
        worst = INFINITY;
    }
    for (int64_t r = 0; r < rows && worst <= 1.0; ++r) {
        double m, rs;
        lntune_reference_row((lntune_op)op, xf + r * H, H, 1e-5f, z, &m, &rs);
        for (int64_t i = 0; i < H; ++i) {
            const int64_t at = r * ys + i;
            if (raw(t.y, y, at) == poison[t.y]) {
                snprintf(why, len, "y[%lld][%lld] not written", (long long)r, (long long)i);
                worst = INFINITY;
                break;
            }
            const double got = lntune_ref_load(t.y, y, at);
            const double g = has_gamma ? offset + lntune_ref_load(t.params, gamma, i) : 1.0;
            const double b = has_beta ? lntune_ref_load(t.params, beta, i) : 0.0;
            const double ref = z[i] * g + b;
            const double unit = (fabs(m) * rs + fabs(z[i]) + 1.0) * fabs(g) + fabs(b);
            double err;
            if (isnan(ref))
                err = isnan(got) ? 0.0 : INFINITY;
            else if (!isfinite(got))
                err = INFINITY; /* |ref| stays far below fp16's 65504 here */
            else
                err = fabs(got - ref) /
                      (0x1p-20 * unit + 0.5 * ulp_of(t.y, fabs(ref)) * (1 + 0x1p-7));
            if (!(err <= worst)) worst = err;
            if (!(err <= 1.0)) {
                snprintf(why, len, "y[%lld][%lld] = %a, want %a", (long long)r, (long long)i, got,
                         ref);
                break;
            }
        }
        const double want_m = op == 0 ? m : 0.0;
        if (worst <= 1.0 && isfinite(m) && isfinite(rs) &&
            (fabs(mean[r] - want_m) > 1e-5 * (fabs(m) + 1.0 / rs) ||
             fabs(rstd[r] - rs) > 1e-5 * rs)) {
            snprintf(why, len, "row %lld: mean %g rstd %g, want %g %g", (long long)r,
                     (double)mean[r], (double)rstd[r], want_m, rs);
            worst = INFINITY;
        }
    }
    /* Nothing written outside the rows: the padding, the element before y, the tail. */
    for (int64_t i = 0; i < yn && worst <= 1.0; ++i) {
        const int64_t at = i - PAD, r = at / ys;
        if (at >= 0 && r < rows && at % ys < H) continue;
        if (raw(t.y, yb, i) != poison[t.y]) {
            snprintf(why, len, "y element %lld (outside the rows) written", (long long)at);
            worst = INFINITY;
        }
    }
    /* residual_out: the sum rounded once to its type, bit for bit (a NaN for a NaN); nothing
     * written outside its rows. */
    for (int64_t i = 0; fusion == 2 && i < on && worst <= 1.0; ++i) {
        const int64_t at = i - PAD, r = at / os;
        const int inside = at >= 0 && r < rows && at % os < H;
        uint32_t want = poison[rt];
        if (inside) {
            unsigned char one[4];
            lntune_ref_store(rt, one, 0, xf[r * H + at % os]);
            want = raw(rt, one, 0);
        }
        const uint32_t got = raw(rt, ob, i);
        const int both_nan = inside && isnan(lntune_ref_load(rt, ob, i)) &&
                             isnan(xf[r * H + at % os]) && got != poison[rt];
        if (got != want && !both_nan) {
            snprintf(why, len, "residual_out element %lld: bits %#x, want %#x", (long long)at,
                     (unsigned)got, (unsigned)want);
            worst = INFINITY;
        }
    }
    uint32_t past_mean, past_rstd;
    memcpy(&past_mean, &mean[rows], 4), memcpy(&past_rstd, &rstd[rows], 4);
    if (worst <= 1.0 && (past_mean != poison[0] || past_rstd != poison[0])) {
        snprintf(why, len, "mean/rstd written past rows");
        worst = INFINITY;
    }
    free(xb), free(yb), free(gb), free(bb), free(xf), free(mean), free(rstd), free(z);
    free(rb), free(ob);
    return worst;
}

static void test_tuples(void) {
    /* export_makedb's typed winners, with the H and rows they were tuned at. */
    static const struct {
        tuple t;
        int op;
        int64_t H, rows;
    } tuned[] = {
        {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16}, 0, 768, 40},
        {{LNTUNE_TYPE_F16, LNTUNE_TYPE_F16, LNTUNE_TYPE_F16}, 1, 4096, 600},
        {{LNTUNE_TYPE_F16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32}, 0, 1001, 40},
    };
    /* Each tuned tuple at its tuned shape and at untuned ones (odd H, H=1, other rows), plus
     * a tuple no winner has and fp32 through the same entry point. */
    static const tuple others[] = {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, LNTUNE_TYPE_F16},
                                   {LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32}};
    static const int64_t untuned_h[] = {1, 17, 1000};
    for (size_t k = 0; k < sizeof tuned / sizeof tuned[0] + 2; ++k) {
        const int is_tuned = k < sizeof tuned / sizeof tuned[0];
        const tuple t = is_tuned ? tuned[k].t : others[k - sizeof tuned / sizeof tuned[0]];
        for (int op = 0; op < 2; ++op)
            for (int affine = 0; affine < 4; ++affine) {
                if (op == 1 && affine >= 2) continue;
                for (int s = -1; s < 3; ++s) {
                    /* s = -1: the tuned shape (tuned op only); 0..2: an untuned H. */
                    if (s < 0 && (!is_tuned || op != tuned[k].op)) continue;
                    const int64_t H = s < 0 ? tuned[k].H : untuned_h[s];
                    const int64_t rows = s < 0 ? tuned[k].rows : s == 1 ? 7 : 40;
                    char why[256] = "";
                    double err = run_typed(op, t, H, rows, affine, 0, t.x, 0.0f, why, sizeof why);
                    test_case(err <= 1.0,
                              "v2 %s %s/%s/%s H=%lld rows=%lld affine=%d (%s): worst %.3g of "
                              "tolerance%s%s",
                              op ? "rmsnorm" : "layernorm", type_names[t.x], type_names[t.y],
                              type_names[t.params], (long long)H, (long long)rows, affine,
                              s < 0 ? "tuned" : "untuned", err, why[0] ? ": " : "", why);
                }
            }
    }
    float x[4] = {1, 2, 3, 4}, y[4];
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4, a.x = x, a.y = y;
    const lntune_kernels_types bad_x = {.x = LNTUNE_KERNELS_BF16 + 1}, bad_y = {.y = -1},
                               bad_p = {LNTUNE_KERNELS_F32, LNTUNE_KERNELS_F32, 7, 0};
    test_case(lntune_kernels_layernorm_v2(&a, bad_x) == LNTUNE_KERNEL_EUNSUPPORTED &&
                  lntune_kernels_rmsnorm_v2(&a, bad_y) == LNTUNE_KERNEL_EUNSUPPORTED &&
                  lntune_kernels_layernorm_v2(&a, bad_p) == LNTUNE_KERNEL_EUNSUPPORTED,
              "v2 declines a type outside 0..3 (x, y, params)");
    a.rows = 0;
    test_case(lntune_kernels_layernorm_v2(&a, bad_x) == LNTUNE_KERNEL_EUNSUPPORTED,
              "v2 declines a bad type even for rows = 0");
}

/* ---- 2b. The weight offset: y = norm(x) * (offset + gamma) ---- */

static void test_offset(void) {
    static const struct {
        tuple t;
        int op, affine, fusion;
        int64_t H, rows;
        const char *what;
    } cases[] = {
        {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16}, 1, 1, 0, 768, 40, "tuned"},
        {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16}, 1, 1, 0, 1000, 40, "untuned"},
        {{LNTUNE_TYPE_F16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32}, 0, 2, 0, 17, 7, "untuned, beta"},
        {{LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32},
         0,
         2,
         2,
         4096,
         7,
         "untuned, residual_out"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
        for (int o = 0; o < 2; ++o) {
            const float offset = o ? -0.5f : 1.0f;
            char why[256] = "";
            const tuple t = cases[k].t;
            double err = run_typed(cases[k].op, t, cases[k].H, cases[k].rows, cases[k].affine,
                                   cases[k].fusion, t.x, offset, why, sizeof why);
            test_case(err <= 1.0,
                      "weight offset %g: %s %s/%s/%s H=%lld rows=%lld affine=%d fusion %d (%s): "
                      "worst %.3g of tolerance%s%s",
                      (double)offset, cases[k].op ? "rmsnorm" : "layernorm", type_names[t.x],
                      type_names[t.y], type_names[t.params], (long long)cases[k].H,
                      (long long)cases[k].rows, cases[k].affine, cases[k].fusion, cases[k].what,
                      err, why[0] ? ": " : "", why);
        }
    float x[4] = {1, 2, 3, 4}, g[4] = {0}, y[4];
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4, a.x = x, a.y = y, a.weight_offset = 1.0f;
    const lntune_kernels_types fp32 = {0, 0, 0, 0};
    const int no_gamma = lntune_kernels_rmsnorm_v2(&a, fp32);
    a.gamma = g, a.weight_offset = NAN;
    const int nan = lntune_kernels_rmsnorm_v2(&a, fp32);
    test_case(no_gamma == LNTUNE_KERNEL_EUNSUPPORTED && nan == LNTUNE_KERNEL_EUNSUPPORTED,
              "a weight offset without gamma, or NaN, declined");
}

/* ---- 2c. A quantized y ---- */

#include "export_quant_check.h"

/* ---- 3. Add & Norm ---- */

static void test_fused(void) {
    /* export_makedb's fused winners, with the H and rows they were tuned at. */
    static const struct {
        tuple t;
        int op, fusion, rt;
        int64_t H, rows;
    } cases[] = {
        {{LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32}, 0, 2, LNTUNE_TYPE_F32, 768, 40},
        {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16}, 1, 1, LNTUNE_TYPE_F32, 4096, 600},
        /* all bf16: at untuned H, the fused all-bf16 built-ins (fused_bf16_generic) */
        {{LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16}, 0, 2, LNTUNE_TYPE_BF16, 1024, 40},
        /* no winner: the residual fallback, a residual type other than x's */
        {{LNTUNE_TYPE_F16, LNTUNE_TYPE_F32, LNTUNE_TYPE_BF16}, 0, 2, LNTUNE_TYPE_BF16, 0, 0},
    };
    static const int64_t untuned_h[] = {1, 17, 1000};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
        for (int op = 0; op < 2; ++op)
            for (int fusion = 1; fusion <= 2; ++fusion)
                for (int affine = 0; affine < 4; ++affine) {
                    if (op == 1 && affine >= 2) continue;
                    for (int s = -1; s < 3; ++s) {
                        /* s = -1: the tuned shape (tuned op and fusion only); 0..2: untuned H. */
                        const int tuned =
                            cases[k].H && op == cases[k].op && fusion == cases[k].fusion;
                        if (s < 0 && !tuned) continue;
                        const int64_t H = s < 0 ? cases[k].H : untuned_h[s];
                        const int64_t rows = s < 0 ? cases[k].rows : s == 1 ? 7 : 40;
                        const tuple t = cases[k].t;
                        char why[256] = "";
                        double err = run_typed(op, t, H, rows, affine, fusion, cases[k].rt, 0.0f,
                                               why, sizeof why);
                        test_case(err <= 1.0,
                                  "fused %s+%s %s/%s/%s residual %s H=%lld rows=%lld affine=%d "
                                  "(%s): worst %.3g of tolerance%s%s",
                                  op ? "rmsnorm" : "layernorm",
                                  fusion == 2 ? "residual_out" : "residual", type_names[t.x],
                                  type_names[t.y], type_names[t.params], type_names[cases[k].rt],
                                  (long long)H, (long long)rows, affine,
                                  s < 0 ? "tuned" : "untuned", err, why[0] ? ": " : "", why);
                    }
                }
    float x[4] = {1, 2, 3, 4}, y[4], out[4];
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4, a.x = x, a.y = y, a.residual_out = out;
    const lntune_kernels_types fp32 = {0, 0, 0, 0}, bad_r = {.residual = 4};
    test_case(lntune_kernels_layernorm_v2(&a, fp32) == LNTUNE_KERNEL_EUNSUPPORTED,
              "residual_out without residual is declined");
    a.residual_out = NULL, a.residual = x;
    test_case(lntune_kernels_rmsnorm_v2(&a, bad_r) == LNTUNE_KERNEL_EUNSUPPORTED,
              "a residual type outside 0..3 is declined");
    a.residual_stride = 3;
    test_case(lntune_kernels_rmsnorm(&a) == LNTUNE_KERNEL_EUNSUPPORTED,
              "a residual stride below H is declined");
}

/* ---- 4. backward ---- */

/* Half an ulp of type t at |v| (0 for fp32, whose rounding the 2^-20 terms cover). */
static double half_ulp(int t, double v) {
    return t == LNTUNE_TYPE_F32 ? 0.0 : 0.5 * ulp_of(t, fabs(v)) * (1 + 0x1p-7);
}

/*
 * One backward call of op; returns the worst error as a fraction of its bound (<= 1 passes), or
 * INFINITY with why set. Bounds as gen/verify/verify_backward.h's, at 16 units of 2^-24, n = rows
 * + 64.
 */
static double run_backward(int op, int xt, int pt, int64_t H, int64_t rows, int saved,
                           int with_gamma, int fused, char *why, size_t len) {
    enum { PAD = 1 };
    const int64_t xs = H + 3, dys = H + 5, dxs = H + 7, drs = H + 9;
    const size_t e = tsize(xt), pe = tsize(pt);
    unsigned char *xb = malloc((size_t)(rows * xs + PAD) * e);
    unsigned char *dyb = malloc((size_t)(rows * dys + PAD) * e);
    unsigned char *dxb = malloc((size_t)(rows * dxs + PAD) * e);
    unsigned char *drb = malloc((size_t)(rows * drs + PAD) * e);
    unsigned char *gb = malloc((size_t)H * pe), *dgb = malloc((size_t)H * pe);
    unsigned char *dbb = malloc((size_t)H * pe);
    float *xf = malloc((size_t)H * sizeof *xf), *mean = malloc((size_t)rows * sizeof *mean);
    float *rstd = malloc((size_t)rows * sizeof *rstd);
    double *xd = malloc((size_t)H * sizeof *xd), *dyd = malloc((size_t)H * sizeof *dyd);
    double *drd = malloc((size_t)H * sizeof *drd), *gd = malloc((size_t)H * sizeof *gd);
    double *z = malloc((size_t)H * sizeof *z), *dxr = malloc((size_t)H * sizeof *dxr);
    double *dg = calloc((size_t)H, sizeof *dg), *db = calloc((size_t)H, sizeof *db);
    double *dg_mag = calloc((size_t)H, sizeof *dg_mag), *db_mag = calloc((size_t)H, sizeof *db_mag);
    void *x = xb + PAD * e, *dy = dyb + PAD * e, *dx = dxb + PAD * e, *dr = drb + PAD * e;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < H; ++i) {
            put_random(xt, x, r * xs + i, r % 3 == 1 ? 1000.0 : 0.0, 1.0);
            put_random(xt, dy, r * dys + i, 0.0, 1.0);
            put_random(xt, dr, r * drs + i, 0.0, 1.0);
        }
    for (int64_t i = 0; i < H; ++i) put_random(pt, gb, i, 1.0, 0.5);
    for (int64_t i = 0; i < rows * dxs + PAD; ++i) set_raw(xt, dxb, i, poison[xt]);
    for (int64_t i = 0; i < H; ++i)
        set_raw(pt, dgb, i, poison[pt]), set_raw(pt, dbb, i, poison[pt]);
    for (int64_t r = 0; r < rows; ++r) { /* the forward's statistics, as it would have saved them */
        double m, rs;
        for (int64_t i = 0; i < H; ++i) xf[i] = (float)lntune_ref_load(xt, x, r * xs + i);
        lntune_reference_row((lntune_op)op, xf, H, 1e-5f, z, &m, &rs);
        mean[r] = (float)m, rstd[r] = (float)rs;
    }
    lntune_backward_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.H = H, a.x = x, a.dy = dy, a.dx = dx;
    a.x_stride = xs, a.dy_stride = dys, a.dx_stride = dxs;
    a.gamma = with_gamma ? gb : NULL;
    if (saved) a.mean = op == 0 ? mean : NULL, a.rstd = rstd;
    if (fused) a.dresidual_out = dr, a.dresidual_out_stride = drs;
    const lntune_kernels_types types = {.x = xt + 1, .params = pt + 1};
    int rc = op ? lntune_kernels_rmsnorm_backward(&a, types, dgb, NULL)
                : lntune_kernels_layernorm_backward(&a, types, dgb, dbb);
    double worst = 0.0;
    if (rc != LNTUNE_KERNEL_OK) {
        snprintf(why, len, "rc %d", rc);
        worst = INFINITY;
    }
    const double u = 0x1p-24, n = (double)rows + 64.0;
    for (int64_t r = 0; r < rows && worst <= 1.0; ++r) {
        double m = mean[r], rs = rstd[r];
        for (int64_t i = 0; i < H; ++i) {
            xd[i] = lntune_ref_load(xt, x, r * xs + i);
            dyd[i] = lntune_ref_load(xt, dy, r * dys + i);
            drd[i] = lntune_ref_load(xt, dr, r * drs + i);
            gd[i] = with_gamma ? lntune_ref_load(pt, gb, i) : 1.0;
            xf[i] = (float)xd[i];
        }
        if (!saved) lntune_reference_row((lntune_op)op, xf, H, 1e-5f, z, &m, &rs);
        if (op == 1) m = 0.0;
        lntune_reference_backward_row((lntune_op)op, xd, dyd, fused ? drd : NULL, gd, H, m, rs, dxr,
                                      dg, db);
        double a1 = 0.0, a2 = 0.0;
        for (int64_t i = 0; i < H; ++i) {
            const double xhat = (xd[i] - m) * rs, g = fabs(dyd[i] * gd[i]);
            a1 += g / (double)H;
            a2 += g * (fabs(xhat) + fabs(m) * rs + 1.0) / (double)H;
            dg_mag[i] += fabs(dyd[i]) * (fabs(xhat) + fabs(m) * rs + 1.0);
            db_mag[i] += fabs(dyd[i]);
        }
        for (int64_t i = 0; i < H; ++i) {
            const int64_t at = r * dxs + i;
            if (raw(xt, dx, at) == poison[xt]) {
                snprintf(why, len, "dx[%lld][%lld] not written", (long long)r, (long long)i);
                worst = INFINITY;
                break;
            }
            const double xhat = (xd[i] - m) * rs;
            const double bound =
                16 * u *
                    (rs * (fabs(dyd[i] * gd[i]) + a1 + (2 * fabs(xhat) + fabs(m) * rs + 1) * a2) +
                     (fused ? fabs(drd[i]) : 0.0)) +
                half_ulp(xt, dxr[i]);
            const double err = fabs(lntune_ref_load(xt, dx, at) - dxr[i]) / bound;
            if (!(err <= worst)) worst = err;
            if (!(err <= 1.0)) {
                snprintf(why, len, "dx[%lld][%lld] = %a, want %a", (long long)r, (long long)i,
                         lntune_ref_load(xt, dx, at), dxr[i]);
                break;
            }
        }
    }
    for (int64_t i = 0; i < H && worst <= 1.0; ++i)
        for (int k = 0; k < (op == 0 ? 2 : 1); ++k) {
            const double want = k ? db[i] : dg[i], mag = k ? db_mag[i] : dg_mag[i];
            const double got = lntune_ref_load(pt, k ? dbb : dgb, i);
            const double err = fabs(got - want) / ((16 + n) * u * mag + half_ulp(pt, want));
            if (!(err <= worst)) worst = err;
            if (!(err <= 1.0)) {
                snprintf(why, len, "%s[%lld] = %a, want %a", k ? "dbeta" : "dgamma", (long long)i,
                         got, want);
                break;
            }
        }
    for (int64_t i = 0; i < rows * dxs + PAD && worst <= 1.0; ++i) { /* nothing between rows */
        const int64_t at = i - PAD;
        if (at >= 0 && at % dxs < H) continue;
        if (raw(xt, dxb, i) != poison[xt]) {
            snprintf(why, len, "dx element %lld (outside the rows) written", (long long)at);
            worst = INFINITY;
        }
    }
    free(xb), free(dyb), free(dxb), free(drb), free(gb), free(dgb), free(dbb), free(xf);
    free(mean), free(rstd), free(xd), free(dyd), free(drd), free(gd), free(z), free(dxr);
    free(dg), free(db), free(dg_mag), free(db_mag);
    return worst;
}

static void test_backward(void) {
    /* export_makedb's backward winners and their tuned shapes; the others untuned */
    static const struct {
        int op, xt, pt, fused;
        int64_t H, rows;
    } cases[] = {
        {0, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0, 768, 40},
        {1, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, 1, 4096, 600},
        {0, LNTUNE_TYPE_F16, LNTUNE_TYPE_BF16, 1, 1000, 7},
        {1, LNTUNE_TYPE_F32, LNTUNE_TYPE_F32, 0, 17, 40},
        {0, LNTUNE_TYPE_BF16, LNTUNE_TYPE_F32, 0, 1, 5},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
        for (int saved = 0; saved < 2; ++saved)
            for (int with_gamma = 0; with_gamma < 2; ++with_gamma) {
                char why[256] = "";
                const double err =
                    run_backward(cases[k].op, cases[k].xt, cases[k].pt, cases[k].H, cases[k].rows,
                                 saved, with_gamma, cases[k].fused, why, sizeof why);
                test_case(err <= 1.0,
                          "backward %s%s x=%s params=%s H=%lld rows=%lld, %s statistics, %s: "
                          "worst %.3g of its bound%s%s",
                          cases[k].op ? "rmsnorm" : "layernorm", cases[k].fused ? "+residual" : "",
                          type_names[cases[k].xt], type_names[cases[k].pt], (long long)cases[k].H,
                          (long long)cases[k].rows, saved ? "saved" : "recomputed",
                          with_gamma ? "gamma" : "no gamma", err, why[0] ? ": " : "", why);
            }
    float x[4] = {1, 2, 3, 4}, dy[4] = {1, 1, 1, 1}, dx[4], d[4], m = 0.0f;
    lntune_backward_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.H = 4, a.x = x, a.dy = dy, a.dx = dx;
    const lntune_kernels_types fp32 = {0, 0, 0, 0};
    test_case(lntune_kernels_rmsnorm_backward(&a, fp32, d, d) == LNTUNE_KERNEL_EUNSUPPORTED,
              "RMSNorm backward declines dbeta");
    a.mean = &m;
    test_case(lntune_kernels_layernorm_backward(&a, fp32, d, d) == LNTUNE_KERNEL_EUNSUPPORTED,
              "LayerNorm backward declines mean without rstd");
    a.mean = NULL, a.dx = NULL;
    test_case(lntune_kernels_layernorm_backward(&a, fp32, NULL, NULL) == LNTUNE_KERNEL_EUNSUPPORTED,
              "a NULL dx is declined");
}

/* ---- 5. concurrent callers ---- */

enum { CALLERS = 4, CALLS = 12 };

typedef struct {
    int64_t H, rows;
    float *x, *y, *g, *b;
    int bad_calls;
    double worst;
} caller;

static void *call_repeatedly(void *p) {
    caller *c = p;
    for (int k = 0; k < CALLS; ++k) {
        for (int64_t i = 0; i < c->rows * c->H; ++i) c->y[i] = NAN;
        lntune_kernel_args a;
        memset(&a, 0, sizeof a);
        a.rows = c->rows, a.H = c->H, a.x = c->x, a.y = c->y, a.gamma = c->g, a.beta = c->b;
        const int rc = lntune_kernels_layernorm(&a);
        const double err = rc ? INFINITY
                              : test_error(LNTUNE_OP_LAYERNORM, c->x, c->H, c->y, c->H, c->rows,
                                           c->H, c->g, c->b, 1e-5, NULL, NULL);
        c->bad_calls += !(err <= TOLERANCE);
        if (!(err <= c->worst)) c->worst = err;
    }
    return NULL;
}

static void test_concurrent(void) {
    /* H=768 rows=4096 is export_makedb's two-thread winner; H=1000 rows=600 an untuned shape large
     * enough for the generic kernels' pool. */
    caller c[CALLERS];
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; ++i) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].H = i % 2 ? 1000 : 768, c[i].rows = i % 2 ? 600 : 4096;
        const int64_t n = c[i].rows * c[i].H;
        c[i].x = malloc((size_t)n * 4), c[i].y = malloc((size_t)n * 4);
        c[i].g = malloc((size_t)c[i].H * 4), c[i].b = malloc((size_t)c[i].H * 4);
        test_fill(c[i].x, n, 3.0, 1.0);
        test_fill(c[i].g, c[i].H, 1.0, 0.2);
        test_fill(c[i].b, c[i].H, 0.0, 0.5);
    }
    int started = 0;
    for (int i = 0; i < CALLERS; ++i)
        started += pthread_create(&t[i], NULL, call_repeatedly, &c[i]) == 0;
    test_case(started == CALLERS, "%d caller threads started", started);
    for (int i = 0; i < started; ++i) pthread_join(t[i], NULL);
    for (int i = 0; i < started; ++i)
        test_case(c[i].bad_calls == 0,
                  "concurrent caller %d, layernorm H=%lld rows=%lld: %d of %d calls wrong, worst "
                  "%.3g of tolerance",
                  i, (long long)c[i].H, (long long)c[i].rows, c[i].bad_calls, CALLS,
                  c[i].worst / TOLERANCE);
    for (int i = 0; i < CALLERS; ++i) free(c[i].x), free(c[i].y), free(c[i].g), free(c[i].b);
}

#if LNTUNE_KERNELS_BATCH_INVARIANT
/* One call of rows [r0, r0 + n) of x (and residual) into y (and out), with mean and rstd. */
static int run_rows(int op, int t, int64_t H, int fused, int64_t r0, int64_t n, const void *x,
                    const void *res, void *y, void *out, const void *g, float *mean, float *rstd) {
    const size_t e = tsize(t);
    lntune_kernel_args a;
    memset(&a, 0, sizeof a);
    a.rows = n, a.H = H, a.gamma = g;
    a.x = (const char *)x + (size_t)(r0 * H) * e;
    a.y = (char *)y + (size_t)(r0 * H) * e;
    if (fused) {
        a.residual = (const char *)res + (size_t)(r0 * H) * e;
        a.residual_out = (char *)out + (size_t)(r0 * H) * e;
    }
    a.mean = mean + r0, a.rstd = rstd + r0;
    const lntune_kernels_types types = {.x = t + 1};
    return op ? lntune_kernels_rmsnorm_v2(&a, types) : lntune_kernels_layernorm_v2(&a, types);
}

static void test_batch_invariance(void) {
    enum { ROWS = 600, CHUNK = 7 };
    static const struct {
        int op, type, gamma, fused;
        int64_t H;
        const char *what;
    } cases[] = {
        {0, 0, 1, 0, 768, "layernorm f32 H=768 (winners at rows 9-64 and 513-4096)"},
        {1, 1, 0, 0, 4096, "rmsnorm f16 H=4096 (a 2-thread winner)"},
        {0, 2, 1, 0, 1000, "layernorm bf16 H=1000 (untuned: the generic kernel)"},
        {0, 2, 1, 1, 1024, "layernorm+residual_out bf16 H=1024"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const int op = cases[c].op, t = cases[c].type, fused = cases[c].fused;
        const int64_t H = cases[c].H, n = ROWS * H;
        const size_t bytes = (size_t)n * tsize(t);
        char *x = malloc(bytes), *res = malloc(bytes), *g = malloc((size_t)H * tsize(t));
        char *y[3], *out[3];
        float *stats[3];
        for (int k = 0; k < 3; ++k) {
            y[k] = calloc(1, bytes), out[k] = calloc(1, bytes);
            stats[k] = calloc(2 * ROWS, sizeof(float));
        }
        for (int64_t i = 0; i < n; ++i) put_random(t, x, i, 3.0, 2.0), put_random(t, res, i, 0, 1);
        for (int64_t i = 0; i < H; ++i) put_random(t, g, i, 1.0, 0.2);
        const void *gamma = cases[c].gamma ? g : NULL;
        int rc = run_rows(op, t, H, fused, 0, ROWS, x, res, y[0], out[0], gamma, stats[0],
                          stats[0] + ROWS);
        for (int64_t r = 0; r < ROWS && rc == LNTUNE_KERNEL_OK; ++r)
            rc = run_rows(op, t, H, fused, r, 1, x, res, y[1], out[1], gamma, stats[1],
                          stats[1] + ROWS);
        for (int64_t r = 0; r < ROWS && rc == LNTUNE_KERNEL_OK; r += CHUNK)
            rc = run_rows(op, t, H, fused, r, r + CHUNK <= ROWS ? CHUNK : ROWS - r, x, res, y[2],
                          out[2], gamma, stats[2], stats[2] + ROWS);
        int same = rc == LNTUNE_KERNEL_OK;
        for (int k = 1; k < 3; ++k)
            same = same && memcmp(y[0], y[k], bytes) == 0 &&
                   memcmp(stats[0], stats[k], 2 * ROWS * sizeof(float)) == 0 &&
                   (!fused || memcmp(out[0], out[k], bytes) == 0);
        test_case(same,
                  "batch-invariant: %s, %d rows in one call, alone and %d at a time: the "
                  "same bits (rc %d)",
                  cases[c].what, ROWS, CHUNK, rc);
        free(x), free(res), free(g);
        for (int k = 0; k < 3; ++k) free(y[k]), free(out[k]), free(stats[k]);
    }
}
#endif

/* ---- 7. the tuned kernels' ISA ---- */

#ifdef LNTUNE_KERNELS_TRACE
static void test_isa(const char *cases_path) {
    FILE *f = fopen(cases_path, "r");
    int op, x, y, p, n = 0;
    long long H;
    while (f && fscanf(f, "%d %d %d %d %lld", &op, &x, &y, &p, &H) == 5) {
        const tuple t = {x, y, p};
        char why[256] = "";
        traced_calls = 0;
        const double err = run_typed(op, t, H, 40, 1, 0, t.x, 0.0f, why, sizeof why);
        test_case(err <= 1.0 && traced_calls == !FORCE_GENERIC,
                  "%s %s/%s/%s H=%lld rows=40 gamma: the %s kernel (tuned calls %d), worst %.3g "
                  "of tolerance%s%s",
                  op ? "rmsnorm" : "layernorm", type_names[x], type_names[y], type_names[p], H,
                  FORCE_GENERIC ? "generic" : "tuned", traced_calls, err, why[0] ? ": " : "", why);
        ++n;
    }
    test_case(f && n > 0, "%d winners read from %s", n, cases_path);
    if (f) fclose(f);
}
#endif

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "isa") == 0) {
#ifdef LNTUNE_KERNELS_TRACE
        test_isa(argv[2]);
#else
        test_case(0, "isa needs -DLNTUNE_KERNELS_TRACE");
#endif
        return test_summary();
    }
    if (argc > 1 && strcmp(argv[1], "concurrent") == 0) {
        test_concurrent();
        return test_summary();
    }
    test_fp32();
    test_tuples();
    test_offset();
    test_quant();
    test_fused();
    test_backward();
    test_concurrent();
#ifdef LNTUNE_KERNELS_TRACE
    test_nearest_h();
#endif
#if LNTUNE_KERNELS_BATCH_INVARIANT
    test_batch_invariance();
#endif
#if defined(LNTUNE_KERNELS_MAX_THREADS) && LNTUNE_KERNELS_MAX_THREADS == 1
    /* test_concurrent's callers are joined: any thread left is the exported pool's. */
    const int n = test_thread_count();
    test_case(n == 1, "-DLNTUNE_KERNELS_MAX_THREADS=1: %d thread(s) in the process (want 1)", n);
#endif
    return test_summary();
}
