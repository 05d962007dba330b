/*
 * test_plan_fault.c - the planner (gen/tune/tuner.c) on a mock target whose timings the test
 * sets, for what a real machine cannot be made to do on demand:
 *  - a final run in which a finalist beats the copy of its bytes by more than
 *    LNTUNE_MAX_COPY_RATIO is a measurement fault: it is timed again, and the figures stored
 *    are those of the four runs that passed (the winner at or under the limit, in best and in the
 *    measurements);
 *  - three faulty final runs in a row fail the shape with a message saying so (naming the
 *    finalist), and store no winner; faults now and then are timed again until four pass;
 *  - the built-in variant the target names is re-timed with the finalists whatever the search
 *    made of it, and wins when it is the fastest there (tuned is never slower than built-in);
 *  - a fixed-H winner gets its h=runtime twin stored beside it when the twin beats the built-in
 *    side by side, and not when it does not; a winner stored before twins gets its twin from
 *    the next run, which tunes nothing again;
 *  - the kernel that serves other H (the winner, or its twin) has its reach measured beside the
 *    built-in and stored;
 *  - a run of two ops takes a second look at each choice after the other: a built-in that
 *    turned faster later replaces the winner, one within the margin does not, and a run of one
 *    op x shape takes no second look.
 */
#define _GNU_SOURCE
#include "check.h"
#include "hardware.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "target.h"
#include "tuner.h"
#include "tuning_db.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const variants_list[] = {"v=1", "v=2", "v=3", "v=4", "v=5", "v=6"};
/* A space with the h knob: v=1's twin is index 1, the built-in index 2. */
static const char *const h_list[] = {"v=1,h=fixed", "v=1,h=runtime", "v=2,h=runtime"};
enum { NV = sizeof variants_list / sizeof variants_list[0] };

typedef struct {
    const char *const *list; /* the space: variants_list or h_list */
    size_t n;
    int faulty_runs;         /* finalist runs that report a kernel 2x faster than the copy */
    unsigned faulty_mask;    /* and those whose bit is set (bit 0: the first finalist run) */
    size_t builtin;          /* the target's built-in index (NV: none) */
    double batch_ns[NV];     /* what a search batch sees */
    double final_ns[NV];     /* what a final run sees */
    double builtin_later_ns; /* > 0: the built-in's time once a winner was stored */
    int plain_stores;        /* its kernels keep their speed on rows of any alignment */
    int finals, finalist_runs, builtin_in_final, searches, stored;
    int64_t hw;
    int64_t reach;       /* > 0: time_at's kernel loses to the built-in past H x/÷ reach */
    size_t reach_kernel; /* the kernel time_at last timed */
    int reach_runs;      /* time_at's calls */
} mock;

static int64_t rows_for(int64_t H) {
    (void)H;
    return 8;
}

static int hardware(void *state, lntune_db *db, int64_t *hw, char *err, size_t errlen) {
    mock *m = state;
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    const int rc = lntune_db_put_hardware(db, &cpu, "mock compiler", hw);
    if (rc != LNTUNE_OK) snprintf(err, errlen, "%s", lntune_db_errmsg(db));
    m->hw = *hw;
    return rc;
}

static int code_hash(void *state, lntune_plan *p, char *out, size_t size) {
    (void)state, (void)p;
    snprintf(out, size, "mock-hash");
    return LNTUNE_OK;
}

static int variants(void *state, lntune_plan *p, const char *const **list, size_t *n, size_t *naive,
                    size_t *builtin) {
    mock *m = state;
    (void)p;
    *list = m->list;
    *n = m->n;
    *naive = m->n;
    *builtin = m->builtin;
    return LNTUNE_OK;
}

static int prepare(void *state, lntune_plan *p, double *bytes) {
    (void)state, (void)p;
    *bytes = 1e6;
    return LNTUNE_OK;
}

static void check(void *state, lntune_plan *p, const size_t *v, size_t n, lntune_outcome *out) {
    (void)state, (void)p, (void)v;
    for (size_t k = 0; k < n; ++k) out[k] = (lntune_outcome){.state = LNTUNE_OUTCOME_OK};
}

