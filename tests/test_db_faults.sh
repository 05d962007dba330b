#!/usr/bin/env bash
# test_db_faults.sh LNTUNE - bad tuning databases, through the command line. For each of: not
# SQLite, a truncated header, truncated pages, a corrupt page, another application's SQLite file,
# a newer schema version, a read-only file, a disk that fills up while tuning, and a database
# that another process holds locked: `lntune --shape` and `lntune show` exit 3 with a message
# naming the fault, never crash, and leave the file byte for byte as it was (no -wal, -shm or
# .bak appears) unless --force is given; --force moves a refused file to .bak, but never a
# healthy database that is only locked. A database from other hardware is not used for this
# machine: show says so, and tuning adds this machine's row beside the other one's.
set -u
lntune=$1
. "$(dirname "$0")/testlib.sh"
dir=$(mktemp -d /tmp/lntune-dbfaults-XXXXXX)
mounts=()
cleanup() {
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
export XDG_CACHE_HOME=$dir/cache
tune=(--shape rows=64,H=64 --op rmsnorm --rigor quick --threads 1)


# untouched FILE SHA: the file is as it was, and nothing appeared beside it.
untouched() {
    local f=$1 sha=$2
    if [ "$(sha1sum <"$f")" != "$sha" ]; then fail "$f was modified"; return; fi
    for s in -wal -shm -journal .bak; do
        if [ -e "$f$s" ]; then fail "$f$s appeared"; return; fi
    done
    ok "$(basename "$f") is unchanged and alone"
}

# refused FILE TEXT: tune and show both refuse FILE with TEXT, exit 3, and leave it alone.
refused() {
    local f=$1 text=$2 sha
    sha=$(sha1sum <"$f")
    expect 3 "$text" "${tune[@]}" --db "$f"
    expect 3 "$text" show --db "$f"
    untouched "$f" "$sha"
}

# A healthy database to damage.
"$lntune" "${tune[@]}" --db "$dir/good.db" >/dev/null 2>&1 || fail "cannot tune good.db"
sqlite3 "$dir/good.db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
pages=$(sqlite3 "$dir/good.db" "PRAGMA page_count")
[ "$pages" -gt 4 ] && ok "good.db has $pages pages" || fail "good.db has $pages pages"

printf 'name,value\nH,4096\n' >"$dir/text.db"
refused "$dir/text.db" "is not an SQLite database"
head -c 50 "$dir/good.db" >"$dir/header.db"
refused "$dir/header.db" "its SQLite header is truncated"
head -c 8192 "$dir/good.db" >"$dir/short.db"
refused "$dir/short.db" "is corrupt"
cp "$dir/good.db" "$dir/corrupt.db"
# Page 2 onwards: b-tree pages, overwritten with a pattern no valid page has.
printf '\377%.0s' $(seq 1 8192) | dd of="$dir/corrupt.db" bs=4096 seek=1 conv=notrunc status=none
refused "$dir/corrupt.db" "is corrupt"
sqlite3 "$dir/foreign.db" "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('mine')"
refused "$dir/foreign.db" "another application"
cp "$dir/good.db" "$dir/newer.db"
sqlite3 "$dir/newer.db" "PRAGMA user_version = 99"
refused "$dir/newer.db" "newer than this build's"

# Read-only: a read-only mount where we may mount (root), else a file without write permission.
mkdir -p "$dir/ro"
cp "$dir/good.db" "$dir/ro/good.db"
sha=$(sha1sum <"$dir/ro/good.db")
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m tmpfs "$dir/ro" 2>/dev/null; then
    mounts+=("$dir/ro")
    cp "$dir/good.db" "$dir/ro/good.db"
    mount -o remount,ro "$dir/ro"
    expect 3 "read-only file system" "${tune[@]}" --db "$dir/ro/good.db"
elif [ "$(id -u)" -ne 0 ]; then
    chmod a-w "$dir/ro/good.db" "$dir/ro"
    expect 3 "not writable" "${tune[@]}" --db "$dir/ro/good.db"
else
    echo "skip: read-only file (root, and cannot mount)"
fi
expect 0 "rmsnorm" show --db "$dir/ro/good.db"
untouched "$dir/ro/good.db" "$sha"

# Full disk: a small file system (root), else a file size limit; the tuner stops at the first
# write that fails, keeps what it wrote, and the database stays consistent.
mkdir -p "$dir/full"
limit=()
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=$((pages * 4 + 40))k tmpfs "$dir/full" 2>/dev/null; then
    mounts+=("$dir/full")
else
    limit=(ulimit -f $((pages * 4 + 40)))
fi
cp "$dir/good.db" "$dir/full/good.db"
before=$(sqlite3 "$dir/full/good.db" "SELECT count(*) FROM measurements")
out=$( ( [ ${#limit[@]} -eq 0 ] || "${limit[@]}"; trap '' XFSZ
    exec "$lntune" --shape rows=64,H=64,96,128 --rigor quick --threads 1 --db "$dir/full/good.db") 2>&1)
rc=$?
if [ "$rc" -eq 3 ] && grep -q "full\|too large\|disk I/O" <<<"$out"; then
    ok "disk full: exit 3: $(grep -m1 'cannot write' <<<"$out" | cut -c 1-120)"
else
    fail "disk full: exit $rc, output ${out:0:400}"
fi
check=$(sqlite3 "$dir/full/good.db" "PRAGMA integrity_check")
after=$(sqlite3 "$dir/full/good.db" "SELECT count(*) FROM measurements")
[ "$check" = ok ] && [ "$after" -ge "$before" ] && ok "after the full disk: integrity ok, $before -> $after measurements" ||
    fail "after the full disk: integrity '$check', $before -> $after measurements"

# Other hardware: the only hardware row is another machine's.
cp "$dir/good.db" "$dir/other.db"
sqlite3 "$dir/other.db" "UPDATE hardware SET fingerprint = '00000000feedbeef'"
theirs=$(sqlite3 "$dir/other.db" "SELECT count(*) FROM best; SELECT count(*) FROM measurements")
expect 0 "no tuning results for this machine" show --db "$dir/other.db"
expect 0 "rmsnorm" show --all --db "$dir/other.db"
expect 0 "rmsnorm" "${tune[@]}" --db "$dir/other.db"
now=$(sqlite3 "$dir/other.db" "SELECT count(*) FROM best h JOIN hardware w ON w.id = h.hardware_id WHERE w.fingerprint = '00000000feedbeef'; SELECT count(*) FROM measurements m JOIN hardware w ON w.id = m.hardware_id WHERE w.fingerprint = '00000000feedbeef'")
hw=$(sqlite3 "$dir/other.db" "SELECT count(*) FROM hardware")
[ "$now" = "$theirs" ] && [ "$hw" = 2 ] && ok "tuning added this machine's row; the other machine's rows are intact" ||
    fail "other hardware: $hw hardware rows, theirs '$theirs' -> '$now'"

# --force moves a refused file aside and starts a new database.
cp "$dir/text.db" "$dir/forced.db"
expect 0 "rmsnorm" "${tune[@]}" --db "$dir/forced.db" --force
cmp -s "$dir/text.db" "$dir/forced.db.bak" && ok "--force kept the refused file as forced.db.bak" ||
    fail "--force: forced.db.bak is not the refused file"
expect 2 "--force applies to tuning" show --db "$dir/forced.db" --force

# --force never moves a healthy database that another process holds locked.
cp "$dir/good.db" "$dir/locked.db"
sha=$(sha1sum <"$dir/locked.db")
# The holder says when it holds the lock (the file "held"), then waits to be killed.
printf 'PRAGMA locking_mode = EXCLUSIVE;\nBEGIN EXCLUSIVE;\nUPDATE hardware SET compiler = compiler;\n.system touch %s/held\n.system sleep 60\nROLLBACK;\n' "$dir" |
    sqlite3 "$dir/locked.db" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 300); do [ -e "$dir/held" ] && break; sleep 0.05; done
[ -e "$dir/held" ] || fail "the holder never took the lock"
expect 3 "locked" "${tune[@]}" --db "$dir/locked.db" --force
[ ! -e "$dir/locked.db.bak" ] && [ -e "$dir/locked.db" ] && ok "--force left the locked database in place" ||
    fail "--force moved a healthy, locked database to .bak"
pkill -P "$holder" 2>/dev/null # its .system sleep
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
[ "$(sha1sum <"$dir/locked.db")" = "$sha" ] && ok "locked.db is unchanged" || fail "locked.db changed"

finish
