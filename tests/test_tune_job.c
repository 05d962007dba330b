/*
 * test_tune_job.c - the tune command's job (gen/tune/tune_job.c), which `lntune [tune]` prints.
 * Checks:
 *  - bad usage is refused with its message before anything is opened: no shape, an unknown
 *    target, op or rigor, H above 2^26, and buffers over half of the memory (memory_bytes),
 *    counted per element by direction and fusion; CUDA shapes are not held to the CPU's memory;
 *  - the ops (both, or --op's, in the direction asked), the rigor and the targets chosen, and
 *    the request's fields passed on to the tuner's configuration;
 *  - with no target a CUDA device that is not there is left out with a note; with a target
 *    nothing is probed;
 *  - a run with the test templates (tests/templates/tuner) picks the right variant and counts
 *    what it saved; a rerun reads it back; a stop flag set before the run leaves nothing done;
 *    a CUDA device that is not there fails the run with a message;
 *  - lntune_tune_stop_on_signals: SIGINT sets the flag and the process goes on;
 *  - the printed rows' fields (direction, time, ratios, shape, counts);
 *  - the job's progress: a run of two shapes reports each one's stages numbered 1 and 2 of 2,
 *    says once as each ends that it ended (with its variants and the job's time left), and
 *    nothing of a shape after both ended but second looks (the tuner's recheck, whose copy
 *    report once ended a run as an unlabelled "copy (0 variants so far)" line).
 *
 *   test_tune_job TEST_TEMPLATE_PATH (tests/templates/tuner:tests/templates/common)
 */
#define _GNU_SOURCE
#include "check.h"
#include "fusion.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "tune_job.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* job_init of req; 1 when refused with LNTUNE_EINVAL and want in the message. */
static int refused(const lntune_tune_request *req, const char *want) {
    lntune_tune_job job;
    char err[1024] = "";
    const int rc = lntune_tune_job_init(&job, req, err, sizeof err);
    printf("    %s\n", err);
    return rc == LNTUNE_EINVAL && strstr(err, want) != NULL;
}

static void check_usage(void) {
    lntune_shape h64 = {.rows = 64, .H = 64};
    lntune_tune_request q = {.shapes = &h64, .nshapes = 1};
    q.nshapes = 0;
    CHECK(refused(&q, "--shape is required"), "no shape");
    q.nshapes = 1, q.target = "tpu";
    CHECK(refused(&q, "unknown target 'tpu'"), "an unknown target");
    q.target = NULL, q.op = "rmsnorm_backward";
    CHECK(refused(&q, "unknown op 'rmsnorm_backward'"), "an op text, not an op name");
    q.op = NULL, q.rigor = "extreme";
    CHECK(refused(&q, "unknown rigor 'extreme'"), "an unknown rigor");
    q.rigor = NULL;
    lntune_shape huge = {.rows = 1, .H = (INT64_C(1) << 26) + 1};
    q.shapes = &huge;
    CHECK(refused(&q, "H above 2^26 is not tuned"), "H above 2^26");
    q.target = "cuda";
    lntune_tune_job job;
    char err[1024] = "";
    CHECK(lntune_tune_job_init(&job, &q, err, sizeof err) == LNTUNE_OK,
          "CUDA shapes are not held to the CPU's limits: %s", err);
    /* 1024 x 1024 elements: 8 MiB of x and y; 16 (24 with dresidual_out) for the backward */
    lntune_shape mi = {.rows = 1024, .H = 1024};
    q = (lntune_tune_request){.shapes = &mi, .nshapes = 1, .memory_bytes = 15 << 20};
    CHECK(refused(&q, "rows x H = 1024 x 1024 needs 0.0 GiB for its buffers, over half"),
          "8 MiB of buffers in 15 MiB of memory: refused");
    q.memory_bytes = 16 << 20;
    CHECK(lntune_tune_job_init(&job, &q, err, sizeof err) == LNTUNE_OK, "in 16 MiB, half: taken");
    mi.fusion = LNTUNE_FUSION_RESIDUAL;
    CHECK(refused(&q, "its buffers"), "residual read: 12 bytes an element, 12 MiB");
    q.memory_bytes = 32 << 20, q.backward = 1;
    CHECK(refused(&q, "for x, dy (, dresidual_out) and dx"), "the fused backward: 24 MiB of 32");
    mi.fusion = 0;
    CHECK(lntune_tune_job_init(&job, &q, err, sizeof err) == LNTUNE_OK,
          "the backward: 16 MiB of 32, taken");
    lntune_shape dflt = {.H = 4096}; /* rows 0: 2048, 64 MiB */
    q = (lntune_tune_request){.shapes = &dflt, .nshapes = 1, .memory_bytes = 127 << 20};
    CHECK(refused(&q, "2048 x 4096"), "rows 0 counts the default rows");
}

