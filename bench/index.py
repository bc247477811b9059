"""Index benchmark (gather and scatter-add with host index lists) on the GPU against PyTorch.

Times the five ops of abi/tlrt_index.h against PyTorch in the same process on the same values and
index lists:

  op                 case                                          PyTorch reference
  gather_vec         n = 2^26, k = 2^26 random                     torch.gather(v, 0, idx)
  scatter_add        n = 2^26, k = 2^24 random                     x.scatter_add(0, idx, vals)
  gather_rows        embedding (50000, 1024), k = 65536            torch.index_select(m, 0, idx)
                     (65536, 1024), k = 65536
  scatter_add_rows   embedding (50000, 1024), k = 65536 uniform    torch.index_add(m, 0, idx, vals)
                     the same, skewed (rows floor(50000 u^4): hot rows of thousands of entries)
  scatter_add_row    (65536, 1024), one row                        torch.index_add with one index

and reports, per op: the bytes of the model in cuda/index.cu (gathers: 4 k cols read + 4 k cols
written; scatter-adds: 4 rows cols + 4 k cols read, 4 rows cols written; index bytes not
counted), our time, GB/s, the fraction of the measured device-to-device copy bandwidth, PyTorch's
time with its default (atomic, order-dependent) kernels and with torch.use_deterministic_algorithms
(True) ("-" where PyTorch refuses), and the ratios. Ours is deterministic in both modes of the
determinism switch (the header: the order is fixed); both columns are printed to show it.
Timing, both sides: wall clock around N back-to-back calls, synchronised before and after (ours
frees each output right after the call, stream-ordered). "host ms" is the time until the last
of our calls returned, before the final synchronisation, per call: when it is close to "ours ms"
the host (index validation, the scatter plan's sort, the staging copy) is the bottleneck.

  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/index.py [--out FILE] [--iters N]
  TORCHLEAN_RT_LIB=build/libtorchlean_rt.so python3 bench/index.py --cpu   # smoke check, numpy

--cpu runs the same cases at 1/64 of the sizes on the CPU backend against numpy (np.take,
np.add.at: sequential order, so scatter agreement is up to rounding) to check this script.
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def cases(scale):
    """(name, op, rows, cols, k, list kind); rows = n and cols = 1 for the vector ops."""
    s = lambda v: max(1, v // scale)
    return [
        ("gather_vec", "gather_vec", s(2**26), 1, s(2**26), "uniform"),
        ("scatter_add", "scatter_add", s(2**26), 1, s(2**24), "uniform"),
        ("gather_rows emb", "gather_rows", s(50000), 1024, s(65536), "uniform"),
        ("gather_rows", "gather_rows", s(65536), 1024, s(65536), "uniform"),
        ("scatter_add_rows emb", "scatter_add_rows", s(50000), 1024, s(65536), "uniform"),
        ("scatter_add_rows emb skewed", "scatter_add_rows", s(50000), 1024, s(65536), "skewed"),
        ("scatter_add_row", "scatter_add_row", s(65536), 1024, 1, "uniform"),
    ]


def model_bytes(op, rows, cols, k):
    if op.startswith("gather"):
        return 8 * k * cols
    return 4 * (2 * rows + k) * cols


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--cpu", action="store_true", help="smoke check on the CPU backend vs numpy")
    args = ap.parse_args()
    import numpy as np
    rt = common.load_rt()

    iters = args.iters or (3 if args.cpu else 30)
    torch = None
    if not args.cpu:
        torch = common.import_torch_cuda(rt)
        if torch is None:
            return common.SKIP
    dev = rt.CPU if args.cpu else rt.cuda(0)
    emit = common.Report()
    wall = common.wall_timer(iters, 3, host=True)  # (time, host time) per call

    osync = lambda: rt.synchronize(dev)
    if args.cpu:
        tsync = lambda: None
        src = np.ones(2**22, np.float32); dst = np.empty_like(src)
        copy_bw = 2 * src.nbytes / wall(lambda: np.copyto(dst, src), tsync)[0] / 1e9
        del src, dst
        ref_name = f"numpy {np.__version__}"
    else:
        tsync = torch.cuda.synchronize
        copy_bw = common.copy_bandwidth(torch, lambda fn, sync: wall(fn, sync)[0])
        ref_name = f"PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)}"

    common.header(emit, "Index ops (gather / scatter-add with host index lists) against "
                  + ("numpy (CPU smoke check)" if args.cpu else "PyTorch"), rt,
                  f"reference: {ref_name}", common.copy_line(copy_bw), common.timing_line(iters, 3))
    emit("| op | rows x cols, k | model bytes | ours ms (det off) | ours ms (det on) | host ms | "
         "GB/s | of copy BW | ref ms | ref det ms | ours/ref | ours/ref det | agreement |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    rng = np.random.default_rng(7)
    u64p = ctypes.POINTER(ctypes.c_uint64)
    for name, op, rows, cols, k, kind in cases(64 if args.cpu else 1):
        if kind == "skewed":
            idx = np.minimum(rows - 1, (rows * rng.random(k) ** 4).astype(np.uint64))
        else:
            idx = rng.integers(0, rows, size=k, dtype=np.uint64)
        idx = np.ascontiguousarray(idx, dtype=np.uint64)
        ip = idx.ctypes.data_as(u64p)
        x = rng.standard_normal(rows * cols, dtype=np.float32)
        vals = rng.standard_normal((k if op != "scatter_add_row" else 1) * cols, dtype=np.float32)
        bx = rt.Buffer.from_buffer(x, dev)
        bv = rt.Buffer.from_buffer(vals, dev)
        out = ctypes.c_void_p()
        i_row = int(idx[0])
        if op == "gather_vec":
            argv = (bx.handle, rows, ip, k)
        elif op == "scatter_add":
            argv = (bx.handle, bv.handle, rows, ip, k)
        elif op == "gather_rows":
            argv = (bx.handle, rows, cols, ip, k)
        elif op == "scatter_add_row":
            argv = (bx.handle, bv.handle, rows, cols, i_row)
        else:
            argv = (bx.handle, bv.handle, rows, cols, ip, k)
        cfn = getattr(rt.lib, "tlrt_" + op)

        def call(keep=False):
            st = cfn(*argv, ctypes.byref(out))
            if st != 0:
                raise RuntimeError(f"{op}: {st} {rt.last_error()}")
            if not keep:
                rt.lib.tlrt_buffer_free(out)

        (t_off, h_off), (t_on, _) = common.time_det_off_on(rt, wall, call, osync)
        call(keep=True)
        ours = rt.Buffer(out.value).to_numpy()

        # The reference, on the same values.
        t_ref = t_det = None
        if args.cpu:
            xm = x.reshape(rows, cols)
            vm = vals.reshape(-1, cols)
            ii = idx.astype(np.int64)
            if op in ("gather_vec", "gather_rows"):
                ref_fn = lambda: np.take(xm, ii, axis=0)
            elif op == "scatter_add_row":
                def ref_fn():
                    y = xm.copy(); y[i_row] += vm[0]; return y
            else:
                def ref_fn():
                    y = xm.copy(); np.add.at(y, ii, vm); return y
            t_ref = wall(ref_fn, tsync)[0]
            ref = np.asarray(ref_fn()).reshape(-1)
        else:
            tx = torch.from_numpy(x).cuda().reshape(rows, cols)
            tv = torch.from_numpy(vals).cuda().reshape(-1, cols)
            ti = torch.from_numpy(idx.astype(np.int64)).cuda()
            if op == "gather_vec":
                ref_fn = lambda: torch.gather(tx.reshape(-1), 0, ti)
            elif op == "scatter_add":
                ref_fn = lambda: tx.reshape(-1).scatter_add(0, ti, tv.reshape(-1))
            elif op == "gather_rows":
                ref_fn = lambda: torch.index_select(tx, 0, ti)
            elif op == "scatter_add_row":
                ti1 = ti[:1].clone()
                ref_fn = lambda: torch.index_add(tx, 0, ti1, tv)
            else:
                ref_fn = lambda: torch.index_add(tx, 0, ti, tv)
            t_ref = wall(ref_fn, tsync)[0]
            ref = ref_fn().reshape(-1).cpu().numpy()
            torch.use_deterministic_algorithms(True)
            try:
                t_det = wall(ref_fn, tsync)[0]
            except RuntimeError:
                t_det = None
            finally:
                torch.use_deterministic_algorithms(False)
            del tx, tv, ti
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        agree = float(np.max(np.abs(ours.astype(np.float64) - ref))) / scale if scale else 0.0

        nbytes = model_bytes(op, rows, cols, k if op != "scatter_add_row" else 1)
        gbs = nbytes / t_off / 1e9
        det = f"{t_det*1e3:.3f}" if t_det else "-"
        det_ratio = f"{t_off/t_det:.2f}" if t_det else "-"
        emit(f"| {name} | {rows} x {cols}, {k} | {nbytes} | {t_off*1e3:.3f} | {t_on*1e3:.3f} | "
             f"{h_off*1e3:.3f} | {gbs:.0f} | {gbs/copy_bw:.2f} | {t_ref*1e3:.3f} | {det} | "
             f"{t_off/t_ref:.2f} | {det_ratio} | {agree:.1e} |")
        bx.free(); bv.free()
    emit.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
