/*
 * test_prefetch.c - where the CPU kernels prefetch. Prefetches are hints: a kernel that
 * prefetches the wrong lines, or none, still verifies, so the verifier cannot see this knob.
 * Here each variant is compiled with __builtin_prefetch redefined to log its addresses, run
 * over a few rows, and the log is checked against what the knob promises:
 *   prefetch=0: nothing;
 *   prefetch=1: every line of row r + 1 while row r is normalized (after its statistics);
 *   prefetch=2: the first half of row r + 1's lines during row r's statistics, the second half
 *               while row r is normalized;
 *   overlap=1 (with prefetch=1): every line of row r + 2 while row r is normalized (that loop reads
 *               row r + 1 for its statistics);
 * each line prefetched at least pdensity times (4 unless the variant says);
 * the same of the residual's rows in a fused call with rprefetch=1 (none with rprefetch=0); and
 * never a line outside x and the residual
 * (a prefetch does not fault, but the pointer must be valid C).
 */
#include "build.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "half_ref.h"
#include "lntune.h"

#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* STEP_PREFETCHES: the most prefetches one vector step makes (vec=16, acc=2, pdensity=8) */
/* STRIDE: rows of 64-byte multiples in fp32 and bf16, y 64-byte aligned: an overlap=1 kernel
 * with non-temporal stores takes its overlapped path only where no row of y peels. */
enum { ROWS = 4, H = 3997, STRIDE = 4064, LINE = 64, STEP_PREFETCHES = 16 };
#define LOG 65536 /* entries of the kernel's log (spelled once for the prelude's C text) */
#define STR(x) #x
#define XSTR(x) STR(x)

/*
 * Put before the generated source: a log of every prefetch (its address) and every non-temporal
 * store (its address + 1: y's are aligned), in program order, and prefetch_log(a) copying the
 * log to a->y, emptying it and returning how many entries were made (past LOG, the first LOG).
 * Non-temporal stores are clang's builtin (the default compiler's path): the first store to a
 * row of y marks the end of that row's statistics.
 */
/* clang-format off */
static const char prelude[] =
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "#define LOG " XSTR(LOG) "\n"
    "static uintptr_t log_addr[LOG];\n"
    "static int64_t log_count;\n"
    "#define LOG_ENTRY(v) \\\n"
    "    (log_count < LOG ? (void)(log_addr[log_count] = (v)) : (void)0, ++log_count)\n"
    "#define __builtin_prefetch(p, rw, locality) LOG_ENTRY((uintptr_t)(const void *)(p))\n"
    "#define __builtin_nontemporal_store(v, p) \\\n"
    "    (LOG_ENTRY((uintptr_t)(const void *)(p) + 1), __builtin_nontemporal_store(v, p))\n"
    "struct lntune_kernel_args;\n"
    "int prefetch_log(const struct lntune_kernel_args *a, int64_t b, int64_t e);\n";
/* clang-format on */

/* After the generated source: the accessor, a kernel-shaped function the library exports. */
static const char postlude[] = "\nint prefetch_log(const lntune_kernel_args *a, int64_t b, "
                               "int64_t e)\n{\n"
                               "    (void)b, (void)e;\n"
                               "    const int64_t n = log_count;\n"
                               "    memcpy(a->y, log_addr, (size_t)(n < LOG ? n : LOG) * "
                               "sizeof log_addr[0]);\n"
                               "    log_count = 0;\n"
                               "    return (int)n;\n"
                               "}\n";

typedef struct {
    const char *op, *variant;
    int bf16;   /* all-bf16 (the variant's layout may be evenodd) */
    int group;  /* the variant's rows: the first group's rows are never prefetched */
    int fusion; /* LNTUNE_FUSION_*: residual rows to prefetch too */
} prefetch_case;

/* The buffers of a run: rows of STRIDE elements (residual and residual_out NULL unless fused). */
typedef struct {
    unsigned char *x, *y, *residual, *residual_out, *params;
} buffers;

