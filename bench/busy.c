/*
 * busy.c - other processes' CPU use from /proc (see busy.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "busy.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int lntune_busy_sample_now(lntune_busy_sample *s) {
    memset(s, 0, sizeof *s);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->wall_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    const double hz = (double)sysconf(_SC_CLK_TCK);
    unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
                   &iowait, &irq, &softirq, &steal);
    fclose(f);
    if (n < 7) return -1;
    /* Idle and iowait are not work; steal is a co-tenant's work on our cores. */
    s->machine_s = (double)(user + nice + sys + irq + softirq + steal) / hz;
    char buf[1024];
    f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* Fields after the command name, which may hold spaces: state is field 3, utime 14. */
    const char *p = strrchr(buf, ')');
    unsigned long long utime, stime;
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    s->self_s = (double)(utime + stime) / hz;
    return 0;
}

double lntune_busy_other_cores(const lntune_busy_sample *a, const lntune_busy_sample *b) {
    const double wall = b->wall_s - a->wall_s;
    if (wall <= 0 || a->machine_s == 0 || b->machine_s == 0) return 0.0;
    const double other = (b->machine_s - a->machine_s) - (b->self_s - a->self_s);
    return other > 0 ? other / wall : 0.0;
}
