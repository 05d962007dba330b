/*
 * lntune.c - the command line: argument parsing and printing only. Every decision is made in
 * gen/ (generate, verify, tune) or runtime/ (dispatch).
 *
 * Exit codes: 0 on success, else the EXIT_* values below (EXIT_SIGNAL + N when signal N stopped
 * a run after it saved its work); docs/reliability.md says what each means.
 */
#include "best_list.h"
#include "export.h"
#include "fusion.h"
#include "gen_text.h"
#include "json_string.h"
#include "generator.h"
#include "lntune.h"
#include "object_cache.h"
#include "rebuild.h"
#include "shape.h"
#include "suggest.h"
#include "time_variants.h"
#include "tune_job.h"
#include "tuning_db.h"
#include "verify.h"
#include "verify_variant.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_DB = 3, EXIT_SIGNAL = 128 };

typedef struct {
    const char *op, *target, *symbol, *db, *rigor, *dtype;
    const char *out, *gpu;    /* export */
    int generic_only;         /* export --generic-only: no database read, on purpose */
    const char *variants[16]; /* every --variant: time takes several, other commands the first */
    int nvariants;
    lntune_shape *shapes;
    size_t nshapes;
    int help, retune, json, all, threads, force, cmake;
    int seconds;       /* time --seconds: the interleaved run's budget (0: the default) */
    int backward;      /* --backward: the gradients' ops (op text "<op>_backward") */
    int sm, device;    /* --sm (CUDA architecture of variants/params/emit), --device (CUDA index) */
    int fusion;        /* --residual: LNTUNE_FUSION_* (fusion.h) */
    int weight_offset; /* --weight-offset: y = norm(x) * (offset + gamma), keyed affine = 2 */
    lntune_shape kind; /* --dtype's types and the fusion, given to every shape (the_shape()) */
    const char *seed_from; /* tune --seed-from: another machine's wisdom or database */
    const char *max_wait;  /* tune --max-wait SECONDS; NULL: $LNTUNE_MAX_WAIT, else 30 */
    const char *action;    /* db: export, import or merge */
    const char *files[64]; /* db: its file arguments */
    int nfiles;
} options;

typedef struct {
    const char *name;
    int (*run)(options *o);    /* NULL: print_gen_text(o, text) */
    lntune_gen_text_kind text; /* variants, params, emit: what they print */
    const char *usage;
    const char *takes; /* the options it takes besides --help, one space apart */
} command;

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "lntune: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'lntune --help'.\n");
    return EXIT_USAGE;
}

/* The options of every command: each one's kind and where its value goes. */
enum { FLAG, TEXT, NUMBER, VARIANT, SHAPE };
typedef struct {
    const char *name;
    int kind;
    size_t at;         /* offsetof(options, ...) */
    long lo, hi;       /* FLAG: the value set (lo); NUMBER: the range */
    const char *range; /* NUMBER: the message for a value outside it */
} option_spec;

/* clang-format off */
#define OPT(n, k, f) {.name = n, .kind = k, .at = offsetof(options, f), .lo = 1}
#define SET(n, f, v) {.name = n, .kind = FLAG, .at = offsetof(options, f), .lo = v}
#define NUM(n, f, l, h, why)                                                                       \
    {.name = n, .kind = NUMBER, .at = offsetof(options, f), .lo = l, .hi = h, .range = why}
static const option_spec option_specs[] = {
    OPT("--help", FLAG, help),       OPT("-h", FLAG, help),           OPT("--retune", FLAG, retune),
    OPT("--json", FLAG, json),       OPT("--all", FLAG, all),         OPT("--force", FLAG, force),
    OPT("--cmake", FLAG, cmake),     OPT("--backward", FLAG, backward),
    OPT("--weight-offset", FLAG, weight_offset), OPT("--generic-only", FLAG, generic_only),
    SET("--residual", fusion, LNTUNE_FUSION_RESIDUAL_OUT),
    SET("--residual=out", fusion, LNTUNE_FUSION_RESIDUAL_OUT),
    SET("--residual=noout", fusion, LNTUNE_FUSION_RESIDUAL),
    NUM("--sm", sm, 50, 200, "--sm needs a compute capability such as 80 or 90"),
    NUM("--device", device, 0, 64, "--device needs a CUDA device index from 0 to 64"),
    NUM("--threads", threads, 1, 4096, "--threads needs a whole number from 1 to 4096"),
    NUM("--seconds", seconds, 1, 3600, "--seconds needs a whole number from 1 to 3600"),
    OPT("--op", TEXT, op),           OPT("--db", TEXT, db),           OPT("--out", TEXT, out),
    OPT("--gpu", TEXT, gpu),         OPT("--rigor", TEXT, rigor),     OPT("--target", TEXT, target),
    OPT("--symbol", TEXT, symbol),   OPT("--dtype", TEXT, dtype),     OPT("--seed-from", TEXT, seed_from),
    OPT("--max-wait", TEXT, max_wait),
    OPT("--variant", VARIANT, variants), OPT("--shape", SHAPE, shapes)};
/* clang-format on */

static const option_spec *find_option(const char *a) {
    for (size_t k = 0; k < sizeof option_specs / sizeof option_specs[0]; ++k)
        if (strcmp(a, option_specs[k].name) == 0) return &option_specs[k];
    return NULL;
}

/* 1 when c takes the option name (--residual=out: as --residual). */
static int command_takes(const command *c, const char *name) {
    const size_t n = strcspn(name, "=");
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) return 1;
    for (const char *p = c->takes; *p; p += strspn(p, " ")) {
        const size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p += len;
    }
    return 0;
}

