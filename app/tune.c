/*
 * tune.c - `lntune [tune]`: the tuning job (tune_job.h) run with its progress on err, then its
 * results as a table or JSON on out.
 *
 * Progress: on a terminal one line drawn again (the op x shape's bar, variants done of the
 * estimate, time left of it and of the whole job); elsewhere a plain line when the stage changes
 * or a while passed. Both print a summary line as each op x shape ends, and a line for each
 * second look the tuner takes at a winner after the others were tuned.
 */
#include "app_internal.h"

#include "lntune.h"
#include "tune_job.h"
#include "tuning_db.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BAR = 24, LOG_EVERY_S = 15 };

typedef struct {
    FILE *err;
    int tty;
    int drawn;      /* a bar is on the terminal's line */
    char last[128]; /* off a terminal: the op x shape and stage of the last line */
    double last_s;  /* and when it was printed (the job's seconds) */
} progress_printer;

static void clear_bar(progress_printer *pp) {
    if (pp->drawn) fprintf(pp->err, "\r%*s\r", 110, "");
    pp->drawn = 0;
}

/* Seconds, or "-" while not known (< 0). */
static const char *left(double s, char *buf, size_t size) {
    return s < 0 ? "-" : app_duration(s, buf, size);
}

/* Off a terminal: a line as an op x shape starts and at each later phase of it (a wait for quiet
 * among them), and every LOG_EVERY_S seconds of one (the search's compile, verify and time
 * alternate by the batch, a wait reports every second). */
static int log_line(progress_printer *pp, const lntune_job_progress *j, const char *what) {
    static const char *const phases[] = {"retime", "final", "wait", "twin", "reach", "rebuild"};
    const char *phase = "search";
    for (size_t k = 0; k < sizeof phases / sizeof phases[0]; ++k)
        if (strcmp(j->p->stage, phases[k]) == 0) phase = phases[k];
    char now[128];
    snprintf(now, sizeof now, "%s %s", what, phase);
    const int same_shape = strncmp(now, pp->last, strlen(what)) == 0;
    if (same_shape && (strcmp(phase, "search") == 0 || strcmp(now, pp->last) == 0) &&
        j->job_s - pp->last_s < LOG_EVERY_S)
        return 0;
    if (!same_shape || strcmp(phase, "search") != 0) snprintf(pp->last, sizeof pp->last, "%s", now);
    pp->last_s = j->job_s;
    return 1;
}

static void show_progress(void *ud, const lntune_job_progress *j) {
    progress_printer *pp = ud;
    const lntune_tune_progress *p = j->p;
    char what[96], job[64], a[32], b[32];
    snprintf(what, sizeof what, "[%zu/%zu] %s %s H=%lld rows=%lld", j->shape, j->shapes, j->target,
             p->op, (long long)p->H, (long long)p->rows);
    snprintf(job, sizeof job, "job: %s, ETA %s", app_duration(j->job_s, a, sizeof a),
             left(j->job_eta_s, b, sizeof b));
    if (j->event == LNTUNE_JOB_SECOND_LOOK) {
        clear_bar(pp);
        fprintf(pp->err, "%s: second look, its winner against the built-in again (job: %s)\n", what,
                app_duration(j->job_s, a, sizeof a));
    } else if (j->event == LNTUNE_JOB_SHAPE_DONE) {
        clear_bar(pp);
        fprintf(pp->err, "%s: done, %zu variants in %s; %s\n", what, p->done,
                app_duration(p->elapsed_s, a, sizeof a), job);
    } else if (p->detail && pp->tty) { /* a wait, with why */
        fprintf(pp->err, "\r%s: %s: %-60.60s ", what, p->stage, p->detail);
        pp->drawn = 1;
    } else if (p->detail) {
        if (log_line(pp, j, what)) fprintf(pp->err, "%s: %s: %s\n", what, p->stage, p->detail);
    } else if (pp->tty) {
        const int filled = p->total ? (int)(BAR * p->done / p->total) : 0;
        fprintf(pp->err, "\r%s [%.*s%*s] %zu/%zu %-7s %s, ETA %s; %s ", what, filled,
                "########################", BAR - filled, "", p->done, p->total, p->stage,
                app_duration(p->elapsed_s, a, sizeof a), left(j->eta_s, b, sizeof b), job);
        pp->drawn = 1;
    } else if (log_line(pp, j, what)) {
        fprintf(pp->err, "%s: %s, %zu/%zu variants, %s, ETA %s; %s\n", what, p->stage, p->done,
                p->total, app_duration(p->elapsed_s, a, sizeof a), left(j->eta_s, b, sizeof b),
                job);
    }
    fflush(pp->err);
}

