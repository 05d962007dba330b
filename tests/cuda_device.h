/*
 * cuda_device.h - the CUDA compile tests' second half, on a GPU: each sample compiled for the
 * device's compute capability is loaded and run through the verifier's suite on the device
 * (gen/verify/cuda_check.c for forward kernels, fused or not; gen/verify/cuda_check_backward.c for
 * backward pairs). Without a GPU (CI) nothing runs and the test says so; with a GPU every failure
 * counts through EXPECT (check.h), and a kernel fault stops the test, since it leaves the context
 * unusable.
 */
#ifndef LNTUNE_TEST_CUDA_DEVICE_H
#define LNTUNE_TEST_CUDA_DEVICE_H

#include "check.h"
#include "cuda_check.h"
#include "cuda_check_backward.h"
#include "cuda_driver.h"
#include "cuda_launch.h"
#include "fusion.h"
#include "lntune.h"
#include "verify.h"
#include "verify_backward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* H of the device suites: odd, one, not a multiple of a pack's threads, several blocks. */
static const int64_t device_forward_h[] = {1, 3, 17, 1000, 4096, 4097, 12288};
static const int64_t device_backward_h[] = {1, 3, 17, 768, 4097};
enum { DEVICE_MAX_FLOATS = 8 * (65536 + 16), DEVICE_MAX_H = 65536 };

typedef struct {
    lntune_cuda *cu;
    int sm;
    lntune_cuda_checker *forward;
    lntune_cuda_backward_checker *backward;
    int verified, failed;
} device_suite;

/* Opens GPU 0 for d; d->cu NULL (and a line saying why) when there is none. */
static inline void device_open(device_suite *d) {
    memset(d, 0, sizeof *d);
    int rc = lntune_cuda_open(0, &d->cu);
    if (rc != LNTUNE_OK) {
        printf("no GPU, samples not run on a device: %s\n", lntune_cuda_errmsg(d->cu));
        EXPECT(rc == LNTUNE_ENODEVICE, "CUDA open: rc %d", rc);
        lntune_cuda_close(d->cu);
        d->cu = NULL;
        return;
    }
    const lntune_cuda_info *info = lntune_cuda_get_info(d->cu);
    d->sm = info->sm;
    printf("GPU: %s, sm_%d, driver %d\n", info->name, info->sm, info->driver_version);
    EXPECT(lntune_cuda_checker_create(d->cu, DEVICE_MAX_FLOATS, DEVICE_MAX_H, &d->forward) ==
               LNTUNE_OK,
           "forward checker: %s", lntune_cuda_errmsg(d->cu));
    EXPECT(lntune_cuda_backward_checker_create(d->cu, DEVICE_MAX_FLOATS, DEVICE_MAX_H,
                                               &d->backward) == LNTUNE_OK,
           "backward checker: %s", lntune_cuda_errmsg(d->cu));
}

static inline void device_close(device_suite *d) {
    if (d->cu) printf("%d samples verified on the GPU, %d failed\n", d->verified, d->failed);
    lntune_cuda_checker_destroy(d->forward);
    lntune_cuda_backward_checker_destroy(d->backward);
    lntune_cuda_close(d->cu);
}

/* hs: fixed_h alone, else those of list up to max_h (0: any). */
static inline size_t device_h(const int64_t *list, size_t n, int64_t fixed_h, int64_t max_h,
                              int64_t *hs) {
    if (fixed_h) {
        hs[0] = fixed_h;
        return 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; ++i)
        if (!max_h || list[i] <= max_h) hs[k++] = list[i];
    return k;
}

/* Loads cubin, finds symbol (and SYMBOL_dgamma with dgamma_symbol), allows the shared memory
 * of the largest H the kernel may run. 1 on success. */
