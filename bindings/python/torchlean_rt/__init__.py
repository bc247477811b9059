"""Python binding of libtorchlean_rt through ctypes: no compiled extension, no required packages.

The C headers are the single source of truth. The generator (bindings/gen/gen_bindings.py) parses
them with the bindings' one C-header parser (bindings/gen/tlrt_abi.py) and writes the declarations
into _torchlean_rt_abi.py of this package: every TLRT_API prototype (with its doc comment), the
tlrt_status enum, the integer #defines, the tlrt_allocator_stats struct, the C -> ctypes type table
and the classification the op wrappers need. At import this module reads no header; it
  1. finds the shared library (the one packaged with it by pip, else TORCHLEAN_RT_LIB, else an
     installed one, never a guess among build directories: see _lib_candidates),
  2. loads the generated declarations (_torchlean_rt_abi.py),
  3. sets argtypes/restype of every TLRT_API function from them (an unknown C type raises
     HeaderParseError: nothing is guessed), and checks the ABI major version,
  4. generates one Python function per op of the op headers from its prototype:
     `const tlrt_buffer *` parameters take Buffer objects, `double` floats, `uint64_t` ints,
     `tlrt_device` devices; trailing `tlrt_buffer **` parameters become the return value (a Buffer,
     or a tuple of Buffers for max_bwd/min_bwd). Example: rt.add(a, b), rt.clamp(x, -1.0, 1.0),
     rt.rand_normal(rt.CPU, 1000, 0.0, 1.0, key).

Checkpoints (abi/tlrt_checkpoint.h): rt.save_safetensors(path, {"w": tensor}, metadata),
rt.load_safetensors(path) and the lazy rt.SafeTensors(path) read and write safetensors files, the
format of PyTorch's, NumPy's and the Hugging Face Hub's checkpoints.

CUDA streams (abi/tlrt_stream.h): `with rt.use_stream(rt.cuda(0), torch.cuda.current_stream()):`
queues the library's work on that stream; stream_record_event / stream_wait_event /
stream_wait_for_library order it against other CUDA work with events, without host waits.

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
import weakref as _weakref

__all__ = ["TlrtError", "HeaderParseError", "Buffer", "CPU", "cuda", "stats", "call", "lib",
           "PROTOTYPES", "STATUS", "DEFINES", "OPS"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))  # the source tree, if any
_LIBNAME = "torchlean_rt"
_DECLS = "_torchlean_rt_abi"   # the generated declarations, a module of this package


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
    """The generated module _torchlean_rt_abi of this package."""
    try:
        return importlib.import_module("." + _DECLS, __name__)
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{_DECLS}":
            raise
        raise ImportError(f"{os.path.join(_HERE, _DECLS + '.py')} is missing: the package needs "
                          "the declarations bindings/gen/gen_bindings.py generates into it") from None


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
    ARRAY(spelling, n) (a fixed array field of a struct), or a struct of the declarations."""
    if spec.startswith("POINTER(") and spec.endswith(")"):
        return ctypes.POINTER(_ctype_of_spelling(spec[len("POINTER("):-1], where))
    if spec.startswith("ARRAY(") and spec.endswith(")"):
        elem, _, n = spec[len("ARRAY("):-1].rpartition(",")
        if not n.strip().isdigit():
            raise HeaderParseError(f"{where}: bad array spelling {spec!r}")
        return _ctype_of_spelling(elem.strip(), where) * int(n)
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


def _make_struct(name, base=AllocatorStatsBase):
    fields = [(f, ctype_of(t, f"struct {name}: field {f}")) for t, f in _ABI.STRUCTS.get(name, ())]
    if not fields:
        raise HeaderParseError(f"struct {name} not found in the declarations")
    return type(name, (base,), {"_fields_": fields})


AllocatorStats = _STRUCTS["tlrt_allocator_stats"] = _make_struct("tlrt_allocator_stats")
for _sname in _ABI.STRUCTS:  # the other structs of the headers (the geometry structs)
    if _sname not in _STRUCTS:
        _STRUCTS[_sname] = _make_struct(_sname, ctypes.Structure)


# ---------------------------------------------------------------------------------------------
# Library loading
# ---------------------------------------------------------------------------------------------

