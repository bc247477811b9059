#!/usr/bin/env python3
"""Suite 'bindings', test 'python': the ctypes loader bindings/python/torchlean_rt/.

A pytest suite (`python3 -m pytest -q tests/bindings/test_python.py`; pytest is the Debian
package python3-pytest or the PyPI package pytest). Run as a script (what meson does) it hands
itself to pytest when pytest is importable and otherwise runs every test_* function itself:
exit 0 pass, 1 fail, 77 skip. meson passes TORCHLEAN_RT_LIB (the built library),
TORCHLEAN_RT_INCLUDE (abi/) and PYTHONPATH (bindings/python). Checks:
  - the prototypes (generated into bindings/python/torchlean_rt/_torchlean_rt_abi.py by
    bindings/gen/gen_bindings.py) cover exactly the symbols of abi/torchlean_rt.map and equal what
    the bindings' header parser (bindings/gen/tlrt_abi.py) reads from the headers, every library
    function has argtypes/restype set from them, the import opens no header; unknown C types fail
    loudly;
  - upload/download round trips of every kind (float32 bits incl. NaN payloads, bytes, float64
    rounding, array('f'), memoryview, numpy when importable, zero-copy copy_to), empty buffers;
  - generated ops (add, clamp, max_bwd's tuple, RNG against the SplitMix64 formula of the header),
    in-place optimizer steps, length checks of uncounted arrays;
  - the Tape: leaves, recording, backward, values and gradients against hand-computed ones, errors;
    Nodes released when collected (a value no rule reads freed at once), backward freeing the
    graph unless retain_graph=True, use after release, stale Nodes, the same bits either way;
  - index buffers: rt.gather_vec / scatter_add / gather_rows / scatter_add_rows and the Tape's
    gather / scatter / cross_entropy with an int32 / int64 Buffer as the index list give the bits
    of the host-list path; entries that are not an index read 0, are skipped and are counted by
    rt.index_faults; None as the scatters' target; numpy integer arrays through
    Buffer.from_ints and DLPack;
  - errors become TlrtError with the right status, name and message;
  - geometry as data: rt.conv_geometry / rt.pool_geometry, the *_geom ops against the
    argument-list ops (bitwise), the output-dims queries, the library's struct errors;
  - the stream wrappers (stream_get / stream_set / use_stream, events): CPU and unusable-device
    errors, and with a GPU the legacy default stream set and restored;
  - finalizers free handles: live_handles returns to its baseline after del + gc.collect().
Skipped under the valgrind test setup (TLRT_UNDER_VALGRIND): CPython under memcheck is slow
and noisy, and the library code it reaches is covered by the C++ suites there.
"""
import array
import gc
import math
import os
import re
import struct
import sys

if os.environ.get("TLRT_UNDER_VALGRIND"):
    if __name__ == "__main__":
        print("python: skipped under valgrind")
        sys.exit(77)
    import pytest
    pytest.skip("skipped under valgrind", allow_module_level=True)

# optional (meson): the directory holding the package torchlean_rt/
if len(sys.argv) > 1 and os.path.isfile(os.path.join(sys.argv[1], "torchlean_rt", "__init__.py")):
    sys.path.insert(0, sys.argv[1])

import torchlean_rt as rt  # noqa: E402

FAILURES = 0
CHECKS = 0


def check(cond, what):
    """An assertion that counts: fails the current test at once (pytest or the script runner)."""
    global CHECKS
    CHECKS += 1
    if not cond:
        raise AssertionError(what)


def expect_error(fn, status_name, contains=(), what=""):
    try:
        r = fn()
    except rt.TlrtError as e:
        check(e.name == status_name and e.status == rt.STATUS[status_name],
              f"{what}: got {e.name} ({e.status}), expected {status_name}")
        check(isinstance(e.message, str) and e.message == rt.last_error(),
              f"{what}: message {e.message!r} is not tlrt_last_error()")
        for c in contains:
            check(c in e.message, f"{what}: message {e.message!r} lacks {c!r}")
        return e
    check(False, f"{what}: no TlrtError (returned {r!r}), expected {status_name}")
    return None


def bits(values):
    return struct.pack(f"<{len(values)}f", *values) if values else b""


def splitmix64(x):
    m = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_prototypes():
    here = os.path.dirname(os.path.abspath(__file__))
    map_path = os.path.join(os.environ.get("TORCHLEAN_RT_INCLUDE", os.path.join(here, "..", "..", "abi")),
                            "torchlean_rt.map")
    text = re.sub(r"/\*.*?\*/", " ", open(map_path, encoding="utf-8").read(), flags=re.S)
    symbols = set()
    for block in re.findall(r"global\s*:(.*?)(?:local\s*:|\})", text, flags=re.S):
        symbols |= set(re.findall(r"\b(tlrt_\w+)\s*;", block))
    check(len(symbols) > 50, f"parsed only {len(symbols)} symbols from {map_path}")
    protos = set(rt.PROTOTYPES)
    check(protos == symbols, f"prototypes vs version script: only in headers "
          f"{sorted(protos - symbols)}, only in the map {sorted(symbols - protos)}")
    for name, p in rt.PROTOTYPES.items():
        fn = getattr(rt.lib, name)
        want_args = [rt.ctype_of(t, name) for t, _ in p.params]
        check(fn.argtypes is not None and list(fn.argtypes) == want_args,
              f"{name}: argtypes {fn.argtypes} != {want_args}")
        want_res = None if p.restype == "void" else rt.ctype_of(p.restype, name)
        check(fn.restype == want_res, f"{name}: restype {fn.restype} != {want_res}")
    # The generated declarations are the headers' (the parser of the generator reads them here).
    sys.path.insert(0, os.path.join(here, "..", "..", "bindings", "gen"))
    sys.dont_write_bytecode = True
    import tlrt_abi
    abi_dir = os.path.dirname(map_path)
    abi = tlrt_abi.parse_abi(abi_dir)
    # (Signatures; a stale doc comment is bindings_generated_fresh's to report.)
    parsed = [(p.name, p.restype, p.params, p.header) for p in abi.protos]
    have = [(p.name, p.restype, p.params, p.header) for p in rt.PROTOTYPES.values()]
    check(parsed == have, "the generated prototypes differ from the headers in "
          f"{abi_dir}: re-run python3 bindings/gen/gen_bindings.py")
    check(rt.STATUS == abi.enums, "generated status enum vs the headers")
    check(rt.DEFINES == {n: v for n, (v, _) in abi.defines.items()}, "generated defines vs the headers")
    check(rt.HEADERS == tuple(abi.headers), "generated header list")
    # Importing the module reads no header (the declarations are generated).
    import subprocess
    probe = ("import sys; seen = []\n"
             "sys.addaudithook(lambda e, a: seen.append(str(a[0])) if e == 'open' else None)\n"
             "import torchlean_rt\n"
             "print([p for p in seen if p.endswith('.h') or p.endswith('.map')])")
    env = dict(os.environ, TORCHLEAN_RT_INCLUDE="/nonexistent", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(rt.__file__))))
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.strip() == "[]",
          f"import torchlean_rt opened headers or failed: {r.stdout} {r.stderr}")
    check(rt.INCLUDE_DIR is None, "INCLUDE_DIR is None: no header is read at import")
    # Spot checks of the mapping.
    check(repr(rt.PROTOTYPES["tlrt_add"]) ==
          "tlrt_status tlrt_add(const tlrt_buffer * a, const tlrt_buffer * b, tlrt_buffer ** out)",
          f"tlrt_add parsed as {rt.PROTOTYPES['tlrt_add']!r}")
    check(rt.PROTOTYPES["tlrt_last_error"].params == [] and
          rt.PROTOTYPES["tlrt_last_error"].restype == "const char *", "tlrt_last_error prototype")
    check(rt.PROTOTYPES["tlrt_buffer_free"].restype == "void", "tlrt_buffer_free returns void")
    # Every op of the op headers has a generated wrapper, and nothing else does.
    ops = {n[5:] for n, p in rt.PROTOTYPES.items()
           if p.header in rt._OP_HEADERS and n not in rt._NOT_OPS}
    check(set(rt.OPS) == ops and len(ops) >= 38, f"generated ops {sorted(rt.OPS)} vs {sorted(ops)}")
    for name in ops:
        check(callable(getattr(rt, name, None)), f"rt.{name} missing")
    check("tlrt_status tlrt_clamp(" in rt.clamp.__doc__ and "NaN" in rt.clamp.__doc__,
          "rt.clamp docstring comes from the header")
    # Constants from the header.
    check(rt.TLRT_OK == 0 and rt.STATUS["TLRT_ERR_SHAPE"] == 3 and rt.STATUS["TLRT_ERR_INTERNAL"] == 900,
          "status enum values")
    check(rt.CPU == 0 and rt.cuda(0) == 0x10000 and rt.cuda(3) == 0x10003, "device handles")
    check(rt.DEFINES["TLRT_MAX_ELEMENTS"] == 1 << 60, "TLRT_MAX_ELEMENTS")
    check(rt.abi_version() >> 16 == rt.DEFINES["TLRT_ABI_VERSION_MAJOR"], "ABI major")
    for s in ("TLRT_OK", "TLRT_ERR_SHAPE", "TLRT_ERR_NO_DEVICE"):
        check(rt.status_string(rt.STATUS[s]) == s, f"status_string({s})")
    # The parser fails loudly on what it cannot map.
    protos, _, _, _ = rt.parse_header_text(
        "TLRT_API tlrt_status tlrt_weird(struct foo *f, long double x);")
    check(len(protos) == 1 and protos[0].params[0] == ("struct foo *", "f"), "parse of tlrt_weird")
    try:
        rt.ctype_of(protos[0].params[0][0], "tlrt_weird")
        check(False, "unknown type struct foo * was accepted")
    except rt.HeaderParseError as e:
        check("struct foo *" in str(e), f"HeaderParseError message: {e}")
    try:
        rt.parse_header_text("TLRT_API tlrt_status (*broken)(int);")
        check(False, "a malformed declaration was accepted")
    except rt.HeaderParseError:
        pass


