"""Python binding of libtorchlean_rt through ctypes: no compiled extension, no required packages.

The C headers are the single source of truth. The generator (bindings/gen/gen_bindings.py) parses
them with the bindings' one C-header parser (bindings/gen/tlrt_abi.py) and writes the declarations
into _torchlean_rt_abi.py next to this file: every TLRT_API prototype (with its doc comment), the
tlrt_status enum, the integer #defines, the tlrt_allocator_stats struct, the C -> ctypes type table
and the classification the op wrappers need. At import this module reads no header; it
  1. finds the shared library (TORCHLEAN_RT_LIB, else a list of candidates, see _lib_candidates),
  2. loads the generated declarations (_torchlean_rt_abi.py, next to this file),
  3. sets argtypes/restype of every TLRT_API function from them (an unknown C type raises
     HeaderParseError: nothing is guessed), and checks the ABI major version,
  4. generates one Python function per op of the op headers from its prototype:
     `const tlrt_buffer *` parameters take Buffer objects, `double` floats, `uint64_t` ints,
     `tlrt_device` devices; trailing `tlrt_buffer **` parameters become the return value (a Buffer,
     or a tuple of Buffers for max_bwd/min_bwd). Example: rt.add(a, b), rt.clamp(x, -1.0, 1.0),
     rt.rand_normal(rt.CPU, 1000, 0.0, 1.0, key).

Every failing call raises TlrtError (.status, .name, .message). Buffers own one reference to their
handle; the finalizer frees it (and never raises); .free() frees it now.
numpy is optional: Buffer.from_buffer accepts any buffer-protocol object (array('f'), numpy
float32/float64 arrays), and to_numpy() needs numpy only when called.
"""
import array as _array
import ctypes
import ctypes.util
import glob as _glob
import importlib
import importlib.util
import inspect as _inspect
import os
import sys

__all__ = ["TlrtError", "HeaderParseError", "Buffer", "CPU", "cuda", "stats", "call", "lib",
           "PROTOTYPES", "STATUS", "DEFINES", "OPS"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))
_LIBNAME = "torchlean_rt"
_DECLS = "_torchlean_rt_abi"   # the generated declarations, next to this file


class TlrtError(Exception):
    """A tlrt_* call returned a status other than TLRT_OK.

    status:   the tlrt_status code (int)
    name:     its name from tlrt_status_string ("TLRT_ERR_SHAPE")
    message:  tlrt_last_error() right after the failure ("tlrt_add: argument b has ...")
    function: the C function that failed
    """

    def __init__(self, status, name, message, function=None):
        self.status = int(status)
        self.name = name
        self.message = message
        self.function = function
        super().__init__(f"{name} ({self.status}): {message}")


class HeaderParseError(Exception):
    """A declaration or C type this binding does not know how to map (fails loudly)."""


# ---------------------------------------------------------------------------------------------
# The declarations: generated from the headers (no header is parsed at import)
# ---------------------------------------------------------------------------------------------

class AllocatorStatsBase(ctypes.Structure):
    """Base of the tlrt_allocator_stats structure built from the generated declarations."""


class Prototype:
    """One TLRT_API function: name, return type, [(type, name)], header file and doc comment."""

    def __init__(self, name, restype, params, header, doc):
        self.name, self.restype, self.params, self.header, self.doc = (
            name, restype, params, header, doc)

    def __repr__(self):
        ps = ", ".join(f"{t} {n}" for t, n in self.params) or "void"
        return f"{self.restype} {self.name}({ps})"


def _load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _load_declarations():
    """The generated module _torchlean_rt_abi (a sibling module inside a package, else the file
    next to this one)."""
    if __package__:
        return importlib.import_module("." + _DECLS, __package__)
    path = os.path.join(_HERE, _DECLS + ".py")
    if not os.path.isfile(path):
        raise ImportError(f"{path} is missing: torchlean_rt.py needs the declarations "
                          "bindings/gen/gen_bindings.py generates next to it (install both files)")
    return _load_module(_DECLS, path)