/* The row of base (rows of H elements of elem bytes, STRIDE apart) that p lies in, or -1. */
static int row_of(uintptr_t p, uintptr_t base, size_t elem) {
    if (p < base) return -1;
    const uintptr_t r = (p - base) / (STRIDE * elem);
    return r < ROWS && p - base - r * STRIDE * elem < H * elem ? (int)r : -1;
}

/* Fills n elements at p with 1 + (i % 7) / 8, fp32 or bf16 (exact in both). */
static void fill(unsigned char *p, size_t n, int bf16) {
    for (size_t i = 0; i < n; ++i)
        lntune_ref_store(bf16 ? LNTUNE_TYPE_BF16 : LNTUNE_TYPE_F32, p, (int64_t)i,
                         1.0f + (float)(i % 7) / 8.0f);
}

/* Compiles c's variant with the logging prelude and runs it over ROWS rows; the log to log. */
static int run_logged(const prefetch_case *c, lntune_gen *g, const buffers *b, uintptr_t *log) {
    lntune_shape shape = {0};
    shape.H = H;
    shape.fusion = c->fusion;
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
    a.x_stride = a.y_stride = a.residual_stride = a.residual_out_stride = STRIDE;
    a.x = b->x;
    a.y = b->y;
    a.residual = b->residual;
    a.residual_out = b->residual_out;
    a.gamma = b->params;
    a.beta = strcmp(c->op, "layernorm") == 0 ? b->params + H * elem : NULL;
    a.eps = 1e-5f;
    int count = -1;
    if (kernel && get_log && kernel(&a, 0, ROWS) == LNTUNE_KERNEL_OK) {
        a.y = log;
        count = get_log(&a, 0, 0);
    }
    CHECK(count >= 0 && count <= LOG, "%s %s: runs over %d rows and logs %d entries (room: %d)",
          c->op, c->variant, ROWS, count, LOG);
    lntune_library_close(lib);
    return count <= LOG ? count : -1;
}

/*
 * The checks of one prefetched tensor (x or the residual, rows of elem bytes from base) in the
 * log of count entries; first_store[r]: the log index of the first store to y's row r.
 */
