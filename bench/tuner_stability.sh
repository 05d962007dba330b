#!/usr/bin/env bash
# bench/tuner_stability.sh - does the tuner choose the same winner whatever the neighbours do
# (issue 56)? RUNS tunes of one op and shape, each on a fresh database, the last HOGS of them
# beside a process streaming memory (a bandwidth hog, as another tenant's job); then every winner
# timed side by side in one interleaved run (`lntune time`), so that the figures compare kernels,
# not the machine's moods between the tunes. Writes one summary (markdown) with, per tune: its
# winner, its time side by side and against the fastest winner, the ratio to the copy it stored
# and the one measured side by side, and whether it was marked as measured under load.
#   usage: bench/tuner_stability.sh [OP] [SHAPE]   (default: layernorm rows=4096,H=768)
#   BUILD_DIR (default build), RUNS (default 5), HOGS (default 2), THREADS (default 2),
#   SECONDS_TIMED (the side-by-side run, default 20), OUT (the summary; default
#   $BUILD_DIR/bench-results/tuner-stability-OP-SHAPE.md), KEEP=DIR (keep databases and logs).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
lntune=$build/lntune
op=${1:-layernorm}
shape=${2:-rows=4096,H=768}
runs=${RUNS:-5}
hogs=${HOGS:-2}
threads=${THREADS:-2}
out=${OUT:-$build/bench-results/tuner-stability-$op-${shape//[=,]/_}.md}
mkdir -p "$(dirname "$out")"
if [ -n "${KEEP:-}" ]; then
    work=$KEEP
    mkdir -p "$work"
    rm -f "$work"/run*.db*
else
    work=$(mktemp -d)
fi
chmod 700 "$work"
hog_pid=
cleanup() {
    [ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

start_hog() { # a process copying 64 MiB back and forth: memory bandwidth, one core
    python3 -c 'a = bytearray(64 << 20)
while True: a[:] = bytes(a)' &
    hog_pid=$!
}
stop_hog() {
    kill "$hog_pid" 2>/dev/null || true
    wait "$hog_pid" 2>/dev/null || true
    hog_pid=
}
field() { # DB KEY -> the first record's JSON value of KEY (show --json)
    "$lntune" show --db "$1" --json | sed -n "s/.*\"$2\": \\(\"[^\"]*\"\\|[^,}]*\\).*/\\1/p" | head -n 1 | tr -d '"'
}

variants=() stored=() loads=() secs=() besides=()
for k in $(seq 1 "$runs"); do
    db="$work/run$k.db"
    beside=quiet
    if [ "$k" -gt $((runs - hogs)) ]; then
        start_hog
        beside=hog
    fi
    t0=$(date +%s)
    failed=0
    "$lntune" tune --target cpu --op "$op" --shape "$shape" --threads "$threads" --db "$db" \
        >"$work/run$k.log" 2>&1 || failed=1
    secs+=($(($(date +%s) - t0)))
    [ "$beside" = hog ] && stop_hog
    besides+=("$beside")
    if [ "$failed" = 1 ]; then # a tune that says it could not measure is a row of the table
        variants+=("")
        stored+=("nan")
        loads+=("the tune failed: $(grep -m1 '^lntune: ' "$work/run$k.log" | cut -c 9-200 | tr '|' '/')")
    else
        variants+=("$(field "$db" variant)")
        stored+=("$(awk -v g="$(field "$db" gbps)" -v c="$(field "$db" copy_gbps)" 'BEGIN{printf "%.3f", g / c}')")
        loads+=("$(field "$db" under_load)")
    fi
    echo "tune $k ($beside, ${secs[-1]} s): ${variants[-1]:-none} (stored ${stored[-1]}x the copy; under load: ${loads[-1]})"
done
args=()
for v in "${variants[@]}"; do [ -n "$v" ] && args+=(--variant "$v"); done
"$lntune" time --op "$op" --target cpu --shape "$shape" --seconds "${SECONDS_TIMED:-20}" "${args[@]}" \
    >"$work/time.txt"
cat "$work/time.txt"
# `lntune time` prints "TIMEus SCOREus GBPS RATIOx VARIANT" per variant, in the order given.
mapfile -t timed_us < <(awk '/us .*us /{sub(/us$/, "", $1); print $1}' "$work/time.txt")
mapfile -t timed_side < <(awk '/us .*us /{sub(/x$/, "", $4); print $4}' "$work/time.txt")
us=() side=() j=0 # per tune; a failed tune's figures are nan
for v in "${variants[@]}"; do
    if [ -n "$v" ]; then us+=("${timed_us[$j]}") side+=("${timed_side[$j]}") j=$((j + 1)); else us+=(nan) side+=(nan); fi
done
fastest=$(printf '%s\n' "${timed_us[@]}" | sort -g | head -n 1)
{
    echo "# Tuner stability: $op $shape, $threads threads ($(date +%F))"
    echo
    echo "Host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores."
    echo "Command: \`RUNS=$runs HOGS=$hogs THREADS=$threads bench/tuner_stability.sh $op $shape\`;"
    echo "the last $hogs tunes ran beside a process copying 64 MiB back and forth. Every winner"
    echo "was then timed side by side in one ${SECONDS_TIMED:-20} s \`lntune time\` run."
    echo
    echo "| tune | beside | s | side by side us | vs fastest | stored /copy | side-by-side /copy | stored vs side | marked under load | winner |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for k in $(seq 0 $((runs - 1))); do
        awk -v k=$((k + 1)) -v b="${besides[$k]}" -v s="${secs[$k]}" -v t="${us[$k]}" -v f="$fastest" \
            -v st="${stored[$k]}" -v sd="${side[$k]}" -v l="${loads[$k]}" -v v="${variants[$k]}" \
            'BEGIN{if (v == "") printf "| %d | %s | %s | - | - | - | - | - | %s | - |\n", k, b, s, l;
                   else printf "| %d | %s | %s | %.1f | %+.1f%% | %.3f | %.3f | %+.1f%% | %s | `%s` |\n", k, b, s, t, (t / f - 1) * 100, st, sd, (st / sd - 1) * 100, (l == "null" ? "no" : l), v}'
    done
    echo
    printf '%s\n' "${timed_us[@]}" | sort -g | awk '{a[NR]=$1} END{printf "Winners side by side: the slowest is %.1f%% slower than the fastest.\n", (a[NR]/a[1]-1)*100}'
} >"$out"
cat "$out"
echo "summary: $out"
