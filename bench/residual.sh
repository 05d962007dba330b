#!/bin/sh
# bench/residual.sh - the fused residual bench from a fresh clone: builds lntune, tunes fused
# (--residual, --residual=noout) and unfused LayerNorm at rows=4096, H=4096 for fp32 and bf16
# into $BENCH_RESULTS/residual.db (default build/bench-results, out of the source tree; minutes
# per shape; BENCH_SKIP_TUNE=1 reuses it), then runs build/bench/bench_residual on that database
# (LNTUNE_LOG=debug shows which calls ran tuned kernels) and prints /proc/loadavg before and
# after.
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target lntune bench_residual >/dev/null
results=${BENCH_RESULTS:-build/bench-results}
mkdir -p "$results"
db=$results/residual.db
if [ "${BENCH_SKIP_TUNE:-0}" != 1 ]; then
  for dtype in f32 bf16; do
    for fusion in --residual --residual=noout ""; do
      # shellcheck disable=SC2086 # an empty $fusion is no argument
      ./build/lntune --op layernorm --dtype "$dtype" $fusion --shape rows=4096,H=4096 \
        --target cpu --db "$db"
    done
  done
fi
echo "loadavg before: $(cat /proc/loadavg)"
LNTUNE_LOG=debug ./build/bench/bench_residual --db "$db" --rows 4096 --H 4096 --reps 7 --rep-ms 50 \
  --dtypes f32,bf16
echo "loadavg after: $(cat /proc/loadavg)"