def _lib_candidates():
    """The library packaged beside this module (pip install .: it matches this package's
    declarations), alone when present; else TORCHLEAN_RT_LIB alone when set (a file, or a
    directory holding the library); else the installed one (ctypes.util.find_library, then the
    loader's search path). Build directories are never searched: of several, none is evidently
    the one meant (a stale one sorted first was loaded silently), so a build is named explicitly
    with TORCHLEAN_RT_LIB."""
    packaged = sorted(_glob.glob(os.path.join(_HERE, "lib" + _LIBNAME + ".so*")))
    if packaged:
        return packaged
    env = os.environ.get("TORCHLEAN_RT_LIB")
    if env:
        if os.path.isdir(env):
            return sorted(_glob.glob(os.path.join(env, "lib" + _LIBNAME + ".so*"))) or [env]
        return [env]
    cands = []
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
    raise ImportError("cannot load lib" + _LIBNAME + ": install it (meson install) or name a build "
                      "with TORCHLEAN_RT_LIB, e.g. TORCHLEAN_RT_LIB=build/lib" + _LIBNAME + ".so; "
                      "tried:\n  " + "\n  ".join(errors))


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
        """The values as a new numpy array of the buffer's type (a copy; numpy.from_dlpack(buffer)
        shares the memory instead). Needs numpy."""
        if _np is None:
            raise ImportError("to_numpy needs numpy; use to_array() or to_list() without it")
        n = self.size
        dtype = self.dtype
        if dtype != "float32":
            out = _np.empty(n, dtype=dtype)
            ctype = ctypes.c_int32 if dtype == "int32" else ctypes.c_int64
            fname = "tlrt_buffer_to_i32" if dtype == "int32" else "tlrt_buffer_to_i64"
            ptr = out.ctypes.data_as(ctypes.POINTER(ctype)) if n else None
            _check(getattr(lib, fname)(self._h, ptr, n), fname)
            return out
        out = _np.empty(n, dtype=_np.float32)
        ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if n else None
        _check(lib.tlrt_buffer_to_f32(self._h, ptr, n), "tlrt_buffer_to_f32")
        return out

    # -- element types (float32 values; int32 / int64 indices) --
    @classmethod
    def from_ints(cls, values, dtype=None, device=CPU):
        """Uploads integers as an int32 or int64 buffer (an index buffer, see the index ops):
        values is an iterable of ints, or a buffer-protocol object of integers (a numpy integer
        array of any shape and layout, flattened in row-major order; array('i'), array('q'),
        ...). dtype 'int32' or 'int64'; None keeps a numpy int32 array or array('i') as int32 and
        makes everything else int64. A value that does not fit the type raises OverflowError
        (numpy arrays are checked, not wrapped); a numpy array that is not of an integer type
        raises TypeError."""
        if dtype is None:
            dtype = "int64"
            if _np is not None and isinstance(values, _np.ndarray):
                if values.dtype == _np.int32:
                    dtype = "int32"
            elif isinstance(values, _array.array) and values.typecode == "i":
                dtype = "int32"
        if dtype not in ("int32", "int64"):
            raise ValueError(f"from_ints: dtype is 'int32' or 'int64', not {dtype!r}")
        code, ctype, fname = (("i", ctypes.c_int32, "tlrt_buffer_from_i32") if dtype == "int32"
                              else ("q", ctypes.c_int64, "tlrt_buffer_from_i64"))
        if _np is not None and isinstance(values, _np.ndarray):
            if values.dtype.kind not in "iu":
                raise TypeError(f"from_ints: a numpy array of integers, not {values.dtype}")
            want = _np.int32 if dtype == "int32" else _np.int64
            info = _np.iinfo(want)
            if values.size and not _np.can_cast(values.dtype, want) and (
                    int(values.min()) < info.min or int(values.max()) > info.max):
                raise OverflowError(f"from_ints: a value of the {values.dtype} array does not "
                                    f"fit {dtype}")
            values = _np.ascontiguousarray(values, dtype=want)
            n = values.size
            ptr = values.ctypes.data_as(ctypes.POINTER(ctype)) if n else None
            return cls._out(fname, _as_device(device), ptr, n)
        arr = _array.array(code, values)
        n = len(arr)
        ptr = ctypes.cast((ctype * n).from_buffer(arr), ctypes.POINTER(ctype)) if n else None
        return cls._out(fname, _as_device(device), ptr, n)

    @property
    def dtype(self):
        """'float32', 'int32' or 'int64' (tlrt_buffer_dtype)."""
        t = ctypes.c_int()
        _check(lib.tlrt_buffer_dtype(self._h, ctypes.byref(t)), "tlrt_buffer_dtype")
        return _DTYPE_NAMES[t.value]

    def to_int_list(self):
        """The values of an int32 / int64 buffer as a list of ints."""
        n = self.size
        if self.dtype == "int32":
            out, fname = (ctypes.c_int32 * n)(), "tlrt_buffer_to_i32"
        else:
            out, fname = (ctypes.c_int64 * n)(), "tlrt_buffer_to_i64"
        _check(getattr(lib, fname)(self._h, out if n else None, n), fname)
        return list(out)

    # -- DLPack (abi/tlrt_dlpack.h): zero-copy exchange with numpy, torch, cupy, jax ... --
    def __dlpack_device__(self):
        d = self.device
        kind = (d >> 16) & 0xFF
        return (_DL_CUDA, d & 0xFFFF) if kind == DEFINES["TLRT_DEVICE_KIND_CUDA"] else (_DL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None, dims=None):
        """A DLPack capsule sharing this buffer's payload (a 1-D tensor of size elements, or of
        shape `dims`, row-major, whose product is the size; the capsule holds a reference to the
        buffer). max_version >= (1, 0) gives a versioned capsule,
        otherwise the legacy one. For a CUDA buffer, `stream` (the consumer's stream: None or 1
        the legacy default stream, 2 the per-thread default stream, -1 no ordering, else a
        cudaStream_t as an int) is made to wait for the library's queued work, without a host
        wait. copy=True exports a copy; dl_device other than the buffer's own is refused."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: the buffer is on {self.__dlpack_device__()}, not "
                              f"{tuple(dl_device)} (copy with .to(device) first)")
        src = self.copy() if copy else self
        if src.__dlpack_device__()[0] == _DL_CUDA and stream != -1:
            s = 1 if stream is None else stream  # 1: cudaStreamLegacy, 2: cudaStreamPerThread
            _check(lib.tlrt_stream_wait_for_library(src.device, s),
                   "tlrt_stream_wait_for_library")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        fname = "tlrt_buffer_to_dlpack_versioned" if versioned else "tlrt_buffer_to_dlpack"
        out = ctypes.c_void_p()
        if dims is None:
            _check(getattr(lib, fname)(src._h, None, 1, ctypes.byref(out)), fname)
        else:
            dims = [int(d) for d in dims]
            shape = (ctypes.c_uint64 * len(dims))(*dims) if dims else None
            _check(getattr(lib, fname)(src._h, shape, len(dims), ctypes.byref(out)), fname)
        name = _CAPSULE_VERSIONED if versioned else _CAPSULE_LEGACY
        return _capsule_new(out.value, name, _capsule_destructor_ptr)

    def __repr__(self):
        if self._h is None:
            return "Buffer(<freed>)"
        try:
            return f"Buffer(size={self.size}, device={device_name(self.device)})"
        except TlrtError as e:
            return f"Buffer(<{e.name}>)"


_DTYPE_NAMES = {0: "float32", 1: "int32", 2: "int64"}

# DLPack capsules through the CPython C API (no compiled extension): the capsule names of the
# DLPack Python specification, the producer's destructor (runs the managed tensor's deleter unless
# a consumer renamed the capsule to "used_..." when it took ownership), and the consumer side.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST = 1, 2, 3
_CAPSULE_VERSIONED, _CAPSULE_LEGACY = b"dltensor_versioned", b"dltensor"
_USED_VERSIONED, _USED_LEGACY = b"used_dltensor_versioned", b"used_dltensor"
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
# The destructor sees the capsule as a raw pointer (its reference count is already 0).
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Offset of `deleter` in DLManagedTensorVersioned (version, manager_ctx, deleter) and in
# DLManagedTensor (DLTensor of 48 bytes, manager_ctx, deleter).
_DELETER_OFFSET = {_CAPSULE_VERSIONED: 16, _CAPSULE_LEGACY: 56}


def _run_deleter(managed, name):
    fn = ctypes.c_void_p.from_address(managed + _DELETER_OFFSET[name]).value
    if fn:
        _DELETER(fn)(managed)


@ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    try:
        for name in (_CAPSULE_VERSIONED, _CAPSULE_LEGACY):
            if _raw_is_valid(capsule, name):  # not consumed: the producer still owns it
                _run_deleter(_raw_get_pointer(capsule, name), name)
                return
    except BaseException:  # a destructor never raises
        pass


_capsule_destructor_ptr = ctypes.cast(_capsule_destructor, ctypes.c_void_p)


def from_dlpack(obj, *, device=None):
    """A Buffer sharing the memory of `obj`, any object with __dlpack__ (a numpy array, a torch or
    cupy tensor, a jax array) or a DLPack capsule: no copy. The tensor must be contiguous, of
    float32, int32 or int64, on the CPU or a CUDA device; it is flattened in row-major order
    (Tensor.from_dlpack keeps the shape). For a CUDA producer, the producer orders its work before
    the library's current stream of that device (the stream is passed to __dlpack__). The Buffer
    keeps the producer's tensor alive."""
    return _dlpack_import(obj, device)[0]


# Offset of the DLTensor in DLManagedTensorVersioned (version, manager_ctx, deleter, flags) and in
# DLManagedTensor (first); in the DLTensor, ndim (int32) at 16 and the shape pointer at 24.
_TENSOR_OFFSET = {_CAPSULE_VERSIONED: 32, _CAPSULE_LEGACY: 0}


def _dlpack_import(obj, device):
    """(Buffer, shape tuple) of a DLPack producer or capsule (see from_dlpack)."""
    capsule = obj
    if hasattr(obj, "__dlpack__"):
        kind, ordinal = obj.__dlpack_device__()
        kw = {}
        if kind == _DL_CUDA:
            s = stream_get(cuda(ordinal))
            kw["stream"] = s if s else 1
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kw)
        except TypeError:  # a producer of the DLPack 0.x protocol
            capsule = obj.__dlpack__(**kw)
    for name, used, fname in ((_CAPSULE_VERSIONED, _USED_VERSIONED,
                               "tlrt_buffer_from_dlpack_versioned"),
                              (_CAPSULE_LEGACY, _USED_LEGACY, "tlrt_buffer_from_dlpack")):
        if _capsule_is_valid(capsule, name):
            managed = _capsule_get_pointer(capsule, name)
            dl = managed + _TENSOR_OFFSET[name]
            ndim = ctypes.c_int32.from_address(dl + 16).value
            dims = ctypes.c_void_p.from_address(dl + 24).value
            shape = tuple(ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))[:ndim]) if (
                ndim > 0 and dims) else ()
            out = ctypes.c_void_p()
            _check(getattr(lib, fname)(managed, ctypes.byref(out)), fname)
            _capsule_set_name(capsule, used)  # the buffer owns the tensor now
            b = Buffer(out.value)
            if device is not None and b.device != device:
                raise ValueError(f"from_dlpack: the tensor is on {device_name(b.device)}, not "
                                 f"{device_name(device)}")
            return b, shape
    raise TypeError("from_dlpack: expected an object with __dlpack__ or an unconsumed DLPack "
                    f"capsule, not {type(obj).__name__}")


__all__ += ["from_dlpack"]


def _handle(b, fname, pname):
    if not isinstance(b, Buffer):
        raise TypeError(f"{fname}: argument {pname} must be a Buffer, not {type(b).__name__}")
    return b._h


# ---------------------------------------------------------------------------------------------
# Runtime helpers
# ---------------------------------------------------------------------------------------------

def get_include():
    """The folder holding torchlean_rt/*.h in an installed package (pip install .), for C
    extensions: #include <torchlean_rt/torchlean_rt.h> with -I get_include(). None when the
    package runs from the source tree (use abi/ there)."""
    path = os.path.join(_HERE, "include")
    return path if os.path.isdir(path) else None


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