def _header_parser():
    """The bindings' C-header parser, bindings/gen/tlrt_abi.py of the source tree (only
    parse_header_text needs it)."""
    path = os.path.join(_REPO, "bindings", "gen", "tlrt_abi.py")
    if not os.path.isfile(path):
        raise ImportError(f"parse_header_text needs the header parser {path} of the source tree "
                          "(torchlean_rt itself reads its generated declarations, not headers)")
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    try:
        return _load_module("_torchlean_rt_tlrt_abi", path)
    finally:
        sys.dont_write_bytecode = dont_write


def parse_header_text(text, header="<string>"):
    """Parses one header's text with the bindings' C-header parser (bindings/gen/tlrt_abi.py,
    the parser the declarations of this module are generated with; needs the source tree):
    returns (prototypes, enum values, defines, structs).

    prototypes: list of Prototype; enums: {name: int}; defines: {name: int} (integer object-like
    TLRT_* macros); structs: {name: [(type, field)]}. Raises HeaderParseError for declarations
    it cannot read."""
    A = _header_parser()
    abi = A.Abi()
    try:
        A.parse_header(text, header, abi)
    except A.AbiError as e:
        raise HeaderParseError(str(e)) from None
    return ([Prototype(p.name, p.restype, list(p.params), p.header, p.doc) for p in abi.protos],
            dict(abi.enums), {n: v for n, (v, _) in abi.defines.items()},
            {n: list(f) for n, f in abi.structs.items()})


_ABI = _load_declarations()
PROTOTYPES = {}   # name -> Prototype
for _name, _restype, _params, _header, _doc in _ABI.PROTOTYPES:
    if _name in PROTOTYPES:
        raise HeaderParseError(f"{_header}: {_name} declared twice")
    PROTOTYPES[_name] = Prototype(_name, _restype, [tuple(p) for p in _params], _header, _doc)
STATUS = dict(_ABI.STATUS)     # "TLRT_ERR_SHAPE" -> 3
DEFINES = dict(_ABI.DEFINES)   # integer object-like macros: "TLRT_DEVICE_KIND_CUDA" -> 1
HEADERS = tuple(_ABI.HEADERS)  # the headers the declarations were generated from, in order
# The headers are not read at import (the declarations are generated); kept for compatibility.
INCLUDE_DIR = None

_STRUCTS = {}     # C struct name -> ctypes.Structure


def _ctype_of_spelling(spec, where):
    """A ctypes type from its spelling in the generated table: a ctypes name, POINTER(spelling),
    or a struct of the declarations."""
    if spec.startswith("POINTER(") and spec.endswith(")"):
        return ctypes.POINTER(_ctype_of_spelling(spec[len("POINTER("):-1], where))
    if spec in _STRUCTS:
        return _STRUCTS[spec]
    if spec.startswith("c_") and isinstance(getattr(ctypes, spec, None), type):
        return getattr(ctypes, spec)
    raise HeaderParseError(f"{where}: unknown ctypes spelling {spec!r}")


def ctype_of(t, where):
    """The ctypes type of a C type string of the headers; HeaderParseError if unknown."""
    spec = _ABI.CTYPES.get(t)
    if spec is None:
        raise HeaderParseError(f"{where}: unknown C type {t!r}; add it to PY_CTYPES of "
                               "bindings/gen/gen_bindings.py and regenerate")
    return _ctype_of_spelling(spec, where)


def _make_struct(name):
    fields = [(f, ctype_of(t, f"struct {name}: field {f}")) for t, f in _ABI.STRUCTS.get(name, ())]
    if not fields:
        raise HeaderParseError(f"struct {name} not found in the declarations")
    return type(name, (AllocatorStatsBase,), {"_fields_": fields})


AllocatorStats = _STRUCTS["tlrt_allocator_stats"] = _make_struct("tlrt_allocator_stats")


# ---------------------------------------------------------------------------------------------
# Library loading
# ---------------------------------------------------------------------------------------------

