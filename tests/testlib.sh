# testlib.sh - what the shell tests share; each sources it (. "$(dirname "$0")/testlib.sh"):
# a failure count kept by ok and fail, expect (lntune's exit code and output), a scratch
# directory removed at exit, and the closing line with the exit code (finish).
# shellcheck shell=bash

failures=0
# Tests run beside each other (ctest -j): a tune never waits for a quiet machine here, nor
# marks its winner as measured under load (gen/tune/load.h), nor pauses between final runs, and
# it times a tenth as long (tune_job.c): no test judges speed.
export LNTUNE_MAX_WAIT=0 LNTUNE_LOAD=ignore LNTUNE_FINAL_GAP_S=0 LNTUNE_TIME_SCALE=0.1
ok() { echo "ok: $*"; }
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# scratch NAME: dir is a new directory /tmp/lntune-NAME-XXXXXX, removed at exit, holding the
# JIT's object cache.
scratch() {
    dir=$(mktemp -d "/tmp/lntune-$1-XXXXXX")
    trap 'rm -rf "$dir"' EXIT
    export XDG_CACHE_HOME=$dir/cache
}

# expect CODE TEXT ARGS...: $lntune ARGS exits CODE with TEXT in its stdout and stderr. The
# includer sets lntune, the command line program.
# shellcheck disable=SC2154
expect() {
    local code=$1 text=$2
    shift 2
    local out rc
    out=$("$lntune" "$@" 2>&1)
    rc=$?
    if [ "$rc" -ne "$code" ] || ! grep -qF -- "$text" <<<"$out"; then
        fail "lntune $* -> exit $rc (want $code and '$text'), output: ${out:0:400}"
    else
        ok "lntune $* -> $rc: $(grep -F -- "$text" <<<"$out" | head -n 1 | cut -c 1-110)"
    fi
}

# finish: the closing line; the exit code is 1 after any failure.
finish() {
    [ "$failures" -eq 0 ] && echo "passed" || echo "FAILED: $failures"
    exit $((failures > 0))
}
