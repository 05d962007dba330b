/*
 * load.h - what else uses this machine while the tuner measures: the CPU time of other
 * processes and the time the hypervisor steals, in cores, from /proc/stat less this process
 * and its waited-for children (/proc/self/stat). A shared host lends a measurement less of
 * everything while a neighbour runs; the tuner waits for quiet, measures again, and marks what
 * it could only measure under load (tuner.c). Where /proc cannot be read, or $LNTUNE_LOAD is
 * "ignore" (the tests, which run beside each other), the load is unknown and counts as quiet.
 */
#ifndef LNTUNE_LOAD_H
#define LNTUNE_LOAD_H

#include <stddef.h>

typedef struct lntune_load_mark {
    unsigned long long busy, steal, total; /* /proc/stat's cpu line, in ticks */
    unsigned long long own;                /* this process and its waited-for children */
    int known;
} lntune_load_mark;

typedef struct lntune_load {
    double other_cores; /* cores other processes kept busy on average */
    double steal_cores; /* cores the hypervisor gave to other guests */
    int cores;
    int known; /* 0: /proc unreadable, or the window too short to say */
} lntune_load;

/* Other processes holding at least this much of a core make a window busy (and as much steal). */
#define LNTUNE_LOAD_BUSY_CORES 0.25

void lntune_load_mark_now(lntune_load_mark *m);

/* The load between marks a and b (b later). */
void lntune_load_between(const lntune_load_mark *a, const lntune_load_mark *b, lntune_load *out);

/* Whether a window was busy: other processes or steal held LNTUNE_LOAD_BUSY_CORES or more. */
int lntune_load_busy(const lntune_load *l);

/* The load over the next seconds while this process sleeps. */
void lntune_load_sample(double seconds, lntune_load *out);

/* "other processes held 1.0 of 2 cores, steal 0.1" into buf. */
void lntune_load_describe(const lntune_load *l, char *buf, size_t size);

#endif /* LNTUNE_LOAD_H */
