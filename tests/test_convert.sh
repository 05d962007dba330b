#!/usr/bin/env bash
# test_convert.sh LNTUNE DRIVER.c INCLUDE_DIR CC... - the CPU template's portable fp16 vector
# conversions (templates/cpu/convert.lua) agree with the verifier's, lane for lane: for each
# compiler and vector width, `lntune emit` writes an fp16 LayerNorm kernel and convert_driver.c,
# compiled around it, checks load_x and narrow_y (see there).
lntune=$1 driver=$2 include=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
widths="4 8"
grep -qw avx512f /proc/cpuinfo 2>/dev/null && widths="$widths 16" # vec=16 needs AVX-512
for width in $widths; do
    kernel=$work/f16_vec$width.c
    if ! "$lntune" emit --op layernorm --target cpu --dtype f16 \
        --variant "vec=$width,convert=portable" >"$kernel"; then
        echo "FAIL: lntune emit vec=$width"
        failures=$((failures + 1))
        continue
    fi
    for cc in "$@"; do
        exe=$work/convert_${width}_$(basename "$cc")
        if ! "$cc" -std=c11 -O2 -march=native -I"$include/gen" -I"$include/runtime" \
            -DKERNEL="\"$kernel\"" -o "$exe" "$driver" -lm; then
            echo "FAIL: $cc could not compile the driver around vec=$width"
            failures=$((failures + 1))
        elif out=$("$exe"); then
            echo "ok: $(basename "$cc") vec=$width: $out"
        else
            echo "FAIL: $(basename "$cc") vec=$width: $out"
            failures=$((failures + 1))
        fi
    done
done
exit $((failures > 0))
