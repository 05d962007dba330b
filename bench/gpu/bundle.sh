#!/usr/bin/env bash
# bench/gpu/bundle.sh - packs lntune's GPU programs, built here, for a GPU machine that has the
# NVIDIA driver and the CUDA toolkit but none of lntune's build dependencies and no network (the
# lent H200): the programs, the shared libraries such a machine may lack (Lua, SQLite,
# liblntune), and empty stand-ins with the right names for two libraries the GPU path never
# calls (LLVM 14: the CPU JIT; oneDNN: `lntune bench`), so that the dynamic loader starts the
# programs. A CPU tune run from this bundle would stop at its first JIT call: use it for CUDA.
#
# Usage: bench/gpu/bundle.sh [BUILD_DIR (build)] [OUT_DIR (BUILD_DIR/gpu-bundle)]
# then, there: bench/gpu/run.sh OUT_DIR (or mixed.sh, quant.sh). OUT_DIR is emptied first; its
# default lies in the build folder, out of the source tree (ship it from there, or name another).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-$build/gpu-bundle}
cmake --build "$build" -j"$(nproc)" --target lntune cuda_bench >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null # the tests
rm -rf "$out"
mkdir -p "$out"
cp "$build/lntune" "$build/cuda_bench" "$out/"
# The tests that run on a real GPU (ctest label device), named in DEVICE_TESTS for tests.sh.
bench/gpu/device_tests.sh "$build" >"$out/DEVICE_TESTS.paths"
[ -s "$out/DEVICE_TESTS.paths" ] || { echo "bundle.sh: no device tests in $build" >&2; exit 1; }
while read -r t; do
    cp "$t" "$out/"
    basename "$t" >>"$out/DEVICE_TESTS"
done <"$out/DEVICE_TESTS.paths"
rm "$out/DEVICE_TESTS.paths"
cp -L "$build/liblntune.so.0" "$out/"
for lib in liblua5.4.so.0 libsqlite3.so.0 libgomp.so.1; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !n++ {print $NF}')
    [ -n "$path" ] || { echo "bundle.sh: $lib not found" >&2; exit 1; }
    cp -L "$path" "$out/"
done
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
echo 'void lntune_stub(void) {}' >"$stub/stub.c"
echo 'LLVM_14 { global: lntune_stub; local: *; };' >"$stub/llvm.map"
cc -shared -fPIC -o "$out/libLLVM-14.so.1" -Wl,-soname,libLLVM-14.so.1 \
    -Wl,--version-script="$stub/llvm.map" "$stub/stub.c"
cc -shared -fPIC -o "$out/libdnnl.so.2" -Wl,-soname,libdnnl.so.2 "$stub/stub.c"
# Liger-Kernel, pure Python, for bench/gpu/quant.sh (the GPU machine has no network): the wheel
# alone; it runs on the Triton that comes with the GPU machine's PyTorch.
if ! python3 -m pip download -q --no-deps --disable-pip-version-check -d "$out/wheels" \
    liger-kernel==0.8.5 >/dev/null 2>&1; then
    echo "bundle.sh: Liger-Kernel's wheel could not be downloaded; quant.sh reports Liger n/a" >&2
fi
git rev-parse --short HEAD >"$out/COMMIT" 2>/dev/null || true
LD_LIBRARY_PATH="$out" "$out/lntune" --version >/dev/null
du -sh "$out"
