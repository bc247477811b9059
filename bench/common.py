"""The pieces every benchmark script of bench/ shares.

Each script is run as `python3 bench/NAME.py` from any working directory; it puts its own folder
first on sys.path before `import common` (Python does so too, except under -P / PYTHONSAFEPATH).

  load_gpu()             the Python binding (bindings/python) and torch with CUDA, or the reason
                         why not printed (the script then exits with SKIP, 77)
  Report                 emit(line) prints a line of the markdown report and keeps it;
                         write(path) saves the kept lines (--out)
  wall_timer(...)        wall(fn, sync): warm-ups, then the wall clock around back-to-back calls
  copy_bandwidth(...)    the device-to-device copy bandwidth (torch dst.copy_(src), 2^28 floats)
  sgemm_peak(...)        the float32 matmul peak (torch.matmul 8192^3; the caller sets TF32)
  header(...)            the report's opening lines (title, date, GPU, PyTorch, library build)
  upload, freeing_call, time_det_off_on: small helpers of the timing loops
"""
import datetime
import os
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Exit status of a benchmark that cannot run here (no torch, no CUDA device, CPU-only library).
SKIP = 77


def load_rt():
    """Import and return the torchlean_rt binding from bindings/python (the library it loads is
    TORCHLEAN_RT_LIB's)."""
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    import torchlean_rt
    return torchlean_rt


def import_torch_cuda(rt):
    """torch, when it is importable and both it and the library have a CUDA device; otherwise
    None, after printing why (the caller returns SKIP)."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing to compare with")
        return None
    if not (torch.cuda.is_available() and rt.cuda_available()):
        print("no CUDA device (or a CPU-only library): skipped")
        return None
    return torch


def load_gpu():
    """(rt, torch) for a GPU comparison; torch is None when it cannot run here (see
    import_torch_cuda)."""
    rt = load_rt()
    return rt, import_torch_cuda(rt)


class Report:
    """The report's lines: calling it prints a line (flushed) and keeps it; write(path) saves
    every kept line to path (nothing when path is empty: --out not given)."""

    def __init__(self):
        self.lines = []

    def __call__(self, s=""):
        self.lines.append(s)
        print(s, flush=True)

    def write(self, path):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(self.lines) + "\n")


def wall_timer(iters, warmup, host=False):
    """wall(fn, sync) -> seconds per call: `warmup` untimed calls and sync(), then the wall clock
    around `iters` back-to-back calls and the sync() after them.

    host=True: wall returns (seconds per call, host seconds per call), the second read before the
    final sync() (the time until the last call returned)."""

    def wall(fn, sync):
        for _ in range(warmup):
            fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t1 = time.perf_counter() if host else None
        sync()
        t = (time.perf_counter() - t0) / iters
        return (t, (t1 - t0) / iters) if host else t

    return wall


def copy_bandwidth(torch, wall, log2n=28):
    """The device-to-device copy bandwidth in GB/s: torch dst.copy_(src) on 2^log2n float32,
    bytes counted as read + write, timed by wall(fn, sync) (a wall_timer's, or any timer of that
    signature returning seconds per call). The two GiB are released on return."""
    src = torch.empty(2 ** log2n, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / wall(lambda: dst.copy_(src), torch.cuda.synchronize) / 1e9


def sgemm_peak(torch, wall, n=8192):
    """The measured matmul peak in FLOP/s: torch.matmul on two n x n float32 matrices (2 n^3
    FLOPs), timed by wall(fn, sync). TF32 is whatever the caller set (the scripts turn it off)."""
    a = torch.randn(n, n, device="cuda")
    b = torch.randn_like(a)
    return 2 * n ** 3 / wall(lambda: torch.matmul(a, b), torch.cuda.synchronize)


# The timing-method item's tail in the scripts that count nominal bytes.
NOMINAL_BYTES = "bytes = nominal minimum (inputs read once, outputs written once)"


def gpu_setup(torch):
    """'GPU: <name>; PyTorch <version>', the setup named on the report's date line."""
    return f"GPU: {torch.cuda.get_device_name(0)}; PyTorch {torch.__version__}"


def copy_line(copy_bw):
    """The header item of the copy bandwidth (GB/s)."""
    return f"copy bandwidth (read + write, same timing method): {copy_bw:.0f} GB/s"


def timing_line(iters, warmup, what="calls"):
    """The header item of the timing method: '<iters> timed <what> after <warmup> warm-ups; wall
    clock around back-to-back <what>'."""
    return (f"{iters} timed {what} after {warmup} warm-ups; wall clock around back-to-back "
            f"{what}")


def header(emit, title, rt, setup, *items):
    """The report's opening: '# title', a blank line, '- date: <today>; <setup>', '- library:
    <build info>', '- <item>' for each item, and a blank line."""
    emit(f"# {title}")
    emit()
    emit(f"- date: {datetime.date.today().isoformat()}; {setup}")
    emit(f"- library: {rt.build_info()}")
    for item in items:
        emit(f"- {item}")
    emit()


def upload(rt, dev, t):
    """A library buffer on dev holding the values of the torch tensor t (flattened)."""
    return rt.Buffer.from_buffer(t.detach().contiguous().flatten().cpu().numpy(), dev)


def freeing_call(rt, fname, inputs, scalars=(), n_out=1):
    """A zero-argument callable for the timing loops: tlrt_<fname>(input handles..., scalars...,
    &out x n_out), then frees the outputs (stream-ordered). A non-zero status raises
    RuntimeError."""
    cfn = getattr(rt.lib, "tlrt_" + fname)
    ctypes = rt.ctypes
    outs = [ctypes.c_void_p() for _ in range(n_out)]
    argv = [b.handle for b in inputs] + list(scalars) + [ctypes.byref(o) for o in outs]

    def call():
        st = cfn(*argv)
        if st != 0:
            raise RuntimeError(f"{fname}: {st} {rt.last_error()}")
        for o in outs:
            rt.lib.tlrt_buffer_free(o)
    return call


def time_det_off_on(rt, wall, call, sync):
    """(wall(call, sync) with the determinism switch off, the same with it on); the switch is
    left as it was."""
    prev = rt.lib.tlrt_set_deterministic(False)
    t_off = wall(call, sync)
    rt.lib.tlrt_set_deterministic(True)
    t_on = wall(call, sync)
    rt.lib.tlrt_set_deterministic(prev)
    return t_off, t_on


if __name__ == "__main__":
    # Not a benchmark: --help shows what it holds; a plain run skips (77) like a script that
    # cannot run here, so loops over bench/*.py treat it alike.
    print(__doc__)
    sys.exit(0 if {"-h", "--help"} & set(sys.argv[1:]) else SKIP)
