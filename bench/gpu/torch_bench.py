"""torch_bench.py - PyTorch's LayerNorm and an RMSNorm formula on the same shapes as cuda_bench,
timed with CUDA events (warm-up, median), as a markdown section for bench/gpu/run.sh.
rows = 16384 rotates inputs past the L2 cache like cuda_bench; rows 1 and 8 are hot."""
import statistics
import sys

import torch
import torch.nn.functional as F

REPS, WARMUP, ROTATE_BYTES = 25, 3, 400e6
HS, ROWS = (768, 1024, 4096, 8192, 16384), (16384, 8, 1)


def rmsnorm(x, w, eps):
    # The formula most models use (LLaMA): fp32 throughout here.
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def median_ms(fn, xs):
    times = []
    for r in range(-WARMUP, REPS):
        x = xs[(r + WARMUP) % len(xs)]
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(x)
        e.record()
        e.synchronize()
        if r >= 0:
            times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        sys.exit("torch_bench: torch.cuda is not available")
    dev = torch.device("cuda")
    print(f"## PyTorch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name()}\n")
    print("fp32, eps 1e-5, with weight (and bias for LayerNorm); GB/s counts x read and y written once.\n")
    for name in ("layer_norm", "rmsnorm (formula)", "rms_norm (F.rms_norm)"):
        if name.startswith("rms_norm") and not hasattr(F, "rms_norm"):
            continue
        print(f"### {name}\n\n| rows | H | us | GB/s |\n|---:|---:|---:|---:|")
        for H in HS:
            w = torch.randn(H, device=dev)
            b = torch.randn(H, device=dev)
            for rows in ROWS:
                nbytes = rows * H * 4
                nbuf = max(1, int(ROTATE_BYTES // (2 * nbytes)) + 1) if rows >= 1024 else 1
                xs = [torch.randn(rows, H, device=dev) + 1000 for _ in range(nbuf)]
                if name == "layer_norm":
                    fn = lambda x: F.layer_norm(x, (H,), w, b, 1e-5)
                elif name.startswith("rmsnorm"):
                    fn = lambda x: rmsnorm(x, w, 1e-5)
                else:
                    fn = lambda x: F.rms_norm(x, (H,), w, 1e-5)
                ms = median_ms(fn, xs)
                print(f"| {rows} | {H} | {ms * 1e3:.1f} | {2 * nbytes / 1e9 / (ms / 1e3):.0f} |")
                del xs
        print()


if __name__ == "__main__":
    main()
