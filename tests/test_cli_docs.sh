#!/usr/bin/env bash
# test_cli_docs.sh LNTUNE CLI_MD - docs/cli.md and the command line's help come from one command
# table (cli/lntune.c): every command `lntune help` lists has a row in cli.md's table of
# commands, and its synopsis (the lines of `lntune help COMMAND` before its description) stands
# in cli.md word for word; every option a command takes appears in its synopsis. A usage text
# changed in one place and not the other fails here.
lntune=$1
doc=$2
. "$(dirname "$0")/testlib.sh"

commands=$("$lntune" help | sed -n 's/^  lntune \[\?\([a-z]*\).*/\1/p')
[ "$(wc -w <<<"$commands")" -ge 10 ] && ok "lntune help lists $(echo $commands)" ||
    fail "lntune help lists too few commands: $commands"
for c in $commands; do
    grep -q "^| \`lntune $c\b\|^| \`lntune --shape .*(\`lntune $c " "$doc" ||
        fail "cli.md's table of commands has no row for $c"
    synopsis=$("$lntune" help "$c" | sed '/^  [^ ]/,$d')
    if grep -qF -- "$(head -n 1 <<<"$synopsis")" "$doc" &&
        python3 - "$doc" "$synopsis" <<'PY'; then
import sys
doc, synopsis = open(sys.argv[1]).read(), sys.argv[2]
sys.exit(0 if synopsis + "\n" in doc else 1)
PY
        ok "$c: its synopsis ($(wc -l <<<"$synopsis") lines) is in cli.md"
    else
        fail "$c: cli.md lacks its synopsis:"$'\n'"$synopsis"
    fi
    # the options it takes (from its refusal of one it does not), each in its synopsis
    other=--generic-only
    [ "$c" = export ] && other=--retune
    takes=$("$lntune" "$c" $other 2>&1 | sed -n 's/.*(its options: \(.*\))$/\1/p')
    [ -n "$takes" ] || fail "$c: no list of its options in its refusal of $other"
    for opt in $takes; do
        [ "$opt" = "--force" ] && [ "$c" = show ] && continue # taken to refuse it with a reason
        grep -qF -- "$opt" <<<"$synopsis" || fail "$c takes $opt, which its synopsis omits"
    done
done
finish
