#!/usr/bin/env bash
# bench/run.sh - reproduces bench/results/cpu-DATE.md and .svg from a fresh clone: installs the
# bench dependencies if missing, builds, tunes the bench shapes into bench databases (1 thread
# and every core; minutes per shape), then runs bench_cpu, which measures at 1 thread and at
# every core in one process each and writes the report.
#   BUILD_DIR (default build), BENCH_SKIP_TUNE=1 (use the databases as they are),
#   BENCH_ARGS (extra bench_cpu options, e.g. "--no-torch").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
results=bench/results

have_deps() {
    { [ -e /usr/include/dnnl.h ] || [ -e /usr/include/oneapi/dnnl/dnnl.h ]; } &&
        /usr/bin/python3 -c 'import torch' 2>/dev/null && command -v clang-14 >/dev/null
}
if ! have_deps; then
    echo "run.sh: installing the bench dependencies (bench/install-deps)" >&2
    if [ "$(id -u)" -eq 0 ]; then bench/install-deps; else sudo bench/install-deps; fi
fi

echo "run.sh: building in $build" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLNTUNE_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target lntune bench_cpu

# The shapes of bench/bench.c, for the tuner.
shapes=(rows=4096,H=768 rows=4096,H=1024 rows=256,H=16384 rows=2048,H=4096 rows=1024,H=8192
        rows=32768,H=4096 rows=1,H=4096 rows=8,H=4096)
shape_args=()
for s in "${shapes[@]}"; do shape_args+=(--shape "$s"); done
mkdir -p "$results"
if ! "$build/bench/bench_cpu" --has-runtime; then
    echo "run.sh: this tree has no lntune runtime yet: lntune tuned/built-in will be n/a; not tuning" >&2
elif [ "${BENCH_SKIP_TUNE:-0}" != 1 ]; then
    # The runtime runs a tuned kernel at its tuned thread count, so the 1-thread run reads a
    # database tuned with --threads 1. A second run reuses every stored measurement.
    echo "run.sh: tuning ${#shapes[@]} shapes x 2 ops at 1 thread -> $results/bench-t1.db (minutes)" >&2
    "$build/lntune" tune "${shape_args[@]}" --threads 1 --db "$results/bench-t1.db"
    echo "run.sh: tuning ${#shapes[@]} shapes x 2 ops at every core -> $results/bench.db (minutes)" >&2
    "$build/lntune" tune "${shape_args[@]}" --db "$results/bench.db"
fi

echo "run.sh: measuring (about two minutes per thread count)" >&2
# shellcheck disable=SC2086
"$build/bench/bench_cpu" --db "$results/bench.db" --db1 "$results/bench-t1.db" \
    --out "$results/cpu-$(date +%Y-%m-%d)" ${BENCH_ARGS:-}
