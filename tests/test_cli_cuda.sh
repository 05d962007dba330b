#!/usr/bin/env bash
# test_cli_cuda.sh LNTUNE MOCK_DIR - the command line's CUDA path without a GPU: `lntune --target
# cuda` tunes on the stand-in driver of tests/mock_cuda (MOCK_DIR holds its libcuda.so.1), the
# table and --json name the target, `show` lists the GPU's winners, a rerun reads them back, and
# the CUDA variants, parameters and sources are there for --sm 80 and 90, with --residual too;
# a bf16 Add & Norm is tuned on the stand-in as well.
# Exits 77 without NVRTC.
lntune=$1
mock=$2
failures=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

check() { # check DESCRIPTION COMMAND...: the command must succeed
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

out=$(LD_LIBRARY_PATH=$mock MOCK_CUDA_OP=rmsnorm "$lntune" --target cuda --op rmsnorm \
    --shape rows=8,H=256 --db "$dir/t.db" --json 2>"$dir/err")
rc=$?
if [ $rc -ne 0 ] && grep -q "NVRTC" "$dir/err"; then
    echo "skipped: $(cat "$dir/err")"
    exit 77
fi
check "tune --target cuda exits 0 (got $rc: $(head -c 300 "$dir/err"))" test $rc -eq 0
check "--json names the target and a winner" grep -q '"target": "cuda", "op": "rmsnorm", "direction": "forward", "dtype": "f32", "rows": 8, "H": 256, "variant": "layout=' <<<"$out"
again=$(LD_LIBRARY_PATH=$mock MOCK_CUDA_OP=rmsnorm "$lntune" --target cuda --op rmsnorm \
    --shape rows=8,H=256 --db "$dir/t.db" 2>&1)
check "a rerun reads the winner back: $again" grep -q "^cuda rmsnorm  *8x256 .*(db)" <<<"$again"
# --rigor holds on CUDA as on the CPU (one search): exhaustive compiles every variant of the
# space, the default (measure) fewer. 'compiled' counts what compiled; none fails here.
space=$("$lntune" variants --op rmsnorm --target cuda --shape H=256 | grep -c "affine=fused")
compiled() { grep -o '"compiled": [0-9]*' | grep -o '[0-9]*$'; }
all=$(LD_LIBRARY_PATH=$mock MOCK_CUDA_OP=rmsnorm "$lntune" --target cuda --op rmsnorm \
    --shape rows=4,H=256 --rigor exhaustive --db "$dir/r.db" --json 2>&1 | compiled)
some=$(compiled <<<"$out") # the first run's, at the default rigor
check "--rigor exhaustive compiles all $space variants (${all:-?}), measure fewer (${some:-?})" \
    test "${all:-0}" -eq "$space" -a "${some:-0}" -gt 0 -a "${some:-0}" -lt "$space"
shown=$(LD_LIBRARY_PATH=$mock "$lntune" show --db "$dir/t.db")
check "show lists this machine's GPU winner" grep -q "cuda rmsnorm  *f32  *8x256" <<<"$shown"
check "show --all too" grep -q "cuda rmsnorm" <<<"$("$lntune" show --all --db "$dir/t.db")"

n90=$("$lntune" variants --op layernorm --target cuda --shape H=16384 | grep -c "layout=cluster")
n80=$("$lntune" variants --op layernorm --target cuda --sm 80 --shape H=16384 | grep -c "layout=cluster")
check "clusters are offered for sm_90 ($n90) and not for sm_80 ($n80)" test "$n90" -gt 0 -a "$n80" -eq 0
check "params describes the CUDA knobs" grep -q "layout" <<<"$("$lntune" params --op rmsnorm --target cuda)"
check "emit writes CUDA with its launch line" grep -q "lntune-cuda-launch:" \
    <<<"$("$lntune" emit --op layernorm --target cuda --variant layout=uncached,cache=none)"
# fp16/bf16 and the fused residual, tuned on the stand-in (MOCK_CUDA_TYPES tells it the types
# the kernel ABI does not carry): every variant verified, the key carries fusion and types.
out=$(LD_LIBRARY_PATH=$mock MOCK_CUDA_OP=rmsnorm MOCK_CUDA_TYPES=bf16/bf16/bf16/f32 "$lntune" \
    --target cuda --op rmsnorm --dtype bf16/bf16/bf16/f32 --residual --shape rows=8,H=64 \
    --db "$dir/t.db" --json 2>"$dir/err")
check "tune --dtype bf16/bf16/bf16/f32 --residual on the GPU picks a verified winner: $(head -c 300 <<<"$out")" \
    grep -q '"target": "cuda", "op": "rmsnorm+residual_out", "direction": "forward", "dtype": "bf16/bf16/bf16/f32", "rows": 8, "H": 64, "variant": "layout=.*"wrong": 0' <<<"$out"
check "show lists the fused bf16 GPU winner" \
    grep -q "cuda rmsnorm+residual_out  *bf16/bf16/bf16/f32  *8x64" <<<"$(LD_LIBRARY_PATH=$mock "$lntune" show --db "$dir/t.db")"
# --residual: emit and variants take the fusion.
src=$("$lntune" emit --op rmsnorm --target cuda --residual --dtype bf16/bf16/bf16/f32 --variant layout=block,cache=smem)
check "emit --residual adds residual and writes residual_out" \
    grep -q "add<V>(load_x<V>(xr + i), load<V>(rr + i))" <<<"$src"
check "emit --residual stores residual_out" grep -q "store<V>(ror + i, q)" <<<"$src"
src=$("$lntune" emit --op layernorm --target cuda --residual=noout --variant layout=warp,tpr=8,cache=none)
check "emit --residual=noout reads residual, writes no residual_out" \
    test "$(grep -c "a.residual_out" <<<"$src")" -eq 1 -a "$(grep -c "(ror + i" <<<"$src")" -eq 0
check "every CUDA variant fuses a residual" \
    test "$("$lntune" variants --op layernorm --target cuda --shape H=16384 --residual | md5sum)" \
    = "$("$lntune" variants --op layernorm --target cuda --shape H=16384 | md5sum)"
"$lntune" verify --op layernorm --target cuda --variant layout=uncached >"$dir/v" 2>&1
rc=$?
check "verify refuses CUDA variants with exit 2 ($rc)" test $rc -eq 2
"$lntune" --target cuda --shape H=64 --device 9 --db "$dir/t.db" >"$dir/d" 2>&1
rc=$?
check "a device that does not exist: exit 1 ($rc) and a message ($(head -c 200 "$dir/d"))" \
    test $rc -eq 1 -a -s "$dir/d"
"$lntune" emit --op layernorm --target cuda --sm 7 --variant layout=uncached >"$dir/s" 2>&1
rc=$?
check "--sm 7 is bad usage ($rc)" test $rc -eq 2
[ $failures -eq 0 ] && echo "passed" || echo "FAILED: $failures"
exit $((failures > 0))