static void check_rows(const prefetch_case *c, const char *name, uintptr_t base, size_t elem,
                       const uintptr_t *log, int count, const int *first_store, int mode, int nt) {
    const uintptr_t line = LINE;
    const char *pdensity = strstr(c->variant, "pdensity=");
    const int density = pdensity ? atoi(pdensity + 9) : 4;    /* the knob's first value */
    const int lead = strstr(c->variant, "overlap=1") ? 2 : 1; /* rows ahead prefetched */
    int early = 0, phase = 0;
    for (int t = 0; t < ROWS; ++t) {
        const uintptr_t start = base + (size_t)t * STRIDE * elem, end = start + H * elem;
        const uintptr_t half = start + (H / 2) * elem;
        const int lines = (int)((end - 1) / line - start / line + 1);
        int *hits = calloc((size_t)lines, sizeof *hits);
        int covered = 0, thin = 0;
        for (int k = 0; hits && k < count; ++k) {
            if ((log[k] & 1) || row_of(log[k], base, elem) != t) continue;
            early += t < c->group * lead;
            hits[log[k] / line - start / line]++;
            /* overlap=1: row t by row t - 2's normalize loop alone (the last row by any) */
            if (lead == 2) {
                if (nt && t >= 2 && t < ROWS - 1)
                    phase += k < first_store[t - 2] - STEP_PREFETCHES || k >= first_store[t - 1];
                continue;
            }
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
        for (int i = 0; hits && i < lines; ++i) {
            covered += hits[i] > 0;
            thin += i > 0 && i < lines - 1 && hits[i] > 0 && hits[i] < density;
        }
        free(hits);
        /* Loops stop a vector step short of the end and start after a scalar peel to y's
         * alignment (row groups: in each chunk of the row): a few lines may go unprefetched. */
        if (t < c->group * lead) continue;
        CHECK(covered >= lines - lines / 16, "%s %s: %d of %s's row %d's %d lines are prefetched",
              c->op, c->variant, covered, name, t, lines);
        /* Lines split where a loop starts after the peel or stops a vector step short (in each
         * chunk of a row group; mode 2: where the statistics hand over to normalize) may be hit
         * fewer times; a variant that ignores pdensity leaves most lines short. */
        CHECK(thin <= lines / 16,
              "%s %s: %s's row %d's lines are prefetched %d times each (%d are not)", c->op,
              c->variant, name, t, density, thin);
    }
    CHECK(early == 0, "%s %s: no prefetch of %s's first %d row group(s) (%d were)", c->op,
          c->variant, name, lead, early);
    if (nt && c->group == 1)
        CHECK(phase == 0, "%s %s: each prefetch of %s in its phase (%s; %d were not)", c->op,
              c->variant, name,
              lead == 2   ? "while the row two before is normalized"
              : mode == 2 ? "first half during the statistics, second while normalizing"
                          : "all while normalizing",
              phase);
}

static void check_case(const prefetch_case *c, lntune_gen *g) {
    const int mode = strstr(c->variant, "prefetch=2")   ? 2
                     : strstr(c->variant, "prefetch=1") ? 1
                                                        : 0;
    const int nt = strstr(c->variant, "store=nt") != NULL;
    const size_t elem = c->bf16 ? 2 : 4, n = (size_t)(ROWS - 1) * STRIDE + H;
    unsigned char *y = aligned_alloc(64, (n * elem + 63) / 64 * 64);
    if (y) memset(y, 0, n * elem);
    buffers b = {calloc(n, elem), y, NULL, NULL, calloc(2 * H, elem)};
    if (c->fusion != LNTUNE_FUSION_NONE) b.residual = calloc(n, elem);
    if (c->fusion == LNTUNE_FUSION_RESIDUAL_OUT) b.residual_out = calloc(n, elem);
    uintptr_t *log = calloc(LOG, sizeof *log);
    if (!b.x || !b.y || !b.params || !log || (c->fusion && !b.residual) ||
        (c->fusion == LNTUNE_FUSION_RESIDUAL_OUT && !b.residual_out)) {
        CHECK(0, "out of memory");
        goto done;
    }
    fill(b.x, n, c->bf16);
    if (b.residual) fill(b.residual, n, c->bf16);
    fill(b.params, 2 * H, c->bf16);
    const int count = run_logged(c, g, &b, log);
    if (count < 0) goto done;
    int prefetches = 0, outside = 0, first_store[ROWS];
    for (int r = 0; r < ROWS; ++r) first_store[r] = count;
    for (int k = 0; k < count; ++k) {
        if (log[k] & 1) {
            const int r = row_of(log[k] - 1, (uintptr_t)b.y, elem);
            if (r >= 0 && k < first_store[r]) first_store[r] = k;
            continue;
        }
        prefetches++;
        outside += row_of(log[k], (uintptr_t)b.x, elem) < 0 &&
                   (!b.residual || row_of(log[k], (uintptr_t)b.residual, elem) < 0);
    }
    if (mode == 0) {
        CHECK(prefetches == 0, "%s %s: no prefetch (%d logged)", c->op, c->variant, prefetches);
        goto done;
    }
    if (nt)
        CHECK(first_store[0] < count, "%s %s: the stores of y are logged (the compiler is clang)",
              c->op, c->variant);
    CHECK(outside == 0, "%s %s: no prefetch outside the rows of x%s (%d were)", c->op, c->variant,
          b.residual ? " and the residual" : "", outside);
    check_rows(c, "x", (uintptr_t)b.x, elem, log, count, first_store, mode, nt);
    if (b.residual && strstr(c->variant, "rprefetch=1")) {
        check_rows(c, "the residual", (uintptr_t)b.residual, elem, log, count, first_store, mode,
                   nt);
    } else if (b.residual) {
        int of_residual = 0;
        for (int k = 0; k < count; ++k)
            of_residual += !(log[k] & 1) && row_of(log[k], (uintptr_t)b.residual, elem) >= 0;
        CHECK(of_residual == 0, "%s %s: no prefetch of the residual (%d were)", c->op, c->variant,
              of_residual);
    }
done:
    free(b.x);
    free(b.y);
    free(b.residual);
    free(b.residual_out);
    free(b.params);
    free(log);
}

int main(void) {
    static const prefetch_case cases[] = {
        {"layernorm", "vec=4,acc=4,stats=sampled,store=nt,prefetch=2", 0, 1, 0},
        {"layernorm", "vec=16,acc=2,stats=twopass,store=nt,prefetch=2", 0, 1, 0},
        {"layernorm", "vec=8,acc=1,stats=welford,store=nt,prefetch=2", 0, 1, 0},
        {"layernorm", "vec=8,acc=2,stats=onepass,store=nt,prefetch=2", 0, 1, 0},
        {"layernorm", "vec=1,acc=2,stats=sampled,prefetch=2", 0, 1, 0},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,layout=evenodd,prefetch=2", 1, 1, 0},
        {"rmsnorm", "vec=4,acc=4,stats=blocked,store=nt,prefetch=2", 0, 1, 0},
        {"rmsnorm", "vec=8,acc=2,stats=wide,store=nt,prefetch=2", 0, 1, 0},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=1", 0, 1, 0},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,prefetch=2,pdensity=8", 0, 1, 0},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,prefetch=1,pdensity=8", 0, 1, 0},
        {"rmsnorm", "vec=16,acc=4,stats=blocked,rows=2,store=nt,prefetch=1,pdensity=8", 0, 2, 0},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,prefetch=2,pdensity=1", 0, 1, 0},
        {"layernorm", "vec=16,acc=4,stats=sampled,rows=2,store=nt,prefetch=1,pdensity=1", 0, 2, 0},
        {"rmsnorm", "vec=16,acc=2,stats=blocked,store=nt,prefetch=1,pdensity=1,overlap=1", 0, 1, 0},
        {"layernorm", "vec=8,acc=2,stats=sampled,rows=2,store=nt,prefetch=1", 0, 2, 0},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=0", 0, 1, 0},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=2", 0, 1,
         LNTUNE_FUSION_RESIDUAL},
        {"layernorm", "vec=8,acc=2,stats=sampled,store=nt,prefetch=2,rprefetch=1", 0, 1,
         LNTUNE_FUSION_RESIDUAL},
        {"layernorm", "vec=16,acc=1,stats=twopass,store=nt,rstore=nt,prefetch=2,rprefetch=1", 0, 1,
         LNTUNE_FUSION_RESIDUAL_OUT},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,layout=evenodd,prefetch=2,rprefetch=1",
         1, 1, LNTUNE_FUSION_RESIDUAL_OUT},
        {"rmsnorm", "vec=4,acc=4,stats=wide,store=nt,prefetch=1,rprefetch=1", 0, 1,
         LNTUNE_FUSION_RESIDUAL},
        {"rmsnorm", "vec=8,acc=2,stats=blocked,rows=2,store=nt,prefetch=1,rprefetch=1", 0, 2,
         LNTUNE_FUSION_RESIDUAL_OUT},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,prefetch=1,overlap=1", 0, 1, 0},
        {"layernorm", "vec=8,acc=1,stats=sampled,store=nt,prefetch=1,pdensity=8,overlap=1", 0, 1,
         0},
        {"rmsnorm", "vec=16,acc=4,stats=blocked,store=nt,prefetch=1,overlap=1", 0, 1, 0},
        {"layernorm", "vec=16,acc=2,stats=sampled,store=nt,layout=evenodd,prefetch=1,overlap=1", 1,
         1, 0},
        {"layernorm",
         "vec=8,acc=2,stats=sampled,store=nt,rstore=nt,prefetch=1,rprefetch=1,overlap=1", 0, 1,
         LNTUNE_FUSION_RESIDUAL_OUT},
        {"rmsnorm", "vec=16,acc=2,stats=blocked,store=nt,prefetch=1,overlap=1", 0, 1,
         LNTUNE_FUSION_RESIDUAL},
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
