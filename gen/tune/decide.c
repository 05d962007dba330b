/*
 * decide.c - the choice among the finalists by paired comparisons (see decide.h).
 */
#include "decide.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* About a 1% one-sided bound: z of the normal distribution. */
static const double BOUND_Z = 2.33;

/* The mean of sorted v[0..n) without its lowest and highest tenth, and its standard error (of
 * the kept values; 0 for one). */
static void trimmed_mean(const double *v, size_t n, double *mean, double *se) {
    const size_t cut = n / 10, m = n - 2 * cut;
    double sum = 0.0, sq = 0.0;
    for (size_t k = cut; k < n - cut; ++k) sum += v[k];
    *mean = sum / (double)m;
    for (size_t k = cut; k < n - cut; ++k) sq += (v[k] - *mean) * (v[k] - *mean);
    *se = m > 1 ? sqrt(sq / (double)(m - 1) / (double)m) : 0.0;
}

void lntune_pair_compare(const lntune_final_runs *f, size_t a, size_t b, const unsigned char *use,
                         double margin, lntune_pair *out) {
    const double lead = 1.0 - margin;
    double pooled[LNTUNE_DECIDE_MAX_RUNS * LNTUNE_TIMING_BLOCKS], run[LNTUNE_TIMING_BLOCKS];
    double mids[LNTUNE_DECIDE_MAX_RUNS];
    memset(out, 0, sizeof *out);
    out->ratio = NAN;
    size_t np = 0;
    for (int r = 0; r < f->nruns && r < LNTUNE_DECIDE_MAX_RUNS; ++r) {
        if (use && !use[r]) continue;
        const lntune_timed *x = &f->t[(size_t)r * f->n + a], *y = &f->t[(size_t)r * f->n + b];
        if (x->failed || y->failed) continue;
        size_t nr = 0;
        if (x->nblocks == 0 || y->nblocks == 0) { /* the target keeps no blocks */
            if (!(x->score_ns > 0) || !(y->score_ns > 0)) continue;
            out->per_run = 1;
            run[nr++] = x->score_ns / y->score_ns;
        } else if (x->nblocks == y->nblocks) {
            for (int i = 0; i < x->nblocks; ++i)
                if (x->blocks[i] > 0 && y->blocks[i] > 0)
                    run[nr++] = (double)x->blocks[i] / (double)y->blocks[i];
        }
        if (nr == 0) continue;
        memcpy(pooled + np, run, nr * sizeof *run);
        np += nr;
        const double mid = lntune_quantile(run, nr, 0.5);
        out->runs_won += mid < lead;
        mids[out->runs++] = mid;
    }
    /* The worst run; of LNTUNE_DECIDE_SPARE_RUN runs or more, the second worst: a phase that
     * slowed one candidate in one run of many does not veto what all the others show. */
    if (out->runs > 0) {
        lntune_quantile(mids, (size_t)out->runs, 0.5); /* sorts them */
        out->worst_run = mids[out->runs - 1 - (out->runs >= LNTUNE_DECIDE_SPARE_RUN)];
    }
    out->blocks = (int)np;
    out->margin = margin;
    if (np == 0) return;
    if (out->per_run) {
        out->ratio = lntune_quantile(pooled, np, 0.5);
        return;
    }
    lntune_quantile(pooled, np, 0.5); /* sorts them */
    trimmed_mean(pooled, np, &out->ratio, &out->se);
}

int lntune_pair_beats(const lntune_pair *p) {
    const double lead = 1.0 - p->margin;
    if (p->blocks == 0 || !(p->ratio < lead)) return 0;
    if (p->per_run) return p->runs_won == p->runs;
    return p->ratio + BOUND_Z * p->se < lead && p->worst_run <= 1.0 + p->margin;
}

static int simpler(const lntune_decide_in *in, size_t a, size_t b) {
    if (in->complexity[a] != in->complexity[b]) return in->complexity[a] < in->complexity[b];
    return strcmp(in->variant[a], in->variant[b]) < 0;
}

