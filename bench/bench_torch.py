#!/usr/bin/env python3
"""bench_torch.py - PyTorch CPU's LayerNorm and RMSNorm forward, timed the way bench_cpu times
its own implementations (interleaved repetitions of at least --rep-ms, median per call; other
processes' CPU use measured from /proc), printing one JSON record a line for the C side to merge.

Each op is timed twice: allocating its output per call, as models call it, and writing into a
preallocated output. torch.nn.functional.layer_norm has no out= form, so the second LayerNorm
figure is torch.ops.aten.native_layer_norm.out (which also writes mean and rstd). RMSNorm is
torch.nn.functional.rms_norm (PyTorch 2.4 and later; an older torch times the formula below in
its place), and, as it has no out= form either, the formula x * rsqrt(mean(x^2) + eps) * w with
out= at every step; for fp16 and bf16 (--dtype) the formula is as models write it for those
types, and as F.rms_norm computes: in fp32, rounded to the type before the weight's multiply
(x.float(), then .to(dtype) * w). Every note starts with the torch version.

The bench's own PyTorch is bench/install-deps's (a virtual environment, bench_cpu's default
Python); any Python with torch runs this script.
"""
import argparse
import json
import os
import sys
import time

EPS = 1e-5
CHECK_ELEMENTS = 1 << 24  # as bench.c: rows checked against the float64 reference
TOLERANCE = 1.0 / (1 << 16)  # bench.h: LNTUNE_BENCH_TOLERANCE
VERIFY_TOLERANCE = 1.0 / (1 << 20)  # gen/verify/verify.h: LNTUNE_VERIFY_TOLERANCE
# 16-bit types: significand bits after the leading one, and the subnormal step (gen/verify/verify.h).
ULP_BITS = {"f16": (10, 2.0 ** -24), "bf16": (7, 2.0 ** -133)}


def record(impl, op, rows, H, threads, **kw):
    r = {"impl": impl, "op": op, "dtype": "f32", "rows": rows, "H": H, "threads": threads,
         "us": -1.0, "gbps": -1.0, "max_error": -1.0, "busy": 0.0, "reps": 0, "flagged": 0, "note": ""}
    r.update(kw)
    print(json.dumps(r), flush=True)


