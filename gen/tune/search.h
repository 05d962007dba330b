/*
 * search.h - the variant space as a table, and the planner's search over it.
 *
 * The space is read from the generator's canonical strings ("name=value,..."), never listed in
 * C: a knob added to a template is searched without a change here. Each knob's values rank in
 * the order the template declares them, simplest first; the variant of all first values is the
 * naive baseline and the search's starting point.
 */
#ifndef LNTUNE_SEARCH_H
#define LNTUNE_SEARCH_H

#include "tuner.h"

#include <stddef.h>

typedef struct lntune_space lntune_space;

/* Parses n canonical variant strings (all of one family, same parameter order). */
int lntune_space_create(char *const *variants, size_t n, lntune_space **out);
void lntune_space_destroy(lntune_space *s); /* NULL is a no-op */
size_t lntune_space_size(const lntune_space *s);
const char *lntune_space_variant(const lntune_space *s, size_t i);
/* Sum of the value ranks of variant i: 0 for the naive variant; smaller is simpler. Templates list
 * a knob's values in the order a tie should prefer them. */
int lntune_space_complexity(const lntune_space *s, size_t i);
/* How many knobs the space has, and variant i's value rank of knob j (0: the knob's first). */
int lntune_space_knobs(const lntune_space *s);
int lntune_space_value(const lntune_space *s, size_t i, int j);

/* The index of the knob called name (as the canonical strings spell it), -1 when none. */
int lntune_space_knob(const lntune_space *s, const char *name);
/* The variant equal to v but for knob j's value rank value (or, where the templates' rules
 * exclude that one, the simplest such variant differing from v in one other knob); the space's
 * size when there is none. */
size_t lntune_space_with(const lntune_space *s, size_t v, int j, int value);

/* About how many variants lntune_search evaluates at this rigor (for a progress bar). */
size_t lntune_search_estimate(const lntune_space *s, lntune_rigor rigor);

/*
 * Evaluates variants idx[0..n): sets times[k] to variant idx[k]'s median time in ns, or INFINITY
 * if it failed to compile or verify.
 */
typedef void (*lntune_evaluate_fn)(void *ud, const size_t *idx, size_t n, double *times);

/*
 * Searches the space: quick is one sweep over the knobs from the naive variant keeping the best
 * (coordinate descent), measure a beam of the 4 best through up to 3 sweeps, exhaustive every
 * variant. Then it times once more the fastest variant of each knob value that timed 25% to 60%
 * behind the best, keeping its lower figure. Writes up to max_top of the fastest variants seen,
 * fastest first, to top, with the fastest of each knob value that timed within 25% of the best
 * among them (knobs in declared order) while the slower half of top has room; returns how many (0
 * if none was correct).
 */
size_t lntune_search(const lntune_space *s, lntune_rigor rigor, lntune_evaluate_fn evaluate,
                     void *ud, size_t *top, size_t max_top);

/*
 * The search from a head start: seeds[0..nseeds) (indices into s; others are skipped) are the
 * winners and leaders another machine measured for the same op and shape (lntune --seed-from).
 * They and the naive variant are evaluated in one batch; then, up to SEEDED_STEPS times, every
 * one-knob neighbour of the fastest in one batch, until the fastest stays; then the recheck and
 * the leaders as lntune_search's. A few batches where measure runs dozens.
 */
size_t lntune_search_from(const lntune_space *s, const size_t *seeds, size_t nseeds,
                          lntune_evaluate_fn evaluate, void *ud, size_t *top, size_t max_top);

#endif /* LNTUNE_SEARCH_H */
