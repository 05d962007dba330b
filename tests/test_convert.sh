#!/usr/bin/env bash
# test_convert.sh LNTUNE F16_DRIVER.c BF16_DRIVER.c INCLUDE_DIR CC... - the CPU template's vector
# conversions (templates/cpu/convert.lua, cpu/norm.lua) agree with the verifier's, lane for lane:
# for each compiler and vector width, `lntune emit` writes a LayerNorm kernel and a driver,
# compiled around it, checks its conversions (see the drivers): fp16 widening and narrowing in
# portable C; bf16 narrowing in both layouts, portable and, where the CPU has AVX512-BF16, native.
lntune=$1 f16_driver=$2 bf16_driver=$3 include=$4
# -I for each source folder of the tree (runtime/ first: it and gen/template/ both have a builtin.h)
source_dirs=()
for d in runtime core core/cuda core/tuning_db gen/template gen/compile gen/verify gen/tune gen/export; do source_dirs+=("-I$include/$d"); done
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
widths="4 8"
grep -qw avx512f /proc/cpuinfo 2>/dev/null && widths="$widths 16" # vec=16 needs AVX-512
converts=portable
grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && converts="$converts native"

# check NAME DTYPE VARIANT DRIVER [CFLAGS...]: emit, compile under each compiler, run.
check() {
    local name=$1 dtype=$2 variant=$3 driver=$4
    shift 4
    local kernel=$work/$name.c
    if ! "$lntune" emit --op layernorm --target cpu --dtype "$dtype" --variant "$variant" >"$kernel"; then
        echo "FAIL: lntune emit --dtype $dtype --variant $variant"
        failures=$((failures + 1))
        return
    fi
    for cc in "${compilers[@]}"; do
        local exe=$work/${name}_$(basename "$cc") out
        if ! "$cc" -std=c11 -O2 -march=native "${source_dirs[@]}" \
            -DKERNEL="\"$kernel\"" "$@" -o "$exe" "$driver" -lm; then
            echo "FAIL: $cc could not compile $driver around $dtype $variant"
            failures=$((failures + 1))
        elif out=$("$exe"); then
            echo "ok: $(basename "$cc") $dtype $variant: $out"
        else
            echo "FAIL: $(basename "$cc") $dtype $variant: $out"
            failures=$((failures + 1))
        fi
    done
}

compilers=("$@")
for width in $widths; do
    check "f16_vec$width" f16 "vec=$width,convert=portable" "$f16_driver"
    for convert in $converts; do
        flags=()
        [ "$convert" = native ] && flags=(-DNATIVE)
        check "bf16_linear_${convert}_$width" bf16 "vec=$width,convert=$convert,layout=linear,store=plain" \
            "$bf16_driver" "${flags[@]}"
        check "bf16_evenodd_${convert}_$width" bf16 \
            "vec=$width,convert=$convert,layout=evenodd,ties=even,store=plain" "$bf16_driver" -DEVENODD "${flags[@]}"
    done
done
exit $((failures > 0))
