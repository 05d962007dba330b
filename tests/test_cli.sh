#!/usr/bin/env bash
# test_cli.sh LNTUNE - the command line's answers to good and bad input: exit 0 with output for
# good input, exit 2 and a message naming the fault for bad usage (docs/reliability.md: exit
# codes), never a crash.
lntune=$1
# quick: one case of each kind; full (the slow tier): every dtype, backward and residual case
# tuned, exported and read back as well.
tier=${2:-full}
full() { [ "$tier" = full ]; }
. "$(dirname "$0")/testlib.sh"

# backward_rerun DB OP WHAT ARGS...: lntune ARGS --db DB, run again, reads the bf16 backward
# winner of OP back from DB, compiling nothing; show --json lists it.
backward_rerun() {
    local db=$1 op=$2 what=$3 out
    shift 3
    local key="\"op\": \"$op\", \"direction\": \"backward\", \"dtype\": \"bf16\""
    out=$("$lntune" "$@" --db "$db" --json 2>&1)
    if grep -qF "$key" <<<"$out" && grep -qF '"compiled": 0, "cache_hits": 0' <<<"$out" &&
        grep -qF '"from_db": true' <<<"$out"; then
        ok "the rerun reads the $what winner back, compiling nothing"
    else
        fail "$what rerun: ${out:0:400}"
    fi
    expect 0 "$key" show --db "$db" --json
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

# The tune command (the default one) refuses bad input with exit 2 before it opens a database:
# no file may appear at --db.
nodb=$(mktemp -u /tmp/lntune-cli-XXXXXX.db)
expect 2 "'0' is not a positive whole number" --shape H=0 --db "$nodb"
expect 2 "'-64' is not a positive whole number" --shape H=-64 --db "$nodb"
expect 2 "'sixty' is not a positive whole number" --shape H=sixty --db "$nodb"
expect 2 "'' is not a positive whole number" --shape H= --db "$nodb"
expect 2 "given twice" --shape H=64,H=128 --db "$nodb"
expect 2 "is not in range" --shape H=3000000000 --db "$nodb"
expect 2 "H above 2^26 is not tuned" --shape H=100000000 --db "$nodb"
expect 2 "is too large" --shape rows=2000000,H=2000000000 --db "$nodb"
expect 2 "over half of this machine's memory" --shape rows=10000000,H=65536 --db "$nodb"
expect 2 "unknown op 'batchnorm'" --shape H=64 --op batchnorm --db "$nodb"
expect 2 "unknown dtype 'f64'" --shape H=64 --dtype f64 --db "$nodb"
expect 2 "unknown dtype 'bf16/f64'" --shape H=64 --dtype bf16/f64 --db "$nodb"
expect 2 "unknown dtype 'f16/f16/f16/f16/f16'" --shape H=64 --dtype f16/f16/f16/f16/f16 --db "$nodb"
# --residual: Add & Norm; bad spellings are refused before anything is opened
expect 2 "unknown option '--residual=yes'" --shape H=64 --residual=yes --db "$nodb"
expect 2 "unknown option '--residualx'" --shape H=64 --residualx --db "$nodb"
expect 2 "unknown rigor 'extreme'" --shape H=64 --rigor extreme --db "$nodb"
expect 2 "unknown option '--turbo'" --shape H=64 --turbo --db "$nodb"
expect 2 "--threads needs a whole number" --shape H=64 --threads 0 --db "$nodb"
expect 2 "--threads needs a whole number" --shape H=64 --threads -2 --db "$nodb"
expect 2 "--threads needs a whole number" --shape H=64 --threads many --db "$nodb"
expect 2 "--shape is required" --db "$nodb"
expect 2 "needs a value" --shape
expect 2 "unknown target 'tpu'" --shape H=64 --target tpu --db "$nodb"
if [ -e "$nodb" ]; then
    fail "bad input created $nodb"
    rm -f "$nodb"*
else
    ok "no database was created by bad input"
fi
expect 1 "does not exist" show --db "$nodb"

# Good input: at least 100 variants for H=4096, each one a canonical string; emit prints C.
n=$("$lntune" variants --op layernorm --target cpu --shape H=4096 | grep -c '^vec=.*threads=')
if [ "$n" -lt 100 ]; then
    fail "only $n layernorm variants for H=4096"
else
    ok "$n layernorm variants for H=4096"
fi
expect 0 "int lntune_kernel(const lntune_kernel_args *a" emit --op rmsnorm --target cpu --variant vec=4 --shape H=768
expect 0 "h=fixed" emit --op layernorm --target cpu --variant h=fixed --shape H=768
expect 0 "ok: vec=4" verify --op layernorm --target cpu --variant vec=4,acc=2 --shape H=768
expect 0 "lntune time" time --help
expect 2 "--shape is required" time --op rmsnorm --target cpu --variant vec=4
expect 2 "'vec' = '3' is not one of" time --op rmsnorm --target cpu --variant vec=3 --shape H=64
expect 0 "spread: the slowest is" time --op rmsnorm --target cpu --shape rows=16,H=64 --variant vec=4 --variant vec=8
expect 2 "--seconds needs a whole number from 1 to 3600" time --op rmsnorm --target cpu --shape H=64 --variant vec=4 --seconds 0
expect 0 "copy variants): " time --op rmsnorm --target cpu --shape rows=16,H=64 --variant vec=4 --seconds 1

# 16-bit types: the source converts, the verifier checks the rounding, the tuner keys by dtype.
expect 0 "uint16_t" emit --op layernorm --target cpu --dtype bf16 --variant vec=8 --shape H=768
expect 0 "f32_to_f16" emit --op rmsnorm --target cpu --dtype f16/f16/f32 --variant vec=8 --shape H=768
types="bf16"
full && types="bf16 f16 f16/f32/f32 f32/bf16/f32 bf16/bf16/f32"
for t in $types; do
    expect 0 "ok: vec=8" verify --op layernorm --target cpu --dtype $t --variant vec=8,acc=2 --shape H=768
done
if full && grep -qw f16c /proc/cpuinfo && grep -qw avx512f /proc/cpuinfo; then
    expect 0 "ok: vec=16" verify --op rmsnorm --target cpu --dtype f16 --variant vec=16,convert=native --shape H=4097
fi
if full; then
    db16=$(mktemp -u /tmp/lntune-cli-XXXXXX.db)
    expect 0 "64x96 bf16" --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick --db "$db16"
    expect 0 "bf16" show --db "$db16"
    expect 0 '"dtype": "bf16"' --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick --db "$db16" --json
    rm -f "$db16"*
fi

# Code loading (db_trust.c): a database in a folder only this user may write passes doctor;
# in /tmp (others may write it), or once its group may write the file, liblntune loads no code
# from it: tune warns, doctor exits 1 naming why.
private=$(mktemp -d /tmp/lntune-cli-private-XXXXXX)
dbp=$private/tune.db
expect 0 "64x96" --shape rows=64,H=96 --op rmsnorm --target cpu --rigor quick --db "$dbp"
expect 0 "artifact(s) hash to the digest recorded" doctor --db "$dbp"
expect 0 "ok: it and its folder are this user's" doctor --db "$dbp"
# Wisdom: export (JSON lines, no code) -> import into an empty database -> the same winner
# listed; a second import changes nothing; merge keeps both databases' records; junk refused.
expect 0 "1 machine(s) of $dbp written to $private/w.jsonl (no machine code)" db export "$private/w.jsonl" --db "$dbp"
if grep -q "artifact\|ELF" "$private/w.jsonl"; then fail "the wisdom file carries code"; else ok "no code in the wisdom file"; fi
expect 0 "1 machine(s) (1 new)" db import "$private/w.jsonl" --db "$private/imported.db"
expect 0 "0 measurement(s), 0 winner(s), 0 crossover(s)" db import "$private/w.jsonl" --db "$private/imported.db"
expect 0 "64x96" show --db "$private/imported.db"
# Import rebuilds: this machine's winner is compiled and verified here, and a rerun of the
# shape reads it back with its code; --seed-from starts a search from the wisdom's variants.
expect 0 "1 winner(s) compiled and verified here" db import "$private/w.jsonl" --db "$private/rebuilt.db"
expect 0 '"from_db": true, "rebuilt": false' --shape rows=64,H=96 --op rmsnorm --target cpu --rigor quick --db "$private/rebuilt.db" --json
seeded=$("$lntune" --shape rows=64,H=96 --op rmsnorm --target cpu --db "$private/seeded.db" --seed-from "$private/w.jsonl" --json 2>&1)
if grep -q '"seeds": [1-4][,}]' <<<"$seeded" && ! ls -d "${TMPDIR:-/tmp}"/lntune-seed-* 2>/dev/null | grep -q .; then
    ok "--seed-from: the search started from $(grep -o '"seeds": [0-9]*' <<<"$seeded"), its temporary database removed"
else
    fail "--seed-from: ${seeded:0:400}"
fi
expect 1 "--seed-from: cannot read" --shape rows=64,H=96 --op rmsnorm --target cpu --db "$private/seeded.db" --seed-from "$private/missing.jsonl"
echo '{"lntune_wisdom": 7}' > "$private/junk.jsonl"
expect 1 "not lntune wisdom of version 1" --shape rows=64,H=96 --op rmsnorm --target cpu --db "$private/seeded.db" --seed-from "$private/junk.jsonl"
expect 0 "winner(s)" db merge "$private/merged.db" "$dbp" "$private/imported.db"
expect 0 "64x96" show --db "$private/merged.db"
echo '{"lntune_wisdom": 2}' > "$private/future.jsonl"
expect 1 "not lntune wisdom of version 1" db import "$private/future.jsonl" --db "$private/imported.db"
# A failed import or merge into a database it created leaves no file behind.
expect 1 "removed (this command created it)" db import "$private/future.jsonl" --db "$private/new.db"
expect 3 "removed (this command created it)" db merge "$private/new-merge.db" "$private/future.jsonl"
if ls "$private"/new.db* "$private"/new-merge.db* 2>/dev/null | grep -q .; then
    fail "a failed import or merge left a database file: $(ls "$private"/new*)"
else
    ok "no database file left by a failed import or merge"
fi
expect 2 "is not export, import or merge" db frobnicate
chmod g+w "$dbp"
expect 1 "is writable by its group" doctor --db "$dbp"
chmod g-w "$dbp"
chmod o+w "$private"
expect 1 "folder $private is writable by others" doctor --db "$dbp"
rm -rf "$private"
dbt=$(mktemp -u /tmp/lntune-cli-XXXXXX.db)
expect 0 "warning: liblntune will load no tuned kernel from this database" \
    --shape rows=64,H=96 --op rmsnorm --target cpu --rigor quick --db "$dbt"
expect 1 "problem: liblntune loads no code from it" doctor --db "$dbt"
rm -f "$dbt"*
expect 1 "does not exist" doctor --db "$nodb"

# Backward: the gradients' kernels through every command; bad combinations refused before any
# database is opened; a tuning run keyed by the op text, read back by a rerun that compiles nothing.
expect 0 "threads across rows" params --op layernorm --target cpu --backward
n=$("$lntune" variants --op rmsnorm --target cpu --backward --shape H=768 | grep -c '^vec=.*threads=')
if [ "$n" -lt 50 ]; then
    fail "only $n rmsnorm backward variants for H=768"
else
    ok "$n rmsnorm backward variants for H=768"
fi
expect 0 "const lntune_backward_kernel_args *a" emit --op layernorm --target cpu --backward --variant vec=8 --shape H=768
expect 0 "f32_to_bf16" emit --op rmsnorm --target cpu --backward --dtype bf16 --variant vec=8 --shape H=768
expect 0 "ok: vec=8,acc=2,rows=2" verify --op layernorm --target cpu --backward --variant vec=8,acc=2,rows=2 --shape H=768
expect 0 "ok: vec=4" verify --op rmsnorm --target cpu --backward --dtype bf16/bf16/f32 --variant vec=4,rows=2 --shape H=768
expect 0 "layernorm_backward 16x64, one interleaved run" time --op layernorm --target cpu --backward --shape rows=16,H=64 --variant vec=4 --variant vec=8,rows=2
expect 2 "dx and dy have x's type" --backward --shape H=64 --dtype bf16/f32/f32 --db "$nodb"
expect 2 "dx and dy have x's type" verify --op layernorm --target cpu --backward --dtype f16/f32 --variant vec=4
expect 1 "CUDA" --backward --shape H=64 --target cuda --device 63 --db "$nodb"
expect 2 "unknown parameter 'stats'" emit --op layernorm --target cpu --backward --variant stats=welford
expect 2 "unknown op 'layernorm_backward'" --shape H=64 --op layernorm_backward --db "$nodb"
if [ -e "$nodb" ]; then
    fail "bad backward input created $nodb"
    rm -f "$nodb"*
fi
if full; then
    dbb=$(mktemp -u /tmp/lntune-cli-XXXXXX.db)
    expect 0 "rmsnorm_backward   64x96 bf16" --backward --op rmsnorm --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick --db "$dbb"
    expect 0 "rmsnorm_backward   bf16" show --db "$dbb"
    backward_rerun "$dbb" rmsnorm_backward backward --backward --op rmsnorm --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick
    mkdir -p "$dbb.export"
    out=$("$lntune" export --db "$dbb" --out "$dbb.export" 2>&1)
    if grep -qF "1 tuned kernel(s)" <<<"$out" && ! grep -q "warning" <<<"$out" &&
        grep -q "^ \*   t0: rmsnorm_backward bf16 H=96 " "$dbb.export/lntune_kernels.c" &&
        grep -q "lntune_kernels_rmsnorm_backward" "$dbb.export/lntune_kernels.h"; then
        ok "export writes the backward winner and its entry point"
    else
        fail "export of a backward database: ${out:0:300}"
    fi
    rm -rf "$dbb.export"
    # The forward of the same shape is another key: not read back from the backward's row.
    expect 0 '"from_db": false' --op rmsnorm --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick --db "$dbb" --json
    rm -f "$dbb"*
fi
# Fused residual add: the source reads residual (and writes residual_out), the verifier checks
# both, the tuner keys the fusion in the op text, show prints it, time counts its bytes.
expect 0 "load_r(res" emit --op layernorm --target cpu --residual=noout --variant vec=8 --shape H=768
expect 0 "store_r(res_out" emit --op rmsnorm --target cpu --residual --dtype bf16 --variant vec=8 --shape H=768
expect 0 "typedef float rt; /* residual, residual_out: f32" emit --op layernorm --target cpu --residual --dtype bf16/bf16/bf16/f32 --variant vec=8 --shape H=768
types="bf16"
full && types="f32 bf16 f16/f32/bf16/bf16 bf16/bf16/f32/f32"
for t in $types; do
    expect 0 "ok: vec=8" verify --op layernorm --target cpu --residual --dtype $t --variant vec=8,acc=2 --shape H=768
    expect 0 "ok: vec=4" verify --op rmsnorm --target cpu --residual=noout --dtype $t --variant vec=4,rows=2 --shape H=768
done
expect 0 "rmsnorm+residual 16x64, one interleaved run" time --op rmsnorm --target cpu --residual=noout --shape rows=16,H=64 --variant vec=4
if full; then
    dbr=$(mktemp -u /tmp/lntune-cli-XXXXXX.db)
    expect 0 "layernorm+residual_out 64x96 bf16" --shape rows=64,H=96 --op layernorm --residual --dtype bf16 --target cpu --rigor quick --db "$dbr"
    expect 0 "rmsnorm+residual   64x96" --shape rows=64,H=96 --op rmsnorm --residual=noout --target cpu --rigor quick --db "$dbr"
    expect 0 "layernorm+residual_out bf16" show --db "$dbr"
    expect 0 '"op": "rmsnorm+residual"' show --db "$dbr" --json
    rm -f "$dbr"*
fi
# The fused residual backward: dx adds dresidual_out (the unfused source has no dres rows), the
# verifier checks it, the tuner keys it "+residual", a rerun reads it back, show prints it.
expect 0 "load_x(dres[0] + j)" emit --op layernorm --target cpu --backward --residual --variant vec=8 --shape H=768
expect 0 "bf16_to_f32(dres[0][j])" emit --op rmsnorm --target cpu --backward --residual --dtype bf16 --variant vec=4,rows=2 --shape H=768
if "$lntune" emit --op layernorm --target cpu --backward --variant vec=8 --shape H=768 | grep -qF "dres["; then
    fail "the unfused backward source reads dresidual_out"
else
    ok "the unfused backward source has no dresidual_out rows"
fi
types="bf16"
full && types="f32 bf16 f16/f16/f32"
for t in $types; do
    expect 0 "ok: vec=8" verify --op layernorm --target cpu --backward --residual --dtype $t --variant vec=8,acc=2 --shape H=768
    expect 0 "ok: vec=4" verify --op rmsnorm --target cpu --backward --residual --dtype $t --variant vec=4,rows=2 --shape H=768
done
expect 0 "layernorm_backward+residual 16x64, one interleaved run" time --op layernorm --target cpu --backward --residual --shape rows=16,H=64 --variant vec=4 --variant vec=8,rows=2
expect 2 "--backward with --residual=noout" --backward --residual=noout --shape H=64 --db "$nodb"
expect 2 "--backward with --residual=noout" verify --op layernorm --target cpu --backward --residual=noout --variant vec=4
if full; then
    dbrb=$(mktemp -u /tmp/lntune-cli-XXXXXX.db)
    expect 0 "layernorm_backward+residual 64x96 bf16" --backward --residual --op layernorm --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick --db "$dbrb"
    expect 0 "layernorm_backward+residual bf16" show --db "$dbrb"
    backward_rerun "$dbrb" layernorm_backward+residual "fused backward" --backward --residual --op layernorm --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick
    # The unfused backward of the same shape is another key: not read back from the fused row.
    expect 0 '"from_db": false' --backward --op layernorm --shape rows=64,H=96 --dtype bf16 --target cpu --rigor quick --db "$dbrb" --json
    rm -f "$dbrb"*
fi

finish
