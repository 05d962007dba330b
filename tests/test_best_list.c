/*
 * test_best_list.c - lntune_best_list_read, which `lntune show` prints. Checks:
 *  - a database holding this machine's CPU winners and another machine's: this machine's alone,
 *    ordered by target, op, dtype and H, each with its direction, time in us, ratio to the copy
 *    and shape as computed; with all, both machines';
 *  - every machine of the database named: its kind, model and fingerprint, and each row's
 *    machine the one of its hardware row;
 *  - a database of another machine only: opened, no machine of this one, no rows;
 *  - a missing file: not opened, the message says so, and no file is made; a file that is not
 *    SQLite: LNTUNE_EDB, not opened;
 *  - with the argument "mock" (LD_LIBRARY_PATH at tests/mock_cuda's stand-in driver): the
 *    winner of the GPU found here follows the CPU's;
 *  - lntune_best_list_free(NULL) is a no-op.
 *
 *   test_best_list [mock]
 */
#define _GNU_SOURCE
#include "best_list.h"
#include "best_record.h"
#include "check.h"
#include "cuda_driver.h"
#include "cuda_fingerprint.h"
#include "lntune.h"
#include "scratch_dir.h"
#include "tuning_db.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

/* A winner of hardware row hw, tuned at rows x H. */
static int put(lntune_db *db, int64_t hw, const char *target, const char *op, const char *dtype,
               int64_t H, int64_t rows, double median_ns, double gbps, double copy_gbps) {
    const lntune_db_key key = {hw, target, op, dtype, H, rows, 1};
    const lntune_best b =
        test_best("vec=8,threads=2", NULL, 2, rows, median_ns, gbps, copy_gbps, 1e-7, 0);
    return lntune_db_set_best(db, &key, &b);
}

/* Row i of l is target op dtype at rows x H of hardware row hw. */
static int row_is(const lntune_best_list *l, size_t i, int64_t hw, const char *target,
                  const char *op, const char *dtype, const char *shape) {
    return i < l->n && l->rows[i].hardware_id == hw && strcmp(l->rows[i].target, target) == 0 &&
           strcmp(l->rows[i].op, op) == 0 && strcmp(l->rows[i].dtype, dtype) == 0 &&
           strcmp(l->rows[i].shape, shape) == 0;
}

