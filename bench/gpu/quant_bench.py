#!/usr/bin/env python3
"""quant_bench.py - lntune's fused RMSNorm + per-row quantization on CUDA device memory
against the unfused sequences a user writes today, and against the copy of the same bytes, all
in one process and one run (the GPU side of bench/quant.py).

  bench/gpu/quant_bench.py --lib BUNDLE/liblntune.so.0 --db DB [--shapes 2048x4096,16384x4096]
                           [--dtypes f32,bf16] [--codes i8,e4m3] [--reps 25] [--calls 20]
                           [--out FILE.md]

For each shape, x dtype (gamma of the same type) and code: RMSNorm whose y is stored as int8
(or fp8 e4m3) codes with a dynamic scale per row (the row's largest |y| / 127, or / 448):
  lntune tuned     lntune_rmsnorm on device pointers, a handle on --db (tuned with
                   lntune --target cuda --op rmsnorm --dtype f32/i8row ...)
  lntune built-in  a handle on no database: the CUDA built-in of the call's kind
  PyTorch          F.rms_norm(x, (H,), w), then s = y.float().abs().amax(-1) / 127,
                   (y / s).round().clamp(-128, 127).to(int8) (e4m3: clamp to +-448 and
                   .to(float8_e4m3fn)): the unfused pair
  Liger            Liger-Kernel's RMSNorm (Triton), then the same quantization (when
                   liger_kernel imports; else reported as n/a with the reason)
  copy             torch's device-to-device copy_ of as many bytes as the kernel moves (x read,
                   codes and scales written), half read and half written
Timing: each measurement queues --calls calls (inputs rotated so that one call's x is not in
the L2 from the last) behind torch.cuda._sleep, so that host overhead (Python, ctypes) does not
count, and divides the CUDA events' interval by --calls; the figure is the median of --reps
measurements, the implementations interleaved in a fresh random order each time. The codes are
checked against PyTorch's: at most one code apart (their fp32 y differ by roundings).
"""
import argparse
import os
import random
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lntune_ctypes import EPS, load, open_handle  # noqa: E402
from quant import agreement, lntune_call, quantize, torch_call  # noqa: E402

SLEEP_CYCLES = 20_000_000  # about 10 ms at 2 GHz: longer than queueing --calls calls