def _lib_candidates():
    """TORCHLEAN_RT_LIB alone if set (a file, or a directory holding the library); else the build
    directories of the repository, then ctypes.util.find_library, then the loader's search path."""
    env = os.environ.get("TORCHLEAN_RT_LIB")
    if env:
        if os.path.isdir(env):
            return sorted(_glob.glob(os.path.join(env, "lib" + _LIBNAME + ".so*"))) or [env]
        return [env]
    cands = sorted(_glob.glob(os.path.join(_REPO, "build*", "lib" + _LIBNAME + ".so")))
    found = ctypes.util.find_library(_LIBNAME)
    if found:
        cands.append(found)
    cands += ["lib" + _LIBNAME + ".so.1", "lib" + _LIBNAME + ".so"]
    return cands


def _load_library():
    errors = []
    for c in _lib_candidates():
        try:
            return ctypes.CDLL(c), c
        except OSError as e:
            errors.append(f"{c}: {e}")
    raise ImportError("cannot load lib" + _LIBNAME + " (set TORCHLEAN_RT_LIB to its path); tried:\n  "
                      + "\n  ".join(errors))


# ---------------------------------------------------------------------------------------------
# Setup at import: load, bind
# ---------------------------------------------------------------------------------------------

lib, LIB_PATH = _load_library()

for _proto in PROTOTYPES.values():
    try:
        _fn = getattr(lib, _proto.name)
    except AttributeError:
        raise ImportError(f"{LIB_PATH} does not export {_proto.name} (declared in "
                          f"{_proto.header}): library and headers do not match") from None
    _fn.restype = None if _proto.restype == "void" else ctype_of(_proto.restype, _proto.name)
    _fn.argtypes = [ctype_of(t, f"{_proto.name}({n})") for t, n in _proto.params]

_abi_major_lib = lib.tlrt_abi_version() >> 16
if _abi_major_lib != DEFINES.get("TLRT_ABI_VERSION_MAJOR"):
    raise ImportError(f"{LIB_PATH} has ABI major {_abi_major_lib}, the headers this binding was "
                      f"generated from ({_DECLS}.py) declare {DEFINES.get('TLRT_ABI_VERSION_MAJOR')}")

# Module constants: every status code and integer define (TLRT_OK, TLRT_ERR_SHAPE, ...).
globals().update(STATUS)
globals().update(DEFINES)

CPU = DEFINES["TLRT_DEVICE_CPU"]


def cuda(ordinal=0):
    """The device handle TLRT_DEVICE_CUDA(ordinal)."""
    return ((DEFINES["TLRT_DEVICE_KIND_CUDA"] << 16) | (int(ordinal) & 0xFFFF)) & 0xFFFFFFFF


def device_name(device):
    kind = (device >> 16) & 0xFF
    return "cpu" if kind == DEFINES["TLRT_DEVICE_KIND_CPU"] else f"cuda:{device & 0xFFFF}"


# ---------------------------------------------------------------------------------------------
# Calls and errors
# ---------------------------------------------------------------------------------------------

def status_string(status):
    return lib.tlrt_status_string(int(status)).decode()


def last_error():
    return lib.tlrt_last_error().decode(errors="replace")


def _check(status, fname):
    if status != 0:
        raise TlrtError(status, status_string(status), last_error(), fname)


def call(name, *args):
    """Calls tlrt_<name> (or the full name) and raises TlrtError unless it returns TLRT_OK."""
    fname = name if name.startswith("tlrt_") else "tlrt_" + name
    status = getattr(lib, fname)(*args)
    _check(status, fname)


# ---------------------------------------------------------------------------------------------
# Buffers
# ---------------------------------------------------------------------------------------------

try:  # optional
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is optional
    _np = None


def _as_device(device):
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"a device is an int (rt.CPU, rt.cuda(i)), not {type(device).__name__}")
    return device