def set_num_threads(n):
    """Threads of the CPU backend's kernels (tlrt_set_num_threads: results do not depend on it;
    0 restores the default). Returns the previous count."""
    n = int(n)
    if not 0 <= n < 1 << 32:
        raise ValueError(f"set_num_threads: {n} is not a uint32_t")
    return int(lib.tlrt_set_num_threads(n))


def get_num_threads():
    return int(lib.tlrt_get_num_threads())


def stats(device=CPU):
    """tlrt_allocator_stats_get as a dict of the header's fields."""
    s = AllocatorStats()
    s.struct_size = ctypes.sizeof(AllocatorStats)
    _check(lib.tlrt_allocator_stats_get(_as_device(device), ctypes.byref(s)),
           "tlrt_allocator_stats_get")
    return {name: getattr(s, name) for name, _ in AllocatorStats._fields_}


# ---------------------------------------------------------------------------------------------
# Streams and events (abi/tlrt_stream.h): order the library's CUDA work with PyTorch's, CuPy's or
# any other CUDA user's, on the device, without the host waiting.
# ---------------------------------------------------------------------------------------------

CUDA_STREAM_LEGACY = DEFINES["TLRT_CUDA_STREAM_LEGACY"]
CUDA_STREAM_PER_THREAD = DEFINES["TLRT_CUDA_STREAM_PER_THREAD"]


def _handle_value(obj, attrs, what):
    """The address of a CUDA handle: an int, or an object carrying it in one of attrs
    (torch.cuda.Stream.cuda_stream, torch.cuda.Event.cuda_event, cupy's .ptr), or a
    ctypes.c_void_p."""
    if isinstance(obj, bool):
        raise TypeError(f"{what}: a CUDA handle, not a bool")
    if isinstance(obj, int):
        return obj
    if isinstance(obj, ctypes.c_void_p):
        return obj.value or 0
    for a in attrs:
        v = getattr(obj, a, None)
        if isinstance(v, ctypes.c_void_p):  # numba's .handle
            return v.value or 0
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    raise TypeError(f"{what}: expected an int handle or an object with "
                    f"{' / '.join('.' + a for a in attrs)}, not {type(obj).__name__}")


def _stream_value(stream, what):
    """A host stream as the library takes it: 0 (what PyTorch and CuPy report for the legacy
    default stream) becomes CUDA_STREAM_LEGACY."""
    v = _handle_value(stream, ("cuda_stream", "ptr", "handle"), what)
    return CUDA_STREAM_LEGACY if v == 0 else v


def stream_get(device):
    """tlrt_stream_get: the current stream of a CUDA device as an int (the library's own stream, or
    the host's as it was set)."""
    out = ctypes.c_void_p()
    _check(lib.tlrt_stream_get(_as_device(device), ctypes.byref(out)), "tlrt_stream_get")
    return out.value or 0


def stream_set(device, stream):
    """tlrt_stream_set: queue the library's work on `device` on `stream` from now on. None means
    the library's own stream; 0 or a torch/cupy default-stream object the legacy default stream;
    otherwise an int handle, a torch.cuda.Stream (.cuda_stream), a cupy stream (.ptr). The stream
    must stay alive while it is current, and no other call on the device may run during the switch
    (see use_stream for a scoped form)."""
    v = None if stream is None else _stream_value(stream, "tlrt_stream_set: argument cuda_stream")
    _check(lib.tlrt_stream_set(_as_device(device), v), "tlrt_stream_set")


def stream_record_event(device, event):
    """tlrt_stream_record_event: record a CUDA event (int handle, torch.cuda.Event, cupy Event) on
    the library's current stream of `device`. A torch.cuda.Event has a CUDA event only after its
    first record(): record it once (on any stream of the device) before passing it here."""
    v = _handle_value(event, ("cuda_event", "ptr", "handle"),
                      "tlrt_stream_record_event: argument cuda_event")
    _check(lib.tlrt_stream_record_event(_as_device(device), v or None),
           "tlrt_stream_record_event")


def stream_wait_event(device, event):
    """tlrt_stream_wait_event: the library's later work on `device` waits (on the device) for the
    event's last record."""
    v = _handle_value(event, ("cuda_event", "ptr", "handle"),
                      "tlrt_stream_wait_event: argument cuda_event")
    _check(lib.tlrt_stream_wait_event(_as_device(device), v or None), "tlrt_stream_wait_event")


def stream_wait_for_library(device, stream):
    """tlrt_stream_wait_for_library: `stream` (0 / default-stream objects: the legacy default
    stream) waits, on the device, for all work the library has queued on `device` so far: call it
    before work on that stream reads what the library produced."""
    v = _stream_value(stream, "tlrt_stream_wait_for_library: argument cuda_stream")
    _check(lib.tlrt_stream_wait_for_library(_as_device(device), v),
           "tlrt_stream_wait_for_library")


class use_stream:
    """Context manager: the library queues its work on `device` on `stream` inside the block and
    goes back to the stream that was current before on exit (stream_set's rules apply):

        s = torch.cuda.current_stream()
        with rt.use_stream(rt.cuda(0), s):
            y = rt.add(a, b)          # queued on s, after what torch queued there before
    """

    def __init__(self, device, stream):
        self._device, self._stream, self._previous = _as_device(device), stream, None

    def __enter__(self):
        self._previous = stream_get(self._device)
        stream_set(self._device, self._stream)
        return self

    def __exit__(self, *exc):
        stream_set(self._device, self._previous)
        return False


__all__ += ["CUDA_STREAM_LEGACY", "CUDA_STREAM_PER_THREAD", "stream_get", "stream_set",
            "stream_record_event", "stream_wait_event", "stream_wait_for_library", "use_stream"]


# ---------------------------------------------------------------------------------------------
# Geometry as data (abi/tlrt_conv.h, abi/tlrt_pool.h): the geometry structs, filled by field name,
# and the output-shape queries. The *_geom ops generated below take these structs:
#     g = rt.conv_geometry(batch=1, in_channels=3, out_channels=8, in_spatial=[32, 32],
#                          kernel_size=[3, 3], padding=[1, 1])
#     dims, n = rt.conv_output_dims(g)          # [1, 8, 32, 32], 8192
#     y = rt.conv_fwd_geom(w, b, x, g)
# ---------------------------------------------------------------------------------------------

ConvGeometry = _STRUCTS["tlrt_conv_geometry"]
PoolGeometry = _STRUCTS["tlrt_pool_geometry"]


def _geometry(struct, fname, scalars, arrays):
    """A struct with struct_size set, rank = len of the first array, the scalars, and each array
    (one entry per axis; entries past the struct's fixed length are left to the library's rank
    check) written by name."""
    g = struct()
    g.struct_size = ctypes.sizeof(struct)
    rank = len(arrays[0][1])
    g.rank = rank
    for name, v in scalars:
        v = int(v)
        if not 0 <= v < 1 << 64:
            raise ValueError(f"{fname}: {name} = {v} is not a uint64_t")
        setattr(g, name, v)
    for name, values in arrays:
        vals = [int(v) for v in values]
        if len(vals) != rank:
            raise ValueError(f"{fname}: {name} has {len(vals)} entries, in_spatial has {rank}")
        field = getattr(g, name)
        for i, v in enumerate(vals):
            if not 0 <= v < 1 << 64:
                raise ValueError(f"{fname}: {name}[{i}] = {v} is not a uint64_t")
            if i < len(field):
                field[i] = v
    return g


def conv_geometry(batch, in_channels, out_channels, in_spatial, kernel_size, stride=None,
                  padding=None, dilation=None, groups=1):
    """A ConvGeometry (tlrt_conv_geometry) with struct_size set and rank = len(in_spatial);
    stride, padding and dilation default to 1, 0 and 1 on every axis. Every value is validated by
    the library (the ops and conv_output_dims), not here; its fields stay writable by name
    (g.stride[1] = 2)."""
    r = len(in_spatial)
    return _geometry(ConvGeometry, "conv_geometry",
                     [("batch", batch), ("in_channels", in_channels),
                      ("out_channels", out_channels), ("groups", groups)],
                     [("in_spatial", in_spatial), ("kernel_size", kernel_size),
                      ("stride", [1] * r if stride is None else stride),
                      ("padding", [0] * r if padding is None else padding),
                      ("dilation", [1] * r if dilation is None else dilation)])


