/*
 * cuda_fingerprint.h - the tuning database's description of a CUDA device (core/hardware.h)
 * from what the driver reports (cuda_driver.h): the tuner, the runtime and the CLI must agree on
 * it to the bit, so there is one conversion.
 */
#ifndef LNTUNE_CUDA_FINGERPRINT_H
#define LNTUNE_CUDA_FINGERPRINT_H

#include "cuda_driver.h"
#include "hardware.h"

#include <stdio.h>
#include <string.h>

/* Fills *g from the driver's facts, fingerprint included. */
static inline void lntune_cuda_gpu_info(const lntune_cuda_info *in, lntune_gpu_info *g) {
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", in->name);
    g->sm = in->sm;
    g->multiprocessors = in->multiprocessors;
    g->l2_bytes = in->l2_bytes;
    g->bus_width_bits = in->bus_width_bits;
    g->driver_version = in->driver_version;
    lntune_gpu_info_finish(g);
}

#endif /* LNTUNE_CUDA_FINGERPRINT_H */
