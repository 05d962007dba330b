#!/usr/bin/env bash
# bench/export_residual.sh - what an exported file gives an untuned all-bf16 Add & Norm call:
# export_makedb's database (whose all-bf16 fused winner is at H = 1024) exported, then the file
# built twice, as exported (the fused all-bf16 built-ins) and with fused_bf16_generic returning
# NULL (the fp32 row path every residual call took before), and bench/export_residual.c's
# LayerNorm timed with each in alternation, ROUNDS times, Post-LN and Pre-LN.
#   BUILD_DIR (default build), ROUNDS (3), ROWS (4096), HS (4096 768), CC (gcc)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cc=${CC:-gcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/tests/export_makedb" "$work/tuned.db"
"$build/lntune" export --out "$work" --db "$work/tuned.db" 2>/dev/null
python3 - "$work/lntune_kernels.c" "$work/row_path.c" <<'PY'
import sys
s = open(sys.argv[1]).read()
head = "static lntune_kernel_fn fused_bf16_generic(int op, int affine, int out, int streams)\n{\n"
i = s.index(head) + len(head)
j = s.index("\n}\n", i)
open(sys.argv[2], "w").write(s[:i] + "    (void)op, (void)affine, (void)out, (void)streams;\n    return NULL;" + s[j:])
PY
for f in lntune_kernels row_path; do
    $cc -std=c11 -O3 -march=native -c "$work/$f.c" -o "$work/$f.o"
    $cc -std=c11 -O2 -I"$work" -Itests bench/export_residual.c "$work/$f.o" -pthread -lm -o "$work/bench_$f"
done
printf "%-8s %6s %-7s %14s %14s %8s\n" rows H call "fused (ms)" "fp32 row (ms)" speedup
for H in ${HS:-4096 768}; do
    for out in 0 1; do
        fused=() row=()
        for round in $(seq "${ROUNDS:-3}"); do
            fused+=("$("$work/bench_lntune_kernels" "${ROWS:-4096}" "$H" $out)")
            row+=("$("$work/bench_row_path" "${ROWS:-4096}" "$H" $out)")
        done
        python3 - "${ROWS:-4096}" "$H" "$out" "${fused[*]}" "${row[*]}" <<'PY'
import statistics, sys
rows, H, out, fused, row = sys.argv[1:]
f = statistics.median(map(float, fused.split())); r = statistics.median(map(float, row.split()))
print("%-8s %6s %-7s %14.3f %14.3f %7.2fx   (rounds: %s | %s)" % (rows, H, "Pre-LN" if out == "1" else "Post-LN", f, r, r / f, fused, row))
PY
    done
done
