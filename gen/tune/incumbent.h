/*
 * incumbent.h - the drift reference of the planner's batches: one of the fastest variants timed
 * so far in a tuning run. Every batch of candidates times it too, and a candidate's figure is its
 * ratio to the incumbent in that batch times the incumbent's estimate (timing.h), so that batches
 * taken while the machine lends more or less bandwidth rank alike.
 *
 * The estimate must not drift. The batch that makes a candidate the incumbent picks it as the
 * fastest of several noisy figures, so its figure there is its luckiest: scaling every later
 * batch by it, and the next incumbent's by that, compounded the bias over the dozens of changes of
 * incumbent in a run, until the search's last sweep timed its variants at 0.47-0.74 of their
 * retimed time and those of its earlier sweeps never reached the beam or the leaders again. So a
 * new incumbent must be much faster (incumbent.c), and takes its estimate from the next batch,
 * which times it beside the one it replaced (the anchor). Near the end of a search, where many
 * variants time within a few percent of each other, the scale stays put.
 */
#ifndef LNTUNE_INCUMBENT_H
#define LNTUNE_INCUMBENT_H

#include "timing.h"

#include <stddef.h>

typedef struct lntune_incumbent {
    lntune_timed kernel; /* meaningful when ns > 0 */
    double ns;           /* its estimate; 0: no incumbent yet */
    /* The incumbent it replaced, waiting to be timed beside it (when anchor_ns > 0). */
    lntune_timed anchor;
    double anchor_ns;
} lntune_incumbent;

/*
 * The kernels a batch times after its candidates, written to refs[0..2): the incumbent, else
 * fallback when that is a reference (timing.h: the fastest copy), then the anchor if one waits.
 * Returns how many.
 */
size_t lntune_incumbent_refs(const lntune_incumbent *inc, const lntune_timed *fallback,
                             lntune_timed *refs);

/*
 * After the batch ran: settles a waiting anchor, and scales the figures (median_ns) of
 * candidates c[0..n) by the incumbent's estimate. refs[0..nrefs) as lntune_incumbent_refs gave
 * them, now timed. Call it before offering any candidate of the batch.
 */
void lntune_incumbent_scale(lntune_incumbent *inc, lntune_timed *c, size_t n,
                            const lntune_timed *refs, size_t nrefs);

/* Offers a scaled candidate that did not fail: it becomes the incumbent if it is much faster. */
void lntune_incumbent_offer(lntune_incumbent *inc, const lntune_timed *c);

#endif