class Buffer:
    """Owns one reference to a tlrt_buffer handle (float32 values on one device)."""

    __slots__ = ("_h", "__weakref__")
    _free_fn = lib.tlrt_buffer_free  # kept on the class: usable during interpreter shutdown

    def __init__(self, handle):
        """Takes over one reference of `handle` (an int from a tlrt_* out-parameter)."""
        if not handle:
            raise ValueError("Buffer needs a non-NULL handle")
        self._h = int(handle)

    # -- lifetime --
    def free(self):
        """Drops this object's reference now (idempotent). Later use raises TlrtError
        (TLRT_ERR_NULL_ARGUMENT)."""
        h, self._h = self._h, None
        if h:
            Buffer._free_fn(h)

    def __del__(self):
        try:
            h = getattr(self, "_h", None)
            if h:
                self._h = None
                Buffer._free_fn(h)
        except BaseException:  # a finalizer never raises
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    @property
    def handle(self):
        """The raw tlrt_buffer * as an int (None once freed)."""
        return self._h

    @property
    def freed(self):
        return self._h is None

    # -- creation --
    @classmethod
    def _out(cls, fname, *args):
        out = ctypes.c_void_p()
        status = getattr(lib, fname)(*args, ctypes.byref(out))
        _check(status, fname)
        return cls(out.value)

    @classmethod
    def from_buffer(cls, obj, device=CPU):
        """Uploads a buffer-protocol object of float32 ('f': array('f'), numpy float32) or float64
        ('d': array('d'), numpy float64, rounded to float32 by the library)."""
        device = _as_device(device)
        if _np is not None and isinstance(obj, _np.ndarray) and not obj.flags["C_CONTIGUOUS"]:
            obj = _np.ascontiguousarray(obj)
        mv = memoryview(obj)
        fmt = mv.format.lstrip("@=<")
        if mv.format.startswith(">") or fmt not in ("f", "d") or not mv.c_contiguous:
            raise TypeError(f"expected a contiguous native float32 or float64 buffer, got format "
                            f"{mv.format!r}")
        ctype = ctypes.c_float if fmt == "f" else ctypes.c_double
        fname = "tlrt_buffer_from_f32" if fmt == "f" else "tlrt_buffer_from_f64"
        n = mv.nbytes // ctypes.sizeof(ctype)
        if n == 0:
            return cls._out(fname, device, None, 0)
        # Zero-copy: the library copies the values before it returns, so it may read the caller's
        # memory directly (numpy's pointer, or the writable buffer's); a read-only non-numpy buffer
        # is copied once into bytes, whose pointer ctypes passes as is.
        if _np is not None and isinstance(obj, _np.ndarray):
            ptr, keep = obj.ctypes.data_as(ctypes.POINTER(ctype)), obj
        elif not mv.readonly:
            keep = (ctype * n).from_buffer(mv.cast("B"))
            ptr = ctypes.cast(keep, ctypes.POINTER(ctype))
        else:
            keep = mv.tobytes()
            ptr = ctypes.cast(ctypes.c_char_p(keep), ctypes.POINTER(ctype))
        try:
            return cls._out(fname, device, ptr, n)
        finally:
            del keep

    @classmethod
    def from_list(cls, values, device=CPU):
        """Uploads an iterable of numbers (each rounded to float32 by Python's array('f'))."""
        return cls.from_buffer(_array.array("f", values), device)

    @classmethod
    def from_f64(cls, values, device=CPU):
        """Uploads float64 values, rounded to float32 by the library (nearest-even)."""
        return cls.from_buffer(_array.array("d", values), device)

    @classmethod
    def from_bytes(cls, data, device=CPU):
        """Uploads little-endian float32 bytes (len(data) must be a multiple of 4)."""
        data = bytes(data)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data) if data else None
        ptr = ctypes.cast(buf, ctypes.POINTER(ctypes.c_uint8)) if data else None
        return cls._out("tlrt_buffer_from_bytes", _as_device(device), ptr, len(data))

    @classmethod
    def zeros(cls, n, device=CPU):
        return cls._out("tlrt_buffer_zeros", _as_device(device), n)

    @classmethod
    def full(cls, n, value, device=CPU):
        return cls._out("tlrt_buffer_full", _as_device(device), n, float(value))

    # -- properties --
    @property
    def size(self):
        n = ctypes.c_uint64()
        _check(lib.tlrt_buffer_size(self._h, ctypes.byref(n)), "tlrt_buffer_size")
        return n.value

    def __len__(self):
        return self.size

    @property
    def device(self):
        d = ctypes.c_uint32()
        _check(lib.tlrt_buffer_device(self._h, ctypes.byref(d)), "tlrt_buffer_device")
        return d.value

    @property
    def is_released(self):
        r = ctypes.c_bool()
        _check(lib.tlrt_buffer_is_released(self._h, ctypes.byref(r)), "tlrt_buffer_is_released")
        return r.value

    def release_storage(self):
        """Frees the payload now; returns True if this call freed it."""
        freed = ctypes.c_bool()
        _check(lib.tlrt_buffer_release_storage(self._h, ctypes.byref(freed)),
               "tlrt_buffer_release_storage")
        return freed.value

    def retain(self):
        """A second owner of the same handle (tlrt_buffer_retain)."""
        _check(lib.tlrt_buffer_retain(self._h), "tlrt_buffer_retain")
        return Buffer(self._h)

    def copy(self):
        return Buffer._out("tlrt_buffer_copy", self._h)

    def to(self, device):
        """A copy on `device` (tlrt_buffer_to_device)."""
        return Buffer._out("tlrt_buffer_to_device", self._h, _as_device(device))

    # -- download --
    def to_array(self):
        """The values as array('f')."""
        n = self.size
        out = _array.array("f", bytes(4 * n))
        ptr = (ctypes.c_float * n).from_buffer(out) if n else None
        _check(lib.tlrt_buffer_to_f32(self._h, ptr, n), "tlrt_buffer_to_f32")
        return out

    def to_list(self):
        return self.to_array().tolist()

    def copy_to(self, out):
        """Downloads into a writable, C-contiguous float32 buffer-protocol object of exactly
        size elements (array('f'), bytearray of 4*size bytes, numpy float32, memoryview): no
        intermediate copy. Returns out."""
        mv = memoryview(out)
        fmt = mv.format.lstrip("@=<")
        if mv.readonly or not mv.c_contiguous or mv.format.startswith(">") or fmt not in ("f", "B"):
            raise TypeError("copy_to needs a writable contiguous float32 (or byte) buffer, got "
                            f"format {mv.format!r}{' (read-only)' if mv.readonly else ''}")
        n = self.size
        if mv.nbytes != 4 * n:
            raise ValueError(f"copy_to: the target has {mv.nbytes} bytes, the buffer {4 * n}")
        if n:
            dst = (ctypes.c_float * n).from_buffer(mv.cast("B"))
            _check(lib.tlrt_buffer_to_f32(self._h, dst, n), "tlrt_buffer_to_f32")
        return out

    def __array__(self, dtype=None, copy=None):
        """numpy.asarray(buffer): a new float32 array (needs numpy)."""
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def to_f64_list(self):
        n = self.size
        out = (ctypes.c_double * n)()
        _check(lib.tlrt_buffer_to_f64(self._h, out if n else None, n), "tlrt_buffer_to_f64")
        return list(out)

    def to_bytes(self):
        n = self.size
        out = (ctypes.c_uint8 * (4 * n))()
        _check(lib.tlrt_buffer_to_bytes(self._h, out if n else None, 4 * n), "tlrt_buffer_to_bytes")
        return bytes(out)

    def to_numpy(self):
        """The values as a new numpy float32 array (needs numpy)."""
        if _np is None:
            raise ImportError("to_numpy needs numpy; use to_array() or to_list() without it")
        n = self.size
        out = _np.empty(n, dtype=_np.float32)
        ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if n else None
        _check(lib.tlrt_buffer_to_f32(self._h, ptr, n), "tlrt_buffer_to_f32")
        return out

    def __repr__(self):
        if self._h is None:
            return "Buffer(<freed>)"
        try:
            return f"Buffer(size={self.size}, device={device_name(self.device)})"
        except TlrtError as e:
            return f"Buffer(<{e.name}>)"


