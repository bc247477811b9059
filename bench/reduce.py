"""Reduction benchmark on the GPU against PyTorch in the same process.

Times tlrt_reduce_sum / _mean on 2^26 floats and the axis sums / maxima on (65536, 1024) and
(1024, 65536) matrices against torch.sum / mean / sum(dim) / amax(dim), reports bytes moved (the
input read once plus the output written), achieved GB/s, the fraction of the measured
device-to-device copy bandwidth and the time ratio to PyTorch, for the determinism switch off and
on (the fixed tree is the same in both modes, so the two columns should agree). Both sides are
timed the same way: wall clock around N back-to-back calls, synchronised before and after.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/reduce.py [--out FILE] [--iters N]
"""
import argparse
import ctypes
import datetime
import os
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    import torchlean_rt as rt
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing to compare with"); return 77
    if not (torch.cuda.is_available() and rt.cuda_available()):
        print("no CUDA device (or a CPU-only library): skipped"); return 77
    dev = rt.cuda(0)
    lines = []
    emit = lambda s="": (print(s), lines.append(s))

    def wall(fn, sync):
        for _ in range(3):
            fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            fn()
        sync()
        return (time.perf_counter() - t0) / args.iters

    tsync = torch.cuda.synchronize
    src = torch.empty(2**28, device="cuda"); dst = torch.empty_like(src)
    copy_bw = 2 * src.numel() * 4 / wall(lambda: dst.copy_(src), tsync) / 1e9
    del src, dst

    emit("# Reductions on the GPU against PyTorch")
    emit()
    emit(f"- date: {datetime.date.today().isoformat()}; GPU: {torch.cuda.get_device_name(0)}; "
         f"PyTorch {torch.__version__}")
    emit(f"- library: {rt.build_info()}")
    emit(f"- copy bandwidth (read + write, same timing method): {copy_bw:.0f} GB/s")
    emit(f"- {args.iters} timed calls after 3 warm-ups; wall clock around back-to-back calls")
    emit()
    emit("| op | shape | bytes | ours ms (det off) | ours ms (det on) | GB/s | of copy BW | "
         "torch ms | ours/torch |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|")

    g = torch.Generator(device="cuda").manual_seed(7)
    cases = []
    n = 2**26
    cases.append(("sum", (n,), lambda b: ("reduce_sum", b), lambda t: t.sum(), 1))
    cases.append(("mean", (n,), lambda b: ("reduce_mean", b), lambda t: t.mean(), 1))
    for rows, cols in [(65536, 1024), (1024, 65536)]:
        cases.append(("sum axis0", (rows, cols), lambda b, r=rows, c=cols: ("reduce_sum_axis0", b, r, c),
                      lambda t: t.sum(0), cols))
        cases.append(("sum axis1", (rows, cols), lambda b, r=rows, c=cols: ("reduce_sum_axis1", b, r, c),
                      lambda t: t.sum(1), rows))
        cases.append(("max axis0", (rows, cols), lambda b, r=rows, c=cols: ("reduce_max_axis0", b, r, c),
                      lambda t: t.amax(0), cols))
        cases.append(("max axis1", (rows, cols), lambda b, r=rows, c=cols: ("reduce_max_axis1", b, r, c),
                      lambda t: t.amax(1), rows))
    for name, shape, ours, ref, out_elems in cases:
        t = torch.randn(*shape, device="cuda", generator=g)
        host = t.flatten().cpu().numpy()
        buf = rt.Buffer.from_buffer(host, dev)
        fn_name, *rest = ours(buf)
        cfn = getattr(rt.lib, "tlrt_" + fn_name)
        argv = [buf.handle] + list(rest[1:])
        out = ctypes.c_void_p()

        def call():
            st = cfn(*argv, ctypes.byref(out))
            if st != 0:
                raise RuntimeError(f"{fn_name}: {st} {rt.lib.tlrt_last_error()}")
            rt.lib.tlrt_buffer_free(out)
        osync = lambda: rt.synchronize(dev)
        prev = rt.lib.tlrt_set_deterministic(False)
        t_off = wall(call, osync)
        rt.lib.tlrt_set_deterministic(True)
        t_on = wall(call, osync)
        rt.lib.tlrt_set_deterministic(prev)
        t_ref = wall(lambda: ref(t), tsync)
        nbytes = (t.numel() + out_elems) * 4
        gbs = nbytes / t_off / 1e9
        emit(f"| {name} | {'x'.join(map(str, shape))} | {nbytes} | {t_off*1e3:.3f} | "
             f"{t_on*1e3:.3f} | {gbs:.0f} | {gbs/copy_bw:.2f} | {t_ref*1e3:.3f} | "
             f"{t_off/t_ref:.2f} |")
        buf.free()
        del t
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
