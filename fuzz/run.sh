#!/usr/bin/env bash
# fuzz/run.sh [SECONDS] - builds the libFuzzer targets with clang-14 (AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/ and runs each for SECONDS (default 20) from the
# committed corpus in fuzz/corpus/<target>/. New inputs go to a scratch directory, so the
# committed corpus only changes by hand; a crash leaves its input in build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
CC=${FUZZ_CC:-clang-14} cmake -S . -B build-fuzz -DLNTUNE_FUZZ=ON -DLNTUNE_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_shape fuzz_variant fuzz_db fuzz_wisdom
mkdir -p build-fuzz/crashes
status=0
for target in shape variant db wisdom; do
    scratch=$(mktemp -d)
    echo "fuzz_$target: ${seconds}s"
    # LLVM (the JIT's shared library) keeps allocations until exit: not leaks of ours.
    if ! ASAN_OPTIONS=detect_leaks=0 build-fuzz/fuzz/fuzz_$target -max_total_time="$seconds" \
        -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/crashes/$target- "$scratch" "fuzz/corpus/$target"; then
        echo "fuzz_$target FAILED; the input is in build-fuzz/crashes/"
        status=1
    fi
    rm -rf "$scratch"
done
exit $status
