#!/usr/bin/env python3
"""Suite 'bindings', test 'safetensors_interop': our safetensors files (abi/tlrt_checkpoint.h,
through bindings/python/torchlean_rt/) against the reference implementation, Hugging Face's
`safetensors` package. Exit 0 pass, 1 fail, 77 skip: skipped when `safetensors` (or numpy) is
not importable, and under valgrind; the torch part is skipped alone when torch is not importable.

Checks, bit for bit:
  - ours -> reference: float32 / int32 / int64 tensors of ranks 0 to 4 (empty ones, NaN payloads,
    infinities, signed zeros, subnormals, random bit patterns) and metadata (non-ASCII, escapes)
    written by rt.save_safetensors read back by safetensors.numpy.load_file and safe_open;
  - the same bytes: for the same tensors and at most one metadata entry (the reference orders
    metadata by hash), our file equals safetensors.numpy.save's byte for byte, odd names included;
  - reference -> ours: files of safetensors.numpy.save_file (F32, I32, I64, F16 with all 65536
    bit patterns, F64 with rounding cases, U8 listed but refused) read by rt.SafeTensors /
    rt.load_safetensors: F16 as numpy's exact float16 -> float32, F64 as numpy's round to nearest;
  - torch (when importable): safetensors.torch files with bfloat16, float16, float32, float64 and
    int64 tensors read by ours (bfloat16 exactly as torch's .float()), and ours read by
    safetensors.torch.load_file;
  - CUDA (when a device is usable): the same round trip through a CUDA device.
"""
import os
import sys
import tempfile

if len(sys.argv) > 1 and os.path.isfile(os.path.join(sys.argv[1], "torchlean_rt", "__init__.py")):
    sys.path.insert(0, sys.argv[1])


def skip(why):
    print(f"safetensors_interop: skipped ({why})")
    sys.exit(77)


if os.environ.get("TLRT_UNDER_VALGRIND"):
    skip("under valgrind")
try:
    import numpy as np
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import load_file, save, save_file
except ImportError as e:
    skip(f"{e.name or 'safetensors'} is not importable (pip install safetensors)")
import torchlean_rt as rt  # noqa: E402

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAIL:", what)


