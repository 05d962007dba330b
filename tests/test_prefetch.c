/*
 * test_prefetch.c - where the CPU kernels prefetch. Prefetches are hints: a kernel that
 * prefetches the wrong lines, or none, still verifies, so the verifier cannot see this knob.
 * Here each variant is compiled with __builtin_prefetch redefined to log its addresses, run
 * over a few rows, and the log is checked against what the knob promises:
 *   prefetch=0: nothing;
 *   prefetch=1: every line of row r + 1 while row r is normalized (after its statistics);
 *   prefetch=2: the first half of row r + 1's lines during row r's statistics, the second half
 *               while row r is normalized;
 * and never a line outside x (a prefetch does not fault, but the pointer must be valid C).
 */
#include "build.h"
#include "dtypes.h"
#include "generator.h"
#include "lntune.h"

#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 4, H = 3997, STRIDE = 4040, LOG = 1 << 16, LINE = 64, STEP_PREFETCHES = 4 };

/*
 * Put before the generated source: a log of every prefetch (its address) and every non-temporal
 * store (its address + 1: y's are aligned), in program order, and prefetch_log(a) copying the
 * log to a->y and emptying it. Non-temporal stores are clang's builtin (the default compiler's
 * path): the first store to a row of y marks the end of that row's statistics.
 */
static const char prelude[] =
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "static uintptr_t log_addr[65536];\n"
    "static int64_t log_count;\n"
    "#define __builtin_prefetch(p, rw, locality) \\\n"
    "    (log_addr[log_count++ & 65535] = (uintptr_t)(const void *)(p))\n"
    "#define __builtin_nontemporal_store(v, p) \\\n"
    "    (log_addr[log_count++ & 65535] = (uintptr_t)(const void *)(p) + 1, \\\n"
    "     __builtin_nontemporal_store(v, p))\n"
    "struct lntune_kernel_args;\n"
    "int prefetch_log(const struct lntune_kernel_args *a, int64_t b, int64_t e);\n";

/* After the generated source: the accessor, a kernel-shaped function the library exports. */
static const char postlude[] = "\nint prefetch_log(const lntune_kernel_args *a, int64_t b, "
                               "int64_t e)\n{\n"
                               "    (void)b, (void)e;\n"
                               "    int64_t n = log_count < 65536 ? log_count : 65536;\n"
                               "    memcpy(a->y, log_addr, (size_t)n * sizeof log_addr[0]);\n"
                               "    log_count = 0;\n"
                               "    return (int)n;\n"
                               "}\n";

typedef struct {
    const char *op, *variant;
    int bf16;  /* all-bf16 (the variant's layout may be evenodd) */
    int group; /* the variant's rows: the first group's rows are never prefetched */
} prefetch_case;

/* The row of base (rows of H elements of elem bytes, STRIDE apart) that p lies in, or -1. */
static int row_of(uintptr_t p, uintptr_t base, size_t elem) {
    if (p < base) return -1;
    const uintptr_t r = (p - base) / (STRIDE * elem);
    return r < ROWS && p - base - r * STRIDE * elem < H * elem ? (int)r : -1;
}

/* Fills n elements at p with 1 + (i % 7) / 8, fp32 or bf16 (exact in both). */
static void fill(unsigned char *p, size_t n, int bf16) {
    for (size_t i = 0; i < n; ++i) {
        const float v = 1.0f + (float)(i % 7) / 8.0f;
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        if (bf16) {
            const uint16_t h = (uint16_t)(u >> 16);
            memcpy(p + i * 2, &h, 2);
        } else {
            memcpy(p + i * 4, &u, 4);
        }
    }
}