int main(int argc, char **argv) {
    const int mock = argc > 1 && strcmp(argv[1], "mock") == 0;
    char dir[256], path[300], other[300], missing[300], text[300], err[1024] = "";
    if (scratch_dir_make(dir, sizeof dir, "best-list") != 0) return 1;
    snprintf(path, sizeof path, "%s/this.db", dir);
    snprintf(other, sizeof other, "%s/other.db", dir);
    snprintf(missing, sizeof missing, "%s/missing.db", dir);
    snprintf(text, sizeof text, "%s/text.db", dir);

    lntune_cpu_info cpu, elsewhere;
    lntune_cpu_info_get(&cpu);
    elsewhere = cpu;
    snprintf(elsewhere.fingerprint, sizeof elsewhere.fingerprint, "00000000000000ff");
    lntune_db *db = NULL;
    int64_t hw = 0, hw_other = 0, hw_gpu = 0;
    int rc = lntune_db_open(path, 0, &db);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &elsewhere, "cc", &hw_other);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &cpu, "cc", &hw);
    if (rc == LNTUNE_OK) rc = put(db, hw, "cpu", "rmsnorm", "f32", 4096, 2048, 2e5, 80.0, 100.0);
    if (rc == LNTUNE_OK)
        rc = put(db, hw, "cpu", "layernorm_backward+residual", "bf16", 96, 64, 1500, 10.0, 0.0);
    if (rc == LNTUNE_OK) rc = put(db, hw, "cpu", "layernorm+gelu", "f32", 64, 8, 100, 1.0, 2.0);
    if (rc == LNTUNE_OK) rc = put(db, hw_other, "cpu", "layernorm", "f32", 768, 8, 100, 1.0, 2.0);
    if (mock) { /* the stand-in GPU's own row, as the CUDA tuner makes it */
        lntune_cuda *cu = NULL;
        lntune_gpu_info g;
        if (rc == LNTUNE_OK) rc = lntune_cuda_open(0, &cu);
        if (rc == LNTUNE_OK) lntune_cuda_gpu_info(lntune_cuda_get_info(cu), &g);
        lntune_cuda_close(cu);
        if (rc == LNTUNE_OK) rc = lntune_db_put_gpu_hardware(db, &g, "NVRTC", &hw_gpu);
        if (rc == LNTUNE_OK) rc = put(db, hw_gpu, "cuda", "rmsnorm", "f32", 256, 8, 2e5, 1, 2);
    }
    CHECK(rc == LNTUNE_OK, "a database of this machine%s and another %s", mock ? ", its GPU" : "",
          rc == LNTUNE_OK ? ""
          : db            ? lntune_db_errmsg(db)
                          : lntune_errstr(rc));
    lntune_db_close(db);

    lntune_best_list l;
    rc = lntune_best_list_read(path, 0, &l, err, sizeof err);
    CHECK(rc == LNTUNE_OK && l.opened && l.machines == 1 + mock && l.n == 3u + mock &&
              strcmp(l.fingerprint, cpu.fingerprint) == 0 && strcmp(l.db_path, path) == 0,
          "this machine's: rc %d, %d machines, %zu rows, %s in %s %s", rc, l.machines, l.n,
          l.fingerprint, l.db_path ? l.db_path : "?", err);
    CHECK(row_is(&l, 0, hw, "cpu", "layernorm+gelu", "f32", "8x64") &&
              row_is(&l, 1, hw, "cpu", "layernorm_backward+residual", "bf16", "64x96") &&
              row_is(&l, 2, hw, "cpu", "rmsnorm", "f32", "2048x4096"),
          "ordered by target, op, dtype, H, each with its tuned shape");
    CHECK(l.n >= 3 && strcmp(l.rows[0].direction, "?") == 0 &&
              strcmp(l.rows[1].direction, "backward") == 0 &&
              strcmp(l.rows[2].direction, "forward") == 0,
          "directions: an op this build does not know is '?', the fused backward 'backward'");
    CHECK(l.n >= 3 && fabs(l.rows[2].time_us - 200.0) < 1e-9 &&
              fabs(l.rows[2].ratio_to_copy - 0.8) < 1e-12 && l.rows[1].ratio_to_copy == 0.0 &&
              l.rows[2].threads == 2 && l.rows[2].affine == 1 &&
              strcmp(l.rows[2].variant, "vec=8,threads=2") == 0 && l.rows[2].max_error == 1e-7,
          "time in us, ratio to the copy (0 without one), the stored fields as they are");
    if (mock)
        CHECK(row_is(&l, 3, hw_gpu, "cuda", "rmsnorm", "f32", "8x256"),
              "the GPU found here: its winner follows the CPU's");
    const lntune_best_machine *m0 = l.n && l.rows[0].machine >= 0 ? &l.hw[l.rows[0].machine] : 0;
    CHECK(l.nhw == 2u + mock && m0 && m0->id == hw && strcmp(m0->kind, "cpu") == 0 &&
              strcmp(m0->model, cpu.model) == 0 && strcmp(m0->fingerprint, cpu.fingerprint) == 0,
          "the machines named: %zu, the first row's %s %s %s", l.nhw, m0 ? m0->kind : "-",
          m0 ? m0->model : "-", m0 ? m0->fingerprint : "-");
    if (mock)
        CHECK(l.n > 3 && l.rows[3].machine >= 0 &&
                  strcmp(l.hw[l.rows[3].machine].kind, "cuda") == 0,
              "the GPU's row names the GPU");
    lntune_best_list_free(&l);
    CHECK(l.rows == NULL && l.n == 0 && l.db_path == NULL && l.hw == NULL && l.nhw == 0,
          "free empties the list");

    rc = lntune_best_list_read(path, 1, &l, err, sizeof err);
    CHECK(rc == LNTUNE_OK && l.machines == 0 && l.n == 4u + mock &&
              row_is(&l, 0, hw_other, "cpu", "layernorm", "f32", "8x768"),
          "all: every machine's (%zu rows)", l.n);
    lntune_best_list_free(&l);

    db = NULL;
    rc = lntune_db_open(other, 0, &db);
    if (rc == LNTUNE_OK) rc = lntune_db_put_hardware(db, &elsewhere, "cc", &hw_other);
    if (rc == LNTUNE_OK) rc = put(db, hw_other, "cpu", "layernorm", "f32", 768, 8, 100, 1.0, 2.0);
    lntune_db_close(db);
    rc = lntune_best_list_read(other, 0, &l, err, sizeof err);
    CHECK(rc == LNTUNE_OK && l.opened && l.machines == 0 && l.n == 0,
          "another machine's database: no machine of this one, no rows (rc %d)", rc);
    lntune_best_list_free(&l);

    rc = lntune_best_list_read(missing, 0, &l, err, sizeof err);
    CHECK(rc != LNTUNE_OK && rc != LNTUNE_EDB && !l.opened && strstr(err, "does not exist") &&
              access(missing, F_OK) != 0,
          "a missing file: rc %d, %s; none made", rc, err);
    lntune_best_list_free(&l);
    FILE *f = fopen(text, "w");
    if (f) fputs("not a database, not even SQLite\n", f), fclose(f);
    rc = lntune_best_list_read(text, 0, &l, err, sizeof err);
    CHECK(rc == LNTUNE_EDB && !l.opened, "a text file: rc %d, %s", rc, err);
    lntune_best_list_free(&l);
    lntune_best_list_free(NULL);

    const int failed = check_failures;
    scratch_dir_finish(dir, failed);
    return CHECK_SUMMARY();
}
