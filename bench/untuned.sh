#!/usr/bin/env bash
# bench/untuned.sh - how shapes never tuned are served: each shape of SHAPES through the public
# API on a tuned database that never saw it (liblntune's nearest tuned bucket, else nearest
# run-time-H winner, else the built-in), then on a copy of that database with the shapes tuned
# too; the table gives the untuned speed as a ratio of the tuned one (issue 36: within 15%), each
# taken as a ratio to the copy of the same bytes in its own run (phases of a shared host).
#   DB (default build/bench-results/bench.db: run.sh's, tuned at every core), THREADS (every core),
#   BUILD_DIR (default build-bench, -DLNTUNE_BUILD_BENCH=ON),
#   SHAPES (default: ten shapes of odd H and other row counts than run.sh's),
#   TUNED_DB (where the copy with the shapes tuned is kept; tuned only when it does not exist),
#   RUNS (default 3): the untuned and tuned measurements alternate RUNS times and each cell takes
#   the median of its runs' ratios to the copy: a slow phase of a shared host (seconds to
#   minutes, up to 1.7x off) lands in one run and not the other, and moves the copy alike
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
db=${DB:-build/bench-results/bench.db}
threads=${THREADS:-$(nproc)}
shapes=${SHAPES:-4096x1000 4096x1536 2048x3000 1024x5120 512x12288 100x4096 20x4096 4096x777 16384x2048 64x16000}
[ -e "$db" ] || { echo "untuned.sh: no $db (bench/run.sh makes it)" >&2; exit 2; }
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tuned_db=${TUNED_DB:-$work/tuned.db}
if [ ! -e "$tuned_db" ]; then
    cp "$db" "$tuned_db"
    shape_args=()
    for s in $shapes; do shape_args+=(--shape "rows=${s%x*},H=${s#*x}"); done
    echo "untuned.sh: tuning the shapes into a copy of $db, $tuned_db (minutes)" >&2
    "$build/lntune" tune "${shape_args[@]}" --threads "$threads" --db "$tuned_db" >&2
fi
for run in $(seq "$runs"); do
    echo "untuned.sh: run $run of $runs: the shapes on $db, which never tuned them, then tuned" >&2
    "$build/bench/bench_cpu" --threads "$threads" --db "$db" --no-torch \
        --shapes "${shapes// /,}" >>"$work/untuned.jsonl"
    "$build/bench/bench_cpu" --threads "$threads" --db "$tuned_db" --no-torch \
        --shapes "${shapes// /,}" >>"$work/tuned.jsonl"
done
python3 - "$work/untuned.jsonl" "$work/tuned.jsonl" "$threads" <<'EOF'
import json, statistics, sys
def load(path):
    """Each cell's ratios to the better copy of the same bytes in the same bench_cpu run (there
    a shape's implementations are timed interleaved), one per run."""
    runs, run = [], {}
    for line in open(path):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["impl"], r["op"], r["rows"], r["H"])
        if key in run:  # a record seen again: the next bench_cpu run
            runs.append(run)
            run = {}
        run[key] = r["gbps"] if r["us"] > 0 else None
    runs.append(run)
    out = {}
    for run in runs:
        for (impl, op, R, H), g in run.items():
            copy = max(run.get((c, "copy", R, H)) or 0 for c in ("copy_memcpy", "copy_nt"))
            if g and copy > 0 and impl in ("lntune_tuned", "lntune_builtin"):
                out.setdefault((impl, op, R, H), []).append(g / copy)
    return {k: statistics.median(v) for k, v in out.items()}
untuned, tuned = load(sys.argv[1]), load(sys.argv[2])
print(f"Shapes never tuned, {sys.argv[3]} thread(s): lntune through the public API on a database "
      "that never saw them, then on a copy with them tuned. Each figure is a ratio to the better "
      "copy of the same bytes timed in the same bench_cpu run, the median over the runs: a slow "
      "phase of a shared host moves the copy and the kernels alike, where the GB/s of two runs "
      "may differ by 1.7x.\n")
print("| op | shape | untuned (x copy) | tuned (x copy) | untuned / tuned | built-in (x copy) |")
print("|---|---|---:|---:|---:|---:|")
worst = None
for (impl, op, R, H), u in sorted(untuned.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][2])):
    if impl != "lntune_tuned":
        continue
    t = tuned.get((impl, op, R, H))
    b = untuned.get(("lntune_builtin", op, R, H))
    if not t or not b:
        print(f"| {op} | {R}x{H} | {u:.2f} | n/a | n/a | n/a |")
        continue
    worst = u / t if worst is None else min(worst, u / t)
    print(f"| {op} | {R}x{H} | {u:.2f} | {t:.2f} | {u / t:.2f} | {b:.2f} |")
print(f"\nWorst untuned / tuned: {worst:.2f}" if worst is not None else "")
EOF
