#!/usr/bin/env bash
# test_interrupt.sh LNTUNE TEMPLATES - an interrupted tuning run loses no finished measurement,
# and the next run resumes from them. An exhaustive run over tests/templates/resume (256
# variants, measured 64 at a time) is stopped three times once new measurements appear: by
# SIGINT (exit 130, it says how many it saved), by SIGTERM (143), and by kill -9 (in the middle
# of its writes). After each, PRAGMA integrity_check is ok and every measurement stored before is
# still there. A fourth run reuses every stored measurement (compiling only the rest) and
# completes, with exactly one row per variant.
set -u
lntune=$1
export LNTUNE_TEMPLATE_DIR=$2
. "$(dirname "$0")/testlib.sh"
scratch interrupt
db=$dir/tune.db
args=(--shape rows=64,H=64 --op rmsnorm --rigor exhaustive --threads 1 --db "$db")
rows() { sqlite3 "$db" "SELECT count(*) FROM measurements" 2>/dev/null || echo 0; }
total=$("$lntune" variants --op rmsnorm --target cpu --shape H=64 | wc -l)
[ "$total" -eq 256 ] && ok "$total variants" || fail "$total variants, want 256"

# interrupt SIGNAL WANT_EXIT: starts a run, sends SIGNAL once it stored measurements beyond what
# the database held, and checks the exit code, the database and that nothing was lost.
interrupt() {
    local sig=$1 want=$2 before after out pid rc
    before=$(rows)
    # A fresh object cache: compiling keeps each batch of 64 long enough to be interrupted.
    XDG_CACHE_HOME=$dir/cache-$sig "$lntune" "${args[@]}" >"$dir/out" 2>&1 &
    pid=$!
    for _ in $(seq 1200); do
        [ "$(rows)" -gt "$before" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -"$sig" "$pid"
    wait "$pid" 2>/dev/null
    rc=$?
    out=$(cat "$dir/out")
    after=$(rows)
    if [ "$rc" -eq "$want" ]; then ok "SIG$sig: exit $rc"; else fail "SIG$sig: exit $rc, want $want: ${out:0:300}"; fi
    if [ "$sig" != KILL ]; then
        grep -q "measurements of this run saved" <<<"$out" && ok "it says: $(grep -m1 saved <<<"$out" | cut -c 1-120)" ||
            fail "SIG$sig: no word of what was saved: ${out:0:300}"
    fi
    [ "$(sqlite3 "$db" "PRAGMA integrity_check")" = ok ] && ok "integrity_check ok after SIG$sig" ||
        fail "integrity_check after SIG$sig: $(sqlite3 "$db" "PRAGMA integrity_check" | head -3)"
    [ "$after" -gt "$before" ] && [ "$after" -lt "$total" ] &&
        ok "measurements $before -> $after of $total: kept, and the run was cut short" ||
        fail "SIG$sig: measurements $before -> $after of $total"
}

interrupt INT 130
interrupt TERM 143
interrupt KILL 137

stored=$(rows)
out=$("$lntune" "${args[@]}" --json 2>/dev/null)
rc=$?
reused=$(grep -o '"reused": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
built=$(grep -o '"compiled": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
hits=$(grep -o '"cache_hits": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
# Built: the variants never measured, plus at most the 16 leaders (TOP in gen/tune/cpu_target.c) and the
# naive kernel, which the final re-timing loads again (from the object cache).
if [ "$rc" -eq 0 ] && [ "${reused:-0}" -ge "$stored" ] && [ $((built + hits)) -le $((total - stored + 17)) ]; then
    ok "the resumed run completes: reused $reused of the $stored stored, built $built (+$hits from the cache) of $total"
else
    fail "resume: exit $rc, reused ${reused:-?} (stored $stored), built ${built:-?}+${hits:-?}: ${out:0:300}"
fi
n=$(rows)
distinct=$(sqlite3 "$db" "SELECT count(DISTINCT variant) FROM measurements")
best=$(sqlite3 "$db" "SELECT count(*) FROM best")
[ "$n" -eq "$total" ] && [ "$distinct" -eq "$total" ] && [ "$best" -eq 1 ] &&
    ok "one row per variant ($n), one best" || fail "$n rows, $distinct variants, $best best"

finish
