#!/usr/bin/env python3
"""Elementwise benchmark: libtorchlean_rt (through the ctypes loader) against PyTorch.

GPU mode (default; needs the CUDA build of the library, a CUDA device and PyTorch with CUDA):
  1. the device-to-device copy bandwidth through PyTorch (a large tensor .copy_(), bytes counted
     as read + write): the roof every elementwise op is measured against;
  2. every op of tlrt_elementwise.h and tlrt_rng.h (taken from the loader, i.e. from the header)
     plus buffer copy/full on 2^26 float32 elements: ours is timed by the host wall clock around
     --iters back-to-back calls, each followed by freeing its output (stream-ordered), then one
     tlrt_synchronize (the library runs on its own non-blocking stream, so PyTorch's events
     cannot bracket it); PyTorch's equivalent is timed with torch.cuda.Event after
     torch.cuda.synchronize(), same iteration count and warm-up;
  3. the host cost of one small op (1024 floats): median microseconds per call of tlrt_add plus
     tlrt_buffer_free through raw ctypes and through the Buffer wrapper, against torch.add on
     1024-element CUDA tensors (per-call host time, synchronising only at the end).
CPU mode (--cpu): the same on the CPU backend against torch CPU if torch is importable, else
numpy, on 2^22 elements by default (a smoke check for machines without a GPU).

Prints a markdown table (and writes it to --out). Exit status 0; 77 when the requested mode
cannot run here (no CUDA device / no torch with CUDA; the message says which).
Usage: TORCHLEAN_RT_LIB=build-cuda/libtorchlean_rt.so python3 bench/elementwise.py [--out FILE]
"""
import argparse
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Scalar arguments of the ops, by parameter name in the header.
SCALARS = {"c": 0.5, "lo": -1.0, "hi": 1.0, "eps": 1e-6, "mean": 0.0, "std": 1.0,
           "keep_prob": 0.5, "key": 1234}
# Ops whose x must be positive to stay on the ordinary (finite) path.
POSITIVE_X = {"sqrt", "log", "inv", "sqrt_bwd", "log_bwd", "inv_bwd"}
GELU_K = math.sqrt(2.0 / math.pi)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", action="store_true", help="CPU backend vs torch CPU / numpy")
    p.add_argument("--log2n", type=int, default=None, help="elements = 2^log2n (GPU 26, CPU 20)")
    p.add_argument("--iters", type=int, default=None, help="timed calls per op (GPU 50, CPU 10)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (GPU 5, CPU 2)")
    p.add_argument("--small-iters", type=int, default=20000, help="calls for the host-cost part")
    p.add_argument("--ops", default="", help="comma-separated subset of ops (default: all)")
    p.add_argument("--lib", default=None, help="library path (default: TORCHLEAN_RT_LIB)")
    p.add_argument("--no-check", action="store_true", help="skip the ours-vs-reference agreement")
    p.add_argument("--out", default=None, help="also write the markdown report here")
    return p.parse_args()


# ---------------------------------------------------------------------------------------------
# Reference implementations (PyTorch on CUDA or CPU, or numpy), keyed by op name.
# Each entry: (description shown in the table, builder(data) -> zero-argument callable).
# ---------------------------------------------------------------------------------------------