def test_round_trips():
    special = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), 1e-45, -1.17549435e-38,
               3.4028234663852886e38, 0.1]
    b = rt.Buffer.from_list(special)
    check(b.size == len(special) and len(b) == len(special) and b.device == rt.CPU, "size/device")
    check(b.to_bytes() == bits(special), "from_list -> to_bytes keeps every bit (-0, subnormals)")
    check(b.to_list() == [struct.unpack("<f", struct.pack("<f", v))[0] for v in special],
          "to_list values")
    # NaN payloads survive upload/download bit for bit (array('f') and bytes paths).
    nan_bits = [0x7FC00001, 0xFFC12345, 0x7F800001, 0x7FFFFFFF]
    raw = struct.pack("<4I", *nan_bits)
    nb = rt.Buffer.from_bytes(raw)
    check(nb.to_bytes() == raw, "NaN payloads via from_bytes/to_bytes")
    arr = array.array("f")
    arr.frombytes(raw)
    check(rt.Buffer.from_buffer(arr).to_bytes() == raw, "NaN payloads via array('f')")
    check(rt.Buffer.from_buffer(memoryview(raw).cast("f")).to_bytes() == raw,
          "read-only float32 memoryview")
    # float64 upload rounds to nearest float32 (library), and to_f64_list widens exactly.
    d = [0.1, 1e300, -1e300, 16777217.0, 1e-46, float("nan"), -0.0]
    fb = rt.Buffer.from_f64(d)
    got = fb.to_f64_list()
    want = [struct.unpack("<f", struct.pack("<f", v))[0] if not abs(v) >= 3.5e38
            else math.copysign(math.inf, v) for v in d]
    check(all((math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))
              for g, w in zip(got, want)), f"from_f64 rounding: {got} vs {want}")
    check(rt.Buffer.from_buffer(array.array("d", [0.5, 2.0])).to_list() == [0.5, 2.0],
          "array('d') via from_f64")
    # Empty buffers.
    e = rt.Buffer.from_list([])
    check(e.size == 0 and e.to_list() == [] and e.to_bytes() == b"" and e.to_f64_list() == [],
          "empty buffer")
    check(rt.add(e, rt.Buffer.zeros(0)).size == 0, "empty op")
    # zeros / full / copy / to(CPU).
    check(rt.Buffer.zeros(3).to_bytes() == bytes(12), "zeros are +0")
    check(rt.Buffer.full(2, -0.0).to_bytes() == bits([-0.0, -0.0]), "full(-0.0)")
    c = b.copy()
    check(c.handle != b.handle and c.to_bytes() == b.to_bytes(), "copy")
    check(b.to(rt.CPU).to_bytes() == b.to_bytes(), "to(CPU)")
    # numpy, when importable.
    if rt._np is not None:
        np = rt._np
        x = np.array([1.5, -2.0, np.nan, 7.0, 3.25, 1e-40], dtype=np.float32)
        nb = rt.Buffer.from_buffer(x)
        y = nb.to_numpy()
        check(y.dtype == np.float32 and y.tobytes() == x.tobytes(), "numpy float32 round trip")
        strided = np.arange(12, dtype=np.float32)[::3]
        check(rt.Buffer.from_buffer(strided).to_list() == [0.0, 3.0, 6.0, 9.0], "numpy strided")
        check(rt.Buffer.from_buffer(np.array([0.1], dtype=np.float64)).to_numpy()[0] == np.float32(0.1),
              "numpy float64 rounds to float32")
        check(rt.Buffer.from_buffer(np.ones((2, 3), dtype=np.float32)).size == 6, "numpy 2-D")
        print("python: numpy", np.__version__, "paths checked")
    else:
        print("python: numpy not importable, numpy paths not checked")
    try:
        rt.Buffer.from_buffer(array.array("i", [1, 2]))
        check(False, "array('i') accepted")
    except TypeError:
        pass


def test_ops():
    a = rt.Buffer.from_list([1.0, -2.0, 3.0, 0.0])
    b = rt.Buffer.from_list([4.0, 5.0, 3.0, -0.0])
    check(rt.add(a, b).to_list() == [5.0, 3.0, 6.0, 0.0], "add")
    check(rt.mul(a, b).to_list() == [4.0, -10.0, 9.0, -0.0], "mul")
    check(rt.clamp(a, -1.0, 2.0).to_list() == [1.0, -1.0, 2.0, 0.0], "clamp")
    check(rt.axpy(a, b, 0.5).to_list() == [3.0, 0.5, 4.5, 0.0], "axpy")
    g = rt.Buffer.from_list([2.0, 2.0, 2.0, 2.0])
    r = rt.max_bwd(a, b, g)
    check(isinstance(r, tuple) and len(r) == 2 and all(isinstance(x, rt.Buffer) for x in r),
          "max_bwd returns a tuple of Buffers")
    da, db = r
    check(da.to_list() == [0.0, 0.0, 1.0, 1.0] and db.to_list() == [2.0, 2.0, 1.0, 1.0],
          f"max_bwd values {da.to_list()} {db.to_list()}")
    s = rt.sigmoid(rt.Buffer.from_list([0.0]))
    check(s.to_list() == [0.5], "sigmoid(0)")
    # RNG: the header's formula, with a key that wraps around 2^64.
    key, n = (1 << 64) - 2, 5
    u = rt.rand_uniform(rt.CPU, n, key).to_list()
    want = [((splitmix64((key + i) % (1 << 64)) & 0xFFFFFFFF) >> 8) * 2.0 ** -24 for i in range(n)]
    check(u == want, f"rand_uniform: {u} vs {want}")
    m = rt.bernoulli_mask(rt.CPU, n, 0.5, key).to_list()
    check(m == [1.0 if x < 0.5 else 0.0 for x in want], "bernoulli_mask")
    check(rt.rand_normal(rt.CPU, 3, 2.0, 0.0, 7).to_list() == [2.0, 2.0, 2.0], "rand_normal std 0")
    check(rt.rand_uniform(rt.CPU, n, key=key).to_list() == want, "keyword argument by header name")
    check(rt.clamp(a, hi=2.0, lo=-1.0).to_list() == [1.0, -1.0, 2.0, 0.0], "keywords in any order")
    check(str(__import__("inspect").signature(rt.clamp)) == "(x, lo, hi)", "signature of rt.clamp")
    try:
        rt.clamp(a, -1.0, 1.0, lo=0.0)
        check(False, "a repeated argument accepted")
    except TypeError:
        pass
    try:
        rt.add(a, [1.0])
        check(False, "a list accepted as a buffer")
    except TypeError:
        pass
    try:
        rt.add(a)
        check(False, "wrong arity accepted")
    except TypeError:
        pass
    try:
        rt.rand_uniform(rt.CPU, -1, 0)
        check(False, "negative n accepted")
    except ValueError:
        pass
    # Objects that look like the right kind (a handle attribute, an int subclass) are still refused
    # with the documented errors when every argument is positional (the wrappers' common path).
    for bad_call, exc, what in (
            (lambda: rt.add(a, rt.Tape()), TypeError, "a Tape as a buffer"),
            (lambda: rt.rand_uniform(True, 3, 0), TypeError, "a bool as a device"),
            (lambda: rt.rand_uniform(rt.CPU, 1 << 64, 0), ValueError, "n of 2^64"),
            (lambda: rt.rand_uniform(rt.CPU, 3.5, 0), None, "a float count (int() of it)")):
        try:
            bad_call()
            check(exc is None, f"{what} accepted")
        except Exception as e:  # noqa: BLE001
            check(exc is not None and isinstance(e, exc), f"{what}: {type(e).__name__} {e}")
    freed = rt.Tape()
    fx = freed.leaf(a, [4], False)
    freed.free()
    try:
        freed.relu(fx)
        check(False, "a freed tape accepted")
    except ValueError as e:
        check("freed" in str(e), f"freed tape message: {e}")


