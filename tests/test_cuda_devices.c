/*
 * test_cuda_devices.c - lntune_cuda_device_usable and lntune_cuda_local_fingerprints, by which
 * `lntune` chooses its default targets and `lntune show` finds this machine's GPUs. Checks:
 *  - the two agree: device 0 is usable exactly when a fingerprint is found; a device that is
 *    not there (63) is not usable and says why (in a build with CUDA);
 *  - with the argument "mock" (LD_LIBRARY_PATH at tests/mock_cuda's stand-in driver, one
 *    device): device 0 is usable with no message, and its fingerprint is the one the tuner
 *    keys it by (cuda_fingerprint.h), 16 hex digits; max bounds the count.
 *
 *   test_cuda_devices [mock]
 */
#include "check.h"
#include "cuda_devices.h"
#include "cuda_driver.h"
#include "cuda_fingerprint.h"
#include "lntune.h"

#include <string.h>

int main(int argc, char **argv) {
    const int mock = argc > 1 && strcmp(argv[1], "mock") == 0;
    char why[1024] = "unset", fingerprints[8][17];
    const int usable = lntune_cuda_device_usable(0, why, sizeof why);
    const int n = lntune_cuda_local_fingerprints(fingerprints, 8);
    CHECK(usable == (n > 0) && (usable ? why[0] == '\0' : 1),
          "device 0 usable: %d, %d fingerprint(s) found; %s", usable, n, why);
    const int absent = lntune_cuda_device_usable(63, why, sizeof why);
    CHECK(!absent, "device 63 is not usable: %s", why[0] ? why : "(a build without CUDA)");
    CHECK(lntune_cuda_local_fingerprints(fingerprints, 0) == 0, "max 0: no device looked at");
    if (!mock) return CHECK_SUMMARY();

    CHECK(usable && n == 1, "the stand-in driver's one device: usable %d, %d found", usable, n);
    lntune_cuda *cu = NULL;
    lntune_gpu_info g;
    memset(&g, 0, sizeof g);
    if (lntune_cuda_open(0, &cu) == LNTUNE_OK) lntune_cuda_gpu_info(lntune_cuda_get_info(cu), &g);
    lntune_cuda_close(cu);
    CHECK(n == 1 && strlen(fingerprints[0]) == 16 &&
              strspn(fingerprints[0], "0123456789abcdef") == 16 &&
              strcmp(fingerprints[0], g.fingerprint) == 0,
          "its fingerprint %s is the tuner's (%s)", n ? fingerprints[0] : "-", g.fingerprint);
    CHECK(strstr(why, "63") != NULL, "device 63 on a one-device driver: %s", why);
    return CHECK_SUMMARY();
}
