#!/usr/bin/env bash
# test_cli_usage.sh LNTUNE - a new user's first hour (issue 57): what the command line promises
# in --help holds (db export -).
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

finish