def liger_rms_norm():
    """Liger's RMSNorm forward as fn(x, w), or (None, why)."""
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except Exception as e:  # noqa: BLE001 - any import failure makes Liger n/a
        return None, "%s: %s" % (type(e).__name__, e)
    return (lambda x, w: LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", False)), None


def measure(calls, n):
    """Seconds per call of n calls (rotating through calls) queued behind a sleep."""
    torch.cuda._sleep(SLEEP_CYCLES)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for i in range(n):
        calls[i % len(calls)]()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e-3 / n


def time_all(impls, reps, n):
    """Median seconds per call of each implementation, interleaved in a fresh order per rep."""
    samples = {k: [] for k in impls}
    for k in impls:  # warm-up: first-use compiles (NVRTC, Triton) and allocations
        measure(impls[k], len(impls[k]))
    for _ in range(reps):
        order = list(impls)
        random.shuffle(order)
        for k in order:
            samples[k].append(measure(impls[k], n))
    return {k: statistics.median(v) for k, v in samples.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lib", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--shapes", default="2048x4096,16384x4096")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--codes", default="i8,e4m3")
    p.add_argument("--reps", type=int, default=25)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--out")
    o = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("quant_bench.py: torch.cuda is not available")
    lib = load(o.lib)
    tuned = open_handle(lib, o.db)
    builtin = open_handle(lib, "/nonexistent/lntune-bench-gpu-quant.db")
    liger, liger_why = liger_rms_norm()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 60 << 20)
    results = []
    for shape in o.shapes.split(","):
        R, H = (int(v) for v in shape.split("x"))
        for dt in o.dtypes.split(","):
            tdt = torch.bfloat16 if dt == "bf16" else torch.float32
            xb = torch.tensor([], dtype=tdt).element_size()
            nbuf = max(2, min(16, -(-4 * l2 // (R * H * xb))))
            sets = [torch.randn(R, H, device=dev).to(tdt) for _ in range(nbuf)]
            w = (1.0 + 0.1 * torch.randn(H, device=dev)).to(tdt)
            moved = R * H * (xb + 1) + 4 * R
            # the copy's sources and destinations rotate like x: none is in the L2 from the last
            pairs = [(torch.rand(max(1, moved // 8), device=dev),
                      torch.empty(max(1, moved // 8), device=dev)) for _ in range(nbuf)]
            for code in o.codes.split(","):
                qs = [torch.empty(R, H, dtype=torch.uint8, device=dev) for _ in range(nbuf)]
                qb = [torch.empty(R, H, dtype=torch.uint8, device=dev) for _ in range(nbuf)]
                ss = [torch.empty(R, device=dev) for _ in range(nbuf)]
                sb = [torch.empty(R, device=dev) for _ in range(nbuf)]
                stream = torch.cuda.current_stream().cuda_stream
                impls = {
                    "lntune tuned": [lntune_call(lib, tuned, x, w, q, s, code, stream)
                                     for x, q, s in zip(sets, qs, ss)],
                    "lntune built-in": [lntune_call(lib, builtin, x, w, q, s, code, stream)
                                        for x, q, s in zip(sets, qb, sb)],
                    "PyTorch": [torch_call(x, w, code) for x in sets],
                    "copy": [(lambda s=s, d=d: d.copy_(s)) for s, d in pairs],
                }
                if liger:
                    impls["Liger"] = [(lambda x=x: quantize(liger(x, w), code)) for x in sets]
                t = time_all(impls, o.reps, o.calls)
                ref, _ = torch_call(sets[0], w, code)()
                view = (lambda q: q.view(torch.int8)) if code == "i8" else (lambda q: q)
                agree_t = agreement(view(qs[0]), ref, code)
                agree_b = agreement(view(qb[0]), ref, code)
                results.append((shape, dt, code, t, moved, agree_t, agree_b))
                print("%s %s -> %s row: %s" % (shape, dt, code, ", ".join(
                    "%s %.1f us" % (k, v * 1e6) for k, v in t.items())), file=sys.stderr)
    props = torch.cuda.get_device_properties(dev)
    lines = ["# Fused RMSNorm + dynamic per-row quantization, CUDA: lntune vs the unfused pairs",
             "",
             "%s, torch %s (CUDA %s)%s. Median of %d measurements of %d queued calls each "
             "(inputs rotated past the L2; host overhead excluded: see bench/gpu/quant_bench.py); "
             "GB/s counts x read, the codes and the row scales written; /copy: a device copy "
             "of as many bytes in the same run; vs X: X's time over lntune tuned's. Codes: the "
             "share equal to PyTorch's and the largest distance in codes (tuned; built-in)." % (
                 props.name, torch.__version__, torch.version.cuda,
                 "" if liger else "; Liger n/a (%s)" % liger_why, o.reps, o.calls),
             "",
             "| shape | x | code | lntune tuned | /copy | lntune built-in | /copy | PyTorch | "
             "Liger | copy | vs PyTorch | vs Liger | codes equal (max dist) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for shape, dt, code, t, moved, (st, ft), (sb_, fb) in results:
        tt, tb, tp, tc = t["lntune tuned"], t["lntune built-in"], t["PyTorch"], t["copy"]
        tl = t.get("Liger")
        lines.append(
            "| %s | %s | %s row | %.1f us (%.0f GB/s) | %.2f | %.1f us | %.2f | %.1f us | %s | "
            "%.1f us (%.0f GB/s) | %.2fx | %s | %.4f (%d); %.4f (%d) |" % (
                shape, dt, code, tt * 1e6, moved / tt / 1e9, tc / tt, tb * 1e6, tc / tb,
                tp * 1e6, "%.1f us" % (tl * 1e6) if tl else "n/a", tc * 1e6, moved / tc / 1e9,
                tp / tt, "%.2fx" % (tl / tt) if tl else "n/a", st, ft, sb_, fb))
    text = "\n".join(lines) + "\n"
    print(text)
    if o.out:
        with open(o.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