def pool_geometry(batch, channels, in_spatial, kernel, stride=None, padding=None):
    """A PoolGeometry (tlrt_pool_geometry) with struct_size set and rank = len(in_spatial);
    stride defaults to the kernel (PyTorch's pooling default) and padding to 0. Validated by the
    library, not here."""
    r = len(in_spatial)
    return _geometry(PoolGeometry, "pool_geometry", [("batch", batch), ("channels", channels)],
                     [("in_spatial", in_spatial), ("kernel", kernel),
                      ("stride", list(kernel) if stride is None else stride),
                      ("padding", [0] * r if padding is None else padding)])


def _output_dims(fname, struct, capacity, geometry):
    if not isinstance(geometry, struct):
        raise TypeError(f"{fname}: argument geometry must be a {struct.__name__}, not "
                        f"{type(geometry).__name__}")
    dims = (ctypes.c_uint64 * capacity)()
    rank, elements = ctypes.c_uint32(), ctypes.c_uint64()
    _check(getattr(lib, fname)(ctypes.byref(geometry), dims, capacity, ctypes.byref(rank),
                               ctypes.byref(elements)), fname)
    return list(dims[:rank.value]), elements.value


def conv_output_dims(geometry):
    """tlrt_conv_output_dims: (the output's dims [batch, out_channels, out...], its element count)
    of conv_fwd_geom for a ConvGeometry; the library's errors as TlrtError."""
    return _output_dims("tlrt_conv_output_dims", ConvGeometry, DEFINES["TLRT_CONV_MAX_DIMS"],
                        geometry)


def convtranspose_output_dims(geometry):
    """tlrt_convtranspose_output_dims: (dims, element count) of convtranspose_fwd_geom."""
    return _output_dims("tlrt_convtranspose_output_dims", ConvGeometry,
                        DEFINES["TLRT_CONV_MAX_DIMS"], geometry)


def pool_output_dims(geometry):
    """tlrt_pool_output_dims: (dims [batch, channels, out...], element count) of every pool
    forward for a PoolGeometry."""
    return _output_dims("tlrt_pool_output_dims", PoolGeometry, DEFINES["TLRT_POOL_MAX_DIMS"],
                        geometry)


__all__ += ["ConvGeometry", "PoolGeometry", "conv_geometry", "pool_geometry", "conv_output_dims",
            "convtranspose_output_dims", "pool_output_dims"]


# Attention of strided views (abi/tlrt_attention.h): the geometry of batch * heads_q problems whose
# q, k, v rows the library reads in place, e.g. from one fused projection:
#     g = rt.attention_qkv_geometry(batch=2, seq=128, heads_q=8, heads_kv=2, d=64)
#     out, lse = rt.attention_fwd(qkv, qkv, qkv, None, g, 0.125, True, float("-inf"))
# (Tensor.attention_qkv / rt.attention and Tape.attention_qkv / Tape.attention wrap this.)
AttentionGeometry = _STRUCTS["tlrt_attention_geometry"]


def attention_geometry(batch, heads_q, heads_kv, len_q, len_k, d, q=None, k=None, v=None):
    """An AttentionGeometry (tlrt_attention_geometry) with struct_size set. q, k and v are
    (offset, stride_batch, stride_token, stride_head) in elements of their buffers; each defaults
    to its own token-major buffer, (batch, len, heads, d) row-major. Validated by the library."""
    g = AttentionGeometry()
    g.struct_size = ctypes.sizeof(AttentionGeometry)
    for name, val in (("batch", batch), ("heads_q", heads_q), ("heads_kv", heads_kv),
                      ("len_q", len_q), ("len_k", len_k), ("d", d)):
        val = int(val)
        if not 0 <= val < 1 << 64:
            raise ValueError(f"attention_geometry: {name} = {val} is not a uint64_t")
        setattr(g, name, val)
    views = {"q": (q, len_q, heads_q), "k": (k, len_k, heads_kv), "v": (v, len_k, heads_kv)}
    for name, (view, length, heads) in views.items():
        if view is None:
            view = (0, int(length) * int(heads) * int(d), int(heads) * int(d), int(d))
        view = [int(x) for x in view]
        if len(view) != 4 or not all(0 <= x < 1 << 64 for x in view):
            raise ValueError(f"attention_geometry: {name} must be (offset, stride_batch, "
                             f"stride_token, stride_head) of uint64_t, not {view}")
        for field, x in zip(("offset", "stride_batch", "stride_token", "stride_head"), view):
            setattr(g, f"{name}_{field}", x)
    return g


def attention_qkv_geometry(batch, seq, heads_q, heads_kv, d):
    """The AttentionGeometry of one fused projection (batch, seq, (heads_q + 2 heads_kv) d): per
    token heads_q query heads, then heads_kv key heads, then heads_kv value heads."""
    w = (int(heads_q) + 2 * int(heads_kv)) * int(d)
    stride = (int(seq) * w, w, int(d))
    return attention_geometry(batch, heads_q, heads_kv, seq, seq, d, q=(0,) + stride,
                              k=(int(heads_q) * int(d),) + stride,
                              v=((int(heads_q) + int(heads_kv)) * int(d),) + stride)


__all__ += ["AttentionGeometry", "attention_geometry", "attention_qkv_geometry"]


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
_NOT_OPS = {"tlrt_dgemm", "tlrt_set_allow_tf32", "tlrt_get_allow_tf32",
            # the output-shape queries: conv_output_dims and friends above
            "tlrt_conv_output_dims", "tlrt_convtranspose_output_dims", "tlrt_pool_output_dims",
            # the index-buffer fault counter: index_faults below
            "tlrt_index_faults",
            # arrays of buffers modified in place: clip_grad_norm and adam_step_multi below
            "tlrt_clip_grad_norm", "tlrt_adam_step_multi"}
_IN_KINDS = {"const tlrt_buffer *": "buffer", "tlrt_buffer *": "buffer", "double": "float",
             "uint64_t": "int", "uint32_t": "int32", "bool": "bool", "tlrt_device": "device",
             "int": "cint",  # a C int (signed): the ignore_index of the cross-entropy
             "const uint64_t *": "array64", "const uint32_t *": "array32",
             "tlrt_tape *": "tape", "const tlrt_tape *": "tape", "tlrt_dtype": "dtype"}
# Element types by name for tlrt_dtype arguments (abi/tlrt_buffer.h); the codes pass as well.
_DTYPE_ARG = {"float32": 0, "int32": 1, "int64": 2}
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


class _Decline(Exception):
    """A fast converter declining an argument: the general conversion takes the call (and raises
    the error, if there is one)."""


def _decline():
    raise _Decline


