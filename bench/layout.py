"""Layout benchmark on the GPU against PyTorch in the same process.

Times the ops of abi/tlrt_layout.h on 2^26-element outputs (and the (65536, 1024) / (1024, 65536)
matrices) against the PyTorch expression that materialises the same result: broadcasts against
expand().contiguous(), transposes and permutations against t()/permute().contiguous(),
concatenations against torch.cat, slices against slicing + clone(). Reports the bytes each op must
move (every output element written once, plus every input element read once: a transpose or
permutation 8 bytes per element, a broadcast 4 bytes per output plus its input), achieved GB/s,
the fraction of the measured device-to-device copy bandwidth, the time ratio to PyTorch, and
whether our output equals PyTorch's bit for bit. Both sides are timed the same way: wall clock
around N back-to-back calls (ours each followed by a stream-ordered free of the output),
synchronised before and after.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/layout.py [--out FILE] [--iters N]
      [--only SUBSTRING] [--no-check]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

N26 = 2 ** 26


def u64s(*v):
    return (ctypes.c_uint64 * max(len(v), 1))(*v)


def u32s(*v):
    return (ctypes.c_uint32 * max(len(v), 1))(*v)


def cases(torch):
    """(name, shape label, input shapes, our call, torch reference, output elements, bytes).

    our call: f(lib, handles, out_ptr) -> status; torch reference: f(tensors) -> tensor."""
    out = []

    def add(name, label, shapes, ours, ref, n_out, n_read=None):
        # n_read: the input elements the op reads (default: all of them; a slice reads n_out).
        n_in = sum(_prod(s) for s in shapes) if n_read is None else n_read
        out.append((name, label, shapes, ours, ref, n_out, 4 * (n_in + n_out)))

    # Broadcasts.
    for rows, cols in [(65536, 1024), (1024, 65536), (65537, 1023)]:
        add("broadcast_vec_to_rows", f"{rows}x{cols}", [(cols,)],
            lambda L, h, o, r=rows, c=cols: L.tlrt_broadcast_vec_to_rows(h[0], r, c, o),
            lambda t, r=rows, c=cols: t[0].expand(r, c).contiguous(), rows * cols)
        add("broadcast_vec_to_cols", f"{rows}x{cols}", [(rows,)],
            lambda L, h, o, r=rows, c=cols: L.tlrt_broadcast_vec_to_cols(h[0], r, c, o),
            lambda t, r=rows, c=cols: t[0][:, None].expand(r, c).contiguous(), rows * cols)
    add("broadcast_to scalar", f"() -> {N26}", [(1,)],
        lambda L, h, o: L.tlrt_broadcast_to(h[0], None, 0, u64s(N26), 1, u32s(0), o),
        lambda t: t[0].reshape(()).expand(N26).contiguous(), N26)
    add("broadcast_to", "256x1x1024 -> 256x256x1024", [(256, 1, 1024)],
        lambda L, h, o: L.tlrt_broadcast_to(h[0], u64s(256, 1, 1024), 3, u64s(256, 256, 1024), 3,
                                            u32s(1, 2, 3), o),
        lambda t: t[0].expand(256, 256, 1024).contiguous(), N26)
    add("broadcast_to", "1x256x1024 -> 256x256x1024", [(1, 256, 1024)],
        lambda L, h, o: L.tlrt_broadcast_to(h[0], u64s(1, 256, 1024), 3, u64s(256, 256, 1024), 3,
                                            u32s(1, 2, 3), o),
        lambda t: t[0].expand(256, 256, 1024).contiguous(), N26)
    add("broadcast_to (permuting)", "1024x64 -> 64x1024x1024 map (2,0,1)", [(1024, 64)],
        lambda L, h, o: L.tlrt_broadcast_to(h[0], u64s(1024, 64), 2, u64s(64, 1024, 1024), 3,
                                            u32s(2, 0, 1), o),
        lambda t: t[0].t()[:, None, :].expand(64, 1024, 1024).contiguous(), N26)
    # Transposes and permutations.
    for rows, cols in [(65536, 1024), (1024, 65536), (8191, 8193), (N26 // 8, 8), (8, N26 // 8)]:
        add("transpose2d", f"{rows}x{cols}", [(rows, cols)],
            lambda L, h, o, r=rows, c=cols: L.tlrt_transpose2d(h[0], r, c, o),
            lambda t: t[0].t().contiguous(), rows * cols)
    for a, b, c in [(64, 1024, 1024), (1024, 64, 1024), (1024, 1024, 64), (4096, 4096, 4)]:
        for v, perm in [("bca", (1, 2, 0)), ("cab", (2, 0, 1)), ("acb", (0, 2, 1))]:
            add(f"permute3d_{v}", f"{a}x{b}x{c}", [(a, b, c)],
                lambda L, h, o, a=a, b=b, c=c, v=v: getattr(L, f"tlrt_permute3d_{v}")(h[0], a, b, c, o),
                lambda t, p=perm: t[0].permute(*p).contiguous(), a * b * c)
    for dims, depth in [((64, 1024, 1024), 0), ((16, 512, 512, 16), 1), ((64, 512, 256, 8), 1),
                        ((64, 512, 512, 4), 1), ((32, 1024, 1024, 2), 1)]:
        perm = list(range(len(dims)))
        perm[depth], perm[depth + 1] = perm[depth + 1], perm[depth]
        add("swap_adjacent_at_depth", f"{'x'.join(map(str, dims))} depth {depth}", [dims],
            lambda L, h, o, d=dims, k=depth: L.tlrt_swap_adjacent_at_depth(h[0], u64s(*d), len(d), k, o),
            lambda t, p=perm: t[0].permute(*p).contiguous(), _prod(dims))
    for dims, perm in [((64, 64, 64, 256), (3, 1, 2, 0)), ((64, 64, 64, 256), (2, 3, 0, 1)),
                       ((8, 8, 8, 8, 8, 8, 8, 32), (7, 6, 5, 4, 3, 2, 1, 0))]:
        add("permute", f"{'x'.join(map(str, dims))} by {perm}", [dims],
            lambda L, h, o, d=dims, p=perm: L.tlrt_permute(h[0], u64s(*d), len(d), u32s(*p), o),
            lambda t, p=perm: t[0].permute(*p).contiguous(), _prod(dims))
    # Concatenations and slices.
    half = N26 // 2
    add("concat1d", f"{half} + {half}", [(half,), (half,)],
        lambda L, h, o: L.tlrt_concat1d(h[0], h[1], half, half, o),
        lambda t: torch.cat([t[0], t[1]]), N26)
    add("concat_axis0", "(32768 + 32768) x 1024", [(32768, 1024), (32768, 1024)],
        lambda L, h, o: L.tlrt_concat_axis0(h[0], h[1], 32768, 32768, 1024, o),
        lambda t: torch.cat([t[0], t[1]], 0), N26)
    add("slice1d", f"{N26} [3 : {N26 - 4})", [(N26,)],
        lambda L, h, o: L.tlrt_slice1d(h[0], N26, 3, N26 - 7, o),
        lambda t: t[0][3:N26 - 4].clone(), N26 - 7, N26 - 7)
    add("slice_axis0", "65536x1024 rows [1 : 65535)", [(65536, 1024)],
        lambda L, h, o: L.tlrt_slice_axis0(h[0], 65536, 1024, 1, 65534, o),
        lambda t: t[0][1:65535].clone(), 65534 * 1024, 65534 * 1024)
    return out


def _prod(s):
    p = 1
    for v in s:
        p *= v
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--only", help="run the cases whose name contains this substring")
    ap.add_argument("--no-check", action="store_true", help="skip the bitwise agreement column")
    args = ap.parse_args()
    rt, torch = common.load_gpu()
    if torch is None:
        return common.SKIP
    dev = rt.cuda(0)
    emit = common.Report()
    wall = common.wall_timer(args.iters, 3)

    tsync = torch.cuda.synchronize
    copy_bw = common.copy_bandwidth(torch, wall)

    common.header(emit, "Layout ops on the GPU against PyTorch", rt, common.gpu_setup(torch),
                  common.copy_line(copy_bw), common.timing_line(args.iters, 3),
                  "bytes: every output element written once + every input element read once (a "
                  "broadcast's repeated reads of its small input are not counted)")
    emit("| op | shape | bytes | ours ms | GB/s | of copy BW | torch ms | torch GB/s | "
         "ours/torch | bitwise equal |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")

    g = torch.Generator(device="cuda").manual_seed(7)
    L = rt.lib
    for name, label, shapes, ours, ref, n_out, nbytes in cases(torch):
        if args.only and args.only not in name:
            continue
        ts = [torch.randn(*s, device="cuda", generator=g) for s in shapes]
        bufs = [rt.Buffer.from_buffer(t.flatten().cpu().numpy(), dev) for t in ts]
        handles = [b.handle for b in bufs]
        out = ctypes.c_void_p()

        def call():
            st = ours(L, handles, ctypes.byref(out))
            if st != 0:
                raise RuntimeError(f"{name} {label}: status {st}: {L.tlrt_last_error()}")
            L.tlrt_buffer_free(out)

        t_ours = wall(call, lambda: rt.synchronize(dev))
        t_ref = wall(lambda: ref(ts), tsync)
        equal = "-"
        if not args.no_check:
            st = ours(L, handles, ctypes.byref(out))
            if st != 0:
                raise RuntimeError(f"{name} {label}: status {st}: {L.tlrt_last_error()}")
            mine = rt.Buffer(out.value)
            want = ref(ts).flatten().cpu().numpy()
            equal = "yes" if bytes(mine.to_array()) == want.tobytes() else "NO"
            mine.free()
            del want
        gbs = nbytes / t_ours / 1e9
        emit(f"| {name} | {label} | {nbytes} | {t_ours*1e3:.3f} | {gbs:.0f} | {gbs/copy_bw:.2f} | "
             f"{t_ref*1e3:.3f} | {nbytes / t_ref / 1e9:.0f} | {t_ours/t_ref:.2f} | {equal} |")
        for b in bufs:
            b.free()
        del ts
        torch.cuda.empty_cache()
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
