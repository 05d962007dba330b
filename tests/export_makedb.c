/*
 * export_makedb.c - writes a tuning database for test_export.sh. Winners for this machine:
 *   layernorm f32 H=768 (fixed H, rows 9-64, gamma) and rmsnorm f32 H=4096 (2 threads, rows
 *   513-4096, no gamma), as every earlier export had; layernorm f32 H=768 once more at rows
 *   513-4096 (two-pass statistics where the first is Welford's: rows 1 and 4096 of one H run
 *   two kernels, unless the export is compiled batch-invariant); the first's run-time-H twin
 *   (serves other H) and rmsnorm f32 H=2048 (rows 9-64, gamma, non-temporal stores: serves
 *   other H only on rows as aligned as its own) and H=1024 (rows 513-4096, gamma, plain);
 *   layernorm bf16 H=768 (fixed H, rows 9-64, gamma), rmsnorm f16 H=4096 (2 threads, rows
 *   513-4096, no gamma) and layernorm f16/bf16/f32 (x/y/params) H=1001 (fixed odd H, rows 9-64,
 *   gamma);
 *   Add & Norm: layernorm+residual_out f32 H=768 (fixed H, rows 9-64, gamma),
 *   rmsnorm+residual bf16/bf16/bf16/f32 (an fp32 residual) H=4096 (2 threads, rows 513-4096,
 *   no gamma) and layernorm+residual_out bf16 H=1024 (all bf16, which brings the fused
 *   all-bf16 built-ins into the export; rows 9-64, gamma);
 *   weight offset: rmsnorm+offset bf16 H=768 (fixed H, rows 9-64, gamma + offset), which
 *   brings the generic kernels of bf16/bf16/f32 (offset + gamma in fp32);
 *   quantized y: rmsnorm bf16/i8row/bf16 H=768 (fixed H, even/odd layout, the scale from the
 *   statistics pass; rows 9-64, gamma), which brings the generic kernels of bf16/f32/bf16 (the
 *   fp32 y the fallback quantizes), and layernorm+residual f32/e4m3 H=1000 (a static scale);
 *   backward: layernorm_backward f32 H=768 (fixed H, rows 9-64) and
 *   rmsnorm_backward+residual bf16/bf16/f32 H=4096 (2 threads, rows 513-4096), best rows only
 *   (the export regenerates the source from the variant);
 * and rows the export must leave out, each with a warning: a CPU "layernorm+gelu" and
 * "layernorm_backward+residual_out" (ops it does not know), and on a GPU row a layernorm of
 * dtype "f8" (no such type) and a "layernorm_backward+residual_out" (no such kernel).
 *
 * With "isa CASES", instead, the database of test_export_isa.sh: winners whose code needs the
 * ISA they were tuned on, each where this machine has it, as best rows alone (rows 9-64, gamma):
 *   layernorm f32 H=768 (8-lane vectors passed between the kernel's functions), rmsnorm f32
 *   H=2048 store=nt (AVX's non-temporal store builtin), rmsnorm f16 H=1024 convert=native
 *   (F16C), layernorm f32 H=4096 vec=16 (AVX-512 F) and layernorm bf16 H=1024 convert=native
 *   (AVX512-BF16's rounding);
 * and, for export_driver isa, one line "op x y params H" per winner in the file CASES (op 0
 * layernorm, 1 rmsnorm; types LNTUNE_TYPE_*).
 *
 *   export_makedb PATH [isa CASES]
 */
#include "tunedb.h"

/* A best record with no artifact: export reads the key, the variant and the threads only. */
static int put_best(lntune_db *db, int64_t hw, const char *target, const char *op,
                    const char *dtype, const char *variant, int64_t H, int64_t rows, int threads) {
    lntune_db_key k = {hw, target, op, dtype, H, rows, 1};
    lntune_best best = tunedb_best(variant, NULL, threads, rows);
    return lntune_db_set_best(db, &k, &best);
}

static int put_row(lntune_db *db, int64_t hw, const char *target, const char *op,
                   const char *dtype) {
    return put_best(db, hw, target, op, dtype, "vec=8", 768, 64, 1);
}

