"""Fused optimizer steps on the GPU against PyTorch in the same process.

Times tlrt_adam_step (Adam and AdamW), and tlrt_sgd_step (plain, momentum, Nesterov) on parameter
buffers of 2^20, 2^24 and 2^26 elements against torch.optim.Adam / AdamW / SGD with fused=True
(PyTorch's single-kernel multi-tensor step; where a PyTorch build lacks the fused SGD it falls back
to foreach=True and says so) on the same values. Both update in place; no allocation per step.

Reported per op and size: the NOMINAL bytes (Adam 28 per element: p, g, m, v read, p, m, v
written; SGD 12 without momentum, 20 with), our time, achieved GB/s, the fraction of the measured
device-to-device copy bandwidth, PyTorch's time and the ratio, and the largest difference between
our parameters and PyTorch's after the timed steps (relative to max |p|: rounding-level, since the
formulas are the same and only the order of the float32 operations differs). Both sides are timed
the same way: wall clock around N back-to-back steps, synchronised before and after; PyTorch's
time includes its optimizer's Python overhead (small against the kernels at these sizes). Target
(H200): >= 0.85 of copy bandwidth at 2^24 and 2^26 elements, and no slower than PyTorch's fused
step.

Gradient clipping: tlrt_clip_grad_norm over the 148 gradient buffers of a GPT-2 small (124 M
elements; one device pass, no host synchronisation) against
torch.nn.utils.clip_grad_norm_(foreach=True) on the same values, with a max_norm that clips
(every buffer rescaled: read twice, written once) and one that does not (read once); reported with
the nominal bytes and the relative difference of the norms.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/optim.py [--out FILE] [--iters N]
      [--sizes 1048576,16777216,67108864]
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
    ap.add_argument("--sizes", default="1048576,16777216,67108864")
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

    common.header(emit, "Fused optimizer steps on the GPU against PyTorch", rt,
                  common.gpu_setup(torch), common.copy_line(copy_bw),
                  common.timing_line(args.iters, 3, "steps") + "; bytes = nominal minimum")
    emit("| op | n | bytes | ours ms | GB/s | of copy BW | torch ms | torch variant | ours/torch "
         "| max diff / max abs p |")
    emit("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")

    g = torch.Generator(device="cuda").manual_seed(11)

    def up(t):
        return common.upload(rt, dev, t)

    def down(b, n):
        return torch.from_numpy(b.to_numpy().reshape(n)).to("cuda")

    def make_torch_opt(kind, p, hp):
        variants = [("fused", dict(fused=True)), ("foreach", dict(foreach=True))]
        for name, kw in variants:
            try:
                if kind == "adam":
                    o = torch.optim.Adam([p], lr=hp["lr"], betas=(0.9, 0.999), eps=1e-8,
                                         weight_decay=hp["wd"], **kw)
                elif kind == "adamw":
                    o = torch.optim.AdamW([p], lr=hp["lr"], betas=(0.9, 0.999), eps=1e-8,
                                          weight_decay=hp["wd"], **kw)
                else:
                    o = torch.optim.SGD([p], lr=hp["lr"], momentum=hp["mom"],
                                        nesterov=hp["nesterov"], **kw)
                return o, name
            except (RuntimeError, TypeError, ValueError):
                continue
        raise RuntimeError(f"no usable torch optimizer for {kind}")

    cases = [
        ("adam", dict(lr=1e-3, wd=0.0), 28),
        ("adamw", dict(lr=1e-3, wd=1e-2), 28),
        ("sgd", dict(lr=1e-2, mom=0.0, nesterov=False), 12),
        ("sgd momentum", dict(lr=1e-2, mom=0.9, nesterov=False), 20),
        ("sgd nesterov", dict(lr=1e-2, mom=0.9, nesterov=True), 20),
    ]
    for n in (int(s) for s in args.sizes.split(",")):
        p0 = torch.randn(n, device="cuda", generator=g)
        grad = torch.randn(n, device="cuda", generator=g) * 1e-2
        bg = up(grad)
        for name, hp, per in cases:
            kind = name.split()[0]
            # ours
            bp = up(p0)
            st1 = rt.Buffer.zeros(n, dev)
            st2 = rt.Buffer.zeros(n, dev)
            step = [0]
            if kind in ("adam", "adamw"):
                def call():
                    step[0] += 1
                    s = lib.tlrt_adam_step(bp.handle, bg.handle, st1.handle, st2.handle, step[0],
                                           hp["lr"], 0.9, 0.999, 1e-8, hp["wd"], kind == "adamw")
                    if s != 0:
                        raise RuntimeError(rt.last_error())
            else:
                def call():
                    step[0] += 1
                    s = lib.tlrt_sgd_step(bp.handle, bg.handle,
                                          st1.handle if hp["mom"] else None, step[0], hp["lr"],
                                          hp["mom"], 0.0, 0.0, hp["nesterov"])
                    if s != 0:
                        raise RuntimeError(rt.last_error())
            t_ours = wall(call, osync)
            # PyTorch, the same number of steps from the same start
            tp = p0.clone().requires_grad_(True)
            tp.grad = grad.clone()
            opt, variant = make_torch_opt(kind, tp, hp)
            t_ref = wall(opt.step, tsync)
            ours_p = down(bp, n)
            diff = (ours_p - tp.detach()).abs().max().item() / tp.detach().abs().max().item()
            gbs = per * n / t_ours / 1e9
            emit(f"| {name} | {n} | {per * n} | {t_ours*1e3:.3f} | {gbs:.0f} | "
                 f"{gbs/copy_bw:.2f} | {t_ref*1e3:.3f} | {variant} | {t_ours/t_ref:.2f} | "
                 f"{diff:.2e} |")
            for b in (bp, st1, st2):
                b.free()
            del tp, opt
        bg.free()
        del p0, grad
        torch.cuda.empty_cache()
    clip_bench(rt, torch, dev, emit, wall, tsync, osync, copy_bw, g)
    emit.write(args.out)
    return 0


def gpt2_sizes():
    """The parameter sizes of GPT-2 small (148 tensors): embeddings, 12 blocks, final norm."""
    s = [50257 * 768, 1024 * 768]
    for _ in range(12):
        s += [768, 768, 768 * 2304, 2304, 768 * 768, 768, 768, 768, 768 * 3072, 3072,
              3072 * 768, 768]
    return s + [768, 768]


def clip_bench(rt, torch, dev, emit, wall, tsync, osync, copy_bw, g):
    lib = rt.lib
    ctypes = rt.ctypes
    sizes = gpt2_sizes()
    total = sum(sizes)
    emit("")
    emit("| clip_grad_norm | buffers | elements | bytes | ours ms | GB/s | of copy BW | torch ms "
         "(foreach) | ours/torch | norm rel diff |")
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    grads = [torch.randn(n, device="cuda", generator=g) * 1e-3 for n in sizes]
    ref_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in grads]))
    for label, max_norm in (("clips", float(ref_norm) * 1e-3), ("no clip", 1e30)):
        bufs = [common.upload(rt, dev, t) for t in grads]
        arr = (ctypes.c_void_p * len(bufs))(*[b.handle for b in bufs])
        out = ctypes.c_void_p()

        def call():
            s = lib.tlrt_clip_grad_norm(len(bufs), arr, max_norm, ctypes.byref(out))
            if s != 0:
                raise RuntimeError(rt.last_error())
            lib.tlrt_buffer_free(out)
        # The norm of the first call (before any clipping) against PyTorch's.
        s = lib.tlrt_clip_grad_norm(len(bufs), arr, max_norm, ctypes.byref(out))
        if s != 0:
            raise RuntimeError(rt.last_error())
        nb = rt.Buffer(out.value)
        ours_norm = nb.to_list()[0]
        nb.free()
        t_ours = wall(call, osync)
        tgrads = [t.clone() for t in grads]
        params = [torch.nn.Parameter(torch.empty(0, device="cuda")) for _ in tgrads]
        for p, t in zip(params, tgrads):
            p.grad = t
        t_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True))
        t_ref = wall(lambda: torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True), tsync)
        per = 12 if label == "clips" else 4
        gbs = per * total / t_ours / 1e9
        emit(f"| {label} | {len(sizes)} | {total} | {per * total} | {t_ours*1e3:.3f} | {gbs:.0f} | "
             f"{gbs/copy_bw:.2f} | {t_ref*1e3:.3f} | {t_ours/t_ref:.2f} | "
             f"{abs(ours_norm - t_norm) / t_norm:.1e} |")
        for b in bufs:
            b.free()
        del params, tgrads
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