def cpu_sample():
    """(machine busy CPU s, this process's CPU s, wall s), as bench/busy.c reads them."""
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        v = [int(t) for t in f.readline().split()[1:9]]
    machine = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz
    with open("/proc/self/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return machine, (int(rest[11]) + int(rest[12])) / hz, time.monotonic()


def other_cores(a, b):
    wall = b[2] - a[2]
    other = (b[0] - a[0]) - (b[1] - a[1])
    return max(other, 0.0) / wall if wall > 0 else 0.0


def max_error(torch, op, x, y, w, b, dtype):
    """The verifier's error (gen/verify/verify.h) in float64 over evenly spaced rows: in its unit for
    fp32; for a 16-bit y, |y - ref| over the bound of rounding to that type, times 2^-20."""
    rows, H = x.shape
    step = max(1, -(-rows // max(1, CHECK_ELEMENTS // H)))
    idx = torch.cat([torch.arange(0, rows, step), torch.tensor([rows - 1])])
    xd, yd, wd = x[idx].double(), y[idx].double(), w.double()
    if op == "layernorm":
        mean = xd.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((xd - mean) ** 2).mean(-1, keepdim=True) + EPS)
        z = (xd - mean) * rstd
        bd = b.double()
    else:
        mean = torch.zeros_like(xd[:, :1])
        rstd = torch.rsqrt((xd ** 2).mean(-1, keepdim=True) + EPS)
        z = xd * rstd
        bd = torch.zeros_like(wd)
    unit = (mean.abs() * rstd + z.abs() + 1.0) * wd.abs() + bd.abs()
    ref = z * wd + bd
    if dtype == "f32":
        e = ((yd - ref).abs() / unit).max().item()
    else:
        bits, tiny = ULP_BITS[dtype]
        e32 = VERIFY_TOLERANCE * unit
        _, exp = torch.frexp(ref.abs() + e32)  # a = m * 2^exp, m in [0.5, 1)
        ulp = torch.clamp(torch.pow(2.0, (exp - 1 - bits).double()), min=tiny)
        bound = e32 + 0.5 * ulp * (1.0 + 1.0 / 128)
        e = ((yd - ref).abs() / bound).max().item() * VERIFY_TOLERANCE
    return e if e == e else float("inf")  # NaN output is an error


def bench_shape(torch, rows, H, args):
    F = torch.nn.functional
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    g = torch.Generator().manual_seed(rows * 131 + H)
    x = (torch.randn(rows, H, generator=g) + 1.0).to(dt)
    w = (1.0 + 0.1 * torch.randn(H, generator=g)).to(dt)
    b = (0.1 * torch.randn(H, generator=g)).to(dt)
    y = torch.empty_like(x)
    xf = torch.empty(rows, H)  # fp32 work space of the 16-bit RMSNorm
    tmp = torch.empty(rows, H)
    # mean and rstd as native_layer_norm returns them: fp32 in torch 1.13, x's type in 2.x.
    _, mean, rstd = torch.ops.aten.native_layer_norm(x[:1], [H], w, b, EPS)
    mean, rstd = mean.new_empty(rows, 1), rstd.new_empty(rows, 1)
    ms = torch.empty(rows, 1)

    def ln_out():
        torch.ops.aten.native_layer_norm.out(x, [H], w, b, EPS, out0=y, out1=mean, out2=rstd)
        return y

    def rms_out():
        if dt == torch.float32:
            torch.pow(x, 2, out=tmp)
            torch.mean(tmp, -1, keepdim=True, out=ms)
            ms.add_(EPS).rsqrt_()
            torch.mul(x, ms, out=y)
            return y.mul_(w)
        xf.copy_(x)
        torch.pow(xf, 2, out=tmp)
        torch.mean(tmp, -1, keepdim=True, out=ms)
        ms.add_(EPS).rsqrt_()
        xf.mul_(ms)
        y.copy_(xf)
        return y.mul_(w)

    def rms():
        if dt == torch.float32:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)).to(dt) * w

    in_fp32 = "" if dt == torch.float32 else " (in fp32, rounded before *w)"
    if hasattr(F, "rms_norm"):
        rms_cand = (lambda: F.rms_norm(x, (H,), w, EPS),
                    "F.rms_norm, allocates its output (it has no out=)")
        rms_out_note = "x*rsqrt(mean(x^2)+eps)*w with out= at every step" + in_fp32
    else:
        rms_cand = (rms, "no F.rms_norm: x*rsqrt(mean(x^2)+eps)*w, allocates" + in_fp32)
        rms_out_note = "the same formula with out= at every step"
    version = f"torch {torch.__version__}: "
    cands = [
        ("torch", "layernorm", lambda: F.layer_norm(x, (H,), w, b, EPS),
         "F.layer_norm, allocates its output (it has no out=)"),
        ("torch_out", "layernorm", ln_out, "aten.native_layer_norm.out, preallocated y, mean, rstd"),
        ("torch", "rmsnorm", rms_cand[0], rms_cand[1]),
        ("torch_out", "rmsnorm", rms_out, rms_out_note),
    ]
    cands = [(impl, op, fn, (version + note)[:118]) for impl, op, fn, note in cands]
    rep_s = max(args.rep_ms, 50.0) / 1e3
    reps = max(args.reps, 7)
    state = []
    for impl, op, fn, note in cands:
        try:
            out = fn()
        except Exception as e:  # an op this torch lacks is n/a, not a failure of the bench
            record(impl, op, rows, H, args.threads, dtype=args.dtype,
                   note=f"{type(e).__name__}: {e}"[:110])
            continue
        err = max_error(torch, op, x, out, w, b, args.dtype)
        del out
        t0, calls = time.perf_counter(), 0
        while time.perf_counter() - t0 < rep_s / 10:
            fn()
            calls += 1
        batch = max(1, int(rep_s / 8 / ((time.perf_counter() - t0) / calls)) + 1)
        state.append({"impl": impl, "op": op, "fn": fn, "note": note, "err": err, "batch": batch,
                      "samples": [], "other": 0.0, "wall": 0.0})
    for rep in range(reps):
        for k in range(len(state)):
            c = state[(k + rep) % len(state)]
            fn, batch = c["fn"], c["batch"]
            a = cpu_sample()
            t0 = time.perf_counter()
            calls = 0
            while True:
                for _ in range(batch):
                    fn()
                calls += batch
                t = time.perf_counter()
                if t - t0 >= rep_s:
                    break
            bs = cpu_sample()
            c["samples"].append((t - t0) / calls)
            c["other"] += other_cores(a, bs) * (bs[2] - a[2])
            c["wall"] += bs[2] - a[2]
    for c in state:
        s = sorted(c["samples"])
        m = len(s)
        med = s[m // 2] if m % 2 else 0.5 * (s[m // 2 - 1] + s[m // 2])
        record(c["impl"], c["op"], rows, H, args.threads, dtype=args.dtype, us=med * 1e6,
               gbps=2.0 * rows * H * x.element_size() / med / 1e9, max_error=c["err"],
               busy=c["other"] / c["wall"] if c["wall"] > 0 else 0.0, reps=m,
               flagged=int(not c["err"] <= TOLERANCE), note=c["note"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--rep-ms", type=float, default=50.0)
    p.add_argument("--shapes", required=True, help="ROWSxH[,ROWSxH...]")
    p.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32",
                   help="of x, y, gamma and beta")
    args = p.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    try:
        import torch
    except ImportError as e:
        for rows, H in shapes:
            for impl in ("torch", "torch_out"):
                for op in ("layernorm", "rmsnorm"):
                    record(impl, op, rows, H, args.threads, dtype=args.dtype,
                           note=f"PyTorch not installed (bench/install-deps): {e}"[:110])
        return 0
    torch.set_num_threads(args.threads)
    for rows, H in shapes:
        print(f"bench_torch: {rows}x{H} at {args.threads} thread(s)", file=sys.stderr, flush=True)
        with torch.no_grad():
            bench_shape(torch, rows, H, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