size_t lntune_decide(const lntune_final_runs *f, const lntune_decide_in *in, char *why,
                     size_t whylen) {
    const size_t n = f->n;
    unsigned char ok[LNTUNE_DECIDE_MAX_CANDIDATES] = {0}, quiet[LNTUNE_DECIDE_MAX_RUNS] = {0};
    if (in->unsettled) *in->unsettled = 0;
    if (n == 0 || n > sizeof ok || f->nruns < 1 || f->nruns > LNTUNE_DECIDE_MAX_RUNS) return n;
    char scratch[8];
    if (!why) why = scratch, whylen = sizeof scratch;
    int full = 0, nquiet = 0;
    for (size_t k = 0; k < n; ++k) {
        ok[k] = 1;
        for (int r = 0; r < f->nruns; ++r) ok[k] &= !f->t[(size_t)r * n + k].failed;
        if (ok[k] && in->threads[k] > full) full = in->threads[k];
    }
    for (int r = 0; r < f->nruns; ++r) nquiet += quiet[r] = !f->busy || !f->busy[r];
    /* The runs a candidate is judged by: with fewer threads than the most, the quiet ones. */
    const unsigned char *use[LNTUNE_DECIDE_MAX_CANDIDATES];
    for (size_t k = 0; k < n; ++k) {
        const int fewer = in->threads[k] < full && nquiet < f->nruns;
        use[k] = fewer ? quiet : NULL;
        if (fewer && nquiet == 0 && k != in->builtin) ok[k] = 0;
    }
    const size_t builtin = in->builtin < n && ok[in->builtin] ? in->builtin : n;
    size_t base = builtin;
    for (size_t k = 0; k < n && base == n; ++k)
        if (ok[k]) base = k;
    if (base == n) {
        snprintf(why, whylen, "every finalist failed");
        return n;
    }
    /* Those that beat the built-in (every one when there is none), ranked against the base. */
    size_t best = n;
    unsigned char cand[LNTUNE_DECIDE_MAX_CANDIDATES] = {0};
    double vs_base[LNTUNE_DECIDE_MAX_CANDIDATES];
    for (size_t k = 0; k < n; ++k) {
        if (!ok[k] || k == builtin) continue;
        lntune_pair pr;
        lntune_pair_compare(f, k, base, use[k], in->margin, &pr);
        cand[k] = builtin == n || lntune_pair_beats(&pr);
        vs_base[k] = k == base ? 1.0 : pr.ratio;
        if (cand[k] && (best == n || vs_base[k] < vs_base[best])) best = k;
    }
    if (best == n) {
        snprintf(why, whylen, "no finalist beat the built-in by %.0f%% beyond the noise",
                 in->margin * 100);
        /* Unsettled (decide.h): one leads the built-in (the base) by the margin in the mean */
        for (size_t k = 0; in->unsettled && k < n; ++k)
            if (ok[k] && k != builtin && vs_base[k] < 1.0 - in->margin) *in->unsettled = 1;
        return builtin;
    }
    /* The simplest of them that the fastest does not beat. */
    size_t pick = best;
    for (size_t k = 0; k < n; ++k) {
        if (!cand[k] || k == best || !simpler(in, k, pick)) continue;
        lntune_pair pr;
        lntune_pair_compare(f, best, k, use[best] ? use[best] : use[k], in->noise, &pr);
        if (!lntune_pair_beats(&pr)) pick = k;
    }
    /* Unsettled: another finalist leads the pick by the margin in the mean, short of the
     * bound (or it lost a run): more runs may settle it (tuner.c). */
    for (size_t k = 0; in->unsettled && k < n; ++k) {
        if (!ok[k] || k == pick) continue;
        lntune_pair pr;
        lntune_pair_compare(f, k, pick, use[k] ? use[k] : use[pick], in->margin, &pr);
        if (pr.ratio < 1.0 - in->margin && !lntune_pair_beats(&pr)) *in->unsettled = 1;
    }
    if (builtin == n)
        snprintf(why, whylen, "the fastest finalist (no built-in to beat)");
    else
        snprintf(why, whylen, "%s the built-in by %.1f%% in paired rounds%s",
                 pick == best ? "beat" : "as fast as the fastest, simpler; beat",
                 (1.0 - vs_base[pick]) * 100,
                 use[pick] ? " while no other process held a core" : "");
    return pick;
}
