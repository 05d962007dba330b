#!/bin/sh
# test_package.sh - the installed package works for an app: `cmake --install` into a temporary
# prefix, then examples/ built with find_package(lntune) (shared and static) and with
# pkg-config, each run; and the shared library exports the public API and nothing else.
#
#   test_package.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR [EXTRA_CFLAGS]
set -eu
build=$1 src=$2 dir=$3/package extra=${4:-}
rm -rf "$dir"
mkdir -p "$dir"
prefix=$dir/prefix
echo "case: cmake --install to $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'liblntune.so' | head -1)")
for f in "$libdir/liblntune.so" "$libdir/liblntune.a" "$prefix/include/lntune.h" \
    "$prefix/include/lntune_kernel.h" "$prefix/bin/lntune" \
    "$prefix/share/lntune/templates/cpu/norm.lua" "$libdir/pkgconfig/lntune.pc" \
    "$libdir/cmake/lntune/lntuneConfig.cmake"; do
    test -e "$f" || { echo "FAIL: $f not installed"; exit 1; }
done
echo "ok  : libraries, headers, CLI, templates, lntune.pc and lntuneConfig.cmake installed"

exported=$(nm -D --defined-only "$libdir/liblntune.so" | awk '{print $3}' | sort | tr '\n' ' ')
want="lntune_builtin_isa lntune_close lntune_db_status lntune_errmsg lntune_errstr lntune_layernorm lntune_layernorm_backward lntune_open lntune_open_flags lntune_query lntune_rmsnorm lntune_rmsnorm_backward lntune_version "
test "$exported" = "$want" || { echo "FAIL: exported: $exported"; exit 1; }
echo "ok  : liblntune.so exports exactly: $exported"

export LD_LIBRARY_PATH="$libdir" LNTUNE_DB="$dir/none.db"
for kind in shared static; do
    static=OFF
    [ $kind = static ] && static=ON
    echo "case: examples/ with find_package(lntune), $kind"
    cmake -S "$src/examples" -B "$dir/cmake-$kind" -DCMAKE_PREFIX_PATH="$prefix" \
        -DLNTUNE_EXAMPLE_STATIC=$static -DCMAKE_C_FLAGS="$extra" \
        -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
    cmake --build "$dir/cmake-$kind" >/dev/null
    "$dir/cmake-$kind/basic"
done

echo "case: examples/basic.c with pkg-config"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc $extra "$src/examples/basic.c" $(pkg-config --cflags --libs lntune) -lm -o "$dir/basic-pc"
"$dir/basic-pc"
echo "case: LNTUNE_LOG=debug names the built-ins' instruction set and a bad setting of it"
log=$(LNTUNE_LOG=debug LNTUNE_BUILTIN_ISA=avx9 LNTUNE_STREAMING_BYTES=lots "$dir/basic-pc" 2>&1 >/dev/null)
for want in "built-in CPU kernels: " "LNTUNE_BUILTIN_ISA='avx9' is neither" \
            "LNTUNE_STREAMING_BYTES='lots' is not a positive integer"; do
    echo "$log" | grep -qF "$want" || { echo "FAIL: no '$want' in: $log"; exit 1; }
done
log=$(LNTUNE_LOG=debug LNTUNE_BUILTIN_ISA=generic "$dir/basic-pc" 2>&1 >/dev/null)
echo "$log" | grep -qF "built-in CPU kernels: generic" || { echo "FAIL: generic not forced: $log"; exit 1; }
echo "ok  : debug log names the built-ins and refuses bad settings"
echo "ok  : package end to end"
