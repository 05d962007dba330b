/*
 * export_cuda_makedb.c - writes a tuning database with CUDA winners for test_export_cuda.sh:
 * two made-up GPU rows and best records whose artifacts hold generated sources.
 *
 *   NVIDIA H200 (sm_90): layernorm H=768 fixed-H register cache (rows 9-64, affine),
 *     rmsnorm H=4096 shared-memory cache (rows 513-4096, no affine), layernorm H=16384 on a
 *     4-block cluster (rows 513-4096, affine), layernorm H=256 warp layout (rows over 32768)
 *     layernorm+residual_out bf16 H=4096 (rows 2049-16384, affine), rmsnorm f16/f16/f32
 *     H=1024 pack=8 (rows 513-4096, affine), layernorm+residual bf16 with an fp32 residual
 *     H=2048 (rows 513-4096, no affine), rmsnorm+offset f32 H=2048 (rows 513-4096, gamma +
 *     offset), rmsnorm bf16/i8row/bf16 H=4096 (int8 codes, a scale per row; rows 513-4096,
 *     affine), layernorm+residual f32/e4m3 H=1024 (fp8 codes, a static scale; rows 513-4096,
 *     no affine)
 *   NVIDIA A100 (sm_80): rmsnorm H=1024 register cache (rows 65-512, affine)
 *   layernorm_backward H=4096 shared-memory pair (rows 2049-... , with gamma)
 * plus an H200 row the CUDA export must leave out: layernorm_backward+residual_out (no such
 * kernel).
 *
 *   export_cuda_makedb PATH [none]   ("none": the GPU rows without winners)
 * Prints "gpu FINGERPRINT NAME" for each GPU row.
 */
#include "best_record.h"
#include "cuda_launch.h"
#include "dtypes.h"
#include "fusion.h"
#include "generator.h"
#include "lntune.h"
#include "tuning_db.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    int gpu; /* 0: H200, 1: A100 */
    const char *op, *variant;
    int64_t H, rows;
    int affine;
    const char *dtype; /* NULL: f32 */
    int fusion;
    int offset; /* a weight offset's winner: op key "<op>+offset", affine=offset */
} winner;

static const winner winners[] = {
    {0, "layernorm",
     "layout=block,tpr=32,cluster=1,block=128,pack=4,cache=regs,stats=welford,h=fixed,affine=fused",
     768, 64, 1, NULL, LNTUNE_FUSION_NONE, 0},
    {0, "rmsnorm",
     "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=smem,stats=sumsq,h=runtime,affine=none",
     4096, 4096, 0, NULL, LNTUNE_FUSION_NONE, 0},
    {0, "layernorm",
     "layout=cluster,tpr=32,cluster=4,block=512,pack=4,cache=smem,stats=twopass,h=runtime,"
     "affine=fused",
     16384, 1024, 1, NULL, LNTUNE_FUSION_NONE, 0},
    {0, "layernorm",
     "layout=warp,tpr=16,cluster=1,block=128,pack=4,cache=regs,stats=twopass,h=fixed,affine=none",
     256, 65536, 0, NULL, LNTUNE_FUSION_NONE, 0},
    {1, "rmsnorm",
     "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=regs,stats=sumsq,h=fixed,affine=fused",
     1024, 512, 1, NULL, LNTUNE_FUSION_NONE, 0},
    {0, "layernorm",
     "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=regs,stats=twopass,h=fixed,"
     "affine=fused",
     4096, 16384, 1, "bf16", LNTUNE_FUSION_RESIDUAL_OUT, 0},
    {0, "rmsnorm",
     "layout=warp,tpr=32,cluster=1,block=128,pack=8,cache=regs,stats=sumsq,h=fixed,affine=fused",
     1024, 4096, 1, "f16/f16/f32", LNTUNE_FUSION_NONE, 0},
    {0, "layernorm",
     "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=smem,stats=welford,h=runtime,"
     "affine=none",
     2048, 4096, 0, "bf16/bf16/bf16/f32", LNTUNE_FUSION_RESIDUAL, 0},
    {0, "rmsnorm",
     "layout=block,tpr=32,cluster=1,block=256,pack=4,cache=smem,stats=sumsq,h=runtime,"
     "affine=offset",
     2048, 4096, 1, NULL, LNTUNE_FUSION_NONE, 1},
    {0, "rmsnorm",
     "layout=block,tpr=32,cluster=1,block=512,pack=8,cache=smem,stats=sumsq,h=runtime,"
     "affine=fused",
     4096, 4096, 1, "bf16/i8row/bf16", LNTUNE_FUSION_NONE, 0},
    {0, "layernorm",
     "layout=warp,tpr=32,cluster=1,block=128,pack=4,cache=regs,stats=twopass,h=fixed,affine=none",
     1024, 4096, 0, "f32/e4m3", LNTUNE_FUSION_RESIDUAL, 0},
};