def torch_refs(torch, dev):
    F = torch.nn.functional
    aten = torch.ops.aten
    S = SCALARS

    def r(desc, build):
        return (desc, build)

    return {
        "add": r("torch.add(a, b)", lambda d: lambda: torch.add(d["a"], d["b"])),
        "sub": r("torch.sub(a, b)", lambda d: lambda: torch.sub(d["a"], d["b"])),
        "mul": r("a * b", lambda d: lambda: d["a"] * d["b"]),
        "div": r("a / b", lambda d: lambda: d["a"] / d["b"]),
        "max": r("torch.maximum(a, b)", lambda d: lambda: torch.maximum(d["a"], d["b"])),
        "min": r("torch.minimum(a, b)", lambda d: lambda: torch.minimum(d["a"], d["b"])),
        "max_bwd": r("where(a>b, g, 0), where(b>a, g, 0) (no tie split; 2 kernels)",
                     lambda d: lambda: (torch.where(d["a"] > d["b"], d["g"], 0.0),
                                        torch.where(d["b"] > d["a"], d["g"], 0.0))),
        "min_bwd": r("where(a<b, g, 0), where(b<a, g, 0) (no tie split; 2 kernels)",
                     lambda d: lambda: (torch.where(d["a"] < d["b"], d["g"], 0.0),
                                        torch.where(d["b"] < d["a"], d["g"], 0.0))),
        "abs": r("torch.abs(x)", lambda d: lambda: torch.abs(d["x"])),
        "neg": r("torch.neg(x)", lambda d: lambda: torch.neg(d["x"])),
        "sqrt": r("torch.sqrt(x)", lambda d: lambda: torch.sqrt(d["xpos"])),
        "inv": r("torch.reciprocal(x)", lambda d: lambda: torch.reciprocal(d["xpos"])),
        "relu": r("torch.relu(x)", lambda d: lambda: torch.relu(d["x"])),
        "scale": r("x * c", lambda d: lambda: d["x"] * S["c"]),
        "axpy": r("torch.add(a, b, alpha=c)", lambda d: lambda: torch.add(d["a"], d["b"], alpha=S["c"])),
        "clamp": r("torch.clamp(x, lo, hi)", lambda d: lambda: torch.clamp(d["x"], S["lo"], S["hi"])),
        "abs_bwd": r("g * torch.sign(x) (2 kernels)", lambda d: lambda: d["g"] * torch.sign(d["x"])),
        "sqrt_bwd": r("g / (2 * sqrt(x)) (3 kernels)",
                      lambda d: lambda: d["g"] / (2.0 * torch.sqrt(d["xpos"]))),
        "inv_bwd": r("-(g / x) / x (3 kernels)", lambda d: lambda: -(d["g"] / d["xpos"]) / d["xpos"]),
        "log_bwd": r("g / x", lambda d: lambda: d["g"] / d["xpos"]),
        "relu_bwd": r("aten.threshold_backward(g, x, 0)",
                      lambda d: lambda: aten.threshold_backward(d["g"], d["x"], 0.0)),
        "clamp_bwd": r("where((x>lo) & (x<hi), g, 0) (4 kernels)",
                       lambda d: lambda: torch.where((d["x"] > S["lo"]) & (d["x"] < S["hi"]), d["g"], 0.0)),
        "exp": r("torch.exp(x)", lambda d: lambda: torch.exp(d["x"])),
        "log": r("torch.log(x)", lambda d: lambda: torch.log(d["xpos"])),
        "sigmoid": r("torch.sigmoid(x)", lambda d: lambda: torch.sigmoid(d["x"])),
        "tanh": r("torch.tanh(x)", lambda d: lambda: torch.tanh(d["x"])),
        "softplus": r("F.softplus(x)", lambda d: lambda: F.softplus(d["x"])),
        "gelu": r("F.gelu(x, approximate='tanh')", lambda d: lambda: F.gelu(d["x"], approximate="tanh")),
        "silu": r("F.silu(x)", lambda d: lambda: F.silu(d["x"])),
        "safe_log": r("log(F.softplus(x) + eps) (3 kernels)",
                      lambda d: lambda: torch.log(F.softplus(d["x"]) + S["eps"])),
        "exp_bwd": r("g * exp(x) (2 kernels)", lambda d: lambda: d["g"] * torch.exp(d["x"])),
        "sigmoid_bwd": r("aten.sigmoid_backward(g, y), y = sigmoid(x) precomputed",
                         lambda d: lambda: aten.sigmoid_backward(d["g"], d["sig_x"])),
        "tanh_bwd": r("aten.tanh_backward(g, y), y = tanh(x) precomputed",
                      lambda d: lambda: aten.tanh_backward(d["g"], d["tanh_x"])),
        "softplus_bwd": r("aten.softplus_backward(g, x, 1, 20)",
                          lambda d: lambda: aten.softplus_backward(d["g"], d["x"], 1.0, 20.0)),
        "gelu_bwd": r("aten.gelu_backward(g, x, approximate='tanh')",
                      lambda d: lambda: aten.gelu_backward(d["g"], d["x"], approximate="tanh")),
        "silu_bwd": r("aten.silu_backward(g, x)",
                      lambda d: lambda: aten.silu_backward(d["g"], d["x"])),
        "safe_log_bwd": r("g * sigmoid(x) / (softplus(x) + eps) (5 kernels)",
                          lambda d: lambda: d["g"] * torch.sigmoid(d["x"]) / (F.softplus(d["x"]) + S["eps"])),
        "rand_uniform": r("torch.rand(n) (Philox, not the same numbers)",
                          lambda d: lambda: torch.rand(d["n"], device=dev)),
        "rand_normal": r("torch.randn(n) (Philox, not the same numbers)",
                         lambda d: lambda: torch.randn(d["n"], device=dev)),
        "bernoulli_mask": r("torch.empty(n).bernoulli_(p)",
                            lambda d: lambda: torch.empty(d["n"], device=dev).bernoulli_(S["keep_prob"])),
        "buffer_copy": r("x.clone()", lambda d: lambda: d["x"].clone()),
        "buffer_full": r("torch.full((n,), 1.5)",
                         lambda d: lambda: torch.full((d["n"],), 1.5, device=dev)),
    }