static void print_json_result(FILE *out, const lntune_tune_result *r, const lntune_tune_row *w) {
    fprintf(out, "{");
    app_json_field(out, "target", r->target, 1);
    app_json_field(out, "op", r->op, 0);
    app_json_field(out, "direction", w->direction, 0);
    app_json_field(out, "dtype", r->dtype, 0);
    fprintf(out, ", \"rows\": %lld, \"H\": %lld", (long long)r->rows, (long long)r->H);
    app_json_field(out, "variant", r->variant, 0);
    static const char *const keys[] = {"time_us", "gbps", "copy_gbps", "ratio_to_copy",
                                       "speedup_over_naive"};
    const double v[] = {w->time_us, r->gbps, r->copy_gbps, w->ratio_to_copy, w->speedup_over_naive};
    for (int k = 0; k < 5; ++k) {
        fprintf(out, ", \"%s\": ", keys[k]);
        app_json_number(out, "%.3f", v[k]);
    }
    fprintf(out, ", \"max_error\": ");
    app_json_number(out, "%.3g", r->max_error);
    fprintf(out,
            ", \"compiled\": %d, \"cache_hits\": %d, \"reused\": %d, \"wrong\": %d, \"failed\": "
            "%d, \"from_db\": %s, \"rebuilt\": %s, \"seeds\": %d, \"rechecked\": %d",
            r->compiled, r->cache_hits, r->reused, r->wrong, r->failed,
            r->from_db ? "true" : "false", r->rebuilt ? "true" : "false", r->seeds, r->rechecked);
    fprintf(out, ", \"ratio_lo\": ");
    app_json_number(out, "%.3f", r->ratio_lo);
    fprintf(out, ", \"ratio_hi\": ");
    app_json_number(out, "%.3f", r->ratio_hi);
    app_json_field(out, "under_load", r->under_load[0] ? r->under_load : NULL, 0);
    fprintf(out, ", \"reach_lo\": %lld, \"reach_hi\": %lld", (long long)r->reach_lo,
            (long long)r->reach_hi);
    app_json_field(out, "why", r->why, 0);
    fprintf(out, "}");
}

static void print_row(FILE *out, const lntune_tune_result *r, const lntune_tune_row *w) {
    if (!r->variant[0]) {
        fprintf(out, "%-4s %-18s %-16s no correct variant (%d wrong, %d failed)\n", r->target,
                r->op, w->shape, r->wrong, r->failed);
        return;
    }
    fprintf(out, "%-4s %-18s %-16s %8.1fus %8.2f %6.2fx %7.2fx  %-22s %s\n", r->target, r->op,
            w->shape, w->time_us, r->gbps, w->ratio_to_copy, w->speedup_over_naive, w->counts,
            r->variant);
    if (r->wrong || r->failed)
        fprintf(out, "%-40s %d variants wrong, %d failed (kept in the database)\n", "", r->wrong,
                r->failed);
    if (r->rechecked == 2)
        fprintf(out,
                "%-40s the built-in beat the chosen kernel in two later looks: stored instead\n",
                "");
    if (r->under_load[0])
        fprintf(out, "%-40s measured under load (the next tune measures it again): %s\n", "",
                r->under_load);
}

void lnt_app_print_tune_results(FILE *out, const lntune_tune_result *r, size_t n, int json) {
    if (json) fprintf(out, "[");
    for (size_t i = 0; i < n; ++i) {
        lntune_tune_row w;
        lntune_tune_row_make(&r[i], &w);
        if (json) {
            fprintf(out, "%s\n ", i ? "," : "");
            print_json_result(out, &r[i], &w);
            continue;
        }
        if (i == 0 || strcmp(r[i].target, r[i - 1].target) != 0)
            fprintf(out, "%s%-4s %-18s %-16s %10s %8s %7s %8s  %-22s %s\n", i ? "\n" : "", "", "op",
                    "shape", "time", "GB/s", "/copy", "/naive", "compiled/cached/reused",
                    "best variant");
        print_row(out, &r[i], &w);
    }
    if (json) fprintf(out, "\n]\n");
}

