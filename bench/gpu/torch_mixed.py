"""torch_mixed.py - PyTorch's side of bench/gpu/mixed.sh at rows x H (default 16384 x 4096):
LayerNorm and RMSNorm in fp32, bf16 and fp16 (x, y, weight and bias of one type), the residual
add alone (s = x + r), and Add & Norm as a model writes it (s = x + r; y = norm(s); both kept)
in fp32 and bf16. Timed as lntune's CUDA tuner times: CUDA events, warm-up, median of 25;
inputs rotated past the L2. Prints JSON: each result's us and the bytes it must move."""
import json
import statistics
import sys

import torch
import torch.nn.functional as F

REPS, WARMUP = 25, 3


def median_us(fn, sets):
    times = []
    for r in range(-WARMUP, REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        args = sets[r % len(sets)]
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        if r >= 0:
            times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    H = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    dev = torch.device("cuda")
    l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 60 << 20)
    out = []
    types = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    for tname, dt in types.items():
        e = torch.tensor([], dtype=dt).element_size()
        w = torch.randn(H, device=dev, dtype=dt)
        b = torch.randn(H, device=dev, dtype=dt)
        # x and residual, rotated so that the inputs of one call are not in the L2 from the last.
        nbuf = max(1, min(16, -(-4 * l2 // (2 * rows * H * e))))
        sets = [(torch.randn(rows, H, device=dev, dtype=dt) + 3,
                 torch.randn(rows, H, device=dev, dtype=dt)) for _ in range(nbuf)]
        n = rows * H * e
        cases = [
            ("layernorm", "none", lambda x, r: F.layer_norm(x, (H,), w, b, 1e-5), 2 * n),
            ("rmsnorm", "none", lambda x, r: F.rms_norm(x, (H,), w, 1e-5), 2 * n),
            ("add", "none", lambda x, r: x + r, 3 * n),
        ]
        if tname != "f16":
            cases += [
                ("layernorm", "residual_out",
                 lambda x, r: (lambda s: (F.layer_norm(s, (H,), w, b, 1e-5), s))(x + r), 4 * n),
                ("rmsnorm", "residual_out",
                 lambda x, r: (lambda s: (F.rms_norm(s, (H,), w, 1e-5), s))(x + r), 4 * n),
            ]
        for op, fusion, fn, nbytes in cases:
            us = median_us(fn, sets)
            out.append({"op": op, "dtype": tname, "fusion": fusion, "rows": rows, "H": H,
                        "us": us, "gbps": nbytes / 1e3 / us})
        del sets
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name()}
    json.dump({"meta": meta, "results": out}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
