/*
 * cuda_devices.h - the CUDA devices of this machine, as `lntune` and `lntune show` see them:
 * whether one device can be tuned (the default target is every device found), and the tuning
 * database's fingerprints of the GPUs here (`show` lists their winners beside the CPU's). A
 * build without CUDA (LNTUNE_CUDA=OFF) finds none, and says nothing about it.
 */
#ifndef LNTUNE_CUDA_DEVICES_H
#define LNTUNE_CUDA_DEVICES_H

#include <stddef.h>

/*
 * 1 when CUDA device `device` opens; else 0, with why in why (a build with CUDA: the driver's
 * message; without: empty).
 */
int lntune_cuda_device_usable(int device, char *why, size_t whylen);

/*
 * The fingerprints (core/hardware.h) of devices 0, 1, ... up to the first that does not
 * open, at most max; returns how many.
 */
int lntune_cuda_local_fingerprints(char (*fingerprints)[17], int max);

#endif /* LNTUNE_CUDA_DEVICES_H */
