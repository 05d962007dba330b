/*
 * lntune.c - the command line: argument parsing and printing only. Every decision is made in
 * gen/ (generate, verify, tune) or runtime/ (dispatch).
 *
 * Exit codes: 0 success, 1 a failure while working (a compile error, a wrong kernel, I/O),
 * 2 bad usage (unknown command, option, op, target, parameter or value).
 */
#include "build.h"
#include "export.h"
#include "generator.h"
#include "lntune.h"
#include "reference.h"
#include "shape.h"
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

typedef struct {
    const char *op, *target, *variant, *symbol;
    const char *out, *db; /* export */
    lntune_shape *shapes;
    size_t nshapes;
    int help;
    int cmake; /* export --cmake */
} options;

typedef struct {
    const char *name;
    int (*run)(options *o);
    const char *usage;
} command;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "lntune: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'lntune --help'.\n");
    return EXIT_USAGE;
}

/* Parses the options shared by every command; returns 0 or an exit code. */
static int parse_options(int argc, char **argv, options *o)
{
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            o->help = 1;
            continue;
        }
        if (strcmp(a, "--cmake") == 0) {
            o->cmake = 1;
            continue;
        }
        if (strcmp(a, "--op") == 0) slot = &o->op;
        else if (strcmp(a, "--target") == 0) slot = &o->target;
        else if (strcmp(a, "--variant") == 0) slot = &o->variant;
        else if (strcmp(a, "--symbol") == 0) slot = &o->symbol;
        else if (strcmp(a, "--out") == 0) slot = &o->out;
        else if (strcmp(a, "--db") == 0) slot = &o->db;
        else if (strcmp(a, "--shape") != 0) return usage_error("unknown option '%s'", a);
        if (i + 1 >= argc) return usage_error("option '%s' needs a value", a);
        const char *value = argv[++i];
        if (slot) {
            *slot = value;
            continue;
        }
        char err[256];
        int rc = lntune_shape_parse(value, &o->shapes, &o->nshapes, err, sizeof err);
        if (rc != LNTUNE_OK) return usage_error("%s", err);
    }
    return 0;
}

static int check_op_target(const options *o, int need_variant)
{
    if (!o->op) return usage_error("%s", "--op is required (layernorm or rmsnorm)");
    if (lntune_op_parse(o->op) < 0)
        return usage_error("unknown op '%s' (expected layernorm or rmsnorm)", o->op);
    if (!o->target) return usage_error("%s", "--target is required (cpu)");
    if (strcmp(o->target, "cpu") != 0) return usage_error("unknown target '%s' (expected cpu)", o->target);
    if (need_variant && !o->variant) return usage_error("%s", "--variant is required");
    if (o->nshapes > 1) return usage_error("%s", "give one shape");
    return 0;
}

/* Opens the generator; prints its message on failure. */
static lntune_gen *open_gen(void)
{
    lntune_gen *g = NULL;
    int rc = lntune_gen_open(NULL, &g);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: %s\n", g ? lntune_gen_errmsg(g) : lntune_errstr(rc));
        lntune_gen_close(g);
        return NULL;
    }
    return g;
}

static int gen_failure(lntune_gen *g, int rc)
{
    fprintf(stderr, "lntune: %s\n", lntune_gen_errmsg(g));
    lntune_gen_close(g);
    return rc == LNTUNE_EINVAL || rc == LNTUNE_ENOTFOUND ? EXIT_USAGE : EXIT_FAIL;
}

static const lntune_shape *the_shape(const options *o)
{
    return o->nshapes ? &o->shapes[0] : NULL;
}

static int cmd_variants(options *o)
{
    int rc = check_op_target(o, 0);
    if (rc) return rc;
    lntune_gen *g = open_gen();
    if (!g) return EXIT_FAIL;
    char **list;
    size_t n;
    if ((rc = lntune_gen_variants(g, o->target, o->op, the_shape(o), &list, &n)) != LNTUNE_OK)
        return gen_failure(g, rc);
    for (size_t i = 0; i < n; ++i) puts(list[i]);
    lntune_gen_free_list(list, n);
    lntune_gen_close(g);
    return 0;
}

static int cmd_params(options *o)
{
    int rc = check_op_target(o, 0);
    if (rc) return rc;
    lntune_gen *g = open_gen();
    if (!g) return EXIT_FAIL;
    char *text;
    if ((rc = lntune_gen_describe(g, o->target, o->op, &text)) != LNTUNE_OK) return gen_failure(g, rc);
    fputs(text, stdout);
    free(text);
    lntune_gen_close(g);
    return 0;
}

static int cmd_emit(options *o)
{
    int rc = check_op_target(o, 1);
    if (rc) return rc;
    lntune_gen *g = open_gen();
    if (!g) return EXIT_FAIL;
    lntune_source src;
    rc = lntune_gen_emit(g, o->target, o->op, o->variant, the_shape(o), o->symbol, &src);
    if (rc != LNTUNE_OK) return gen_failure(g, rc);
    fputs(src.text, stdout);
    lntune_source_free(&src);
    lntune_gen_close(g);
    return 0;
}