static void time_variants(void *state, lntune_plan *p, const size_t *v, size_t n,
                          lntune_time_mode mode, lntune_outcome *out, double *copy_ns) {
    mock *m = state;
    (void)p;
    const int finalists = mode == LNTUNE_TIME_FINAL && m->finals++ > 0;
    m->searches += mode == LNTUNE_TIME_BATCH;
    const int run = finalists ? m->finalist_runs++ : -1;
    const int faulty = finalists && (run < m->faulty_runs || ((m->faulty_mask >> run) & 1u));
    *copy_ns = 100.0;
    for (size_t k = 0; k < n; ++k) {
        double t = mode == LNTUNE_TIME_BATCH ? m->batch_ns[v[k]] : m->final_ns[v[k]];
        if (faulty) t = 50.0;
        if (m->stored && m->builtin_later_ns > 0 && v[k] == m->builtin) t = m->builtin_later_ns;
        if (finalists && v[k] == m->builtin) m->builtin_in_final = 1;
        out[k].state = LNTUNE_OUTCOME_OK;
        out[k].t.median_ns = out[k].t.score_ns = out[k].t.min_ns = out[k].t.max_ns = t;
    }
}

static int artifact(void *state, lntune_plan *p, size_t v, lntune_artifact *art,
                    lntune_kernel_traits *traits) {
    mock *m = state;
    (void)p;
    static const char bytes[] = "not code";
    static const char *const keys[] = {"mock-key-0", "mock-key-1", "mock-key-2",
                                       "mock-key-3", "mock-key-4", "mock-key-5"};
    *art = (lntune_artifact){keys[v],      "int x;", "mock compiler", "-O2", "k", bytes,
                             sizeof bytes, bytes,    sizeof bytes,    NULL,  NULL};
    *traits = (lntune_kernel_traits){1, strstr(m->list[v], "h=runtime") != NULL, m->plain_stores};
    m->stored++;
    return LNTUNE_OK;
}

/* The kernel 10% ahead of the built-in from H / reach to H x reach, 30% behind outside. */
static int time_at(void *state, lntune_plan *p, const size_t v[2], int64_t rows, int64_t H,
                   double *ratio) {
    mock *m = state;
    const int64_t tuned = lntune_plan_shape(p)->H;
    (void)rows;
    m->reach_kernel = v[0];
    m->reach_runs++;
    *ratio = m->reach <= 0 || (H * m->reach >= tuned && H <= tuned * m->reach) ? 0.9 : 1.3;
    return LNTUNE_OK;
}

static void end(void *state, lntune_plan *p) {
    (void)state, (void)p;
}

/* Not const: a case turns twins off to store a winner as an older lntune did. */
/* clang-format off */
static lntune_target mock_target = {"cpu", 16, 0, 1, 1, rows_for, hardware, code_hash, variants,
    prepare, check, time_variants, artifact, end, NULL, time_at};
/* clang-format on */

static int got_best(void *ud, const lntune_best *b) {
    lntune_best *got = ud;
    *got = *b;
    got->variant = strdup(b->variant);
    got->artifact_key = NULL;
    got->twin_variant = b->twin_variant ? strdup(b->twin_variant) : NULL;
    got->twin_artifact_key = b->twin_artifact_key ? "stored" : NULL; /* only whether there is one */
    return 0;
}

static void free_best(lntune_best *b) {
    free((char *)b->variant);
    free((char *)b->twin_variant);
}

/* Tunes layernorm 8x64 (then rmsnorm, with nops 2) with m into the database name under dir;
 * layernorm's result and the best stored for it, if any. */
static int tune_ops(const char *dir, const char *name, size_t nops, mock *m,
                    lntune_tune_result *res, char *err, size_t errlen, lntune_best *best) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.db", dir, name);
    m->finals = m->finalist_runs = m->builtin_in_final = m->searches = m->stored = 0;
    const char *ops[] = {"layernorm", "rmsnorm"};
    lntune_shape shape = {.H = 64, .rows = 8};
    lntune_tune_config cfg = {.db_path = path,
                              .ops = ops,
                              .nops = nops,
                              .shapes = &shape,
                              .nshapes = 1,
                              .rigor = LNTUNE_RIGOR_EXHAUSTIVE};
    lntune_tune_result *r = NULL;
    size_t nr = 0;
    err[0] = '\0';
    const int rc = lntune_plan_run(&cfg, &mock_target, m, &r, &nr, err, errlen);
    if (nr >= 1) *res = r[0];
    free(r);
    memset(best, 0, sizeof *best);
    lntune_db *db = NULL;
    if (lntune_db_open(path, LNTUNE_DB_READONLY, &db) == LNTUNE_OK) {
        lntune_db_key key = {m->hw, "cpu", "layernorm", "f32", 64, 8, 1};
        lntune_db_get_best(db, &key, got_best, best);
    }
    lntune_db_close(db);
    return rc;
}

