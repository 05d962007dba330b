/*
 * search.c - the variant table and beam coordinate descent.
 *
 * Beam search over knobs: from the beam's variants, try every value of one knob at a time, keep
 * the B fastest variants seen, and sweep over all knobs until the beam stops changing (measure:
 * at most 3 sweeps, then up to 3 steps to a faster one-knob neighbour). With the
 * knobs of our templates this measures a few percent of the space and lands on the exhaustive
 * winner or within noise of it (bench/tuner_stability.sh compares the two).
 */
#include "search.h"

#include "lntune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PARAMS = 32, MAX_VALUES = 64, EXHAUSTIVE_CHUNK = 64 };
static const double LEADER_WINDOW = 1.25;  /* see leaders() */
static const double RECHECK_WINDOW = 1.60; /* see recheck() */
enum { MAX_LEADERS = 64 };
/* A seeded search (lntune_search_from) steps from the fastest variant to the fastest of its
 * one-knob neighbours at most this many times, each step one batch. A coordinate sweep from the
 * seeds (a batch per knob) evaluated 29-42 variants at H = 4096 where measure evaluates 97-147,
 * but the tune still took 0.64x the cold one's time: the batches, not the variants, cost. */
enum { SEEDED_STEPS = 3 };

struct lntune_space {
    size_t n;
    int nparams;
    char **variants;
    unsigned char *ids; /* n x nparams value ranks */
};

int lntune_space_create(char *const *variants, size_t n, lntune_space **out) {
    *out = NULL;
    if (n == 0) return LNTUNE_EINVAL;
    lntune_space *s = calloc(1, sizeof *s);
    if (!s) return LNTUNE_ENOMEM;
    s->n = n;
    s->variants = calloc(n, sizeof *s->variants);
    /* Distinct values of each parameter, in order of first appearance (= declaration order). */
    char *values[MAX_PARAMS][MAX_VALUES];
    int nvalues[MAX_PARAMS] = {0};
    int rc = LNTUNE_ENOMEM;
    for (size_t i = 0; s->variants && i < n; ++i) {
        if (!(s->variants[i] = strdup(variants[i]))) goto fail;
        int count = 1;
        for (const char *c = variants[i]; *c; ++c) count += *c == ',';
        if (i == 0) {
            s->nparams = count;
            if (count > MAX_PARAMS || !(s->ids = calloc(n * (size_t)count, 1))) goto fail;
        }
        rc = LNTUNE_EINVAL;
        if (count != s->nparams) goto fail;
        const char *item = variants[i];
        for (int j = 0; j < count; ++j) {
            size_t len = strcspn(item, ",");
            int v = 0;
            while (v < nvalues[j] &&
                   (strlen(values[j][v]) != len || memcmp(values[j][v], item, len)))
                ++v;
            if (v == nvalues[j]) {
                if (v == MAX_VALUES || !(values[j][v] = strndup(item, len))) goto fail;
                nvalues[j]++;
            }
            s->ids[i * (size_t)count + (size_t)j] = (unsigned char)v;
            item += len + (item[len] == ',');
        }
    }
    if (!s->variants) goto fail;
    for (int j = 0; j < s->nparams; ++j)
        for (int v = 0; v < nvalues[j]; ++v) free(values[j][v]);
    *out = s;
    return LNTUNE_OK;
fail:
    for (int j = 0; j < MAX_PARAMS; ++j)
        for (int v = 0; v < nvalues[j]; ++v) free(values[j][v]);
    lntune_space_destroy(s);
    return rc;
}

void lntune_space_destroy(lntune_space *s) {
    if (!s) return;
    for (size_t i = 0; s->variants && i < s->n; ++i) free(s->variants[i]);
    free(s->variants);
    free(s->ids);
    free(s);
}

size_t lntune_space_size(const lntune_space *s) {
    return s->n;
}

const char *lntune_space_variant(const lntune_space *s, size_t i) {
    return s->variants[i];
}

int lntune_space_complexity(const lntune_space *s, size_t i) {
    int sum = 0;
    for (int j = 0; j < s->nparams; ++j) sum += s->ids[i * (size_t)s->nparams + (size_t)j];
    return sum;
}

int lntune_space_knobs(const lntune_space *s) {
    return s->nparams;
}

int lntune_space_value(const lntune_space *s, size_t i, int j) {
    return s->ids[i * (size_t)s->nparams + (size_t)j];
}

int lntune_space_knob(const lntune_space *s, const char *name) {
    const size_t len = strlen(name);
    const char *item = s->variants[0];
    for (int j = 0; j < s->nparams; ++j) {
        if (strncmp(item, name, len) == 0 && item[len] == '=') return j;
        item += strcspn(item, ",");
        item += *item == ',';
    }
    return -1;
}

