/*
 * test_incumbent.c - the planner's drift reference (gen/tune/incumbent.c) on simulated batches,
 * whose figures are made the way lntune_time_interleaved makes them: each kernel's true time, times
 * a drift common to the batch, times its own noise; a candidate's figure is its ratio to the
 * batch's reference times that reference's figure, which is its own time in the batch.
 *   - A search-like run: the best candidates get faster for a while, then many time within 8%
 *     of each other, in batches that drift by +-30% with figures +-3%. A kernel's figures late
 *     in the run are on the scale of its figures early on the plateau (without the anchor and
 *     the margin, the late ones came out 0.80 of the early ones: bench/incumbent_drift.py).
 *   - A new incumbent is timed again in the next batch, beside the one it replaced, and takes
 *     its estimate from there; that batch is scaled by it.
 *   - A candidate 15% faster than the incumbent does not replace it.
 *   - Before any incumbent, a batch is timed against the fallback and left unscaled; with no
 *     fallback it has no reference.
 */
#include "check.h"
#include "incumbent.h"
#include "randn.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The test keeps each fake kernel's index in threads, its true time in true_ns. */
enum { KERNELS = 4096 };
static double true_ns[KERNELS];

static uint64_t rng_state = 12345u;
static double uniform(void) {
    return test_uniform(&rng_state);
}

static lntune_timed kernel(int id) {
    lntune_timed t;
    memset(&t, 0, sizeof t);
    t.threads = id;
    return t;
}

/* One batch of the tuner's evaluate: candidates, references, timing, scaling, offers. noise[i]
 * multiplies the figure of the batch's kernel i (candidates, then references). */
static void run_batch(lntune_incumbent *inc, const lntune_timed *fallback, const int *ids, size_t n,
                      double drift, const double *noise, lntune_timed *out) {
    lntune_timed c[8];
    for (size_t k = 0; k < n; ++k) c[k] = kernel(ids[k]);
    const size_t nrefs = lntune_incumbent_refs(inc, fallback, c + n);
    for (size_t i = 0; i < n + nrefs; ++i)
        c[i].median_ns = true_ns[c[i].threads] * drift * noise[i];
    lntune_incumbent_scale(inc, c, n, c + n, nrefs);
    for (size_t k = 0; k < n; ++k) lntune_incumbent_offer(inc, &c[k]);
    if (out) memcpy(out, c, n * sizeof *c);
}

static void the_scale_does_not_drift(void) {
    lntune_incumbent inc;
    memset(&inc, 0, sizeof inc);
    lntune_timed copy = kernel(KERNELS - 1);
    copy.reference = 1;
    true_ns[KERNELS - 1] = 900.0;
    int next_id = 0, changes = 0;
    double early = 0.0, late = 0.0; /* sums of figure / true time */
    int nearly = 0, nlate = 0;
    for (int b = 0; b < 200; ++b) {
        const double best = fmax(1000.0, 15000.0 * pow(0.82, b));
        int ids[4];
        double noise[6];
        for (int k = 0; k < 4; ++k) {
            ids[k] = next_id;
            true_ns[next_id++] = best * (1.0 + 0.08 * uniform());
        }
        for (int i = 0; i < 6; ++i) noise[i] = b == 0 ? 1.0 : 0.97 + 0.06 * uniform();
        const int before = inc.kernel.threads;
        lntune_timed out[4];
        run_batch(&inc, &copy, ids, 4, b == 0 ? 1.0 : 0.7 + 0.6 * uniform(), noise, out);
        changes += b > 0 && inc.kernel.threads != before;
        for (int k = 0; k < 4; ++k) {
            const double ratio = out[k].median_ns / true_ns[ids[k]];
            if (b >= 20 && b < 40) early += ratio, nearly++;
            if (b >= 180) late += ratio, nlate++;
        }
    }
    early /= nearly;
    late /= nlate;
    CHECK(changes >= 5, "the incumbent changed %d times", changes);
    CHECK(fabs(late / early - 1.0) < 0.02,
          "late figures on the scale of early ones on the plateau: %.3f of them", late / early);
}