def _fast_converter(fname, n, kind):
    """The converter of one argument of the common call (_make_op), or None where the kind always
    takes the general conversion (geometry structs, arrays whose length is not a count argument).
    Each returns what the general conversion passes for the values it takes and declines the rest
    (raising; the general conversion then repeats the work and raises the error it documents)."""
    if kind == "buffer":
        if (fname, n) in _OPTIONAL_BUFFERS:
            return lambda a: None if a is None else a._h if isinstance(a, Buffer) else _decline()
        return lambda a: a._h if isinstance(a, Buffer) else _decline()
    if kind == "tape":
        return lambda a: a._h if isinstance(a, Tape) and a._h is not None else _decline()
    if kind == "float":
        return float
    if kind == "bool":
        return bool
    if kind == "device":
        return lambda a: a if isinstance(a, int) and not isinstance(a, bool) else _decline()
    if kind == "dtype":
        return lambda a: _decline() if isinstance(a, str) else int(a)
    if kind == "cint":
        return lambda a: ctypes.c_int(v) if -(1 << 31) <= (v := int(a)) < 1 << 31 else _decline()
    if kind in ("array64", "array32"):
        if (fname, n) in _UNCOUNTED:
            return None
        ct = ctypes.c_uint64 if kind == "array64" else ctypes.c_uint32
        lim = 1 << (64 if kind == "array64" else 32)

        def array(a):
            vals = [int(v) for v in a]
            for v in vals:
                if not 0 <= v < lim:
                    _decline()
            return (ct * len(vals))(*vals) if vals else None
        return array
    lim = 1 << (64 if kind == "int" else 32)  # int, int32 (and a count: see _make_op)
    return lambda a: v if 0 <= (v := int(a)) < lim else _decline()


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
        elif t.startswith("const ") and t.endswith(" *") and t[6:-2] in _STRUCTS:
            ins.append((n, "struct"))  # a geometry struct, passed by reference
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
    # Trailing flags (bool parameters: trans_a, trans_b, causal, ...) default to False.
    kinds = [k for n, k in ins if k != "length"]
    nreq = nargs
    while nreq > 0 and kinds[nreq - 1] == "bool":
        nreq -= 1
    # The common call, every argument given positionally: one converter per argument chosen here
    # (a count argument is the length of the array before it); None: every call takes the general
    # conversion below. The general one runs too where a converter declines an argument.
    convs = [None if k == "length" else _fast_converter(fname, n, k) for n, k in ins]
    has_len = any(k == "length" for _, k in ins)
    if any(c is None for c, (_, k) in zip(convs, ins) if k != "length"):
        convs = None
    out_makers = [ctypes.c_void_p if t == "tlrt_buffer **" else _OUT_SCALARS[t] for t in outs]
    out_buffer = [t == "tlrt_buffer **" for t in outs]

    def fast_cargs(args):
        if not has_len:
            return [c(a) for c, a in zip(convs, args)]
        cargs, j = [], 0
        for c in convs:
            if c is None:
                cargs.append(len(args[j - 1]))
            else:
                cargs.append(c(args[j]))
                j += 1
        return cargs

    def op(*args, **kwargs):
        if convs is not None and not kwargs and len(args) == nargs:
            try:
                cargs = fast_cargs(args)
            except Exception:  # noqa: BLE001 (declined or failed: the general conversion raises)
                cargs = general_cargs(args, kwargs)
        else:
            cargs = general_cargs(args, kwargs)
        if nout == 1:
            place = out_makers[0]()
            status = cfn(*cargs, ctypes.byref(place))
            if status != 0:
                _check(status, fname)
            return Buffer(place.value) if out_buffer[0] else place.value
        places = [m() for m in out_makers]
        status = cfn(*cargs, *[ctypes.byref(o) for o in places])
        if status != 0:
            _check(status, fname)
        if nout == 0:
            return None
        return tuple(Buffer(o.value) if b else o.value for b, o in zip(out_buffer, places))

    def general_cargs(args, kwargs):
        if kwargs:  # keyword arguments by the header's parameter names
            args = list(args)
            for i in range(len(args), nargs):
                if names[i] in kwargs:
                    args.append(kwargs.pop(names[i]))
                elif i >= nreq:
                    args.append(False)  # a flag left out: its default
                else:
                    break
            if kwargs:
                raise TypeError(f"{fname[5:]}({', '.join(names)}): unexpected or repeated "
                                f"arguments {sorted(kwargs)}")
        if not nreq <= len(args) <= nargs:
            want = str(nargs) if nreq == nargs else f"{nreq} to {nargs}"
            raise TypeError(f"{fname[5:]}({', '.join(names)}) takes {want} arguments, "
                            f"{len(args)} given")
        if len(args) < nargs:
            args = list(args) + [False] * (nargs - len(args))
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
            elif kind == "struct":
                want = _STRUCTS[dict((pn, pt) for pt, pn in params)[n][6:-2]]
                if not isinstance(a, want):
                    raise TypeError(f"{fname}: argument {n} must be a {want.__name__} "
                                    f"(rt.conv_geometry / rt.pool_geometry), not "
                                    f"{type(a).__name__}")
                cargs.append(ctypes.byref(a))
            elif kind == "float":
                cargs.append(float(a))
            elif kind == "bool":
                cargs.append(bool(a))
            elif kind == "device":
                cargs.append(_as_device(a))
            elif kind == "dtype":
                if isinstance(a, str):
                    if a not in _DTYPE_ARG:
                        raise ValueError(f"{fname}: argument {n} = {a!r} is not one of "
                                         f"{sorted(_DTYPE_ARG)}")
                    a = _DTYPE_ARG[a]
                cargs.append(int(a))
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
            elif kind == "cint":
                v = int(a)
                if not -(1 << 31) <= v < 1 << 31:
                    raise ValueError(f"{fname}: argument {n} = {v} is not an int")
                cargs.append(ctypes.c_int(v))
            else:
                v = int(a)
                bits = 64 if kind == "int" else 32
                if not 0 <= v < 1 << bits:
                    raise ValueError(f"{fname}: argument {n} = {v} is not a uint{bits}_t")
                cargs.append(v)
        return cargs

    op.__name__ = op.__qualname__ = proto.name[5:]
    op.__signature__ = _inspect.Signature(
        [_inspect.Parameter(n, _inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            **({"default": False} if i >= nreq else {}))
         for i, n in enumerate(names)])
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
# Index lists or index buffers (abi/tlrt_index.h). gather_vec, scatter_add, gather_rows and
# scatter_add_rows (and the Tape's gather_vec, gather_rows, scatter_add, scatter_add_rows and
# cross_entropy) take their index list as
#   - a host sequence (list, tuple, range, numpy array): the host-list entry point, k = its
#     length, every entry checked on the host (a negative one raises ValueError, one >= 2^60
#     TLRT_ERR_INDEX);
#   - a Buffer of int32 or int64 (Buffer.from_ints, rt.from_dlpack of a torch / numpy / cupy
#     integer tensor), on the data's device: the _ibuf entry point, k = the buffer's size, nothing
#     crosses to the host; an entry that is not an index reads 0, is skipped by a scatter, and is
#     counted by index_faults(device).
# The scatters' x / mat may be None: the zero vector / matrix (NULL for the _ibuf entry points; a
# zero buffer made here for a host list).
# ---------------------------------------------------------------------------------------------

def index_faults(device, reset=False):
    """tlrt_index_faults: the number of index-buffer entries that were not an index (negative, or
    >= 2^60; tape cross_entropy labels outside [0, classes)) met on `device` since the last reset
    or the start of the process, all threads together; reset=True sets the counter back to 0
    after reading it. Waits for the work queued so far on the device's current stream. The
    device is named on purpose (no default): each device has its own counter."""
    n = ctypes.c_uint64()
    _check(lib.tlrt_index_faults(_as_device(device), bool(reset), ctypes.byref(n)),
           "tlrt_index_faults")
    return n.value


def clip_grad_norm(grads, max_norm):
    """tlrt_clip_grad_norm: torch.nn.utils.clip_grad_norm_(grads, max_norm) on the device, in
    place, without a host synchronisation. grads: Buffers or Tensors (float32, one device, each
    once); returns the total L2 norm (before clipping) as a 1-element Buffer, or a 0-d Tensor when
    grads holds Tensors. Every buffer is scaled by min(1, max_norm / (norm + 1e-6)) (NaN for a NaN
    norm); an empty grads gives a norm of 0 on the CPU."""
    grads = list(grads)
    tensors = bool(grads) and all(hasattr(g, "buffer") and not isinstance(g, Buffer)
                                  for g in grads)
    bufs = [g.buffer if tensors else g for g in grads]
    arr = (ctypes.c_void_p * len(bufs))(*[_handle(b, "tlrt_clip_grad_norm", "grads")
                                          for b in bufs]) if bufs else None
    out = ctypes.c_void_p()
    _check(lib.tlrt_clip_grad_norm(len(bufs), arr, float(max_norm), ctypes.byref(out)),
           "tlrt_clip_grad_norm")
    norm = Buffer(out.value)
    if tensors:
        from ._tensor import Tensor
        return Tensor._wrap(norm, ())
    return norm


__all__ += ["clip_grad_norm"]


