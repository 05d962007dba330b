/*
 * heartbeat.h - the liveness signal of a sandbox worker (sandbox.h). The verifier and the timer
 * call lntune_heartbeat before every kernel call; in a worker it bumps a counter in the memory
 * the parent watches and names the candidate about to run, so that a crash or a hang is blamed
 * on it. Outside a worker (the tuner's own process, LNTUNE_SANDBOX=off) it does nothing.
 *
 * Its own file, in gen/common/ beside timing.c, so that verify.c and timing.c, which the sandbox
 * runs, call back neither into sandbox.c nor into a later stage.
 */
#ifndef LNTUNE_HEARTBEAT_H
#define LNTUNE_HEARTBEAT_H

#include <stdint.h>

/* Shared between the parent and its worker. */
typedef struct lntune_heartbeat_shared {
    volatile int64_t current; /* the item running, -1 none */
    volatile uint64_t beat;   /* bumped before every kernel call */
} lntune_heartbeat_shared;

/* In a freshly forked worker: where its heartbeats go. */
void lntune_heartbeat_attach(lntune_heartbeat_shared *shared);

/* The batch's candidate index -> item map for the calls that follow (NULL: none). */
void lntune_heartbeat_map(const int64_t *map);

/* A heartbeat; index >= 0 names the candidate of the current batch about to run. */
void lntune_heartbeat(int64_t index);

/* No item running now (the worker finished its batch). */
void lntune_heartbeat_idle(void);

#endif /* LNTUNE_HEARTBEAT_H */
