/*
 * test_app.c - the application layer (app/lntune_app.h), called as the command line calls it,
 * its output read back from memory. Checks:
 *  - show, by default: a heading per machine naming its CPU model and fingerprint (never an
 *    internal row id), and a short row per winner: op, type, shape, time, GB/s, ratio to the
 *    copy with its spread, the copy's GB/s, and a short variant id instead of every knob;
 *  - show --long: every knob and the threads; --all: the other machine under its own heading;
 *  - show --json: strings escaped (a quote, a backslash and a newline in a stored field), the
 *    machine and the variant id given, and no NaN (a number that is not one is null);
 *  - tune's results as JSON: every string field escaped, NaN as null;
 *  - usage faults come back as exit 2 with the message on err, before anything is opened.
 */
#define _GNU_SOURCE
#include "check.h"
#include "hardware.h"
#include "lntune.h"
#include "lntune_app.h"
#include "scratch_dir.h"
#include "tuner.h"
#include "tuning_db.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *out, *err;
    int rc;
} run_result;

/* f(o) with its out and err in memory (free both). */
static run_result run(int (*f)(const lnt_app_options *, FILE *, FILE *), const lnt_app_options *o) {
    run_result r = {0};
    size_t n1, n2;
    FILE *out = open_memstream(&r.out, &n1), *err = open_memstream(&r.err, &n2);
    r.rc = f(o, out, err);
    fclose(out);
    fclose(err);
    return r;
}

static void run_free(run_result *r) {
    free(r->out);
    free(r->err);
}

static const char *const variant = "vec=8,acc=2,stats=blocked,prefetch=1,threads=2";

static int put(lntune_db *db, int64_t hw, int64_t H, const char *under_load) {
    const lntune_db_key key = {hw, "cpu", "rmsnorm", "f32", H, 8, 1};
    const lntune_best b = {.variant = variant,
                           .threads = 2,
                           .tuned_rows = 8,
                           .median_ns = 2000,
                           .gbps = 40.0,
                           .copy_gbps = 80.0,
                           .max_error = 1e-7,
                           .ratio_lo = 0.45,
                           .ratio_hi = 0.55,
                           .under_load = under_load};
    return lntune_db_set_best(db, &key, &b);
}

static void check_show(const char *dir) {
    char path[300];
    snprintf(path, sizeof path, "%s/show.db", dir);
    lntune_cpu_info cpu, other;
    lntune_cpu_info_get(&cpu);
    other = cpu;
    snprintf(other.fingerprint, sizeof other.fingerprint, "00000000000000ff");
    snprintf(other.model, sizeof other.model, "Other CPU 9000");
    lntune_db *db = NULL;
    int64_t hw = 0, hw_other = 0;
    int rc = lntune_db_open(path, 0, &db);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &cpu, "cc", &hw);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &other, "cc", &hw_other);
    if (rc == LNTUNE_OK) rc = put(db, hw, 64, "a \"quoted\" \\ process\nname");
    if (rc == LNTUNE_OK) rc = put(db, hw_other, 768, NULL);
    CHECK(rc == LNTUNE_OK, "a database of this machine and another");
    lntune_db_close(db);

    lnt_app_options o = {.db = path};
    run_result r = run(lnt_app_show, &o);
    char heading[256];
    snprintf(heading, sizeof heading, "cpu %s, fingerprint %s:", cpu.model, cpu.fingerprint);
    CHECK(r.rc == 0 && strstr(r.out, heading) && !strstr(r.out, "Other CPU"),
          "show: this machine's heading '%s'", heading);
    CHECK(strstr(r.out, "rmsnorm            f32  8x64") && strstr(r.out, "2.0us") &&
              strstr(r.out, "40.00  0.50x 0.45-0.55*") && strstr(r.out, "80.00  v") &&
              strstr(r.out, "variant id") && !strstr(r.out, variant),
          "show: op, type, shape, time, GB/s, ratio and spread, copy GB/s, a short id:\n%s", r.out);
    const char *id = strstr(r.out, "80.00  v");
    char want_id[16] = "";
    if (id) snprintf(want_id, sizeof want_id, "%.9s", id + 7);
    run_free(&r);

    o.long_rows = 1;
    r = run(lnt_app_show, &o);
    CHECK(r.rc == 0 && strstr(r.out, variant) && strstr(r.out, "2 thread(s)"),
          "show --long: every knob");
    run_free(&r);

    o.long_rows = 0, o.all = 1;
    r = run(lnt_app_show, &o);
    CHECK(r.rc == 0 && strstr(r.out, heading) &&
              strstr(r.out, "cpu Other CPU 9000, fingerprint 00000000000000ff:") &&
              strstr(r.out, "8x768") && !strstr(r.out, "hw "),
          "show --all: each machine under its model and fingerprint:\n%s", r.out);
    run_free(&r);

    o.json = 1;
    r = run(lnt_app_show, &o);
    char field[64];
    snprintf(field, sizeof field, "\"variant_id\": \"%s\"", want_id);
    CHECK(r.rc == 0 && strstr(r.out, "\"under_load\": \"a \\\"quoted\\\" \\\\ process\\nname\"") &&
              strstr(r.out, "\"machine\": \"Other CPU 9000\"") &&
              strstr(r.out, "\"fingerprint\": \"00000000000000ff\"") && strstr(r.out, field) &&
              !strstr(r.out, "nan"),
          "show --json: escaped strings, the machine and the id %s:\n%s", want_id, r.out);
    run_free(&r);
}

