#!/usr/bin/env bash
# test_concurrent.sh LNTUNE TEMPLATES [ROUNDS] - four lntune processes tune overlapping shapes into one
# new database at once (creating and migrating it together), in ROUNDS rounds (default 3; the
# quick tier's run takes one). Every process
# succeeds (no SQLITE_BUSY, no "locked"), and the database holds exactly what a lone run would:
# for each H tuned by any process, one measurement per variant (tests/templates/tuner: one right,
# one wrong, one that does not compile; exhaustive, so every process measures all three), one
# best row, naming the right variant, with its artifact. integrity_check is ok.
set -u
lntune=$1
export LNTUNE_TEMPLATE_DIR=$2
rounds=${3:-3}
. "$(dirname "$0")/testlib.sh"
scratch concurrent
shapes=("H=64,96,128,160,192,224" "H=96,128,160,192,224,256" "H=64,128,192,256,320,384"
        "H=64,96,160,224,320,384")
all_h="64 96 128 160 192 224 256 320 384"

for round in $(seq "$rounds"); do
    db=$dir/tune$round.db
    pids=()
    for p in 0 1 2 3; do
        "$lntune" --shape "rows=64,${shapes[$p]}" --op layernorm --rigor exhaustive --threads 1 \
            --db "$db" >"$dir/out$p" 2>&1 &
        pids+=($!)
    done
    for p in 0 1 2 3; do
        wait "${pids[$p]}"
        rc=$?
        if [ "$rc" -ne 0 ] || grep -qi "busy\|locked" "$dir/out$p"; then
            fail "round $round, process $p: exit $rc: $(head -c 300 "$dir/out$p")"
        fi
    done
    q() { sqlite3 "$db" "$1"; }
    [ "$(q "PRAGMA integrity_check")" = ok ] || fail "round $round: integrity_check: $(q "PRAGMA integrity_check")"
    hw=$(q "SELECT count(*) FROM hardware")
    [ "$hw" -eq 1 ] || fail "round $round: $hw hardware rows, want 1"
    for h in $all_h; do
        got=$(q "SELECT group_concat(status, ' ') FROM (SELECT status FROM measurements WHERE H = $h ORDER BY status)")
        [ "$got" = "failed ok wrong" ] || fail "round $round, H=$h: measurements '$got', want 'failed ok wrong'"
        best=$(q "SELECT b.variant FROM best b JOIN artifacts a ON a.key = b.artifact_key
                  JOIN measurements m ON m.H = b.H AND m.variant = b.variant AND m.status = 'ok'
                  WHERE b.H = $h")
        [ "$best" = "quality=right,threads=1" ] || fail "round $round, H=$h: best '$best'"
    done
    n=$(q "SELECT count(*) FROM measurements")
    nb=$(q "SELECT count(*) FROM best")
    [ "$n" -eq 27 ] && [ "$nb" -eq 9 ] && ok "round $round: 4 processes, 1 hardware row, $n measurements (9 shapes x 3 variants), $nb best, integrity ok" ||
        fail "round $round: $n measurements (want 27), $nb best (want 9)"
done

finish
