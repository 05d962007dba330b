/*
 * busy.c - other processes' CPU use, from the tuner's /proc reading (see busy.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "busy.h"

#include "load.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

int lntune_busy_sample_now(lntune_busy_sample *s) {
    memset(s, 0, sizeof *s);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->wall_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    lntune_load_mark m; /* the tuner's reading of /proc (gen/tune/load.h) */
    lntune_load_mark_now(&m);
    if (!m.known) return -1;
    const double hz = (double)sysconf(_SC_CLK_TCK);
    /* Idle and iowait are not work; steal is a co-tenant's work on our cores. */
    s->machine_s = (double)(m.busy + m.steal) / hz;
    s->self_s = (double)m.own / hz;
    return 0;
}

double lntune_busy_other_cores(const lntune_busy_sample *a, const lntune_busy_sample *b) {
    const double wall = b->wall_s - a->wall_s;
    if (wall <= 0 || a->machine_s == 0 || b->machine_s == 0) return 0.0;
    const double other = (b->machine_s - a->machine_s) - (b->self_s - a->self_s);
    return other > 0 ? other / wall : 0.0;
}