/* Parses the options of command c; returns 0 or an exit code (2 for one c does not take). */
static int parse_options(const command *c, int argc, char **argv, options *o) {
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i];
        const option_spec *s = find_option(a);
        if (s && !command_takes(c, a)) {
            char what[400];
            snprintf(what, sizeof what, "%s does not take %s (its options: %s)", c->name, a,
                     c->takes[0] ? c->takes : "none");
            return usage_error("%s", what);
        }
        if (!s && strncmp(a, "--residual", 10) == 0)
            return usage_error("unknown option '%s' (expected --residual, --residual=out or "
                               "--residual=noout)",
                               a);
        if (!s) {
            const char *near =
                cli_suggest(a, option_specs, sizeof option_specs / sizeof option_specs[0],
                            sizeof option_specs[0]);
            char what[160];
            snprintf(what, sizeof what, "unknown option '%.80s'%s%.40s%s", a,
                     near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
            return usage_error("%s", what);
        }
        void *field = (char *)o + s->at;
        if (s->kind == FLAG) {
            *(int *)field = (int)s->lo;
        } else if (s->kind == NUMBER) {
            char *end = NULL; /* stays NULL when the value is missing */
            const long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (!end || *end || n < s->lo || n > s->hi) return usage_error("%s", s->range);
            *(int *)field = (int)n;
            ++i;
        } else if (i + 1 >= argc) {
            return usage_error("option '%s' needs a value", a);
        } else if (s->kind == TEXT) {
            *(const char **)field = argv[++i];
        } else if (s->kind == VARIANT) {
            if (o->nvariants == (int)(sizeof o->variants / sizeof o->variants[0]))
                return usage_error("%s", "at most 16 --variant");
            o->variants[o->nvariants++] = argv[++i];
        } else {
            char err[256];
            if (lntune_shape_parse(argv[++i], &o->shapes, &o->nshapes, err, sizeof err) !=
                LNTUNE_OK)
                return usage_error("%s", err);
        }
    }
    char err[1024];
    if (lntune_shape_kind(o->dtype, o->fusion, o->backward, &o->kind, err, sizeof err) != LNTUNE_OK)
        return usage_error("%s", err);
    if (o->weight_offset) {
        if (o->backward)
            return usage_error("%s", "--weight-offset is of the forward ops only (the backward "
                                     "takes the summed weights offset + gamma as its gamma)");
        o->kind.affine = LNTUNE_AFFINE_OFFSET;
    }
    for (size_t i = 0; i < o->nshapes; ++i) {
        o->shapes[i].types = o->kind.types;
        o->shapes[i].fusion = o->kind.fusion;
        o->shapes[i].affine = o->kind.affine;
    }
    return 0;
}

/* The op text of --op in the chosen direction ("rmsnorm_backward"), for a valid --op. */
static const char *op_text(const options *o, const char *op) {
    return lntune_op_text((lntune_op)lntune_op_parse(op), o->backward);
}

static int check_op_target(const options *o, int need_variant) {
    if (!o->op) return usage_error("%s", "--op is required (layernorm or rmsnorm)");
    if (lntune_op_parse(o->op) < 0)
        return usage_error("unknown op '%s' (expected layernorm or rmsnorm)", o->op);
    if (!o->target) return usage_error("%s", "--target is required (cpu or cuda)");
    if (strcmp(o->target, "cpu") != 0 && strcmp(o->target, "cuda") != 0)
        return usage_error("unknown target '%s' (expected cpu or cuda)", o->target);
    if (need_variant && !o->nvariants) return usage_error("%s", "--variant is required");
    if (o->nshapes > 1) return usage_error("%s", "give one shape");
    return 0;
}

static int db_exit_code(int rc) {
    return rc == LNTUNE_EDB ? EXIT_DB : EXIT_FAIL;
}

/* A failure of gen/'s: exit 2 for what the templates refuse, else 1. */
static int gen_exit_code(int rc) {
    return rc == LNTUNE_EINVAL || rc == LNTUNE_ENOTFOUND ? EXIT_USAGE : EXIT_FAIL;
}

static const lntune_shape *the_shape(const options *o) {
    return o->nshapes ? &o->shapes[0] : o->dtype || o->fusion || o->weight_offset ? &o->kind : NULL;
}

/* variants, params and emit: the generator's text for --op and --target. */
static int print_gen_text(options *o, lntune_gen_text_kind kind) {
    int rc = check_op_target(o, kind == LNTUNE_GEN_TEXT_SOURCE);
    if (rc) return rc;
    const lntune_gen_text_request req = {o->target,    op_text(o, o->op), o->sm,
                                         the_shape(o), o->variants[0],    o->symbol};
    char *text, err[1024] = "";
    rc = lntune_gen_text(kind, &req, &text, err, sizeof err);
    if (rc == LNTUNE_OK) fputs(text, stdout);
    if (rc != LNTUNE_OK) fprintf(stderr, "lntune: %s\n", err);
    free(text);
    return rc == LNTUNE_OK ? 0 : gen_exit_code(rc);
}

static int cmd_verify(options *o) {
    int rc = check_op_target(o, 1);
    if (rc) return rc;
    if (strcmp(o->target, "cuda") == 0)
        return usage_error("%s", "verify runs CPU variants here; CUDA variants are verified on "
                                 "the GPU by 'lntune --target cuda --shape ...'");
    lntune_verify_variant_result r;
    char err[1024] = "";
    rc =
        lntune_verify_variant(op_text(o, o->op), o->variants[0], the_shape(o), &r, err, sizeof err);
    if (rc == LNTUNE_OK)
        printf("ok: %s: %d cases, max error %.3g (tolerance %.3g) at %s\n", r.variant,
               r.check.cases, r.check.max_error, LNTUNE_VERIFY_TOLERANCE, r.check.worst);
    else if (rc == LNTUNE_EVERIFY)
        fprintf(stderr, "lntune: %s: %s\n", r.variant, r.check.message);
    else
        fprintf(stderr, "lntune: %s\n", err);
    return rc == LNTUNE_OK ? 0 : gen_exit_code(rc);
}

/*
 * lntune time: the given variants, each verified first, timed in one interleaved run together
 * with every copy variant, on the shape's rows x H; the figures of a tuning run, for variants
 * the user names (e.g. the winners of several runs, or measure's against exhaustive's).
 */