static int put_winner(lntune_db *db, lntune_gen *g, int64_t hw, int sm, const winner *w) {
    lntune_shape shape = {.H = w->H, .fusion = w->fusion};
    if (w->offset) shape.affine = LNTUNE_AFFINE_OFFSET;
    if (w->dtype && lntune_types_parse(w->dtype, &shape.types) != 0) return LNTUNE_EINVAL;
    lntune_source src;
    lntune_gen_set_cuda_arch(g, sm);
    int rc = lntune_gen_emit(g, "cuda", w->op, w->variant, &shape, "lntune_norm", &src);
    if (rc != LNTUNE_OK) {
        fprintf(stderr, "emit %s: %s\n", w->variant, lntune_gen_errmsg(g));
        return rc;
    }
    lntune_cuda_launch launch;
    if (lntune_cuda_launch_parse(src.text, &launch) != LNTUNE_OK) {
        fprintf(stderr, "no launch line in %s\n", w->variant);
        lntune_source_free(&src);
        return LNTUNE_ERROR;
    }
    char key[96], op[48];
    snprintf(key, sizeof key, "cuda-test-%d-%s-%s-%d-%lld-%d-%d", sm, w->op,
             w->dtype ? w->dtype : "f32", w->fusion, (long long)w->H, w->affine, w->offset);
    lntune_op_key(w->op, w->fusion, w->offset, op, sizeof op);
    static const char cubin[] = "not a cubin: export regenerates the source";
    char flags[32];
    snprintf(flags, sizeof flags, "-arch=sm_%d", sm);
    lntune_artifact art = {.key = key,
                           .source = src.text,
                           .compiler = "nvrtc 13.0",
                           .flags = flags,
                           .symbol = "lntune_norm",
                           .object = cubin,
                           .object_len = sizeof cubin,
                           .ptx = "// not PTX either"};
    lntune_db_key k = {hw, "cuda", op, w->dtype ? w->dtype : "f32", w->H, w->rows, w->affine};
    lntune_best best =
        test_best(src.variant, key, 1, w->rows, 5000.0, 2000.0, 3000.0, 1e-7, 9000.0);
    lntune_measurement m = {.variant = src.variant,
                            .template_hash = src.template_hash,
                            .status = LNTUNE_STATUS_OK,
                            .artifact_key = key,
                            .median_ns = 5000.0,
                            .gbps = 2000.0,
                            .copy_gbps = 3000.0,
                            .max_error = 1e-7};
    rc = lntune_db_put_artifact(db, &art);
    if (rc == LNTUNE_OK) rc = lntune_db_put_measurement(db, &k, &m);
    if (rc == LNTUNE_OK) rc = lntune_db_set_best(db, &k, &best);
    if (rc != LNTUNE_OK) fprintf(stderr, "%s\n", lntune_db_errmsg(db));
    lntune_source_free(&src);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) return 2;
    const int none = argc == 3 && strcmp(argv[2], "none") == 0;
    static const struct {
        const char *name;
        int sm, sms;
        int64_t l2;
        int bus;
    } models[] = {{"NVIDIA H200", 90, 132, 60 << 20, 6144},
                  {"NVIDIA A100-SXM4-80GB", 80, 108, 40 << 20, 5120}};
    remove(argv[1]);
    lntune_db *db = NULL;
    lntune_gen *g = NULL;
    int64_t hw[2];
    int rc = lntune_db_open(argv[1], 0, &db);
    if (rc == LNTUNE_OK) rc = lntune_gen_open(NULL, &g);
    for (int i = 0; rc == LNTUNE_OK && i < 2; ++i) {
        lntune_gpu_info gpu = {0};
        snprintf(gpu.name, sizeof gpu.name, "%s", models[i].name);
        gpu.sm = models[i].sm;
        gpu.multiprocessors = models[i].sms;
        gpu.l2_bytes = models[i].l2;
        gpu.bus_width_bits = models[i].bus;
        gpu.driver_version = 13000;
        lntune_gpu_info_finish(&gpu);
        rc = lntune_db_put_gpu_hardware(db, &gpu, "NVRTC 13.0", &hw[i]);
        if (rc == LNTUNE_OK) printf("gpu %s %s\n", gpu.fingerprint, gpu.name);
    }
    for (size_t i = 0; rc == LNTUNE_OK && !none && i < sizeof winners / sizeof winners[0]; ++i)
        rc = put_winner(db, g, hw[winners[i].gpu], models[winners[i].gpu].sm, &winners[i]);
    if (rc == LNTUNE_OK && !none) { /* the backward's best rows: the export regenerates them */
        static const char pair[] =
            "layout=block,tpr=32,block=256,pack=4,cache=smem,h=runtime,dgamma=partials";
        const lntune_db_key k = {hw[0], "cuda", "layernorm_backward", "f32", 4096, 16384, 1};
        const lntune_best b = test_best(pair, NULL, 1, 16384, 5000.0, 2000.0, 3000.0, 1e-7, 0);
        rc = lntune_db_set_best(db, &k, &b);
        const lntune_db_key bad = {hw[0], "cuda", "layernorm_backward+residual_out", "f32", 4096,
                                   16384, 1};
        if (rc == LNTUNE_OK) rc = lntune_db_set_best(db, &bad, &b);
    }
    if (rc != LNTUNE_OK)
        fprintf(stderr, "FAIL: %s\n", db ? lntune_db_errmsg(db) : lntune_errstr(rc));
    lntune_gen_close(g);
    lntune_db_close(db);
    return rc == LNTUNE_OK ? 0 : 1;
}
