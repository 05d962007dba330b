#!/usr/bin/env bash
# bench/builtin_levels.sh - what an untuned shape gets: liblntune's built-in kernels, generic
# (LNTUNE_BUILTIN_ISA=generic) against the copy the CPU picks (AVX-512 or AVX2 where it has it;
# LEVELS="avx2 auto" compares those two instead), each
# against the copy of the same bytes measured in the same bench_cpu process. The two levels run
# in alternation, ROUNDS times each, so that a drift of the machine hits both; the table gives
# each cell's median over the rounds.
#   BUILD_DIR (default build-bench, configured with -DLNTUNE_BUILD_BENCH=ON), ROUNDS (3),
#   THREADS (every core), SHAPES ("4096x4096 2048x4096 2048x1024 1x4096"), DTYPES ("f32 bf16 f16"),
#   LEVELS ("generic auto": LNTUNE_BUILTIN_ISA values, the first the baseline)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
rounds=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
shapes=${SHAPES:-4096x4096 2048x4096 2048x1024 1x4096}
dtypes=${DTYPES:-f32 bf16 f16}
levels=${LEVELS:-generic auto}
bench=$build/bench/bench_cpu
[ -x "$bench" ] || { echo "builtin_levels.sh: no $bench (cmake -DLNTUNE_BUILD_BENCH=ON)" >&2; exit 2; }
records=$(mktemp)
trap 'rm -f "$records"' EXIT
# No database: every shape runs a built-in.
for dtype in $dtypes; do
    for round in $(seq "$rounds"); do
        for level in $levels; do
            echo "builtin_levels.sh: $dtype, round $round, $level" >&2
            LNTUNE_BUILTIN_ISA=$level "$bench" --threads "$threads" --no-torch \
                --db /nonexistent/lntune.db --dtype "$dtype" --shapes "${shapes// /,}" |
                sed "s/^{/{\"level\":\"$level\",\"round\":$round,/" >>"$records"
        done
    done
done
python3 - "$records" "$threads" $levels <<'EOF'
import json, statistics, sys
base, other = sys.argv[3], sys.argv[4]
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cells = {}
for r in rows:
    dtype = r.get("dtype", "f32")
    key = (dtype, r["rows"], r["H"], r["level"], r["round"])
    cells.setdefault(key, {})[r["impl"] + "/" + r["op"]] = r["gbps"]
out = {}
for (dtype, R, H, level, _), c in cells.items():
    copy = max(v for k, v in c.items() if k.startswith("copy_"))
    for op in ("layernorm", "rmsnorm"):
        g = c.get("lntune_builtin/" + op)
        if g is not None:
            out.setdefault((dtype, R, H, op, level), []).append((g, g / copy))
print(f"Built-in kernels, {sys.argv[2]} thread(s): GB/s and the ratio to the better copy of "
      "the same bytes in the same process (median of the rounds)\n")
print(f"| dtype | shape | op | {base} | {other} | {other} / {base} |")
print("|---|---|---|---:|---:|---:|")
for (dtype, R, H, op, level) in sorted(k for k in out if k[4] == base):
    gen = out[(dtype, R, H, op, base)]
    auto = out.get((dtype, R, H, op, other), [])
    if not auto:
        continue
    gg, gr = statistics.median(x[0] for x in gen), statistics.median(x[1] for x in gen)
    ag, ar = statistics.median(x[0] for x in auto), statistics.median(x[1] for x in auto)
    print(f"| {dtype} | {R}x{H} | {op} | {gg:.1f} GB/s, {gr:.2f}x | {ag:.1f} GB/s, {ar:.2f}x "
          f"| {ag / gg:.2f}x |")
EOF