static int cmd_time(options *o) {
    int rc = check_op_target(o, 1);
    if (rc) return rc;
    if (strcmp(o->target, "cpu") != 0)
        return usage_error("%s", "time runs CPU variants (CUDA: lntune --target cuda)");
    if (!o->nshapes) return usage_error("%s", "--shape is required, e.g. --shape H=4096");
    const lntune_time_config c = {op_text(o, o->op), o->shapes[0], (const char *const *)o->variants,
                                  (size_t)o->nvariants, o->seconds};
    lntune_time_result r;
    char err[1024] = "";
    rc = lntune_time_variants(&c, &r, err, sizeof err);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: %s\n", err);
        return gen_exit_code(rc);
    }
    for (int i = 0; i < o->nvariants; ++i)
        if (r.v[i].wrong)
            fprintf(stderr, "lntune: %s is wrong, not timed: %s\n", o->variants[i], r.v[i].message);
    if (r.wrong) return EXIT_FAIL;
    printf("%s %lldx%lld, one interleaved run; the better copy (best of %zu copy variants): "
           "%.1f us, %.2f GB/s\n%10s %10s %8s %7s  %s\n",
           r.op_key, (long long)r.rows, (long long)c.shape.H, r.ncopy_variants, r.copy_ns * 1e-3,
           r.copy_gbps, "time", "score", "GB/s", "/copy", "variant");
    for (int i = 0; i < o->nvariants; ++i)
        printf("%8.1fus %8.1fus %8.2f %6.2fx  %s\n", r.v[i].median_ns * 1e-3,
               r.v[i].score_ns * 1e-3, r.v[i].gbps, r.v[i].ratio_to_copy, o->variants[i]);
    if (o->nvariants > 1)
        printf("spread: the slowest is %.1f%% slower than the fastest (score: %.1f%%)\n",
               r.spread * 100.0, r.score_spread * 100.0);
    return 0;
}

/* The progress bar on a terminal, one line per stage change elsewhere. */
static void show_progress(void *ud, const lntune_tune_progress *p) {
    lntune_tune_progress_state *s = ud;
    int filled;
    double eta;
    if (!lntune_tune_progress_shown(s, p, 30, &filled, &eta)) return;
    if (p->detail)
        fprintf(stderr, "%s%s H=%lld rows=%lld: %s: %s\n", s->tty ? "\n" : "", p->op,
                (long long)p->H, (long long)p->rows, p->stage, p->detail);
    else if (s->tty)
        fprintf(stderr, "\r%-9s H=%-6lld rows=%-7lld [%.*s%*s] %3zu/%-3zu %-7s %4.0fs ETA %3.0fs ",
                p->op, (long long)p->H, (long long)p->rows, filled,
                "##############################", 30 - filled, "", p->done, p->total, p->stage,
                p->elapsed_s, eta);
    else
        fprintf(stderr, "%s H=%lld rows=%lld: %s (%zu variants so far, %.0f s)\n", p->op,
                (long long)p->H, (long long)p->rows, p->stage, p->done, p->elapsed_s);
    fflush(stderr);
}

static void print_results(const lntune_tune_result *r, size_t n, int json) {
    if (json) printf("[");
    for (size_t i = 0; i < n; ++i) {
        lntune_tune_row w;
        lntune_tune_row_make(&r[i], &w);
        if (json) {
            printf("%s\n {\"target\": \"%s\", \"op\": \"%s\", \"direction\": \"%s\", \"dtype\": "
                   "\"%s\", \"rows\": %lld, \"H\": %lld, \"variant\": \"%s\", \"time_us\": %.3f, "
                   "\"gbps\": %.3f, \"copy_gbps\": %.3f, \"ratio_to_copy\": %.3f, "
                   "\"speedup_over_naive\": %.3f, \"max_error\": %.3g, \"compiled\": %d, "
                   "\"cache_hits\": %d, \"reused\": %d, \"wrong\": %d, \"failed\": %d, "
                   "\"from_db\": %s, \"rebuilt\": %s, \"seeds\": %d, \"rechecked\": %d, "
                   "\"ratio_lo\": %.3f, \"ratio_hi\": %.3f, \"under_load\": %s%s%s, "
                   "\"reach_lo\": %lld, \"reach_hi\": %lld, \"why\": \"%s\"}",
                   i ? "," : "", r[i].target, r[i].op, w.direction, r[i].dtype,
                   (long long)r[i].rows, (long long)r[i].H, r[i].variant, w.time_us, r[i].gbps,
                   r[i].copy_gbps, w.ratio_to_copy, w.speedup_over_naive, r[i].max_error,
                   r[i].compiled, r[i].cache_hits, r[i].reused, r[i].wrong, r[i].failed,
                   r[i].from_db ? "true" : "false", r[i].rebuilt ? "true" : "false", r[i].seeds,
                   r[i].rechecked, r[i].ratio_lo, r[i].ratio_hi, r[i].under_load[0] ? "\"" : "",
                   r[i].under_load[0] ? r[i].under_load : "null", r[i].under_load[0] ? "\"" : "",
                   (long long)r[i].reach_lo, (long long)r[i].reach_hi, r[i].why);
            continue;
        }
        if (i == 0 || strcmp(r[i].target, r[i - 1].target) != 0)
            printf("%s%-4s %-18s %-16s %10s %8s %7s %8s  %-22s %s\n", i ? "\n" : "", "", "op",
                   "shape", "time", "GB/s", "/copy", "/naive", "compiled/cached/reused",
                   "best variant");
        if (!r[i].variant[0]) {
            printf("%-4s %-18s %-16s no correct variant (%d wrong, %d failed)\n", r[i].target,
                   r[i].op, w.shape, r[i].wrong, r[i].failed);
            continue;
        }
        printf("%-4s %-18s %-16s %8.1fus %8.2f %6.2fx %7.2fx  %-22s %s\n", r[i].target, r[i].op,
               w.shape, w.time_us, r[i].gbps, w.ratio_to_copy, w.speedup_over_naive, w.counts,
               r[i].variant);
        if (r[i].wrong || r[i].failed)
            printf("%-4s %-18s %-16s %d variants wrong, %d failed (kept in the database)\n", "", "",
                   "", r[i].wrong, r[i].failed);
        if (r[i].rechecked == 2)
            printf("%-4s %-18s %-16s the built-in beat the chosen kernel in two later looks: "
                   "stored instead\n",
                   "", "", "");
        if (r[i].under_load[0])
            printf("%-4s %-18s %-16s measured under load (the next tune measures it again): %s\n",
                   "", "", "", r[i].under_load);
    }
    if (json) printf("\n]\n");
}