def numpy_refs(np):
    S = SCALARS
    f32 = np.float32
    c, lo, hi, eps = f32(S["c"]), f32(S["lo"]), f32(S["hi"]), f32(S["eps"])
    k = f32(GELU_K)
    gen = np.random.default_rng(1)

    def sig(x):
        return f32(1) / (f32(1) + np.exp(-x))

    def gelu_grad(x):
        z = k * (x + f32(0.044715) * x * x * x)
        t = np.tanh(z)
        return f32(0.5) * (f32(1) + t) + f32(0.5) * x * (f32(1) - t * t) * k * (f32(1) + f32(3 * 0.044715) * x * x)

    def r(desc, build):
        return (desc, build)

    return {
        "add": r("np.add", lambda d: lambda: np.add(d["a"], d["b"])),
        "sub": r("np.subtract", lambda d: lambda: np.subtract(d["a"], d["b"])),
        "mul": r("np.multiply", lambda d: lambda: np.multiply(d["a"], d["b"])),
        "div": r("np.divide", lambda d: lambda: np.divide(d["a"], d["b"])),
        "max": r("np.maximum", lambda d: lambda: np.maximum(d["a"], d["b"])),
        "min": r("np.minimum", lambda d: lambda: np.minimum(d["a"], d["b"])),
        "max_bwd": r("where(a>b, g, 0), where(b>a, g, 0)",
                     lambda d: lambda: (np.where(d["a"] > d["b"], d["g"], f32(0)),
                                        np.where(d["b"] > d["a"], d["g"], f32(0)))),
        "min_bwd": r("where(a<b, g, 0), where(b<a, g, 0)",
                     lambda d: lambda: (np.where(d["a"] < d["b"], d["g"], f32(0)),
                                        np.where(d["b"] < d["a"], d["g"], f32(0)))),
        "abs": r("np.abs", lambda d: lambda: np.abs(d["x"])),
        "neg": r("np.negative", lambda d: lambda: np.negative(d["x"])),
        "sqrt": r("np.sqrt", lambda d: lambda: np.sqrt(d["xpos"])),
        "inv": r("np.reciprocal", lambda d: lambda: np.reciprocal(d["xpos"])),
        "relu": r("np.maximum(x, 0)", lambda d: lambda: np.maximum(d["x"], f32(0))),
        "scale": r("x * c", lambda d: lambda: d["x"] * c),
        "axpy": r("a + c * b", lambda d: lambda: d["a"] + c * d["b"]),
        "clamp": r("np.clip", lambda d: lambda: np.clip(d["x"], lo, hi)),
        "abs_bwd": r("g * np.sign(x)", lambda d: lambda: d["g"] * np.sign(d["x"])),
        "sqrt_bwd": r("g / (2 sqrt(x))", lambda d: lambda: d["g"] / (f32(2) * np.sqrt(d["xpos"]))),
        "inv_bwd": r("-(g / x) / x", lambda d: lambda: -(d["g"] / d["xpos"]) / d["xpos"]),
        "log_bwd": r("g / x", lambda d: lambda: d["g"] / d["xpos"]),
        "relu_bwd": r("where(x > 0, g, 0)", lambda d: lambda: np.where(d["x"] > 0, d["g"], f32(0))),
        "clamp_bwd": r("where(lo < x < hi, g, 0)",
                       lambda d: lambda: np.where((d["x"] > lo) & (d["x"] < hi), d["g"], f32(0))),
        "exp": r("np.exp", lambda d: lambda: np.exp(d["x"])),
        "log": r("np.log", lambda d: lambda: np.log(d["xpos"])),
        "sigmoid": r("1 / (1 + exp(-x))", lambda d: lambda: sig(d["x"])),
        "silu": r("x / (1 + exp(-x))", lambda d: lambda: d["x"] * sig(d["x"])),
        "tanh": r("np.tanh", lambda d: lambda: np.tanh(d["x"])),
        "softplus": r("np.logaddexp(0, x)", lambda d: lambda: np.logaddexp(f32(0), d["x"])),
        "gelu": r("0.5 x (1 + tanh(z))",
                  lambda d: lambda: f32(0.5) * d["x"] * (f32(1) + np.tanh(k * (d["x"] + f32(0.044715) * d["x"] ** 3)))),
        "safe_log": r("log(logaddexp(0, x) + eps)",
                      lambda d: lambda: np.log(np.logaddexp(f32(0), d["x"]) + eps)),
        "exp_bwd": r("g * exp(x)", lambda d: lambda: d["g"] * np.exp(d["x"])),
        "sigmoid_bwd": r("g s (1 - s)", lambda d: lambda: (lambda s: d["g"] * (s * (f32(1) - s)))(sig(d["x"]))),
        "tanh_bwd": r("g (1 - t^2)", lambda d: lambda: (lambda t: d["g"] * (f32(1) - t * t))(np.tanh(d["x"]))),
        "softplus_bwd": r("g * sigmoid(x)", lambda d: lambda: d["g"] * sig(d["x"])),
        "silu_bwd": r("g s (1 + x (1 - s))",
                      lambda d: lambda: (lambda s: d["g"] * (s * (f32(1) + d["x"] * (f32(1) - s))))(sig(d["x"]))),
        "gelu_bwd": r("g * gelu'(x) (expression)", lambda d: lambda: d["g"] * gelu_grad(d["x"])),
        "safe_log_bwd": r("g sigmoid(x) / (softplus(x) + eps)",
                          lambda d: lambda: d["g"] * sig(d["x"]) / (np.logaddexp(f32(0), d["x"]) + eps)),
        "rand_uniform": r("Generator.random(n, float32) (PCG64)",
                          lambda d: lambda: gen.random(d["n"], dtype=np.float32)),
        "rand_normal": r("Generator.standard_normal(n, float32)",
                         lambda d: lambda: gen.standard_normal(d["n"], dtype=np.float32)),
        "bernoulli_mask": r("(random(n) < p).astype(float32)",
                            lambda d: lambda: (gen.random(d["n"], dtype=np.float32) < f32(S["keep_prob"])).astype(np.float32)),
        "buffer_copy": r("x.copy()", lambda d: lambda: d["x"].copy()),
        "buffer_full": r("np.full(n, 1.5, float32)", lambda d: lambda: np.full(d["n"], 1.5, dtype=np.float32)),
    }