/* The "isa" database (see the top), its cases into CASES. */
static int make_isa(const char *path, const char *cases_path) {
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    static const struct {
        uint32_t isa; /* what it needs, beyond 8-lane vectors */
        const char *op, *dtype, *variant;
        int64_t H;
        int op_index, type; /* for CASES: the op's, and the type of every tensor */
    } winners[] = {
        {0, "layernorm", "f32", "vec=8,acc=2,stats=welford,affine=fused,h=fixed", 768, 0, 0},
        {0, "rmsnorm", "f32", "vec=8,acc=4,stats=wide,affine=fused,store=nt", 2048, 1, 0},
        {LNTUNE_ISA_F16C, "rmsnorm", "f16", "vec=8,acc=4,stats=wide,affine=fused,convert=native",
         1024, 1, LNTUNE_TYPE_F16},
        {LNTUNE_ISA_AVX512F, "layernorm", "f32", "vec=16,acc=2,stats=twopass,affine=fused,h=fixed",
         4096, 0, 0},
        {LNTUNE_ISA_AVX512BF16 | LNTUNE_ISA_AVX512VL, "layernorm", "bf16",
         "vec=8,acc=2,stats=twopass,affine=fused,convert=native", 1024, 0, LNTUNE_TYPE_BF16},
    };
    FILE *cases = fopen(cases_path, "w");
    lntune_db *db = NULL;
    int64_t hw;
    int rc = cases ? create_db_for(path, &cpu, &db, &hw) : LNTUNE_EIO;
    for (size_t i = 0; rc == LNTUNE_OK && i < sizeof winners / sizeof winners[0]; ++i) {
        if ((cpu.isa & winners[i].isa) != winners[i].isa) continue;
        rc = put_best(db, hw, "cpu", winners[i].op, winners[i].dtype, winners[i].variant,
                      winners[i].H, 64, 1);
        fprintf(cases, "%d %d %d %d %lld\n", winners[i].op_index, winners[i].type, winners[i].type,
                winners[i].type, (long long)winners[i].H);
        printf("winner: %s %s H=%lld %s\n", winners[i].op, winners[i].dtype,
               (long long)winners[i].H, winners[i].variant);
    }
    if (cases && fclose(cases) != 0 && rc == LNTUNE_OK) rc = LNTUNE_EIO;
    printf("%s: %s\n", rc == LNTUNE_OK ? "ok" : "FAIL", path);
    if (rc != LNTUNE_OK) fprintf(stderr, "%s\n", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
    lntune_db_close(db);
    return rc == LNTUNE_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[2], "isa") == 0) return make_isa(argv[1], argv[3]);
    if (argc != 2) return 2;
    lntune_cpu_info cpu;
    lntune_cpu_info_get(&cpu);
    lntune_db *db;
    int64_t hw, gpu_hw = 0;
    /* The winners of this machine, in order (see the top); twin: the run-time-H twin of the
     * fp32 fixed-H winner above it. */
    static const struct {
        const char *op, *dtype, *variant;
        int64_t H, rows;
        int affine, threads, twin;
    } tuned[] = {
        {"layernorm", "f32", "vec=8,acc=2,stats=welford,affine=fused,h=fixed", 768, 64, 1, 1, 0},
        {"rmsnorm", "f32", "vec=8,acc=4,stats=wide,affine=none,threads=2", 4096, 4096, 0, 2, 0},
        {"layernorm", "f32", "vec=8,acc=2,stats=twopass,affine=fused,h=fixed,threads=2", 768, 4096,
         1, 2, 0},
        {"layernorm", "f32", "vec=8,acc=2,stats=welford,affine=fused,h=runtime", 768, 64, 1, 1, 1},
        {"rmsnorm", "f32", "vec=8,acc=4,stats=wide,affine=fused,store=nt,threads=1", 2048, 64, 1, 1,
         0},
        {"rmsnorm", "f32", "vec=8,acc=4,stats=wide,affine=fused,threads=1", 1024, 600, 1, 1, 0},
        {"layernorm", "bf16", "vec=8,acc=2,stats=welford,affine=fused,h=fixed", 768, 64, 1, 1, 0},
        {"rmsnorm", "f16", "vec=8,acc=4,stats=wide,affine=none,threads=2", 4096, 4096, 0, 2, 0},
        {"layernorm", "f16/bf16/f32", "vec=8,acc=2,stats=twopass,affine=fused,h=fixed", 1001, 64, 1,
         1, 0},
        {"layernorm+residual_out", "f32", "vec=8,acc=2,stats=twopass,affine=fused,h=fixed", 768, 64,
         1, 1, 0},
        {"layernorm+residual_out", "bf16", "vec=8,acc=2,stats=twopass,affine=fused,h=fixed", 1024,
         64, 1, 1, 0},
        {"rmsnorm+residual", "bf16/bf16/bf16/f32", "vec=8,acc=4,stats=wide,affine=none,threads=2",
         4096, 4096, 0, 2, 0},
        {"rmsnorm+offset", "bf16", "vec=8,acc=2,affine=offset,h=fixed", 768, 64, 1, 1, 0},
        {"rmsnorm", "bf16/i8row/bf16", "vec=8,acc=2,affine=fused,h=fixed,layout=evenodd,qabs=stats",
         768, 64, 1, 1, 0},
        {"layernorm+residual", "f32/e4m3", "vec=8,acc=2,stats=twopass,affine=fused,h=fixed", 1000,
         64, 1, 1, 0},
    };
    int rc = create_db_for(argv[1], &cpu, &db, &hw);
    for (size_t i = 0; rc == LNTUNE_OK && i < sizeof tuned / sizeof tuned[0]; ++i)
        rc = tuned[i].twin ? put_twin(db, hw, tuned[i].op, tuned[i].variant, tuned[i].H,
                                      tuned[i].rows, tuned[i].affine)
                           : put_tuned_typed(db, hw, tuned[i].op, tuned[i].dtype, tuned[i].variant,
                                             tuned[i].H, tuned[i].rows, tuned[i].affine,
                                             tuned[i].threads, TUNED_RUNS);
    if (rc == LNTUNE_OK)
        rc = put_best(db, hw, "cpu", "layernorm_backward", "f32",
                      "vec=8,acc=2,rows=1,h=fixed,store=plain,threads=1", 768, 64, 1);
    if (rc == LNTUNE_OK)
        rc = put_best(db, hw, "cpu", "rmsnorm_backward+residual", "bf16/bf16/f32",
                      "vec=8,acc=2,rows=1,h=runtime,store=plain,threads=2", 4096, 4096, 2);
    if (rc == LNTUNE_OK) rc = put_row(db, hw, "cpu", "layernorm+gelu", "f32");
    if (rc == LNTUNE_OK) rc = put_row(db, hw, "cpu", "layernorm_backward+residual_out", "f32");
    lntune_gpu_info gpu = {0};
    snprintf(gpu.name, sizeof gpu.name, "NVIDIA H200");
    gpu.sm = 90, gpu.multiprocessors = 132, gpu.l2_bytes = 60 << 20, gpu.bus_width_bits = 6144;
    gpu.driver_version = 13000;
    lntune_gpu_info_finish(&gpu);
    if (rc == LNTUNE_OK) rc = lntune_db_put_gpu_hardware(db, &gpu, "NVRTC 13.0", &gpu_hw);
    if (rc == LNTUNE_OK) rc = put_row(db, gpu_hw, "cuda", "layernorm", "f8");
    if (rc == LNTUNE_OK) rc = put_row(db, gpu_hw, "cuda", "layernorm_backward+residual_out", "f32");
    printf("%s: %s\n", rc == LNTUNE_OK ? "ok" : "FAIL", argv[1]);
    if (rc != LNTUNE_OK) fprintf(stderr, "%s\n", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
    lntune_db_close(db);
    return rc == LNTUNE_OK ? 0 : 1;
}