size_t lntune_search_estimate(const lntune_space *s, lntune_rigor rigor) {
    if (rigor == LNTUNE_RIGOR_EXHAUSTIVE) return s->n;
    size_t per_sweep = 0; /* the values of each knob beyond the current one */
    for (int j = 0; j < s->nparams; ++j) {
        int most = 0;
        for (size_t i = 0; i < s->n; ++i)
            if (s->ids[i * (size_t)s->nparams + (size_t)j] > most)
                most = s->ids[i * (size_t)s->nparams + (size_t)j];
        per_sweep += (size_t)most;
    }
    /* measure: a beam of 4 over about two sweeps, many neighbours shared or already timed */
    size_t estimate = 1 + (rigor == LNTUNE_RIGOR_QUICK ? per_sweep : 5 * per_sweep);
    return estimate < s->n ? estimate : s->n;
}

/* Appends v to out[0..count) unless it is there; returns the new count. */
static size_t append_new(size_t *out, size_t count, size_t v) {
    size_t k = 0;
    while (k < count && out[k] != v) ++k;
    if (k == count) out[count++] = v;
    return count;
}

/*
 * The variants one step from v along knob p, appended to out (no duplicates): for each value of
 * p, the variant equal to v in every other knob, or where the templates' rules exclude that one
 * (convert=native needs vec >= 4, layout=evenodd too), the simplest variant with that value
 * that differs from v in one other knob. Without that repair a descent from the naive variant
 * (vec=1) never reaches knob values that need two changes at once: fp16 LayerNorm stayed at
 * vec=1 with portable conversions (0.12x the copy), since portable conversions are slower
 * vectorized.
 */
static size_t neighbors(const lntune_space *s, size_t v, int p, size_t *out, size_t count) {
    const unsigned char *a = s->ids + v * (size_t)s->nparams;
    size_t best[MAX_VALUES];
    int best_distance[MAX_VALUES];
    for (int k = 0; k < MAX_VALUES; ++k) best_distance[k] = 2; /* at most 1 other knob */
    for (size_t i = 0; i < s->n; ++i) {
        const unsigned char *b = s->ids + i * (size_t)s->nparams;
        int distance = 0;
        for (int j = 0; j < s->nparams && distance < 2; ++j) distance += j != p && a[j] != b[j];
        const int value = b[p];
        if (distance > 1) continue;
        if (distance < best_distance[value] ||
            (distance == best_distance[value] &&
             lntune_space_complexity(s, i) < lntune_space_complexity(s, best[value]))) {
            best_distance[value] = distance;
            best[value] = i;
        }
    }
    for (int value = 0; value < MAX_VALUES; ++value)
        if (best_distance[value] <= 1) count = append_new(out, count, best[value]);
    return count;
}

/* Evaluates the variants of idx not yet timed (times[i] is NAN until then). */
static void evaluate_new(lntune_evaluate_fn evaluate, void *ud, double *times, const size_t *idx,
                         size_t n, size_t *scratch, double *results) {
    size_t m = 0;
    for (size_t k = 0; k < n; ++k)
        if (isnan(times[idx[k]])) scratch[m++] = idx[k];
    if (m == 0) return;
    evaluate(ud, scratch, m, results);
    for (size_t k = 0; k < m; ++k) times[scratch[k]] = results[k];
}

/* The b fastest timed variants, fastest first (ties: simpler, then earlier). */
static size_t fastest(const lntune_space *s, const double *times, size_t *out, size_t b) {
    size_t count = 0;
    for (size_t i = 0; i < s->n; ++i) {
        if (isnan(times[i]) || isinf(times[i])) continue;
        size_t k = count < b ? count++ : b;
        if (k == b && !(times[i] < times[out[b - 1]])) continue;
        if (k == b) k = b - 1;
        while (k > 0 &&
               (times[i] < times[out[k - 1]] ||
                (times[i] == times[out[k - 1]] &&
                 lntune_space_complexity(s, i) < lntune_space_complexity(s, out[k - 1])))) {
            out[k] = out[k - 1];
            --k;
        }
        out[k] = i;
    }
    return count;
}

/* best_of[v]: the fastest timed variant with value v of knob j, where has[v]. */
static void fastest_of_values(const lntune_space *s, const double *times, size_t j, size_t *best_of,
                              int *has) {
    const size_t np = (size_t)s->nparams;
    for (int v = 0; v < MAX_VALUES; ++v) has[v] = 0;
    for (size_t i = 0; i < s->n; ++i) {
        const int v = s->ids[i * np + j];
        if (isnan(times[i]) || isinf(times[i])) continue;
        if (!has[v] || times[i] < times[best_of[v]]) best_of[v] = i;
        has[v] = 1;
    }
}