def same_bits(a, b):
    """Same dtype, shape and bytes (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def ours(tensors):
    """numpy arrays -> Tensors of the library (copies; float32 / int32 / int64 as they are)."""
    return {k: rt.from_numpy(v) for k, v in tensors.items()}


rng = np.random.default_rng(20260527)
TMP = tempfile.mkdtemp(prefix="tlrt_st_interop_")


def path(name):
    return os.path.join(TMP, name)


# ---- ours -> the reference --------------------------------------------------------------------
edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38,
                 -3.4028235e38, 1.0, -2.5], dtype=np.float32)
weird_nan = np.array([0x7FC12345, 0xFF800001], dtype=np.uint32).view(np.float32)
arrays = {
    "scalar": np.array(3.25, dtype=np.float32),
    "edge": edge,
    "nan.payloads": weird_nan,
    "bits": rng.integers(0, 2**32, size=(3, 5, 2), dtype=np.uint64).astype(np.uint32)
                   .view(np.float32),
    "matrix": rng.standard_normal((7, 9)).astype(np.float32),
    "rank4": rng.standard_normal((2, 1, 3, 2)).astype(np.float32),
    "empty": np.zeros((0,), dtype=np.float32),
    "empty2": np.zeros((3, 0, 2), dtype=np.float32),
    "i32": rng.integers(-2**31, 2**31, size=(4, 4), dtype=np.int64).astype(np.int32),
    "i32.scalar": np.array(-7, dtype=np.int32),
    "i64": np.array([-2**63, 2**63 - 1, 0, -1], dtype=np.int64),
    "i64.empty": np.zeros((2, 0), dtype=np.int64),
}
meta = {"format": "pt", "note": "line\nbreak \"quoted\" \\ é €", "": "empty key"}
p1 = path("ours.safetensors")
rt.save_safetensors(p1, ours(arrays), metadata=meta)
check(not os.path.exists(p1 + ".tmp"), "no .tmp left after a save")
back = load_file(p1)
check(sorted(back) == sorted(arrays), f"reference sees the names {sorted(back)}")
for k, v in arrays.items():
    check(k in back and same_bits(back[k], v), f"reference reads {k!r} bit for bit")
with safe_open(p1, framework="np") as f:
    check(f.metadata() == meta, f"reference reads the metadata: {f.metadata()}")
    check(sorted(f.keys()) == sorted(arrays), "safe_open lists the names")

# A Buffer (not a Tensor) is saved as one axis of its size.
p2 = path("buffers.safetensors")
rt.save_safetensors(p2, {"flat": rt.Buffer.from_list([1.0, 2.0, 3.0]),
                         "idx": rt.Buffer.from_ints([5, -6], "int64")})
back = load_file(p2)
check(same_bits(back["flat"], np.array([1, 2, 3], np.float32)), "a Buffer saved 1-D")
check(same_bits(back["idx"], np.array([5, -6], np.int64)), "an int64 Buffer saved 1-D")

# ---- the same bytes as the reference writer ----------------------------------------------------
for case, (tensors, md) in {
    "mixed": (arrays, {"format": "pt"}),
    "no metadata": ({"b": arrays["matrix"], "a": arrays["i64"], "c": arrays["i32"]}, None),
    "odd names": ({"q\"\\\n\t\x01/é€𝄞": arrays["edge"], "Z": arrays["scalar"],
                   "a.b.c": arrays["empty2"]}, {"k\u00e9": "v\u20ac\n"}),
    "metadata only": ({}, {"framework": "pt"}),
    "nothing": ({}, None),
}.items():
    p = path("same.safetensors")
    rt.save_safetensors(p, ours(tensors), metadata=md)
    with open(p, "rb") as f:
        mine = f.read()
    theirs = save(tensors, metadata=md)
    check(mine == theirs, f"{case}: our bytes equal the reference writer's "
                          f"({len(mine)} / {len(theirs)} bytes)")

# ---- the reference -> ours ---------------------------------------------------------------------
all_f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
f64 = np.array([0.1, 1 + 2.0**-24, 1 + 3 * 2.0**-24, 1e300, -1e300, 2.0**-149, 2.0**-150,
                1.5 * 2.0**-149, -0.0, np.inf, -np.inf, 3.4028235677973366e38,
                3.4028235677973362e38, -123456789.0, 5e-324], dtype=np.float64)
theirs = {
    "f32": rng.standard_normal((5, 3)).astype(np.float32),
    "i32": np.array([[1, -2], [3, 2**31 - 1]], dtype=np.int32),
    "i64": np.array([-2**63, 7], dtype=np.int64),
    "f16": all_f16.reshape(256, 256),
    "f64": f64,
    "f64.nan": np.array([np.nan], dtype=np.float64),
    "u8": np.array([1, 2, 3], dtype=np.uint8),
    "scalar": np.array(1.5, dtype=np.float32),
}
p3 = path("theirs.safetensors")
save_file(theirs, p3, metadata={"source": "safetensors " + safetensors.__version__})
with rt.SafeTensors(p3) as f:
    check(f.keys() == sorted(theirs), f"our names, sorted: {f.keys()}")
    check(f.metadata == {"source": "safetensors " + safetensors.__version__}, "our metadata")
    want_dtypes = {"f32": "F32", "i32": "I32", "i64": "I64", "f16": "F16", "f64": "F64",
                   "f64.nan": "F64", "u8": "U8", "scalar": "F32"}
    for k, v in theirs.items():
        dtype, shape = f.info(k)
        check(dtype == want_dtypes[k] and shape == v.shape, f"info({k!r}) = {dtype}, {shape}")
    for k in ("f32", "i32", "i64", "scalar"):
        check(same_bits(f.load(k).numpy(), theirs[k]), f"{k} loads bit for bit")
    check(same_bits(f.load("f16").numpy(), all_f16.astype(np.float32).reshape(256, 256)),
          "every float16 loads as numpy's exact float32")
    with np.errstate(over="ignore"):  # 1e300 -> inf is one of the cases
        f64_as_f32 = f64.astype(np.float32)
    check(same_bits(f.load("f64").numpy(), f64_as_f32), "float64 loads rounded as numpy rounds it")
    check(np.isnan(f.load("f64.nan").numpy()).all(), "a float64 NaN loads as NaN")
    try:
        f.load("u8")
        check(False, "a U8 tensor loads")
    except rt.TlrtError as e:
        check(e.name == "TLRT_ERR_DTYPE" and "U8" in e.message, f"U8 refused: {e}")
    try:
        f.info("absent")
        check(False, "info of an absent name")
    except KeyError:
        pass
    check("f16" in f and "absent" not in f, "membership")
try:
    f.keys()
    check(False, "a closed file answers")
except ValueError:
    pass
loaded = rt.load_safetensors(p2)
check(sorted(loaded) == ["flat", "idx"] and loaded["idx"].dtype == "int64",
      "load_safetensors returns Tensors by name")

# A broken file: the reference's own errors aside, ours says TLRT_ERR_FORMAT.
with open(p3, "rb") as f:
    good = f.read()
p4 = path("broken.safetensors")
with open(p4, "wb") as f:
    f.write(good[:-1])
try:
    rt.SafeTensors(p4)
    check(False, "a truncated file opens")
except rt.TlrtError as e:
    check(e.name == "TLRT_ERR_FORMAT", f"a truncated file: {e.name}")

# ---- torch -------------------------------------------------------------------------------------
try:
    import torch
    from safetensors.torch import load_file as torch_load, save_file as torch_save
except ImportError:
    torch = None
    print("safetensors_interop: torch is not importable; its part is skipped")
if torch is not None:
    g = torch.Generator().manual_seed(7)
    tt = {
        "bf16": (torch.randn(64, 33, generator=g) * 1e3).to(torch.bfloat16),
        "bf16.special": torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"),
                                      1e-40, -3.0e38], dtype=torch.bfloat16),
        "f16": torch.randn(17, generator=g).to(torch.float16),
        "f32": torch.randn(2, 3, 4, generator=g),
        "f64": torch.randn(9, generator=g, dtype=torch.float64),
        "i64": torch.arange(-5, 5, dtype=torch.int64).reshape(2, 5),
    }
    p5 = path("torch.safetensors")
    torch_save(tt, p5, metadata={"format": "pt"})
    with rt.SafeTensors(p5) as f:
        check(f.info("bf16") == ("BF16", (64, 33)), f"torch bf16 info {f.info('bf16')}")
        for k, v in tt.items():
            got = f.load(k).numpy()
            want = v.numpy() if k == "i64" else v.to(torch.float32).numpy()
            check(same_bits(got, want), f"torch {k} loads as torch's float32 / int64")
        check(f.metadata == {"format": "pt"}, "torch metadata")
    p6 = path("ours_for_torch.safetensors")
    rt.save_safetensors(p6, ours({k: arrays[k] for k in ("matrix", "i64", "scalar", "empty2")}))
    tb = torch_load(p6)
    for k in ("matrix", "i64", "scalar", "empty2"):
        check(k in tb and same_bits(tb[k].numpy(), arrays[k]), f"torch reads our {k}")

# ---- CUDA --------------------------------------------------------------------------------------
if rt.cuda_available():
    dev = rt.cuda(0)
    on_device = {k: v.to(dev) for k, v in ours(arrays).items()}
    p7 = path("cuda.safetensors")
    rt.save_safetensors(p7, on_device, metadata=meta)
    back = load_file(p7)
    for k, v in arrays.items():
        check(same_bits(back[k], v), f"CUDA: reference reads {k!r}")
    with rt.SafeTensors(p3) as f:
        check(same_bits(f.load("f16", dev).numpy(), all_f16.astype(np.float32).reshape(256, 256)),
              "CUDA: float16 loads onto the device")
        check(f.load("f32", dev).device == dev, "CUDA: loaded on the device")
else:
    print("safetensors_interop: no usable CUDA device; the device part is skipped")

for name in os.listdir(TMP):
    os.unlink(os.path.join(TMP, name))
os.rmdir(TMP)
print(f"safetensors_interop: safetensors {safetensors.__version__}, numpy {np.__version__}"
      f"{', torch ' + torch.__version__ if torch is not None else ''}: "
      f"{len(FAILED)} failures")
sys.exit(1 if FAILED else 0)
