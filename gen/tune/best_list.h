/*
 * best_list.h - `lntune show`: the winners the tuning database holds for this machine (its CPU
 * and the GPUs found here), or for every machine, read into plain rows with what is printed of
 * each computed (direction, time, ratio to the copy) and the machines they belong to named, so
 * that the command line only prints them.
 * The database is opened read-only: listing never creates, migrates or writes it.
 */
#ifndef LNTUNE_BEST_LIST_H
#define LNTUNE_BEST_LIST_H

#include <stddef.h>
#include <stdint.h>

/* A machine of the database: its CPU, or one GPU. */
typedef struct lntune_best_machine {
    int64_t id;           /* the hardware row */
    char kind[8];         /* "cpu" or "cuda" */
    char fingerprint[17]; /* as hardware.h computes it */
    char *model;          /* the CPU's model name or the GPU's name, as stored */
} lntune_best_machine;

typedef struct lntune_best_row {
    int64_t hardware_id;
    int machine; /* its index in the list's machines, or -1 when the row names none */
    char *target, *op, *dtype, *variant; /* as stored: "cpu", "rmsnorm+residual", "bf16" */
    const char *direction;               /* "forward", "backward"; "?" for an op not known */
    int64_t H, rows;                     /* rows: the row count it was tuned at */
    int affine, threads;
    double time_us, gbps, copy_gbps, max_error;
    double ratio_to_copy;       /* gbps / copy_gbps; 0 without a copy */
    double ratio_lo, ratio_hi;  /* its spread over the final runs (tuning_db.h); 0: unknown */
    char *under_load;           /* why it was measured under load, or NULL */
    int64_t reach_lo, reach_hi; /* the H its run-time-H kernel serves (tuning_db.h); 0: unknown */
    char *twin_variant;         /* the run-time-H twin serving other H (schema.sql), or NULL */
    double twin_time_us;        /* its time at the tuned shape */
    char shape[40];             /* "64x96" */
} lntune_best_row;

typedef struct lntune_best_list {
    lntune_best_row *rows;
    size_t n;
    int opened;           /* the database was opened: the listing began */
    int machines;         /* hardware rows listed: this machine's CPU and GPUs the database knows */
    char fingerprint[17]; /* this machine's CPU (not read with all) */
    lntune_best_machine *hw; /* every machine of the database, in the order of their rows */
    size_t nhw;
    char *db_path; /* the database read */
} lntune_best_list;

/*
 * Lists the winners of db_path (NULL: the default database) for this machine: its CPU's, then
 * each GPU's, each ordered by target, op, dtype and H; or with all, every machine's in that
 * order (machines is then 0).
 * Returns LNTUNE_OK, or a code with its message in err: LNTUNE_EDB for a database refused or
 * unreadable, LNTUNE_ENOTFOUND for a missing file. A failure after opening keeps the rows read
 * before it. Free with lntune_best_list_free.
 */
int lntune_best_list_read(const char *db_path, int all, lntune_best_list *list, char *err,
                          size_t errlen);
void lntune_best_list_free(lntune_best_list *list); /* NULL is a no-op */

#endif /* LNTUNE_BEST_LIST_H */
