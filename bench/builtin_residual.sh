#!/usr/bin/env bash
# bench/builtin_residual.sh - what an untuned Add & Norm call gets: bench_residual with no
# database, so that the fused call (lntune_layernorm with residual, and residual_out for Pre-LN)
# runs liblntune's residual built-in, against a residual add followed by the built-in LayerNorm
# and against the copy of the fused call's bytes, all in one process. With BASE_LIB (a directory
# holding another build's liblntune.so.0, for instance of an earlier commit), the same binary
# runs on that library too, in alternation, ROUNDS times each, so that a drift of the machine
# hits both; the table gives each cell's median over the rounds.
#   BUILD_DIR (default build-bench), BASE_LIB (none), ROUNDS (3), ROWS (4096), H (4096),
#   DTYPES (f32,bf16,f16)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
rounds=${ROUNDS:-3}
bench=$build/bench/bench_residual
[ -x "$bench" ] || { echo "builtin_residual.sh: no $bench (cmake --build $build --target bench_residual)" >&2; exit 2; }
records=$(mktemp)
trap 'rm -f "$records"' EXIT
libs=("$build")
[ -n "${BASE_LIB:-}" ] && libs=("$BASE_LIB" "$build")
for round in $(seq "$rounds"); do
    for lib in "${libs[@]}"; do
        echo "builtin_residual.sh: round $round, liblntune of $lib" >&2
        LD_LIBRARY_PATH=$lib "$bench" --db /nonexistent/lntune.db --rows "${ROWS:-4096}" \
            --H "${H:-4096}" --dtypes "${DTYPES:-f32,bf16,f16}" |
            grep '^RESULT |' | grep -v '| dtype |' | sed "s#^RESULT#$lib#" >>"$records"
    done
done
python3 - "$records" "${libs[@]}" <<'EOF'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    # LIB | dtype | residual_out | fused ms | add+LN ms (best) | (b)/(a) | fused GB/s | copy GB/s
    f = [x.strip() for x in line.split("|")]
    lib, dtype, out, fused, pair = f[0], f[1], f[2], float(f[3]), float(f[4].split()[0])
    gbps, copy = float(f[6]), float(f[7].split()[0])
    cells.setdefault((dtype, out), {}).setdefault(lib, []).append((fused, pair, copy, gbps))
libs = sys.argv[2:]
print("Untuned Add & Norm (LayerNorm, no database): milliseconds per call, median of the rounds;")
print("GB/s counts x, residual, y and residual_out (Pre-LN) once each.\n")
head = "| dtype | call |" + "".join(f" fused, {l} | add + LN, {l} |" for l in libs) + " copy GB/s |"
print(head)
print("|---|---|" + "---:|---:|" * len(libs) + "---:|")
for (dtype, out), by in sorted(cells.items()):
    row = f"| {dtype} | {'Pre-LN' if out == 'yes' else 'Post-LN'} |"
    for l in libs:
        v = by.get(l, [])
        if not v:
            row += " n/a | n/a |"
            continue
        fused = statistics.median(x[0] for x in v)
        gbps = statistics.median(x[3] for x in v)
        pair = statistics.median(x[1] for x in v)
        row += f" {fused:.2f} ms ({gbps:.1f} GB/s) | {pair:.2f} ms |"
    copies = [x[2] for l in libs for x in by.get(l, [])]
    row += f" {statistics.median(copies):.1f} |"
    print(row)
EOF
