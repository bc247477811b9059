"""Linear-layer benchmark on the GPU against PyTorch in the same process.

Times tlrt_linear_fwd (product, bias, GELU) and tlrt_linear_fwd + tlrt_linear_bwd (dx, dw, db)
against PyTorch eager on the
same inputs: F.linear (+ F.gelu(approximate="tanh")) forward, and forward + autograd backward of
the same expression, float32 with TF32 off on both sides. Shapes are the projections of the two
GPT configurations of bench/models.py (tokens x in -> out: attention q/k/v, its output, the MLP
up with GELU and down) and a GPT-2 LM head (no bias). Reports ms and the ratio to PyTorch.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/linear.py [--out FILE] [--iters N]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ACT_NONE, ACT_GELU = 0, 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    import torch.nn.functional as F
    dev = rt.cuda(0)
    emit = common.Report()
    wall = common.wall_timer(args.iters, 5)
    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    rt.lib.tlrt_set_allow_tf32(False)
    common.header(emit, "Linear layers on the GPU against PyTorch", rt, common.gpu_setup(torch),
                  common.timing_line(args.iters, 5), "float32, TF32 off on both sides")
    emit("| rows x in -> out | bias | act | fwd ours ms | fwd torch ms | ours/torch | "
         "fwd+bwd ours ms | fwd+bwd torch ms | ours/torch | max rel diff |")
    emit("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    cases = [
        # d_model 384, batch 16 x context 256 (bench/models.py "small")
        (4096, 384, 384, True, ACT_NONE), (4096, 384, 1536, True, ACT_GELU),
        (4096, 1536, 384, True, ACT_NONE),
        # d_model 128, batch 64 x context 64 ("launch")
        (4096, 128, 128, True, ACT_NONE), (4096, 128, 512, True, ACT_GELU),
        (4096, 512, 128, True, ACT_NONE),
        # GPT-2 small, batch 8 x context 1024
        (8192, 768, 768, True, ACT_NONE), (8192, 768, 3072, True, ACT_GELU),
        (8192, 3072, 768, True, ACT_NONE), (8192, 768, 50257, False, ACT_NONE),
        # odd sizes
        (1000, 333, 777, True, ACT_GELU), (1, 768, 768, True, ACT_NONE),
    ]
    g = torch.Generator(device="cuda").manual_seed(5)
    for rows, nin, nout, bias, act in cases:
        x = torch.randn(rows, nin, device="cuda", generator=g)
        w = torch.randn(nout, nin, device="cuda", generator=g) / nin ** 0.5
        b = torch.randn(nout, device="cuda", generator=g) if bias else None
        dy = torch.randn(rows, nout, device="cuda", generator=g)
        X, W, G = (common.upload(rt, dev, t) for t in (x, w, dy))
        B = common.upload(rt, dev, b) if bias else None
        bh = B.handle if bias else None

        def ref_fwd():
            y = F.linear(x, w, b)
            return F.gelu(y, approximate="tanh") if act == ACT_GELU else y
        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
        br = b.clone().requires_grad_() if bias else None

        def ref_step():
            y = F.linear(xr, wr, br)
            if act == ACT_GELU:
                y = F.gelu(y, approximate="tanh")
            y.backward(dy)
            xr.grad = wr.grad = None
            if br is not None:
                br.grad = None
        y, pre, dx, dw, db = (ctypes.c_void_p() for _ in range(5))

        def fwd():
            st = rt.lib.tlrt_linear_fwd(X.handle, W.handle, bh, rows, nin, nout, act,
                                        ctypes.byref(y), ctypes.byref(pre))
            if st != 0:
                raise RuntimeError(f"tlrt_linear_fwd: {st} {rt.last_error()}")

        def step():
            fwd()
            st = rt.lib.tlrt_linear_bwd(G.handle, X.handle, W.handle, pre, rows, nin, nout, act,
                                        ctypes.byref(dx), ctypes.byref(dw),
                                        ctypes.byref(db) if bias else None)
            if st != 0:
                raise RuntimeError(f"tlrt_linear_bwd: {st} {rt.last_error()}")
            for o in (y, pre, dx, dw) + ((db,) if bias else ()):
                rt.lib.tlrt_buffer_free(o)

        def fwd_only():
            fwd()
            rt.lib.tlrt_buffer_free(y)
            rt.lib.tlrt_buffer_free(pre)
        fwd()
        ours = rt.Buffer(y.value).to_numpy()
        rt.lib.tlrt_buffer_free(pre)
        ref = ref_fwd().flatten().cpu().numpy()
        diff = float(abs(ours - ref).max()) / (float(abs(ref).max()) or 1.0)
        t_f, t_fr = wall(fwd_only, osync), wall(ref_fwd, tsync)
        t_s, t_sr = wall(step, osync), wall(ref_step, tsync)
        emit(f"| {rows} x {nin} -> {nout} | {'yes' if bias else 'no'} | "
             f"{'gelu' if act == ACT_GELU else '-'} | {t_f*1e3:.3f} | {t_fr*1e3:.3f} | "
             f"{t_f/t_fr:.3f} | {t_s*1e3:.3f} | {t_sr*1e3:.3f} | {t_s/t_sr:.3f} | {diff:.1e} |")
        for buf in (X, W, G) + ((B,) if bias else ()):
            buf.free()
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