def adam_step_multi(params, grads, ms, vs, step, lr, beta1, beta2, eps, weight_decay, decoupled,
                    weight_decays=None):
    """tlrt_adam_step_multi: adam_step(params[i], grads[i], ms[i], vs[i], step, lr, beta1, beta2,
    eps, weight_decay, decoupled) for every i in one call (one kernel launch on CUDA), in place,
    BIT FOR BIT the per-tensor steps. params, grads, ms, vs: equally long sequences of Buffers or
    Tensors (float32, one device, every buffer once across the four). weight_decays: one weight
    decay per tensor, which then replaces weight_decay; None gives every tensor weight_decay.
    Returns None."""
    fname = "tlrt_adam_step_multi"
    lists = {"params": list(params), "grads": list(grads), "ms": list(ms), "vs": list(vs)}
    count = len(lists["params"])
    for name, xs in lists.items():
        if len(xs) != count:
            raise ValueError(f"{fname}: {name} has {len(xs)} entries, params has {count}")
    wds = ([float(weight_decay)] * count if weight_decays is None
           else [float(w) for w in weight_decays])
    if len(wds) != count:
        raise ValueError(f"{fname}: weight_decays has {len(wds)} entries, params has {count}")

    def handles(name, xs):
        if not xs:
            return None
        return (ctypes.c_void_p * count)(*[
            _handle(x.buffer if hasattr(x, "buffer") and not isinstance(x, Buffer) else x,
                    fname, name) for x in xs])

    arrays = [handles(name, xs) for name, xs in lists.items()]
    wd_arr = (ctypes.c_double * count)(*wds) if count else None
    _check(lib.tlrt_adam_step_multi(count, *arrays, wd_arr, int(step), float(lr), float(beta1),
                                    float(beta2), float(eps), bool(decoupled)), fname)


__all__ += ["adam_step_multi"]


def _zero_target(fname, a):
    """The zero x / mat of a host-list scatter called with None (its size from n or rows * cols,
    on vals' device)."""
    count = int(a["n"]) if "n" in a else int(a["rows"]) * int(a["cols"])
    if not 0 <= count < 1 << 64:
        raise ValueError(f"{fname}: the zero target would have {count} elements")
    vals = a["vals"]
    return Buffer.zeros(count, vals.device if isinstance(vals, Buffer) else CPU)


def _index_dispatch(list_op, ibuf_op, idx_name, optional=None):
    """list_op (a generated wrapper taking a host index list) that calls ibuf_op (its _ibuf
    twin, the same parameters) when the index argument is a Buffer; with optional, None for that
    data argument passes NULL to ibuf_op and a zero buffer to list_op."""
    sig = list_op.__signature__
    names = list(sig.parameters)
    if list(ibuf_op.__signature__.parameters) != names or idx_name not in names:
        raise HeaderParseError(f"{ibuf_op.__name__}{ibuf_op.__signature__} does not take the "
                               f"parameters of {list_op.__name__}{sig} (index {idx_name!r})")

    def op(*args, **kwargs):
        try:
            a = sig.bind(*args, **kwargs).arguments
        except TypeError:
            return list_op(*args, **kwargs)  # its own message
        if isinstance(a[idx_name], Buffer):
            return ibuf_op(*[a[n] for n in names])
        if optional is not None and a[optional] is None:
            a[optional] = _zero_target(list_op.__name__, a)
            return list_op(*[a[n] for n in names])
        return list_op(*args, **kwargs)

    op.__name__ = op.__qualname__ = list_op.__name__
    op.__signature__ = sig
    op.__doc__ = (f"{list_op.__doc__}\n\nWith {idx_name} a Buffer (int32 / int64, on the data's "
                  f"device): {ibuf_op.__name__}, k = its size.\n\n{ibuf_op.__doc__}")
    op.list_op, op.ibuf_op = list_op, ibuf_op
    return op


_IBUF_OPS = {"gather_vec": ("idx", None), "scatter_add": ("idx", "x"),
             "gather_rows": ("idx", None), "scatter_add_rows": ("idx", "mat")}
for _name, (_idx, _opt) in _IBUF_OPS.items():
    if _name in OPS and _name + "_ibuf" in OPS:
        OPS[_name] = _index_dispatch(OPS[_name], OPS[_name + "_ibuf"], _idx, _opt)
        globals()[_name] = OPS[_name]
__all__ += ["index_faults"]


# ---------------------------------------------------------------------------------------------
# The autograd tape (abi/tlrt_tape.h): one method per tlrt_tape_* recording call, generated from
# its prototype like the ops (node ids are ints; index lists are sequences).
# ---------------------------------------------------------------------------------------------

class Node(int):
    """A node id of a Tape (an int: ids pass wherever ints do) that releases its node
    (tlrt_tape_release) when Python collects it, as PyTorch frees a tensor nobody references: the
    node's value buffer goes as soon as no backward rule still reads it (abi/tlrt_tape.h, MEMORY).
    Nothing happens when the tape was reset since the node was recorded (the id is stale), when
    the tape was freed, or when the node was released already through Tape.release. Values made
    from it (int(n), n + 0) are plain ints and release nothing. A node must be dropped on the
    thread that uses its tape (tapes are not thread-safe)."""

    def __new__(cls, value, tape):
        n = int.__new__(cls, value)
        n._tape = _weakref.ref(tape)
        n._gen = tape._gen
        return n

    def __reduce__(self):  # copies and pickles are plain ints (they release nothing)
        return (int, (int(self),))

    def __del__(self):
        try:
            tape = self._tape()
            if tape is not None and tape._h is not None and tape._gen == self._gen:
                self._gen = None
                _tape_release(tape._h, int(self))
        except BaseException:  # a finalizer never raises (at interpreter shutdown, lib may be gone)
            pass


_tape_release = lib.tlrt_tape_release if "tlrt_tape_release" in PROTOTYPES else None


class Tape:
    """Owns a tlrt_tape * (one thread at a time). Nodes are Node ids (ints).

        t = rt.Tape(rt.CPU)
        w = t.leaf(W, [out, in], True); x = t.leaf(X, [batch, in], False)
        loss = t.mse_loss(t.linear(x, w, rt.TLRT_TAPE_NONE), y)
        t.backward(loss); dW = t.grad(w); t.reset()

    Every tlrt_tape_X is the method X (t.add(a, b), t.matmul(a, b, False, True), t.value(n),
    t.grad(n), t.reset(), ...); t.shape(n) -> (dims, requires_grad). The finalizer frees the tape;
    free() frees it now.

    Memory as in PyTorch: a recording call returns a Node, which releases its node when Python
    collects it (del, rebinding a name, a temporary), so a node's value lives only while the host
    holds the Node or a backward rule still reads it; t.backward(loss) frees each rule's saved
    values as soon as it has run (tlrt_tape_backward_ex with TLRT_TAPE_BACKWARD_FREE), and a second
    backward through the same graph raises TLRT_ERR_RELEASED. t.backward(loss, retain_graph=True)
    keeps the graph (a later backward accumulates), as PyTorch's retain_graph."""

    __slots__ = ("_h", "_gen", "__weakref__")
    _free_fn = lib.tlrt_tape_free if "tlrt_tape_free" in PROTOTYPES else None

    def __init__(self, device=CPU):
        out = ctypes.c_void_p()
        _check(lib.tlrt_tape_new(_as_device(device), ctypes.byref(out)), "tlrt_tape_new")
        self._h = out.value
        self._gen = 0  # counts resets: a Node of an older generation is stale

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


def _node_result(op):
    """The recording method `op` returning a Node (released when collected) for its id."""

    def method(self, *args, **kwargs):
        return Node(op(self, *args, **kwargs), self)

    method.__signature__ = op.__signature__
    method.__doc__ = op.__doc__
    return method


TAPE_METHODS = []
_m = None
for _proto in PROTOTYPES.values():
    if (_proto.name.startswith("tlrt_tape_") and _proto.params and _proto.params[0][0] in
            ("tlrt_tape *", "const tlrt_tape *") and _proto.restype == "tlrt_status"
            and _proto.name not in ("tlrt_tape_shape",)):
        _m = _make_op(_proto)
        if _proto.params[-1] == ("uint64_t *", "out"):  # a recording call or leaf: a Node
            _m = _node_result(_m)
        _m.__name__ = _m.__qualname__ = _proto.name[len("tlrt_tape_"):]
        setattr(Tape, _m.__name__, _m)
        TAPE_METHODS.append(_m.__name__)