static int cmd_verify(options *o)
{
    int rc = check_op_target(o, 1);
    if (rc) return rc;
    lntune_gen *g = open_gen();
    if (!g) return EXIT_FAIL;
    lntune_source src;
    if ((rc = lntune_gen_emit(g, o->target, o->op, o->variant, the_shape(o), NULL, &src)))
        return gen_failure(g, rc);
    lntune_gen_close(g);
    const char *cc = lntune_default_compiler();
    const char *extra[] = {src.cflags[0] ? src.cflags : NULL, NULL};
    lntune_library *lib = NULL;
    char *diag = NULL;
    const char *text = src.text;
    rc = lntune_build_library(cc, extra, &text, 1, 1, &lib, &diag);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: %s failed: %s\n", cc, diag ? diag : lntune_errstr(rc));
        free(diag);
        lntune_source_free(&src);
        return EXIT_FAIL;
    }
    lntune_verifier *v = NULL;
    const int64_t *hs = lntune_verify_standard_h;
    size_t nh = lntune_verify_standard_h_count;
    if (src.fixed_h) hs = &src.fixed_h, nh = 1;
    lntune_pool *pool = NULL;
    lntune_verify_result res;
    rc = lntune_verifier_create(lntune_op_parse(o->op), hs, nh, 0, &v);
    if (rc == LNTUNE_OK && src.threads > 1) rc = lntune_pool_create(src.threads, &pool);
    if (rc == LNTUNE_OK)
        rc = lntune_verifier_check(v, lntune_library_kernel(lib, "lntune_kernel"), src.affine,
                                   src.fixed_h, src.threads, pool, &res);
    if (rc == LNTUNE_OK)
        printf("ok: %s: %d cases, max error %.3g (tolerance %.3g) at %s\n", src.variant,
               res.cases, res.max_error, LNTUNE_VERIFY_TOLERANCE, res.worst);
    else
        fprintf(stderr, "lntune: %s: %s\n", src.variant,
                rc == LNTUNE_EVERIFY ? res.message : lntune_errstr(rc));
    lntune_pool_destroy(pool);
    lntune_verifier_destroy(v);
    lntune_library_close(lib);
    lntune_source_free(&src);
    return rc == LNTUNE_OK ? 0 : EXIT_FAIL;
}

static int cmd_export(options *o)
{
    if (!o->out) return usage_error("%s", "--out DIR is required");
    lntune_export_config c = {o->out, o->db, o->cmake, stderr};
    lntune_export_report r;
    int rc = lntune_export(&c, &r);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "lntune: export: %s\n", r.message[0] ? r.message : lntune_errstr(rc));
        return rc == LNTUNE_EINVAL ? EXIT_USAGE : EXIT_FAIL;
    }
    printf("wrote %s/lntune_kernels.c and lntune_kernels.h%s: %d tuned kernel(s) of machine %s%s,"
           " plus the generic kernels\n",
           o->out, o->cmake ? " and CMakeLists.txt" : "", r.tuned, r.fingerprint,
           r.skipped ? " (winners left out: see the warnings)" : "");
    return 0;
}

static const command commands[] = {
    {"variants", cmd_variants,
     "lntune variants --op layernorm|rmsnorm --target cpu [--shape H=N[,rows=N]]\n"
     "  Lists every valid variant, one canonical parameter string a line.\n"},
    {"params", cmd_params,
     "lntune params --op layernorm|rmsnorm --target cpu\n"
     "  Shows the parameter space: each knob, its values and what it does.\n"},
    {"emit", cmd_emit,
     "lntune emit --op OP --target cpu --variant STRING [--shape H=N] [--symbol NAME]\n"
     "  Prints the generated source of one variant. Parameters left out take their first value.\n"},
    {"verify", cmd_verify,
     "lntune verify --op OP --target cpu --variant STRING [--shape H=N]\n"
     "  Compiles one variant ($LNTUNE_CC, else clang-14, else cc) and runs it on the\n"
     "  adversarial suite against the float64 reference.\n"},
    {"export", cmd_export,
     "lntune export --out DIR [--db PATH] [--cmake]\n"
     "  Writes DIR/lntune_kernels.c and .h: this machine's tuned kernels, a dispatch table,\n"
     "  the generic kernels and a small thread pool, as plain C (libc, libm, pthreads).\n"
     "  --cmake also writes a CMakeLists.txt for add_subdirectory.\n"},
};

static void print_help(FILE *f)
{
    fprintf(f, "lntune %s - LayerNorm/RMSNorm kernel generator and autotuner\n\nCommands:\n",
            lntune_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        fprintf(f, "  %s", commands[i].usage);
    fprintf(f, "\n'lntune COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("lntune %s\n", lntune_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        options o = {0};
        int rc = parse_options(argc - 2, argv + 2, &o);
        if (rc == 0 && o.help) {
            fputs(commands[i].usage, stdout);
        } else if (rc == 0) {
            rc = commands[i].run(&o);
        }
        free(o.shapes);
        return rc;
    }
    return usage_error("unknown command '%s'", argv[1]);
}
