"""Softmax-family and layer-norm benchmark on the GPU against PyTorch in the same process.

Times tlrt_softmax, tlrt_log_softmax, tlrt_hard_masked_softmax_by_row, tlrt_softmax_bwd,
tlrt_log_softmax_bwd, tlrt_layer_norm_fwd, tlrt_layer_norm_bwd, tlrt_rms_norm_fwd and
tlrt_rms_norm_bwd on (65536, 1024) and
(16384, 4096) (64M elements each; the brief's targets), plus (4096, 16384) and (1024, 65536)
(the long-row path), (1048576, 64) and (8388608, 8) (short rows), against torch.softmax /
log_softmax, softmax over masked_fill(mask == 0, -inf), aten._softmax_backward_data /
_log_softmax_backward_data, F.layer_norm, aten.native_layer_norm_backward, F.rms_norm (its
composite before torch 2.4) and the autograd backward of it on the same values.

Reported per op and shape: the NOMINAL bytes (every input read once, every output written once:
softmax / log-softmax 8 per element, masked 12, backward 12, layer norm forward 8 (+ 8 per row),
layer norm backward 12 (+ 8 per row + 8 per column); the same count is credited to PyTorch),
our time with the determinism switch off and on (the fixed tree is the same in both modes, so the
two columns should agree), achieved GB/s, the fraction of the measured device-to-device copy
bandwidth, PyTorch's time and the ratio. Both sides are timed the same way: wall clock around N
back-to-back calls (each of ours followed by freeing its outputs, stream-ordered), synchronised
before and after. Targets (H200): softmax, log-softmax and layer norm >= 0.85 of copy bandwidth on
the 64M-element shapes, and no slower than PyTorch.

Cross-entropy (tlrt_cross_entropy_fwd + tlrt_cross_entropy_bwd, ignore_index = -100 with about
5% of the labels ignored, int64 labels on the device) against F.cross_entropy forward + its
autograd backward (logits requiring grad, the same labels), at --ce-shapes (default 8192 x 50257,
the GPT-2 vocabulary, and a few others). NOMINAL bytes: forward 4 per logit (read once), backward
8 (read once, written once), plus the labels; reported for the forward, the backward and the
pair. Target (H200): >= 0.85 of copy bandwidth for the pair at 8192 x 50257.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/softmax.py [--out FILE] [--iters N]
      [--shapes 65536x1024,16384x4096] [--ce-shapes 8192x50257,4096x32000] [--ce-only]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DEFAULT_SHAPES = "65536x1024,16384x4096,8192x8192,4096x16384,1024x65536,1048576x64,8388608x8"
DEFAULT_CE_SHAPES = "8192x50257,16384x50257,8192x32000,4096x131072,65536x1000,262144x10"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--ce-shapes", default=DEFAULT_CE_SHAPES)
    ap.add_argument("--ce-only", action="store_true")
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    dev = rt.cuda(0)
    lib = rt.lib
    emit = common.Report()
    wall = common.wall_timer(args.iters, 3)

    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)
    copy_bw = common.copy_bandwidth(torch, wall)

    common.header(emit, "Softmax family and layer norm on the GPU against PyTorch", rt,
                  common.gpu_setup(torch), common.copy_line(copy_bw),
                  common.timing_line(args.iters, 3) + "; " + common.NOMINAL_BYTES)
    emit("| op | shape | bytes | ours ms (det off) | ours ms (det on) | GB/s | of copy BW | "
         "torch ms | ours/torch |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|")

    g = torch.Generator(device="cuda").manual_seed(7)
    aten = torch.ops.aten

    def up(t):
        return common.upload(rt, dev, t)

    def ours(fname, inputs, scalars, n_out):
        return common.freeing_call(rt, fname, inputs, scalars, n_out)

    def row(name, shape, nbytes, call, ref):
        t_off, t_on = common.time_det_off_on(rt, wall, call, osync)
        t_ref = wall(ref, tsync)
        gbs = nbytes / t_off / 1e9
        emit(f"| {name} | {shape[0]}x{shape[1]} | {nbytes} | {t_off*1e3:.3f} | {t_on*1e3:.3f} | "
             f"{gbs:.0f} | {gbs/copy_bw:.2f} | {t_ref*1e3:.3f} | {t_off/t_ref:.2f} |")

    for spec in ([] if args.ce_only else args.shapes.split(",")):
        R, C = (int(v) for v in spec.split("x"))
        n = R * C
        x = torch.randn(R, C, device="cuda", generator=g) * 3
        gr = torch.randn(R, C, device="cuda", generator=g)
        mask = (torch.rand(R, C, device="cuda", generator=g) > 0.25).float()
        bx, bg, bm = up(x), up(gr), up(mask)
        y = torch.softmax(x, -1)
        ly = torch.log_softmax(x, -1)
        by, bly = up(y), up(ly)
        neg_inf = torch.tensor(float("-inf"), device="cuda")
        row("softmax", (R, C), 8 * n, ours("softmax", [bx], [R, C], 1), lambda: torch.softmax(x, -1))
        row("log_softmax", (R, C), 8 * n, ours("log_softmax", [bx], [R, C], 1),
            lambda: torch.log_softmax(x, -1))
        row("masked softmax", (R, C), 12 * n,
            ours("hard_masked_softmax_by_row", [bx, bm], [R, C], 1),
            lambda: torch.softmax(torch.where(mask != 0, x, neg_inf), -1))
        row("softmax_bwd", (R, C), 12 * n, ours("softmax_bwd", [by, bg], [R, C], 1),
            lambda: aten._softmax_backward_data(gr, y, -1, torch.float32))
        row("log_softmax_bwd", (R, C), 12 * n, ours("log_softmax_bwd", [bly, bg], [R, C], 1),
            lambda: aten._log_softmax_backward_data(gr, ly, -1, torch.float32))
        gamma = torch.randn(C, device="cuda", generator=g)
        beta = torch.randn(C, device="cuda", generator=g)
        bgam, bbet = up(gamma), up(beta)
        row("layer_norm_fwd", (R, C), 8 * n + 8 * R + 8 * C,
            ours("layer_norm_fwd", [bx, bgam, bbet], [R, C, ctypes.c_double(1e-5)], 3),
            lambda: torch.nn.functional.layer_norm(x, (C,), gamma, beta, 1e-5))
        _, mean, rstd = aten.native_layer_norm(x, [C], gamma, beta, 1e-5)
        outs = [ctypes.c_void_p() for _ in range(3)]
        st = lib.tlrt_layer_norm_fwd(bx.handle, bgam.handle, bbet.handle, R, C,
                                     ctypes.c_double(1e-5), *[ctypes.byref(o) for o in outs])
        if st != 0:
            raise RuntimeError(rt.last_error())
        lib.tlrt_buffer_free(outs[0])
        bmean, bstd = rt.Buffer(outs[1].value), rt.Buffer(outs[2].value)
        row("layer_norm_bwd", (R, C), 12 * n + 8 * R + 8 * C,
            ours("layer_norm_bwd", [bg, bx, bmean, bstd, bgam], [R, C], 3),
            lambda: aten.native_layer_norm_backward(gr, x, [C], mean, rstd, gamma, beta,
                                                    [True, True, True]))
        # RMS norm (gamma given): forward 8 bytes per element (+ 4 per row + 4 per column);
        # backward (dx and dgamma) 12 (+ 4 per row + 8 per column), against F.rms_norm (or its
        # composite before torch 2.4) and the autograd backward of it.
        def torch_rms(v, w):
            if hasattr(torch.nn.functional, "rms_norm"):
                return torch.nn.functional.rms_norm(v, (C,), w, 1e-5)
            return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5) * w
        row("rms_norm_fwd", (R, C), 8 * n + 4 * R + 4 * C,
            ours("rms_norm_fwd", [bx, bgam], [R, C, ctypes.c_double(1e-5)], 2),
            lambda: torch_rms(x, gamma))
        outs = [ctypes.c_void_p() for _ in range(2)]
        st = lib.tlrt_rms_norm_fwd(bx.handle, bgam.handle, R, C, ctypes.c_double(1e-5),
                                   *[ctypes.byref(o) for o in outs])
        if st != 0:
            raise RuntimeError(rt.last_error())
        lib.tlrt_buffer_free(outs[0])
        binv = rt.Buffer(outs[1].value)
        xr = x.detach().requires_grad_(True)
        gr_ = gamma.detach().requires_grad_(True)
        yr = torch_rms(xr, gr_)
        row("rms_norm_bwd", (R, C), 12 * n + 4 * R + 8 * C,
            ours("rms_norm_bwd", [bg, bx, bgam, binv], [R, C], 2),
            lambda: torch.autograd.grad(yr, (xr, gr_), gr, retain_graph=True))
        del xr, gr_, yr
        binv.free()
        for b in (bx, bg, bm, by, bly, bgam, bbet, bmean, bstd):
            b.free()
        del x, gr, mask, y, ly, mean, rstd
        torch.cuda.empty_cache()
    # Cross-entropy: forward, backward (from the forward's lse and a device grad_loss), the pair.
    F = torch.nn.functional
    for spec in args.ce_shapes.split(","):
        R, C = (int(v) for v in spec.split("x"))
        n = R * C
        x = torch.randn(R, C, device="cuda", generator=g) * 3
        lab = torch.randint(0, C, (R,), device="cuda", generator=g)
        lab[torch.rand(R, device="cuda", generator=g) < 0.05] = -100
        bx = up(x)
        bl = rt.Buffer.from_ints(lab.cpu().numpy(), dtype="int64", device=dev)
        bone = up(torch.ones(1, device="cuda"))
        outs = [ctypes.c_void_p() for _ in range(2)]
        st = lib.tlrt_cross_entropy_fwd(bx.handle, bl.handle, R, C, ctypes.c_int(-100),
                                        *[ctypes.byref(o) for o in outs])
        if st != 0:
            raise RuntimeError(rt.last_error())
        lib.tlrt_buffer_free(outs[0])
        blse = rt.Buffer(outs[1].value)
        # Agreement with PyTorch (loss), once.
        ref = F.cross_entropy(x, lab, ignore_index=-100).item()
        loss_b = ours("cross_entropy_fwd", [bx, bl], [R, C, ctypes.c_int(-100)], 2)
        lv = [ctypes.c_void_p() for _ in range(2)]
        lib.tlrt_cross_entropy_fwd(bx.handle, bl.handle, R, C, ctypes.c_int(-100),
                                   *[ctypes.byref(o) for o in lv])
        got = rt.Buffer(lv[0].value).to_list()[0]
        lib.tlrt_buffer_free(lv[1])
        if abs(got - ref) > 1e-4 * (1 + abs(ref)):
            raise RuntimeError(f"cross_entropy {R}x{C}: loss {got}, torch {ref}")
        bwd = ours("cross_entropy_bwd", [bx, bl, blse, bone], [R, C, ctypes.c_int(-100)], 1)

        def pair(f=loss_b, b=bwd):
            f()
            b()
        xr = x.detach().requires_grad_(True)

        def torch_fwd():
            return F.cross_entropy(x, lab, ignore_index=-100)

        def torch_pair():
            return torch.autograd.grad(F.cross_entropy(xr, lab, ignore_index=-100), xr)
        lab_bytes = 8 * R
        row("cross_entropy fwd", (R, C), 4 * n + lab_bytes, loss_b, torch_fwd)
        yr = F.cross_entropy(xr, lab, ignore_index=-100)
        row("cross_entropy bwd", (R, C), 8 * n + lab_bytes, bwd,
            lambda: torch.autograd.grad(yr, xr, retain_graph=True))
        row("cross_entropy fwd+bwd", (R, C), 12 * n + 2 * lab_bytes, pair, torch_pair)
        del xr, yr
        for b in (bx, bl, bone, blse):
            b.free()
        del x, lab
        torch.cuda.empty_cache()
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
