/*
 * load.c - other processes' CPU time and steal from /proc (see load.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The aggregate "cpu" line: user nice system idle iowait irq softirq steal ... */
static int read_stat(lntune_load_mark *m) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[8] = {0};
    const int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                           &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got < 4) return 0;
    m->busy = v[0] + v[1] + v[2] + v[5] + v[6];
    m->steal = v[7];
    m->total = m->busy + v[3] + v[4] + v[7];
    return 1;
}

/* utime stime cutime cstime: fields 14-17, after the command in parentheses. */
static int read_own(lntune_load_mark *m) {
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (!p) return 0;
    unsigned long long ut, st;
    long long cut, cst;
    /* after ')': state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ut, &st,
               &cut, &cst) != 4)
        return 0;
    m->own =
        ut + st + (unsigned long long)(cut > 0 ? cut : 0) + (unsigned long long)(cst > 0 ? cst : 0);
    return 1;
}

void lntune_load_mark_now(lntune_load_mark *m) {
    memset(m, 0, sizeof *m);
    const char *env = getenv("LNTUNE_LOAD");
    if (env && strcmp(env, "ignore") == 0) return; /* unknown: quiet (load.h) */
    m->known = read_stat(m) && read_own(m);
}

void lntune_load_between(const lntune_load_mark *a, const lntune_load_mark *b, lntune_load *out) {
    memset(out, 0, sizeof *out);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    out->cores = cores > 0 ? (int)cores : 1;
    /* Under 10 ticks of all CPUs the tick counts say nothing. */
    if (!a->known || !b->known || b->total < a->total + 10) return;
    const double total = (double)(b->total - a->total);
    double other = (double)(b->busy - a->busy) - (double)(b->own - a->own);
    if (other < 0) other = 0; /* the counters tick apart */
    out->other_cores = other / total * out->cores;
    out->steal_cores = (double)(b->steal - a->steal) / total * out->cores;
    out->known = 1;
}

int lntune_load_busy(const lntune_load *l) {
    return l->known &&
           (l->other_cores >= LNTUNE_LOAD_BUSY_CORES || l->steal_cores >= LNTUNE_LOAD_BUSY_CORES);
}

void lntune_load_sample(double seconds, lntune_load *out) {
    lntune_load_mark a, b;
    lntune_load_mark_now(&a);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    lntune_load_mark_now(&b);
    lntune_load_between(&a, &b, out);
}

void lntune_load_describe(const lntune_load *l, char *buf, size_t size) {
    if (!l->known)
        snprintf(buf, size, "the load is unknown");
    else
        snprintf(buf, size, "other processes held %.1f of %d cores, steal %.1f", l->other_cores,
                 l->cores, l->steal_cores);
}