# ---------------------------------------------------------------------------------------------
# Our side: calls generated from the header prototypes.
# ---------------------------------------------------------------------------------------------

def our_calls(rt, device, bufs, n):
    """{op: (callable returning Buffer or tuple, bytes per element (reads + writes))}."""
    calls = {}
    for name, fn in sorted(rt.OPS.items()):
        proto = rt.PROTOTYPES["tlrt_" + name]
        # Only the elementwise and RNG families: OPS also lists other headers' fresh-output
        # entry points (the optimizers' in-place steps, ...), timed by their own scripts.
        if os.path.basename(proto.header) not in ("tlrt_elementwise.h", "tlrt_rng.h"):
            continue
        args, reads, writes = [], 0, 0
        for ctype, pname in proto.params:
            if ctype == "const tlrt_buffer *":
                key = "xpos" if (pname == "x" and name in POSITIVE_X) else pname
                if key not in bufs:
                    raise SystemExit(f"bench: no input named {pname!r} for {name}")
                args.append(bufs[key])
                reads += 1
            elif ctype == "tlrt_buffer **":
                writes += 1
            elif ctype == "tlrt_device":
                args.append(device)
            elif pname == "n":
                args.append(n)
            elif pname in SCALARS:
                args.append(SCALARS[pname])
            else:
                raise SystemExit(f"bench: no value for parameter {ctype} {pname} of {name}")
        calls[name] = ((lambda fn=fn, args=tuple(args): fn(*args)), 4 * (reads + writes))
    calls["buffer_copy"] = ((lambda: bufs["x"].copy()), 8)
    calls["buffer_full"] = ((lambda: rt.Buffer.full(n, 1.5, device)), 4)
    return calls