static void check_tune_json(void) {
    lntune_tune_result res = {.target = "cpu",
                              .op = "rmsnorm",
                              .dtype = "f32",
                              .rows = 8,
                              .H = 64,
                              .variant = "vec=\"8\"",
                              .median_ns = 1000,
                              .gbps = NAN,
                              .copy_gbps = 10,
                              .naive_ns = 2000,
                              .max_error = 1e-7,
                              .under_load = "back\\slash",
                              .why = "line\none"};
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    lnt_app_print_tune_results(f, &res, 1, 1);
    fclose(f);
    CHECK(strstr(text, "\"variant\": \"vec=\\\"8\\\"\"") &&
              strstr(text, "\"under_load\": \"back\\\\slash\"") &&
              strstr(text, "\"why\": \"line\\none\"") && strstr(text, "\"gbps\": null") &&
              strstr(text, "\"ratio_to_copy\": null") && !strstr(text, "nan"),
          "tune --json: strings escaped, NaN as null:\n%s", text);
    free(text);
}

static void check_usage(void) {
    lnt_app_options o = {.target = "cpu"};
    run_result r = run(lnt_app_emit, &o);
    CHECK(r.rc == LNT_EXIT_USAGE && strstr(r.err, "--op is required") && !r.out[0],
          "emit without --op: exit %d, %s", r.rc, r.err);
    run_free(&r);
    o = (lnt_app_options){.op = "rmsnorm", .target = "cpu", .nshapes = 1, .shapes = {"H=0"}};
    r = run(lnt_app_variants, &o);
    CHECK(r.rc == LNT_EXIT_USAGE && strstr(r.err, "'0' is not a positive whole number"),
          "a bad shape's text: exit %d, %s", r.rc, r.err);
    run_free(&r);
    o = (lnt_app_options){.action = "frob"};
    r = run(lnt_app_db, &o);
    CHECK(r.rc == LNT_EXIT_USAGE && strstr(r.err, "'frob' is not export, import or merge"),
          "db frob: exit %d", r.rc);
    run_free(&r);
}

int main(void) {
    char dir[256];
    if (scratch_dir_make(dir, sizeof dir, "app") != 0) return 1;
    check_show(dir);
    check_tune_json();
    check_usage();
    scratch_dir_finish(dir, check_failures);
    return CHECK_SUMMARY();
}