# t.gather_vec(v, idx), t.cross_entropy(logits, labels), ...: a Buffer as the index list records
# the _ibuf form (the tape keeps a reference to it until reset).
for _name, _idx in (("gather_vec", "idx"), ("gather_rows", "idx"), ("scatter_add", "idx"),
                    ("scatter_add_rows", "idx"), ("cross_entropy", "labels")):
    if hasattr(Tape, _name) and hasattr(Tape, _name + "_ibuf"):
        setattr(Tape, _name, _index_dispatch(getattr(Tape, _name), getattr(Tape, _name + "_ibuf"),
                                             _idx))


def _with_ignore_index(ce, ce_ignore):
    """Tape.cross_entropy with an ignore_index keyword (PyTorch's F.cross_entropy(...,
    ignore_index=...)): None (the default) records cross_entropy as before (host list or index
    Buffer); an int records tlrt_tape_cross_entropy_ignore (labels an index Buffer on the tape's
    device; a host list is uploaded as int64 to the logits' device first)."""

    def cross_entropy(self, logits, labels, ignore_index=None):
        if ignore_index is None:
            return ce(self, logits, labels)
        if not isinstance(labels, Buffer):
            labels = Buffer.from_ints(list(labels), dtype="int64",
                                      device=self.value(logits).device)
        return ce_ignore(self, logits, labels, int(ignore_index))

    cross_entropy.__name__ = cross_entropy.__qualname__ = "cross_entropy"
    cross_entropy.__doc__ = (f"{ce.__doc__}\n\nignore_index (keyword, default None): "
                             f"{_with_ignore_index.__doc__}\n\n{ce_ignore.__doc__}")
    return cross_entropy


if hasattr(Tape, "cross_entropy") and hasattr(Tape, "cross_entropy_ignore"):
    Tape.cross_entropy = _with_ignore_index(Tape.cross_entropy, Tape.cross_entropy_ignore)


def _tape_lifetime_methods():
    """reset (Nodes recorded before it go stale), release (a Node released by hand is not
    released again when collected), backward and backward_seed (free the graph as they go unless
    retain_graph=True)."""
    reset, release, backward_ex = Tape.reset, Tape.release, Tape.backward_ex
    free_flag = DEFINES["TLRT_TAPE_BACKWARD_FREE"]

    def tape_reset(self):
        reset(self)
        self._gen += 1

    def tape_release(self, node):
        release(self, node)
        if isinstance(node, Node):
            node._gen = None

    def tape_backward(self, node, seed=None, retain_graph=False):
        return backward_ex(self, node, seed, 0 if retain_graph else free_flag)

    def tape_backward_seed(self, node, seed, retain_graph=False):
        return backward_ex(self, node, seed, 0 if retain_graph else free_flag)

    tape_reset.__doc__ = reset.__doc__
    tape_release.__doc__ = release.__doc__
    tape_backward.__doc__ = (
        "Backward from node (seed None: node has one element, seeded with 1; else a Buffer of "
        "the node's size). retain_graph=False (the default, PyTorch's) frees each rule's saved "
        "values as soon as it has run (TLRT_TAPE_BACKWARD_FREE), so a second backward through "
        "the same graph raises TLRT_ERR_RELEASED; retain_graph=True keeps them (a second backward "
        "accumulates).\n\n" + backward_ex.__doc__)
    tape_backward_seed.__doc__ = ("backward(node, seed, retain_graph) with a seed Buffer.\n\n"
                                  + backward_ex.__doc__)
    for name, fn in (("reset", tape_reset), ("release", tape_release),
                     ("backward", tape_backward), ("backward_seed", tape_backward_seed)):
        fn.__name__ = fn.__qualname__ = name
        setattr(Tape, name, fn)


if hasattr(Tape, "backward_ex") and hasattr(Tape, "release"):
    _tape_lifetime_methods()


def _attention_defaults(raw, fused):
    """Tape.attention_qkv / Tape.attention with heads_kv defaulting to heads_q (ordinary
    multi-head attention), causal to False and scale to 1 / sqrt(d), d read from the node
    shapes; positional calls with every argument record exactly the raw tlrt_tape_* call."""
    import math

    if fused:
        def attention_qkv(self, qkv, heads_q, heads_kv=None, causal=False, scale=None):
            heads_kv = heads_q if heads_kv is None else heads_kv
            if scale is None:
                dims, _ = self.shape(qkv)
                heads = int(heads_q) + 2 * int(heads_kv)
                d = dims[-1] // heads if dims and heads > 0 else 0
                scale = 1.0 / math.sqrt(d) if d > 0 else 1.0
            return raw(self, qkv, heads_q, heads_kv, causal, scale)
        wrapper = attention_qkv
    else:
        def attention(self, q, k, v, heads_q, heads_kv=None, causal=False, scale=None):
            heads_kv = heads_q if heads_kv is None else heads_kv
            if scale is None:
                dims, _ = self.shape(q)
                d = dims[-1] // int(heads_q) if dims and int(heads_q) > 0 else 0
                scale = 1.0 / math.sqrt(d) if d > 0 else 1.0
            return raw(self, q, k, v, heads_q, heads_kv, causal, scale)
        wrapper = attention
    wrapper.__doc__ = f"{raw.__doc__}\n\n{_attention_defaults.__doc__}"
    return wrapper


for _name in ("attention_qkv", "attention"):
    if hasattr(Tape, _name):
        setattr(Tape, _name, _attention_defaults(getattr(Tape, _name), _name == "attention_qkv"))
__all__ += ["Tape", "Node", "buffer"]


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


del _name, _restype, _params, _header, _doc, _proto, _fn, _m, _sname, _idx, _opt


# ---------------------------------------------------------------------------------------------
# Tensors: a Buffer with a shape, NumPy-style construction, operators and broadcasting.
# ---------------------------------------------------------------------------------------------
from . import _tensor  # noqa: E402  (needs everything above)
from ._tensor import (Tensor, ShapeError, tensor, as_tensor, from_numpy, zeros, ones,  # noqa: E402
                     full, arange, attention, float32, int32, int64)
__all__ += _tensor.__all__


# ---------------------------------------------------------------------------------------------
# Checkpoints (abi/tlrt_checkpoint.h): safetensors files, the format of Hugging Face's
# safetensors package (PyTorch, NumPy, JAX and the Hub read and write it).
#     rt.save_safetensors("model.safetensors", {"w": w, "b": b}, metadata={"format": "pt"})
#     params = rt.load_safetensors("model.safetensors")        # {"b": Tensor, "w": Tensor}
#     with rt.SafeTensors("model.safetensors") as f:           # lazy: one tensor at a time
#         f.keys(), f.metadata, f.info("w"), f.load("w", rt.cuda(0))
# ---------------------------------------------------------------------------------------------

# The dtypes of the format by their TLRT_SAFETENSORS_* code ("F32", "BF16", ...).
SAFETENSORS_DTYPES = {v: k[len("TLRT_SAFETENSORS_"):] for k, v in DEFINES.items()
                      if k.startswith("TLRT_SAFETENSORS_") and k != "TLRT_SAFETENSORS_MAX_RANK"}


def _c_path(path, function):
    """A path (str, bytes or os.PathLike) as the bytes the C library opens."""
    b = os.fsencode(path)
    if b"\0" in b:
        raise ValueError(f"{function}: the path holds a NUL byte")
    return b


def _c_string(s, function, what):
    """A str as NUL-terminated UTF-8 (ValueError for a NUL inside, which C would cut at)."""
    if not isinstance(s, str):
        raise TypeError(f"{function}: {what} must be a str, not {type(s).__name__}")
    b = s.encode("utf-8")
    if b"\0" in b:
        raise ValueError(f"{function}: {what} {s!r} holds a NUL character")
    return b