/* Says so when liblntune will not load the kernels just stored (db_trust.c). */
static void warn_untrusted(const char *db) {
    char why[600];
    if (lntune_db_code_trusted(db, why, sizeof why) != LNTUNE_OK)
        fprintf(stderr,
                "lntune: warning: liblntune will load no tuned kernel from this database: %s "
                "(keep it in a folder only you can write: lntune doctor)\n",
                why);
}

static int cmd_tune(options *o) {
    lntune_tune_progress_state progress = {isatty(2), ""};
    /* SIGINT, SIGTERM: the tuner saves what it has done and stops */
    const volatile sig_atomic_t *stop = lntune_tune_stop_on_signals();
    const char *wait = o->max_wait ? o->max_wait : getenv("LNTUNE_MAX_WAIT");
    char *end = NULL;
    const double max_wait = wait ? strtod(wait, &end) : 30.0;
    if (wait && (end == wait || *end || !(max_wait >= 0 && max_wait <= 3600)))
        return usage_error("%s", "--max-wait (or LNTUNE_MAX_WAIT) needs seconds from 0 to 3600");
    const lntune_tune_request req = {o->db,        o->op,         o->target, o->rigor,   o->shapes,
                                     o->nshapes,   o->backward,   o->device, o->threads, o->retune,
                                     o->force,     show_progress, &progress, stop,       0,
                                     o->seed_from, max_wait};
    lntune_tune_job job;
    char err[1024] = "";
    if (lntune_tune_job_init(&job, &req, err, sizeof err) != LNTUNE_OK)
        return usage_error("%s", err);
    if (job.note[0]) fprintf(stderr, "lntune: warning: %s\n", job.note);
    if (lntune_tune_job_seed(&job, &req, err, sizeof err) != LNTUNE_OK) {
        fprintf(stderr, "lntune: %s\n", err);
        lntune_tune_job_end(&job);
        return EXIT_FAIL;
    }
    lntune_tune_job_find_cuda(&job, err, sizeof err);
    if (err[0]) fprintf(stderr, "lntune: %s\n", err);
    lntune_tune_result *r = NULL;
    size_t n = 0;
    int rc = lntune_tune_job_run(&job, &r, &n, err, sizeof err), saved, missing;
    lntune_tune_job_end(&job);
    const int sig = *stop;
    if (progress.tty) fprintf(stderr, "\r%*s\r", 110, "");
    lntune_tune_results_count(r, n, &saved, &missing);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: %s\n", err);
        if (n)
            fprintf(stderr, "lntune: %d measurements of this run were saved before it stopped\n",
                    saved);
    } else if (sig) {
        fprintf(stderr,
                "lntune: stopped by %s: %d measurements of this run saved in %s; the same "
                "command resumes from them\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM", saved,
                o->db ? o->db : "the default database");
    } else {
        print_results(r, n, o->json);
        warn_untrusted(o->db);
    }
    free(r);
    return rc != LNTUNE_OK ? db_exit_code(rc) : sig ? EXIT_SIGNAL + sig : missing ? EXIT_FAIL : 0;
}

/* show --op, --target, --shape: whether b is a row asked for (--op: of either direction and
 * any fusion; --shape: its H, and its rows' bucket when rows are given). */
static int show_keeps(const options *o, const lntune_best_row *b) {
    const size_t n = o->op ? strlen(o->op) : 0;
    if (o->target && strcmp(b->target, o->target) != 0) return 0;
    if (o->op && (strncmp(b->op, o->op, n) != 0 || !strchr("_+", b->op[n]))) return 0;
    for (size_t i = 0; i < o->nshapes; ++i)
        if (o->shapes[i].H == b->H &&
            (!o->shapes[i].rows ||
             lntune_rows_bucket(o->shapes[i].rows) == lntune_rows_bucket(b->rows)))
            return 1;
    return !o->nshapes;
}

