#!/usr/bin/env bash
# test_cli_usage.sh LNTUNE - a new user's first hour (issue 57): what the command line promises
# in --help holds (db export -, help, version, suggestions), export and doctor fail loudly on a
# database that serves nothing, and options a command does not take are refused, never ignored.
lntune=$1
. "$(dirname "$0")/testlib.sh"
scratch cli-usage
chmod 700 "$dir"
db=$dir/tune.db

# One tiny tuned database for the commands that read one.
expect 0 "8x64" --shape rows=8,H=64 --op rmsnorm --target cpu --rigor quick --db "$db"

# db export - writes the wisdom to stdout (the message goes to stderr).
out=$("$lntune" db export - --db "$db" 2>/dev/null)
if [ "$(head -c 17 <<<"$out")" = '{"lntune_wisdom":' ] && grep -q '"record": "best"' <<<"$out"; then
    ok "db export - writes the wisdom to stdout"
else
    fail "db export -: ${out:0:300}"
fi

# Discoverability: help, help COMMAND, version; a typo of a command or option gets the nearest
# name; --help starts with an example.
expect 0 "Commands:" help
expect 0 "lntune doctor [--db PATH]" help doctor
expect 2 "unknown command 'shwo' (did you mean 'show'?)" help shwo
expect 0 "lntune $("$lntune" --version | cut -d' ' -f2)" version
expect 0 "lntune 0." --version
expect 2 "unknown command 'shwo' (did you mean 'show'?)" shwo
expect 2 "unknown command 'expotr' (did you mean 'export'?)" expotr
expect 2 "unknown command 'verison' (did you mean 'version'?)" verison
if "$lntune" frobnicate 2>&1 | grep -q "did you mean"; then
    fail "frobnicate got a suggestion"
else
    ok "no suggestion for a word far from every command"
fi
expect 2 "unknown option '--shpae' (did you mean '--shape'?)" --shpae H=64
if "$lntune" --help | head -n 4 | grep -q "^Example: lntune --shape H=4096"; then
    ok "--help starts with an example"
else
    fail "--help has no example at the top"
fi

# export fails on a database that serves nothing (missing, not SQLite, another machine's) and
# writes nothing; --generic-only writes the generic kernels on purpose.
expect 0 "1 tuned kernel(s)" export --out "$dir/tuned" --db "$db"
expect 1 "does not exist" export --out "$dir/missing" --db "$dir/missing.db"
[ -e "$dir/missing" ] && fail "export of a missing database made its --out"
echo "not a database" > "$dir/junk.db"
expect 3 "junk.db" export --out "$dir/junk" --db "$dir/junk.db"
cp "$db" "$dir/other.db"
sqlite3 "$dir/other.db" "UPDATE hardware SET fingerprint = '00000000feedbeef'"
expect 1 "holds no results of this machine" export --out "$dir/other" --db "$dir/other.db"
expect 0 "0 tuned kernel(s)" export --out "$dir/generic" --generic-only
grep -q "generic kernels alone" "$dir/generic/lntune_kernels.c" ||
    fail "the --generic-only file does not say so"
expect 2 "--generic-only reads no database" export --out "$dir/generic" --generic-only --db "$db"

finish