/*
 * The max_top fastest timed variants, fastest first, except that each knob value whose fastest
 * variant times within LEADER_WINDOW of the best has that variant among them (knobs in their
 * declared order, values in theirs), in place of the slowest leaders of the slower half that
 * were not so placed. The search's figures come from short batches: a phase of the host that
 * slowed wide vectors for a few seconds once left every leader at vec=4, 6-12% slower than
 * vec=16 side by side, and one batch that timed the four overlap=1 variants in a slow phase
 * left none among the leaders, 5.9% slower than exhaustive's overlap=1 winner (Zen 4). The
 * tuner's long interleaved retime of the leaders then had neither to choose.
 */
static size_t leaders(const lntune_space *s, const double *times, size_t *out, size_t max_top) {
    size_t n = fastest(s, times, out, max_top);
    if (n == 0 || max_top > MAX_LEADERS) return n;
    const size_t np = (size_t)s->nparams, keep = (max_top + 1) / 2;
    const double limit = times[out[0]] * LEADER_WINDOW;
    unsigned char placed[MAX_LEADERS] = {0};
    for (size_t j = 0; j < np; ++j) {
        size_t best_of[MAX_VALUES];
        int has[MAX_VALUES], among[MAX_VALUES] = {0};
        fastest_of_values(s, times, j, best_of, has);
        for (size_t k = 0; k < n; ++k) among[s->ids[out[k] * np + j]] = 1;
        for (int v = 0; v < MAX_VALUES; ++v) {
            if (!has[v] || among[v] || !(times[best_of[v]] <= limit)) continue;
            size_t k = n;
            if (n < max_top) {
                k = n++;
            } else {
                while (k > keep && placed[k - 1]) --k;
                if (k == keep) break; /* no slot left to give */
                --k;
            }
            out[k] = best_of[v];
            placed[k] = 1;
            among[v] = 1;
        }
    }
    for (size_t k = 1; k < n; ++k) /* fastest first again */
        for (size_t q = k; q > 0 && times[out[q]] < times[out[q - 1]]; --q) {
            const size_t t = out[q];
            out[q] = out[q - 1];
            out[q - 1] = t;
        }
    return n;
}

/*
 * Times once more, in one batch, the fastest variant of each knob value that timed beyond
 * LEADER_WINDOW of the best but within RECHECK_WINDOW, and keeps the lower figure: a phase of
 * the shared host slows row-at-a-time kernels by 25-35% for about a second, and one batch in it
 * once put every overlap=1 variant 26% behind, out of the leaders; side by side it was 5-6%
 * faster than the winner chosen without it.
 */
static void recheck(const lntune_space *s, lntune_evaluate_fn evaluate, void *ud, double *times,
                    size_t *cand, double *results) {
    size_t best;
    if (fastest(s, times, &best, 1) == 0) return;
    const double lo = times[best] * LEADER_WINDOW, hi = times[best] * RECHECK_WINDOW;
    size_t n = 0;
    for (size_t j = 0; j < (size_t)s->nparams; ++j) {
        size_t best_of[MAX_VALUES];
        int has[MAX_VALUES];
        fastest_of_values(s, times, j, best_of, has);
        for (int v = 0; v < MAX_VALUES; ++v)
            if (has[v] && times[best_of[v]] > lo && times[best_of[v]] <= hi)
                n = append_new(cand, n, best_of[v]);
    }
    if (n == 0) return;
    evaluate(ud, cand, n, results);
    for (size_t k = 0; k < n; ++k)
        if (results[k] < times[cand[k]]) times[cand[k]] = results[k];
}

/*
 * Coordinate descent from the fastest beam_width variants timed so far: for up to sweeps sweeps,
 * each knob in turn, every neighbour of the beam along it is evaluated and the beam becomes the
 * fastest beam_width variants seen; it stops early when a sweep leaves the beam as it was.
 */
static void descend(const lntune_space *s, lntune_evaluate_fn evaluate, void *ud, double *times,
                    size_t *cand, size_t *scratch, double *results, size_t beam_width, int sweeps) {
    size_t beam[4] = {0}, previous[4];
    size_t nbeam = fastest(s, times, beam, beam_width);
    if (nbeam == 0) nbeam = 1;
    for (int sweep = 0; sweep < sweeps; ++sweep) {
        size_t nprev = nbeam;
        memcpy(previous, beam, sizeof beam);
        /*
         * Last knob first: the templates declare the knobs of the code's shape first (vec, acc,
         * ...) and those of the memory traffic and launch last (store, prefetch, threads).
         * Settled first, the latter put the machine in the regime where the former are then
         * told apart (at one thread with plain stores, vec=8 and vec=16 time alike; at two with
         * non-temporal ones, 6% apart).
         */
        for (int p = s->nparams - 1; p >= 0; --p) {
            size_t n = 0;
            for (size_t b = 0; b < nbeam; ++b) n = neighbors(s, beam[b], p, cand, n);
            evaluate_new(evaluate, ud, times, cand, n, scratch, results);
            size_t got = fastest(s, times, beam, beam_width);
            nbeam = got ? got : 1;
        }
        if (nbeam == nprev && memcmp(beam, previous, nbeam * sizeof *beam) == 0) break;
    }
}