static void check_job(void) {
    lntune_shape s = {.rows = 16, .H = 64};
    int progress_ud;
    const volatile sig_atomic_t flag = 0;
    lntune_tune_request q = {"x.db", NULL, NULL, NULL,         &s,    1, 1,    3, 2,
                             1,      1,    NULL, &progress_ud, &flag, 0, NULL, 0};
    lntune_tune_job job;
    char err[1024] = "";
    int rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    CHECK(rc == LNTUNE_OK && job.cfg.nops == 2 && job.cfg.ops == job.ops &&
              strcmp(job.ops[0], "layernorm_backward") == 0 &&
              strcmp(job.ops[1], "rmsnorm_backward") == 0 && job.cfg.rigor == LNTUNE_RIGOR_MEASURE,
          "no op: both, in the direction asked, at rigor measure");
    CHECK(job.cpu && !job.cuda && job.find_cuda && job.device == 3,
          "no target: the CPU, and CUDA device 3 when found");
    CHECK(strcmp(job.cfg.db_path, "x.db") == 0 && job.cfg.shapes == &s && job.cfg.nshapes == 1 &&
              job.cfg.max_threads == 2 && job.cfg.retune && job.cfg.force &&
              job.progress_ud == &progress_ud && job.cfg.stop == &flag,
          "the request's fields reach the tuner's configuration");
    q.op = "rmsnorm", q.backward = 0, q.target = "cuda", q.rigor = "exhaustive";
    rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    CHECK(rc == LNTUNE_OK && job.cfg.nops == 1 && strcmp(job.ops[0], "rmsnorm") == 0 &&
              job.cfg.rigor == LNTUNE_RIGOR_EXHAUSTIVE && !job.cpu && job.cuda && !job.find_cuda,
          "--op rmsnorm --target cuda --rigor exhaustive");
    q.target = "cpu", q.rigor = "quick";
    rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    CHECK(rc == LNTUNE_OK && job.cpu && !job.cuda && job.cfg.rigor == LNTUNE_RIGOR_QUICK,
          "--target cpu --rigor quick");
    char note[1024] = "unset";
    lntune_tune_job_find_cuda(&job, note, sizeof note);
    CHECK(!job.cuda && note[0] == '\0', "a target given: nothing probed");
    q.target = NULL, q.device = 63;
    rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    lntune_tune_job_find_cuda(&job, note, sizeof note);
    CHECK(rc == LNTUNE_OK && job.cpu && !job.cuda &&
              (note[0] == '\0' ||
               (strstr(note, "no CUDA device to tune (") && strstr(note, "); tuning the CPU"))),
          "no device 63: the CPU alone; %s", note[0] ? note : "(a build without CUDA)");
}

