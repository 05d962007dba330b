/*
 * export_makedb.c - writes a tuning database with winners for this machine, for test_export.sh:
 * layernorm H=768 (fixed H, rows 9-64) and rmsnorm H=4096 (2 threads, rows 513-4096).
 *
 *   export_makedb PATH
 */
#include "tunedb.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    lntune_db *db;
    int64_t hw;
    int rc = create_db_for(argv[1], &cpu, &db, &hw);
    if (rc == LNTUNE_OK)
        rc = put_tuned(db, hw, "layernorm", "vec=8,acc=2,stats=welford,affine=fused,h=fixed", 768,
                       64, 1, 1, TUNED_RUNS);
    if (rc == LNTUNE_OK)
        rc = put_tuned(db, hw, "rmsnorm", "vec=16,acc=4,stats=wide,affine=none,threads=2", 4096,
                       4096, 0, 2, TUNED_RUNS);
    printf("%s: %s\n", rc == LNTUNE_OK ? "ok" : "FAIL", argv[1]);
    if (rc != LNTUNE_OK) fprintf(stderr, "%s\n", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
    lntune_db_close(db);
    return rc == LNTUNE_OK ? 0 : 1;
}
