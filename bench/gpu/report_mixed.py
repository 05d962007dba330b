"""report_mixed.py DIR - the markdown of bench/gpu/mixed.sh from what it left in DIR:
mixed.json (the JSON arrays of lntune --target cuda --json, one after another),
torch_mixed.json (torch_mixed.py) and mixed-show.txt."""
import datetime
import json
import os
import sys

from report import read  # bench/gpu/report.py, beside this file


def arrays(text):
    """The JSON arrays written one after another."""
    dec, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            break
        obj, i = dec.raw_decode(text, i)
        out.extend(obj)
    return out


def main():
    d = sys.argv[1]
    tuned = arrays(read(d, "mixed.json"))
    torch = json.loads(read(d, "torch_mixed.json", '{"meta": {}, "results": []}'))
    meta = torch.get("meta", {})
    ref = {(r["op"], r["dtype"], r["fusion"]): r for r in torch["results"]}
    commit = os.environ.get("LNTUNE_COMMIT", "unknown")
    print(f"# lntune CUDA, fp16/bf16 and the fused residual add, on {meta.get('device', 'a GPU')}"
          f" - {datetime.date.today()}\n")
    print(f"Commit {commit}; produced by `bench/gpu/mixed.sh` (PyTorch {meta.get('torch', '?')},"
          f" CUDA {meta.get('cuda', '?')}). rows = 16384, H = 4096, eps 1e-5, gamma (and beta for"
          " LayerNorm) in the data type. GB/s counts the bytes a call must move: x (and residual)"
          " read once, y (and residual_out) written once; copy = cuMemcpyDtoD of the same bytes"
          " in the same run; naive = the template's one-block-per-row scalar kernel. Each lntune"
          " figure is its tuner's re-timed median (25 rounds, inputs rotated past the L2);"
          " PyTorch's is the median of 25 timed calls with CUDA events, after 3 warm-ups."
          " PyTorch's Add & Norm is `s = x + r; y = norm(s)` (two kernels, s kept as"
          " residual_out).\n")
    print("| op | dtype | fusion | lntune us | GB/s | ratio to copy | x naive | PyTorch us |"
          " x PyTorch | variant |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    by_case = {}
    for r in tuned:
        op, _, fusion = r["op"].partition("+")
        fusion = fusion or "none"
        by_case[(op, r["dtype"], fusion)] = r
        t = ref.get((op, r["dtype"], fusion))
        tus = f"{t['us']:.2f}" if t else "-"
        speed = f"{t['us'] / r['time_us']:.2f}" if t else "-"
        print(f"| {op} | {r['dtype']} | {fusion} | {r['time_us']:.2f} | {r['gbps']:.0f} |"
              f" {r['ratio_to_copy']:.2f} | {r['speedup_over_naive']:.2f} | {tus} | {speed} |"
              f" `{r['variant']}` |")
    print("\n## Fused residual add against the add and the norm run one after the other\n")
    print("Separate = PyTorch's `x + r` (one kernel) followed by lntune's tuned unfused norm of"
          " the same dtype; fused = lntune's tuned Add & Norm kernel writing y and"
          " residual_out.\n")
    print("| op | dtype | add us (PyTorch) | norm us (lntune) | separate us | fused us |"
          " speed-up |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (op, dt, fusion), r in sorted(by_case.items()):
        if fusion == "none":
            continue
        add = ref.get(("add", dt, "none"))
        norm = by_case.get((op, dt, "none"))
        if not add or not norm:
            continue
        sep = add["us"] + norm["time_us"]
        print(f"| {op} | {dt} | {add['us']:.2f} | {norm['time_us']:.2f} | {sep:.2f} |"
              f" {r['time_us']:.2f} | {sep / r['time_us']:.2f} |")
    print("\n## PyTorch alone\n")
    print("| op | dtype | fusion | us | GB/s |\n|---|---|---|---:|---:|")
    for r in torch["results"]:
        print(f"| {r['op']} | {r['dtype']} | {r['fusion']} | {r['us']:.2f} | {r['gbps']:.0f} |")
    print("\n## Database (`lntune show`)\n\n```")
    print(read(d, "mixed-show.txt").rstrip())
    print("```")


if __name__ == "__main__":
    main()
