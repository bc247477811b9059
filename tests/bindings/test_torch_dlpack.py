#!/usr/bin/env python3
"""Suite 'bindings', test 'torch_dlpack': DLPack exchange with PyTorch (and CuPy when importable)
on a CUDA device (abi/tlrt_dlpack.h through bindings/python/torchlean_rt/). Exit 0 pass, 1 fail,
77 skip: skipped unless torch with CUDA is importable and the library has a usable CUDA device.

Checks: a torch CUDA tensor imported without a copy (the buffer's payload is the tensor's
data_ptr()); an op reads it; torch's in-place write after the import is seen (same memory); the
buffer outlives the torch tensor's Python object; our buffer exported to torch (torch.from_dlpack)
is a view of the payload (same data_ptr), ordered after our queued work through the stream
argument; int64 both ways; a 1 GiB tensor round trip costs microseconds (no copy); strided and
float64 tensors are refused with TLRT_ERR_UNSUPPORTED. Timings go to stdout.
"""
import gc
import os
import sys
import time

if len(sys.argv) > 1 and os.path.isfile(os.path.join(sys.argv[1], "torchlean_rt", "__init__.py")):
    sys.path.insert(0, sys.argv[1])


def skip(why):
    print(f"torch_dlpack: skipped ({why})")
    sys.exit(77)


if os.environ.get("TLRT_UNDER_VALGRIND"):
    skip("under valgrind")
try:
    import torch
except ImportError:
    skip("torch is not importable")
if not torch.cuda.is_available():
    skip("torch has no CUDA device")
import torchlean_rt as rt  # noqa: E402

if rt.runtime_status() != rt.TLRT_RUNTIME_CUDA_READY:
    skip("the library has no usable CUDA device")

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAIL:", what)


def payload_ptr(buf):
    """The buffer's payload address, through the DLPack tensor it exports."""
    t = torch.from_dlpack(buf)
    return t.data_ptr()


dev = rt.cuda(0)
torch.cuda.set_device(0)

# torch -> library: no copy.
x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
bx = rt.from_dlpack(x)
check(bx.size == 1 << 20 and bx.device == dev, "imported size and device")
check(payload_ptr(bx) == x.data_ptr(), "the buffer's payload is the torch tensor's memory")
y = rt.scale(bx, 2.0)
check(torch.equal(torch.from_dlpack(y), x * 2), "an op reads the imported tensor")
x[0] = 123.0  # a write by torch, seen through the buffer (same memory)
torch.cuda.synchronize()
check(bx.to_list()[0] == 123.0, "torch's write is visible through the buffer")
ptr = x.data_ptr()
del x
gc.collect()
check(bx.to_list()[5] == 5.0, "the buffer keeps torch's storage alive")

# Freeing an imported buffer hands the memory back to torch only after our queued work: our op is
# held behind a torch kernel on a side stream, the buffer and the tensor are dropped, and torch at
# once refills a tensor of the same size on its default stream (its caching allocator hands back
# the same block). Without the wait the refill would land before our op read the memory.
side = torch.cuda.Stream()
src = torch.full((1 << 20,), 1.0, device="cuda")
torch.cuda.synchronize()
bsrc = rt.from_dlpack(src)
with rt.use_stream(dev, side):
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s or more
    held = rt.scale(bsrc, 2.0)  # queued on `side`, behind the sleep
src_ptr = src.data_ptr()
del src
bsrc.free()  # waits for `held` before torch gets the block back
refill = torch.full((1 << 20,), 7.0, device="cuda")
check(refill.data_ptr() == src_ptr, "torch reused the block (the check below is meaningful)")
torch.cuda.synchronize()
check(float(torch.from_dlpack(held).max()) == 2.0, "our op read the tensor before torch reused it")
del refill, held

# library -> torch: a view, ordered after our queued work by the stream argument.
big = rt.Buffer.full(1 << 24, 3.0, dev)
z = rt.scale(big, 0.5)  # queued on the library's stream
tz = torch.from_dlpack(z)  # torch passes its current stream: it waits for our work
check(float(tz[-1]) == 1.5 and tz.dtype == torch.float32 and tz.device.type == "cuda",
      "torch reads our result after our queued work")
check(tz.data_ptr() == payload_ptr(z), "torch's tensor is a view of the buffer")
del z
gc.collect()
check(float(tz.sum()) == 1.5 * (1 << 24), "torch's view keeps the buffer alive")

# int64 both ways.
ids = torch.tensor([3, -1, 1 << 40], dtype=torch.int64, device="cuda")
bi = rt.from_dlpack(ids)
check(bi.dtype == "int64" and bi.to_int_list() == [3, -1, 1 << 40], "int64 import")
check(torch.equal(torch.from_dlpack(bi), ids), "int64 export")

# A 1 GiB round trip: no copy, microseconds.
g = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
bg = rt.from_dlpack(g)
back = torch.from_dlpack(bg)
dt = time.perf_counter() - t0
check(back.data_ptr() == g.data_ptr(), "1 GiB round trip: the same device pointer")
print(f"torch_dlpack: 1 GiB round trip torch -> library -> torch in {dt * 1e6:.1f} us")
check(dt < 0.01, f"1 GiB round trip took {dt * 1e3:.2f} ms (a copy?)")

# Refused: strided, float64.
for bad in (torch.arange(8, dtype=torch.float32, device="cuda")[::2],
            torch.zeros(4, dtype=torch.float64, device="cuda")):
    try:
        rt.from_dlpack(bad)
        check(False, f"{bad.dtype} stride {bad.stride()} should be refused")
    except rt.TlrtError as e:
        check(e.name == "TLRT_ERR_UNSUPPORTED", f"refused with {e.name}")

try:
    import cupy
    c = cupy.arange(16, dtype=cupy.float32)
    bc = rt.from_dlpack(c)
    check(payload_ptr(bc) == c.data.ptr, "cupy import shares memory")
    cc = cupy.from_dlpack(rt.scale(bc, 3.0))
    check(float(cc[15]) == 45.0, "cupy reads our export")
    print("torch_dlpack: cupy checked")
except ImportError:
    print("torch_dlpack: cupy not importable, skipped its part")

if FAILED:
    print(f"torch_dlpack: {len(FAILED)} failures")
    sys.exit(1)
print("torch_dlpack: all checks passed")
