#!/usr/bin/env bash
# bench/tuner_stability.sh - issue #3's two tuner checks on this machine: RUNS separate tuning runs
# at the default rigor (each on a fresh database) and one at --rigor exhaustive, then every
# winner timed side by side in one interleaved run (`lntune time`), so the figures compare
# kernels, not the machine's moods between the runs. Prints the winners' spread and each measure
# winner's time against the exhaustive one.
#   usage: bench/tuner_stability.sh [OP] [SHAPE]   (default: layernorm rows=2048,H=4096)
#   BUILD_DIR (default build), RUNS (default 3), SKIP_EXHAUSTIVE=1, SECONDS_TIMED (the side-by-side
#   run, default 20: its figures vary by about 5% in 3 s on a shared 2-core VM), KEEP=DIR (keep
#   the databases and logs there).
set -euo pipefail
cd "$(dirname "$0")/.."
lntune=${BUILD_DIR:-build}/lntune
op=${1:-layernorm}
shape=${2:-rows=2048,H=4096}
runs=${RUNS:-3}
if [ -n "${KEEP:-}" ]; then
    work=$KEEP
    mkdir -p "$work"
    rm -f "$work"/run*.db*
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi

winner() { # DB -> the stored winner's variant
    "$lntune" show --db "$1" --json | sed -n 's/.*"variant": "\([^"]*\)".*/\1/p' | head -n 1
}
rigors=()
for i in $(seq 1 "$runs"); do rigors+=(measure); done
[ "${SKIP_EXHAUSTIVE:-0}" = 1 ] || rigors+=(exhaustive)
variants=()
for k in "${!rigors[@]}"; do
    db="$work/run$k.db"
    start=$(date +%s)
    "$lntune" tune --target cpu --op "$op" --shape "$shape" --rigor "${rigors[$k]}" --db "$db" \
        >"$work/run$k.log" 2>&1 || { cat "$work/run$k.log" >&2; exit 1; }
    variants+=("$(winner "$db")")
    echo "run $((k + 1)) (${rigors[$k]}, $(($(date +%s) - start)) s): ${variants[$k]}"
done
args=()
for v in "${variants[@]}"; do args+=(--variant "$v"); done
"$lntune" time --op "$op" --target cpu --shape "$shape" --seconds "${SECONDS_TIMED:-20}" "${args[@]}" | tee "$work/time.txt"
# The time lines, in the order of the runs: "TIMEus SCOREus GBPS RATIOx VARIANT". Both figures
# are compared: the tuner chooses by score (gen/tune/timing.h), the median is the table's time.
spread() { # COLUMN LABEL
    mapfile -t us < <(awk -v c="$1" '/us /{sub(/us$/, "", $c); print $c}' "$work/time.txt")
    lo=${us[0]} hi=${us[0]}
    for k in $(seq 0 $((runs - 1))); do
        lo=$(awk -v a="$lo" -v b="${us[$k]}" 'BEGIN{print (b < a ? b : a)}')
        hi=$(awk -v a="$hi" -v b="${us[$k]}" 'BEGIN{print (b > a ? b : a)}')
    done
    awk -v lo="$lo" -v hi="$hi" -v n="$runs" -v what="$2" \
        'BEGIN{printf "measure winners (%d runs), %s: the slowest is %.1f%% slower than the fastest\n", n, what, (hi / lo - 1) * 100}'
    if [ "${SKIP_EXHAUSTIVE:-0}" != 1 ]; then
        ex=${us[$runs]}
        for k in $(seq 0 $((runs - 1))); do
            awk -v t="${us[$k]}" -v ex="$ex" -v k=$((k + 1)) -v what="$2" \
                'BEGIN{printf "measure run %d, %s: %+.1f%% against the exhaustive winner\n", k, what, (t / ex - 1) * 100}'
        done
    fi
}
spread 1 "median"
spread 2 "score"