static void check_run(const char *templates) {
    char dir[256], db[300], err[1024] = "";
    if (scratch_dir_make(dir, sizeof dir, "tune-job") != 0) return;
    snprintf(db, sizeof db, "%s/t.db", dir);
    setenv("LNTUNE_TEMPLATE_DIR", templates, 1);
    lntune_shape s = {.rows = 16, .H = 64};
    volatile sig_atomic_t flag = 0;
    lntune_tune_request q = {.db_path = db,
                             .op = "layernorm",
                             .target = "cpu",
                             .rigor = "exhaustive",
                             .shapes = &s,
                             .nshapes = 1,
                             .threads = 1,
                             .stop = &flag};
    lntune_tune_job job;
    lntune_tune_result *r = NULL;
    size_t n = 0;
    int saved = -1, missing = -1;
    int rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    lntune_tune_job copy = job; /* a job may be copied: its ops go with it */
    memset(&job, 0xff, sizeof job);
    if (rc == LNTUNE_OK) rc = lntune_tune_job_run(&copy, &r, &n, err, sizeof err);
    lntune_tune_results_count(r, n, &saved, &missing);
    CHECK(rc == LNTUNE_OK && n == 1 && strncmp(r[0].variant, "quality=right", 13) == 0 &&
              r[0].wrong == 1 && r[0].failed == 1 && saved >= 3 && missing == 0,
          "the test templates: %s, %d wrong, %d failed; %d saved, %d missing: %s",
          n ? r[0].variant : "-", n ? r[0].wrong : -1, n ? r[0].failed : -1, saved, missing, err);
    free(r);
    rc = lntune_tune_job_run(&copy, &r, &n, err, sizeof err);
    lntune_tune_results_count(r, n, &saved, &missing);
    CHECK(rc == LNTUNE_OK && n == 1 && r[0].from_db && saved == 0,
          "a rerun reads the winner back, saving nothing: rc %d", rc);
    free(r);
    flag = SIGINT, q.retune = 1;
    rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    if (rc == LNTUNE_OK) rc = lntune_tune_job_run(&job, &r, &n, err, sizeof err);
    lntune_tune_results_count(r, n, &saved, &missing);
    CHECK(rc == LNTUNE_OK && saved == 0, "stopped before it began: nothing saved (rc %d, %zu)", rc,
          n);
    free(r);
    flag = 0, q.target = "cuda", q.device = 63;
    rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    if (rc == LNTUNE_OK) rc = lntune_tune_job_run(&job, &r, &n, err, sizeof err);
    CHECK(rc != LNTUNE_OK && err[0] && n == 0, "CUDA device 63: rc %d, %s", rc, err);
    free(r);
    unsetenv("LNTUNE_TEMPLATE_DIR");
    scratch_dir_finish(dir, check_failures);
}

static void check_rows(void) {
    lntune_tune_result r = {.target = "cpu",
                            .op = "rmsnorm_backward+residual",
                            .dtype = "bf16",
                            .rows = 64,
                            .H = 96,
                            .variant = "vec=8",
                            .median_ns = 2000,
                            .gbps = 30,
                            .copy_gbps = 60,
                            .naive_ns = 5000,
                            .compiled = 7,
                            .cache_hits = 2,
                            .reused = 1,
                            .from_db = 1};
    lntune_tune_row w;
    lntune_tune_row_make(&r, &w);
    CHECK(strcmp(w.direction, "backward") == 0 && w.time_us == 2.0 && w.ratio_to_copy == 0.5 &&
              w.speedup_over_naive == 2.5 && strcmp(w.shape, "64x96 bf16") == 0 &&
              strcmp(w.counts, "7/2/1 (db)") == 0,
          "%s %.1f us %.2fx copy %.2fx naive '%s' '%s'", w.direction, w.time_us, w.ratio_to_copy,
          w.speedup_over_naive, w.shape, w.counts);
    r = (lntune_tune_result){.op = "layernorm+gelu", .dtype = "f32", .rows = 8, .H = 64};
    lntune_tune_row_make(&r, &w);
    CHECK(strcmp(w.direction, "?") == 0 && w.ratio_to_copy == 0 && w.speedup_over_naive == 0 &&
              strcmp(w.shape, "8x64") == 0 && strcmp(w.counts, "0/0/0") == 0,
          "no winner, no copy, f32, an op not known: %s, '%s', '%s'", w.direction, w.shape,
          w.counts);
    lntune_tune_result both[2] = {{.saved = 3, .variant = "vec=4"}, {.saved = 2}};
    int saved, missing;
    lntune_tune_results_count(both, 2, &saved, &missing);
    CHECK(saved == 5 && missing == 1, "saved %d, missing %d", saved, missing);
}

