#!/usr/bin/env bash
# test_layering.sh OBJECTS_DIR - the sources call each other one way only. From the symbols of
# every object file of the library, the application layer and the CLI (nm: what each defines and
# what it calls), the file-level call graph must have no circle (tsort finds none), nothing in
# core/ (with core/tuning_db/) or runtime/ may call into gen/, app/ or cli/, and nothing in gen/
# into app/ or cli/: data flows templates -> gen -> tuning_db -> runtime -> app -> cli.
# OBJECTS_DIR is the build's CMakeFiles folder; tests, bench and fuzz objects are left out.
set -u
objdir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"

# One line per object: SOURCE (the path under the target's .dir, without .o).
find "$objdir" -path '*/tests/*' -prune -o -name '*.c.o' -print |
    grep -E '/(lntune_core_obj|lntune_runtime_obj|lntune_tuning_db|lntune_gen|lntune_app|lntune)\.dir/' |
    sort >"$work/objects"
n=$(wc -l <"$work/objects")
[ "$n" -ge 40 ] && ok "$n object files" || fail "only $n object files under $objdir"

# defs: SYMBOL SOURCE; uses: SOURCE SYMBOL.
while read -r o; do
    src=${o#*.dir/}
    src=${src%.o}
    nm "$o" | awk -v s="$src" '$2 ~ /^[TDBR]$/ {print $3, s > "/dev/stderr"} $1 == "U" {print s, $2}'
done <"$work/objects" >"$work/uses" 2>"$work/defs"
sort -u -k1,1 "$work/defs" >"$work/defs.sorted"
sort -k2,2 "$work/uses" >"$work/uses.sorted"
# edges: CALLER CALLEE (files), each once, no self edges.
join -1 2 -2 1 -o 1.1,2.2 "$work/uses.sorted" "$work/defs.sorted" | awk '$1 != $2' | sort -u \
    >"$work/edges"
e=$(wc -l <"$work/edges")
[ "$e" -ge 40 ] && ok "$e calls between files" || fail "only $e calls between files"

# The check must be able to fail: a planted circle is found.
printf 'a.c b.c\nb.c a.c\n' | tsort >/dev/null 2>"$work/planted"
grep -q "loop" "$work/planted" && ok "tsort reports a planted circle" ||
    fail "tsort did not report a planted circle"

tsort "$work/edges" >/dev/null 2>"$work/loops"
if grep -q "loop" "$work/loops"; then
    fail "files that call each other in a circle:"
    sed 's/^/    /' "$work/loops"
else
    ok "no circle among the files"
fi

# no_calls FROM TO WHAT: no file under a folder matching FROM calls one under a folder matching TO.
no_calls() {
    local found
    found=$(awk -v from="^($1)/" -v to="^($2)/" '$1 ~ from && $2 ~ to' "$work/edges")
    if [ -n "$found" ]; then
        fail "$3 calls into $2/:"
        echo "$found" | sed 's/^/    /'
    else
        ok "$3 calls nothing in $2/"
    fi
}
no_calls "runtime|core" "gen|app|cli" "runtime/ or core/"
no_calls "gen" "app|cli" "gen/"
no_calls "app" "cli" "app/"
# core/ is what liblntune and gen share: it calls nothing of runtime/ either.
no_calls "core" "runtime" "core/"

finish