static int cmd_show(options *o) {
    if (o->force) return usage_error("%s", "--force applies to tuning; show never writes");
    if (o->op && lntune_op_parse(o->op) < 0)
        return usage_error("unknown op '%s' (expected layernorm or rmsnorm)", o->op);
    if (o->target && strcmp(o->target, "cpu") != 0 && strcmp(o->target, "cuda") != 0)
        return usage_error("unknown target '%s' (expected cpu or cuda)", o->target);
    lntune_best_list l;
    char err[1024] = "";
    int rc = lntune_best_list_read(o->db, o->all, &l, err, sizeof err);
    if (!l.opened) {
        fprintf(stderr, "lntune: %s\n", err);
        return db_exit_code(rc);
    }
    if (!o->all && !l.machines) {
        if (!o->json)
            printf("no tuning results for this machine (%s) in %s\n", l.fingerprint, l.db_path);
        else
            printf("[]\n");
        lntune_best_list_free(&l);
        return 0;
    }
    if (!o->json)
        printf("%-4s %-4s %-18s %-4s %-14s %11s %7s %7s %6s %-11s  %s\n", "hw", "tgt", "op", "type",
               "shape", "time", "GB/s", "copy", "/copy", "spread", "variant");
    else
        printf("[");
    size_t shown = 0;
    for (size_t i = 0; i < l.n; ++i) {
        const lntune_best_row *b = &l.rows[i];
        if (!show_keeps(o, b)) continue;
        if (o->json)
            printf("%s\n {\"hardware_id\": %lld, \"target\": \"%s\", \"op\": \"%s\", "
                   "\"direction\": \"%s\", \"dtype\": \"%s\", \"H\": %lld, \"rows\": %lld, "
                   "\"affine\": %d, \"variant\": \"%s\", \"threads\": %d, \"time_us\": %.3f, "
                   "\"gbps\": %.3f, \"copy_gbps\": %.3f, \"ratio_lo\": %.3f, \"ratio_hi\": %.3f, "
                   "\"under_load\": %s%s%s, \"reach_lo\": %lld, \"reach_hi\": %lld, "
                   "\"max_error\": %.3g",
                   shown ? "," : "", (long long)b->hardware_id, b->target, b->op, b->direction,
                   b->dtype, (long long)b->H, (long long)b->rows, b->affine, b->variant, b->threads,
                   b->time_us, b->gbps, b->copy_gbps, b->ratio_lo, b->ratio_hi,
                   b->under_load ? "\"" : "", b->under_load ? b->under_load : "null",
                   b->under_load ? "\"" : "", (long long)b->reach_lo, (long long)b->reach_hi,
                   b->max_error);
        else {
            char spread[24] = "-";
            if (b->ratio_lo > 0)
                snprintf(spread, sizeof spread, "%.2f-%.2f%s", b->ratio_lo, b->ratio_hi,
                         b->under_load ? "*" : "");
            printf("%-4lld %-4s %-18s %-4s %-14s %9.1fus %7.2f %7.2f %5.2fx %-11s  %s",
                   (long long)b->hardware_id, b->target, b->op, b->dtype, b->shape, b->time_us,
                   b->gbps, b->copy_gbps, b->ratio_to_copy, spread, b->variant);
        }
        /* The kernel that serves other H in a fixed-H winner's place (untuned shapes). */
        if (o->json && b->twin_variant)
            printf(", \"twin_variant\": \"%s\", \"twin_time_us\": %.3f}", b->twin_variant,
                   b->twin_time_us);
        else if (o->json)
            printf("}");
        else if (b->twin_variant)
            printf("  (other H: %s, %.1fus)\n", b->twin_variant, b->twin_time_us);
        else
            printf("\n");
        if (!o->json && b->under_load) printf("     * measured under load: %s\n", b->under_load);
        shown++;
    }
    if (o->json) printf("\n]\n");
    if (!o->json && !shown && l.n) printf("(no winner matches --op, --target or --shape)\n");
    if (rc != LNTUNE_OK) fprintf(stderr, "lntune: %s\n", err);
    lntune_best_list_free(&l);
    return rc == LNTUNE_OK ? 0 : db_exit_code(rc);
}

static int cmd_export(options *o) {
    if (!o->out) return usage_error("%s", "--out DIR is required");
    if (o->generic_only && (o->db || o->gpu))
        return usage_error("%s", "--generic-only reads no database: drop --db and --gpu");
    lntune_export_config c = {o->out, o->db, o->cmake, stderr, o->gpu, o->generic_only};
    lntune_export_report r;
    int rc = lntune_export(&c, &r);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: export: %s\n", r.message[0] ? r.message : lntune_errstr(rc));
        return rc == LNTUNE_EINVAL ? EXIT_USAGE : db_exit_code(rc);
    }
    printf("wrote %s/lntune_kernels.c and lntune_kernels.h%s: %d tuned kernel(s) of machine %s%s,"
           " plus the generic kernels\n",
           o->out, o->cmake ? " and CMakeLists.txt" : "", r.tuned, r.fingerprint,
           r.skipped ? " (winners left out: see the warnings)" : "");
    if (r.cuda_written)
        printf("wrote %s/lntune_kernels.cu and lntune_kernels_cuda.h: %d tuned CUDA kernel(s) of "
               "%d GPU(s)%s, plus the generic CUDA kernels\n",
               o->out, r.cuda_tuned, r.cuda_gpus,
               r.cuda_skipped ? " (winners left out: see the warnings)" : "");
    return 0;
}

static int cmd_doctor(options *o) {
    lntune_db_health h;
    const int rc = lntune_db_doctor(o->db, &h);
    printf("database: %s\n", h.path);
    if (!h.opened) {
        printf("problem: liblntune cannot open it: %s\n", h.open_error);
        return EXIT_FAIL;
    }
    int problems = 0;
    if (h.trusted) {
        printf("ok: it and its folder are this user's and nobody else may write them\n");
    } else {
        printf("problem: liblntune loads no code from it: %s\n", h.why);
        problems++;
    }
    if (h.machine_known)
        printf("ok: it holds results of this machine (%s)\n", h.fingerprint);
    else
        printf("note: it holds no results of this machine (%s): every CPU shape runs a built-in\n",
               h.fingerprint);
    if (rc != LNTUNE_OK) {
        printf("problem: reading its artifacts: %s\n", h.open_error);
        return EXIT_FAIL;
    }
    if (h.intact == h.artifacts) {
        printf("ok: all %lld artifact(s) hash to the digest recorded when lntune stored them\n",
               h.artifacts);
    } else {
        printf("problem: %lld of %lld artifact(s) are not loaded (altered, or stored without a "
               "digest); the first: %s\n",
               h.artifacts - h.intact, h.artifacts, h.first_altered);
        problems++;
    }
    printf("%s: %lld winner(s) of this machine, %lld loadable%s%s\n",
           h.loadable == h.winners ? "ok" : "problem", h.winners, h.loadable,
           h.first_unloadable[0] ? "; the first that is not: " : "", h.first_unloadable);
    if (h.loadable != h.winners) {
        printf("  (liblntune runs a built-in kernel there; lntune --shape of it tunes it again)\n");
        problems++;
    }
    return problems ? EXIT_FAIL : 0;
}

/* After db import or merge: this CPU's winners in db get their code compiled and verified here
 * (rebuild.h), since wisdom carries none. */
