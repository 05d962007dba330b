/*
 * test_runtime.c - liblntune against the float64 reference on shapes no one tuned: the built-in
 * kernels for every op, affine kind, H (odd sizes, vector tails, large rows), stride and rows
 * count; first with no database, then with a database that only knows another machine (whose
 * tuned kernels must never run here).
 *
 *   test_runtime SCRATCH_DIR
 */
#include "lntune.h"
#include "testutil.h"
#include "tunedb.h"

#include <string.h>

static void run_cases(lntune *ctx, const char *setting) {
    static const int64_t hs[] = {1, 3, 17, 768, 1000, 4097};
    static const int64_t rows_list[] = {1, 7, 300};
    static const char *const affine_names[] = {"none", "gamma", "gamma+beta", "beta"};
    for (int op = 0; op < 2; ++op) {
        for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; ++hi) {
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri) {
                for (int affine = 0; affine < 4; ++affine) {
                    if (op == LNTUNE_OP_RMSNORM && affine >= 2) continue; /* no beta */
                    int64_t H = hs[hi], rows = rows_list[ri];
                    int strided = (ri + (size_t)affine) % 2;
                    int64_t xs = strided ? H + 5 : H, ys = strided ? H + 3 : H;
                    float *x = malloc((size_t)(rows * xs) * sizeof *x);
                    float *y = malloc((size_t)(rows * ys) * sizeof *y);
                    float *gamma = malloc((size_t)H * sizeof *gamma);
                    float *beta = malloc((size_t)H * sizeof *beta);
                    float *mean = malloc((size_t)rows * sizeof *mean);
                    float *rstd = malloc((size_t)rows * sizeof *rstd);
                    test_fill(x, rows * xs, hi % 2 ? 1000.0 : 0.0, 1.0);
                    test_fill(gamma, H, 1.0, 0.3);
                    test_fill(beta, H, 0.0, 1.0);
                    lntune_args a = {
                        .rows = rows, .H = H, .x = x, .y = y, .mean = mean, .rstd = rstd};
                    a.x_stride = strided ? xs : 0, a.y_stride = strided ? ys : 0;
                    a.gamma = affine == 1 || affine == 2 ? gamma : NULL;
                    a.beta = affine >= 2 ? beta : NULL;
                    int rc = op == 0 ? lntune_layernorm(ctx, &a) : lntune_rmsnorm(ctx, &a);
                    double err = rc == LNTUNE_OK
                                     ? test_error((lntune_op)op, x, xs, y, ys, rows, H, a.gamma,
                                                  a.beta, 1e-5, op == 0 ? mean : NULL, rstd)
                                     : INFINITY;
                    test_case(rc == LNTUNE_OK && err <= TOLERANCE,
                              "%s: %s H=%lld rows=%lld affine=%s strides=%s: rc %d, error %.3g",
                              setting, op == 0 ? "layernorm" : "rmsnorm", (long long)H,
                              (long long)rows, affine_names[affine], strided ? "padded" : "dense",
                              rc, err);
                    free(x), free(y), free(gamma), free(beta), free(mean), free(rstd);
                }
            }
        }
    }
    /* A call big enough for the built-in kernels to use the pool. */
    int64_t rows = 4096, H = 512;
    float *x = malloc((size_t)(rows * H) * sizeof *x), *y = malloc((size_t)(rows * H) * sizeof *y);
    test_fill(x, rows * H, 3.0, 2.0);
    lntune_args a = {0};
    a.rows = rows, a.H = H, a.x = x, a.y = y, a.eps = 1e-3f;
    int rc = lntune_layernorm(ctx, &a);
    double err =
        rc ? INFINITY
           : test_error(LNTUNE_OP_LAYERNORM, x, H, y, H, rows, H, NULL, NULL, 1e-3, NULL, NULL);
    test_case(rc == LNTUNE_OK && err <= TOLERANCE,
              "%s: layernorm H=512 rows=4096 eps=1e-3 (multi-threaded built-in): error %.3g",
              setting, err);
    /* In place: y == x. */
    float *copy = malloc((size_t)(rows * H) * sizeof *copy);
    memcpy(copy, x, (size_t)(rows * H) * sizeof *x);
    a.y = x;
    a.eps = 0.0f;
    rc = lntune_rmsnorm(ctx, &a);
    err = rc ? INFINITY
             : test_error(LNTUNE_OP_RMSNORM, copy, H, x, H, rows, H, NULL, NULL, 1e-5, NULL, NULL);
    test_case(rc == LNTUNE_OK && err <= TOLERANCE,
              "%s: rmsnorm in place, eps=0 means 1e-5: error %.3g", setting, err);
    free(x), free(y), free(copy);
}

