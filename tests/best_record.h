/*
 * best_record.h - a best record (lntune_best) for the tests that store winners, its key
 * figures in one call: the variant, its artifact (NULL: none), the threads and rows it was
 * tuned at, its median, GB/s, the copy's GB/s, its largest error and the naive kernel's
 * median. The caller sets the rest (any_h, any_alignment, ...) after.
 */
#ifndef LNTUNE_TEST_BEST_RECORD_H
#define LNTUNE_TEST_BEST_RECORD_H

#include "tuning_db.h"

static inline lntune_best test_best(const char *variant, const char *artifact_key, int threads,
                                    int64_t rows, double median_ns, double gbps, double copy_gbps,
                                    double max_error, double naive_ns) {
    lntune_best b = {0};
    b.variant = variant, b.artifact_key = artifact_key, b.threads = threads, b.tuned_rows = rows;
    b.median_ns = median_ns, b.gbps = gbps, b.copy_gbps = copy_gbps, b.max_error = max_error;
    b.naive_ns = naive_ns;
    return b;
}

#endif /* LNTUNE_TEST_BEST_RECORD_H */
