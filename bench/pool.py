"""Pooling benchmark on the GPU against PyTorch in the same process.

Times tlrt_maxpool2d_fwd / _bwd, tlrt_avgpool2d_fwd / _bwd (count_include_pad = true, PyTorch's
default) and tlrt_smooth_maxpool2d_fwd / _bwd on the brief's shapes (32, 64, 112, 112) k3 s2 p1
and k2 s2 p0 (ResNet's stem pool and a plain 2x2 pool), plus (32, 256, 56, 56) k3 s1 p1 (heavily
overlapping windows) and the 3-D (8, 32, 32, 64, 64) k2 s2 through tlrt_maxpool_fwd /
tlrt_avgpool_fwd (and _bwd), against F.max_pool2d / F.avg_pool2d / F.max_pool3d / F.avg_pool3d
and aten's max_pool{2,3}d_with_indices_backward / avg_pool{2,3}d_backward on the same values.
Smooth max pooling has no PyTorch counterpart: its rows report bandwidth only.

Reported per op and shape: the NOMINAL bytes (every input read once, every output written once:
forward 4 (|x| + |y|); max / smooth backward 4 (2 |x| + |y|) (x and dy read, dx written; PyTorch's
max backward reads its saved int64 indices instead of x, credited the same); average backward
4 (|x| + |y|)), our time with the determinism switch off and on (the same path: there are no
atomics; the two columns should agree), achieved GB/s, the fraction of the measured
device-to-device copy bandwidth, PyTorch's time and the ratio. Both sides are timed the same way:
wall clock around N back-to-back calls (each of ours followed by freeing its output,
stream-ordered), synchronised before and after. Targets (H100): max and average pool forward
>= 0.80 of copy bandwidth on the two (32, 64, 112, 112) shapes, and no slower than PyTorch.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/pool.py [--out FILE] [--iters N]
      [--quick] [--only k3_s1_p1,...] [--sweep]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# (name, (N, C, spatial...), kernel, stride, padding)
SHAPES = [
    ("stem k3 s2 p1", (32, 64, 112, 112), (3, 3), (2, 2), (1, 1)),
    ("k2 s2", (32, 64, 112, 112), (2, 2), (2, 2), (0, 0)),
    ("k3 s1 p1", (32, 256, 56, 56), (3, 3), (1, 1), (1, 1)),
    ("3-D k2 s2", (8, 32, 32, 64, 64), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
]
# --sweep: the max k3 s1 p1 backward (the one pooling backward with its own kernel choice) over
# plane sizes from 7 x 7 to wider than one band block takes, at about the same bytes.
SWEEP = [
    ("sweep 7", (32, 4096, 7, 7)),
    ("sweep 14", (32, 1024, 14, 14)),
    ("sweep 28", (32, 256, 28, 28)),
    ("sweep 56", (32, 64, 56, 56)),
    ("sweep 112", (32, 16, 112, 112)),
    ("sweep 75x301", (8, 32, 75, 301)),
    ("sweep 64x640", (4, 32, 64, 640)),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="only the two brief shapes")
    ap.add_argument("--only", help="comma-separated shape labels, _ for space (e.g. k3_s1_p1)")
    ap.add_argument("--sweep", action="store_true",
                    help="only the max k3 s1 p1 backward, over the plane sizes of SWEEP")
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    F = torch.nn.functional
    dev = rt.cuda(0)
    emit = common.Report()
    wall = common.wall_timer(args.iters, 3)

    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)
    copy_bw = common.copy_bandwidth(torch, wall)

    common.header(emit, "Pooling on the GPU against PyTorch", rt, common.gpu_setup(torch),
                  common.copy_line(copy_bw),
                  common.timing_line(args.iters, 3) + "; " + common.NOMINAL_BYTES)
    emit("| op | shape | bytes | ours ms (det off) | ours ms (det on) | GB/s | of copy BW | "
         "torch ms | ours/torch |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|")

    g = torch.Generator(device="cuda").manual_seed(7)
    aten = torch.ops.aten

    def up(t):
        return common.upload(rt, dev, t)

    def release(*bufs):  # our buffers of one shape, and torch's cached blocks
        for b in bufs:
            b.free()
        torch.cuda.empty_cache()

    def ours(fname, inputs, scalars):
        return common.freeing_call(rt, fname, inputs, scalars)

    def row(name, label, nbytes, call, ref):
        t_off, t_on = common.time_det_off_on(rt, wall, call, osync)
        gbs = nbytes / t_off / 1e9
        if ref is None:
            tail = "- | - |"
        else:
            t_ref = wall(ref, tsync)
            tail = f"{t_ref*1e3:.3f} | {t_off/t_ref:.2f} |"
        emit(f"| {name} | {label} | {nbytes} | {t_off*1e3:.3f} | {t_on*1e3:.3f} | {gbs:.0f} | "
             f"{gbs/copy_bw:.2f} | {tail}")

    if args.sweep:
        for label, shape in SWEEP:
            x = torch.randn(*shape, device="cuda", generator=g)
            y, idx = F.max_pool2d(x, 3, 1, 1, return_indices=True)
            gy = torch.randn(*y.shape, device="cuda", generator=g)
            bx, bgy = up(x), up(gy)
            geo = [shape[0], shape[1], shape[2], shape[3], 3, 3, 1, 1, 1, 1]
            ref = lambda: aten.max_pool2d_with_indices_backward(gy, x, [3, 3], [1, 1], [1, 1],
                                                                [1, 1], False, idx)
            row("maxpool2d_bwd", f"{label} {'x'.join(map(str, shape))}",
                4 * (2 * x.numel() + y.numel()), ours("maxpool2d_bwd", [bx, bgy], geo), ref)
            del x, y, idx, gy
            release(bx, bgy)
        emit.write(args.out)
        return 0
    shapes = SHAPES[:2] if args.quick else SHAPES
    if args.only:
        keep = [w.strip().replace("_", " ") for w in args.only.split(",")]
        shapes = [sh for sh in shapes if sh[0] in keep]
    for label, shape, k, s, p in shapes:
        N, C, sp = shape[0], shape[1], shape[2:]
        R = len(sp)
        x = torch.randn(*shape, device="cuda", generator=g)
        if R == 2:
            y, idx = F.max_pool2d(x, k, s, p, return_indices=True)
        else:
            y, idx = F.max_pool3d(x, k, s, p, return_indices=True)
        gy = torch.randn(*y.shape, device="cuda", generator=g)
        bx, bgy = up(x), up(gy)
        nin, nout = x.numel(), y.numel()
        lab = f"{label} {'x'.join(map(str, shape))}"
        if R == 2:
            geo = [N, C, sp[0], sp[1], k[0], k[1], s[0], s[1], p[0], p[1]]
            names = ("maxpool2d", "avgpool2d", "smooth_maxpool2d")
        else:
            arr = lambda v: (ctypes.c_uint64 * R)(*v)
            keep = (arr(sp), arr(k), arr(s), arr(p))  # alive for the calls below
            geo = [N, C, keep[0], R, keep[1], keep[2], keep[3]]
            names = ("maxpool", "avgpool", "smooth_maxpool")
        mx, av, sm = names
        if R == 2:
            ref_mf = lambda: F.max_pool2d(x, k, s, p)
            ref_af = lambda: F.avg_pool2d(x, k, s, p, count_include_pad=True)
            ref_mb = lambda: aten.max_pool2d_with_indices_backward(gy, x, k, s, p, [1, 1], False,
                                                                  idx)
            ref_ab = lambda: aten.avg_pool2d_backward(gy, x, k, s, p, False, True, None)
        else:
            ref_mf = lambda: F.max_pool3d(x, k, s, p)
            ref_af = lambda: F.avg_pool3d(x, k, s, p, count_include_pad=True)
            ref_mb = lambda: aten.max_pool3d_with_indices_backward(gy, x, k, s, p, [1, 1, 1],
                                                                  False, idx)
            ref_ab = lambda: aten.avg_pool3d_backward(gy, x, k, s, p, False, True, None)
        fwd_b, bwd_x_b, bwd_b = 4 * (nin + nout), 4 * (2 * nin + nout), 4 * (nin + nout)
        row(mx + "_fwd", lab, fwd_b, ours(mx + "_fwd", [bx], geo), ref_mf)
        row(av + "_fwd", lab, fwd_b, ours(av + "_fwd", [bx], geo + [True]), ref_af)
        row(mx + "_bwd", lab, bwd_x_b, ours(mx + "_bwd", [bx, bgy], geo), ref_mb)
        row(av + "_bwd", lab, bwd_b, ours(av + "_bwd", [bgy], geo + [True]), ref_ab)
        row(sm + "_fwd", lab, fwd_b, ours(sm + "_fwd", [bx], geo + [ctypes.c_double(4.0)]), None)
        row(sm + "_bwd", lab, bwd_x_b,
            ours(sm + "_bwd", [bx, bgy], geo + [ctypes.c_double(4.0)]), None)
        del x, y, idx, gy
        release(bx, bgy)
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
