/*
 * test_sandbox.c - a variant that crashes or hangs never takes the tuner down
 * (gen/verify/sandbox.h):
 *  - tests/templates/sandbox holds variants that write to NULL, write 1 TiB past their output,
 *    divide an integer by zero, execute a trap instruction and loop forever, at verification,
 *    and two that crash or hang only at the tuned shape, so during timing;
 *  - tuning that family finishes, chooses the one right variant, and stores every other one as
 *    failed, its message naming its signal (SIGSEGV, SIGFPE, SIGILL) or the timeout;
 *  - a small out-of-bounds write (one float before y) does not crash: the verifier's guard zone
 *    catches it, and it is stored as wrong;
 *  - a second run reuses those records and runs none of the faulty variants again;
 *  - the backward (tests/templates/sandbox/cpu/layernorm_backward.lua) likewise: crashes at
 *    verification and at timing are stored failed with their signal, writes before dx or before
 *    the dgamma partials are caught by the guard zones and stored wrong, the right one wins.
 * With the sandbox off (LNTUNE_SANDBOX=off) the first faulty variant kills this test.
 */
#define _GNU_SOURCE
#include "check.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "tune_once.h"
#include "tuner.h"
#include "tuning_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each faulty variant and what its stored message must say. */
static const struct {
    const char *quality, *says;
} expected[] = {
    {"segv", "SIGSEGV"},          {"farwrite", "SIGSEGV"}, {"fpe", "SIGFPE"},
    {"trap", "SIGILL"},           {"hang", "timed out"},   {"late_segv", "while timed"},
    {"late_hang", "while timed"},
};
enum { FAULTY = sizeof expected / sizeof expected[0] };

typedef struct {
    int ok, failed, wrong, other;
    char wrong_message[256];
    char message[FAULTY][256];
    int seen[FAULTY];
} census;

static int count(void *ud, const lntune_measurement *m) {
    census *c = ud;
    if (strcmp(m->status, LNTUNE_STATUS_OK) == 0)
        c->ok += strstr(m->variant, "quality=right") != 0;
    else if (strcmp(m->status, LNTUNE_STATUS_FAILED) == 0)
        c->failed++;
    else if (strcmp(m->status, LNTUNE_STATUS_WRONG) == 0 &&
             strncmp(m->variant, "quality=overrun,", 16) == 0) {
        c->wrong++;
        snprintf(c->wrong_message, sizeof c->wrong_message, "%s", m->message ? m->message : "");
    } else
        c->other++;
    for (int i = 0; i < FAULTY; ++i) {
        char q[64];
        snprintf(q, sizeof q, "quality=%s,", expected[i].quality);
        if (strncmp(m->variant, q, strlen(q)) != 0) continue;
        c->seen[i]++;
        snprintf(c->message[i], sizeof c->message[i], "%s: %s", m->status,
                 m->message ? m->message : "(no message)");
    }
    return 0;
}

/* The backward's faulty variants and what their stored status and message must say. */
static const struct {
    const char *quality, *says;
} backward_expected[] = {
    {"segv", "failed: crashed with SIGSEGV"},
    {"late_segv", "failed: crashed with SIGSEGV (Segmentation fault) while timed"},
    {"dx_overrun", "wrong: "},
    {"parts_overrun", "wrote outside its dgamma partials"},
};
enum { BACKWARD_FAULTY = sizeof backward_expected / sizeof backward_expected[0] };

typedef struct {
    char message[BACKWARD_FAULTY][300];
} backward_census;

static int count_backward(void *ud, const lntune_measurement *m) {
    backward_census *c = ud;
    for (int i = 0; i < BACKWARD_FAULTY; ++i) {
        char q[64];
        snprintf(q, sizeof q, "quality=%s,", backward_expected[i].quality);
        if (strncmp(m->variant, q, strlen(q)) == 0)
            snprintf(c->message[i], sizeof c->message[i], "%s: %s", m->status,
                     m->message ? m->message : "(no message)");
    }
    return 0;
}

