"""lntune_ctypes.py - what bench/'s Python scripts share: liblntune through ctypes (lntune_args
field for field, struct_size set as LNTUNE_ARGS_INIT sets it), the interleaved timing loop, and the CPU's name."""
import argparse
import ctypes
import os
import random
import statistics
import sys
import time

EPS = 1e-5
LNTUNE_F32, LNTUNE_BF16, LNTUNE_I8, LNTUNE_FP8_E4M3 = 1, 3, 4, 5
LNTUNE_DEVICE_CUDA = 1


class Args(ctypes.Structure):
    """include/lntune.h's lntune_args, field for field."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("rows", ctypes.c_int64), ("H", ctypes.c_int64), ("eps", ctypes.c_float),
                ("dtype", ctypes.c_int), ("x", ctypes.c_void_p), ("y", ctypes.c_void_p),
                ("gamma", ctypes.c_void_p), ("beta", ctypes.c_void_p),
                ("x_stride", ctypes.c_int64), ("y_stride", ctypes.c_int64),
                ("residual", ctypes.c_void_p), ("residual_out", ctypes.c_void_p),
                ("residual_stride", ctypes.c_int64), ("residual_out_stride", ctypes.c_int64),
                ("mean", ctypes.c_void_p), ("rstd", ctypes.c_void_p),
                ("device", ctypes.c_int), ("device_index", ctypes.c_int),
                ("stream", ctypes.c_void_p), ("y_dtype", ctypes.c_int),
                ("param_dtype", ctypes.c_int), ("residual_dtype", ctypes.c_int),
                ("y_scale", ctypes.c_float), ("y_scales", ctypes.c_void_p),
                ("weight_offset", ctypes.c_float), ("flags", ctypes.c_uint)]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.struct_size = ctypes.sizeof(self)  # LNTUNE_ARGS_INIT


def load(path):
    """liblntune at path, with the argument types of the functions bench/ calls."""
    lib = ctypes.CDLL(path)
    lib.lntune_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.lntune_rmsnorm.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.lntune_errmsg.argtypes = [ctypes.c_void_p]
    lib.lntune_errmsg.restype = ctypes.c_char_p
    return lib


def open_handle(lib, db):
    """A handle on db (a path that does not exist: no database, the built-ins only)."""
    h = ctypes.c_void_p()
    if lib.lntune_open(db.encode(), ctypes.byref(h)):
        raise RuntimeError("lntune_open(%s) failed" % db)
    return h


def rmsnorm_call(lib, ctx, a):
    """A callable running lntune_rmsnorm on a (kept alive by the closure)."""
    fn, ref = lib.lntune_rmsnorm, ctypes.byref(a)

    def run():
        rc = fn(ctx, ref)
        if rc != 0:
            raise RuntimeError("lntune_rmsnorm: %s" % lib.lntune_errmsg(ctx).decode())
    return run


def time_all(calls, reps, rep_s):
    """Median seconds per call of each callable, interleaved in a fresh random order per rep."""
    samples = {k: [] for k in calls}
    for _ in range(reps):
        order = list(calls)
        random.shuffle(order)
        for k in order:
            f = calls[k]
            for _ in range(3):  # the caches and the pool settle
                f()
            n, t0 = 0, time.perf_counter()
            while True:
                f()
                n += 1
                t = time.perf_counter() - t0
                if t >= rep_s:
                    break
            samples[k].append(t / n)
    return {k: statistics.median(v) for k, v in samples.items()}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU"


def bench_arguments(description, dtypes):
    """The options every bench script takes; the caller adds its own and parses."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--lib", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--shapes", default="2048x4096,4096x1024,256x16384")
    p.add_argument("--dtypes", default=dtypes)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--rep-ms", type=float, default=200.0)
    p.add_argument("--out")
    return p


def start(o, name):
    """o's threads for lntune (LNTUNE_NUM_THREADS, read by lntune_open) and torch, the library,
    and handles on o.db (tuned) and on no database (untuned): (lib, tuned, untuned)."""
    import torch
    os.environ["LNTUNE_NUM_THREADS"] = str(o.threads)
    torch.set_num_threads(o.threads)
    lib = load(o.lib)
    try:
        tuned = open_handle(lib, o.db)
        untuned = open_handle(lib, "/nonexistent/lntune-bench-%s.db" % name)
    except RuntimeError as e:
        sys.exit("%s.py: %s" % (name, e))
    torch.manual_seed(0)
    return lib, tuned, untuned


def cases(o):
    """(shape text, rows, H, dtype text, torch dtype, x) for each of o's shapes and dtypes: x
    rows x H of N(0, 1) in that dtype."""
    import torch
    for shape in o.shapes.split(","):
        R, H = (int(v) for v in shape.split("x"))
        for dt in o.dtypes.split(","):
            tdt = torch.bfloat16 if dt == "bf16" else torch.float32
            yield shape, R, H, dt, tdt, torch.randn(R, H).to(tdt)


def copy_call(moved):
    """torch's copy_ of moved bytes, half read and half written, as the tuner's copy moves them."""
    import torch
    src = torch.rand(moved // 8)  # floats: moved / 2 bytes
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def finish(lines, out):
    """The report's lines, printed and written to out (when given)."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