def _handle(b, fname, pname):
    if not isinstance(b, Buffer):
        raise TypeError(f"{fname}: argument {pname} must be a Buffer, not {type(b).__name__}")
    return b._h


# ---------------------------------------------------------------------------------------------
# Runtime helpers
# ---------------------------------------------------------------------------------------------

def abi_version():
    return lib.tlrt_abi_version()


def build_info():
    return lib.tlrt_build_info().decode()


def runtime_status():
    return lib.tlrt_runtime_status()


def device_count(kind):
    n = ctypes.c_uint32()
    _check(lib.tlrt_device_count(kind, ctypes.byref(n)), "tlrt_device_count")
    return n.value


def cuda_available():
    return runtime_status() == DEFINES["TLRT_RUNTIME_CUDA_READY"]


def synchronize(device=CPU):
    _check(lib.tlrt_synchronize(_as_device(device)), "tlrt_synchronize")


def allocator_trim(device=CPU):
    _check(lib.tlrt_allocator_trim(_as_device(device)), "tlrt_allocator_trim")


def set_deterministic(on):
    return bool(lib.tlrt_set_deterministic(bool(on)))


def get_deterministic():
    return bool(lib.tlrt_get_deterministic())


def stats(device=CPU):
    """tlrt_allocator_stats_get as a dict of the header's fields."""
    s = AllocatorStats()
    s.struct_size = ctypes.sizeof(AllocatorStats)
    _check(lib.tlrt_allocator_stats_get(_as_device(device), ctypes.byref(s)),
           "tlrt_allocator_stats_get")
    return {name: getattr(s, name) for name, _ in AllocatorStats._fields_}


