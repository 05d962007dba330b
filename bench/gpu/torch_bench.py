"""torch_bench.py - PyTorch's LayerNorm and RMSNorm (F.rms_norm and the formula most models
use) on the shapes of bench/gpu/run.sh, timed as lntune's CUDA tuner times its kernels: CUDA
events, warm-up, median; inputs rotated past the L2 cache when x and y together are smaller
than 4x the L2; below 32 MB a sample is a batch of 16 back-to-back calls (so the GPU time, not
the launch, is measured, as under graph replay). Prints markdown, or JSON with --json."""
import json
import statistics
import sys

import torch
import torch.nn.functional as F

REPS, WARMUP, BATCH, BATCH_BYTES = 25, 3, 16, 32e6
HS, ROWS = (768, 1024, 4096, 8192, 16384), (16384, 1, 8)


def rmsnorm_formula(x, w, eps):
    # The formula most models use (LLaMA): fp32 throughout here.
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def median_us(fn, xs, batch):
    times = []
    k = 0
    for r in range(-WARMUP, REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(batch):
            fn(xs[k % len(xs)])
            k += 1
        e.record()
        e.synchronize()
        if r >= 0:
            times.append(s.elapsed_time(e) * 1e3 / batch)
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        sys.exit("torch_bench: torch.cuda is not available")
    dev = torch.device("cuda")
    l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 60 << 20)
    rows_out = []
    impls = [("layer_norm", "layernorm"), ("rms_norm", "rmsnorm"), ("rmsnorm formula", "rmsnorm")]
    for name, op in impls:
        if name == "rms_norm" and not hasattr(F, "rms_norm"):
            continue
        for H in HS:
            w = torch.randn(H, device=dev)
            b = torch.randn(H, device=dev)
            for rows in ROWS:
                nbytes = 2 * rows * H * 4
                nbuf = 1 if nbytes >= 4 * l2 else int(-(-4 * l2 // nbytes))
                nbuf = min(nbuf, 64)
                xs = [torch.randn(rows, H, device=dev) + 1000 for _ in range(nbuf)]
                if name == "layer_norm":
                    fn = lambda x: F.layer_norm(x, (H,), w, b, 1e-5)
                elif name == "rms_norm":
                    fn = lambda x: F.rms_norm(x, (H,), w, 1e-5)
                else:
                    fn = lambda x: rmsnorm_formula(x, w, 1e-5)
                us = median_us(fn, xs, BATCH if nbytes < BATCH_BYTES else 1)
                rows_out.append({"impl": name, "op": op, "rows": rows, "H": H, "us": us,
                                 "gbps": nbytes / 1e3 / us})
                del xs
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name()}
    if "--json" in sys.argv:
        json.dump({"meta": meta, "results": rows_out}, sys.stdout, indent=1)
        return
    print(f"## PyTorch {meta['torch']} (CUDA {meta['cuda']}) on {meta['device']}\n")
    print("| impl | rows | H | us | GB/s |\n|---|---:|---:|---:|---:|")
    for r in rows_out:
        print(f"| {r['impl']} | {r['rows']} | {r['H']} | {r['us']:.2f} | {r['gbps']:.0f} |")


if __name__ == "__main__":
    main()
