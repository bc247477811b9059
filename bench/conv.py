"""Convolution benchmark on the GPU against PyTorch (cuDNN) in the same process.

Cases (the targets of the convolution issue; ratio = ours / torch time):
  conv2d (32, 64, 56, 56) -> 64, 3x3, pad 1:          forward <= 1.5x, backward <= 1.5x
  conv2d (1, 64, 56, 56) -> 64, 3x3, pad 1:           forward and backward <= 1.5x
  conv3d (4, 32, 32, 32, 32) -> 32, 3x3x3, pad 1:     <= 2x
  conv_transpose2d (32, 64, 28, 28) -> 64, 4x4, stride 2, pad 1: <= 1.5x
plus, for information, a depthwise (32, 64, 56, 56) 3x3 case and a 1x1 case.
TF32 is off on both sides (tlrt_set_allow_tf32(false); torch.backends.cudnn.allow_tf32 = False,
torch.backends.cuda.matmul.allow_tf32 = False); cudnn.benchmark = True, so PyTorch uses its best
algorithm. Forward: ours tlrt_conv_fwd / tlrt_convtranspose_fwd with bias, torch F.conv{2,3}d /
F.conv_transpose2d with bias. Backward: ours tlrt_conv_bwd / tlrt_convtranspose_bwd (d_kernel,
d_bias, d_input in one call), torch aten.convolution_backward with output_mask all True (the kernel
autograd calls). Both timed the same way: wall clock around N back-to-back calls, synchronised
before and after; every call allocates its outputs (our pool, PyTorch's caching allocator).
TFLOP/s = 2 N out_c (in_c / groups) prod(k) prod(out) per GEMM pass (the backward makes two), and
the fraction of the SGEMM peak measured here (torch.matmul 8192^3 float32, TF32 off).

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/conv.py [--out FILE] [--iters N]
"""
import argparse
import ctypes
import math
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
    F = torch.nn.functional
    dev = rt.cuda(0)
    emit = common.Report()
    wall = common.wall_timer(args.iters, 5)

    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)
    prev = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.benchmark)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    prev_ours = rt.lib.tlrt_set_allow_tf32(False)

    # SGEMM peak (float32, TF32 off), for the fraction column.
    peak = common.sgemm_peak(torch, wall)

    common.header(emit, "Convolution on the GPU against PyTorch (cuDNN)", rt,
                  common.gpu_setup(torch) + f"; cuDNN {torch.backends.cudnn.version()}",
                  f"{args.iters} timed calls after 5 warm-ups; TF32 off on both sides; "
                  f"cudnn.benchmark on; measured SGEMM peak (8192^3): {peak/1e12:.1f} TFLOP/s")
    emit("| case | pass | ours ms | ours TFLOP/s | % SGEMM peak | torch ms | torch TFLOP/s | "
         "ours/torch | target | max diff / max |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")

    g = torch.Generator(device="cuda").manual_seed(7)
    # (name, transposed, N, in_c, out_c, spatial, k, stride, pad, groups, target)
    cases = [
        ("conv2d 32x64x56x56 3x3", False, 32, 64, 64, (56, 56), 3, 1, 1, 1, 1.5),
        ("conv2d 1x64x56x56 3x3", False, 1, 64, 64, (56, 56), 3, 1, 1, 1, 1.5),
        ("conv3d 4x32x32^3 3x3x3", False, 4, 32, 32, (32, 32, 32), 3, 1, 1, 1, 2.0),
        ("convT2d 32x64x28x28 4x4 s2", True, 32, 64, 64, (28, 28), 4, 2, 1, 1, 1.5),
        ("depthwise 32x64x56x56 3x3", False, 32, 64, 64, (56, 56), 3, 1, 1, 64, None),
        ("conv2d 32x256x28x28 1x1", False, 32, 256, 256, (28, 28), 1, 1, 0, 1, None),
    ]
    u64a = lambda v: (ctypes.c_uint64 * len(v))(*v)
    for name, tr, n, cin, cout, sp, k, s, p, grp, target in cases:
        r = len(sp)
        if tr:
            wshape = (cin, cout // grp) + (k,) * r
            osp = tuple((i - 1) * s - 2 * p + k for i in sp)
        else:
            wshape = (cout, cin // grp) + (k,) * r
            osp = tuple((i + 2 * p - k) // s + 1 for i in sp)
        X = torch.randn(n, cin, *sp, device="cuda", generator=g)
        W = torch.randn(*wshape, device="cuda", generator=g) / math.sqrt(cin // grp * k ** r)
        B = torch.randn(cout, device="cuda", generator=g)
        DY = torch.randn(n, cout, *osp, device="cuda", generator=g)
        if tr:
            tfwd = lambda: F.conv_transpose2d(X, W, B, stride=s, padding=p, groups=grp)
        else:
            conv = F.conv2d if r == 2 else F.conv3d
            tfwd = lambda: conv(X, W, B, stride=s, padding=p, groups=grp)
        tbwd = lambda: torch.ops.aten.convolution_backward(
            DY, X, W, [cout], [s] * r, [p] * r, [1] * r, tr, [0] * r, grp, [True, True, True])
        to_buf = lambda t: common.upload(rt, dev, t)
        xb, wb, bb, dyb = to_buf(X), to_buf(W), to_buf(B), to_buf(DY)
        ins, ks, ss, ps, ds = u64a(sp), u64a([k] * r), u64a([s] * r), u64a([p] * r), u64a([1] * r)
        fwd_c = rt.lib.tlrt_convtranspose_fwd if tr else rt.lib.tlrt_conv_fwd
        bwd_c = rt.lib.tlrt_convtranspose_bwd if tr else rt.lib.tlrt_conv_bwd
        out, o1, o2, o3 = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()

        def check(st, what):
            if st != 0:
                raise RuntimeError(f"{name} {what}: {st} {rt.lib.tlrt_last_error()}")

        def ofwd():
            check(fwd_c(wb.handle, bb.handle, xb.handle, n, cin, cout, ins, r, ks, ss, ps, ds,
                        grp, ctypes.byref(out)), "fwd")
            rt.lib.tlrt_buffer_free(out)

        def obwd():
            check(bwd_c(wb.handle, xb.handle, dyb.handle, n, cin, cout, ins, r, ks, ss, ps, ds,
                        grp, ctypes.byref(o1), ctypes.byref(o2), ctypes.byref(o3)), "bwd")
            for o in (o1, o2, o3):
                rt.lib.tlrt_buffer_free(o)

        # Sanity: the same results up to rounding.
        check(fwd_c(wb.handle, bb.handle, xb.handle, n, cin, cout, ins, r, ks, ss, ps, ds, grp,
                    ctypes.byref(out)), "fwd")
        y_ours = rt.Buffer(out.value).to_numpy()
        y_ref = tfwd().flatten().cpu().numpy()
        err_f = float(abs(y_ours - y_ref).max()) / (float(abs(y_ref).max()) or 1.0)
        check(bwd_c(wb.handle, xb.handle, dyb.handle, n, cin, cout, ins, r, ks, ss, ps, ds, grp,
                    ctypes.byref(o1), ctypes.byref(o2), ctypes.byref(o3)), "bwd")
        ours_g = [rt.Buffer(o.value).to_numpy() for o in (o1, o3, o2)]  # dW, dX, dB
        ref_g = tbwd()  # (dX, dW, dB)
        ref_g = [ref_g[1], ref_g[0], ref_g[2]]
        err_b = max(float(abs(o - t.flatten().cpu().numpy()).max()) /
                    (float(t.abs().max()) or 1.0) for o, t in zip(ours_g, ref_g))
        conv_sp = sp if tr else osp  # output positions of the GEMM view
        ci, co = (cout, cin) if tr else (cin, cout)
        flops = 2.0 * n * co * (ci // grp) * k ** r * math.prod(conv_sp)
        for pname, of, tf, fl, err in (("forward", ofwd, tfwd, flops, err_f),
                                       ("backward", obwd, tbwd, 2 * flops, err_b)):
            t_o = wall(of, osync)
            t_t = wall(tf, tsync)
            emit(f"| {name} | {pname} | {t_o*1e3:.3f} | {fl/t_o/1e12:.1f} | "
                 f"{100*fl/t_o/peak:.0f}% | {t_t*1e3:.3f} | {fl/t_t/1e12:.1f} | "
                 f"{t_o/t_t:.2f} | {'<= %.1f' % target if target else '-'} | {err:.1e} |")
        for b in (xb, wb, bb, dyb):
            b.free()
        del X, W, B, DY
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, \
        torch.backends.cudnn.benchmark = prev
    rt.lib.tlrt_set_allow_tf32(prev_ours)
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
