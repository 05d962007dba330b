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
# More threads than the CPUs this process may run on: tuned with those, and said (item 11).
expect 0 "warning: --threads 999: this process may run on" --shape rows=8,H=64 --op rmsnorm \
    --target cpu --rigor quick --threads 999 --db "$dir/threads.db"

# Progress (item 6), piped: a plain line as each op x shape starts and at each phase, with its
# number of the job's, variants done of the estimate and time left, of it and of the job; a
# summary line as each ends; nothing unlabelled after the last (the second looks' "copy (0
# variants so far, 0 s)").
"$lntune" --shape rows=8,H=64,96 --op rmsnorm --target cpu --rigor quick --db "$dir/two.db" \
    >/dev/null 2>"$dir/progress"
step='^\[1/2\] cpu rmsnorm H=64 rows=8: [a-z]+, [0-9]+/[0-9]+ variants, [0-9]+ s, ETA ([0-9]+ s|-); job: [0-9]+ s, ETA ([0-9]+ s|-)$'
done1='^\[1/2\] cpu rmsnorm H=64 rows=8: done, [1-9][0-9]* variants in [0-9]+ s; job: [0-9]+ s, ETA [0-9]+ s$'
done2='^\[2/2\] cpu rmsnorm H=96 rows=8: done, [1-9][0-9]* variants in [0-9]+ s; job: [0-9]+ s, ETA 0 s$'
if grep -Eq "$step" "$dir/progress" && grep -Eq "$done1" "$dir/progress" &&
    grep -Eq "$done2" "$dir/progress" && ! grep -q "so far" "$dir/progress" &&
    tail -n 1 "$dir/progress" | grep -Eq '^\[[12]/2\] cpu rmsnorm H=(64|96) rows=8: (done|second look)'; then
    ok "piped progress: $(wc -l <"$dir/progress") lines, each op x shape's steps and its end"
else
    fail "piped progress: $(head -c 1500 "$dir/progress")"
fi

# show (item 8): a heading per machine with its CPU model and fingerprint, short rows with the
# ratio to the copy, its spread and the copy's GB/s, a short variant id; --long every knob.
fp=$("$lntune" doctor --db "$db" | sed -n 's/^ok: it holds results of this machine (\(.*\))$/\1/p')
short=$("$lntune" show --db "$db")
if grep -q "^cpu .*, fingerprint $fp:$" <<<"$short" &&
    grep -Eq '^cpu  rmsnorm +f32  8x64 .*x [0-9.]+-[0-9.]+\*? +[0-9.]+  v[0-9a-f]{8}$' <<<"$short" &&
    ! grep -q "threads=" <<<"$short" && [ -n "$fp" ]; then
    ok "show: the machine named ($fp), a short row"
else
    fail "show: ${short:0:600}"
fi
expect 0 "threads=" show --db "$db" --long
if "$lntune" show --db "$db" --all | grep -q "^hw \|^1 "; then
    fail "show --all names a machine by its row id"
else
    ok "show --all: no machine named by its row id"
fi

# JSON (issue 58): every string the CLI prints as JSON is escaped. A database in a folder whose
# name holds a quote and a backslash, a stored field holding both and a newline: show --json,
# tune --json and cache --json (whose folder name holds them too) still parse.
odd="$dir/a \"quoted\" \\ folder"
mkdir -p "$odd/cache"
cp "$db" "$odd/t.db"
sqlite3 "$odd/t.db" "UPDATE best SET under_load = 'a \"top\" \\ process' || char(10) || 'x'"
json_parses() { python3 -c 'import json, sys; json.load(sys.stdin)'; }
if "$lntune" show --db "$odd/t.db" --json | json_parses &&
    "$lntune" show --db "$odd/t.db" --json | grep -qF '"under_load": "a \"top\" \\ process\nx"'; then
    ok "show --json escapes a stored field's quote, backslash and newline"
else
    fail "show --json: $("$lntune" show --db "$odd/t.db" --json 2>&1 | head -c 600)"
fi
if "$lntune" --shape rows=8,H=64 --op rmsnorm --target cpu --rigor quick --db "$odd/t.db" \
    --json 2>/dev/null | json_parses; then
    ok "tune --json parses"
else
    fail "tune --json does not parse"
