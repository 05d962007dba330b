#!/usr/bin/env python3
"""gemma.py - lntune's RMSNorm with Gemma's weight offset, y = norm(x) * (1 + w), on the CPU
against what a user runs today and against the copy of the same bytes, in one process and one
run.

  bench/gemma.py --lib build-bench/liblntune.so --db DB [--threads N] [--shapes 2048x4096,...]
                 [--dtypes bf16,f32] [--reps 7] [--rep-ms 200] [--out FILE.md]

For each shape and dtype (x, y and w of one type):
  lntune tuned      lntune_rmsnorm with weight_offset 1 on a handle opened on --db (tuned
                    with lntune --op rmsnorm --weight-offset --dtype ...; LNTUNE_LOG=debug says
                    which kernel serves it)
  lntune no offset  the same call without the offset (w as the weights): the tuned plain RMSNorm
                    where --db has one, what the offset costs
  lntune untuned    weight_offset 1 on a handle without a database (the built-in on 1 + w formed
                    for the call)
  HF Gemma          transformers' GemmaRMSNorm.forward: x.float() * rsqrt(mean(x^2) + eps),
                    times (1.0 + w.float()), .type_as(x)
  PyTorch fused     F.rms_norm(x.float(), (H,), 1 + w.float()).type_as(x): the same arithmetic
                    in one fused norm, 1 + w precomputed once (not timed)
  copy              torch's copy_ (on the same threads) of as many bytes as the kernel moves (x
                    read, y written), half read and half written, as the tuner's copy moves them
Repetitions of at least --rep-ms each, the implementations in a fresh random order every
repetition; the figure is the median time per call. Each y is compared with the float64
reference of y = x * rstd * (1 + w): the largest error in units of y's last place.
The bench's peers come from bench/install-deps (its Python runs this script).
"""
import sys

import torch
import torch.nn.functional as F

from lntune_ctypes import (EPS, LNTUNE_BF16, LNTUNE_F32, Args, bench_arguments, cases, copy_call,
                           cpu_name, finish, rmsnorm_call, start, time_all)


def lntune_call(lib, ctx, x, w, y, offset):
    a = Args()
    a.rows, a.H = x.shape
    a.eps = EPS
    a.dtype = LNTUNE_BF16 if x.dtype == torch.bfloat16 else LNTUNE_F32
    a.x, a.y, a.gamma = x.data_ptr(), y.data_ptr(), w.data_ptr()
    a.weight_offset = offset
    return rmsnorm_call(lib, ctx, a)


def hf_gemma(x, w):
    def run():
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
        return (h * (1.0 + w.float())).type_as(x)
    return run


def torch_fused(x, w):
    H, w1 = x.shape[1], 1.0 + w.float()
    return lambda: F.rms_norm(x.float(), (H,), w1, EPS).type_as(x)


def ulp_error(y, x, w):
    """The largest |y - reference| in units of the last place of y's type at the reference."""
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * (1.0 + w.double())
    bits = 8 if y.dtype == torch.bfloat16 else 24
    ulp = torch.exp2(torch.floor(torch.log2(ref.abs().clamp_min(2 ** -126))) - (bits - 1))
    return float(((y.double() - ref).abs() / ulp).max())


def main():
    p = bench_arguments(__doc__.split("\n")[0], "bf16,f32")
    o = p.parse_args()
    lib, tuned, untuned = start(o, "gemma")
    rows_out = []
    for shape, R, H, dt, tdt, x in cases(o):
        w = (0.1 * torch.randn(H)).to(tdt)  # zero-centred, as Gemma stores them
        y, yp, yu = (torch.empty(R, H, dtype=tdt) for _ in range(3))
        moved = 2 * R * H * x.element_size()
        calls = {
            "lntune tuned": lntune_call(lib, tuned, x, w, y, 1.0),
            "lntune no offset": lntune_call(lib, tuned, x, w, yp, 0.0),
            "lntune untuned": lntune_call(lib, untuned, x, w, yu, 1.0),
            "HF Gemma": hf_gemma(x, w),
            "PyTorch fused": torch_fused(x, w),
            "copy": copy_call(moved),
        }
        t = time_all(calls, o.reps, o.rep_ms / 1000.0)
        errs = [ulp_error(v, x, w) for v in (y, yu, hf_gemma(x, w)())]
        rows_out.append((shape, dt, t, moved, errs))
        print("%s %s: %s" % (shape, dt, ", ".join(
            "%s %.1f us" % (k, v * 1e6) for k, v in t.items())), file=sys.stderr)
    lines = ["# RMSNorm with Gemma's weight offset, CPU: lntune vs PyTorch",
             "",
             "%s, %d threads (LNTUNE_NUM_THREADS and torch.set_num_threads), torch %s. "
             "Median time per call of %d interleaved repetitions of %.0f ms; GB/s counts x read "
             "and y written; /copy: torch's copy_ of as many bytes in the same run; vs: the "
             "peer's time over lntune tuned's. Error: the largest distance from the float64 "
             "reference in units of y's last place (lntune tuned; untuned; HF)." % (
                 cpu_name(), o.threads, torch.__version__, o.reps, o.rep_ms),
             "",
             "| shape | type | lntune tuned | /copy | no offset | untuned | HF Gemma | "
             "PyTorch fused | copy | vs HF | vs PyTorch fused | error (ulp) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for shape, dt, t, moved, errs in rows_out:
        tt, tc = t["lntune tuned"], t["copy"]
        lines.append("| %s | %s | %.1f us (%.1f GB/s) | %.2fx | %.1f us | %.1f us | %.1f us | "
                     "%.1f us | %.1f us | %.1fx | %.1fx | %.2f; %.2f; %.2f |" % (
                         shape, dt, tt * 1e6, moved / tt / 1e9, tc / tt,
                         t["lntune no offset"] * 1e6, t["lntune untuned"] * 1e6,
                         t["HF Gemma"] * 1e6, t["PyTorch fused"] * 1e6, tc * 1e6,
                         t["HF Gemma"] / tt, t["PyTorch fused"] / tt, *errs))
    finish(lines, o.out)


if __name__ == "__main__":
    main()
