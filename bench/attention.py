"""Fused attention benchmark on the GPU against torch.nn.functional.scaled_dot_product_attention
in the same process (float32, TF32 off on both sides).

Times tlrt_flash_attention_fwd and tlrt_flash_attention_bwd (the fused backward, given the
forward's out and lse) on (bh, n, d) = (32, 1024, 64), (16, 4096, 64) and (32, 1024, 128), each
unmasked, causal (mask_fill = -inf: tiles above the diagonal skipped) and masked (a random 0/1
(n, n) mask broadcast over bh, ~30% blocked, mask_fill = -inf), against SDPA (forward; forward +
backward through autograd minus the forward for the backward) with is_causal / a boolean
attn_mask (True = allowed) on the same values. Also reports achieved TFLOP/s (forward 4 n^2 d
FLOPs per problem, backward 2.5x that; causal counts half) and the fraction of the measured SGEMM
peak (torch.matmul on 8192^3 float32 with TF32 off, same timing method). Targets (H100): forward
at most 0.5x PyTorch's time, backward at most 0.7x.

Each of our passes is timed in three modes (the "path" column; abi/tlrt_attention.h):
  fast   the default (determinism switch off, allow_tf32 off): the forward on the 3xTF32
         mma.sync kernel (float32-grade, d <= 128), the backward on the 3xTF32 wgmma kernels
         (9.0 devices, 32 < d <= 128; elsewhere the exact kernels);
  exact  determinism switch on: the kernels bit for bit equal to the CPU backend;
  tf32   determinism switch off and tlrt_set_allow_tf32(true): tensor-core TF32 products
         (~1e-3 relative): the mma.sync forward with one product, the WMMA backward (unmasked;
         masked on the exact kernels).
docs/kernels/attention.md says which kernel runs where.
torch is always timed with TF32 off (the issue's comparison), also against the tf32 rows.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/attention.py [--out FILE] [--iters N]
      [--shapes 32x1024x64,16x4096x64,32x1024x128] [--modes fast,exact,tf32]
"""
import argparse
import ctypes
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
DEFAULT_SHAPES = "32x1024x64,16x4096x64,32x1024x128"


