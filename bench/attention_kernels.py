"""Per-kernel device times of our fused attention (forward and backward) through torch.profiler
(CUPTI sees every kernel of the process, the library's included): where a pass's time goes.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/attention_kernels.py
      [--shapes 32x1024x64] [--kinds none,causal,masked] [--iters 10]
The backward runs in the default mode (determinism switch off, allow_tf32 off); for an A/B of two
forms, build two libraries and run one process per TORCHLEAN_RT_LIB.
"""
import argparse
import ctypes
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention  # noqa: E402
import common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="32x1024x64")
    ap.add_argument("--kinds", default="none,causal,masked")
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    from torch.profiler import profile, ProfilerActivity
    dev = rt.cuda(0)
    lib = attention.declare(rt.lib)
    P = ctypes.c_void_p
    lib.tlrt_set_deterministic(False)
    for shape in args.shapes.split(","):
        bh, n, d = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(bh * 7 + n + d)
        q, k, v, do = (torch.randn(bh, n, d, device="cuda", generator=g) for _ in range(4))
        bq, bk, bv, bdo = (common.upload(rt, dev, t) for t in (q, k, v, do))
        maskt = torch.rand(n, n, device="cuda", generator=g) >= 0.3
        maskt.fill_diagonal_(True)
        bmask = common.upload(rt, dev, maskt.float())
        for kind in args.kinds.split(","):
            causal = kind == "causal"
            mh = bmask.handle if kind == "masked" else None
            o, lse = P(), P()
            assert lib.tlrt_flash_attention_fwd(bq.handle, bk.handle, bv.handle, mh, bh, n, d,
                                                1 / math.sqrt(d), causal, -math.inf,
                                                ctypes.byref(o), ctypes.byref(lse)) == 0

            def bwd():
                g3 = [P(), P(), P()]
                assert lib.tlrt_flash_attention_bwd(bq.handle, bk.handle, bv.handle, mh,
                                                    bdo.handle, o, lse, bh, n, d,
                                                    1 / math.sqrt(d), causal, -math.inf,
                                                    *[ctypes.byref(x) for x in g3]) == 0
                for x in g3:
                    lib.tlrt_buffer_free(x)
            for _ in range(3):
                bwd()
            rt.synchronize(dev)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.iters):
                    bwd()
                rt.synchronize(dev)
            print(f"## backward {shape} {kind}: device time per call by kernel (us)")
            for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
                if e.device_time_total > 0:
                    print(f"  {e.device_time_total / args.iters:9.1f}  {e.key[:90]}")
            lib.tlrt_buffer_free(o); lib.tlrt_buffer_free(lse)
    return 0


if __name__ == "__main__":
    sys.exit(main())