static int tune(const char *dir, const char *name, mock *m, lntune_tune_result *res, char *err,
                size_t errlen, lntune_best *best) {
    return tune_ops(dir, name, 1, m, res, err, errlen, best);
}

static mock plain_mock(void) {
    mock m = {.list = variants_list, .n = NV, .builtin = NV};
    for (size_t i = 0; i < NV; ++i) m.batch_ns[i] = m.final_ns[i] = 110.0 + 10.0 * (double)i;
    return m;
}

int main(void) {
    char dir[512], err[1024];
    if (scratch_dir_make(dir, sizeof dir, "plan_fault") != 0) return 1;
    lntune_tune_result res;
    lntune_best best;

    mock m = plain_mock();
    m.faulty_runs = 1;
    int rc = tune(dir, "once", &m, &res, err, sizeof err, &best);
    /* four final runs are kept (tuner.c's FINAL_RUNS), the faulty one besides */
    CHECK(rc == LNTUNE_OK && m.finalist_runs == 5 && best.variant &&
              strcmp(best.variant, "v=1") == 0 && best.copy_gbps > 0 &&
              best.gbps / best.copy_gbps <= LNTUNE_MAX_COPY_RATIO,
          "one faulty final run is timed again: rc %d, %d finalist runs, best %s at %.2fx copy", rc,
          m.finalist_runs, best.variant ? best.variant : "(none)",
          best.copy_gbps > 0 ? best.gbps / best.copy_gbps : NAN);
    CHECK(fabs(res.median_ns - 110.0) < 1e-9 && res.copy_gbps > 0 &&
              res.gbps / res.copy_gbps <= LNTUNE_MAX_COPY_RATIO,
          "the result carries the passing run's figures: %.1f ns, %.2fx copy", res.median_ns,
          res.gbps / res.copy_gbps);
    free((char *)best.variant);

    m = plain_mock();
    m.faulty_runs = 3;
    rc = tune(dir, "always", &m, &res, err, sizeof err, &best);
    CHECK(rc != LNTUNE_OK && strstr(err, "measurement fault") && m.finalist_runs == 3 &&
              !best.variant,
          "three faulty final runs fail the shape, nothing stored as best: rc %d, %d runs, '%s'",
          rc, m.finalist_runs, err);
    CHECK(strstr(err, "v=") != NULL, "the message names the finalist that beat the copy: '%s'",
          err);

    m = plain_mock();
    m.faulty_mask = 0x1b; /* runs 1, 2, 4 and 5 faulty: never three in a row, then four pass */
    rc = tune(dir, "now-and-then", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && m.finalist_runs == 8 && best.variant,
          "faults now and then are timed again until four runs pass: rc %d, %d runs", rc,
          m.finalist_runs);
    free((char *)best.variant);

    /* The built-in (v=6) looked slow in the search's batches but is the fastest side by side. */
    m = plain_mock();
    m.builtin = 5;
    m.batch_ns[5] = 1000.0;
    m.final_ns[5] = 100.0;
    rc = tune(dir, "builtin", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && m.builtin_in_final && best.variant && strcmp(best.variant, "v=6") == 0,
          "the built-in is a finalist and wins when fastest: rc %d, in final %d, best %s", rc,
          m.builtin_in_final, best.variant ? best.variant : "(none)");
    CHECK(best.any_alignment == 0, "non-temporal stores are stored as such: any row alignment %d",
          best.any_alignment);
    free((char *)best.variant);

    /* v=1,h=fixed wins at 100 ns; its twin v=1,h=runtime takes 105, the built-in 120. */
    m = (mock){.list = h_list, .n = 3, .builtin = 2, .plain_stores = 1, .reach = 4};
    const double h_ns[] = {100.0, 105.0, 120.0};
    memcpy(m.batch_ns, h_ns, sizeof h_ns);
    memcpy(m.final_ns, h_ns, sizeof h_ns);
    rc = tune(dir, "twin", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && best.variant && strcmp(best.variant, "v=1,h=fixed") == 0 &&
              !best.any_h && best.twin_variant && best.twin_artifact_key &&
              strcmp(best.twin_variant, "v=1,h=runtime") == 0 && best.twin_median_ns == 105.0,
          "a fixed-H winner stores its twin: rc %d, best %s, twin %s at %.1f ns", rc,
          best.variant ? best.variant : "(none)", best.twin_variant ? best.twin_variant : "(none)",
          best.twin_median_ns);
    CHECK(best.any_alignment == 1,
          "the winner is stored as the target describes its code: "
          "any row alignment %d",
          best.any_alignment);
    /* 8x64: H=16 holds, 4 loses (reach 4), so the reach ends at 8; upwards 256 holds and 1024
     * has no whole row of the tuned bytes: no limit. */
    CHECK(m.reach_kernel == 1 && best.reach_lo == 8 && best.reach_hi == INT64_C(1) << 26 &&
              res.reach_lo == 8,
          "the twin's reach is measured beside the built-in and stored: kernel %zu, H %lld to "
          "%lld (%d runs)",
          m.reach_kernel, (long long)best.reach_lo, (long long)best.reach_hi, m.reach_runs);
    free_best(&best);

    m.final_ns[2] = 106.0; /* the twin within 2% of the built-in: declined */
    rc = tune(dir, "twin-slow", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && best.variant && strcmp(best.variant, "v=1,h=fixed") == 0 &&
              best.twin_variant && strcmp(best.twin_variant, "v=1,h=runtime") == 0 &&
              !best.twin_artifact_key,
          "a twin no faster than the built-in is declined, with no code: rc %d, best %s, twin %s "
          "%s",
          rc, best.variant ? best.variant : "(none)",
          best.twin_variant ? best.twin_variant : "(none)",
          best.twin_artifact_key ? "stored" : "declined");
    CHECK(best.reach_lo == 0 && best.reach_hi == 0,
          "a fixed-H winner without a twin has no reach: H %lld to %lld", (long long)best.reach_lo,
          (long long)best.reach_hi);
    free_best(&best);
    rc = tune(dir, "twin-slow", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && res.from_db && m.finals == 0 && best.twin_variant &&
              !best.twin_artifact_key,
          "a declined twin is not tried again: rc %d, from db %d, %d final runs", rc, res.from_db,
          m.finals);
    free_best(&best);

    m.final_ns[2] = 120.0;
    mock_target.twins = 0; /* a winner stored before twins */
    rc = tune(dir, "twin-later", &m, &res, err, sizeof err, &best);
    mock_target.twins = 1;
    CHECK(rc == LNTUNE_OK && best.variant && !best.twin_variant,
          "stored without twins: rc %d, twin %s", rc,
          best.twin_variant ? best.twin_variant : "(none)");
    free_best(&best);
    rc = tune(dir, "twin-later", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && res.from_db && m.searches == 0 && best.twin_variant &&
              best.twin_artifact_key && strcmp(best.twin_variant, "v=1,h=runtime") == 0,
          "the next run adds the twin and searches nothing: rc %d, from db %d, %d batches, twin "
          "%s",
          rc, res.from_db, m.searches, best.twin_variant ? best.twin_variant : "(none)");
    free_best(&best);

    /* v=1 wins at 110 ns beside the built-in (v=6) at 130; after it is stored, the built-in
     * takes 100 ns, the copy's time (faster would be a measurement fault). */
    m = plain_mock();
    m.builtin = 5;
    m.final_ns[5] = 130.0;
    m.builtin_later_ns = 100.0;
    rc = tune_ops(dir, "recheck", 2, &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && res.rechecked == 2 && strcmp(res.variant, "v=6") == 0 &&
              res.median_ns == 100.0 && best.variant && strcmp(best.variant, "v=6") == 0 &&
              best.median_ns == 100.0,
          "a built-in faster in two later looks replaces the winner: rc %d, rechecked %d, "
          "result %s, best %s at %.1f ns",
          rc, res.rechecked, res.variant, best.variant ? best.variant : "(none)", best.median_ns);
    free_best(&best);

    m = plain_mock();
    m.builtin = 5;
    m.final_ns[5] = 130.0;
    m.builtin_later_ns = 109.0; /* faster than the winner, but within the 2% margin */
    rc = tune_ops(dir, "recheck-margin", 2, &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && res.rechecked == 1 && best.variant &&
              strcmp(best.variant, "v=1") == 0 && best.median_ns == 110.0,
          "a later look within the margin keeps the winner and its figures: rc %d, rechecked %d, "
          "best %s at %.1f ns",
          rc, res.rechecked, best.variant ? best.variant : "(none)", best.median_ns);
    free_best(&best);

    m.builtin_later_ns = 100.0;
    rc = tune(dir, "recheck-one", &m, &res, err, sizeof err, &best);
    CHECK(rc == LNTUNE_OK && res.rechecked == 0 && best.variant && strcmp(best.variant, "v=1") == 0,
          "a run of one op x shape takes no second look: rc %d, rechecked %d, best %s", rc,
          res.rechecked, best.variant ? best.variant : "(none)");
    free_best(&best);

    scratch_dir_finish(dir, check_failures);
    return CHECK_SUMMARY();
}