# ---------------------------------------------------------------------------------------------
# Generated op wrappers: every function of the op headers that returns tlrt_status and writes
# buffers through trailing tlrt_buffer ** out-parameters.
# ---------------------------------------------------------------------------------------------

# Headers whose functions are ops; the runtime/buffer headers have hand-written wrappers above.
_OP_HEADERS = ("tlrt_elementwise.h", "tlrt_rng.h", "tlrt_reduce.h", "tlrt_layout.h",
               "tlrt_index.h", "tlrt_softmax.h", "tlrt_layer_norm.h", "tlrt_blas.h", "tlrt_fft.h",
               "tlrt_scan.h", "tlrt_optim.h", "tlrt_pool.h", "tlrt_attention.h", "tlrt_conv.h")
# Functions of those headers that are not ops (no output buffer): wrapped by hand or left to
# rt.call / rt.lib.
_NOT_OPS = {"tlrt_dgemm", "tlrt_set_allow_tf32", "tlrt_get_allow_tf32"}
_IN_KINDS = {"const tlrt_buffer *": "buffer", "tlrt_buffer *": "buffer", "double": "float",
             "uint64_t": "int", "uint32_t": "int32", "bool": "bool", "tlrt_device": "device",
             "const uint64_t *": "array64", "const uint32_t *": "array32",
             "tlrt_tape *": "tape", "const tlrt_tape *": "tape"}
# Trailing out-parameters other than buffers (the tape's node ids, counts, devices).
_OUT_SCALARS = {"uint64_t *": ctypes.c_uint64, "uint32_t *": ctypes.c_uint32,
                "tlrt_device *": ctypes.c_uint32, "bool *": ctypes.c_bool}
# The classification of bindings/gen/tlrt_abi.py, generated into the declarations:
# optional buffer arguments (None passes NULL): {(function, parameter)};
_OPTIONAL_BUFFERS = _ABI.OPTIONAL_BUFFERS
# arrays with no count parameter after them: the library reads as many entries as the named count
# (or the rank / first dimension / spatial rank of a tape node) says, so the wrapper checks the
# length first: {(function, parameter): ('param' | 'node_rank' | 'node_dim0' | 'node_spatial', name)};
_UNCOUNTED = _ABI.UNCOUNTED
# the count parameter right after an array: its length, filled in by the wrapper
# (rt.reduce_sum_axis(x, dims=[2, 3], axis=1)): {(function, count parameter): array parameter}.
_COUNTS = _ABI.COUNTS


