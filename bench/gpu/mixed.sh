#!/usr/bin/env bash
# bench/gpu/mixed.sh - one prepared run on a GPU machine: lntune's CUDA tuner on fp16/bf16 data
# and on the fused residual add (Add & Norm) at rows=16384, H=4096, for LayerNorm and RMSNorm,
# next to fp32; then PyTorch on the same problems (bench/gpu/torch_mixed.py); writes
# $BENCH_RESULTS/h200-mixed-DATE.md (default build/bench-results, out of the source tree; and a
# copy under $OUT). About 3 minutes on an H200.
#
# Usage: bench/gpu/mixed.sh BIN_DIR   (a bundle from bench/gpu/bundle.sh, or a build folder)
set -uo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "mixed.sh: FAILED: $*" >&2; exit 1; }
bin=$(cd "$1" && pwd) || fail "no folder $1"
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -f "$bin/COMMIT" ] && export LNTUNE_COMMIT=$(cat "$bin/COMMIT")
work=$(mktemp -d)
out=${OUT:-$work}
db="$work/mixed.db"
start=$(date +%s)
shape=(--shape rows=16384,H=4096)
: >"$out/mixed.json"
for case in "f32" "bf16" "f16" "f32 --residual" "bf16 --residual"; do
    set -- $case
    echo "== tune --dtype $case at $(( $(date +%s) - start )) s"
    timeout 240 "$bin/lntune" --target cuda --rigor exhaustive --db "$db" "${shape[@]}" --dtype "$@" --json \
        >>"$out/mixed.json" 2>>"$out/mixed.err" || { tail -3 "$out/mixed.err"; fail "tune $case"; }
done
"$bin/lntune" show --db "$db" >"$out/mixed-show.txt" 2>&1
echo "== torch at $(( $(date +%s) - start )) s"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/torch_mixed.py 16384 4096 >"$out/torch_mixed.json" \
    || fail "torch_mixed.py"
results=${BENCH_RESULTS:-build/bench-results}
mkdir -p "$results"
res=$results/h200-mixed-$(date +%F).md
python3 bench/gpu/report_mixed.py "$out" >"$res" || fail "report_mixed.py"
cp "$res" "$out/"
cat "$res"
echo "mixed.sh: wrote $res in $(( $(date +%s) - start )) s"