static void a_new_incumbent_is_estimated_again(void) {
    true_ns[0] = 1000.0; /* the first incumbent */
    true_ns[1] = 1000.0; /* wins its batch by luck */
    true_ns[2] = 1050.0; /* in the next batch */
    lntune_incumbent inc;
    memset(&inc, 0, sizeof inc);
    const int first[1] = {0}, lucky[1] = {1}, next[1] = {2};
    const double even[3] = {1, 1, 1}, luck[2] = {0.75, 1};
    run_batch(&inc, NULL, first, 1, 1.0, even, NULL);
    CHECK(inc.kernel.threads == 0 && inc.ns == 1000.0, "the first candidate is the incumbent");
    run_batch(&inc, NULL, lucky, 1, 1.2, luck, NULL);
    CHECK(inc.kernel.threads == 1 && fabs(inc.ns - 750.0) < 1e-6 && inc.anchor_ns == 1000.0,
          "a candidate timed at %.0f ns replaces it, which waits as the anchor", inc.ns);
    lntune_timed refs[2];
    CHECK(lntune_incumbent_refs(&inc, NULL, refs) == 2 && refs[0].threads == 1 &&
              refs[0].reference == 1 && refs[1].threads == 0 && refs[1].reference == 0,
          "the next batch times the new incumbent, as its reference, and the anchor");
    lntune_timed out[1];
    run_batch(&inc, NULL, next, 1, 0.8, even, out);
    CHECK(inc.kernel.threads == 1 && fabs(inc.ns - 1000.0) < 1e-6 && inc.anchor_ns == 0.0,
          "beside the anchor it times at %.0f ns, its estimate from then on", inc.ns);
    CHECK(fabs(out[0].median_ns - 1050.0) < 1e-6,
          "that batch's candidate is scaled by the new estimate: %.1f ns", out[0].median_ns);
    CHECK(lntune_incumbent_refs(&inc, NULL, refs) == 1, "the anchor is timed once");
}

static void a_slightly_faster_candidate_does_not_replace_it(void) {
    true_ns[0] = 1000.0;
    true_ns[1] = 850.0;
    lntune_incumbent inc;
    memset(&inc, 0, sizeof inc);
    const int first[1] = {0}, faster[1] = {1};
    const double even[2] = {1, 1};
    run_batch(&inc, NULL, first, 1, 1.0, even, NULL);
    lntune_timed out[1];
    run_batch(&inc, NULL, faster, 1, 1.0, even, out);
    CHECK(out[0].median_ns == 850.0 && inc.kernel.threads == 0 && inc.anchor_ns == 0.0,
          "a candidate 15%% faster leaves the incumbent in place");
}

static void without_incumbent(void) {
    lntune_incumbent inc;
    memset(&inc, 0, sizeof inc);
    lntune_timed refs[2], copy = kernel(7), not_ref = kernel(6);
    copy.reference = 1;
    CHECK(lntune_incumbent_refs(&inc, NULL, refs) == 0, "no incumbent, no fallback: no reference");
    CHECK(lntune_incumbent_refs(&inc, &not_ref, refs) == 0,
          "a fallback that is not a reference is not used");
    CHECK(lntune_incumbent_refs(&inc, &copy, refs) == 1 && refs[0].threads == 7,
          "no incumbent: the fallback is the reference");
    lntune_timed c = kernel(0);
    c.median_ns = 1234.0;
    lntune_incumbent_scale(&inc, &c, 1, refs, 1);
    CHECK(c.median_ns == 1234.0, "figures against the fallback are left as they are");
    lntune_incumbent_offer(&inc, &c);
    CHECK(inc.ns == 1234.0 && inc.kernel.threads == 0 && inc.kernel.reference == 1 &&
              inc.anchor_ns == 0.0,
          "the first candidate offered is the incumbent, with no anchor");
}

int main(void) {
    the_scale_does_not_drift();
    a_new_incumbent_is_estimated_again();
    a_slightly_faster_candidate_does_not_replace_it();
    without_incumbent();
    return CHECK_SUMMARY();
}
