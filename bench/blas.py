"""Matrix-product benchmark on the GPU against PyTorch in the same process.

Times tlrt_bmm on 64 x 512^3 and tlrt_matmul on 4096^3 (plus their transposed forms) against
torch.bmm / torch.matmul on the same inputs, with TF32 off on both sides
(tlrt_set_allow_tf32(false), torch.backends.cuda.matmul.allow_tf32 = False), then with TF32
allowed on both (for information).
Reports TFLOP/s (2 batch m n p flops per call) and the time ratio to PyTorch: both sides call
cuBLAS (SgemmStridedBatched / Sgemm), so any gap is overhead; the target is within 2%. Both sides
are timed the same way: wall clock around N back-to-back calls, synchronised before and after;
each call allocates its output (our pool, PyTorch's caching allocator).

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/blas.py [--out FILE] [--iters N]
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
    emit = common.Report()
    wall = common.wall_timer(args.iters, 5)

    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)
    common.header(emit, "Matrix products on the GPU against PyTorch", rt, common.gpu_setup(torch),
                  common.timing_line(args.iters, 5) + "; TFLOP/s = 2 batch m n p / time")
    emit("| op | batch x (m, n, p) | trans a, b | TF32 | ours ms | ours TFLOP/s | torch ms | "
         "torch TFLOP/s | ours/torch |")
    emit("|---|---|---|---|---:|---:|---:|---:|---:|")

    g = torch.Generator(device="cuda").manual_seed(11)
    cases = []
    for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
        cases.append(("bmm", 64, 512, 512, 512, ta, tb))
    for ta, tb in [(False, False), (True, True)]:
        cases.append(("matmul", 1, 4096, 4096, 4096, ta, tb))
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    prev_ours = rt.lib.tlrt_set_allow_tf32(False)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        rt.lib.tlrt_set_allow_tf32(tf32)
        for op, batch, m, n, p, ta, tb in cases:
            # Stored shapes: a (batch, n, m) when ta, b (batch, p, n) when tb.
            sa = (batch, n, m) if ta else (batch, m, n)
            sb = (batch, p, n) if tb else (batch, n, p)
            A = torch.randn(*sa, device="cuda", generator=g)
            B = torch.randn(*sb, device="cuda", generator=g)
            la = A.transpose(1, 2) if ta else A
            lb = B.transpose(1, 2) if tb else B
            if op == "matmul":
                la, lb = la[0], lb[0]
                ref = lambda: torch.matmul(la, lb)
            else:
                ref = lambda: torch.bmm(la, lb)
            abuf, bbuf = common.upload(rt, dev, A), common.upload(rt, dev, B)
            out = ctypes.c_void_p()
            if op == "matmul":
                cfn = rt.lib.tlrt_matmul
                argv = [abuf.handle, bbuf.handle, m, n, p, ta, tb]
            else:
                cfn = rt.lib.tlrt_bmm
                argv = [abuf.handle, bbuf.handle, batch, m, n, p, ta, tb]

            def call():
                st = cfn(*argv, ctypes.byref(out))
                if st != 0:
                    raise RuntimeError(f"{op}: {st} {rt.lib.tlrt_last_error()}")
                rt.lib.tlrt_buffer_free(out)
            # Same result up to rounding (a sanity check that the two compute the same product).
            st = cfn(*argv, ctypes.byref(out))
            if st != 0:
                raise RuntimeError(f"{op}: {st} {rt.lib.tlrt_last_error()}")
            ours_res = rt.Buffer(out.value).to_numpy()
            ref_res = ref().flatten().cpu().numpy()
            scale = float(abs(ref_res).max()) or 1.0
            err = float(abs(ours_res - ref_res).max()) / scale
            t_ours = wall(call, osync)
            t_ref = wall(ref, tsync)
            flops = 2.0 * batch * m * n * p
            emit(f"| {op} | {batch} x ({m}, {n}, {p}) | {int(ta)}, {int(tb)} | "
                 f"{'on' if tf32 else 'off'} | {t_ours*1e3:.3f} | {flops/t_ours/1e12:.1f} | "
                 f"{t_ref*1e3:.3f} | {flops/t_ref/1e12:.1f} | {t_ours/t_ref:.3f} |"
                 + (f" max diff/max {err:.1e}" if err > (1e-3 if tf32 else 1e-5) else ""))
            abuf.free()
            bbuf.free()
            del A, B, la, lb
    torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    rt.lib.tlrt_set_allow_tf32(prev_ours)
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