fi
if XDG_CACHE_HOME="$odd/cache" "$lntune" cache --json | json_parses; then
    ok "cache --json parses with a quote and a backslash in its folder"
else
    fail "cache --json: $(XDG_CACHE_HOME="$odd/cache" "$lntune" cache --json 2>&1)"
fi

# lntune cache (item 9): the tune above left compiled objects in this scratch's cache; clean
# removes them and nothing else; a word it does not know is refused.
expect 0 "$XDG_CACHE_HOME/lntune/objects:" cache
touch "$XDG_CACHE_HOME/lntune/objects/notes.txt"
expect 0 '"removed": ' cache clean --json
expect 0 ": 0 compiled object(s)" cache
[ -e "$XDG_CACHE_HOME/lntune/objects/notes.txt" ] && ok "cache clean leaves other files" ||
    fail "cache clean removed a file it did not write"
expect 2 "'frob' is not clean" cache frob
expect 2 "cache does not take --db" cache --db "$db"

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
lines=$("$lntune" --help | wc -l)
if [ "$lines" -le 30 ] && "$lntune" --help | grep -q "LNTUNE_LOG=debug"; then
    ok "--help is short ($lines lines) and names LNTUNE_LOG"
else
    fail "--help is $lines lines or does not name LNTUNE_LOG"
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

# show filters by --op, --target and --shape instead of ignoring them.
expect 0 "rmsnorm" show --db "$db" --op rmsnorm --shape H=64 --target cpu
expect 0 "rmsnorm" show --db "$db" --shape rows=8,H=64
for filter in "--op layernorm" "--shape H=4096" "--shape rows=100000,H=64" "--target cuda"; do
    # shellcheck disable=SC2086
    if out=$("$lntune" show --db "$db" $filter 2>&1) && ! grep -q "8x64" <<<"$out" &&
        grep -q "no winner matches" <<<"$out"; then
        ok "show $filter lists no 8x64 rmsnorm winner"
    else
        fail "show $filter: ${out:0:300}"
    fi
done
if [ "$("$lntune" show --db "$db" --op layernorm --json | tr -d ' \n')" = "[]" ]; then
    ok "show --op layernorm --json: []"
else
    fail "show --op layernorm --json"
fi
expect 2 "unknown op 'batchnorm'" show --db "$db" --op batchnorm

# Every command refuses an option it does not take, --json included, naming the ones it takes.
expect 2 "show does not take --variant" show --db "$db" --variant vec=8
expect 2 "doctor does not take --json" doctor --db "$db" --json
expect 2 "variants does not take --json" variants --op rmsnorm --target cpu --json
expect 2 "params does not take --json" params --op rmsnorm --target cpu --json
expect 2 "verify does not take --json" verify --op rmsnorm --target cpu --variant vec=8 --json
expect 2 "time does not take --json" time --op rmsnorm --target cpu --shape H=64 --variant vec=8 --json
expect 2 "export does not take --json" export --out "$dir/json" --db "$db" --json
expect 2 "doctor does not take --shape (its options: --db)" doctor --db "$db" --shape H=64
expect 2 "params does not take --shape" params --op rmsnorm --target cpu --shape H=64
expect 2 "tune does not take --variant" --shape H=64 --variant vec=8 --db "$dir/never.db"
expect 2 "lntune db export builds no code" db export - --db "$db" --threads 2
expect 2 "lntune db merge writes OUT.db" db merge "$dir/m.db" "$db" --db "$db"
[ -e "$dir/never.db" ] && fail "a refused option created the database"

# db merge builds this machine's winners as import does, so they load; doctor counts the winners
# of this machine that load and exits 1 when one does not.
expect 0 "1 winner(s) of this machine, 1 loadable" doctor --db "$db"
expect 0 "1 winner(s) compiled and verified here" db merge "$dir/merged.db" "$db"
expect 0 "1 winner(s) of this machine, 1 loadable" doctor --db "$dir/merged.db"
expect 0 '"from_db": true, "rebuilt": false' --shape rows=8,H=64 --op rmsnorm --target cpu --rigor quick --db "$dir/merged.db" --json
cp "$db" "$dir/codeless.db"
sqlite3 "$dir/codeless.db" "DELETE FROM artifacts"
expect 1 "problem: 1 winner(s) of this machine, 0 loadable; the first that is not: cpu rmsnorm f32 H=64" doctor --db "$dir/codeless.db"

finish
