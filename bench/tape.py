"""Autograd-tape benchmark on the GPU against PyTorch autograd in the same process.

One training step of an MLP (batch B, widths D -> H -> H -> C, gelu, layer norm, cross entropy):
record leaves + forward on a CUDA tlrt_tape, tlrt_tape_backward, read the four weight gradients,
tlrt_tape_reset; against the same step in PyTorch (forward, loss.backward(), grads read, zero_grad).
Reported per shape: our time per step (wall clock around N back-to-back steps, synchronised before
and after), PyTorch's, the ratio, and the host time per recorded node (the tape's overhead on top
of the ops: at small shapes the step is launch-bound, DESIGN section 3 puts a launch at ~3 us).

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/tape.py [--iters N] [--shapes B:D:H:C,..]
"""
import argparse
import ctypes as C
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--shapes", default="64:256:512:10,1024:1024:4096:1000,8192:2048:8192:1000")
    ap.add_argument("--out", help="also write the result lines to this markdown file")
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    emit = common.Report()  # the result lines (the markdown file is written below)
    timed = common.wall_timer(args.iters, 3)
    lib = rt.lib
    dev = C.c_uint32((1 << 16) | 0)  # TLRT_DEVICE_CUDA(0)
    u64, P = C.c_uint64, C.c_void_p
    lib.tlrt_tape_new.argtypes = [C.c_uint32, C.POINTER(P)]
    lib.tlrt_tape_free.argtypes = [P]
    lib.tlrt_tape_reset.argtypes = [P]
    lib.tlrt_tape_leaf.argtypes = [P, P, C.POINTER(u64), C.c_uint32, C.c_bool, C.POINTER(u64)]
    for f in ("tlrt_tape_gelu",):
        getattr(lib, f).argtypes = [P, u64, C.POINTER(u64)]
    lib.tlrt_tape_linear.argtypes = [P, u64, u64, u64, C.POINTER(u64)]
    lib.tlrt_tape_layer_norm.argtypes = [P, u64, u64, u64, C.c_double, C.POINTER(u64)]
    lib.tlrt_tape_cross_entropy.argtypes = [P, u64, C.POINTER(u64), C.POINTER(u64)]
    lib.tlrt_tape_backward.argtypes = [P, u64]
    lib.tlrt_tape_grad.argtypes = [P, u64, C.POINTER(P)]
    lib.tlrt_tape_node_count.argtypes = [P, C.POINTER(u64)]
    lib.tlrt_buffer_from_f32.argtypes = [C.c_uint32, P, u64, C.POINTER(P)]
    lib.tlrt_buffer_free.argtypes = [P]
    lib.tlrt_synchronize.argtypes = [C.c_uint32]

    def ok(s):
        if s != 0:
            raise RuntimeError(f"status {s}: {lib.tlrt_last_error()!r}")

    def upload(t):
        a = t.detach().float().cpu().contiguous()
        out = P()
        ok(lib.tlrt_buffer_from_f32(dev, C.c_void_p(a.data_ptr()), a.numel(), C.byref(out)))
        return out

    for shape in args.shapes.split(","):
        B, D, H, K = map(int, shape.split(":"))
        g = torch.Generator().manual_seed(0)
        x = torch.randn(B, D, generator=g)
        labels = torch.randint(0, K, (B,), generator=g)
        ws = [torch.randn(H, D, generator=g) * D ** -0.5, torch.zeros(H), torch.ones(H), torch.zeros(H),
              torch.randn(K, H, generator=g) * H ** -0.5, torch.zeros(K)]
        bufs = [upload(w) for w in ws]
        xb = upload(x)
        lab = (u64 * B)(*labels.tolist())
        tape = P()
        ok(lib.tlrt_tape_new(dev, C.byref(tape)))
        nodes = u64(0)

        def step():
            ids = []
            for buf, w in zip([xb] + bufs, [x] + ws):
                dims = (u64 * w.dim())(*w.shape)
                i = u64()
                ok(lib.tlrt_tape_leaf(tape, buf, dims, w.dim(), buf is not xb, C.byref(i)))
                ids.append(i.value)
            h, a, n, z, loss = (u64() for _ in range(5))
            ok(lib.tlrt_tape_linear(tape, ids[0], ids[1], ids[2], C.byref(h)))
            ok(lib.tlrt_tape_gelu(tape, h.value, C.byref(a)))
            ok(lib.tlrt_tape_layer_norm(tape, a.value, ids[3], ids[4], 1e-5, C.byref(n)))
            ok(lib.tlrt_tape_linear(tape, n.value, ids[5], ids[6], C.byref(z)))
            ok(lib.tlrt_tape_cross_entropy(tape, z.value, lab, C.byref(loss)))
            ok(lib.tlrt_tape_backward(tape, loss.value))
            for i in ids[1:]:
                gb = P()
                ok(lib.tlrt_tape_grad(tape, i, C.byref(gb)))
                lib.tlrt_buffer_free(gb)
            ok(lib.tlrt_tape_node_count(tape, C.byref(nodes)))
            ok(lib.tlrt_tape_reset(tape))

        tx, tl = x.cuda(), labels.cuda()
        tw = [w.cuda().requires_grad_(True) for w in ws]

        def tstep():
            h = torch.nn.functional.linear(tx, tw[0], tw[1])
            n = torch.nn.functional.layer_norm(torch.nn.functional.gelu(h, approximate="tanh"), (H,),
                                               tw[2], tw[3], 1e-5)
            loss = torch.nn.functional.cross_entropy(torch.nn.functional.linear(n, tw[4], tw[5]), tl)
            loss.backward()
            for w in tw:
                w.grad = None

        ours = timed(step, lambda: ok(lib.tlrt_synchronize(dev)))
        theirs = timed(tstep, torch.cuda.synchronize)
        line = (f"MLP B={B} {D}->{H}->{K}: tape {ours * 1e6:9.1f} us/step ({nodes.value} nodes, "
                f"{ours * 1e6 / max(nodes.value, 1):6.1f} us/node), torch {theirs * 1e6:9.1f} us/step, "
                f"ratio {ours / theirs:5.2f}")
        emit(line)
        lib.tlrt_tape_free(tape)
        for b in bufs + [xb]:
            lib.tlrt_buffer_free(b)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Autograd tape: one MLP training step on the GPU against PyTorch autograd\n\n")
            f.write(f"- GPU: {torch.cuda.get_device_name(0)}; PyTorch {torch.__version__}; "
                    f"{args.iters} timed steps after 3 warm-ups\n\n")
            f.write("".join(f"- {l}\n" for l in emit.lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
