"""Reduction benchmark on the GPU against PyTorch in the same process.

Times tlrt_reduce_sum / _mean on 2^26 floats and the axis sums / maxima on (65536, 1024) and
(1024, 65536) matrices against torch.sum / mean / sum(dim) / amax(dim), and the sampling
selections tlrt_argmax_rows / tlrt_topk_rows (int64 indices) on logits of GPT-2's vocabulary,
(8192, 50257), (64, 50257) and (1, 50257), k in 1, 10, 50, 1000, against torch.argmax(dim=-1) /
torch.topk(k, dim=-1) (indices checked equal to PyTorch's on these tie-free inputs), reports bytes moved (the
input read once plus the output written), achieved GB/s, the fraction of the measured
device-to-device copy bandwidth and the time ratio to PyTorch, for the determinism switch off and
on (the fixed tree is the same in both modes, so the two columns should agree). Both sides are
timed the same way: wall clock around N back-to-back calls, synchronised before and after.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/reduce.py [--out FILE] [--iters N]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    dev = rt.cuda(0)
    emit = common.Report()
    wall = common.wall_timer(args.iters, 3)
    tsync = torch.cuda.synchronize
    copy_bw = common.copy_bandwidth(torch, wall)
    common.header(emit, "Reductions on the GPU against PyTorch", rt, common.gpu_setup(torch),
                  common.copy_line(copy_bw), common.timing_line(args.iters, 3))
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
    I64 = 2  # TLRT_DTYPE_I64
    for rows in (8192, 64, 1):
        cols = 50257
        cases.append(("argmax rows", (rows, cols),
                      lambda b, r=rows, c=cols: ("argmax_rows", b, r, c, I64),
                      lambda t: t.argmax(-1), rows * 2))
        for k in (1, 10, 50, 1000):
            cases.append((f"topk k={k}", (rows, cols),
                          lambda b, r=rows, c=cols, k=k: ("topk_rows", b, r, c, k, I64),
                          lambda t, k=k: t.topk(k, -1), rows * k * 3))
    for name, shape, ours, ref, out_elems in cases:
        t = torch.randn(*shape, device="cuda", generator=g)
        buf = common.upload(rt, dev, t)
        fn_name, _, *scalars = ours(buf)
        n_out = 2 if fn_name == "topk_rows" else 1
        call = common.freeing_call(rt, fn_name, [buf], scalars, n_out)
        if fn_name in ("argmax_rows", "topk_rows"):  # the same indices as PyTorch's
            ops = rt.OPS[fn_name](buf, *scalars)
            got = ops[-1] if isinstance(ops, tuple) else ops
            want = ref(t)
            want = want[1] if isinstance(want, tuple) else want
            same = bool((torch.from_numpy(got.to_numpy()).to("cuda").reshape(want.shape)
                         == want).all())
            for o in (ops if isinstance(ops, tuple) else (ops,)):
                o.free()
            if not same:
                raise RuntimeError(f"{name} {shape}: indices differ from PyTorch's")
        t_off, t_on = common.time_det_off_on(rt, wall, call, lambda: rt.synchronize(dev))
        t_ref = wall(lambda: ref(t), tsync)
        nbytes = (t.numel() + out_elems) * 4
        gbs = nbytes / t_off / 1e9
        emit(f"| {name} | {'x'.join(map(str, shape))} | {nbytes} | {t_off*1e3:.3f} | "
             f"{t_on*1e3:.3f} | {gbs:.0f} | {gbs/copy_bw:.2f} | {t_ref*1e3:.3f} | "
             f"{t_off/t_ref:.2f} |")
        buf.free()
        del t
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