int main(void) {
    /* Flushed at every line: a worker forked with lines still buffered would print them twice. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    char dir[4096];
    if (scratch_dir_make(dir, sizeof dir, "sandbox")) return 1;
    char db[4200], tpl[4200];
    snprintf(db, sizeof db, "%s/tune.db", dir);
    snprintf(tpl, sizeof tpl, "%s/templates/sandbox:%s/templates/common", LNTUNE_TEST_SOURCE_DIR,
             LNTUNE_TEST_SOURCE_DIR);
    setenv("XDG_CACHE_HOME", dir, 1);
    setenv("LNTUNE_TEMPLATE_DIR", tpl, 1);
    setenv("LNTUNE_SANDBOX_TIMEOUT", "2", 0); /* the hanging variants each cost this */
    int rc;

    lntune_tune_result r = tune_once(db, "layernorm", (lntune_shape){.rows = 64, .H = 64},
                                     LNTUNE_RIGOR_EXHAUSTIVE, 1, 0, &rc);
    CHECK(rc == LNTUNE_OK, "the tuner survives every faulty variant (rc %d)", rc);
    CHECK(strstr(r.variant, "quality=right") != NULL, "and chooses the right one: '%s'", r.variant);
    CHECK(r.failed == FAULTY && r.crashed == FAULTY && r.wrong == 1,
          "%d failed, %d of them crashed or hung, %d wrong (want %d, %d, 1)", r.failed, r.crashed,
          r.wrong, FAULTY, FAULTY);

    lntune_db *h;
    int64_t hw;
    CHECK(tune_db_this_machine(db, &h, &hw), "the database holds this machine");
    census c;
    memset(&c, 0, sizeof c);
    lntune_db_key key = {hw, "cpu", "layernorm", "f32", 64, 64, 1};
    lntune_db_each_measurement(h, &key, NULL, count, &c);
    lntune_db_close(h);
    CHECK(c.ok == 1 && c.failed == FAULTY && c.wrong == 1 && c.other == 0,
          "stored: %d right, %d failed, %d wrong, %d other", c.ok, c.failed, c.wrong, c.other);
    CHECK(strstr(c.wrong_message, "wrote before y") != NULL,
          "the small overrun is caught by the guard zone: %s", c.wrong_message);
    for (int i = 0; i < FAULTY; ++i)
        CHECK(c.seen[i] == 1 && strncmp(c.message[i], "failed: ", 8) == 0 &&
                  strstr(c.message[i], expected[i].says) != NULL,
              "quality=%s stored once, saying '%s': %s", expected[i].quality, expected[i].says,
              c.message[i]);

    lntune_tune_result again = tune_once(db, "layernorm", (lntune_shape){.rows = 64, .H = 64},
                                         LNTUNE_RIGOR_EXHAUSTIVE, 1, 0, &rc);
    CHECK(rc == LNTUNE_OK && again.from_db && again.compiled == 0 && again.crashed == 0,
          "a second run reuses the records and runs no faulty variant (crashed %d)", again.crashed);

    /* The backward: verified and timed in the worker too. */
    r = tune_once(db, "layernorm_backward", (lntune_shape){.rows = 64, .H = 64},
                  LNTUNE_RIGOR_EXHAUSTIVE, 1, 0, &rc);
    CHECK(rc == LNTUNE_OK && strstr(r.variant, "quality=right") != NULL,
          "backward: the tuner survives its faulty variants and chooses '%s' (rc %d)", r.variant,
          rc);
    CHECK(r.failed == 2 && r.crashed == 2 && r.wrong == 2,
          "backward: %d failed, %d of them crashed, %d wrong (want 2, 2, 2)", r.failed, r.crashed,
          r.wrong);
    backward_census b;
    memset(&b, 0, sizeof b);
    h = NULL;
    lntune_db_open(db, LNTUNE_DB_READONLY, &h);
    lntune_db_key bkey = {hw, "cpu", "layernorm_backward", "f32", 64, 64, 1};
    lntune_db_each_measurement(h, &bkey, NULL, count_backward, &b);
    lntune_db_close(h);
    for (int i = 0; i < BACKWARD_FAULTY; ++i)
        CHECK(strstr(b.message[i], backward_expected[i].says) != NULL,
              "backward quality=%s stored saying '%s': %s", backward_expected[i].quality,
              backward_expected[i].says, b.message[i]);

    scratch_dir_finish(dir, check_failures);
    return CHECK_SUMMARY();
}
