#!/usr/bin/env bash
# test_cuda_codes.sh LNTUNE DRIVER.c INCLUDE_DIR CC... - the CUDA template's codes of a quantized
# y (int8, fp8 e4m3) are core/quant.h's, without a GPU: `lntune emit --target cuda` writes an
# RMSNorm kernel of each code, the device functions f32_to_i8 and f32_to_e4m3 are cut out of
# them, and cuda_codes_driver.c, compiled around them under each compiler, checks them (see
# the driver). The emitted kernels must also hold the codes' store and scale.
lntune=$1 driver=$2 include=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

variant=layout=warp,tpr=32,cluster=1,block=128,pack=4,cache=none,stats=sumsq,h=runtime,affine=fused
for dtype in f32/i8row f32/e4m3; do
    src=$work/${dtype//\//_}.cu
    if ! "$lntune" emit --op rmsnorm --target cuda --dtype "$dtype" --variant "$variant" >"$src"; then
        fail "lntune emit --target cuda --dtype $dtype"
        continue
    fi
    code=${dtype#f32/}
    code=${code%row}
    # the function the driver needs, from its first line to the closing brace
    awk -v name="f32_to_$code" '$0 ~ "^LN_INLINE unsigned char " name "\\(" {on = 1} on {print} on && /^}/ {on = 0}' \
        "$src" >>"$work/codes.h"
    grep -q "h.v\[e\] = f32_to_$code(q.v\[e\])" "$src" || fail "$dtype: y is not stored as codes"
    grep -q "qinv" "$src" || fail "$dtype: y is not divided by its scale"
done
grep -q "a.y_scale >=" "$work/f32_e4m3.cu" || fail "f32/e4m3: the static scale is not checked"
grep -q "a.y_scales\[row\] = " "$work/f32_i8row.cu" || fail "f32/i8row: no scale is written per row"
for code in i8 e4m3; do
    [ "$(grep -c "^LN_INLINE unsigned char f32_to_$code(" "$work/codes.h")" = 1 ] ||
        fail "f32_to_$code was not cut out of the emitted source"
done

for cc in "$@"; do
    exe=$work/driver_$(basename "$cc")
    if ! "$cc" -std=c11 -O2 "-I$include/core" "-I$include/include" -DCODES="\"$work/codes.h\"" \
        -o "$exe" "$driver" -lm; then
        fail "$cc could not compile $driver around the CUDA codes"
    elif out=$("$exe"); then
        echo "ok: $(basename "$cc"): $out"
    else
        fail "$(basename "$cc"): $out"
    fi
done
exit $((failures > 0))
