#!/usr/bin/env bash
# test_cli_usage.sh LNTUNE - a new user's first hour (issue 57): what the command line promises
# in --help holds (db export -, help, version, suggestions).
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

finish
