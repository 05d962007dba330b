#!/usr/bin/env bash
# bench/gpu/run.sh - one prepared run on a GPU machine (the lent H200): the GPU tests, then
# `lntune --target cuda` at H = 768, 1024, 4096, 8192, 16384 (rows 16384, then rows 1 and 8),
# a second run that must reuse everything, the backward at H = 4096 (its table in
# $OUT/tune_backward.txt, not in the report), the export, and PyTorch on the same shapes; writes
# $BENCH_RESULTS/h200-DATE.md (default build/bench-results, out of the source tree; and a copy
# under $OUT when set). About 8 minutes on an H200.
#
# Usage: bench/gpu/run.sh [BUNDLE_DIR]
#   BUNDLE_DIR: programs packed here by bench/gpu/bundle.sh (for a machine without Lua, LLVM or
#   SQLite); without it the project is built with CMake first.
set -uo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "run.sh: FAILED: $*" >&2; exit 1; }
start=$(date +%s)
work=$(mktemp -d)
out=${OUT:-$work}

command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi -L || fail "nvidia-smi sees no GPU"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || fail "python3 with a CUDA build of torch is required"

if [ -n "${1:-}" ]; then
    bin=$(cd "$1" && pwd)
    export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ -f "$bin/COMMIT" ] && export LNTUNE_COMMIT=$(cat "$bin/COMMIT")
    tests=$(sed "s|^|$bin/|" "$bin/DEVICE_TESTS" 2>/dev/null) # bench/gpu/bundle.sh
else
    command -v cmake >/dev/null || fail "cmake not found (or give a bundle: bench/gpu/bundle.sh)"
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null || fail "cmake"
    cmake --build build-gpu -j"$(nproc)" >/dev/null || fail "build"
    cmake --build build-gpu -j"$(nproc)" --target cuda_bench >/dev/null || fail "build cuda_bench"
    bin=build-gpu
    tests=$(bench/gpu/device_tests.sh build-gpu) # label device: never a stand-in-driver test
fi

# A skipped GPU test on a GPU machine is a failure: it means the driver was not usable.
: >"$out/tests.log"
for t in $tests; do
    echo "== $(basename "$t")" | tee -a "$out/tests.log"
    mkdir -p "$work/scratch" && timeout 200 "$t" "$work/scratch" >>"$out/tests.log" 2>&1
    rc=$?
    echo "== $(basename "$t"): exit $rc" | tee -a "$out/tests.log"
    grep -E "verified|FAIL|passed|failed" "$out/tests.log" | tail -5
done

db="$work/tune.db"
shapes=(--shape rows=16384,H=768,1024,4096,8192,16384 --shape rows=1,8,H=768,1024,4096,8192,16384)
echo "== tune at $(( $(date +%s) - start )) s"
t0=$(date +%s.%N)
timeout 300 "$bin/lntune" --target cuda --rigor exhaustive --db "$db" "${shapes[@]}" --json >"$out/tune.json" \
    2>"$out/tune.err" || { cat "$out/tune.err"; fail "lntune --target cuda"; }
t1=$(date +%s.%N)
timeout 60 "$bin/lntune" --target cuda --rigor exhaustive --db "$db" "${shapes[@]}" >"$out/tune2.txt" 2>&1 \
    || fail "second tuning run"
t2=$(date +%s.%N)
cat "$out/tune2.txt"
"$bin/lntune" show --all --db "$db" >"$out/show.txt" 2>&1
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "first run %.1f s, second run %.2f s\n", b - a, c - b }' \
    | tee "$out/runs.txt"

echo "== backward tune at $(( $(date +%s) - start )) s"
timeout 150 "$bin/lntune" --target cuda --backward --db "$db" --shape rows=16384,H=4096 \
    >"$out/tune_backward.txt" 2>&1
echo "backward tune: exit $?" | tee -a "$out/tune_backward.txt"
tail -4 "$out/tune_backward.txt"

# The winners as static CUDA (lntune export), built with nvcc and run by examples/export_cuda.c.
echo "== export at $(( $(date +%s) - start )) s"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_home=$(dirname "$(dirname "$nvcc")")
{
    mkdir -p "$work/export" && "$bin/lntune" export --out "$work/export" --db "$db" \
        && "$nvcc" -std=c++17 -arch=sm_90 -c "$work/export/lntune_kernels.cu" -o "$work/k.o" \
        && cc -std=c11 -I"$work/export" -I"$cuda_home/include" examples/export_cuda.c "$work/k.o" \
            -L"$cuda_home/lib64" -lcudart -lstdc++ -lm -o "$work/export_cuda" \
        && timeout 60 "$work/export_cuda"
    echo "export_cuda: exit $?"
} >"$out/export.txt" 2>&1
tail -3 "$out/export.txt"

echo "== torch at $(( $(date +%s) - start )) s"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/torch_bench.py --json >"$out/torch.json" \
    || fail "torch_bench.py"
results=${BENCH_RESULTS:-build/bench-results}
mkdir -p "$results"
res=$results/h200-$(date +%F).md
python3 bench/gpu/report.py "$out" >"$res" || fail "report.py"
cp "$res" "$out/" 2>/dev/null
cat "$res"
echo "run.sh: wrote $res in $(( $(date +%s) - start )) s"
