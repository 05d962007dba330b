/*
 * best_list.c - `lntune show`'s listing (see best_list.h).
 */
#include "best_list.h"

#include "cuda_devices.h"
#include "hardware.h"
#include "lntune.h"
#include "problem.h"
#include "tuning_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    lntune_best_list *list;
    int nomem; /* set when a row could not be kept: the listing stops */
} listing;

static void free_row(lntune_best_row *w) {
    free(w->target);
    free(w->op);
    free(w->dtype);
    free(w->variant);
    free(w->twin_variant);
    free(w->under_load);
}

static int add_machine(void *ud, const lntune_db_hardware *h) {
    listing *s = ud;
    lntune_best_list *l = s->list;
    lntune_best_machine *hw = realloc(l->hw, (l->nhw + 1) * sizeof *hw);
    if (hw) l->hw = hw;
    char *model = strdup(h->model ? h->model : "?");
    if (!hw || !model) {
        free(model);
        s->nomem = 1;
        return 1;
    }
    lntune_best_machine *m = &hw[l->nhw++];
    m->id = h->id;
    m->model = model;
    snprintf(m->kind, sizeof m->kind, "%s", h->kind ? h->kind : "cpu");
    snprintf(m->fingerprint, sizeof m->fingerprint, "%s", h->fingerprint ? h->fingerprint : "");
    return 0;
}

static int add_row(void *ud, const lntune_db_key *k, const lntune_best *b) {
    listing *s = ud;
    lntune_best_list *l = s->list;
    int machine = -1;
    for (size_t i = 0; i < l->nhw && machine < 0; ++i)
        if (l->hw[i].id == k->hardware_id) machine = (int)i;
    lntune_best_row w = {.hardware_id = k->hardware_id,
                         .machine = machine,
                         .target = strdup(k->target),
                         .op = strdup(k->op),
                         .dtype = strdup(k->dtype),
                         .variant = strdup(b->variant),
                         .direction = lntune_op_direction(k->op),
                         .H = k->H,
                         .rows = b->tuned_rows,
                         .affine = k->affine,
                         .threads = b->threads,
                         .time_us = b->median_ns * 1e-3,
                         .gbps = b->gbps,
                         .copy_gbps = b->copy_gbps,
                         .max_error = b->max_error,
                         .ratio_to_copy = b->copy_gbps > 0 ? b->gbps / b->copy_gbps : 0.0,
                         .ratio_lo = b->ratio_lo > 0 ? b->ratio_lo : 0.0,
                         .reach_lo = b->reach_lo,
                         .reach_hi = b->reach_hi,
                         .ratio_hi = b->ratio_hi > 0 ? b->ratio_hi : 0.0,
                         .under_load = b->under_load ? strdup(b->under_load) : NULL,
                         /* a twin that serves: stored with its code, not declined */
                         .twin_variant = b->twin_artifact_key ? strdup(b->twin_variant) : NULL,
                         .twin_time_us = b->twin_median_ns * 1e-3};
    snprintf(w.shape, sizeof w.shape, "%lldx%lld", (long long)b->tuned_rows, (long long)k->H);
    lntune_best_row *rows = realloc(l->rows, (l->n + 1) * sizeof *rows);
    if (rows) l->rows = rows;
    if (!rows || !w.target || !w.op || !w.dtype || !w.variant ||
        (b->twin_artifact_key && !w.twin_variant) || (b->under_load && !w.under_load)) {
        free_row(&w);
        s->nomem = 1;
        return 1;
    }
    rows[l->n++] = w;
    return 0;
}

int lntune_best_list_read(const char *db_path, int all, lntune_best_list *list, char *err,
                          size_t errlen) {
    memset(list, 0, sizeof *list);
    listing s = {list, 0};
    lntune_db *db = NULL;
    int rc = lntune_db_open(db_path, LNTUNE_DB_READONLY, &db);
    if (rc == LNTUNE_OK && !(list->db_path = strdup(lntune_db_path(db)))) s.nomem = 1;
    list->opened = rc == LNTUNE_OK && !s.nomem;
    enum { MAX_GPUS = 8 };
    int64_t ids[1 + MAX_GPUS];
    if (list->opened && !all) {
        lntune_cpu_info cpu;
        char gpus[MAX_GPUS][17];
        lntune_cpu_info_get(&cpu);
        memcpy(list->fingerprint, cpu.fingerprint, sizeof list->fingerprint);
        if (lntune_db_find_hardware(db, cpu.fingerprint, &ids[0]) == LNTUNE_OK) ++list->machines;
        const int ngpus = lntune_cuda_local_fingerprints(gpus, MAX_GPUS);
        for (int g = 0; g < ngpus; ++g)
            if (lntune_db_find_hardware(db, gpus[g], &ids[list->machines]) == LNTUNE_OK)
                ++list->machines;
    }
    if (list->opened) rc = lntune_db_each_hardware(db, add_machine, &s);
    if (list->opened && all && rc == LNTUNE_OK && !s.nomem)
        rc = lntune_db_each_best(db, 0, add_row, &s);
    for (int i = 0; i < list->machines && rc == LNTUNE_OK && !s.nomem; ++i)
        rc = lntune_db_each_best(db, ids[i], add_row, &s);
    /* the open's message, or the listing's */
    if (rc != LNTUNE_OK) snprintf(err, errlen, "%s", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
    lntune_db_close(db);
    if (rc == LNTUNE_OK && s.nomem) {
        snprintf(err, errlen, "%s", lntune_errstr(LNTUNE_ENOMEM));
        rc = LNTUNE_ENOMEM;
    }
    return rc;
}

void lntune_best_list_free(lntune_best_list *list) {
    if (!list) return;
    for (size_t i = 0; i < list->n; ++i) free_row(&list->rows[i]);
    free(list->rows);
    for (size_t i = 0; i < list->nhw; ++i) free(list->hw[i].model);
    free(list->hw);
    free(list->db_path);
    memset(list, 0, sizeof *list);
}