/* Compiles c's variant with the logging prelude and runs it over ROWS rows; the log to log. */
static int run_logged(const prefetch_case *c, lntune_gen *g, const unsigned char *x,
                      unsigned char *y, const unsigned char *params, uintptr_t *log) {
    lntune_shape shape = {0};
    shape.H = H;
    if (c->bf16)
        shape.types = (lntune_types){LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, LNTUNE_TYPE_BF16, 0};
    lntune_source src;
    if (lntune_gen_emit(g, "cpu", c->op, c->variant, &shape, "k", &src) != LNTUNE_OK) {
        CHECK(0, "%s %s: emit: %s", c->op, c->variant, lntune_gen_errmsg(g));
        return -1;
    }
    const size_t len = strlen(prelude) + strlen(src.text) + strlen(postlude) + 1;
    char *text = malloc(len);
    if (text) snprintf(text, len, "%s%s%s", prelude, src.text, postlude);
    lntune_source_free(&src);
    const char *texts[1] = {text};
    lntune_library *lib = NULL;
    char *diag = NULL;
    const int rc =
        text ? lntune_build_library(lntune_default_compiler(), NULL, texts, 1, 1, &lib, &diag)
             : LNTUNE_ENOMEM;
    free(text);
    if (rc != LNTUNE_OK) {
        CHECK(0, "%s %s: build: %s", c->op, c->variant, diag ? diag : "out of memory");
        free(diag);
        return -1;
    }
    const size_t elem = c->bf16 ? 2 : 4;
    lntune_kernel_fn kernel = lntune_library_kernel(lib, "k");
    lntune_kernel_fn get_log = lntune_library_kernel(lib, "prefetch_log");
    lntune_kernel_args a = {0};
    a.rows = ROWS;
    a.H = H;
    a.x_stride = a.y_stride = STRIDE;
    a.x = x;
    a.y = y;
    a.gamma = params;
    a.beta = strcmp(c->op, "layernorm") == 0 ? params + H * elem : NULL;
    a.eps = 1e-5f;
    int count = -1;
    if (kernel && get_log && kernel(&a, 0, ROWS) == LNTUNE_KERNEL_OK) {
        a.y = log;
        count = get_log(&a, 0, 0);
    }
    CHECK(count >= 0, "%s %s: runs over %d rows and gives its log", c->op, c->variant, ROWS);
    lntune_library_close(lib);
    return count;
}

