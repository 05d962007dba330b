/*
 * cuda_devices.c - this machine's CUDA devices (see cuda_devices.h).
 */
#include "cuda_devices.h"

#include "cuda_driver.h"
#include "cuda_fingerprint.h"
#include "lntune.h"

#include <stdio.h>
#include <string.h>

int lntune_cuda_device_usable(int device, char *why, size_t whylen) {
    if (whylen) why[0] = '\0';
#ifdef LNTUNE_HAVE_CUDA
    lntune_cuda *cu = NULL;
    int rc = lntune_cuda_open(device, &cu);
    if (rc != LNTUNE_OK)
        snprintf(why, whylen, "%s", cu ? lntune_cuda_errmsg(cu) : lntune_errstr(rc));
    lntune_cuda_close(cu);
    return rc == LNTUNE_OK;
#else
    (void)device;
    return 0;
#endif
}

int lntune_cuda_local_fingerprints(char (*fingerprints)[17], int max) {
    int n = 0;
#ifdef LNTUNE_HAVE_CUDA
    for (int d = 0; d < max; ++d) {
        lntune_cuda *cu = NULL;
        if (lntune_cuda_open(d, &cu) != LNTUNE_OK) {
            lntune_cuda_close(cu);
            break;
        }
        lntune_gpu_info g;
        lntune_cuda_gpu_info(lntune_cuda_get_info(cu), &g);
        memcpy(fingerprints[n++], g.fingerprint, sizeof g.fingerprint);
        lntune_cuda_close(cu);
    }
#else
    (void)fingerprints, (void)max;
#endif
    return n;
}