def _make_op(proto):
    if proto.restype != "tlrt_status":
        raise HeaderParseError(f"{proto.name}: op does not return tlrt_status")
    ins, outs, seen_out = [], [], False
    params = proto.params
    for t, n in params:
        if t == "tlrt_buffer **" or t in _OUT_SCALARS:
            seen_out = True
            outs.append(t)
        elif seen_out:
            raise HeaderParseError(f"{proto.name}: input {n} after an out-parameter")
        elif t in _IN_KINDS:
            kind = _IN_KINDS[t]
            if kind in ("int", "int32") and (proto.name, n) in _COUNTS:
                ins.append((n, "length"))  # the length of the array before it
            else:
                ins.append((n, kind))
        else:
            raise HeaderParseError(f"{proto.name}: cannot generate a wrapper for parameter "
                                   f"{t} {n}")
    cfn, fname = getattr(lib, proto.name), proto.name
    nout = len(outs)
    names = [n for n, k in ins if k != "length"]
    nargs = len(names)

    def op(*args, **kwargs):
        if kwargs:  # keyword arguments by the header's parameter names
            args = list(args)
            for n in names[len(args):]:
                if n not in kwargs:
                    break
                args.append(kwargs.pop(n))
            if kwargs:
                raise TypeError(f"{fname[5:]}({', '.join(names)}): unexpected or repeated "
                                f"arguments {sorted(kwargs)}")
        if len(args) != nargs:
            raise TypeError(f"{fname[5:]}({', '.join(names)}) takes {nargs} arguments, "
                            f"{len(args)} given")
        cargs, it, last_len, values = [], iter(args), 0, {}
        for n, kind in ins:
            if kind == "length":
                cargs.append(last_len)
                values[n] = last_len
                continue
            a = next(it)
            values[n] = a
            if kind == "buffer":
                if a is None and (fname, n) in _OPTIONAL_BUFFERS:
                    cargs.append(None)
                else:
                    cargs.append(_handle(a, fname, n))
            elif kind == "tape":
                cargs.append(_tape_handle(a, fname))
            elif kind == "float":
                cargs.append(float(a))
            elif kind == "bool":
                cargs.append(bool(a))
            elif kind == "device":
                cargs.append(_as_device(a))
            elif kind in ("array64", "array32"):
                vals = [int(v) for v in a]
                bits = 64 if kind == "array64" else 32
                for v in vals:
                    if not 0 <= v < 1 << bits:
                        raise ValueError(f"{fname}: argument {n} has {v}, not a uint{bits}_t")
                ct = ctypes.c_uint64 if kind == "array64" else ctypes.c_uint32
                cargs.append((ct * len(vals))(*vals) if vals else None)
                last_len = len(vals)
                src = _UNCOUNTED.get((fname, n))
                if src is not None:
                    want = (values[src[1]] if src[0] == "param" else
                            _node_extent(values[params[0][1]], values[src[1]], src[0]))
                    if len(vals) != want:
                        raise ValueError(f"{fname}: argument {n} has {len(vals)} entries, "
                                         f"expected {want}")
            else:
                v = int(a)
                bits = 64 if kind == "int" else 32
                if not 0 <= v < 1 << bits:
                    raise ValueError(f"{fname}: argument {n} = {v} is not a uint{bits}_t")
                cargs.append(v)
        places = [ctypes.c_void_p() if t == "tlrt_buffer **" else _OUT_SCALARS[t]() for t in outs]
        status = cfn(*cargs, *[ctypes.byref(o) for o in places])
        _check(status, fname)
        res = tuple(Buffer(o.value) if t == "tlrt_buffer **" else o.value
                    for t, o in zip(outs, places))
        return None if nout == 0 else res[0] if nout == 1 else res

    op.__name__ = op.__qualname__ = proto.name[5:]
    op.__signature__ = _inspect.Signature(
        [_inspect.Parameter(n, _inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    op.__doc__ = f"{proto!r}\n\n{proto.doc}"
    return op


OPS = {}
for _proto in PROTOTYPES.values():
    if _proto.header in _OP_HEADERS and _proto.name not in _NOT_OPS:
        OPS[_proto.name[5:]] = _make_op(_proto)
# rt.add, rt.max_bwd, rt.rand_uniform, rt.reduce_sum_axis, ... Note that rt.abs/max/min shadow the
# builtins inside this module's namespace: code in this module must not call abs(), max() or min().
globals().update(OPS)
__all__ += sorted(OPS)


# ---------------------------------------------------------------------------------------------
# The autograd tape (abi/tlrt_tape.h): one method per tlrt_tape_* recording call, generated from
# its prototype like the ops (node ids are ints; index lists are sequences).
# ---------------------------------------------------------------------------------------------

class Tape:
    """Owns a tlrt_tape * (one thread at a time). Nodes are int ids (indices into the tape).

        t = rt.Tape(rt.CPU)
        w = t.leaf(W, [out, in], True); x = t.leaf(X, [batch, in], False)
        loss = t.mse_loss(t.linear(x, w, rt.TLRT_TAPE_NONE), y)
        t.backward(loss); dW = t.grad(w); t.reset()

    Every tlrt_tape_X is the method X (t.add(a, b), t.matmul(a, b, False, True), t.value(n),
    t.grad(n), t.backward(n), t.reset(), ...); t.shape(n) -> (dims, requires_grad). The finalizer
    frees the tape; free() frees it now."""

    __slots__ = ("_h", "__weakref__")
    _free_fn = lib.tlrt_tape_free if "tlrt_tape_free" in PROTOTYPES else None

    def __init__(self, device=CPU):
        out = ctypes.c_void_p()
        _check(lib.tlrt_tape_new(_as_device(device), ctypes.byref(out)), "tlrt_tape_new")
        self._h = out.value

    def free(self):
        h, self._h = self._h, None
        if h:
            Tape._free_fn(h)

    def __del__(self):
        try:
            h = getattr(self, "_h", None)
            if h:
                self._h = None
                Tape._free_fn(h)
        except BaseException:  # a finalizer never raises
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    @property
    def handle(self):
        return self._h

    def shape(self, node):
        """(dims as a list, requires_grad) of a node."""
        dims = (ctypes.c_uint64 * DEFINES["TLRT_TAPE_MAX_RANK"])()
        rank, rg = ctypes.c_uint32(), ctypes.c_bool()
        _check(lib.tlrt_tape_shape(_tape_handle(self, "tlrt_tape_shape"), int(node), dims,
                                   ctypes.byref(rank), ctypes.byref(rg)), "tlrt_tape_shape")
        return list(dims[:rank.value]), rg.value

    def __repr__(self):
        return "Tape(<freed>)" if self._h is None else f"Tape(nodes={self.node_count()})"


def _tape_handle(t, fname):
    if not isinstance(t, Tape):
        raise TypeError(f"{fname}: expected a Tape, not {type(t).__name__}")
    if t._h is None:
        raise ValueError(f"{fname}: the tape was freed")
    return t._h


def _node_extent(tape, node, what):
    dims, _ = tape.shape(node)
    if what == "node_rank":
        return len(dims)
    if what == "node_spatial":
        return len(dims) - 2 if len(dims) > 2 else 0  # (max is rt.max in this module)
    return dims[0] if dims else 1


TAPE_METHODS = []
_m = None
for _proto in PROTOTYPES.values():
    if (_proto.name.startswith("tlrt_tape_") and _proto.params and _proto.params[0][0] in
            ("tlrt_tape *", "const tlrt_tape *") and _proto.restype == "tlrt_status"
            and _proto.name not in ("tlrt_tape_shape",)):
        _m = _make_op(_proto)
        _m.__name__ = _m.__qualname__ = _proto.name[len("tlrt_tape_"):]
        setattr(Tape, _m.__name__, _m)
        TAPE_METHODS.append(_m.__name__)
__all__ += ["Tape", "buffer"]


def buffer(obj, device=CPU):
    """A Buffer from a Buffer (returned as is), a buffer-protocol object (array('f'), memoryview,
    numpy float32/float64 arrays, bytes of float32) or a sequence of numbers."""
    if isinstance(obj, Buffer):
        return obj
    if isinstance(obj, (bytes, bytearray)):
        return Buffer.from_bytes(obj, device)
    try:
        memoryview(obj)
    except TypeError:
        return Buffer.from_list(obj, device)
    return Buffer.from_buffer(obj, device)


del _name, _restype, _params, _header, _doc, _proto, _fn, _m
