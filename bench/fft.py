"""Real-FFT and spectral-convolution benchmark on the GPU against PyTorch in the same process.

Times tlrt_rfft1d_packed / tlrt_irfft1d_packed on 4096 x 4096 (and 16384 x 1024, 256 x 65536)
against torch.fft.rfft / torch.fft.irfft (norm="backward", the same convention), and the fused
spectral convolution (one FNO1d block) forward and backward against the equivalent PyTorch
composition on the same values:
    X = torch.fft.rfft(x, dim=0); Z = einsum("kc,kco->ko", X[:modes], W); out_ft[:modes] = Z;
    y = torch.fft.irfft(out_ft, n=grid, dim=0)       with W = torch.complex(w_re, w_im)
and its autograd backward (dx, dw_re, dw_im from dy) against tlrt_spectral_conv1d_rfft_bwd_x +
tlrt_spectral_conv1d_rfft_bwd_w, at (grid, width, modes) = (4096, 64, 32) and (1024, 128, 16).
Targets (H100): rfft 4096 x 4096 within 10% of torch.fft.rfft (ratio <= 1.10); the spectral
convolution faster than the composition (ratio < 1).
Reported: time per call, the nominal bytes (input read + output written once) as GB/s, the ratio
ours / torch, and the largest difference between the two results relative to the largest value
(a check that both compute the same thing; expected ~1e-6). Both sides are timed the same way:
wall clock around N back-to-back calls (each of ours followed by freeing its outputs,
stream-ordered), synchronised before and after.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/fft.py [--out FILE] [--iters N]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    dev = rt.cuda(0)
    lib = rt.lib
    u64 = ctypes.c_uint64
    emit = common.Report()
    wall = common.wall_timer(args.iters, 5)

    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)

    def upload(t):
        return common.upload(rt, dev, t)

    def call_out(fname, *argv, nout=1):
        outs = [ctypes.c_void_p() for _ in range(nout)]
        st = getattr(lib, fname)(*argv, *[ctypes.byref(o) for o in outs])
        if st != 0:
            raise RuntimeError(f"{fname}: {st} {lib.tlrt_last_error()}")
        return outs

    def timed(fname, *argv, nout=1):
        def run():
            for o in call_out(fname, *argv, nout=nout):
                lib.tlrt_buffer_free(o)
        return run

    def result(fname, *argv, nout=1):
        return [torch.from_numpy(rt.Buffer(o.value).to_numpy()).cuda()
                for o in call_out(fname, *argv, nout=nout)]

    def rel(a, b):
        a = a.flatten().float(); b = b.flatten().float()
        return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)

    common.header(emit, "Real FFT and spectral convolution on the GPU against PyTorch", rt,
                  common.gpu_setup(torch), common.timing_line(args.iters, 5))
    emit("| op | shape | ours ms | ours GB/s | torch ms | torch GB/s | ours/torch | max diff/max |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|")
    g = torch.Generator(device="cuda").manual_seed(7)

    for batch, n in [(4096, 4096), (16384, 1024), (256, 65536)]:
        x = torch.randn(batch, n, device="cuda", generator=g)
        xb = upload(x)
        ref = torch.view_as_real(torch.fft.rfft(x, dim=-1))
        ours = result("tlrt_rfft1d_packed", xb.handle, u64(batch), u64(n))[0]
        err = rel(ours, ref)
        nbytes = 4 * batch * n + 8 * batch * (n // 2 + 1)
        t_o = wall(timed("tlrt_rfft1d_packed", xb.handle, u64(batch), u64(n)), osync)
        t_t = wall(lambda: torch.fft.rfft(x, dim=-1), tsync)
        emit(f"| rfft | {batch} x {n} | {t_o*1e3:.3f} | {nbytes/t_o/1e9:.0f} | {t_t*1e3:.3f} | "
             f"{nbytes/t_t/1e9:.0f} | {t_o/t_t:.3f} | {err:.1e} |")
        X = torch.fft.rfft(x, dim=-1)
        sb = upload(torch.view_as_real(X))
        ref = torch.fft.irfft(X, n=n, dim=-1)
        ours = result("tlrt_irfft1d_packed", sb.handle, u64(batch), u64(n))[0]
        err = rel(ours, ref)
        t_o = wall(timed("tlrt_irfft1d_packed", sb.handle, u64(batch), u64(n)), osync)
        t_t = wall(lambda: torch.fft.irfft(X, n=n, dim=-1), tsync)
        emit(f"| irfft | {batch} x {n} | {t_o*1e3:.3f} | {nbytes/t_o/1e9:.0f} | {t_t*1e3:.3f} | "
             f"{nbytes/t_t/1e9:.0f} | {t_o/t_t:.3f} | {err:.1e} |")
        xb.free(); sb.free()
        del x, X, ref, ours

    for grid, width, modes in [(4096, 64, 32), (1024, 128, 16)]:
        x = torch.randn(grid, width, device="cuda", generator=g)
        wr = torch.randn(modes, width, width, device="cuda", generator=g) / width
        wi = torch.randn(modes, width, width, device="cuda", generator=g) / width
        dy = torch.randn(grid, width, device="cuda", generator=g)
        h = grid // 2 + 1

        def torch_fwd(x, wr, wi):
            X = torch.fft.rfft(x, dim=0)
            Z = torch.einsum("kc,kco->ko", X[:modes], torch.complex(wr, wi))
            out_ft = torch.zeros(h, width, dtype=torch.complex64, device="cuda")
            out_ft[:modes] = Z
            return torch.fft.irfft(out_ft, n=grid, dim=0)

        xr, wrr, wir = (t.clone().requires_grad_(True) for t in (x, wr, wi))
        y_ref = torch_fwd(xr, wrr, wir)
        gx, gwr, gwi = torch.autograd.grad(y_ref, (xr, wrr, wir), dy, retain_graph=True)
        xb, wrb, wib, dyb = upload(x), upload(wr), upload(wi), upload(dy)
        dims = (u64(grid), u64(width), u64(modes))
        y = result("tlrt_spectral_conv1d_rfft_fwd", xb.handle, wrb.handle, wib.handle, *dims)[0]
        dx = result("tlrt_spectral_conv1d_rfft_bwd_x", xb.handle, wrb.handle, wib.handle,
                    dyb.handle, *dims)[0]
        dwr, dwi = result("tlrt_spectral_conv1d_rfft_bwd_w", xb.handle, wrb.handle, wib.handle,
                          dyb.handle, *dims, nout=2)
        shape = f"grid {grid}, width {width}, modes {modes}"
        sig = 4 * grid * width
        wts = 8 * modes * width * width
        # forward
        t_o = wall(timed("tlrt_spectral_conv1d_rfft_fwd", xb.handle, wrb.handle, wib.handle,
                         *dims), osync)
        with torch.no_grad():
            t_t = wall(lambda: torch_fwd(x, wr, wi), tsync)
        nb = 2 * sig + wts
        emit(f"| spectral fwd | {shape} | {t_o*1e3:.3f} | {nb/t_o/1e9:.0f} | {t_t*1e3:.3f} | "
             f"{nb/t_t/1e9:.0f} | {t_o/t_t:.3f} | {rel(y.view(grid, width), y_ref):.1e} |")
        # backward: dx + both weight gradients
        run_x = timed("tlrt_spectral_conv1d_rfft_bwd_x", xb.handle, wrb.handle, wib.handle,
                      dyb.handle, *dims)
        run_w = timed("tlrt_spectral_conv1d_rfft_bwd_w", xb.handle, wrb.handle, wib.handle,
                      dyb.handle, *dims, nout=2)

        def ours_bwd():
            run_x(); run_w()
        t_o = wall(ours_bwd, osync)
        t_t = wall(lambda: torch.autograd.grad(y_ref, (xr, wrr, wir), dy, retain_graph=True),
                   tsync)
        nb = 3 * sig + 2 * wts
        err = max(rel(dx.view(grid, width), gx), rel(dwr.view_as(gwr), gwr),
                  rel(dwi.view_as(gwi), gwi))
        emit(f"| spectral bwd (x, w) | {shape} | {t_o*1e3:.3f} | {nb/t_o/1e9:.0f} | "
             f"{t_t*1e3:.3f} | {nb/t_t/1e9:.0f} | {t_o/t_t:.3f} | {err:.1e} |")
        # training step: forward + backward (torch: forward under autograd + grad)
        run_f = timed("tlrt_spectral_conv1d_rfft_fwd", xb.handle, wrb.handle, wib.handle, *dims)

        def ours_step():
            run_f(); run_x(); run_w()

        def torch_step():
            yy = torch_fwd(xr, wrr, wir)
            torch.autograd.grad(yy, (xr, wrr, wir), dy)
        t_o = wall(ours_step, osync)
        t_t = wall(torch_step, tsync)
        nb = 5 * sig + 3 * wts
        emit(f"| spectral fwd+bwd | {shape} | {t_o*1e3:.3f} | {nb/t_o/1e9:.0f} | {t_t*1e3:.3f} | "
             f"{nb/t_t/1e9:.0f} | {t_o/t_t:.3f} | |")
        for b in (xb, wrb, wib, dyb):
            b.free()
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
