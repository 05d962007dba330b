/*
 * lntune.c - the command line: the commands' table, argument parsing and help. Each command is a
 * function of the application layer (app/lntune_app.h), which checks what the options mean and
 * does the work; docs/cli.md shows this file's usage texts (tests/test_cli_docs.sh keeps them
 * alike).
 *
 * Exit codes: LNT_EXIT_* (lntune_app.h); docs/reliability.md says what each means.
 */
#include "lntune.h"
#include "lntune_app.h"
#include "suggest.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    lnt_app_options app;
    int help;
} options;

typedef struct {
    const char *name;
    int (*run)(const lnt_app_options *o, FILE *out, FILE *err);
    const char *usage;
    const char *takes; /* the options it takes besides --help, one space apart */
} command;

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "lntune: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'lntune --help'.\n");
    return LNT_EXIT_USAGE;
}

/* The options of every command: each one's kind and where its value goes. */
enum { FLAG, TEXT, NUMBER, LIST };
typedef struct {
    const char *name;
    int kind;
    size_t at;         /* offsetof(options, ...) */
    long lo, hi;       /* FLAG: the value set (lo); NUMBER: the range */
    const char *range; /* NUMBER: the message for a value outside it */
    size_t count;      /* LIST: offsetof its count */
} option_spec;

/* clang-format off */
#define OPT(n, k, f) {.name = n, .kind = k, .at = offsetof(options, f), .lo = 1}
#define APP(n, k, f) OPT(n, k, app.f)
#define SET(n, f, v) {.name = n, .kind = FLAG, .at = offsetof(options, app.f), .lo = v}
#define NUM(n, f, l, h, why)                                                                       \
    {.name = n, .kind = NUMBER, .at = offsetof(options, app.f), .lo = l, .hi = h, .range = why}
#define LST(n, f, c)                                                                               \
    {.name = n, .kind = LIST, .at = offsetof(options, app.f), .count = offsetof(options, app.c)}
static const option_spec option_specs[] = {
    OPT("--help", FLAG, help),       OPT("-h", FLAG, help),           APP("--retune", FLAG, retune),
    APP("--json", FLAG, json),       APP("--all", FLAG, all),         APP("--force", FLAG, force),
    APP("--cmake", FLAG, cmake),     APP("--backward", FLAG, backward), APP("--long", FLAG, long_rows),
    APP("--weight-offset", FLAG, weight_offset), APP("--generic-only", FLAG, generic_only),
    SET("--residual", residual, LNT_APP_RESIDUAL_OUT),
    SET("--residual=out", residual, LNT_APP_RESIDUAL_OUT),
    SET("--residual=noout", residual, LNT_APP_RESIDUAL_NOOUT),
    NUM("--sm", sm, 50, 200, "--sm needs a compute capability such as 80 or 90"),
    NUM("--device", device, 0, 64, "--device needs a CUDA device index from 0 to 64"),
    NUM("--threads", threads, 1, 4096, "--threads needs a whole number from 1 to 4096"),
    NUM("--seconds", seconds, 1, 3600, "--seconds needs a whole number from 1 to 3600"),
    APP("--op", TEXT, op),           APP("--db", TEXT, db),           APP("--out", TEXT, out_dir),
    APP("--gpu", TEXT, gpu),         APP("--rigor", TEXT, rigor),     APP("--target", TEXT, target),
    APP("--symbol", TEXT, symbol),   APP("--dtype", TEXT, dtype),     APP("--seed-from", TEXT, seed_from),
    APP("--max-wait", TEXT, max_wait),
    LST("--variant", variants, nvariants), LST("--shape", shapes, nshapes)};
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

/* An option that is not one: the nearest name when it looks like a typo of one. */
static int unknown_option(const char *a) {
    if (strncmp(a, "--residual", 10) == 0)
        return usage_error("unknown option '%s' (expected --residual, --residual=out or "
                           "--residual=noout)",
                           a);
    const char *near = cli_suggest(a, option_specs, sizeof option_specs / sizeof option_specs[0],
                                   sizeof option_specs[0]);
    char what[160];
    snprintf(what, sizeof what, "unknown option '%.80s'%s%.40s%s", a,
             near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    return usage_error("%s", what);
}

/* Parses the options of command c; returns 0 or an exit code (2 for one c does not take). */
static int parse_options(const command *c, int argc, char **argv, options *o) {
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i];
        const option_spec *s = find_option(a);
        if (!s) return unknown_option(a);
        if (!command_takes(c, a)) {
            char what[400];
            snprintf(what, sizeof what, "%s does not take %s (its options: %s)", c->name, a,
                     c->takes[0] ? c->takes : "none");
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
        } else {
            int *count = (int *)((char *)o + s->count);
            if (*count == LNT_APP_MAX_LIST) return usage_error("at most 16 %s", a);
            ((const char **)field)[(*count)++] = argv[++i];
        }
    }
    return 0;
}