/* What a job reported: its events in order. */
typedef struct {
    int n, steps, done[4], ndone, after_done, looks, bad;
    size_t shapes;
} events;

static void collect(void *ud, const lntune_job_progress *j) {
    events *e = ud;
    e->n++;
    e->shapes = j->shapes;
    if (strcmp(j->target, "cpu") != 0 || j->shape < 1 || j->shape > j->shapes || j->job_s < 0 ||
        (j->p->done > 0 && (j->eta_s < 0 || j->job_eta_s < j->eta_s)) || j->p->done > j->p->total)
        e->bad++;
    if (j->event == LNTUNE_JOB_STEP) {
        e->steps++;
        if (e->ndone == 2) e->after_done++;
        if (e->ndone != (int)j->shape - 1) e->bad++; /* a step of shape k after k ended */
    } else if (j->event == LNTUNE_JOB_SHAPE_DONE) {
        if (e->ndone < 4) e->done[e->ndone] = (int)j->shape;
        e->ndone++;
        if (j->p->done == 0 || j->eta_s != 0 || j->job_eta_s < 0) e->bad++;
    } else {
        e->looks++;
        if (e->ndone != 2) e->bad++;
    }
}

static void check_progress(const char *templates) {
    char dir[256], db[300], err[1024] = "";
    if (scratch_dir_make(dir, sizeof dir, "tune-job-progress") != 0) return;
    snprintf(db, sizeof db, "%s/t.db", dir);
    setenv("LNTUNE_TEMPLATE_DIR", templates, 1);
    lntune_shape s[2] = {{.rows = 16, .H = 64}, {.rows = 16, .H = 32}};
    events e = {0};
    lntune_tune_request q = {.db_path = db,
                             .op = "layernorm",
                             .target = "cpu",
                             .rigor = "exhaustive",
                             .shapes = s,
                             .nshapes = 2,
                             .threads = 1,
                             .progress = collect,
                             .progress_ud = &e};
    lntune_tune_job job;
    lntune_tune_result *r = NULL;
    size_t n = 0;
    int rc = lntune_tune_job_init(&job, &q, err, sizeof err);
    if (rc == LNTUNE_OK) rc = lntune_tune_job_run(&job, &r, &n, err, sizeof err);
    free(r);
    CHECK(rc == LNTUNE_OK && e.shapes == 2 && e.steps > 2 && e.ndone == 2 && e.done[0] == 1 &&
              e.done[1] == 2 && e.after_done == 0 && e.bad == 0,
          "two shapes: %d steps, ended %d (%d, %d), %d steps after both ended, %d second looks, "
          "%d bad fields: %s",
          e.steps, e.ndone, e.done[0], e.done[1], e.after_done, e.looks, e.bad, err);
    unsetenv("LNTUNE_TEMPLATE_DIR");
    scratch_dir_finish(dir, check_failures);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_tune_job TEST_TEMPLATE_PATH\n");
        return 2;
    }
    check_usage();
    check_job();
    check_rows();
    const volatile sig_atomic_t *stop = lntune_tune_stop_on_signals();
    raise(SIGINT);
    CHECK(*stop == SIGINT, "SIGINT sets the stop flag (%d) and the process goes on", (int)*stop);
    check_run(argv[1]);
    check_progress(argv[1]);
    return CHECK_SUMMARY();
}
