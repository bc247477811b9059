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

DEVICE INDEX BUFFERS (second table). The _ibuf entry points take the index list as an int32 /
int64 buffer on the device; here every index buffer (and every data buffer) is a torch CUDA tensor
imported with rt.from_dlpack, zero-copy (which also exercises the interop). Token ids and
positions come from a seeded torch.Generator on the device; nothing crosses to the host.

  op                       case                                    PyTorch reference(s)
  gather_vec_ibuf          n = 2^26, k = 2^26 int64 uniform        torch.gather(v, 0, idx);
                                                                   torch.index_select(v, 0, idx)
  scatter_add_ibuf         x (n = 2^26) + k = 2^24 int64 uniform   x.index_add(0, idx, vals)
  scatter_add_ibuf NULL    NULL x (zeros), the same entries        zeros(n).index_add_(0, idx, vals)
  gather_rows_ibuf         embedding (50000, 1024), 16384 tokens   F.embedding(tokens, table)
  scatter_add_rows_ibuf    NULL, dout (16384, 1024), the tokens    aten.embedding_dense_backward;
                                                                   autograd.grad of F.embedding
  ... skewed               the same, tokens floor(50000 u^4)       aten.embedding_dense_backward
  scatter_add (host list)  the scatter_add_ibuf case, its 2^24     H2D copy of the list alone
                           entries as a host uint64 list           (torch .to('cuda'), pageable;
                                                                   pinned, non_blocking)

Model bytes here count the index buffer too (8 bytes per int64 entry, read once): gathers 4 k cols
read + 4 k cols written + 8 k; scatter-adds 4 rows cols read (not for NULL) + 4 k cols + 8 k read,
4 rows cols written; the device sort's scratch is not counted. "ref det ms" is the reference under
torch.use_deterministic_algorithms(True). The host-list row's reference is the host-to-device copy
of its index list alone (what the _ibuf form saves), and its agreement column compares its result
with the _ibuf result of the same entries (the header: the same bits). The report ends with the
count of index faults (tlrt_index_faults) the rows met: 0 expected.

  python3 bench/index.py --rows index-buffers     # only the second table

