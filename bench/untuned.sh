#!/usr/bin/env bash
# bench/untuned.sh - how shapes never tuned are served: each shape of SHAPES through the public
# API on a tuned database that never saw it (liblntune's nearest tuned bucket, else nearest
# run-time-H winner, else the built-in), then on a copy of that database with the shapes tuned
# too; the table gives the untuned speed as a ratio of the tuned one (issue 36: within 15%).
#   DB (default bench/results/bench.db: run.sh's, tuned at every core), THREADS (every core),
#   BUILD_DIR (default build-bench, -DLNTUNE_BUILD_BENCH=ON),
#   SHAPES (default: ten shapes of odd H and other row counts than run.sh's),
#   TUNED_DB (where the copy with the shapes tuned is kept; tuned only when it does not exist),
#   RUNS (default 2): the untuned and tuned measurements alternate RUNS times and each cell takes
#   its best run, since a slow phase of a shared host (a second or more at 25-35% off) lands in
#   one run and not the other
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
db=${DB:-bench/results/bench.db}
threads=${THREADS:-$(nproc)}
shapes=${SHAPES:-4096x1000 4096x1536 2048x3000 1024x5120 512x12288 100x4096 20x4096 4096x777 16384x2048 64x16000}
[ -e "$db" ] || { echo "untuned.sh: no $db (bench/run.sh makes it)" >&2; exit 2; }
runs=${RUNS:-2}
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
import json, sys
def load(path):
    out = {}  # each cell's best run
    for line in open(path):
        if line.startswith("{"):
            r = json.loads(line)
            key = (r["impl"], r["op"], r["rows"], r["H"])
            if r["us"] > 0 and r["gbps"] > out.get(key, 0):
                out[key] = r["gbps"]
    return out
untuned, tuned = load(sys.argv[1]), load(sys.argv[2])
print(f"Shapes never tuned, {sys.argv[3]} thread(s): lntune through the public API on a database "
      "that never saw them, then tuned (GB/s, each cell the best of the runs)\n")
print("| op | shape | untuned | tuned | untuned / tuned | built-in |")
print("|---|---|---:|---:|---:|---:|")
worst = None
for (impl, op, R, H), g in sorted(untuned.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][2])):
    if impl != "lntune_tuned":
        continue
    t = tuned.get((impl, op, R, H))
    b = untuned.get(("lntune_builtin", op, R, H))
    ratio = g / t if t else None
    if ratio is not None and (worst is None or ratio < worst):
        worst = ratio
    print(f"| {op} | {R}x{H} | {g:.1f} | {t:.1f} | {ratio:.2f} | {b:.1f} |" if t and b else
          f"| {op} | {R}x{H} | {g:.1f} | n/a | n/a | n/a |")
print(f"\nWorst untuned / tuned: {worst:.2f}" if worst is not None else "")
EOF
