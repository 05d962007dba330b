"""report.py DIR - the markdown of bench/gpu/run.sh from what it left in DIR: tune.json (lntune
--target cuda --json), torch.json (torch_bench.py --json), tests.log, runs.txt, show.txt."""
import datetime
import json
import os
import re
import subprocess
import sys


def read(d, name, default=""):
    try:
        with open(os.path.join(d, name)) as f:
            return f.read()
    except OSError:
        return default


def main():
    d = sys.argv[1]
    tune = json.loads(read(d, "tune.json", "[]"))
    torch = json.loads(read(d, "torch.json", '{"meta": {}, "results": []}'))
    meta = torch.get("meta", {})
    commit = os.environ.get("LNTUNE_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip() or "unknown"
        except OSError:
            commit = "unknown"
    print(f"# lntune CUDA on {meta.get('device', 'a GPU')} - {datetime.date.today()}\n")
    print(f"Commit {commit}; produced by `bench/gpu/run.sh` (PyTorch {meta.get('torch', '?')}, "
          f"CUDA {meta.get('cuda', '?')}). fp32, eps 1e-5, gamma (and beta for LayerNorm). "
          "GB/s counts x read once and y written once; copy = cuMemcpyDtoD of the same bytes in "
          "the same run. rows = 16384: inputs rotated past the L2; rows 1 and 8: a sample is 16 "
          "back-to-back launches (GPU time per call, launch overhead hidden as under graph "
          "replay), the same for PyTorch (whose own host overhead per call, when larger than the "
          "GPU time, the batch does not hide).\n")
    print("## GPU tests\n\n```")
    for line in read(d, "tests.log").splitlines():
        if re.search(r"^== |verified|passed|failed|FAIL|skipped", line):
            print(line[:200])
    print("```\n")
    print(f"Tuning: {read(d, 'runs.txt').strip()} (the second run reuses the database).\n")
    best = {}
    for r in torch.get("results", []):
        k = (r["op"], r["rows"], r["H"])
        if k not in best or r["us"] < best[k]["us"]:
            best[k] = r
    worst_copy, slower = None, []
    for op, title in (("layernorm", "LayerNorm"), ("rmsnorm", "RMSNorm")):
        print(f"## {title}\n")
        print("| rows | H | lntune us | GB/s | copy GB/s | ratio to copy | x naive | PyTorch us "
              "(impl) | x PyTorch | variant |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
        for r in tune:
            if r.get("target") != "cuda" or r["op"] != op or not r["variant"]:
                continue
            t = best.get((op, r["rows"], r["H"]))
            speed = t["us"] / r["time_us"] if t else float("nan")
            if t and speed < 1.0:
                slower.append(f"{op} {r['rows']}x{r['H']}")
            if r["rows"] == 16384 and r["H"] == 4096:
                worst_copy = (worst_copy or []) + [(op, r["ratio_to_copy"])]
            tt = f"{t['us']:.2f} ({t['impl']})" if t else "-"
            print(f"| {r['rows']} | {r['H']} | {r['time_us']:.2f} | {r['gbps']:.0f} | "
                  f"{r['copy_gbps']:.0f} | {r['ratio_to_copy']:.2f} | "
                  f"{r['speedup_over_naive']:.2f} | {tt} | {speed:.2f} | `{r['variant']}` |")
        print()
    print("## Export\n\n`lntune export` of this database, built with nvcc for sm_90 and run by "
          "`examples/export_cuda.c` (each case against a float64 reference):\n\n```")
    for line in read(d, "export.txt").splitlines()[-12:]:
        print(line[:200])
    print("```\n")
    print("## Targets\n")
    for op, ratio in worst_copy or []:
        print(f"- {op} rows=16384, H=4096: {ratio:.2f} of the copy bandwidth "
              f"({'met' if ratio >= 0.9 else 'NOT met'}: >= 0.90)")
    print(f"- faster than PyTorch at every shape: "
          f"{'yes' if not slower else 'NO: ' + ', '.join(slower)}")
    print("\n## Database (`lntune show --all`)\n\n```")
    print(read(d, "show.txt").strip())
    print("```")


if __name__ == "__main__":
    main()