def free_all(r):
    if isinstance(r, tuple):
        for b in r:
            b.free()
    else:
        r.free()


def time_torch_cuda(torch, fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def median_us(samples_ns):
    return statistics.median(samples_ns) / 1e3


def agreement(np, ours, ref):
    """max |ours - ref| / max |ref| over the finite reference values, on every 64th element
    (a sanity check that both sides compute the same function, not an accuracy measurement)."""
    o = ours if isinstance(ours, tuple) else (ours,)
    r = ref if isinstance(ref, tuple) else (ref,)
    worst = 0.0
    for ob, rv in zip(o, r):
        a = ob.to_numpy()[::64].astype(np.float64)
        b = np.asarray(rv)[::64].astype(np.float64)
        fin = np.isfinite(b)
        if not fin.any():
            continue
        scale = np.abs(b[fin]).max() or 1.0
        diff = np.abs(a[fin] - b[fin])
        worst = max(worst, float(np.nan_to_num(diff, nan=np.inf).max() / scale))
    return worst


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


# ---------------------------------------------------------------------------------------------

def main():
    args = parse_args()
    if args.lib:
        os.environ["TORCHLEAN_RT_LIB"] = os.path.abspath(args.lib)
    rt = common.load_rt()

    try:
        import numpy as np
    except ImportError:
        np = None
    try:
        import torch
    except ImportError:
        torch = None

    emit = common.Report()

    if args.cpu:
        device = rt.CPU
        log2n = args.log2n or 20
        args.iters = args.iters or 10
        args.warmup = 2 if args.warmup is None else args.warmup
        if torch is not None:
            ref_kind, refs = "torch CPU " + torch.__version__, torch_refs(torch, "cpu")
            torch.set_num_threads(1)  # the CPU backend is single-threaded
        elif np is not None:
            ref_kind, refs = "numpy " + np.__version__, numpy_refs(np)
        else:
            print("bench: --cpu needs torch or numpy for the reference side; neither is importable")
            return 77
    else:
        device = rt.cuda(0)
        log2n = args.log2n or 26
        args.iters = args.iters or 50
        args.warmup = 5 if args.warmup is None else args.warmup
        if not rt.cuda_available():
            print(f"bench: the library at {rt.LIB_PATH} has no usable CUDA device "
                  f"(tlrt_runtime_status() = {rt.runtime_status()}: 0 = CPU-only build, "
                  "2 = CUDA build without a device). Point TORCHLEAN_RT_LIB at the CUDA build on a "
                  "GPU machine, or run with --cpu for the CPU backend.")
            return 77
        if torch is None or not torch.cuda.is_available():
            print("bench: PyTorch with CUDA is not importable here (torch "
                  f"{'missing' if torch is None else torch.__version__ + ', no CUDA'}); "
                  "run with --cpu for the CPU comparison.")
            return 77
        ref_kind, refs = "PyTorch " + torch.__version__, torch_refs(torch, "cuda")
    if np is None:
        print("bench: numpy is needed to build the inputs")
        return 77

    n = 1 << log2n
    gen = np.random.default_rng(20261122)
    host = {
        "x": gen.uniform(-4, 4, n).astype(np.float32),
        "xpos": gen.uniform(0.05, 4, n).astype(np.float32),
        "a": gen.uniform(-4, 4, n).astype(np.float32),
        "b": gen.uniform(-4, 4, n).astype(np.float32),
        "g": gen.uniform(-2, 2, n).astype(np.float32),
    }
    bufs = {k: rt.Buffer.from_buffer(v, device) for k, v in host.items()}
    ref_is_torch = torch is not None
    if ref_is_torch:
        tdev = "cpu" if args.cpu else "cuda"
        data = {k: torch.from_numpy(v).to(tdev) for k, v in host.items()}
        data["sig_x"] = torch.sigmoid(data["x"])
        data["tanh_x"] = torch.tanh(data["x"])
    else:
        data = dict(host)
    data["n"] = n
    rt.synchronize(device)

    # Header of the report.
    emit(f"# Elementwise benchmark, {'CPU backend' if args.cpu else 'CUDA backend'}")
    emit()
    emit(f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    if not args.cpu:
        emit(f"- GPU: {torch.cuda.get_device_name(0)}")
    else:
        emit(f"- CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores")
    try:
        commit = subprocess.run(["git", "-C", common.REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        commit = ""
    emit(f"- commit: {commit or 'unknown'}")
    emit(f"- library: {rt.LIB_PATH} ({rt.build_info()})")
    emit(f"- reference: {ref_kind}; Python {platform.python_version()}")
    emit(f"- n = 2^{log2n} = {n} float32 elements per buffer; {args.iters} timed calls after "
         f"{args.warmup} warm-ups per op")

    # 1. copy bandwidth (the roof).
    wall = common.wall_timer(args.iters, args.warmup)
    host_sync = lambda: None  # CPU mode: everything is synchronous
    if args.cpu:
        if torch is not None:
            src, dst = data["x"], torch.empty_like(data["x"])
            t_copy = wall(lambda: dst.copy_(src), host_sync)
            how = "torch dst.copy_(src)"
        else:
            src, dst = host["x"], np.empty_like(host["x"])
            t_copy = wall(lambda: np.copyto(dst, src), host_sync)
            how = "np.copyto"
        copy_bw = 8 * n / t_copy / 1e9
    else:
        copy_bw = common.copy_bandwidth(torch, lambda fn, sync: time_torch_cuda(torch, fn, 20, 3))
        how = "torch dst.copy_(src), 2^28 floats, CUDA events"
    emit(f"- copy bandwidth (read + write): {copy_bw:.1f} GB/s ({how})")
    emit()

    # 2. per-op throughput.
    calls = our_calls(rt, device, bufs, n)
    wanted = [s for s in args.ops.split(",") if s] or list(calls)
    unknown = [w for w in wanted if w not in calls]
    if unknown:
        print(f"bench: unknown ops {unknown}; known: {sorted(calls)}")
        return 2
    emit("| op | bytes/elem (r+w) | ours ms | ours GB/s | of copy BW | ref ms | ref GB/s | "
         "ours/ref time | agreement | reference |")
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in wanted:
        call, bpe = calls[name]
        t_ours = wall(lambda: free_all(call()), lambda: rt.synchronize(device))
        gbs = bpe * n / t_ours / 1e9
        t_ref, desc, agree = None, "-", None
        if name in refs:
            desc, build = refs[name]
            fn = build(data)
            if args.cpu:
                t_ref = wall(fn, host_sync)
            else:
                with torch.no_grad():
                    t_ref = time_torch_cuda(torch, fn, args.iters, args.warmup)
            if not args.no_check and not name.startswith(("rand_", "bernoulli")):
                res = call()
                ref_out = fn()
                if torch is not None and not isinstance(ref_out, np.ndarray):
                    ref_out = (tuple(t.cpu().numpy() for t in ref_out) if isinstance(ref_out, tuple)
                               else ref_out.cpu().numpy())
                agree = agreement(np, res, ref_out)
                free_all(res)
                del ref_out
        ref_gbs = None if t_ref is None else bpe * n / t_ref / 1e9
        emit(f"| {name} | {bpe} | {t_ours * 1e3:.3f} | {gbs:.1f} | {gbs / copy_bw:.2f} | "
             f"{fmt(None if t_ref is None else t_ref * 1e3, '.3f')} | {fmt(ref_gbs, '.1f')} | "
             f"{fmt(None if t_ref is None else t_ours / t_ref, '.2f')} | {fmt(agree, '.1e')} | "
             f"{desc} |")
    for b in bufs.values():
        b.free()
    emit()

    # 3. host cost of one small op.
    m = 1024
    small = gen.uniform(-1, 1, m).astype(np.float32)
    sa, sb = rt.Buffer.from_buffer(small, device), rt.Buffer.from_buffer(small, device)
    ctypes = rt.ctypes
    add, free = rt.lib.tlrt_add, rt.lib.tlrt_buffer_free
    out = ctypes.c_void_p()
    ref_out = ctypes.byref(out)
    ah, bh = sa.handle, sb.handle
    pc = time.perf_counter_ns
    iters = args.small_iters

    def sample(body):
        for _ in range(min(1000, iters)):
            body()
        s = []
        t_all = pc()
        for _ in range(iters):
            t0 = pc()
            body()
            s.append(pc() - t0)
        return s, (pc() - t_all) / iters / 1e3

    def raw_add():
        st = add(ah, bh, ref_out)
        free(out)
        if st:
            raise rt.TlrtError(st, rt.status_string(st), rt.last_error(), "tlrt_add")

    def wrapped_add():
        rt.add(sa, sb).free()

    def noop():
        rt.lib.tlrt_abi_version()

    s_noop, _ = sample(noop)
    s_raw, mean_raw = sample(raw_add)
    rt.synchronize(device)
    s_wrap, mean_wrap = sample(wrapped_add)
    rt.synchronize(device)
    rows = [("empty ctypes call (tlrt_abi_version)", median_us(s_noop), None),
            ("tlrt_add + tlrt_buffer_free, raw ctypes", median_us(s_raw), mean_raw),
            ("rt.add(a, b).free(), Buffer wrapper", median_us(s_wrap), mean_wrap)]
    if torch is not None and (args.cpu or torch.cuda.is_available()):
        tdev = "cpu" if args.cpu else "cuda"
        ta = torch.from_numpy(small).to(tdev)
        tb = torch.from_numpy(small).to(tdev)

        def torch_add():
            torch.add(ta, tb)  # the result is dropped at once, as ours is freed

        s_t, mean_t = sample(torch_add)
        if not args.cpu:
            torch.cuda.synchronize()
        rows.append((f"torch.add(a, b) on {tdev} (result dropped)", median_us(s_t), mean_t))
    elif np is not None:
        na, nb = small.copy(), small.copy()
        s_n, mean_n = sample(lambda: np.add(na, nb))
        rows.append(("np.add(a, b)", median_us(s_n), mean_n))
    sa.free()
    sb.free()
    emit(f"Host cost of one small op ({m} floats, {iters} calls, synchronised at the end):")
    emit()
    emit("| call | median us/call | mean us/call |")
    emit("|---|---:|---:|")
    for label, med, mean in rows:
        emit(f"| {label} | {med:.2f} | {fmt(mean, '.2f')} |")

    if args.out:
        emit.write(args.out)
        print(f"bench: report written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