static int rebuild_imported(const options *o, const char *db) {
    lntune_rebuild_report r;
    char err[1024] = "";
    const int rc = lntune_rebuild_imported(db, o->threads, &r, err, sizeof err);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: db %s: the records are in, building their code failed: %s\n",
                o->action, err);
        return rc;
    }
    if (r.considered > 0)
        printf("this machine: %d winner(s) compiled and verified here from the local templates, "
               "%d stale (measured by another template or toolchain), %d not valid or wrong here"
               "%s%s%s\n",
               r.rebuilt, r.stale, r.failed, r.first_stale[0] ? " (first: " : "", r.first_stale,
               r.first_stale[0] ? "; lntune --shape tunes it again)" : "");
    if (r.other > 0)
        printf("%d GPU winner(s) without code: lntune --target cuda --shape ... builds them on "
               "the device\n",
               r.other);
    return LNTUNE_OK;
}

/* lntune db export|import|merge: wisdom files (core/tuning_db/db_wisdom.c). */
static int cmd_db(options *o) {
    const char *a = o->action ? o->action : "";
    const int export = strcmp(a, "export") == 0, import = strcmp(a, "import") == 0,
              merge = strcmp(a, "merge") == 0;
    if (!export && !import && !merge)
        return usage_error("lntune db: '%s' is not export, import or merge", a);
    if ((export || import) && o->nfiles != 1) return usage_error("lntune db %s takes one FILE", a);
    if (merge && o->nfiles < 2)
        return usage_error("%s", "lntune db merge takes OUT.db and at least one database to merge");
    if (merge && o->db) return usage_error("%s", "lntune db merge writes OUT.db: drop --db");
    if (export && o->threads)
        return usage_error("%s", "lntune db export builds no code: drop --threads");
    lntune_db *db = NULL;
    const char *path = merge ? o->files[0] : o->db;
    /* A database this import or merge creates is removed again when it fails (item 11 of issue
     * 57: an empty file was left behind). */
    char file[4096] = "";
    if (path)
        snprintf(file, sizeof file, "%s", path);
    else if (lntune_db_default_path(file, sizeof file) != LNTUNE_OK)
        file[0] = '\0';
    const int created = !export && file[0] && access(file, F_OK) != 0;
    int rc = lntune_db_open(path, export ? LNTUNE_DB_READONLY : 0, &db);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: %s\n", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
        lntune_db_close(db);
        return db_exit_code(rc);
    }
    if (export) {
        const int to_stdout = strcmp(o->files[0], "-") == 0;
        FILE *f = to_stdout ? stdout : fopen(o->files[0], "w");
        int machines = 0;
        rc = f ? lntune_db_wisdom_export(db, f, &machines) : LNTUNE_EIO;
        if (f && !to_stdout && fclose(f) != 0) rc = LNTUNE_EIO;
        if (rc == LNTUNE_OK)
            fprintf(stderr, "lntune: %d machine(s) of %s written to %s (no machine code)\n",
                    machines, lntune_db_path(db), o->files[0]);
        else
            fprintf(stderr, "lntune: db export: %s\n",
                    f ? lntune_db_errmsg(db) : "cannot open the output file");
    }
    for (int i = merge ? 1 : 0; i < o->nfiles && (import || merge) && rc == LNTUNE_OK; ++i) {
        lntune_wisdom_report r;
        FILE *f = merge ? NULL : fopen(o->files[i], "r");
        if (import && !f) {
            fprintf(stderr, "lntune: cannot read %s\n", o->files[i]);
            rc = LNTUNE_EIO;
            break;
        }
        rc = merge ? lntune_db_wisdom_merge(db, o->files[i], &r)
                   : lntune_db_wisdom_import(db, f, &r);
        if (f) fclose(f);
        if (rc != LNTUNE_OK) {
            fprintf(stderr, "lntune: db %s %s: %s (nothing of it imported)\n", a, o->files[i],
                    lntune_db_errmsg(db));
            break;
        }
        printf("%s: %ld machine(s) (%ld new), %ld measurement(s), %ld winner(s), %ld crossover(s) "
               "added or updated%s\n",
               o->files[i], r.machines, r.machines_new, r.measurements, r.best, r.crossovers,
               r.ignored ? "; records of unknown kinds ignored" : "");
    }
    lntune_db_close(db);
    if (created && rc != LNTUNE_OK) {
        static const char *const suffixes[] = {"", "-wal", "-shm"};
        for (int k = 0; k < 3; ++k) {
            char p[4200];
            snprintf(p, sizeof p, "%s%s", file, suffixes[k]);
            unlink(p);
        }
        fprintf(stderr, "lntune: %s removed (this command created it)\n", file);
    }
    if ((import || merge) && rc == LNTUNE_OK) rc = rebuild_imported(o, path);
    return rc == LNTUNE_OK ? 0 : db_exit_code(rc);
}

/* lntune cache [clean]: the JIT's object cache (object_cache.h). */
static int cmd_cache(options *o) {
    const char *a = o->action ? o->action : "";
    const int clean = strcmp(a, "clean") == 0;
    if (*a && !clean) return usage_error("lntune cache: '%s' is not clean", a);
    if (o->nfiles) return usage_error("lntune cache takes no FILE: '%s'", o->files[0]);
    char dir[4096];
    if (lntune_object_cache_dir(dir, sizeof dir) != LNTUNE_OK) {
        fprintf(stderr, "lntune: no object cache: neither XDG_CACHE_HOME nor HOME is set\n");
        return EXIT_FAIL;
    }
    lntune_object_cache_stats st;
    const int rc = lntune_object_cache_scan(dir, clean, &st);
    if (o->json) {
        printf("{\"dir\": ");
        lntune_json_string(stdout, dir);
        printf(", \"%s\": %ld, \"bytes\": %lld}\n", clean ? "removed" : "objects", st.files,
               st.bytes);
    } else
        printf("%s %s: %ld compiled object(s), %.1f MB%s\n", clean ? "removed from" : "objects in",
               dir, st.files, (double)st.bytes / 1e6,
               clean ? ""
                     : " (lntune cache clean removes them; a tune compiles what it needs again)");
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: cache: cannot %s %s\n", clean ? "empty" : "read", dir);
        return EXIT_FAIL;
    }
    return 0;
}