def test_shaped_ops():
    """Generated wrappers of ops with arrays (dims, axis maps, index lists) and flags: array
    arguments are Python sequences whose length fills the count parameter after them."""
    x = rt.Buffer.from_list([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    check("rank" not in rt.reduce_sum_axis.__signature__.parameters,
          "rank is filled in from dims")
    check(rt.reduce_sum_axis(x, [2, 3], 0).to_list() == [5.0, 7.0, 9.0], "reduce_sum_axis axis 0")
    check(rt.reduce_sum_axis(x, dims=(2, 3), axis=1).to_list() == [6.0, 15.0], "keywords")
    check(rt.reduce_from_broadcast(x, [1, 3], [2, 3], [1, 2]).to_list() == [5.0, 7.0, 9.0],
          "reduce_from_broadcast with two arrays")
    check(rt.reduce_from_broadcast(rt.Buffer.from_list([2.0]), [], [], []).to_list() == [2.0],
          "rank 0: empty arrays")
    expect_error(lambda: rt.reduce_sum_axis(x, [2, 3], 2), "TLRT_ERR_INDEX",
                 ("tlrt_reduce_sum_axis", "axis"), "axis out of range")
    try:
        rt.reduce_sum_axis(x, [2, -3], 0)
        check(False, "a negative dimension must not reach the library")
    except ValueError:
        check(True, "negative dimension")
    if "tlrt_gather_vec" in rt.PROTOTYPES:
        check(rt.gather_vec(x, 6, [5, 0, 99]).to_list() == [6.0, 1.0, 0.0],
              "gather_vec: k from the index list; out of range reads 0")
    if "tlrt_transpose2d" in rt.PROTOTYPES:
        check(rt.transpose2d(x, 2, 3).to_list() == [1.0, 4.0, 2.0, 5.0, 3.0, 6.0], "transpose2d")
    if "tlrt_bmm" in rt.PROTOTYPES:
        check(rt.bmm(x, rt.Buffer.from_list([1.0, 0.0, 0.0]), 1, 2, 3, 1, False, False).to_list()
              == [1.0, 4.0], "bmm with bool flags")


def test_flag_defaults():
    """Trailing bool parameters (transposes, ...) default to False, by position or keyword."""
    import inspect
    a = rt.Buffer.from_list([1.0, 2.0, 3.0, 4.0])
    e = rt.Buffer.from_list([1.0, 0.0, 0.0, 1.0])
    check(rt.matmul(a, e, 2, 2, 2).to_list() == [1.0, 2.0, 3.0, 4.0], "matmul flags default")
    check(rt.matmul(a, e, 2, 2, 2, True).to_list() == [1.0, 3.0, 2.0, 4.0], "trans_a by position")
    check(rt.matmul(e, a, 2, 2, 2, trans_b=True).to_list() == [1.0, 3.0, 2.0, 4.0],
          "trans_b by keyword, trans_a left out")
    check(str(inspect.signature(rt.matmul)) == "(a, b, m, n, p, trans_a=False, trans_b=False)",
          "signature shows the defaults")
    try:
        rt.matmul(a, e, 2, 2)
        check(False, "a required argument left out must raise")
    except TypeError as ex:
        check("takes 5 to 7 arguments, 4 given" in str(ex), f"message: {ex}")
    t = rt.Tape()
    x = t.leaf(a, [2, 2], False)
    y = t.leaf(e, [2, 2], False)
    check(t.value(t.matmul(x, y)).to_list() == [1.0, 2.0, 3.0, 4.0], "tape matmul defaults")


def test_cpu_threads():
    """rt.set_num_threads / get_num_threads (tlrt_set_num_threads): the previous count back, the
    same bits for any count."""
    x = rt.Buffer.from_list([float(i % 97) * 0.25 - 7.0 for i in range(200003)])
    first = rt.set_num_threads(1)
    check(rt.get_num_threads() == 1, "one thread set")
    one = rt.gelu(x).to_list()
    check(rt.set_num_threads(3) == 1, "previous count returned")
    check(rt.gelu(x).to_list() == one, "three threads give one thread's values")
    rt.set_num_threads(0)
    check(rt.get_num_threads() == first, "0 restores the default")
    try:
        rt.set_num_threads(-1)
        check(False, "a negative count accepted")
    except ValueError:
        pass


def test_errors():
    a = rt.Buffer.from_list([1.0, 2.0, 3.0])
    b = rt.Buffer.from_list([1.0, 2.0])
    expect_error(lambda: rt.add(a, b), "TLRT_ERR_SHAPE", ("tlrt_add", "argument b", "2", "3"),
                 "add size mismatch")
    e = expect_error(lambda: rt.clamp(a, float("nan"), 1.0), "TLRT_ERR_INVALID_ARGUMENT",
                     ("tlrt_clamp", "lo"), "clamp NaN bound")
    check(e is not None and e.function == "tlrt_clamp" and "TLRT_ERR_INVALID_ARGUMENT" in str(e),
          "TlrtError str/function")
    expect_error(lambda: rt.Buffer.from_bytes(b"12345"), "TLRT_ERR_SHAPE", ("nbytes",),
                 "from_bytes of 5 bytes")
    expect_error(lambda: rt.rand_uniform(rt.CPU, (1 << 60) + 1, 0), "TLRT_ERR_OVERFLOW", (),
                 "rand_uniform too large")
    # Released storage.
    c = rt.Buffer.from_list([1.0, 2.0, 3.0])
    check(c.release_storage() is True and c.release_storage() is False and c.is_released,
          "release_storage flags")
    expect_error(lambda: c.size, "TLRT_ERR_RELEASED", ("tlrt_buffer_size",), "size of released")
    expect_error(lambda: rt.add(a, c), "TLRT_ERR_RELEASED", ("tlrt_add",), "add with released")
    check(c.device == rt.CPU, "device of a released buffer")
    # A freed Buffer passes NULL: the library says so.
    f = rt.Buffer.from_list([1.0])
    f.free()
    f.free()  # idempotent
    check(f.freed and f.handle is None and repr(f) == "Buffer(<freed>)", "freed state")
    expect_error(lambda: f.to_list(), "TLRT_ERR_NULL_ARGUMENT", (), "use after free()")
    expect_error(lambda: rt.exp(f), "TLRT_ERR_NULL_ARGUMENT", ("tlrt_exp",), "op on freed buffer")
    expect_error(lambda: rt.stats(7 << 16), "TLRT_ERR_INVALID_ARGUMENT", (), "stats of a bad device")
    # CUDA: unavailable in a CPU build, no device on a CUDA build without a GPU; else it works.
    st = rt.runtime_status()
    if st == rt.DEFINES["TLRT_RUNTIME_CPU_ONLY"]:
        expect_error(lambda: rt.Buffer.from_list([1.0], rt.cuda(0)), "TLRT_ERR_BACKEND_UNAVAILABLE",
                     ("cuda",), "CUDA in a CPU build")
        check(rt.device_count(rt.DEFINES["TLRT_DEVICE_KIND_CUDA"]) == 0, "no CUDA devices")
    elif st == rt.DEFINES["TLRT_RUNTIME_CUDA_NO_DEVICE"]:
        expect_error(lambda: rt.Buffer.zeros(4, rt.cuda(0)), "TLRT_ERR_NO_DEVICE", (),
                     "CUDA without a device")
    else:
        count = rt.device_count(rt.DEFINES["TLRT_DEVICE_KIND_CUDA"])
        x = rt.Buffer.from_list([1.0, -2.0, 0.5], rt.cuda(0))
        y = rt.Buffer.from_list([3.0, 4.0, 0.25], rt.cuda(0))
        z = rt.add(x, y)
        check(z.device == rt.cuda(0) and z.to_list() == [4.0, 2.0, 0.75], "add on CUDA")
        check(z.to(rt.CPU).to_list() == [4.0, 2.0, 0.75], "CUDA -> CPU")
        expect_error(lambda: rt.add(x, a), "TLRT_ERR_DEVICE_MISMATCH", ("tlrt_add",), "mixed devices")
        expect_error(lambda: rt.Buffer.zeros(1, rt.cuda(count)), "TLRT_ERR_NO_DEVICE", (),
                     "CUDA ordinal past the last")
        sc = rt.stats(rt.cuda(0))
        check(sc["device_total_bytes"] > 0 and sc["live_bytes"] >= 12 * 3, "CUDA stats")
        rt.synchronize(rt.cuda(0))
        print("python: CUDA paths checked")


def test_finalizers():
    gc.collect()
    s0 = rt.stats()
    check(set(s0) == {n for n, _ in rt.AllocatorStats._fields_} and
          s0["struct_size"] == __import__("ctypes").sizeof(rt.AllocatorStats), "stats fields")
    base_handles, base_bytes = s0["live_handles"], s0["live_bytes"]
    bufs = [rt.Buffer.from_list([float(i)] * 64) for i in range(50)]
    outs = [rt.exp(x) for x in bufs]
    pairs = [rt.min_bwd(x, x, x) for x in bufs[:10]]
    mid = rt.stats()
    check(mid["live_handles"] == base_handles + 50 + 50 + 20, f"live handles {mid['live_handles']}")
    check(mid["live_bytes"] == base_bytes + 120 * 64 * 4, "live bytes while held")
    del bufs, outs, pairs
    # A reference cycle holding a Buffer is reclaimed by the cycle collector.
    cyc = [rt.Buffer.from_list([1.0, 2.0])]
    cyc.append(cyc)
    del cyc
    # Retained handles need both owners gone.
    r1 = rt.Buffer.from_list([5.0])
    r2 = r1.retain()
    del r1
    gc.collect()
    check(r2.to_list() == [5.0], "retained buffer survives the first owner")
    del r2
    # Context manager frees at exit.
    with rt.Buffer.zeros(8) as z:
        check(z.size == 8, "with-block buffer")
    check(z.freed, "freed at the end of the with block")
    gc.collect()
    s1 = rt.stats()
    check(s1["live_handles"] == base_handles and s1["live_bytes"] == base_bytes,
          f"after del + gc.collect(): live_handles {s1['live_handles']} (baseline {base_handles}), "
          f"live_bytes {s1['live_bytes']} (baseline {base_bytes})")


def test_buffer_protocol():
    """Uploads from sequences and buffer-protocol objects, downloads into them (no copies)."""
    vals = [1.5, -2.0, 0.25, 3.0e-40]
    want = bits(vals)
    check(rt.buffer(vals).to_bytes() == want, "rt.buffer(list)")
    check(rt.buffer(tuple(vals)).to_bytes() == want, "rt.buffer(tuple)")
    check(rt.buffer(x for x in vals).to_bytes() == want, "rt.buffer(generator)")
    check(rt.buffer(array.array("f", vals)).to_bytes() == want, "rt.buffer(array('f'))")
    check(rt.buffer(memoryview(array.array("f", vals))).to_bytes() == want, "writable memoryview")
    check(rt.buffer(memoryview(want).cast("f")).to_bytes() == want, "read-only memoryview")
    check(rt.buffer(want).to_bytes() == want, "bytes are float32 little-endian")
    check(rt.buffer(bytearray(want)).to_bytes() == want, "bytearray")
    b = rt.buffer(vals)
    check(rt.buffer(b) is b, "a Buffer passes through")
    out = array.array("f", [0.0] * 4)
    check(b.copy_to(out) is out and out.tobytes() == want, "copy_to(array('f'))")
    raw = bytearray(16)
    b.copy_to(raw)
    check(bytes(raw) == want, "copy_to(bytearray)")
    for bad, exc in ((array.array("f", [0.0] * 3), ValueError), (b"\0" * 16, TypeError),
                     (array.array("d", [0.0] * 4), TypeError)):
        try:
            b.copy_to(bad)
            check(False, f"copy_to accepted {bad!r}")
        except exc:
            pass
    check(rt.buffer([]).size == 0 and rt.Buffer.zeros(0).copy_to(bytearray()) == bytearray(),
          "empty")
    if rt._np is not None:
        np = rt._np
        x = np.array([[1.0, 2.0], [3.0, -0.0]], dtype=np.float32)
        x.setflags(write=False)  # read-only numpy: read through its pointer, no copy
        check(rt.buffer(x).to_bytes() == x.tobytes(), "read-only numpy float32")
        y = np.empty(4, dtype=np.float32)
        rt.buffer(x).copy_to(y)
        check(y.tobytes() == x.tobytes(), "copy_to(numpy)")
        check(np.asarray(rt.buffer(x)).tobytes() == x.tobytes(), "numpy.asarray(Buffer)")
        check(rt.buffer(x.T).to_list() == [1.0, 3.0, 2.0, -0.0], "transposed numpy is made contiguous")


def test_inplace_and_uncounted():
    p = rt.Buffer.from_list([1.0, -1.0])
    g = rt.Buffer.from_list([0.5, 0.25])
    check(rt.sgd_step(p, g, None, 1, 0.5, 0.0, 0.0, 0.0, False) is None, "in-place op returns None")
    check(p.to_list() == [0.75, -1.125], f"sgd step updated in place: {p.to_list()}")
    expect_error(lambda: rt.sgd_step(p, g, None, 1, 0.5, 0.9, 0.0, 0.0, False),
                 "TLRT_ERR_NULL_ARGUMENT", ("momentum_buf",), "momentum without a buffer")
    m = rt.Buffer.zeros(2)
    rt.sgd_step(p, g, m, 1, 0.5, 0.9, 0.0, 0.0, False)
    check(m.to_list() == [0.5, 0.25], "momentum buffer = g at step 1")
    x = rt.Buffer.from_list([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    check(rt.permute(x, [2, 3], [1, 0]).to_list() == [1.0, 4.0, 2.0, 5.0, 3.0, 6.0], "permute")
    for perm in ([0], [0, 1, 2]):
        try:
            rt.permute(x, [2, 3], perm)
            check(False, f"perm {perm} of the wrong length reached the library")
        except ValueError as e:
            check("perm" in str(e), str(e))


def test_tape():
    """A linear layer + relu + sum through the tape, against gradients computed by hand."""
    xv = [1.0, -2.0, 0.5, 3.0, 1.0, -1.0]
    wv = [0.5, 0.25, -1.0, -0.5, 1.0, 2.0]
    bv = [0.125, -0.25]
    with rt.Tape(rt.CPU) as t:
        x = t.leaf(rt.buffer(xv), [2, 3], False)
        w = t.leaf(rt.buffer(wv), [2, 3], True)
        b = t.leaf(rt.buffer(bv), [2], True)
        check([i & 0xFFFFFFFF for i in (x, w, b)] == [0, 1, 2], "leaf ids hold their index")
        check(x >> 32 == w >> 32 == b >> 32 != 0, "leaf ids name their tape and generation")
        h = t.linear(x, w, b)
        check(t.shape(h) == ([2, 2], True), f"shape {t.shape(h)}")
        a = t.relu(h)
        loss = t.reduce_sum(a)
        check(t.shape(loss) == ([], True), "the loss is a scalar")
        t.backward(loss, retain_graph=True)  # keep the graph for the second backward below
        want_h = [sum(xv[i * 3 + k] * wv[o * 3 + k] for k in range(3)) + bv[o]
                  for i in range(2) for o in range(2)]
        got_h = t.value(h).to_list()
        check(all(abs(g - w_) < 1e-5 for g, w_ in zip(got_h, want_h)), f"h {got_h} vs {want_h}")
        mask = [1.0 if v > 0 else 0.0 for v in want_h]
        want_dw = [sum(mask[i * 2 + o] * xv[i * 3 + k] for i in range(2))
                   for o in range(2) for k in range(3)]
        check(t.grad(w).to_list() == want_dw, f"dW {t.grad(w).to_list()} vs {want_dw}")
        check(t.grad(b).to_list() == [mask[0] + mask[2], mask[1] + mask[3]], "db")
        t.backward(loss)  # a second backward accumulates
        check(t.grad(b).to_list() == [2 * (mask[0] + mask[2]), 2 * (mask[1] + mask[3])],
              "backward accumulates")
        expect_error(lambda: t.add(w, b), "TLRT_ERR_SHAPE", ("tlrt_tape_add",), "shape mismatch")
        expect_error(lambda: t.relu(999), "TLRT_ERR_STALE_HANDLE", (), "made-up node id")
        expect_error(lambda: t.relu((w & ~0xFFFFFFFF) | 999), "TLRT_ERR_INDEX", (),
                     "index past the tape's nodes")
        expect_error(lambda: t.grad(x), "TLRT_ERR_INVALID_ARGUMENT", (), "grad of a constant")
        for bad in (lambda: t.permute(w, [0]), lambda: t.cross_entropy(h, [0])):
            try:
                bad()
                check(False, "an array of the wrong length reached the library")
            except ValueError:
                pass
        ce = t.cross_entropy(h, [1, 0])
        check(t.shape(ce)[0] == [], "cross_entropy is a scalar")
        check(t.node_count() > 5 and t.device() == rt.CPU, "node_count / device")
        t.reset()
        check(t.node_count() == 0, "reset")
    check(t.handle is None and repr(t) == "Tape(<freed>)", "freed at the end of the with block")
    try:
        rt.Tape(rt.CPU).add("a", 1)
        check(False, "a string node id accepted")
    except (TypeError, ValueError):
        pass



def test_tape_conv_pool_attention():
    """The convolution, pooling and attention recording calls through the generated methods: a
    hand-computed 1-D convolution (N-D call, per-axis arrays checked against the node's spatial
    rank), 2-D conv + max pool, and attention with an optional mask (None or a buffer)."""
    with rt.Tape(rt.CPU) as t:
        x = t.leaf(rt.buffer([1.0, 2.0, 3.0, 4.0, 5.0]), [1, 1, 5], True)
        w = t.leaf(rt.buffer([1.0, 1.0, 1.0]), [1, 1, 3], True)
        c = t.conv(x, w, rt.TLRT_TAPE_NONE, [1], [1], [1], 1)
        check(t.value(c).to_list() == [3.0, 6.0, 9.0, 12.0, 9.0], "1-D moving sums")
        try:
            t.conv(x, w, rt.TLRT_TAPE_NONE, [1, 1], [1], [1], 1)
            check(False, "a stride array longer than the spatial rank reached the library")
        except ValueError as e:
            check("stride" in str(e), str(e))
        img = t.leaf(rt.buffer([float(i) for i in range(16)]), [1, 1, 4, 4], True)
        k = t.leaf(rt.buffer([1.0] * 9), [1, 1, 3, 3], True)
        b = t.leaf(rt.buffer([0.5]), [1], True)
        y = t.conv2d(img, k, b, 1, 1, 1, 1, 1, 1, 1)
        p = t.maxpool2d(y, 2, 2, 2, 2, 0, 0)
        a = t.avgpool2d(p, 2, 2, 1, 1, 0, 0, True)
        check(t.shape(p) == ([1, 1, 2, 2], True) and t.shape(a)[0] == [1, 1, 1, 1], "pool shapes")
        t.backward(a)
        check(t.grad(b).to_list() == [1.0], "d bias of a mean of maxima is 1")
        expect_error(lambda: t.maxpool2d(img, 3, 3, 1, 1, 2, 2), "TLRT_ERR_INVALID_ARGUMENT",
                     ("tlrt_tape_maxpool2d",), "padding above half the kernel")
        q = t.leaf(rt.buffer([0.5, -1.0, 0.25, 2.0]), [1, 2, 2], True)
        o1 = t.flash_attention(q, q, q, None, 0.5, True, float("-inf"))
        o2 = t.flash_attention(q, q, q, rt.buffer([1.0, 0.0, 1.0, 1.0]), 0.5, False,
                               float("-inf"))
        check(t.value(o1).to_list() == t.value(o2).to_list(), "causal == lower-triangular mask")
        check(t.value(o1).to_list()[:2] == [0.5, -1.0], "the first query sees only itself")
        wq = t.leaf(rt.buffer([0.1] * 4), [2, 2], True)
        m = t.multi_head_attention(q, wq, wq, wq, wq, *[rt.TLRT_TAPE_NONE] * 4, 2, False)
        check(t.shape(m) == ([1, 2, 2], True), "multi-head attention keeps x's shape")


def test_streams():
    # The CPU has no stream; NULL handles come first; CUDA devices this process cannot use. The
    # GPU side (a torch producer and our consumer on one stream) is test_torch_stream.py.
    for call in (lambda: rt.stream_get(rt.CPU), lambda: rt.stream_set(rt.CPU, None),
                 lambda: rt.stream_record_event(rt.CPU, 0x1000),
                 lambda: rt.stream_wait_event(rt.CPU, 0x1000),
                 lambda: rt.stream_wait_for_library(rt.CPU, 0),
                 lambda: rt.use_stream(rt.CPU, 0).__enter__()):
        expect_error(call, "TLRT_ERR_UNSUPPORTED", ("argument device",), "stream call on the CPU")
    expect_error(lambda: rt.stream_record_event(rt.CPU, 0), "TLRT_ERR_NULL_ARGUMENT",
                 ("tlrt_stream_record_event", "argument cuda_event"), "a NULL event")
    expect_error(lambda: rt.stream_wait_event(rt.cuda(3), 0), "TLRT_ERR_NULL_ARGUMENT",
                 ("tlrt_stream_wait_event",), "a NULL event before the device")
    check(rt.CUDA_STREAM_LEGACY == 1 and rt.CUDA_STREAM_PER_THREAD == 2, "special handles")
    try:
        rt.stream_set(rt.CPU, "not a stream")
        check(False, "a str is not a stream")
    except TypeError:
        pass
    if not rt.cuda_available():
        status = ("TLRT_ERR_BACKEND_UNAVAILABLE" if rt.runtime_status() == 0
                  else "TLRT_ERR_NO_DEVICE")
        expect_error(lambda: rt.stream_get(rt.cuda(0)), status, ("argument device",),
                     "stream_get on an unusable CUDA device")
        return
    own = rt.stream_get(rt.cuda(0))
    check(own not in (0, rt.CUDA_STREAM_LEGACY), "the library's own stream")
    with rt.use_stream(rt.cuda(0), 0):  # 0: the legacy default stream
        check(rt.stream_get(rt.cuda(0)) == rt.CUDA_STREAM_LEGACY, "legacy stream set")
        y = rt.add(rt.Buffer.full(4, 1.5, rt.cuda(0)), rt.Buffer.full(4, 1.5, rt.cuda(0)))
    check(rt.stream_get(rt.cuda(0)) == own, "use_stream restores the library's stream")
    check(y.to_list() == [3.0] * 4, "work across the switch")
    expect_error(lambda: rt.stream_set(rt.cuda(0), rt.CUDA_STREAM_PER_THREAD),
                 "TLRT_ERR_UNSUPPORTED", ("argument cuda_stream",), "the per-thread stream")


def test_geometry_structs():
    """Geometry as data: rt.conv_geometry / rt.pool_geometry fill the structs by name, the
    generated *_geom ops equal the argument-list ops bit for bit, the output-dims queries give the
    ops' sizes, and the library's validation errors (struct_size, fields) reach Python."""
    check(rt.ctypes.sizeof(rt.ConvGeometry) == 368 and rt.ctypes.sizeof(rt.PoolGeometry) == 288,
          "struct sizes of the headers")
    # Convolution, rank 2, groups 2, stride, padding and dilation.
    g = rt.conv_geometry(batch=2, in_channels=4, out_channels=6, in_spatial=[7, 6],
                         kernel_size=[3, 2], stride=[2, 1], padding=[1, 0], dilation=[1, 2],
                         groups=2)
    check(g.struct_size == 368 and g.rank == 2 and list(g.stride[:2]) == [2, 1]
          and list(g.in_spatial[2:]) == [0] * 6, "conv_geometry fills the struct by name")
    dims, n = rt.conv_output_dims(g)
    check(dims == [2, 6, 4, 4] and n == 192, f"conv_output_dims {dims} {n}")
    tdims, tn = rt.convtranspose_output_dims(g)
    check(tdims == [2, 6, 13, 8] and tn == 2 * 6 * 13 * 8, f"convtranspose_output_dims {tdims}")
    w = rt.buffer([((i * 7) % 11 - 5) / 4 for i in range(6 * 2 * 3 * 2)])
    x = rt.buffer([((i * 5) % 13 - 6) / 8 for i in range(2 * 4 * 7 * 6)])
    b = rt.buffer([0.5, -0.25, 1.0, 0.0, 2.0, -1.0])
    y_old = rt.conv_fwd(w, b, x, 2, 4, 6, [7, 6], [3, 2], [2, 1], [1, 0], [1, 2], 2)
    y_new = rt.conv_fwd_geom(w, b, x, g)
    check(y_new.to_bytes() == y_old.to_bytes() and y_new.size == n,
          "conv_fwd_geom == conv_fwd, bit for bit, of the queried size")
    check(rt.conv_fwd_geom(w, None, x, g).size == n, "bias None")
    dy = rt.buffer([((i * 3) % 7 - 3) / 2 for i in range(n)])
    old = rt.conv_bwd(w, x, dy, 2, 4, 6, [7, 6], [3, 2], [2, 1], [1, 0], [1, 2], 2)
    new = rt.conv_bwd_geom(w, x, dy, g)
    check(all(a.to_bytes() == c.to_bytes() for a, c in zip(old, new)), "conv_bwd_geom == conv_bwd")
    # Pooling, rank 1 and 3; stride defaults to the kernel.
    p = rt.pool_geometry(batch=1, channels=2, in_spatial=[5, 4, 3], kernel=[2, 2, 1],
                         padding=[1, 0, 0])
    check(list(p.stride[:3]) == [2, 2, 1], "pool_geometry: stride defaults to the kernel")
    pdims, pn = rt.pool_output_dims(p)
    check(pdims == [1, 2, 3, 2, 3] and pn == 36, f"pool_output_dims {pdims} {pn}")
    xp = rt.buffer([float((i * 7) % 17) for i in range(2 * 5 * 4 * 3)])
    args = (1, 2, [5, 4, 3], [2, 2, 1], [2, 2, 1], [1, 0, 0])
    check(rt.maxpool_fwd_geom(xp, p).to_bytes() == rt.maxpool_fwd(xp, *args).to_bytes(),
          "maxpool_fwd_geom == maxpool_fwd")
    check(rt.avgpool_fwd_geom(xp, p, False).to_bytes() ==
          rt.avgpool_fwd(xp, *args, False).to_bytes(), "avgpool_fwd_geom == avgpool_fwd")
    dyp = rt.buffer([1.0] * pn)
    check(rt.smooth_maxpool_bwd_geom(xp, dyp, p, 0.5).to_bytes() ==
          rt.smooth_maxpool_bwd(xp, dyp, *args, 0.5).to_bytes(), "smooth_maxpool_bwd_geom")
    check(rt.maxpool_fwd_geom(xp, p).size == pn, "the queried size")
    # The library's validation, through the struct: named fields, exact statuses.
    bad = rt.pool_geometry(1, 2, [5, 4, 3], [2, 2, 1], padding=[2, 0, 0])
    expect_error(lambda: rt.pool_output_dims(bad), "TLRT_ERR_INVALID_ARGUMENT",
                 ("tlrt_pool_output_dims", "argument geometry->padding[0]"), "2 pad > kernel")
    expect_error(lambda: rt.maxpool_fwd_geom(xp, bad), "TLRT_ERR_INVALID_ARGUMENT",
                 ("argument geometry->padding[0]",), "the op agrees")
    g.struct_size = 8
    expect_error(lambda: rt.conv_output_dims(g), "TLRT_ERR_INVALID_ARGUMENT",
                 ("argument geometry->struct_size",), "struct_size too small")
    g.struct_size = rt.ctypes.sizeof(rt.ConvGeometry)
    g.groups = 0
    expect_error(lambda: rt.conv_fwd_geom(w, b, x, g), "TLRT_ERR_INVALID_ARGUMENT",
                 ("argument geometry->groups",), "groups 0")
    g.groups = 2
    g.rank = (1 << 32) + 2
    expect_error(lambda: rt.conv_output_dims(g), "TLRT_ERR_INVALID_ARGUMENT",
                 ("argument geometry->rank",), "a 64-bit rank is not truncated")
    for call in (lambda: rt.conv_output_dims(p), lambda: rt.maxpool_fwd_geom(xp, g),
                 lambda: rt.conv_fwd_geom(w, b, x, {"rank": 2})):
        try:
            call()
            check(False, "a geometry of the wrong type was accepted")
        except TypeError:
            pass
    try:
        rt.conv_geometry(1, 1, 1, [4, 4], [3])
        check(False, "kernel_size with fewer entries than in_spatial was accepted")
    except ValueError:
        pass


TESTS = ("test_prototypes", "test_round_trips", "test_ops", "test_shaped_ops", "test_cpu_threads",
         "test_errors",
         "test_buffer_protocol", "test_inplace_and_uncounted", "test_tape",
         "test_tape_conv_pool_attention", "test_streams", "test_geometry_structs",
         "test_finalizers", "test_integer_buffers_and_dlpack", "test_index_buffers",
         "test_tape_index_buffers", "test_tape_release")


def main():
    try:
        import pytest
    except ImportError:
        pytest = None
    if pytest is not None:
        return pytest.main(["-q", "-p", "no:cacheprovider", os.path.abspath(__file__)])
    print("python: pytest not importable; running the tests directly")
    print("python: library", rt.LIB_PATH, "declarations", rt._ABI.__file__)
    print("python:", rt.build_info())
    global FAILURES
    for name in TESTS:
        try:
            globals()[name]()
            ok = True
        except Exception:  # an assertion or an unexpected exception fails that test
            import traceback
            traceback.print_exc()
            FAILURES += 1
            ok = False
        print(f"python: {name}: {'ok' if ok else 'FAILED'}")
    print(f"python: {CHECKS} checks, {FAILURES} failures")
    return 0 if FAILURES == 0 else 1


def _dlpack_data_ptr(buf):
    """The payload address of a Buffer, read from the DLPack tensor it exports (data is the first
    field of DLTensor, which follows version, manager_ctx, deleter and flags: offset 32)."""
    import ctypes
    out = ctypes.c_void_p()
    rt.call("buffer_to_dlpack_versioned", buf.handle, None, 1, ctypes.byref(out))
    data = ctypes.c_void_p.from_address(out.value + 32).value
    deleter = ctypes.c_void_p.from_address(out.value + 16).value
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter)(out.value)
    return data or 0


def test_integer_buffers_and_dlpack():
    """int32 / int64 buffers; DLPack both ways with numpy: the same memory, no copy; capsules."""
    gc.collect()
    start = rt.stats()["live_handles"]
    b = rt.Buffer.from_ints([0, -1, 2 ** 40, -(2 ** 63), 2 ** 63 - 1])
    check(b.dtype == "int64" and b.size == 5, f"dtype {b.dtype}")
    check(b.to_int_list() == [0, -1, 2 ** 40, -(2 ** 63), 2 ** 63 - 1], "int64 round trip")
    c = rt.Buffer.from_ints([7, -7], dtype="int32")
    check(c.dtype == "int32" and c.to_int_list() == [7, -7], "int32 round trip")
    check(c.copy().dtype == "int32", "copies keep the type")
    check(rt.Buffer.from_list([1.0]).dtype == "float32", "float buffers say float32")
    expect_error(lambda: rt.relu(b), "TLRT_ERR_DTYPE", ("argument x", "int64"), "relu of int64")
    expect_error(lambda: b.to_list(), "TLRT_ERR_DTYPE", (), "float download of int64")
    # Capsules: a consumed capsule is renamed, an unconsumed one frees its reference when dropped.
    live = rt.stats()["live_handles"]
    cap = b.__dlpack__(max_version=(1, 0))
    del cap
    gc.collect()
    check(rt.stats()["live_handles"] == live, "an unconsumed capsule drops its reference")
    same = rt.from_dlpack(b.__dlpack__())  # legacy capsule, consumed by from_dlpack
    check(_dlpack_data_ptr(same) == _dlpack_data_ptr(b), "round trip shares the payload")
    check(b.__dlpack_device__() == (1, 0), "CPU device")
    try:
        b.__dlpack__(dl_device=(2, 0))
        check(False, "dl_device of another device is refused")
    except BufferError:
        pass
    if rt._np is None:
        return
    np = rt._np
    # numpy -> library: no copy, the producer's memory is the buffer's payload.
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    fa = rt.from_dlpack(a)
    check(fa.size == 12 and fa.dtype == "float32", "imported shape flattened")
    check(_dlpack_data_ptr(fa) == a.ctypes.data, "import shares numpy's memory")
    a[0, 0] = 42.0  # visible through the buffer: the same memory
    check(fa.to_list()[0] == 42.0 and rt.scale(fa, 2.0).to_list()[1] == 2.0, "shared values")
    del a
    gc.collect()
    check(fa.to_list()[11] == 11.0, "the buffer keeps numpy's array alive")
    ia = rt.from_dlpack(np.array([5, -6, 2 ** 40], dtype=np.int64))
    check(ia.dtype == "int64" and ia.to_int_list() == [5, -6, 2 ** 40], "int64 import")
    check(rt.from_dlpack(np.array([3], dtype=np.int32)).dtype == "int32", "int32 import")
    # library -> numpy: np.from_dlpack shares the payload.
    src = rt.Buffer.from_list([1.5, -2.5, 3.0])
    view = np.from_dlpack(src)
    check(view.dtype == np.float32 and view.tolist() == [1.5, -2.5, 3.0], "numpy reads it")
    check(view.ctypes.data == _dlpack_data_ptr(src), "export shares the payload")
    del src
    gc.collect()
    check(view.tolist() == [1.5, -2.5, 3.0], "numpy's view keeps the buffer alive")
    check(np.from_dlpack(b).tolist() == b.to_int_list(), "int64 export")
    check(b.to_numpy().dtype == np.int64, "to_numpy keeps the type")
    # Refused: strided, float64, read-only (nothing leaks, numpy keeps ownership).
    for bad, status in ((np.arange(8, dtype=np.float32)[::2], "TLRT_ERR_UNSUPPORTED"),
                        (np.zeros(3, dtype=np.float64), "TLRT_ERR_UNSUPPORTED")):
        expect_error(lambda: rt.from_dlpack(bad), status, ("argument managed",), "refused import")
    ro = np.zeros(4, dtype=np.float32)
    ro.flags.writeable = False
    try:
        rt.from_dlpack(ro)
        check(False, "a read-only array is refused")
    except (rt.TlrtError, BufferError) as e:  # numpy may refuse to export it as writable itself
        check(not isinstance(e, rt.TlrtError) or e.name == "TLRT_ERR_UNSUPPORTED", str(e))
    del fa, ia, view, same, b, c
    gc.collect()
    check(rt.stats()["live_handles"] == start, "every imported and exported buffer was freed")



def _faults():
    """index_faults(CPU) read and reset: what the calls since the last reset counted."""
    return rt.index_faults(rt.CPU, reset=True)


def test_index_buffers():
    """Index lists as int32 / int64 Buffers: rt.gather_vec / scatter_add / gather_rows /
    scatter_add_rows dispatch to the _ibuf entry points when idx is a Buffer and give the bits of
    the host-list path; entries that are not an index read 0, are skipped and are counted by
    rt.index_faults; None for the scatters' x / mat is the zero target."""
    _faults()  # start from 0 (the counter is process wide)
    check("k" not in rt.gather_vec.__signature__.parameters, "k is the index list's length")
    for name in ("gather_vec", "scatter_add", "gather_rows", "scatter_add_rows"):
        check(rt.OPS[name] is getattr(rt, name) and name + "_ibuf" in rt.OPS,
              f"rt.{name} is the dispatching wrapper")
        check(getattr(rt, name).__signature__ == rt.OPS[name + "_ibuf"].__signature__,
              f"{name} and {name}_ibuf take the same parameters")
    check("index_faults" not in rt.OPS and callable(rt.index_faults), "index_faults by hand")
    # Values whose sums depend on the order: the ibuf path must give the list path's bits.
    v = rt.Buffer.from_list([1.5, -2.0, 3.25, 1e8, -0.0, 7.0])
    vals = rt.Buffer.from_list([1e8, 1.0, -1e8, 3.0, 0.5, 2.0 ** -20, -7.5, 1e-3])
    sidx = [3, 3, 3, 0, 3, 5, 99, 3]          # duplicates, one out of range (skipped)
    gidx = [5, 0, 99, 2, 2, 4, 1 << 59]       # out of range (< 2^60) reads +0, not counted
    for dtype in ("int64", "int32"):
        g = [i if i < 1 << 31 else 77 for i in gidx] if dtype == "int32" else gidx
        got = rt.gather_vec(v, 6, rt.Buffer.from_ints(g, dtype=dtype))
        want = rt.gather_vec(v, 6, g)
        check(got.to_bytes() == want.to_bytes(), f"gather_vec {dtype}: {got.to_list()} vs "
              f"{want.to_list()}")
        check(want.to_list()[:3] == [7.0, 1.5, 0.0], "gather_vec list path")
        ib = rt.Buffer.from_ints(sidx, dtype=dtype)
        got = rt.scatter_add(v, vals, 6, ib)
        want = rt.scatter_add(v, vals, 6, sidx)
        check(got.to_bytes() == want.to_bytes(),
              f"scatter_add {dtype}: {got.to_list()} vs {want.to_list()}")
        got0 = rt.scatter_add(None, vals, 6, ib)   # NULL x: the zero vector
        want0 = rt.scatter_add(rt.Buffer.zeros(6), vals, 6, sidx)
        check(got0.to_bytes() == want0.to_bytes(), f"scatter_add(None) {dtype}")
        check(rt.scatter_add(None, vals, 6, sidx).to_bytes() == want0.to_bytes(),
              "scatter_add(None) with a host list: a zero buffer")
        check(rt.scatter_add(x=None, vals=vals, n=6, idx=ib).to_bytes() == want0.to_bytes(),
              "keywords")
        # Rows: a (4, 3) matrix, (k, 3) values.
        mat = rt.Buffer.from_list([float(i) - 5.5 for i in range(12)])
        ridx = [2, 0, 2, 7, 2, 3]
        rvals = rt.Buffer.from_list([1e7, 1.0, -2.0, 0.25, 3.0, 1e-4, -1e7, 5.0, 0.5,
                                     9.0, 9.0, 9.0, 0.125, -1.0, 2.0 ** -30, 4.0, 4.0, 4.0])
        ri = rt.Buffer.from_ints(ridx, dtype=dtype)
        got = rt.gather_rows(mat, 4, 3, ri)
        want = rt.gather_rows(mat, 4, 3, ridx)
        check(got.size == 18 and got.to_bytes() == want.to_bytes(), f"gather_rows {dtype}")
        check(rt.gather_rows(mat=mat, rows=4, cols=3, idx=ri).to_bytes() == want.to_bytes(),
              "gather_rows keywords")
        got = rt.scatter_add_rows(mat, rvals, 4, 3, ri)
        want = rt.scatter_add_rows(mat, rvals, 4, 3, ridx)
        check(got.to_bytes() == want.to_bytes(),
              f"scatter_add_rows {dtype}: {got.to_list()} vs {want.to_list()}")
        got0 = rt.scatter_add_rows(None, rvals, 4, 3, ri)
        want0 = rt.scatter_add_rows(rt.Buffer.zeros(12), rvals, 4, 3, ridx)
        check(got0.to_bytes() == want0.to_bytes(), f"scatter_add_rows(None) {dtype}")
        check(rt.scatter_add_rows(None, rvals, 4, 3, ridx).to_bytes() == want0.to_bytes(),
              "scatter_add_rows(None) with a host list")
        # Empty index buffers: an empty gather, a copy of x.
        e = rt.Buffer.from_ints([], dtype=dtype)
        check(rt.gather_vec(v, 6, e).size == 0, "empty gather")
        check(rt.scatter_add(v, rt.Buffer.from_list([]), 6, e).to_bytes() == v.to_bytes(),
              "empty scatter: a bit-exact copy of x")
    check(_faults() == 0, "no entry above was outside [0, 2^60)")

    # Entries that are not an index: read as 0, skipped by the scatters, counted.
    bad64 = rt.Buffer.from_ints([-1, 0, 1 << 62, 7, -(1 << 63), 5])
    got = rt.gather_vec(v, 6, bad64)
    check(got.to_list() == [0.0, 1.5, 0.0, 0.0, 0.0, 7.0], f"negative entries read 0: "
          f"{got.to_list()}")
    check(rt.index_faults(rt.CPU) == 3, "-1, 2^62 and -2^63 counted (7 >= n is a value)")
    check(rt.index_faults(rt.CPU) == 3, "reading without reset keeps the count")
    check(rt.index_faults(rt.CPU, reset=True) == 3 and rt.index_faults(rt.CPU) == 0,
          "reset=True returns the count and sets it to 0")
    bad32 = rt.Buffer.from_ints([3, -1, 3, -2147483648, 0], dtype="int32")
    svals = rt.Buffer.from_list([1.0, 100.0, 2.0, 1000.0, 4.0])
    got = rt.scatter_add(v, svals, 6, bad32)
    want = rt.scatter_add(v, svals, 6, [3, 6, 3, 6, 0])  # skipped like out-of-range entries
    check(got.to_bytes() == want.to_bytes(), f"negative int32 entries skipped: {got.to_list()}")
    check(_faults() == 2, "two negative int32 entries counted")
    got = rt.scatter_add_rows(None, rvals, 4, 3, rt.Buffer.from_ints([2, -1, 2, 7, -5, 3]))
    want = rt.scatter_add_rows(None, rvals, 4, 3, [2, 4, 2, 7, 4, 3])
    check(got.to_bytes() == want.to_bytes(), "negative row entries skipped")
    got = rt.gather_rows(mat, 4, 3, rt.Buffer.from_ints([-3, 1], dtype="int32"))
    check(got.to_list() == [0.0] * 3 + [-2.5, -1.5, -0.5], f"negative row reads zeros: "
          f"{got.to_list()}")
    check(_faults() == 3, "scatter_add_rows and gather_rows count theirs")
    # The host list keeps its strictness: negative entries are refused before the call.
    try:
        rt.gather_vec(v, 6, [0, -1])
        check(False, "a negative host-list entry reached the library")
    except ValueError:
        pass
    expect_error(lambda: rt.gather_vec(v, 6, [1 << 60]), "TLRT_ERR_INDEX", ("idx",),
                 "host-list entry >= 2^60")
    # Wrong element types, sizes.
    expect_error(lambda: rt.gather_vec(v, 6, rt.Buffer.from_list([0.0, 1.0])), "TLRT_ERR_DTYPE",
                 ("idx",), "float32 index buffer")
    expect_error(lambda: rt.gather_vec(rt.Buffer.from_ints([1, 2]), 2, rt.Buffer.from_ints([0])),
                 "TLRT_ERR_DTYPE", (), "integer data")
    expect_error(lambda: rt.gather_vec(v, 5, rt.Buffer.from_ints([0])), "TLRT_ERR_SHAPE", (),
                 "n != size of v")
    expect_error(lambda: rt.scatter_add(None, vals, 6, rt.Buffer.from_ints([0, 1])),
                 "TLRT_ERR_SHAPE", (), "vals of another size than idx")
    expect_error(lambda: rt.scatter_add_rows(mat, rvals, 4, 3, rt.Buffer.from_ints([0])),
                 "TLRT_ERR_SHAPE", (), "vals rows != size of idx")
    try:
        rt.gather_vec(None, 6, rt.Buffer.from_ints([0]))
        check(False, "None for a required buffer")
    except TypeError:
        pass
    check(_faults() == 0, "no fault counted by the failing calls")

    if rt._np is None:
        print("python: numpy not importable, numpy index buffers not checked")
        return
    np = rt._np
    # numpy integer arrays -> Buffer.from_ints (the type kept or chosen; values checked).
    a32 = np.array([5, 0, 3, 3], dtype=np.int32)
    b32 = rt.Buffer.from_ints(a32)
    check(b32.dtype == "int32" and b32.to_int_list() == [5, 0, 3, 3], "numpy int32 stays int32")
    b64 = rt.Buffer.from_ints(a32.astype(np.int64))
    check(b64.dtype == "int64" and b64.to_int_list() == [5, 0, 3, 3], "numpy int64")
    check(rt.Buffer.from_ints(a32, dtype="int64").dtype == "int64", "explicit dtype")
    check(rt.Buffer.from_ints(np.array([1, 2], dtype=np.uint8)).dtype == "int64",
          "other integer types -> int64")
    check(rt.Buffer.from_ints(array.array("i", [1, -2])).dtype == "int32", "array('i') -> int32")
    check(rt.Buffer.from_ints([1, 2]).dtype == "int64", "a list -> int64")
    m = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]   # not contiguous, 2-D
    check(rt.Buffer.from_ints(m).to_int_list() == [0, 2, 4, 6, 8, 10], "strided 2-D flattened")
    for bad, dtype, exc in ((np.array([2 ** 63], dtype=np.uint64), None, OverflowError),
                            (np.array([2 ** 31], dtype=np.int64), "int32", OverflowError),
                            (np.array([1.0, 2.0]), None, TypeError),
                            (np.array([True]), None, TypeError)):
        try:
            rt.Buffer.from_ints(bad, dtype=dtype)
            check(False, f"from_ints accepted {bad!r} as {dtype}")
        except exc:
            pass
    check(rt.Buffer.from_ints(np.array([2 ** 31 - 1, -2 ** 31], dtype=np.int64),
                              dtype="int32").to_int_list() == [2 ** 31 - 1, -2 ** 31],
          "int64 values that fit int32")
    # numpy arrays as index lists: the host list (ndarray) path and the Buffer path agree.
    ia = np.array(sidx, dtype=np.int64)
    check(rt.scatter_add(v, vals, 6, ia).to_bytes() ==
          rt.scatter_add(v, vals, 6, rt.Buffer.from_ints(ia)).to_bytes(), "ndarray vs Buffer")
    # DLPack: an index buffer sharing numpy's memory (no copy).
    shared = rt.from_dlpack(ia)
    check(shared.dtype == "int64" and _dlpack_data_ptr(shared) == ia.ctypes.data,
          "index buffer shares numpy's memory")
    check(rt.scatter_add(v, vals, 6, shared).to_bytes() ==
          rt.scatter_add(v, vals, 6, sidx).to_bytes(), "DLPack index buffer")
    check(_faults() == 0, "numpy paths counted nothing")


def test_tape_index_buffers():
    """The Tape's gather / scatter / cross_entropy methods with index Buffers: the _ibuf records,
    values and gradients equal to the host-list records; bad labels counted and contributing 0;
    the tape keeps the index buffer alive."""
    _faults()

    def run(labels, idx, ridx):
        with rt.Tape(rt.CPU) as t:
            lg = t.leaf(rt.buffer([0.5, -1.0, 2.0, 0.25, 3.0, -0.5]), [2, 3], True)
            ce = t.cross_entropy(lg, labels)
            v = t.leaf(rt.buffer([1.0, 2.0, 3.0, 4.0]), [4], True)
            g = t.gather_vec(v, idx)
            s = t.scatter_add(v, g, idx)
            m = t.leaf(rt.buffer([float(i) for i in range(6)]), [3, 2], True)
            gr = t.gather_rows(m, ridx)
            sr = t.scatter_add_rows(m, gr, ridx)
            w = t.leaf(rt.buffer([1.0, -2.0, 0.5, 0.25]), [4], False)
            loss = t.add(t.add(ce, t.reduce_sum(t.mul(s, w))),
                         t.add(t.reduce_sum(t.mul(gr, gr)), t.reduce_sum(sr)))
            if isinstance(labels, rt.Buffer):   # the tape holds its own references
                labels.free(); idx.free(); ridx.free()
            t.backward(loss)
            out = [t.value(n).to_bytes() for n in (ce, g, s, gr, sr, loss)]
            grads = [t.grad(n).to_bytes() for n in (lg, v, m)]
            return out, grads, t.shape(ce)[0], t.shape(gr)[0]

    want = run([2, 0], [3, 0, 3, 9], [2, 0, 2])
    for dtype in ("int64", "int32"):
        got = run(rt.Buffer.from_ints([2, 0], dtype=dtype),
                  rt.Buffer.from_ints([3, 0, 3, 9], dtype=dtype),
                  rt.Buffer.from_ints([2, 0, 2], dtype=dtype))
        check(got[2] == [] and got[3] == [3, 2], f"shapes {got[2]} {got[3]}")
        check(got[0] == want[0], f"tape values with {dtype} index buffers equal the list ones")
        check(got[1] == want[1], f"tape gradients with {dtype} index buffers equal the list ones")
    check(_faults() == 0, "nothing counted")
    # cross_entropy with labels out of [0, classes): the sample contributes 0 (the mean still
    # divides by the batch), receives no gradient, and is counted (label == classes must not
    # read the next row's first logit).
    rows = [[0.5, -1.0, 2.0], [0.25, 3.0, -0.5]]
    lse = [math.log(sum(math.exp(z) for z in r)) for r in rows]
    for labels, want_loss in (([3, 1], -(rows[1][1] - lse[1]) / 2),
                              ([-1, 1], -(rows[1][1] - lse[1]) / 2),
                              ([0, 1], -((rows[0][0] - lse[0]) + (rows[1][1] - lse[1])) / 2)):
        with rt.Tape(rt.CPU) as t:
            lg = t.leaf(rt.buffer([z for r in rows for z in r]), [2, 3], True)
            ce = t.cross_entropy(lg, rt.Buffer.from_ints(labels, dtype="int32"))
            t.backward(ce)
            loss = t.value(ce).to_list()[0]
            check(abs(loss - want_loss) < 1e-6, f"labels {labels}: loss {loss} vs {want_loss}")
            grad = t.grad(lg).to_list()
            bad = labels[0] not in (0, 1, 2)
            check(not bad or grad[:3] == [0.0, 0.0, 0.0],
                  f"labels {labels}: the bad sample gets no gradient {grad[:3]}")
        check(_faults() == (1 if bad else 0), f"labels {labels}: faults counted")
    with rt.Tape(rt.CPU) as t:
        lg = t.leaf(rt.buffer([0.0] * 6), [2, 3], True)
        expect_error(lambda: t.cross_entropy(lg, rt.Buffer.from_list([0.0, 1.0])),
                     "TLRT_ERR_DTYPE", ("labels",), "float labels")
        try:
            t.cross_entropy(lg, [0])
            check(False, "a host label list of the wrong length reached the library")
        except ValueError:
            pass
    # cross_entropy(..., ignore_index=...): the ignored rows leave the sum and the denominator
    # (PyTorch's F.cross_entropy(..., ignore_index=...)); a host list is uploaded as int64; all
    # rows ignored gives NaN; ignore_index=None is the plain cross_entropy.
    for labels, ig, want_loss in (([-100, 1], -100, -(rows[1][1] - lse[1])),
                                  ([2, 1], 2, -(rows[1][1] - lse[1])),
                                  ([0, 1], -100, -((rows[0][0] - lse[0]) + (rows[1][1] - lse[1])) / 2),
                                  ([5, 5], 5, float("nan"))):
        for lab in (labels, rt.Buffer.from_ints(labels, dtype="int32")):
            with rt.Tape(rt.CPU) as t:
                lg = t.leaf(rt.buffer([z for r in rows for z in r]), [2, 3], True)
                ce = t.cross_entropy(lg, lab, ignore_index=ig)
                loss = t.value(ce).to_list()[0]
                check(abs(loss - want_loss) < 1e-6 or (math.isnan(want_loss) and math.isnan(loss)),
                      f"ignore_index {ig}, labels {labels}: loss {loss} vs {want_loss}")
                t.backward(ce)
                grad = t.grad(lg).to_list()
                check(labels[0] != ig or grad[:3] == [0.0, 0.0, 0.0],
                      f"ignore_index {ig}: the ignored row gets no gradient {grad[:3]}")
        check(_faults() == 0, f"ignore_index {ig}: nothing counted")
    loss, lse_b = rt.cross_entropy_fwd(rt.buffer([z for r in rows for z in r]),
                                       rt.Buffer.from_ints([1, -100]), 2, 3, -100)
    check(abs(loss.to_list()[0] + (rows[0][1] - lse[0])) < 1e-6, "rt.cross_entropy_fwd")
    check(lse_b.size == 4, "lse holds (m, log s) per row")


def test_tape_release():
    """Recording calls return Nodes (ints) that release their node when collected
    (tlrt_tape_release): a value no backward rule reads is freed at once, one a rule reads when
    that rule is freed. backward frees the graph as it goes (a second one raises
    TLRT_ERR_RELEASED) unless retain_graph=True; use after release raises TLRT_ERR_RELEASED;
    Nodes of an older generation or of a freed tape release nothing; a small MLP gives the same
    bits whether every Node is kept (retain_graph=True) or not, with fewer live bytes."""
    gc.collect()
    n = 4096
    live = lambda: rt.stats()["live_bytes"]  # noqa: E731
    with rt.Tape(rt.CPU) as t:
        x = t.leaf(rt.buffer([0.5] * n), [n], True)
        w = t.leaf(rt.buffer([0.25 * (i % 7) for i in range(n)]), [n], True)
        check(isinstance(x, rt.Node) and isinstance(x, int) and int(x) & 0xFFFFFFFF == 0,
              "a Node is an int id")
        check(type(x + 0) is int and type(__import__("copy").copy(x)) is int,
              "arithmetic and copies give plain ints")
        base = live()
        a = t.scale(x, 2.0)  # its rule reads nothing
        check(live() == base + 4 * n, "the scaled value is live")
        del a
        check(live() == base, "a collected Node's value no rule reads is freed at once")
        b = t.tanh(t.scale(x, 2.0))  # tanh's rule reads the temporary scaled value
        check(live() == base + 8 * n, f"tanh keeps its input: {live() - base} bytes")
        del b
        check(live() == base + 4 * n, "the tanh output goes, its input stays for the rule")
        # Use after release.
        y = t.exp(x)
        t.release(y)
        expect_error(lambda: t.value(y), "TLRT_ERR_RELEASED", ("tlrt_tape_value",), "value")
        expect_error(lambda: t.exp(y), "TLRT_ERR_RELEASED", ("tlrt_tape_exp", "argument x"),
                     "record")
        expect_error(lambda: t.release(y), "TLRT_ERR_RELEASED", ("tlrt_tape_release",),
                     "release twice")
        msg = rt.last_error()
        del y  # released by hand: collecting it calls nothing
        check(rt.last_error() == msg, "a Node released by hand is not released again")
        # backward frees the graph; retain_graph=True keeps it.
        loss = t.reduce_sum(t.mul(t.tanh(x), w))
        t.backward(loss)
        g1 = t.grad(w).to_list()
        expect_error(lambda: t.backward(loss), "TLRT_ERR_RELEASED", ("tlrt_tape_backward_ex",),
                     "a second backward over the freed graph")
        check(t.grad(w).to_list() == g1, "the failed backward changed nothing")
        loss2 = t.reduce_sum(t.mul(t.tanh(x), w))
        t.backward(loss2, retain_graph=True)
        t.backward(loss2)
        f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]  # noqa: E731
        check(t.grad(w).to_list() == [f32(3 * v) for v in g1],
              "retain_graph=True keeps the graph: three backwards accumulate")
        expect_error(lambda: t.backward_seed(loss2, rt.buffer([1.0])), "TLRT_ERR_RELEASED",
                     ("tlrt_tape_backward_ex",), "backward_seed over the freed graph")
        check(t.value(loss).size == 1, "the loss the host holds stays readable")
        # A stale Node (recorded before a reset) releases nothing when collected.
        z = t.exp(x)
        t.reset()
        msg = rt.last_error()
        del z, x, w, loss, loss2
        check(rt.last_error() == msg, "stale Nodes release nothing")
    # Nodes outliving their tape (freed, or collected) release nothing.
    t2 = rt.Tape(rt.CPU)
    n2 = t2.leaf(rt.buffer([1.0]), [1], False)
    t2.free()
    t3 = rt.Tape(rt.CPU)
    n3 = t3.leaf(rt.buffer([1.0]), [1], False)
    del t3
    gc.collect()
    msg = rt.last_error()
    del n2, n3
    check(rt.last_error() == msg, "Nodes of a freed or collected tape release nothing")

    def mlp(keep):
        """A (6 -> 8 -> relu -> 3) MLP step; keep: every Node kept, retain_graph=True."""
        held = []

        def k(node):
            if keep:
                held.append(node)
            return node

        with rt.Tape(rt.CPU) as t:
            W1 = t.leaf(rt.buffer([math.sin(i) for i in range(48)]), [8, 6], True)
            b1 = t.leaf(rt.buffer([0.1 * i for i in range(8)]), [8], True)
            W2 = t.leaf(rt.buffer([math.cos(i) for i in range(24)]), [3, 8], True)
            X = t.leaf(rt.buffer([math.sin(3 * i) for i in range(60)]), [10, 6], False)
            z = k(t.linear(k(t.relu(k(t.linear(X, W1, b1)))), W2, rt.TLRT_TAPE_NONE))
            loss = t.cross_entropy(z, [i % 3 for i in range(10)])
            del z
            forward_bytes = live()
            t.backward(loss, retain_graph=keep)
            return ([t.value(loss).to_bytes()] + [t.grad(p).to_bytes() for p in (W1, b1, W2)],
                    forward_bytes)

    kept, kept_bytes = mlp(True)
    freed, freed_bytes = mlp(False)
    check(kept == freed, "the same loss and gradients, bit for bit, with Nodes released and the "
          "graph freed")
    check(freed_bytes < kept_bytes, f"fewer live bytes after the forward: {freed_bytes} released, "
          f"{kept_bytes} kept")


if __name__ == "__main__":
    sys.exit(main())