/* Whether /proc/cpuinfo's first flags line lists flag (0 where there is no such file). Read here
 * rather than through core/hardware.c, which is the detection under test. */
static int cpu_has(const char *flag) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *w = strtok(strchr(line, ':'), " :\n"); w && !found; w = strtok(NULL, " \n"))
            found = strcmp(w, flag) == 0;
        break;
    }
    if (f) fclose(f);
    return found;
}

/* The built-ins run the AVX2 copy exactly where the build has one and the CPU lists avx2, fma
 * and f16c, and its AVX-512 forward copy where the CPU lists avx512f, avx512bw and avx512vl too,
 * unless LNTUNE_BUILTIN_ISA=generic or =avx2 (ctest runs the runtime tests each way). */
static void test_builtin_isa(void) {
    const char *forced = getenv("LNTUNE_BUILTIN_ISA");
    const int generic = forced && strcmp(forced, "generic") == 0;
    const int only_avx2 = forced && strcmp(forced, "avx2") == 0;
    const int avx2 = LNTUNE_TEST_BUILTIN_AVX2 && !generic && cpu_has("avx2") && cpu_has("fma") &&
                     cpu_has("f16c");
    const int avx512 = LNTUNE_TEST_BUILTIN_AVX512 && avx2 && !only_avx2 && cpu_has("avx512f") &&
                       cpu_has("avx512bw") && cpu_has("avx512vl");
    const char *want = avx512 ? "avx512" : avx2 ? "avx2" : "generic";
    const char *got = lntune_builtin_isa();
    test_case(got && strcmp(got, want) == 0,
              "built-in kernels: %s (build with the AVX2 copy: %d, AVX-512: %d, "
              "LNTUNE_BUILTIN_ISA=%s, cpuinfo avx2 %d fma %d f16c %d avx512f %d bw %d vl %d)",
              got ? got : "(null)", LNTUNE_TEST_BUILTIN_AVX2, LNTUNE_TEST_BUILTIN_AVX512,
              forced ? forced : "(unset)", cpu_has("avx2"), cpu_has("fma"), cpu_has("f16c"),
              cpu_has("avx512f"), cpu_has("avx512bw"), cpu_has("avx512vl"));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_runtime SCRATCH_DIR\n");
        return 2;
    }
    char path[4096];
    test_builtin_isa();

    /* 1. No database at all. */
    snprintf(path, sizeof path, "%s/missing/none.db", argv[1]);
    lntune *ctx = NULL;
    int rc = lntune_open(path, &ctx);
    test_case(rc == LNTUNE_OK && ctx, "a missing database is not an error: rc %d", rc);
    if (ctx) run_cases(ctx, "no database");
    lntune_close(ctx);

    /* 2. A database of another machine, whose best kernel for H=768 must not run here. */
    snprintf(path, sizeof path, "%s/other.db", argv[1]);
    lntune_db *db;
    lntune_cpu_info other;
    other_machine(&other);
    int64_t hw;
    rc = create_db_for(path, &other, &db, &hw);
    if (rc == LNTUNE_OK)
        rc = put_tuned(db, hw, "layernorm", "vec=4,affine=fused,threads=1", 768, 7, 1, 1,
                       TUNED_RUNS);
    test_case(rc == LNTUNE_OK, "create a database of another machine: rc %d (%s)", rc,
              db ? lntune_db_errmsg(db) : lntune_errstr(rc));
    lntune_db_close(db);
    ctx = NULL;
    rc = lntune_open(path, &ctx);
    test_case(rc == LNTUNE_OK && ctx, "a database of another machine is not an error: rc %d", rc);
    if (ctx) run_cases(ctx, "other machine's database");
    test_case(lntune_test_tuned_calls == 0,
              "another machine's tuned kernel never ran here: %d calls", lntune_test_tuned_calls);
    lntune_close(ctx);
    lntune_close(NULL);
    test_case(1, "lntune_close(NULL) is a no-op");
    return test_summary();
}