def declare(lib):
    """lib with the ctypes signatures of the attention entry points and the switches this
    benchmark (and bench/attention_kernels.py) calls."""
    P = ctypes.c_void_p
    lib.tlrt_flash_attention_fwd.argtypes = [P, P, P, P, ctypes.c_uint64, ctypes.c_uint64,
                                             ctypes.c_uint64, ctypes.c_double, ctypes.c_bool,
                                             ctypes.c_double, ctypes.POINTER(P), ctypes.POINTER(P)]
    lib.tlrt_flash_attention_bwd.argtypes = [P] * 7 + [ctypes.c_uint64] * 3 + [
        ctypes.c_double, ctypes.c_bool, ctypes.c_double] + [ctypes.POINTER(P)] * 3
    lib.tlrt_buffer_free.argtypes = [P]
    for fn in ("tlrt_set_deterministic", "tlrt_set_allow_tf32"):
        getattr(lib, fn).argtypes = [ctypes.c_bool]
        getattr(lib, fn).restype = ctypes.c_bool
    return lib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--modes", default="fast,exact,tf32",
                    help="which of our paths to time (comma-separated subset of fast,exact,tf32)")
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    F = torch.nn.functional
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = rt.cuda(0)
    lib = declare(rt.lib)
    P = ctypes.c_void_p
    modes = tuple(m for m in (("fast", False, False), ("exact", True, False), ("tf32", False, True))
                  if m[0] in args.modes.split(","))

    def set_mode(det, tf32):
        lib.tlrt_set_deterministic(det)
        lib.tlrt_set_allow_tf32(tf32)
    was_det = lib.tlrt_set_deterministic(False)
    was_tf32 = lib.tlrt_set_allow_tf32(False)
    emit = common.Report()
    wall = common.wall_timer(args.iters, 3)

    tsync = torch.cuda.synchronize
    osync = lambda: rt.synchronize(dev)
    sgemm = common.sgemm_peak(torch, wall) / 1e12

    common.header(emit, "Fused attention on the GPU against torch SDPA (float32, TF32 off)", rt,
                  common.gpu_setup(torch),
                  f"measured SGEMM peak (torch.matmul 8192^3, TF32 off): {sgemm:.1f} TFLOP/s",
                  common.timing_line(args.iters, 3))
    emit("| pass | (bh, n, d) | mask | path | ours ms | TFLOP/s | of SGEMM | torch ms | ours/torch | target |")
    emit("|---|---|---|---|---|---|---|---|---|---|")

    def to_buf(t):
        return common.upload(rt, dev, t)

    for shape in args.shapes.split(","):
        bh, n, d = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(bh * 7 + n + d)
        q, k, v, do = (torch.randn(bh, n, d, device="cuda", generator=g) for _ in range(4))
        scale = 1.0 / math.sqrt(d)
        bq, bk, bv, bdo = to_buf(q), to_buf(k), to_buf(v), to_buf(do)
        maskt = torch.rand(n, n, device="cuda", generator=g) >= 0.3
        maskt.fill_diagonal_(True)  # no fully blocked row (SDPA gives NaN there)
        bmask = to_buf(maskt.float())
        for kind in ("none", "causal", "masked"):
            causal = kind == "causal"
            mh = bmask.handle if kind == "masked" else None
            flops = 4.0 * bh * n * n * d * (0.5 if causal else 1.0)
            outs = [P(), P()]

            def ours_fwd():
                o, l = P(), P()
                st = lib.tlrt_flash_attention_fwd(bq.handle, bk.handle, bv.handle, mh, bh, n, d,
                                                  scale, causal, -math.inf, ctypes.byref(o),
                                                  ctypes.byref(l))
                assert st == 0, rt.last_error()
                lib.tlrt_buffer_free(o); lib.tlrt_buffer_free(l)

            def ours_bwd():
                g3 = [P(), P(), P()]
                st = lib.tlrt_flash_attention_bwd(bq.handle, bk.handle, bv.handle, mh, bdo.handle,
                                                  outs[0], outs[1], bh, n, d, scale, causal,
                                                  -math.inf, *[ctypes.byref(x) for x in g3])
                assert st == 0, rt.last_error()
                for x in g3:
                    lib.tlrt_buffer_free(x)

            am = maskt if kind == "masked" else None
            qt, kt, vt = (x.clone().requires_grad_(True) for x in (q, k, v))
            t_fwd_torch = wall(lambda: F.scaled_dot_product_attention(
                q, k, v, attn_mask=am, is_causal=causal, scale=scale), tsync)

            def torch_fb():
                o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=am, is_causal=causal,
                                                   scale=scale)
                torch.autograd.grad(o, (qt, kt, vt), do)
            t_fb_torch = wall(torch_fb, tsync)
            t_bwd_torch = max(t_fb_torch - t_fwd_torch, 1e-9)
            rows = []
            for mode, det, tf32 in modes:
                set_mode(det, tf32)
                # The backward's out and lse come from this mode's forward.
                st = lib.tlrt_flash_attention_fwd(bq.handle, bk.handle, bv.handle, mh, bh, n, d,
                                                  scale, causal, -math.inf,
                                                  ctypes.byref(outs[0]), ctypes.byref(outs[1]))
                assert st == 0, rt.last_error()
                t_fwd = wall(ours_fwd, osync)
                t_bwd = wall(ours_bwd, osync)
                lib.tlrt_buffer_free(outs[0]); lib.tlrt_buffer_free(outs[1])
                rows.append(("fwd", mode, t_fwd, t_fwd_torch, flops, 0.5))
                rows.append(("bwd", mode, t_bwd, t_bwd_torch, 2.5 * flops, 0.7))
            set_mode(False, False)
            for name, mode, t, tt, fl, target in sorted(rows, key=lambda r: r[0] == "bwd"):
                tf = fl / t / 1e12
                emit(f"| {name} | ({bh}, {n}, {d}) | {kind} | {mode} | {t * 1e3:.3f} | {tf:.1f} | "
                     f"{tf / sgemm:.2f} | {tt * 1e3:.3f} | {t / tt:.2f} | <= {target} |")
        for b_ in (bq, bk, bv, bdo, bmask):
            b_.free()
    lib.tlrt_set_deterministic(was_det)
    lib.tlrt_set_allow_tf32(was_tf32)
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
