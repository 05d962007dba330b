/*
 * incumbent.c - the planner's drift reference and its estimate (incumbent.h).
 */
#include "incumbent.h"

/*
 * A candidate replaces the incumbent when its figure is under this fraction of the incumbent's
 * estimate. Each change adds the noise of one ratio to the scale of every later figure, and the
 * fastest of a batch is often fast by luck: by 10-20% in --rigor exhaustive's batches of 64. With
 * a 10% margin the scale rose 26% in a third of an exhaustive run; keeping a new incumbent only
 * when its second time confirmed the margin made its estimate lucky again. A wide margin keeps
 * the changes to the few large steps early in a search (bench/incumbent_drift.py).
 */
static const double MARGIN = 0.8;

size_t lntune_incumbent_refs(const lntune_incumbent *inc, const lntune_timed *fallback,
                             lntune_timed *refs) {
    if (inc->ns <= 0.0) {
        if (!fallback || !fallback->reference) return 0;
        refs[0] = *fallback;
        return 1;
    }
    refs[0] = inc->kernel;
    if (inc->anchor_ns <= 0.0) return 1;
    refs[1] = inc->anchor;
    return 2;
}

void lntune_incumbent_scale(lntune_incumbent *inc, lntune_timed *c, size_t n,
                            const lntune_timed *refs, size_t nrefs) {
    if (inc->ns <= 0.0 || nrefs == 0) return; /* timed against the fallback: figures as they are */
    if (nrefs > 1) { /* its estimate from its time beside the anchor, on the anchor's estimate */
        if (!refs[0].failed && !refs[1].failed && refs[1].median_ns > 0.0)
            inc->ns = inc->anchor_ns * refs[0].median_ns / refs[1].median_ns;
        inc->anchor_ns = 0.0;
    }
    if (refs[0].failed || !(refs[0].median_ns > 0.0)) return;
    for (size_t k = 0; k < n; ++k) c[k].median_ns *= inc->ns / refs[0].median_ns;
}

void lntune_incumbent_offer(lntune_incumbent *inc, const lntune_timed *c) {
    if (inc->ns > 0.0 && !(c->median_ns < inc->ns * MARGIN)) return;
    if (inc->ns > 0.0 && inc->anchor_ns <= 0.0) { /* one waiting already: it stays the anchor */
        inc->anchor = inc->kernel;
        inc->anchor.reference = 0;
        inc->anchor_ns = inc->ns;
    }
    inc->kernel = *c;
    inc->kernel.reference = 1;
    inc->ns = c->median_ns;
}
