#!/usr/bin/env bash
# bench/gpu/quant.sh - one prepared run on a GPU machine for the fused norm + quantization
# (issue 39's CUDA figure): lntune's CUDA tuner on RMSNorm whose y is int8 or fp8 e4m3 codes
# with a scale per row, fp32 and bf16 x, at rows 2048 and 16384, H = 4096; then
# bench/gpu/quant_bench.py times, in one process, the tuned kernels, the built-ins, PyTorch's
# norm then quantization, Liger's norm then the same quantization, and the device copy of the
# same bytes. Writes $BENCH_RESULTS/<gpu>-quant-DATE.md (default build/bench-results, out of the
# source tree) with `lntune show`'s stored figures beside the bench's (and a copy under $OUT when
# set). About 4 minutes on an H200.
#
# Usage: bench/gpu/quant.sh BIN_DIR   (a bundle from bench/gpu/bundle.sh, or a build folder)
# Liger-Kernel comes from BIN_DIR/wheels (bundle.sh downloads its pure-Python wheel: the GPU
# machine has no network); it needs the Triton that the GPU machine's PyTorch brings.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
fail() { echo "quant.sh: FAILED: $*" >&2; exit 1; }
bin=$(cd "${1:?usage: bench/gpu/quant.sh BIN_DIR}" && pwd) || fail "no folder $1"
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -f "$bin/COMMIT" ]; then LNTUNE_COMMIT=$(cat "$bin/COMMIT"); export LNTUNE_COMMIT; fi
lib="$bin/liblntune.so.0"
[ -f "$lib" ] || lib="$bin/liblntune.so"
[ -f "$lib" ] || fail "no liblntune in $bin"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || fail "python3 with a CUDA build of torch is required"
work=$(mktemp -d)
out=${OUT:-$work}
db="$work/quant.db"
start=$(date +%s)
# shellcheck disable=SC2054 # rows=...,H=... is one argument
shapes=(--shape rows=2048,H=4096 --shape rows=16384,H=4096)
: >"$out/quant.json"
for dtype in f32/i8row bf16/i8row/bf16 f32/e4m3row bf16/e4m3row/bf16; do
    echo "== tune rmsnorm --dtype $dtype at $(( $(date +%s) - start )) s"
    timeout 150 "$bin/lntune" --target cuda --op rmsnorm --rigor measure --db "$db" \
        "${shapes[@]}" --dtype "$dtype" --json >>"$out/quant.json" 2>>"$out/quant.err" \
        || { tail -3 "$out/quant.err"; fail "tune $dtype"; }
done
"$bin/lntune" show --db "$db" >"$out/quant-show.txt" 2>&1
wheel=$(find "$bin/wheels" -name 'liger_kernel-*.whl' 2>/dev/null | head -1)
if [ -n "$wheel" ]; then
    python3 -m zipfile -e "$wheel" "$work/py" && export PYTHONPATH="$work/py${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "== bench at $(( $(date +%s) - start )) s"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/quant_bench.py --lib "$lib" --db "$db" \
    --out "$work/table.md" || fail "quant_bench.py"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 |
    sed 's/^NVIDIA //; s/ .*//' | tr '[:upper:]' '[:lower:]')
results=${BENCH_RESULTS:-build/bench-results}
mkdir -p "$results"
res=$results/${gpu:-gpu}-quant-$(date +%F).md
{
    cat "$work/table.md"
    echo
    echo "Commit ${LNTUNE_COMMIT:-unknown}; made by bench/gpu/quant.sh. What the tuner stored"
    echo "for the same shapes (\`lntune show\`: its median time, GB/s and copy in its own run):"
    echo
    echo '```'
    cat "$out/quant-show.txt"
    echo '```'
} >"$res"
cp "$res" "$out/"
cat "$res"
echo "quant.sh: wrote $res in $(( $(date +%s) - start )) s"