static inline int device_load(device_suite *d, const void *cubin, const char *symbol, int backward,
                              const lntune_cuda_launch *l, int64_t fixed_h, void **module,
                              void **main, void **finish, const char *what) {
    *module = *main = *finish = NULL;
    if (lntune_cuda_module_load(d->cu, cubin, symbol, module, main) != LNTUNE_OK) {
        EXPECT(0, "%s: load: %s", what, lntune_cuda_errmsg(d->cu));
        return 0;
    }
    if (backward) {
        char name[160];
        snprintf(name, sizeof name, "%s_dgamma", symbol);
        if (lntune_cuda_module_function(d->cu, *module, name, finish) != LNTUNE_OK) {
            EXPECT(0, "%s: %s: %s", what, name, lntune_cuda_errmsg(d->cu));
            return 0;
        }
    }
    const int64_t h = fixed_h ? fixed_h : l->max_h ? l->max_h : DEVICE_MAX_H;
    int64_t smem = lntune_cuda_launch_smem(l, h);
    const int64_t most = lntune_cuda_get_info(d->cu)->max_smem_per_block;
    if (smem > most) smem = most; /* a larger H is refused by the launch line's max_h */
    if (smem > 48 * 1024 && lntune_cuda_set_max_smem(d->cu, *main, smem) != LNTUNE_OK) {
        EXPECT(0, "%s: %lld bytes of shared memory: %s", what, (long long)smem,
               lntune_cuda_errmsg(d->cu));
        return 0;
    }
    return 1;
}

/* Records one sample's outcome; exits on a device fault (the context is lost). */
static inline void device_outcome(device_suite *d, int rc, const lntune_verify_result *res,
                                  const char *what) {
    d->verified++;
    if (rc == LNTUNE_OK) {
        if (getenv("LNTUNE_TEST_VERBOSE"))
            printf("ok on the GPU (%d cases, max error %.3g ulp-units): %s\n", res->cases,
                   res->max_error * (1 << 24), what);
        return;
    }
    d->failed++;
    EXPECT(0, "on the GPU: %s: %s", what, res->message);
    if (rc == LNTUNE_ENODEVICE) {
        fprintf(stderr, "stopping: the CUDA context is unusable\n");
        exit(1);
    }
}

/*
 * Verifies a forward kernel (fused with fusion, or not) on the device: source for its launch
 * line, cubin for sm. Samples for another compute capability than the GPU's are left out.
 */
static inline void device_verify_forward(device_suite *d, int sm, const char *source,
                                         const void *cubin, const char *symbol, lntune_op op,
                                         lntune_types types, int fusion, int affine,
                                         int64_t fixed_h, const char *what) {
    if (!d->cu || !d->forward || sm != d->sm) return;
    lntune_cuda_launch l;
    if (lntune_cuda_launch_parse(source, &l) != LNTUNE_OK) return; /* the compile check says so */
    int64_t hs[8];
    const size_t nh =
        device_h(device_forward_h, sizeof device_forward_h / sizeof *hs, fixed_h, l.max_h, hs);
    lntune_verifier *v = NULL;
    if (lntune_verifier_create_fused(op, types, fusion, hs, nh, 0, &v) != LNTUNE_OK) {
        EXPECT(0, "%s: verifier", what);
        return;
    }
    void *module, *main, *unused;
    if (device_load(d, cubin, symbol, 0, &l, fixed_h, &module, &main, &unused, what)) {
        lntune_verify_result res;
        const int rc = lntune_cuda_checker_run(d->forward, v, main, &l, affine, fixed_h, &res);
        device_outcome(d, rc, &res, what);
    }
    lntune_cuda_module_unload(d->cu, module);
    lntune_verifier_destroy(v);
}

/* Verifies a backward pair (fused with a residual, or not) on the device, as above. */
static inline void device_verify_backward(device_suite *d, int sm, const char *source,
                                          const void *cubin, const char *symbol, lntune_op op,
                                          lntune_types types, int fusion, int64_t fixed_h,
                                          const char *what) {
    if (!d->cu || !d->backward || sm != d->sm) return;
    lntune_cuda_backward_launch l;
    if (lntune_cuda_backward_launch_parse(source, &l) != LNTUNE_OK) return;
    int64_t hs[8];
    const size_t nh = device_h(device_backward_h, sizeof device_backward_h / sizeof *hs, fixed_h,
                               l.main.max_h, hs);
    lntune_backward_verifier *v = NULL;
    if (lntune_backward_verifier_create_fused(op, types, fusion, hs, nh, 0, &v) != LNTUNE_OK) {
        EXPECT(0, "%s: verifier", what);
        return;
    }
    void *module, *main, *finish;
    if (device_load(d, cubin, symbol, 1, &l.main, fixed_h, &module, &main, &finish, what)) {
        lntune_verify_result res;
        const int rc =
            lntune_cuda_backward_checker_run(d->backward, v, main, finish, &l, fixed_h, &res);
        device_outcome(d, rc, &res, what);
    }
    lntune_cuda_module_unload(d->cu, module);
    lntune_backward_verifier_destroy(v);
}

#endif /* LNTUNE_TEST_CUDA_DEVICE_H */
