#!/usr/bin/env bash
# bench/run.sh - the CPU peer report (bench/results/cpu-*.md and .svg are curated from one) from a
# fresh clone: installs the bench dependencies if missing, builds, tunes the bench shapes into
# bench databases (1 thread and every core; minutes per shape), then runs bench_cpu, which
# measures at 1 thread and at every core in one process each and writes the report. lntune
# export's output for each database, built at -O3 -march=native as an app would, is measured
# beside them ("lntune export"). Last,
# bench/figures.py puts `lntune show`'s figures beside the bench's (PREFIX-figures.md).
#   BUILD_DIR (default build), BENCH_SKIP_TUNE=1 (use the databases as they are),
#   BENCH_ARGS (extra bench_cpu options, e.g. "--no-torch"),
#   BENCH_DTYPE=f16|bf16: x, y, gamma and beta of that type (tuned with lntune --dtype; own
#   databases; cpu-TYPE-DATE; the shapes gain issue #6's 4096x4096),
#   BENCH_SHAPES="RxH ..." (default: bench/bench.c's shapes),
#   BENCH_RESULTS=DIR (default $BUILD_DIR/bench-results: the bench databases and the report;
#   raw output stays out of the source tree),
#   BENCH_OUT=PREFIX (default $BENCH_RESULTS/cpu[-TYPE]-DATE: PREFIX.md, .svg, -t*.jsonl),
#   LNTUNE_BENCH_PEERS (default /opt/lntune-bench: oneDNN 3.x, ONNX Runtime, ggml and PyTorch,
#   bench/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
results=${BENCH_RESULTS:-$build/bench-results}
peers=${LNTUNE_BENCH_PEERS:-/opt/lntune-bench} # bench/install-deps: oneDNN 3, ORT, ggml, PyTorch

have_deps() {
    { [ -e /usr/include/dnnl.h ] || [ -e /usr/include/oneapi/dnnl/dnnl.h ]; } &&
        [ -e "$peers/lib/libdnnl.so.3" ] && "$peers/bin/python3" -c 'import torch' 2>/dev/null &&
        compgen -G "$peers/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.*" >/dev/null &&
        [ -e "$peers/ggml/lib/libggml-cpu.so" ] &&
        command -v clang-14 >/dev/null
}
if ! have_deps; then
    echo "run.sh: installing the bench dependencies (bench/install-deps)" >&2
    if [ "$(id -u)" -eq 0 ]; then
        LNTUNE_BENCH_PEERS=$peers bench/install-deps
    else
        sudo env LNTUNE_BENCH_PEERS="$peers" bench/install-deps
    fi
fi

echo "run.sh: building in $build" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLNTUNE_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target lntune bench_cpu

dtype=${BENCH_DTYPE:-f32}
case $dtype in
f32) tag= ;;
f16 | bf16) tag=-$dtype ;;
*) echo "run.sh: BENCH_DTYPE must be f32, f16 or bf16" >&2 && exit 2 ;;
esac
# The shapes of bench/bench.c (ROWSxH), or BENCH_SHAPES; 16-bit runs add issue #6's shape.
default_shapes="4096x768 4096x1024 256x16384 2048x4096 1024x8192 32768x4096 1x4096 8x4096"
[ -n "$tag" ] && default_shapes="$default_shapes 4096x4096"
read -r -a shapes <<<"${BENCH_SHAPES:-$default_shapes}"
shape_args=()
for s in "${shapes[@]}"; do shape_args+=(--shape "rows=${s%x*},H=${s#*x}"); done
shape_list=$(IFS=,; echo "${shapes[*]}")
db=$results/bench$tag.db db1=$results/bench$tag-t1.db
mkdir -p "$results"
if ! "$build/bench/bench_cpu" --has-runtime; then
    echo "run.sh: this tree has no lntune runtime yet: lntune tuned/built-in will be n/a; not tuning" >&2
elif [ "${BENCH_SKIP_TUNE:-0}" != 1 ]; then
    # The runtime runs a tuned kernel at its tuned thread count, so the 1-thread run reads a
    # database tuned with --threads 1. A second run reuses every stored measurement.
    echo "run.sh: tuning ${#shapes[@]} shapes x 2 ops ($dtype) at 1 thread -> $db1 (minutes)" >&2
    "$build/lntune" tune "${shape_args[@]}" --dtype "$dtype" --threads 1 --db "$db1"
    echo "run.sh: tuning ${#shapes[@]} shapes x 2 ops ($dtype) at every core -> $db (minutes)" >&2
    "$build/lntune" tune "${shape_args[@]}" --dtype "$dtype" --db "$db"
fi

export_args=()
if [ -e "$db" ] && [ -e "$db1" ]; then
    for which in all t1; do
        from=$db out=$build/bench-export$tag-$which
        [ "$which" = t1 ] && from=$db1
        echo "run.sh: lntune export of $from, built as $out/liblntune_kernels.so" >&2
        rm -rf "$out" && mkdir -p "$out"
        "$build/lntune" export --db "$from" --out "$out" 2>"$out/warnings" || { cat "$out/warnings" >&2; exit 1; }
        cc -std=c11 -O3 -march=native -fPIC -shared -o "$out/liblntune_kernels.so" \
            "$out/lntune_kernels.c" -pthread -lm
    done
    export_args=(--export "$build/bench-export$tag-all/liblntune_kernels.so"
        --export1 "$build/bench-export$tag-t1/liblntune_kernels.so")
fi

out=${BENCH_OUT:-$results/cpu$tag-$(date +%Y-%m-%d)}
echo "run.sh: measuring (about two minutes per thread count)" >&2
# shellcheck disable=SC2086
"$build/bench/bench_cpu" --db "$db" --db1 "$db1" "${export_args[@]}" --dtype "$dtype" \
    --shapes "$shape_list" --out "$out" ${BENCH_ARGS:-}

# What lntune show reports against what the bench measured of the same databases (figures.py).
if [ "$dtype" = f32 ] && [ -e "$db" ] && [ -e "$db1" ]; then
    "$build/lntune" show --json --db "$db1" >"$out-show-t1.json"
    "$build/lntune" show --json --db "$db" >"$out-show-all.json"
    all=$(ls "$out"-t*.jsonl | grep -v -- '-t1.jsonl$' | head -1)
    python3 bench/figures.py "$out-show-t1.json" "$out-t1.jsonl" "$out-show-all.json" "$all" \
        >"$out-figures.md" || echo "run.sh: figures.py found rows that fail: $out-figures.md" >&2
    echo "run.sh: show against the bench: $out-figures.md" >&2
fi