static void check_case(const prefetch_case *c, lntune_gen *g) {
    const int mode = strstr(c->variant, "prefetch=2")   ? 2
                     : strstr(c->variant, "prefetch=1") ? 1
                                                        : 0;
    const int nt = strstr(c->variant, "store=nt") != NULL;
    const size_t elem = c->bf16 ? 2 : 4, n = (size_t)(ROWS - 1) * STRIDE + H;
    unsigned char *x = calloc(n, elem), *y = calloc(n, elem), *params = calloc(2 * H, elem);
    uintptr_t *log = calloc(LOG, sizeof *log);
    if (!x || !y || !params || !log) {
        CHECK(0, "out of memory");
        goto done;
    }
    fill(x, n, c->bf16);
    fill(params, 2 * H, c->bf16);
    const int count = run_logged(c, g, x, y, params, log);
    if (count < 0) goto done;
    if (mode == 0) {
        int prefetches = 0;
        for (int k = 0; k < count; ++k) prefetches += !(log[k] & 1);
        CHECK(prefetches == 0, "%s %s: no prefetch (%d logged)", c->op, c->variant, prefetches);
        goto done;
    }
    /* first_store[r]: the log index of the first store to y's row r (the end of its statistics) */
    int first_store[ROWS], outside = 0, early = 0, phase = 0;
    for (int r = 0; r < ROWS; ++r) first_store[r] = count;
    for (int k = 0; k < count; ++k) {
        if (!(log[k] & 1)) continue;
        const int r = row_of(log[k] - 1, (uintptr_t)y, elem);
        if (r >= 0 && k < first_store[r]) first_store[r] = k;
    }
    if (nt)
        CHECK(first_store[0] < count, "%s %s: the stores of y are logged (the compiler is clang)",
              c->op, c->variant);
    const uintptr_t line = LINE;
    int covered[ROWS] = {0}, lines[ROWS] = {0};
    for (int t = 0; t < ROWS; ++t) {
        const uintptr_t start = (uintptr_t)x + (size_t)t * STRIDE * elem, end = start + H * elem;
        const uintptr_t half = start + (H / 2) * elem;
        lines[t] = (int)((end - 1) / line - start / line + 1);
        unsigned char *seen = calloc((size_t)lines[t], 1);
        for (int k = 0; seen && k < count; ++k) {
            if (log[k] & 1) continue;
            const int r = row_of(log[k], (uintptr_t)x, elem);
            if (r < 0) {
                outside += t == 0;
                continue;
            }
            if (r != t) continue;
            early += t < c->group;
            seen[log[k] / line - start / line] = 1;
            /* A row t below the last is prefetched by row t - 1 alone: its statistics take the
             * first half (prefetch=2), its normalize the rest (prefetch=1: all of it). */
            if (!nt || c->group > 1 || t == 0 || t == ROWS - 1) continue;
            /* The first vector step's prefetches come just before its store: the last few
             * entries before that store are of either phase. */
            if (k < first_store[t - 1] && k >= first_store[t - 1] - STEP_PREFETCHES) continue;
            const int during_stats = k < first_store[t - 1];
            if (mode == 1)
                phase += during_stats;
            else if (log[k] + line < half)
                phase += !during_stats;
            else if (log[k] >= half + line)
                phase += during_stats;
        }
        for (int i = 0; seen && i < lines[t]; ++i) covered[t] += seen[i];
        free(seen);
    }
    CHECK(outside == 0, "%s %s: no prefetch outside x's rows (%d were)", c->op, c->variant,
          outside);
    CHECK(early == 0, "%s %s: no prefetch of the first row group (%d were)", c->op, c->variant,
          early);
    /* Loops stop a vector step short of the end and start after a scalar peel to y's alignment
     * (row groups: in each chunk of the row): a few lines may go unprefetched. */
    for (int t = c->group; t < ROWS; ++t)
        CHECK(covered[t] >= lines[t] - lines[t] / 16,
              "%s %s: %d of row %d's %d lines are prefetched", c->op, c->variant, covered[t], t,
              lines[t]);
    if (nt && c->group == 1)
        CHECK(phase == 0, "%s %s: each prefetch in its phase (%s; %d were not)", c->op, c->variant,
              mode == 2 ? "first half during the statistics, second while normalizing"
                        : "all while normalizing",
              phase);
done:
    free(x);
    free(y);
    free(params);
    free(log);
}

int main(void) {
    static const prefetch_case cases[] = {
        {"layernorm", "vec=4,acc=4,stats=sampled,store=nt,prefetch=2", 0, 1},
        {"layernorm", "vec=16,acc=2,stats=twopass,store=nt,prefetch=2", 0, 1},
        {"layernorm", "vec=8,acc=1,stats=welford,store=nt,prefetch=2", 0, 1},
        {"layernorm", "vec=8,acc=2,stats=onepass,store=nt,prefetch=2", 0, 1},
        {"layernorm", "vec=1,acc=2,stats=sampled,prefetch=2", 0, 1},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,layout=evenodd,prefetch=2", 1, 1},
        {"rmsnorm", "vec=4,acc=4,stats=blocked,store=nt,prefetch=2", 0, 1},
        {"rmsnorm", "vec=8,acc=2,stats=wide,store=nt,prefetch=2", 0, 1},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=1", 0, 1},
        {"layernorm", "vec=8,acc=2,stats=sampled,rows=2,store=nt,prefetch=1", 0, 2},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=0", 0, 1},
    };
    lntune_gen *g = NULL;
    if (lntune_gen_open(NULL, &g) != LNTUNE_OK) {
        printf("FAIL: cannot open the generator\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) check_case(&cases[i], g);
    lntune_gen_close(g);
    return CHECK_SUMMARY();
}