--cpu runs the same cases at 1/64 of the sizes on the CPU backend against numpy (np.take,
np.add.at: sequential order, so scatter agreement is up to rounding) to check this script; the
device-index rows then import numpy int64 arrays with rt.from_dlpack, and the references without
a numpy form (autograd, the H2D copies, torch's deterministic mode) print "-".
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
    ap.add_argument("--rows", choices=("all", "host-lists", "index-buffers"), default="all",
                    help="the host-list table, the device index-buffer table, or both")
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

    lists = {"all": "host index lists and index buffers", "host-lists": "host index lists",
             "index-buffers": "index buffers"}[args.rows]
    common.header(emit, f"Index ops (gather / scatter-add with {lists}) against "
                  + ("numpy (CPU smoke check)" if args.cpu else "PyTorch"), rt,
                  f"reference: {ref_name}", common.copy_line(copy_bw), common.timing_line(iters, 3))
    if args.rows != "index-buffers":
        host_list_rows(args, rt, torch, np, dev, emit, wall, copy_bw)
    if args.rows != "host-lists":
        if args.rows == "all":
            emit()
        index_buffer_rows(args, rt, torch, np, dev, emit, wall, copy_bw)
    emit.write(args.out)
    return 0


def _caller(rt, op, cfn, argv, out):
    """call(keep=False): one call of cfn(*argv, &out), its output freed unless keep."""
    def call(keep=False):
        st = cfn(*argv, ctypes.byref(out))
        if st != 0:
            raise RuntimeError(f"{op}: {st} {rt.last_error()}")
        if not keep:
            rt.lib.tlrt_buffer_free(out)
    return call


def host_list_rows(args, rt, torch, np, dev, emit, wall, copy_bw):
    """The first table: the five ops with host index lists (numpy uint64 arrays, raw ctypes)."""
    osync = lambda: rt.synchronize(dev)
    tsync = (lambda: None) if args.cpu else torch.cuda.synchronize
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

        call = _caller(rt, op, cfn, argv, out)

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



def _ibuf_cases(scale):
    """(name, our entry point, rows, cols, k, tokens kind, reference keys)."""
    s = lambda v: max(1, v // scale)
    return [
        ("gather_vec_ibuf", "gather_vec_ibuf", s(2**26), 1, s(2**26), "uniform",
         ("gather", "index_select")),
        ("scatter_add_ibuf", "scatter_add_ibuf", s(2**26), 1, s(2**24), "uniform",
         ("index_add",)),
        ("scatter_add_ibuf NULL", "scatter_add_ibuf_null", s(2**26), 1, s(2**24), "uniform",
         ("zeros_index_add_",)),
        ("gather_rows_ibuf emb", "gather_rows_ibuf", s(50000), 1024, s(16384), "uniform",
         ("embedding",)),
        ("scatter_add_rows_ibuf emb bwd", "scatter_add_rows_ibuf_null", s(50000), 1024, s(16384),
         "uniform", ("embedding_dense_backward", "autograd_embedding")),
        ("scatter_add_rows_ibuf emb bwd skewed", "scatter_add_rows_ibuf_null", s(50000), 1024,
         s(16384), "skewed", ("embedding_dense_backward",)),
        # A GPT's position-embedding backward (context 256, batch 16, d 384): segments of 16.
        ("scatter_add_rows_ibuf pos bwd", "scatter_add_rows_ibuf_null", 256, 384, 4096,
         "positions", ("embedding_dense_backward",)),
        ("scatter_add (host list)", "scatter_add_host", s(2**26), 1, s(2**24), "uniform",
         ("h2d_pageable", "h2d_pinned")),
    ]


_REF_LABELS = {
    "gather": "torch.gather(v, 0, idx)",
    "index_select": "torch.index_select(v, 0, idx)",
    "index_add": "x.index_add(0, idx, vals)",
    "zeros_index_add_": "torch.zeros(n).index_add_(0, idx, vals)",
    "embedding": "F.embedding(tokens, table)",
    "embedding_dense_backward": "aten.embedding_dense_backward(dout, tokens, rows, -1, False)",
    "autograd_embedding": "torch.autograd.grad(F.embedding(tokens, table), table, dout)",
    "h2d_pageable": "H2D of the list: torch.from_numpy(idx).to('cuda') (pageable)",
    "h2d_pinned": "H2D of the list: pinned.to('cuda', non_blocking=True)",
}
_REF_LABELS_CPU = {
    "gather": "np.take(v, idx)",
    "index_select": "v[idx]",
    "index_add": "y = x.copy(); np.add.at(y, idx, vals)",
    "zeros_index_add_": "y = np.zeros(n); np.add.at(y, idx, vals)",
    "embedding": "np.take(table, tokens, axis=0)",
    "embedding_dense_backward": "g = np.zeros((rows, cols)); np.add.at(g, tokens, dout)",
}


def _ibuf_model_bytes(op, rows, cols, k):
    """Nominal bytes of the device-index rows: the index buffer (int64) counted, read once."""
    if op.startswith("gather"):
        return 8 * k * cols + 8 * k
    target = 4 * rows * cols * (1 if op.endswith("_null") else 2)
    return target + 4 * k * cols + 8 * k


def index_buffer_rows(args, rt, torch, np, dev, emit, wall, copy_bw):
    """The second table: the _ibuf entry points with index buffers on the device (torch CUDA
    tensors through DLPack; numpy arrays with --cpu) against PyTorch (numpy), and the host-list
    scatter_add of the same entries against the H2D copy of its list."""
    gpu = not args.cpu
    emit("## Device index buffers (_ibuf entry points)")
    emit()
    emit("Index and data buffers are "
         + ("torch CUDA tensors imported with rt.from_dlpack (zero-copy); entries from a seeded "
            "torch.Generator on the device." if gpu else
            "numpy arrays imported with rt.from_dlpack (zero-copy); entries from a seeded numpy "
            "generator.")
         + " Model bytes count the int64 index buffer once; the host-list row's reference is the "
           "H2D copy of its list, its agreement is against the _ibuf result of the same entries.")
    emit()
    emit("| op | rows x cols, k | model bytes | ours ms (det off) | ours ms (det on) | host ms | "
         "GB/s | of copy BW | reference | ref ms | ref det ms | ours/ref | ours/ref det | "
         "agreement |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    rt.index_faults(dev, reset=True)
    if gpu:
        gen = torch.Generator(device="cuda")
        gen.manual_seed(7)
        draw = _TorchDraw(torch, gen)
    else:
        draw = _NumpyDraw(np)
    results = {}  # (rows, k) -> our scatter_add_ibuf result (numpy), for the host-list row
    for case in _ibuf_cases(1 if gpu else 64):
        _ibuf_row(case, rt, torch, np, dev, emit, wall, copy_bw, draw, results)
        if gpu:
            torch.cuda.empty_cache()
    emit()
    emit(f"- index faults counted by tlrt_index_faults over these rows: "
         f"{rt.index_faults(dev, reset=True)} (0 expected: every entry is in range)")


class _TorchDraw:
    """Seeded inputs on the CUDA device (torch.Generator)."""

    def __init__(self, torch, gen):
        self.torch, self.gen = torch, gen

    def reseed(self, seed):
        self.gen.manual_seed(seed)

    def indices(self, rows, k, kind):
        t = self.torch
        if kind == "skewed":  # floor(rows u^4): hot rows of thousands of entries
            u = t.rand(k, generator=self.gen, device="cuda", dtype=t.float64)
            return t.clamp((rows * u ** 4).long(), max=rows - 1)
        if kind == "positions":  # i % rows: every row k / rows times
            return t.arange(k, device="cuda", dtype=t.int64) % rows
        return t.randint(0, rows, (k,), generator=self.gen, device="cuda", dtype=t.int64)

    def normal(self, n):
        return self.torch.randn(n, generator=self.gen, device="cuda")

    @staticmethod
    def to_numpy(t):
        return t.detach().reshape(-1).cpu().numpy()


class _NumpyDraw:
    """Seeded inputs on the host (numpy), for --cpu."""

    def __init__(self, np):
        self.np, self.rng = np, np.random.default_rng(7)

    def reseed(self, seed):
        self.rng = self.np.random.default_rng(seed)

    def indices(self, rows, k, kind):
        np = self.np
        if kind == "skewed":
            return np.minimum(rows - 1, (rows * self.rng.random(k) ** 4).astype(np.int64))
        if kind == "positions":
            return np.arange(k, dtype=np.int64) % rows
        return self.rng.integers(0, rows, size=k, dtype=np.int64)

    def normal(self, n):
        return self.rng.standard_normal(n, dtype=self.np.float32)

    def to_numpy(self, t):
        return self.np.asarray(t).reshape(-1)


def _ibuf_row(case, rt, torch, np, dev, emit, wall, copy_bw, draw, results):
    """Times one case of _ibuf_cases and emits one line per reference (everything it allocated
    is released on return)."""
    name, op, rows, cols, k, kind, refs = case
    gpu = torch is not None
    osync = lambda: rt.synchronize(dev)
    tsync = torch.cuda.synchronize if gpu else (lambda: None)
    if op.startswith("scatter_add") and "rows" not in op:
        draw.reseed(11)  # the three vector scatter rows share their entries and values
    idx_t = draw.indices(rows, k, kind)
    x_t = draw.normal(rows * cols)
    vals_t = draw.normal(k * cols)
    # Zero-copy imports: the library reads the producer's memory.
    b_idx = rt.from_dlpack(idx_t, device=dev)
    b_x = rt.from_dlpack(x_t, device=dev)
    b_vals = rt.from_dlpack(vals_t, device=dev)
    idx_host = None
    if op == "gather_vec_ibuf":
        cfn, argv = rt.lib.tlrt_gather_vec_ibuf, (b_x.handle, rows, b_idx.handle)
    elif op == "scatter_add_ibuf":
        cfn, argv = rt.lib.tlrt_scatter_add_ibuf, (b_x.handle, b_vals.handle, rows, b_idx.handle)
    elif op == "scatter_add_ibuf_null":
        cfn, argv = rt.lib.tlrt_scatter_add_ibuf, (None, b_vals.handle, rows, b_idx.handle)
    elif op == "gather_rows_ibuf":
        cfn, argv = rt.lib.tlrt_gather_rows_ibuf, (b_x.handle, rows, cols, b_idx.handle)
    elif op == "scatter_add_rows_ibuf_null":
        cfn, argv = rt.lib.tlrt_scatter_add_rows_ibuf, (None, b_vals.handle, rows, cols,
                                                        b_idx.handle)
    else:  # scatter_add_host: the same entries as a host uint64 list
        idx_host = np.ascontiguousarray(draw.to_numpy(idx_t).astype(np.uint64))
        cfn, argv = rt.lib.tlrt_scatter_add, (b_x.handle, b_vals.handle, rows,
                                              idx_host.ctypes.data_as(
                                                  ctypes.POINTER(ctypes.c_uint64)), k)
    out = ctypes.c_void_p()

    call = _caller(rt, op, cfn, argv, out)

    (t_off, h_off), (t_on, _) = common.time_det_off_on(rt, wall, call, osync)
    call(keep=True)
    ours = rt.Buffer(out.value).to_numpy()
    if op == "scatter_add_ibuf":
        results[(rows, k)] = ours

    # The references, on the same tensors / arrays.
    ref_fns = {}
    if gpu:
        F = torch.nn.functional
        x2, d2 = x_t.reshape(rows, cols), vals_t.reshape(k, cols)
        ref_fns["gather"] = lambda: torch.gather(x_t, 0, idx_t)
        ref_fns["index_select"] = lambda: torch.index_select(x_t, 0, idx_t)
        ref_fns["index_add"] = lambda: x_t.index_add(0, idx_t, vals_t)
        ref_fns["zeros_index_add_"] = lambda: torch.zeros(rows, device="cuda").index_add_(
            0, idx_t, vals_t)
        ref_fns["embedding"] = lambda: F.embedding(idx_t, x2)
        ref_fns["embedding_dense_backward"] = lambda: torch.ops.aten.embedding_dense_backward(
            d2, idx_t, rows, -1, False)
        if "autograd_embedding" in refs:
            table = torch.zeros(rows, cols, device="cuda", requires_grad=True)
            emb = F.embedding(idx_t, table)
            ref_fns["autograd_embedding"] = lambda: torch.autograd.grad(
                emb, table, d2, retain_graph=True)[0]
        if idx_host is not None:
            src = torch.from_numpy(idx_host.view(np.int64))
            pinned = src.pin_memory()
            ref_fns["h2d_pageable"] = lambda: src.to("cuda")
            ref_fns["h2d_pinned"] = lambda: pinned.to("cuda", non_blocking=True)
    else:
        x2, d2 = x_t.reshape(rows, cols), vals_t.reshape(k, cols)

        def index_add(base):
            y = base.copy()
            np.add.at(y, idx_t, vals_t)
            return y

        def emb_bwd():
            g = np.zeros((rows, cols), np.float32)
            np.add.at(g, idx_t, d2)
            return g
        ref_fns["gather"] = lambda: np.take(x_t, idx_t)
        ref_fns["index_select"] = lambda: x_t[idx_t]
        ref_fns["index_add"] = lambda: index_add(x_t)
        ref_fns["zeros_index_add_"] = lambda: index_add(np.zeros(rows, np.float32))
        ref_fns["embedding"] = lambda: np.take(x2, idx_t, axis=0)
        ref_fns["embedding_dense_backward"] = emb_bwd

    agree = "-"
    if idx_host is not None:  # the host list's result against the _ibuf one: the same bits
        same = results.get((rows, k))
        if same is not None:
            if same.tobytes() == ours.tobytes():
                agree = "= ibuf"
            else:
                d = float(np.max(np.abs(ours.astype(np.float64) - same)))
                agree = f"{d:.1e} vs ibuf"
    nbytes = _ibuf_model_bytes(op, rows, cols, k)
    gbs = nbytes / t_off / 1e9
    fmt = lambda t: f"{t * 1e3:.3f}" if t else "-"
    ratio = lambda t: f"{t_off / t:.2f}" if t else "-"
    for ref in refs:
        label = (_REF_LABELS if gpu else _REF_LABELS_CPU).get(ref, _REF_LABELS[ref])
        fn = ref_fns.get(ref)
        t_ref = t_det = None
        if fn is not None:
            t_ref = wall(fn, tsync)[0]
            if gpu:
                torch.use_deterministic_algorithms(True)
                try:
                    t_det = wall(fn, tsync)[0]
                except RuntimeError:  # no deterministic implementation
                    t_det = None
                finally:
                    torch.use_deterministic_algorithms(False)
            if idx_host is None:
                r = draw.to_numpy(fn()).astype(np.float64)
                top = float(np.max(np.abs(r))) if r.size else 0.0
                err = float(np.max(np.abs(ours.astype(np.float64) - r))) if r.size else 0.0
                agree = f"{err / top if top else err:.1e}"
        elif idx_host is None:
            agree = "-"
        emit(f"| {name} | {rows} x {cols}, {k} | {nbytes} | {t_off * 1e3:.3f} | "
             f"{t_on * 1e3:.3f} | {h_off * 1e3:.3f} | {gbs:.0f} | {gbs / copy_bw:.2f} | "
             f"{label} | {fmt(t_ref)} | {fmt(t_det)} | {ratio(t_ref)} | {ratio(t_det)} | "
             f"{agree} |")

if __name__ == "__main__":
    sys.exit(main())