/* Every one-knob neighbour of the fastest in one batch, then of the new fastest, up to
 * SEEDED_STEPS times while the fastest moves: a batch costs its copy and rounds whatever it
 * holds, and a sweep is a batch per knob. The seeded search's descent, and measure's polish
 * after its sweeps (see search). */
static void step_from_fastest(const lntune_space *s, lntune_evaluate_fn evaluate, void *ud,
                              double *times, size_t *cand, size_t *scratch, double *results) {
    size_t at, now;
    for (int step = 0; step < SEEDED_STEPS && fastest(s, times, &at, 1) == 1; ++step) {
        size_t n = 0;
        for (int p = 0; p < s->nparams; ++p) n = neighbors(s, at, p, cand, n);
        evaluate_new(evaluate, ud, times, cand, n, scratch, results);
        if (fastest(s, times, &now, 1) == 1 && now == at) break;
    }
}

/* lntune_search (seeds NULL) and lntune_search_from: their start, then the recheck and the
 * leaders both share. */
static size_t search(const lntune_space *s, lntune_rigor rigor, const size_t *seeds, size_t nseeds,
                     lntune_evaluate_fn evaluate, void *ud, size_t *top, size_t max_top) {
    double *times = malloc(s->n * sizeof *times), *results = malloc(s->n * sizeof *results);
    size_t *cand = malloc(s->n * sizeof *cand), *scratch = malloc(s->n * sizeof *scratch);
    size_t found = 0;
    if (!times || !results || !cand || !scratch) goto done;
    for (size_t i = 0; i < s->n; ++i) times[i] = NAN;
    if (seeds) {
        size_t n = 0;
        for (size_t k = 0; k < nseeds; ++k)
            if (seeds[k] < s->n) n = append_new(cand, n, seeds[k]);
        n = append_new(cand, n, 0); /* the naive variant: a start that is always there */
        evaluate_new(evaluate, ud, times, cand, n, scratch, results);
        step_from_fastest(s, evaluate, ud, times, cand, scratch, results);
    } else if (rigor == LNTUNE_RIGOR_EXHAUSTIVE) {
        for (size_t i = 0; i < s->n; i += EXHAUSTIVE_CHUNK) {
            size_t m = s->n - i < EXHAUSTIVE_CHUNK ? s->n - i : EXHAUSTIVE_CHUNK;
            for (size_t k = 0; k < m; ++k) cand[k] = i + k;
            evaluate_new(evaluate, ud, times, cand, m, scratch, results);
        }
    } else {
        cand[0] = 0; /* the naive variant: every knob at its first value */
        evaluate_new(evaluate, ud, times, cand, 1, scratch, results);
        const int quick = rigor == LNTUNE_RIGOR_QUICK;
        descend(s, evaluate, ud, times, cand, scratch, results, quick ? 1 : 4, quick ? 1 : 3);
        /* The sweeps can run out while the fastest still has untimed one-knob neighbours. At
         * LayerNorm 4096x768 (Zen 4, 2 threads) one tune stored such a winner (plain stores,
         * overlap=1); its overlap=0 neighbour, never timed, took 22% less time side by side. */
        if (!quick) step_from_fastest(s, evaluate, ud, times, cand, scratch, results);
    }
    recheck(s, evaluate, ud, times, cand, results);
    found = leaders(s, times, top, max_top);
done:
    free(times);
    free(results);
    free(cand);
    free(scratch);
    return found;
}

size_t lntune_search(const lntune_space *s, lntune_rigor rigor, lntune_evaluate_fn evaluate,
                     void *ud, size_t *top, size_t max_top) {
    return search(s, rigor, NULL, 0, evaluate, ud, top, max_top);
}

size_t lntune_search_from(const lntune_space *s, const size_t *seeds, size_t nseeds,
                          lntune_evaluate_fn evaluate, void *ud, size_t *top, size_t max_top) {
    static const size_t none;
    return search(s, LNTUNE_RIGOR_MEASURE, seeds ? seeds : &none, seeds ? nseeds : 0, evaluate, ud,
                  top, max_top);
}

size_t lntune_space_with(const lntune_space *s, size_t v, int j, int value) {
    size_t cand[MAX_VALUES], n = neighbors(s, v, j, cand, 0);
    for (size_t k = 0; k < n; ++k)
        if (s->ids[cand[k] * (size_t)s->nparams + (size_t)j] == value) return cand[k];
    return s->n;
}
