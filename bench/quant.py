#!/usr/bin/env python3
"""quant.py - lntune's fused norm + quantize (CPU) against the unfused sequence a user writes
today, PyTorch's norm and then its quantization, and against the copy of the same bytes, all in
one process and one run.

  bench/quant.py --lib build-bench/liblntune.so --db DB [--threads N] [--shapes 2048x4096,...]
                 [--dtypes f32,bf16] [--codes i8,e4m3] [--reps 7] [--rep-ms 200] [--out FILE.md]

For each shape, x dtype (gamma of the same type) and code: RMSNorm whose y is stored as int8
(or fp8 e4m3) codes with a dynamic scale per row, as vLLM's per-token quantization computes it
(the row's largest |y| / 127, or / 448):
  lntune tuned    lntune_rmsnorm on a handle opened on --db (tuned with
                  lntune --op rmsnorm --dtype f32/i8row ...; LNTUNE_LOG=debug says which kernel)
  lntune untuned  a handle on no database: the float built-in into a buffer, then quantized
  PyTorch         F.rms_norm(x, (H,), w), then s = y.float().abs().amax(-1) / 127,
                  (y / s).round().clamp(-128, 127).to(int8) (e4m3: clamp to +-448 and
                  .to(float8_e4m3fn)): the unfused pair
  copy            torch's copy_ (on the same threads) of as many bytes as the kernel moves
                  (x read, codes written), half read and half written, as the tuner's copy
                  moves them
Repetitions of at least --rep-ms each, the implementations in a fresh random order every
repetition; the figure is the median time per call. The codes are checked against PyTorch's:
at most one code apart everywhere (their fp32 y differ by roundings), and equal almost always.
The bench's peers come from bench/install-deps (its Python runs this script).
"""
import sys

import torch
import torch.nn.functional as F

from lntune_ctypes import (EPS, LNTUNE_BF16, LNTUNE_DEVICE_CUDA, LNTUNE_F32, LNTUNE_FP8_E4M3,
                           LNTUNE_I8, Args, bench_arguments, cases, copy_call, cpu_name, finish,
                           rmsnorm_call, start, time_all)


def lntune_call(lib, ctx, x, w, q, scales, code, stream=None):
    """lntune_rmsnorm of x into codes q and row scales; on CUDA device memory (bench/gpu's
    quant_bench.py) when a stream (a CUstream handle) is given."""
    a = Args()
    a.rows, a.H = x.shape
    a.eps = EPS
    a.dtype = LNTUNE_BF16 if x.dtype == torch.bfloat16 else LNTUNE_F32
    a.x, a.y, a.gamma = x.data_ptr(), q.data_ptr(), w.data_ptr()
    a.y_dtype = LNTUNE_I8 if code == "i8" else LNTUNE_FP8_E4M3
    a.y_scales = scales.data_ptr()
    if stream is not None:
        a.device, a.stream = LNTUNE_DEVICE_CUDA, stream
    return rmsnorm_call(lib, ctx, a)


def quantize(y, code):
    """The per-row quantization a PyTorch user writes: (codes, scales) of y."""
    y = y.float()
    if code == "i8":
        s = y.abs().amax(dim=-1, keepdim=True) / 127.0
        return (y / s).round().clamp(-128, 127).to(torch.int8), s
    s = y.abs().amax(dim=-1, keepdim=True) / 448.0
    return (y / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), s


def torch_call(x, w, code):
    H = x.shape[1]
    return lambda: quantize(F.rms_norm(x, (H,), w, EPS), code)


def agreement(q, ref, code):
    """(share of codes equal to PyTorch's, largest distance in codes)."""
    if code == "i8":
        d = (q.to(torch.int32) - ref.to(torch.int32)).abs()
        return float((d == 0).float().mean()), int(d.max())
    a, b = q.view(torch.float8_e4m3fn).float(), ref.float()
    # e4m3 has 8 codes per binade: a step is 2^(e-3), e the exponent of the larger magnitude
    step = torch.exp2(torch.floor(torch.log2(torch.maximum(a.abs(), b.abs()).clamp_min(2 ** -6))) - 3)
    d = ((a - b).abs() / step).round()
    return float((d == 0).float().mean()), int(d.max())


def main():
    p = bench_arguments(__doc__.split("\n")[0], "f32,bf16")
    p.add_argument("--codes", default="i8,e4m3")
    o = p.parse_args()
    lib, tuned, untuned = start(o, "quant")
    rows_out = []
    for shape, R, H, dt, tdt, x in cases(o):
        w = (1.0 + 0.1 * torch.randn(H)).to(tdt)
        xb = x.element_size()
        for code in o.codes.split(","):
            q = torch.empty(R, H, dtype=torch.uint8)
            qu = torch.empty(R, H, dtype=torch.uint8)
            s, su = torch.empty(R), torch.empty(R)
            moved = R * H * (xb + 1)
            calls = {
                "lntune tuned": lntune_call(lib, tuned, x, w, q, s, code),
                "lntune untuned": lntune_call(lib, untuned, x, w, qu, su, code),
                "PyTorch (norm, then quantize)": torch_call(x, w, code),
                "copy": copy_call(moved),
            }
            t = time_all(calls, o.reps, o.rep_ms / 1000.0)
            ref, _ = torch_call(x, w, code)()
            same, far = agreement(q.view(torch.int8) if code == "i8" else q, ref, code)
            same_u, far_u = agreement(qu.view(torch.int8) if code == "i8" else qu, ref, code)
            rows_out.append((shape, dt, code, t, moved, same, far, same_u, far_u))
            print("%s %s -> %s: %s" % (shape, dt, code, ", ".join(
                "%s %.1f us" % (k, v * 1e6) for k, v in t.items())), file=sys.stderr)
    lines = ["# Fused RMSNorm + dynamic per-row quantization, CPU: lntune vs PyTorch unfused",
             "",
             "%s, %d threads (LNTUNE_NUM_THREADS and torch.set_num_threads), torch %s. "
             "Median time per call of %d interleaved repetitions of %.0f ms; GB/s counts x read "
             "and the codes written; /copy: torch's copy_ of as many bytes in the same run; "
             "vs PyTorch: its time over lntune's. Codes: the share equal to PyTorch's and the "
             "largest distance in codes (tuned; untuned)." % (
                 cpu_name(), o.threads, torch.__version__, o.reps, o.rep_ms),
             "",
             "| shape | x | code | lntune tuned | lntune untuned | PyTorch unfused | copy | "
             "tuned /copy | tuned vs PyTorch | untuned vs PyTorch | codes equal (max dist) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for shape, dt, code, t, moved, same, far, same_u, far_u in rows_out:
        tt, tu = t["lntune tuned"], t["lntune untuned"]
        tp, tc = t["PyTorch (norm, then quantize)"], t["copy"]
        gb = lambda s: moved / s / 1e9  # noqa: E731
        lines.append("| %s | %s | %s row | %.1f us (%.1f GB/s) | %.1f us | %.1f us | %.1f us (%.1f GB/s) "
                     "| %.2fx | %.2fx | %.2fx | %.4f (%d); %.4f (%d) |" % (
                         shape, dt, code, tt * 1e6, gb(tt), tu * 1e6, tp * 1e6, tc * 1e6, gb(tc),
                         tc / tt, tp / tt, tp / tu, same, far, same_u, far_u))
    finish(lines, o.out)



if __name__ == "__main__":
    main()
