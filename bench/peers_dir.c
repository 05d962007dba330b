/*
 * peers_dir.c - where bench/install-deps put the peers (see bench.h), in a file of its own so that
 * bench_residual, which links none of bench_cpu's runner, finds ONNX Runtime there too.
 */
#include "bench.h"

#include <stdlib.h>

#ifndef LNTUNE_BENCH_PEERS_DIR
#define LNTUNE_BENCH_PEERS_DIR ""
#endif

const char *lntune_bench_peers_dir(void) {
    const char *dir = getenv("LNTUNE_BENCH_PEERS");
    if (dir && dir[0]) return dir;
    return LNTUNE_BENCH_PEERS_DIR[0] ? LNTUNE_BENCH_PEERS_DIR : "/opt/lntune-bench";
}
