/*
 * decide.h - the tuner's choice among its finalists, from several final runs spread over time,
 * by paired comparisons that noise cannot flip.
 *
 * Every final run times the finalists, the built-in and the copy interleaved, and keeps each
 * candidate's per-round ratios to the copy in blocks shared by the whole run (timing.h). Two
 * candidates compare block for block: the drift of the host hits both in the same block and
 * cancels in their ratio. A candidate beats another only when (1) the upper confidence bound
 * (about 99%, one-sided) of the trimmed mean of those paired ratios lies below 1 - margin, so
 * that a lead inside the margin never passes by luck, and (2) in no run taken apart does its
 * median ratio lose by more than the margin. The mean, not the median: phases of the host slow
 * some kernels and not others (plain stores of y more than non-temporal ones, on the Zen 4 guest
 * 31% in one 10 s run and 3% in the next), and a kernel that is as fast in the good phases and
 * faster in the bad ones is the faster for a stream of calls. The final runs are spread over time
 * (tuner.c) so that more than one phase is seen. The built-in stays unless a finalist beats it;
 * the fastest of those that beat it wins, or a simpler one that it does not beat.
 *
 * On a shared 2-core host one best-of-a-burst choice picked winners 54% apart in three quiet
 * tunes, and one beside a memory-hungry process chose a 1-thread kernel 2.2x slower than the
 * 2-thread one (issue 56): so a finalist with fewer threads than the most any finalist uses is
 * judged only by the runs during which no other process held a core, and cannot win when there
 * were none.
 */
#ifndef LNTUNE_DECIDE_H
#define LNTUNE_DECIDE_H

#include "timing.h"

#include <stddef.h>

/* From LNTUNE_DECIDE_SPARE_RUN runs on, a candidate may lose one run by more than the margin
 * (worst_run is then the second worst). */
enum { LNTUNE_DECIDE_MAX_RUNS = 8, LNTUNE_DECIDE_MAX_CANDIDATES = 64, LNTUNE_DECIDE_SPARE_RUN = 6 };

/* The final runs: candidate k's figures of run r at t[r * n + k]. */
typedef struct lntune_final_runs {
    const lntune_timed *t;
    size_t n;  /* candidates, at most LNTUNE_DECIDE_MAX_CANDIDATES */
    int nruns; /* 1 to LNTUNE_DECIDE_MAX_RUNS */
    /* per run: other processes or steal held a core (load.h); NULL: none was */
    const unsigned char *busy;
} lntune_final_runs;

/* a against b over the runs use[r] (NULL: all), by a margin (a fraction). */
typedef struct lntune_pair {
    double ratio;     /* the 10%-trimmed mean over the paired blocks of a's time / b's (a target
                       * without blocks: the median of the runs'); NAN: no block */
    double se;        /* its standard error (0 per run) */
    int blocks;       /* paired blocks */
    int runs;         /* runs with blocks of both */
    int runs_won;     /* of them, runs whose median ratio lies below 1 - margin */
    double worst_run; /* the highest of the runs' median ratios (the second highest of
                       * LNTUNE_DECIDE_SPARE_RUN or more) */
    int per_run;      /* a target without blocks (nblocks 0): one score ratio per run */
    double margin;
} lntune_pair;

void lntune_pair_compare(const lntune_final_runs *f, size_t a, size_t b, const unsigned char *use,
                         double margin, lntune_pair *out);

/* Whether a pair says a beats b by more than its margin, beyond the noise, and loses no run by
 * more than it (above); compared per run (no blocks), only when every run says so. */
int lntune_pair_beats(const lntune_pair *p);

typedef struct lntune_decide_in {
    const int *complexity;      /* per candidate: smaller is simpler (search.h) */
    const char *const *variant; /* per candidate: ties of complexity go by name */
    const int *threads;         /* per candidate */
    size_t builtin;             /* the built-in's index; >= n: none */
    double margin;              /* a finalist must beat the built-in by this much */
    double noise;               /* a simpler finalist stays unless beaten by this much */
    /* May be NULL. Set to 1 when a finalist leads the one chosen by more than the margin in
     * the mean of the paired ratios yet does not beat it (short of the bound, or it lost a
     * run): a choice that more final runs may change. */
    int *unsettled;
} lntune_decide_in;

/*
 * The winner's index among f's candidates (each failed in any run is out); n when none is left.
 * why (may be NULL) says in a phrase why it won.
 */
size_t lntune_decide(const lntune_final_runs *f, const lntune_decide_in *in, char *why,
                     size_t whylen);

#endif /* LNTUNE_DECIDE_H */