def save_safetensors(path, tensors, metadata=None):
    """Writes `tensors`, a mapping of names (str) to Tensors or Buffers, to the safetensors file
    `path` (tlrt_safetensors_save): a Tensor keeps its shape, a Buffer is saved as one axis of its
    size; float32 / int32 / int64 as "F32" / "I32" / "I64"; any device (CUDA ones are
    downloaded). metadata: None or a mapping of str to str (the file's "__metadata__").
    The file is written to path + ".tmp" and renamed: `path` is replaced whole or not at all.
    The layout is the reference writer's (safetensors.numpy.save_file writes the same bytes for
    the same tensors and at most one metadata entry). Errors are the library's (TlrtError:
    TLRT_ERR_INVALID_ARGUMENT for a repeated or "__metadata__" name,
    TLRT_ERR_IO for a file that cannot be written, ...)."""
    fname = "tlrt_safetensors_save"
    items = list(tensors.items())
    names, handles, shapes = [], [], []
    for name, value in items:
        names.append(_c_string(name, fname, "a tensor name"))
        if isinstance(value, Tensor):
            handles.append(_handle(value.buffer, fname, repr(name)))
            shapes.append(tuple(value.shape))
        elif isinstance(value, Buffer):
            handles.append(_handle(value, fname, repr(name)))
            shapes.append(None)  # one axis of the buffer's size
        else:
            raise TypeError(f"{fname}: the value of {name!r} must be a Tensor or a Buffer, not "
                            f"{type(value).__name__}")
    meta = list((metadata or {}).items())
    keys = [_c_string(k, fname, "a metadata key") for k, _ in meta]
    values = [_c_string(v, fname, "a metadata value") for _, v in meta]
    n, m = len(items), len(meta)
    c_names = (ctypes.c_char_p * n)(*names) if n else None
    c_bufs = (ctypes.c_void_p * n)(*handles) if n else None
    dim_arrays = [None if s is None or not s else (ctypes.c_uint64 * len(s))(*s) for s in shapes]
    c_dims = (ctypes.POINTER(ctypes.c_uint64) * n)(
        *[ctypes.cast(a, ctypes.POINTER(ctypes.c_uint64)) for a in dim_arrays]) if n else None
    c_ranks = (ctypes.c_uint32 * n)(*[1 if s is None else len(s) for s in shapes]) if n else None
    c_keys = (ctypes.c_char_p * m)(*keys) if m else None
    c_values = (ctypes.c_char_p * m)(*values) if m else None
    _check(lib.tlrt_safetensors_save(_c_path(path, fname), n, c_names, c_bufs, c_dims, c_ranks,
                                     m, c_keys, c_values), fname)


class SafeTensors:
    """An open safetensors file (tlrt_safetensors_open: the whole header is validated here, no
    tensor is read): names, dtypes, shapes and metadata at once, each tensor's values when asked
    for. A context manager; close() (or the finalizer) closes the file. Tensors loaded from it
    stay valid after it is closed.

        with rt.SafeTensors("model.safetensors") as f:
            for name in f.keys():                    # sorted by name
                dtype, shape = f.info(name)          # ("BF16", (4096, 4096))
                t = f.load(name, rt.cuda(0))         # a Tensor (F16/BF16/F64 become float32)
    """

    __slots__ = ("_h", "path", "__weakref__")
    _close_fn = lib.tlrt_safetensors_close  # kept on the class: usable during shutdown

    def __init__(self, path):
        self.path = path
        self._h = None
        out = ctypes.c_void_p()
        _check(lib.tlrt_safetensors_open(_c_path(path, "tlrt_safetensors_open"),
                                         ctypes.byref(out)), "tlrt_safetensors_open")
        self._h = out.value

    def close(self):
        """Closes the file now (idempotent); later calls raise ValueError."""
        h, self._h = self._h, None
        if h:
            SafeTensors._close_fn(h)

    def __del__(self):
        try:
            h = getattr(self, "_h", None)
            if h:
                self._h = None
                SafeTensors._close_fn(h)
        except BaseException:  # a finalizer never raises
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _handle(self, function):
        if self._h is None:
            raise ValueError(f"{function}: the SafeTensors file was closed")
        return self._h

    def _count(self, fname):
        n = ctypes.c_uint64()
        _check(getattr(lib, fname)(self._handle(fname), ctypes.byref(n)), fname)
        return n.value

    def _string_at(self, fname, index):
        s = ctypes.c_char_p()
        _check(getattr(lib, fname)(self._handle(fname), index, ctypes.byref(s)), fname)
        return s.value.decode("utf-8")

    def keys(self):
        """The tensor names, sorted (by their UTF-8 bytes, which is code point order)."""
        return [self._string_at("tlrt_safetensors_name", i)
                for i in range(self._count("tlrt_safetensors_count"))]

    def __len__(self):
        return self._count("tlrt_safetensors_count")

    def __iter__(self):
        return iter(self.keys())

    def __contains__(self, name):
        if not isinstance(name, str) or "\0" in name:
            return False
        fname = "tlrt_safetensors_info"
        dtype, rank = ctypes.c_uint32(), ctypes.c_uint32()
        status = lib.tlrt_safetensors_info(self._handle(fname), name.encode("utf-8"),
                                           ctypes.byref(dtype), None, 0, ctypes.byref(rank))
        if status == STATUS["TLRT_ERR_INDEX"]:
            return False
        _check(status, fname)
        return True

    @property
    def metadata(self):
        """The "__metadata__" entries as a dict of str to str ({} when the file has none)."""
        fname = "tlrt_safetensors_metadata"
        out = {}
        for i in range(self._count("tlrt_safetensors_metadata_count")):
            key = self._string_at("tlrt_safetensors_metadata_key", i)
            value = ctypes.c_char_p()
            _check(lib.tlrt_safetensors_metadata(self._handle(fname), key.encode("utf-8"),
                                                 ctypes.byref(value)), fname)
            out[key] = value.value.decode("utf-8")
        return out

    def info(self, name):
        """(dtype, shape) of a tensor: the file's dtype string ("F32", "BF16", "U8", ...) and its
        shape as a tuple. KeyError for a name the file does not have."""
        fname = "tlrt_safetensors_info"
        cap = DEFINES["TLRT_SAFETENSORS_MAX_RANK"]
        dims = (ctypes.c_uint64 * cap)()
        dtype, rank = ctypes.c_uint32(), ctypes.c_uint32()
        status = lib.tlrt_safetensors_info(self._handle(fname), _c_string(name, fname, "name"),
                                           ctypes.byref(dtype), dims, cap, ctypes.byref(rank))
        if status == STATUS["TLRT_ERR_INDEX"]:
            raise KeyError(name)
        _check(status, fname)
        return SAFETENSORS_DTYPES.get(dtype.value, str(dtype.value)), tuple(dims[:rank.value])

    def load_buffer(self, name, device=CPU):
        """The tensor's values as a flat Buffer on `device` (tlrt_safetensors_load): F32, I32,
        I64 as they are, F16 and BF16 exactly as float32, F64 rounded to float32; other dtypes
        raise TlrtError (TLRT_ERR_DTYPE). KeyError for a name the file does not have."""
        fname = "tlrt_safetensors_load"
        out = ctypes.c_void_p()
        status = lib.tlrt_safetensors_load(self._handle(fname), _c_string(name, fname, "name"),
                                           _as_device(device), ctypes.byref(out))
        if status == STATUS["TLRT_ERR_INDEX"]:
            raise KeyError(name)
        _check(status, fname)
        return Buffer(out.value)

    def load(self, name, device=CPU):
        """The tensor as a Tensor of its shape on `device` (load_buffer's conversions). A rank
        above the Tensor's limit (8) raises ShapeError: use load_buffer and info then."""
        _, shape = self.info(name)
        return Tensor(self.load_buffer(name, device), shape)

    def __getitem__(self, name):
        return self.load(name)

    def __repr__(self):
        if self._h is None:
            return "SafeTensors(<closed>)"
        return f"SafeTensors({self.path!r}, tensors={len(self)})"


def load_safetensors(path, device=CPU):
    """Every tensor of the safetensors file `path` as a dict of names to Tensors on `device`
    (sorted by name; F16 / BF16 / F64 tensors become float32; see SafeTensors.load)."""
    with SafeTensors(path) as f:
        return {name: f.load(name, device) for name in f.keys()}


__all__ += ["SAFETENSORS_DTYPES", "save_safetensors", "load_safetensors", "SafeTensors"]
