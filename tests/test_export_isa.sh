#!/bin/sh
# test_export_isa.sh - the exported file compiles with any flags and still runs the tuned kernels
# (issue #57): export_makedb's "isa" database (winners whose code needs the ISA they were tuned
# on: 8-lane vectors passed between functions, AVX's non-temporal stores, F16C, AVX-512 F,
# AVX512-BF16, each where this CPU has it) exported with --cmake, then lntune_kernels.c compiled
# with no -m flag at all:
#   gcc -O2 -Wall -Werror (the command that failed on -Wpsabi before the target attributes),
#   gcc -std=c11 -O2 -Wall -Wextra -Werror -DLNTUNE_KERNELS_FORCE_GENERIC,
#   clang -std=c11 -O2 -Wall -Wextra -Werror (where a clang is installed),
# each with -DLNTUNE_KERNELS_TRACE, and `export_driver isa` run against the float64 reference:
# every winner's shape served by its tuned kernel, except under FORCE_GENERIC (the dispatch's path
# on a CPU without the tuned kernels' ISA), where the generic kernels serve it. The exported
# CMakeLists.txt asks for no -march.
#
#   test_export_isa.sh LNTUNE MAKEDB SOURCE_DIR SCRATCH_DIR
set -eu
lntune=$1 makedb=$2 src=$3 dir=$4/export-isa
source_dirs=""
for d in runtime core core/cuda core/tuning_db gen/template gen/compile gen/verify gen/tune gen/export; do
    source_dirs="$source_dirs -I$src/$d"
done
rm -rf "$dir"
mkdir -p "$dir/out"
step() { echo "case: $*"; }

step "a database of winners that need this machine's ISA"
"$makedb" "$dir/isa.db" isa "$dir/cases"
step "lntune export --cmake, with no warning"
"$lntune" export --out "$dir/out" --db "$dir/isa.db" --cmake 2> "$dir/warnings"
if [ -s "$dir/warnings" ]; then cat "$dir/warnings"; echo "FAIL: warnings"; exit 1; fi

clang=
for c in clang clang-14; do
    if command -v $c >/dev/null; then clang=$c; break; fi
done
for build in "gcc -O2 -Wall -Werror" \
             "gcc -std=c11 -O2 -Wall -Wextra -Werror -DLNTUNE_KERNELS_FORCE_GENERIC" \
             ${clang:+"$clang -std=c11 -O2 -Wall -Wextra -Werror"}; do
    cc=${build%% *}
    case $build in
    *FORCE_GENERIC*) tag=${cc}_generic ;;
    *) tag=$cc ;;
    esac
    step "$build -c lntune_kernels.c, then the driver against the reference"
    # shellcheck disable=SC2086 # build is a command line
    $build -DLNTUNE_KERNELS_TRACE=lntune_test_trace -c "$dir/out/lntune_kernels.c" -o "$dir/k_$tag.o"
    defs=
    case $build in *FORCE_GENERIC*) defs=-DLNTUNE_KERNELS_FORCE_GENERIC ;; esac
    # shellcheck disable=SC2086
    $cc -std=c11 -O2 $defs -DLNTUNE_KERNELS_TRACE=lntune_test_trace -Wall -Wextra -Werror \
        -I"$dir/out" $source_dirs -I"$src/tests" "$src/tests/export_driver.c" \
        "$src/gen/verify/reference.c" "$dir/k_$tag.o" -pthread -lm -o "$dir/driver_$tag"
    "$dir/driver_$tag" isa "$dir/cases" > "$dir/driver_$tag.log" ||
        { cat "$dir/driver_$tag.log"; exit 1; }
    cat "$dir/driver_$tag.log"
done
[ -n "$clang" ] || echo "note: no clang installed; built with gcc only"
grep -v "^#" "$dir/out/CMakeLists.txt" | grep -q -- "-march" &&
    { echo "FAIL: the exported CMakeLists.txt compiles with -march"; exit 1; }
echo "ok  : CMakeLists.txt without -march"
echo "ok  : the export compiles without -m flags and runs its tuned kernels"
