/*
 * rebuild.h - the code of imported winners, built on this machine. Wisdom (lntune db import)
 * carries figures and variant names, never machine code; after an import, the winners recorded
 * for this CPU are compiled here from the local templates, verified against the float64
 * reference and only then stored as artifacts (the planner in rebuild_only mode: tuner.h). A
 * winner measured by another template or toolchain is stale: left without code, never loaded,
 * and tuned again by the next `lntune --shape` of it.
 */
#ifndef LNTUNE_REBUILD_H
#define LNTUNE_REBUILD_H

#include <stddef.h>

typedef struct lntune_rebuild_report {
    int considered;       /* this CPU's winners without intact code */
    int rebuilt;          /* of those: compiled, verified and stored here */
    int stale;            /* measured by another template or toolchain: to tune again */
    int failed;           /* not valid here, or wrong here: recorded so, to tune again */
    int other;            /* winners of this database's other targets (CUDA): left to `lntune
                           * --target cuda`, which rebuilds them the same way on the device */
    char first_stale[96]; /* "layernorm f32 2048x4096" of the first stale or failed one */
} lntune_rebuild_report;

/*
 * Rebuilds the winners of this CPU in the database at db_path (NULL: the default) that have no
 * intact code, with up to max_threads threads (0: every core). Returns LNTUNE_OK (stale and
 * failed winners are counted, not errors), or a code with the fault in err.
 */
int lntune_rebuild_imported(const char *db_path, int max_threads, lntune_rebuild_report *r,
                            char *err, size_t errlen);

#endif /* LNTUNE_REBUILD_H */
