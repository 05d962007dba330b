/*
 * heartbeat.c - the liveness signal of a sandbox worker (see heartbeat.h).
 */
#include "heartbeat.h"

#include <stddef.h>

/* Set in a worker only. */
static lntune_heartbeat_shared *g_shared;
static const int64_t *g_map;

void lntune_heartbeat_attach(lntune_heartbeat_shared *shared) {
    g_shared = shared;
}

void lntune_heartbeat_map(const int64_t *map) {
    g_map = g_shared ? map : NULL;
}

void lntune_heartbeat(int64_t index) {
    if (!g_shared) return;
    if (index >= 0 && g_map) g_shared->current = g_map[index];
    g_shared->beat++;
}

void lntune_heartbeat_idle(void) {
    if (g_shared) g_shared->current = -1;
}