static const command commands[] = {
    {"tune", cmd_tune, 0,
     "lntune [tune] --shape H=N[,M...][,rows=R] [--shape ...] [--op OP] [--target cpu|cuda]\n"
     "              [--device N] [--threads N] [--rigor quick|measure|exhaustive] [--db PATH]\n"
     "              [--dtype T] [--residual[=noout]] [--backward] [--weight-offset] [--retune]\n"
     "              [--force] [--json] [--seed-from FILE] [--max-wait SECONDS]\n"
     "  Tunes LayerNorm and RMSNorm (or --op) fp32 for each shape: generates, compiles, verifies\n"
     "  and times the variants, and stores every result in the database ($LNTUNE_DB, else\n"
     "  ~/.cache/lntune/tune.db). The target is every device found (the CPU, and CUDA device\n"
     "  --device, default 0, when one is usable), or --target. rows defaults to 8Mi/H on the\n"
     "  CPU (H=4096: 2048 rows) and 16384 on a GPU. --backward tunes the gradients (dx, dgamma,\n"
     "  dbeta; dtype x or x/x/params: dx and dy have x's type); with --residual,\n"
     "  of the fused Add & Norm: dx = the norm's gradient + dresidual_out (the gradient at\n"
     "  residual_out; op text \"layernorm_backward+residual\"). --weight-offset tunes calls\n"
     "  with lntune_args.weight_offset (Gemma: y = norm(x) * (offset + gamma); forward;\n"
     "  op text \"rmsnorm+offset\"). A second run\n"
     "  reuses every measurement; --retune measures again. A database lntune refuses (corrupt,\n"
     "  not SQLite, another application's, newer) is never touched; --force moves it to\n"
     "  PATH.bak and starts a new one. Ctrl-C keeps every measurement taken; rerun to resume.\n"
     "  --max-wait SECONDS: while other processes hold a core during a final timing run, wait\n"
     "  up to this long per op and shape for quiet and time it again (default 30, or\n"
     "  $LNTUNE_MAX_WAIT); past it the winner is stored marked as measured under load.\n"
     "  --seed-from FILE: another machine's results (lntune db export's wisdom, or a tuning\n"
     "  database) give a head start: the search starts from its fastest variants of each op\n"
     "  and shape and sweeps each knob once from there, instead of the rigor's search.\n"
     "  A stored winner without its code (imported wisdom) is compiled and verified here.\n"
     "  Exit: 0 ok, 1 failed, 2 bad usage, 3 database refused or unwritable, 130/143 signal.\n",
     "--shape --op --target --device --threads --rigor --db --dtype --residual --backward "
     "--weight-offset --retune --force --json --seed-from --max-wait"},
    {"show", cmd_show, 0,
     "lntune show [--db PATH] [--all] [--json] [--op OP] [--target cpu|cuda] [--shape H=N]\n"
     "  Lists the best variants stored for this machine and its GPUs (--all: for every\n"
     "  machine); --op, --target and --shape (H, and rows' bucket if given) keep those only.\n",
     "--db --all --json --force --op --target --shape"},
    {"variants", NULL, LNTUNE_GEN_TEXT_VARIANTS,
     "lntune variants --op layernorm|rmsnorm --target cpu|cuda [--sm N] [--shape H=N[,rows=N]]\n"
     "                [--dtype T] [--residual[=noout]] [--backward] [--weight-offset]\n"
     "  Lists every valid variant, one canonical parameter string a line.\n",
     "--op --target --sm --shape --dtype --residual --backward --weight-offset"},
    {"params", NULL, LNTUNE_GEN_TEXT_PARAMS,
     "lntune params --op layernorm|rmsnorm --target cpu|cuda [--sm N] [--backward]\n"
     "  Shows the parameter space: each knob, its values and what it does.\n",
     "--op --target --sm --backward"},
    {"emit", NULL, LNTUNE_GEN_TEXT_SOURCE,
     "lntune emit --op OP --target cpu|cuda --variant STRING [--shape H=N] [--symbol NAME]\n"
     "            [--sm N] [--dtype T] [--residual[=noout]] [--backward] [--weight-offset]\n"
     "  Prints the generated source of one variant (--backward: of the gradients' kernel).\n"
     "  Parameters left out take their first value.\n"
     "  CUDA sources are for --sm (compute capability, default 90).\n",
     "--op --target --variant --shape --symbol --sm --dtype --residual --backward "
     "--weight-offset"},
    {"verify", cmd_verify, 0,
     "lntune verify --op OP --target cpu --variant STRING [--shape H=N] [--dtype T] [--backward]\n"
     "              [--residual[=noout]] [--weight-offset]\n"
     "  Compiles one variant ($LNTUNE_CC, else clang-14, else cc) and runs it on the\n"
     "  adversarial suite against the float64 reference.\n",
     "--op --target --variant --shape --dtype --residual --backward --weight-offset"},
    {"time", cmd_time, 0,
     "lntune time --op OP --target cpu --shape [rows=R,]H=N --variant V [--variant V ...]\n"
     "            [--dtype T] [--residual[=noout]] [--backward] [--weight-offset] [--seconds N]\n"
     "  Verifies the variants (up to 16), then times them in one interleaved run with the three\n"
     "  fastest of every copy variant (timed alone first) on rows x H (rows default as for tune):\n"
     "  time, score, GB/s, ratio to the better copy. The run lasts about N seconds (default 3, at\n"
     "  least 15 rounds). Each time is the median of the per-round ratios to the fastest copy,\n"
     "  times that copy's median, which cancels the drift of a shared machine's bandwidth; the\n"
     "  score is the mean of their middle 80% on that scale, by which the tuner chooses.\n"
     "  Bytes: x read and y written; backward: x and dy (--residual: and dresidual_out) read, dx\n"
     "  written (gamma, the statistics and the dgamma/dbeta partials do not grow with rows x H\n"
     "  and are left out).\n",
     "--op --target --shape --variant --dtype --residual --backward --weight-offset --seconds"},
    {"doctor", cmd_doctor, 0,
     "lntune doctor [--db PATH]\n"
     "  Checks what liblntune requires before it loads a tuned kernel from the database: that\n"
     "  it opens, that it and its folder belong to this user and nobody else may write them (as\n"
     "  ssh asks of its keys), that it holds results of this machine, that every artifact's\n"
     "  code hashes to the SHA-256 recorded when lntune stored it, and that every winner of\n"
     "  this machine has code to load (N winners, M loadable). Exit: 0 ok, 1 a problem.\n",
     "--db"},
    {"cache", cmd_cache, 0,
     "lntune cache [clean] [--json]\n"
     "  The compiled objects a tune keeps, by the hash of their source and compiler, in\n"
     "  $XDG_CACHE_HOME/lntune/objects (else ~/.cache/lntune/objects): where, how many, how big;\n"
     "  clean removes them (a later tune compiles what it needs again). liblntune never reads\n"
     "  them: tuned code lives in the database.\n",
     "--json"},
    {"db", cmd_db, 0,
     "lntune db export FILE|- [--db PATH] | db import FILE [--db PATH] [--threads N]\n"
     "          | db merge OUT.db DB... [--threads N]\n"
     "  Tuning wisdom between machines: export writes every machine's measurements, winners\n"
     "  and crossovers as JSON lines (never machine code); import merges such a file into the\n"
     "  database in one transaction (a record replaces one with the same key only when newer;\n"
     "  importing twice changes nothing), then compiles and verifies here the winners it holds\n"
     "  for this machine (stale ones, of other templates, are left to tune again); merge imports\n"
     "  each database DB into OUT.db, every machine's records kept apart by fingerprint, and\n"
     "  builds this machine's winners as import does.\n",
     "--db --threads"},
    {"export", cmd_export, 0,
     "lntune export --out DIR [--db PATH] [--cmake] [--gpu FINGERPRINT] [--generic-only]\n"
     "  Writes DIR/lntune_kernels.c and .h: this machine's tuned kernels of every dtype\n"
     "  tuple, a dispatch table, the generic kernels and a small thread pool, as plain C\n"
     "  (libc, libm, pthreads). Rows of ops it does not know are left out with a warning.\n"
     "  A database missing, refused or without results of this machine fails (exit 1, 3);\n"
     "  --generic-only reads none and writes the generic kernels alone.\n"
     "  When the database holds CUDA winners, also DIR/lntune_kernels.cu and\n"
     "  lntune_kernels_cuda.h (nvcc, CUDA runtime): every GPU's forward winners of every\n"
     "  dtype tuple and fusion, or --gpu's only, with generic kernels for all-fp32 and for\n"
     "  each tuple and fusion a winner has, and generic backward kernels for them.\n"
     "  --cmake also writes a CMakeLists.txt for add_subdirectory (a CUDA target where\n"
     "  CMake finds a CUDA compiler).\n",
     "--out --db --cmake --gpu --generic-only"},
};

