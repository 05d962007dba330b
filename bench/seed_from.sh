#!/usr/bin/env bash
# bench/seed_from.sh - how much a head start from another machine's wisdom saves (issue 38):
# `lntune --shape SHAPE` into a fresh database, cold and with --seed-from the wisdom of SEED_DB,
# RUNS times each, alternating; the wall time of each, then the cold and the seeded winners of
# each op timed side by side in one interleaved run (lntune time), and a markdown table. Each
# run has a JIT object cache of its own, so that none reuses what another compiled.
#   SEED_DB (default build/bench-results/bench-t1.db, bench/run.sh's: the anchors tuned at 1
#   thread, the stand-in for another machine), SHAPE (default H=4096), THREADS (default every
#   core), RUNS (default 2), BUILD_DIR (default build-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
seed_db=${SEED_DB:-build/bench-results/bench-t1.db}
shape=${SHAPE:-H=4096}
threads=${THREADS:-$(nproc)}
runs=${RUNS:-2}
lntune=$build/lntune
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
"$lntune" db export "$work/seed.jsonl" --db "$seed_db" >&2
for run in $(seq "$runs"); do
    for mode in cold seeded; do
        args=(--shape "$shape" --threads "$threads" --db "$work/$mode$run.db" --json)
        [ "$mode" = seeded ] && args+=(--seed-from "$work/seed.jsonl")
        start=$(date +%s.%N)
        # a cache of its own: no run may reuse objects another one compiled
        XDG_CACHE_HOME=$work/cache-$mode$run "$lntune" "${args[@]}" >"$work/$mode$run.json" 2>/dev/null
        end=$(date +%s.%N)
        echo "$mode $run $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')" >>"$work/walls"
        echo "seed_from.sh: $mode run $run: $(tail -n 1 "$work/walls" | cut -d' ' -f3) s" >&2
    done
done
# The winners of the first cold and the first seeded run, side by side.
python3 - "$work" "$lntune" "$shape" "$threads" "$runs" "$seed_db" <<'EOF'
import json, subprocess, sys
work, lntune, shape, threads, runs, seed_db = sys.argv[1:]
walls = {}
for line in open(f"{work}/walls"):
    mode, run, s = line.split()
    walls.setdefault(mode, []).append(float(s))
def results(name):
    return {r["op"]: r for r in json.load(open(f"{work}/{name}.json"))}
print(f"`lntune --shape {shape} --threads {threads}` into a fresh database, cold and "
      f"`--seed-from` the wisdom of {seed_db}, {runs} run(s) each, alternating.\n")
cold = sum(walls["cold"]) / len(walls["cold"])
seeded = sum(walls["seeded"]) / len(walls["seeded"])
print("| | wall time (s), each run | mean |")
print("|---|---|---:|")
for mode in ("cold", "seeded"):
    print(f"| {mode} | {', '.join(f'{w:.1f}' for w in walls[mode])} | "
          f"{sum(walls[mode]) / len(walls[mode]):.1f} |")
print(f"\nSeeded / cold wall time: {seeded / cold:.2f}\n")
print("| op | run | cold winner GB/s | seeded winner GB/s | seeded / cold | variants evaluated, cold / seeded |")
print("|---|---|---:|---:|---:|---|")
for run in range(1, int(runs) + 1):
    c, s = results(f"cold{run}"), results(f"seeded{run}")
    for op in sorted(c):
        a, b = c[op], s[op]
        rows = a["rows"]
        out = subprocess.run([lntune, "time", "--op", op, "--target", "cpu", "--shape",
                              f"rows={rows},H={a['H']}", "--threads", threads, "--seconds", "4",
                              "--variant", a["variant"], "--variant", b["variant"]],
                             capture_output=True, text=True).stdout
        gbps = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in (a["variant"], b["variant"]):
                gbps[parts[-1]] = float(parts[2])
        ga, gb = gbps.get(a["variant"], 0), gbps.get(b["variant"], 0)
        same = " (the same variant)" if a["variant"] == b["variant"] else ""
        n_a = a["compiled"] + a["cache_hits"] + a["reused"]
        n_b = b["compiled"] + b["cache_hits"] + b["reused"]
        print(f"| {op} | {run} | {ga:.1f} | {gb:.1f}{same} | {gb / ga if ga else 0:.3f} | "
              f"{n_a} / {n_b} (seeds: {b.get('seeds', 0)}) |")
EOF
