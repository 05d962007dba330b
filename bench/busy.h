/*
 * busy.h - how much CPU other processes took while we measured: the machine's busy time
 * (/proc/stat) minus this process's own and its waited-for children's (/proc/self/stat, read by
 * gen/tune/load.c as the tuner reads it), over wall time. A timing taken while
 * another build ran is not a measurement of the kernel alone, and the report must say so.
 */
#ifndef LNTUNE_BENCH_BUSY_H
#define LNTUNE_BENCH_BUSY_H

typedef struct lntune_busy_sample {
    double machine_s; /* CPU seconds all processes spent busy, since boot */
    double self_s; /* CPU seconds this process (all its threads, and waited-for children) spent */
    double wall_s;
} lntune_busy_sample;

/* Returns 0, or -1 where /proc is unreadable (the sample is then all zeros). */
int lntune_busy_sample_now(lntune_busy_sample *s);

/* Other processes' CPU between two samples, in cores (0.5: half a core on average). */
double lntune_busy_other_cores(const lntune_busy_sample *a, const lntune_busy_sample *b);

#endif /* LNTUNE_BENCH_BUSY_H */