static void print_help(FILE *f) {
    fprintf(f,
            "lntune %s - LayerNorm/RMSNorm kernel generator and autotuner\n\n"
            "Example: lntune --shape H=4096   (tunes both ops for hidden size 4096; then: lntune "
            "show)\n\nCommands:\n",
            lntune_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        fprintf(f, "  %s", commands[i].usage);
    fprintf(f, "\n'lntune help COMMAND' (or 'lntune COMMAND --help') describes one command; "
               "'lntune version' prints the version.\n");
}

static const command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
    return NULL;
}

/* An unknown command, with the nearest name when it looks like a typo of one. */
static int unknown_command(const char *word) {
    static const char *const others[] = {"help", "version"};
    const char *near =
        cli_suggest(word, commands, sizeof commands / sizeof commands[0], sizeof commands[0]);
    if (!near) near = cli_suggest(word, others, 2, sizeof others[0]);
    fprintf(stderr, "lntune: unknown command '%s'", word);
    if (near) fprintf(stderr, " (did you mean '%s'?)", near);
    fprintf(stderr, "\nTry 'lntune help'.\n");
    return EXIT_USAGE;
}

/* lntune help [COMMAND]. */
static int cmd_help(int argc, char **argv) {
    if (argc > 1) return usage_error("%s", "lntune help takes one COMMAND at most");
    const command *c = argc ? find_command(argv[0]) : NULL;
    if (argc && !c) return unknown_command(argv[0]);
    if (c)
        fputs(c->usage, stdout);
    else
        print_help(stdout);
    return 0;
}

int main(int argc, char **argv) {
    const int help = argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    if (argc < 2 || help) {
        print_help(help ? stdout : stderr);
        return help ? 0 : EXIT_USAGE;
    }
    if (strcmp(argv[1], "help") == 0) return cmd_help(argc - 2, argv + 2);
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        if (argc > 2) return usage_error("%s", "lntune version takes nothing more");
        printf("lntune %s\n", lntune_version());
        return 0;
    }
    /* "lntune --shape H=4096" is "lntune tune --shape H=4096". */
    int first = argv[1][0] == '-' ? 1 : 2;
    const char *name = first == 1 ? "tune" : argv[1];
    const command *c = find_command(name);
    if (!c) return unknown_command(argv[1]);
    options o = {0};
    /* "lntune db ACTION FILE... [options]": the words before the first option ("-" is a FILE:
     * stdout). */
    if (strcmp(name, "db") == 0 || strcmp(name, "cache") == 0) {
        if (first < argc && argv[first][0] != '-') o.action = argv[first++];
        while (first < argc && (argv[first][0] != '-' || strcmp(argv[first], "-") == 0) &&
               o.nfiles < 64)
            o.files[o.nfiles++] = argv[first++];
    }
    int rc = parse_options(c, argc - first, argv + first, &o);
    if (rc == 0 && o.help)
        fputs(c->usage, stdout);
    else if (rc == 0)
        rc = c->run ? c->run(&o) : print_gen_text(&o, c->text);
    free(o.shapes);
    return rc;
}
