"""Per-kernel GPU times of a benchmark run, from the CUDA activity trace (torch.profiler, CUPTI):
where the time of one of our ops goes between its launches (kernel durations and the idle gaps
between them), without Nsight Systems (the GPU machine has none).

  TORCHLEAN_RT_LIB=build-gpu/libtorchlean_rt.so \\
    python3 scripts/kernel_times.py [--match SUBSTR] [--last N] \
      bench/softmax.py --shapes 65536x1024 --iters 5

Runs the script as __main__ with its own arguments under the profiler, then prints (1) every
kernel whose name contains SUBSTR (default "tlrt", i.e. the library's) with its launch count,
mean and total time, and (2) the last N (default 16) such kernels in time order with their
start (us, from the first of them), duration and the gap since the previous one ends. Kernel
times under the profiler are the device's; the tracing adds little to kernels, more to the host.
"""
import argparse
import os
import runpy
import sys


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--match", default="tlrt")
    ap.add_argument("--last", type=int, default=16)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sys.argv = [a.script] + a.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.script)))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        try:
            runpy.run_path(a.script, run_name="__main__")
        except SystemExit:
            pass
        torch.cuda.synchronize()
    ev = [e for e in prof.events()
          if e.device_type == DeviceType.CUDA and a.match in e.name]
    ev.sort(key=lambda e: e.time_range.start)
    if not ev:
        print(f"kernel_times: no kernel whose name contains {a.match!r}; all kernels:")
        ev = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
        if not ev:
            return 1
    per = {}
    for e in ev:
        n, t = per.get(e.name, (0, 0.0))
        per[e.name] = (n + 1, t + (e.time_range.end - e.time_range.start))
    print("| kernel | launches | mean us | total us |")
    print("|---|---:|---:|---:|")
    for name, (n, t) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name[:150]} | {n} | {t / n:.1f} | {t:.0f} |")
    print()
    tail = ev[-a.last:]
    t0 = tail[0].time_range.start
    prev = None
    print("| start us | duration us | gap us | kernel |")
    print("|---:|---:|---:|---|")
    for e in tail:
        gap = "" if prev is None else f"{e.time_range.start - prev:.1f}"
        print(f"| {e.time_range.start - t0:.1f} | {e.time_range.end - e.time_range.start:.1f} | "
              f"{gap} | {e.name[:110]} |")
        prev = e.time_range.end
    return 0


if __name__ == "__main__":
    sys.exit(main())