/* Says so when liblntune will not load the kernels just stored (db_trust.c). */
static void warn_untrusted(const char *db, FILE *err) {
    char why[600];
    if (lntune_db_code_trusted(db, why, sizeof why) != LNTUNE_OK)
        fprintf(err,
                "lntune: warning: liblntune will load no tuned kernel from this database: %s "
                "(keep it in a folder only you can write: lntune doctor)\n",
                why);
}

/* After the run: what it stopped on, or its results; the exit code. */
static int finish(const lnt_app_options *o, int rc, int sig, const char *msg,
                  const lntune_tune_result *r, size_t n, FILE *out, FILE *err) {
    int saved, missing;
    lntune_tune_results_count(r, n, &saved, &missing);
    if (rc != LNTUNE_OK) {
        fprintf(err, "lntune: %s\n", msg);
        if (n)
            fprintf(err, "lntune: %d measurements of this run were saved before it stopped\n",
                    saved);
        return app_db_exit(rc);
    }
    if (sig) {
        fprintf(err,
                "lntune: stopped by %s: %d measurements of this run saved in %s; the same "
                "command resumes from them\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM", saved,
                o->db ? o->db : "the default database");
        return LNT_EXIT_SIGNAL + sig;
    }
    lnt_app_print_tune_results(out, r, n, o->json);
    warn_untrusted(o->db, err);
    return missing ? LNT_EXIT_FAIL : LNT_EXIT_OK;
}

int lnt_app_tune(const lnt_app_options *o, FILE *out, FILE *err) {
    app_shapes s;
    int rc = app_shapes_parse(o, err, &s);
    if (rc) return rc;
    const char *wait = o->max_wait ? o->max_wait : getenv("LNTUNE_MAX_WAIT");
    char *end = NULL;
    const double max_wait = wait ? strtod(wait, &end) : 30.0;
    if (wait && (end == wait || *end || !(max_wait >= 0 && max_wait <= 3600))) {
        app_shapes_free(&s);
        return app_usage(err, "%s", "--max-wait (or LNTUNE_MAX_WAIT) needs seconds from 0 to 3600");
    }
    progress_printer pp = {err, isatty(fileno(err)), 0, "", 0};
    /* SIGINT, SIGTERM: the tuner saves what it has done and stops */
    const volatile sig_atomic_t *stop = lntune_tune_stop_on_signals();
    const lntune_tune_request req = {o->db,        o->op,         o->target, o->rigor,   s.shapes,
                                     s.n,          o->backward,   o->device, o->threads, o->retune,
                                     o->force,     show_progress, &pp,       stop,       0,
                                     o->seed_from, max_wait};
    lntune_tune_job job;
    char msg[1024] = "";
    if (lntune_tune_job_init(&job, &req, msg, sizeof msg) != LNTUNE_OK) {
        app_shapes_free(&s);
        return app_usage(err, "%s", msg);
    }
    if (job.note[0]) fprintf(err, "lntune: warning: %s\n", job.note);
    if (lntune_tune_job_seed(&job, &req, msg, sizeof msg) != LNTUNE_OK) {
        fprintf(err, "lntune: %s\n", msg);
        lntune_tune_job_end(&job);
        app_shapes_free(&s);
        return LNT_EXIT_FAIL;
    }
    lntune_tune_job_find_cuda(&job, msg, sizeof msg);
    if (msg[0]) fprintf(err, "lntune: %s\n", msg);
    lntune_tune_result *r = NULL;
    size_t n = 0;
    rc = lntune_tune_job_run(&job, &r, &n, msg, sizeof msg);
    lntune_tune_job_end(&job);
    clear_bar(&pp);
    const int code = finish(o, rc, *stop, msg, r, n, out, err);
    free(r);
    app_shapes_free(&s);
    return code;
}
