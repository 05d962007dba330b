#!/usr/bin/env bash
# bench/gpu/device_tests.sh - prints the programs of the tests labelled `device` in BUILD_DIR's
# ctest (tests/CMakeLists.txt): those that run against the real CUDA driver when one is found,
# one path a line, each once (a quick twin and its full run share a program, which tests.sh
# runs with no argument: the full sample). The bundle ships exactly these, so a test made for
# the stand-in driver (tests/mock_cuda) never reaches a GPU machine, where it would hand host
# memory to the driver.
#
# Usage: bench/gpu/device_tests.sh [BUILD_DIR (build)]
set -euo pipefail
build=${1:-build}
ctest --test-dir "$build" -L device --show-only=json-v1 | python3 -c '
import json, sys
seen = set()
for t in json.load(sys.stdin)["tests"]:
    if t["command"][0] not in seen:
        seen.add(t["command"][0])
        print(t["command"][0])
'
