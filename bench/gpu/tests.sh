#!/usr/bin/env bash
# bench/gpu/tests.sh - runs lntune's GPU tests on a GPU machine, from a bundle
# (bench/gpu/bundle.sh) or a build folder, each under a time limit; appends every test's output
# to $OUT/tests.log (or BIN_DIR/gpu-tests.log without OUT) and prints each one's last lines and
# exit code. Exits 1 if any test failed, was skipped (on a GPU machine a skip means the driver was
# not usable) or ran out of time.
#
# Usage: bench/gpu/tests.sh BIN_DIR [SECONDS_EACH (200)] [TEST ...]
#   TEST: program names in BIN_DIR (default: those BIN_DIR/DEVICE_TESTS names, which
#   bench/gpu/bundle.sh writes: the tests labelled `device`, never a stand-in-driver test).
set -uo pipefail
bin=$(cd "$1" && pwd) || exit 1
limit=${2:-200}
shift $(($# < 2 ? $# : 2))
log=${OUT:-$bin}/$([ -n "${OUT:-}" ] && echo tests.log || echo gpu-tests.log)
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
    [ -s "$bin/DEVICE_TESTS" ] || { echo "tests.sh: no $bin/DEVICE_TESTS (bench/gpu/bundle.sh)" >&2; exit 1; }
    mapfile -t tests <"$bin/DEVICE_TESTS"
fi
scratch=$(mktemp -d)
failed=0
for t in "${tests[@]}"; do
    start=$(date +%s.%N)
    echo "== $t" >>"$log"
    timeout "$limit" "$bin/$t" "$scratch" >>"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "== $t: exit $rc in $secs s" >>"$log"
    # This test's lines: failures first (up to 8), then its closing lines.
    sed -n "/^== $t\$/,\$p" "$log" | grep -E "FAIL|expected|stopping" | head -8
    sed -n "/^== $t\$/,\$p" "$log" | tail -4
    [ "$rc" -eq 0 ] || failed=1
done
rm -rf "$scratch"
exit $failed
