#!/usr/bin/env bash
# bench/gpu/run.sh - one prepared run on a lent GPU machine (an H200): build, run the GPU tests
# (ctest -L cuda), time every CUDA variant against a device copy and PyTorch, and write
# bench/results/h200-DATE.md. Fails loudly when anything it needs is missing; under 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "run.sh: FAILED: $*" >&2; exit 1; }
start=$(date +%s)

command -v cmake >/dev/null || fail "cmake not found"
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi -L || fail "nvidia-smi sees no GPU"
ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1 || [ -n "${LNTUNE_NVRTC:-}" ] \
  || ldconfig -p | grep -q libnvrtc || fail "no libnvrtc (install the CUDA toolkit or set LNTUNE_NVRTC)"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || fail "python3 with a CUDA build of torch is required"

build=build-gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLNTUNE_CUDA=ON >/dev/null
make -C "$build" -j"$(nproc)" >/dev/null
make -C "$build" -j"$(nproc)" cuda_bench >/dev/null

# A skipped GPU test on a GPU machine is a failure: it means the driver was not usable.
log=$(mktemp)
(cd "$build" && timeout 300 ctest -L cuda --output-on-failure) 2>&1 | tee "$log" \
  || fail "ctest -L cuda failed (see above)"
grep -q "Not Run\|Skipped" "$log" && fail "ctest -L cuda skipped a test on a GPU machine"
grep -q "tests passed" "$log" || fail "ctest -L cuda ran no test"

mkdir -p bench/results
out=bench/results/h200-$(date +%F).md
{
  echo "# lntune on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) - $(date +%F)"
  echo
  echo "Commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); produced by bench/gpu/run.sh."
  echo
  echo '```'
  grep -E "variants (compiled|verified)|sm_" "$log" || true
  echo '```'
  echo
} > "$out"
timeout 330 "$build/cuda_bench" >> "$out" || fail "cuda_bench failed"
timeout 120 python3 bench/gpu/torch_bench.py >> "$out" || fail "torch_bench.py failed"
echo "run.sh: wrote $out in $(( $(date +%s) - start )) s"
