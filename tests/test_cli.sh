#!/usr/bin/env bash
# test_cli.sh LNTUNE - the command line's answers to good and bad input: exit 0 with output for
# good input, exit 2 and a message naming the fault for bad usage, never a crash.
lntune=$1
failures=0

# expect CODE TEXT ARGS...: runs lntune ARGS, wants exit CODE and TEXT in stdout+stderr.
expect() {
    local code=$1 text=$2
    shift 2
    local out
    out=$("$lntune" "$@" 2>&1)
    local rc=$?
    if [ "$rc" -ne "$code" ] || ! grep -qF -- "$text" <<<"$out"; then
        echo "FAIL: lntune $* -> exit $rc (want $code), output: ${out:0:300}"
        failures=$((failures + 1))
    else
        echo "ok: lntune $* -> $rc: $(head -n 1 <<<"$out" | cut -c 1-100)"
    fi
}

expect 0 "Commands:" --help
expect 0 "lntune variants" variants --help
expect 0 "lntune emit" emit --help
expect 0 "lntune verify" verify --help
expect 2 "unknown command 'frobnicate'" frobnicate
expect 2 "unknown op 'batchnorm'" variants --op batchnorm --target cpu
expect 2 "unknown target 'tpu'" variants --op layernorm --target tpu
expect 2 "--op is required" variants --target cpu
expect 2 "unknown option '--fast'" variants --op layernorm --target cpu --fast
expect 2 "needs a value" variants --op
expect 2 "unknown parameter 'lanes'" emit --op layernorm --target cpu --variant lanes=8
expect 2 "'vec' = '3' is not one of" emit --op layernorm --target cpu --variant vec=3
expect 2 "'h' = 'fixed' is not one of runtime" emit --op layernorm --target cpu --variant h=fixed
expect 2 "'0' is not a positive whole number" variants --op layernorm --target cpu --shape H=0
expect 2 "'-5' is not a positive whole number" variants --op layernorm --target cpu --shape H=-5
expect 2 "'abc' is not a positive whole number" variants --op layernorm --target cpu --shape H=abc
expect 2 "is not in range" variants --op layernorm --target cpu --shape H=99999999999999999999
expect 2 "is too large" variants --op layernorm --target cpu --shape rows=4000000000,H=1000000
expect 2 "unknown key 'W'" variants --op layernorm --target cpu --shape W=4
expect 2 "H is required" variants --op layernorm --target cpu --shape rows=8

# Good input: at least 100 variants for H=4096, each one a canonical string; emit prints C.
n=$("$lntune" variants --op layernorm --target cpu --shape H=4096 | grep -c '^vec=.*threads=')
if [ "$n" -lt 100 ]; then
    echo "FAIL: only $n layernorm variants for H=4096"
    failures=$((failures + 1))
else
    echo "ok: $n layernorm variants for H=4096"
fi
expect 0 "int lntune_kernel(const lntune_kernel_args *a" emit --op rmsnorm --target cpu --variant vec=4 --shape H=768
expect 0 "h=fixed" emit --op layernorm --target cpu --variant h=fixed --shape H=768
expect 0 "ok: vec=4" verify --op layernorm --target cpu --variant vec=4,acc=2 --shape H=768

[ "$failures" -eq 0 ] && echo "passed" || echo "FAILED: $failures"
exit $((failures > 0))
