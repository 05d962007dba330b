#!/bin/sh
# test_doc_examples.sh - every ```c block of docs/api.md is the complete program the page says
# it is: compiled against include/ with warnings as errors, linked with liblntune, and run
# without a database (LNTUNE_DB pointing at no file), where it must exit 0. A block that stops
# compiling, linking or running fails the test, and so does a page with no C block at all.
#
#   test_doc_examples.sh SOURCE_DIR LIBLNTUNE_SO CC SCRATCH_DIR [EXTRA_CFLAGS]
set -eu
src=$1 lib=$2 cc=$3 dir=$4/doc_examples extra=${5:-}
page=$src/docs/api.md
rm -rf "$dir"
mkdir -p "$dir"
# Block N (from 1) of the page into $dir/exampleN.c, with the line it starts on in a comment.
awk -v dir="$dir" '
    /^```c[ \t]*$/ { n++; file = dir "/example" n ".c"; print "/* docs/api.md:" NR + 1 " */" > file; inside = 1; next }
    /^```/ && inside { inside = 0; close(file); next }
    inside { print > file }
    END { if (inside) { print "unterminated ```c block" > "/dev/stderr"; exit 1 } }
' "$page"
count=$(find "$dir" -name 'example*.c' | wc -l)
[ "$count" -gt 0 ] || { echo "FAIL: no \`\`\`c block in $page"; exit 1; }
libdir=$(dirname "$lib")
failures=0
for f in $(find "$dir" -name 'example*.c' | sort -V); do
    where=$(head -1 "$f")
    exe=${f%.c}
    # shellcheck disable=SC2086 # EXTRA_CFLAGS is a list of flags
    if ! "$cc" -std=c11 -Wall -Wextra -Werror $extra -I"$src/include" "$f" -o "$exe" \
        -L"$libdir" -Wl,-rpath,"$libdir" -llntune -lm >"$exe.log" 2>&1; then
        echo "FAIL: $where does not build:"
        cat "$exe.log"
        failures=$((failures + 1))
    elif ! LNTUNE_DB="$dir/none.db" "$exe" >"$exe.out" 2>&1; then
        echo "FAIL: $where builds but exits non-zero:"
        cat "$exe.out"
        failures=$((failures + 1))
    else
        echo "ok  : $where builds, links and runs: $(head -1 "$exe.out")"
    fi
done
echo "$count examples, $failures failures"
[ "$failures" -eq 0 ]
