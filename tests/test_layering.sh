#!/usr/bin/env bash
# test_layering.sh OBJECTS_DIR [SOURCE_DIR] - the sources call each other one way only. From the
# symbols of every object file of the library, the application layer and the CLI (nm: what each
# defines and what it calls), the file-level call graph must have no circle (tsort finds none),
# nothing in core/ (with core/tuning_db/) or runtime/ may call into gen/, app/ or cli/, and nothing
# in gen/ into app/ or cli/: data flows templates -> gen -> tuning_db -> runtime -> app -> cli.
# Within gen/ the stages run forward: gen/common/ (what they share), then template, compile,
# verify, tune, export; no file of a stage calls or includes (#include "...", read from the
# sources) a file of a later one.
# OBJECTS_DIR is the build's CMakeFiles folder; tests, bench and fuzz objects are left out.
# SOURCE_DIR is the repository (default: this file's parent folder).
set -u
objdir=$1
srcdir=${2:-$(dirname "$0")/..}
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

# The stages of gen/ in their order; a file may call and include files of its own stage or an
# earlier one only. export comes last: it reads what tune stored and regenerates with template.
stages="common template compile verify tune export"

# includes: FILE HEADER (paths under the repository), for every quoted #include in gen/ whose
# header is a file under gen/ (a header name is one file: the build's include path is flat).
(cd "$srcdir" && find gen -name '*.[ch]' | sort) >"$work/gen_files"
while read -r f; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$srcdir/$f" |
        while read -r h; do
            grep -E "(^|/)${h//./\\.}\$" "$work/gen_files" | sed "s|^|$f |"
        done
done <"$work/gen_files" | sort -u >"$work/includes"
i=$(wc -l <"$work/includes")
[ "$i" -ge 40 ] && ok "$i includes between files of gen/" || fail "only $i includes in gen/"

# backward EDGES: the edges (FROM TO) from a stage of gen/ to a later one.
backward() {
    awk -v stages="$stages" '
        BEGIN { n = split(stages, s, " "); for (k = 1; k <= n; ++k) rank[s[k]] = k }
        function stage(path, parts) {
            return split(path, parts, "/") >= 3 && parts[1] == "gen" ? rank[parts[2]] : 0
        }
        stage($1) && stage($2) > stage($1)' "$1"
}

# The check must be able to fail: a planted call from template to tune is found.
echo "gen/template/a.c gen/tune/b.c" >"$work/planted_stage"
[ -n "$(backward "$work/planted_stage")" ] && ok "a planted call to a later stage is found" ||
    fail "a planted call from gen/template/ to gen/tune/ was not found"
for d in "$srcdir"/gen/*/; do
    d=$(basename "$d")
    case " $stages " in *" $d "*) ;; *) fail "gen/$d/ is no stage: add it to the order" ;; esac
done

for kind in calls includes; do
    found=$(backward "$work/$([ "$kind" = calls ] && echo edges || echo includes)")
    if [ -n "$found" ]; then
        fail "a stage of gen/ $kind a later one (order: $stages):"
        echo "$found" | sed 's/^/    /'
    else
        ok "no stage of gen/ $kind a later one ($stages)"
    fi
done

finish