static const command commands[] = {
    {"tune", lnt_app_tune,
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
     "  Progress goes to stderr: one line drawn again on a terminal, plain lines elsewhere\n"
     "  (variants done of the estimate, time left of the shape and of the job; a line as each\n"
     "  op and shape ends).\n"
     "  Exit: 0 ok, 1 failed, 2 bad usage, 3 database refused or unwritable, 130/143 signal.\n",
     "--shape --op --target --device --threads --rigor --db --dtype --residual --backward "
     "--weight-offset --retune --force --json --seed-from --max-wait"},
    {"show", lnt_app_show,
     "lntune show [--db PATH] [--all] [--long] [--json] [--op OP] [--target cpu|cuda]\n"
     "            [--shape H=N]\n"
     "  Lists the best variants stored for this machine and its GPUs (--all: for every\n"
     "  machine), under each machine's CPU or GPU model and fingerprint: op, type, shape, time,\n"
     "  GB/s, ratio to the copy of the same bytes with its spread over the final runs, the\n"
     "  copy's GB/s, a short variant id (--long: every knob). --op, --target and --shape (H, and\n"
     "  rows' bucket if given) keep those only.\n",
     "--db --all --long --json --force --op --target --shape"},
    {"variants", lnt_app_variants,
     "lntune variants --op layernorm|rmsnorm --target cpu|cuda [--sm N] [--shape H=N[,rows=N]]\n"
     "                [--dtype T] [--residual[=noout]] [--backward] [--weight-offset]\n"
     "  Lists every valid variant, one canonical parameter string a line.\n",
     "--op --target --sm --shape --dtype --residual --backward --weight-offset"},
    {"params", lnt_app_params,
     "lntune params --op layernorm|rmsnorm --target cpu|cuda [--sm N] [--backward]\n"
     "  Shows the parameter space: each knob, its values and what it does.\n",
     "--op --target --sm --backward"},
    {"emit", lnt_app_emit,
     "lntune emit --op OP --target cpu|cuda --variant STRING [--shape H=N] [--symbol NAME]\n"
     "            [--sm N] [--dtype T] [--residual[=noout]] [--backward] [--weight-offset]\n"
     "  Prints the generated source of one variant (--backward: of the gradients' kernel).\n"
     "  Parameters left out take their first value.\n"
     "  CUDA sources are for --sm (compute capability, default 90).\n",
     "--op --target --variant --shape --symbol --sm --dtype --residual --backward "
     "--weight-offset"},
    {"verify", lnt_app_verify,
     "lntune verify --op OP --target cpu --variant STRING [--shape H=N] [--dtype T] [--backward]\n"
     "              [--residual[=noout]] [--weight-offset]\n"
     "  Compiles one variant ($LNTUNE_CC, else clang-14, else clang, else cc) and runs it on the\n"
     "  adversarial suite against the float64 reference.\n",
     "--op --target --variant --shape --dtype --residual --backward --weight-offset"},
    {"time", lnt_app_time,
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
    {"doctor", lnt_app_doctor,
     "lntune doctor [--db PATH]\n"
     "  Checks what liblntune requires before it loads a tuned kernel from the database: that\n"
     "  it opens, that it and its folder belong to this user and nobody else may write them (as\n"
     "  ssh asks of its keys), that it holds results of this machine, that every artifact's\n"
     "  code hashes to the SHA-256 recorded when lntune stored it, and that every winner of\n"
     "  this machine has code to load (N winners, M loadable). Exit: 0 ok, 1 a problem.\n",
     "--db"},
    {"cache", lnt_app_cache,
     "lntune cache [clean] [--json]\n"
     "  The compiled objects a tune keeps, by the hash of their source and compiler, in\n"
     "  $XDG_CACHE_HOME/lntune/objects (else ~/.cache/lntune/objects): where, how many, how big;\n"
     "  clean removes them (a later tune compiles what it needs again). liblntune never reads\n"
     "  them: tuned code lives in the database.\n",
     "--json"},
    {"db", lnt_app_db,
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
    {"export", lnt_app_export,
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
    /* short: the first line of each command's synopsis; help COMMAND has the rest */
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i) {
        const char *u = commands[i].usage;
        fprintf(f, "  %.*s%s\n", (int)strcspn(u, "\n"), u, strchr(u, '[') ? " ..." : "");
    }
    fprintf(f, "\n'lntune help COMMAND' (or 'lntune COMMAND --help') describes one command and "
               "all its options;\n'lntune version' prints the version. Environment: LNTUNE_DB (the "
               "database),\nLNTUNE_LOG=debug (what liblntune decides), LNTUNE_NUM_THREADS "
               "(docs/cli.md).\n");
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
    return LNT_EXIT_USAGE;
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
        return help ? 0 : LNT_EXIT_USAGE;
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
        if (first < argc && argv[first][0] != '-') o.app.action = argv[first++];
        while (first < argc && (argv[first][0] != '-' || strcmp(argv[first], "-") == 0) &&
               o.app.nfiles < LNT_APP_MAX_FILES)
            o.app.files[o.app.nfiles++] = argv[first++];
    }
    int rc = parse_options(c, argc - first, argv + first, &o);
    if (rc == 0 && o.help) fputs(c->usage, stdout);
    return rc || o.help ? rc : c->run(&o.app, stdout, stderr);
}
