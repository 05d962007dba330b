/*
 * nvrtc_check.h - what every CUDA compile test does with NVRTC: open it (or skip the test where
 * none loads), and check one compile's output: no error, a cubin and its PTX, the kernel's
 * .entry in the PTX and its name in the cubin. Its includer defines _GNU_SOURCE (memmem) before
 * any include.
 */
#ifndef LNTUNE_TEST_NVRTC_CHECK_H
#define LNTUNE_TEST_NVRTC_CHECK_H

#include "check.h"
#include "lntune.h"
#include "nvrtc.h"

#include <stdio.h>
#include <string.h>

/* Opens NVRTC into *nv: 0, or the exit code the test returns now (77: skipped, 1: failed). */
static inline int nvrtc_check_open(lntune_nvrtc **nv) {
    const int rc = lntune_nvrtc_open(nv);
    if (rc == LNTUNE_ENODEVICE) {
        printf("skipped: %s\n", lntune_nvrtc_errmsg(*nv));
        lntune_nvrtc_close(*nv);
        return 77;
    }
    EXPECT(rc == LNTUNE_OK, "open: %s", lntune_nvrtc_errmsg(*nv));
    if (rc != LNTUNE_OK) return 1;
    printf("%s\n", lntune_nvrtc_describe(*nv));
    return 0;
}

/* Whether NVRTC loads, for a test whose code under test opens its own: 0, or the exit code the
 * test returns now (77: skipped, 1: failed). */
static inline int nvrtc_check_present(void) {
    lntune_nvrtc *nv = NULL;
    const int rc = nvrtc_check_open(&nv);
    if (rc == 0) lntune_nvrtc_close(nv);
    return rc;
}

/* The entry point symbol (and symbol_dgamma too, with both) compiled in job's cubin and PTX;
 * 1 when the PTX is there for further checks. */
static inline int nvrtc_check_compiled(const lntune_nvrtc_job *job, const char *symbol, int both,
                                       const char *what) {
    const lntune_nvrtc_output *out = &job->out;
    if (job->rc != LNTUNE_OK) {
        EXPECT(0, "%s: rc %d\n%s", what, job->rc, out->message ? out->message : "");
        return 0;
    }
    EXPECT(out->len > 0 && out->ptx_len > 0, "%s: cubin %zu bytes, PTX %zu bytes", what, out->len,
           out->ptx_len);
    for (int k = 0; k < (both ? 2 : 1); ++k) {
        char name[192], entry[208];
        snprintf(name, sizeof name, "%s%s", symbol, k ? "_dgamma" : "");
        snprintf(entry, sizeof entry, ".entry %s(", name);
        EXPECT(out->ptx && strstr(out->ptx, entry), "%s: no '%s' in the PTX", what, entry);
        EXPECT(out->data && memmem(out->data, out->len, name, strlen(name) + 1),
               "%s: no symbol %s in the cubin", what, name);
    }
    return out->ptx != NULL;
}

/* The test's exit code from check_failures, with its last line. */
static inline int nvrtc_check_exit(void) {
    if (check_failures) {
        fprintf(stderr, "%d failure(s)\n", check_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}

#endif /* LNTUNE_TEST_NVRTC_CHECK_H */
