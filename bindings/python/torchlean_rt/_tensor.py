"""torchlean_rt.Tensor (module torchlean_rt._tensor): a Buffer that knows its shape.

A Tensor is one Buffer (float32, int32 or int64 values on one device, row-major) and a shape of
rank 0 to 8 whose product is the buffer's size. Everything the library computes is reached
through the op wrappers of the package (rt.add, rt.matmul, rt.broadcast_to, ...); this module
adds the bookkeeping NumPy and PyTorch users expect:

  * construction: tensor(data) copies nested lists, scalars, numpy arrays or other Tensors
    (floats -> float32, ints -> int64, like torch.tensor); zeros / ones / full / arange;
    from_numpy; Tensor.from_dlpack shares the memory of a numpy / torch / cupy / jax tensor;
  * conversion: numpy(), __array__, tolist(), item(), __dlpack__ (with the shape), to(device);
  * arithmetic with NumPy broadcasting: + - * / between tensors and Python scalars, unary -,
    abs(), @ (matmul with NumPy's rules for 1-D operands and broadcast batch axes),
    maximum / minimum;
  * layout: reshape (no copy: the new Tensor shares the buffer), T / transpose / permute,
    indexing by ints and unit-step slices;
  * reductions: sum / mean over everything or over axes; softmax / log_softmax / rms_norm over
    the last axis; the unary ops exp, log, sqrt, tanh, sigmoid, relu, gelu, silu, softplus,
    clamp;
  * attention read in place (tlrt_attention_fwd): Tensor.attention_qkv of a fused projection
    (B, T, (Hq + 2 Hkv) d) and attention(q, k, v) of separate (B, T, H d) tensors, grouped heads
    and len_q != len_k included, giving (B, Tq, Hq d) with no split or permute copy.

Broadcasting follows NumPy: shapes are aligned at their last axis, and an axis of size 1 (or a
missing leading axis) stretches to the other operand's size. An operand whose shape differs from
the result's is first materialised by tlrt_broadcast_to, then the same-size op of the library
runs. Shapes that do not broadcast raise ShapeError (a TlrtError with status TLRT_ERR_SHAPE and a
ValueError) naming both shapes, before anything is computed. Element types are the library's:
arithmetic on an int32 / int64 tensor raises TlrtError (TLRT_ERR_DTYPE) from the library.
"""
import array as _array
import ctypes
import numbers
import operator

from . import (Buffer, CPU, OPS, STATUS, TlrtError, _as_device, _check, _dlpack_import, _np,
               attention_geometry as _attention_geometry,
               attention_qkv_geometry as _attention_qkv_geometry, cuda as _cuda, device_name, lib)

__all__ = ["Tensor", "ShapeError", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full",
           "arange", "attention", "float32", "int32", "int64", "MAX_RANK"]

float32, int32, int64 = "float32", "int32", "int64"
MAX_RANK = 8  # the rank limit of the library's layout ops (broadcast_to, permute, sum over an axis)
_DTYPE_CODES = {float32: 0, int32: 1, int64: 2}


class ShapeError(TlrtError, ValueError):
    """Shapes that do not fit an operation (status TLRT_ERR_SHAPE), found by the binding before
    any call: broadcasting, matmul, reshape, construction from a buffer."""

    def __init__(self, message, function):
        super().__init__(STATUS["TLRT_ERR_SHAPE"], "TLRT_ERR_SHAPE", message, function)


def _dtype_name(dtype):
    """'float32' / 'int32' / 'int64' from a name, a numpy dtype or the Python types float / int."""
    if dtype is None or dtype in _DTYPE_CODES:
        return dtype
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if _np is not None:
        try:
            name = _np.dtype(dtype).name
        except TypeError:
            name = None
        if name in _DTYPE_CODES:
            return name
    raise TypeError(f"dtype {dtype!r} is not one of the library's element types "
                    f"(float32, int32, int64)")


def _check_shape(shape, function):
    """A shape as a tuple of ints >= 0, rank <= MAX_RANK."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{function}: a shape is a sequence of ints, not {shape!r}") from None
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{function}: rank {len(shape)} exceeds {MAX_RANK}", function)
    if any(d < 0 for d in shape):
        raise ShapeError(f"{function}: negative dimension in {shape}", function)
    return shape


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _broadcast_shapes(a, b, function):
    """NumPy's broadcast of two shapes; ShapeError naming both if they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"{function}: shapes {a} and {b} do not broadcast (axis {-i}: "
                             f"{x} vs {y})", function)
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _flatten(data, function):
    """(shape, flat list) of nested lists / tuples of numbers; ragged nesting is a ShapeError."""
    if isinstance(data, (list, tuple)):
        if not data:
            return (0,), []
        parts = [_flatten(x, function) for x in data]
        inner = parts[0][0]
        if any(p[0] != inner for p in parts):
            raise ShapeError(f"{function}: ragged nested sequence (sub-shapes "
                             f"{sorted({p[0] for p in parts})})", function)
        return (len(data),) + inner, [v for p in parts for v in p[1]]
    if isinstance(data, bool) or not isinstance(data, numbers.Real):
        raise TypeError(f"{function}: expected numbers or nested lists of numbers, not "
                        f"{type(data).__name__}")
    return (), [data]


class Tensor:
    """A Buffer and its shape (row-major). Construct with tensor(), zeros(), ones(), full(),
    arange(), from_numpy(), Tensor.from_dlpack() or Tensor(buffer, shape); a Tensor shares its
    buffer with its reshapes."""

    __slots__ = ("_buf", "_shape", "__weakref__")
    __array_ufunc__ = None  # numpy_array + tensor calls Tensor.__radd__ instead of looping

    def __init__(self, buffer, shape=None):
        """Wraps `buffer` (a Buffer, which the Tensor keeps) as `shape` (default: 1-D of the
        buffer's size). The product of shape must be the buffer's size."""
        if not isinstance(buffer, Buffer):
            raise TypeError(f"Tensor(buffer, shape): buffer must be a Buffer, not "
                            f"{type(buffer).__name__} (use torchlean_rt.tensor(data))")
        size = buffer.size
        shape = (size,) if shape is None else _check_shape(shape, "Tensor")
        if _numel(shape) != size:
            raise ShapeError(f"Tensor: shape {shape} has {_numel(shape)} elements, the buffer "
                             f"{size}", "Tensor")
        self._buf, self._shape = buffer, shape

    @classmethod
    def _wrap(cls, buffer, shape):
        t = object.__new__(cls)
        t._buf, t._shape = buffer, shape
        return t

    # -- what it is --
    @property
    def buffer(self):
        """The Buffer holding the values (shared, not copied)."""
        return self._buf

    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)

    def numel(self):
        """The number of elements (the product of the shape)."""
        return _numel(self._shape)

    @property
    def dtype(self):
        """'float32', 'int32' or 'int64'."""
        return self._buf.dtype

    @property
    def device(self):
        """The device handle (torchlean_rt.CPU, torchlean_rt.cuda(i))."""
        return self._buf.device

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __repr__(self):
        if self._buf.freed:
            return "Tensor(<freed>)"
        dev = "" if self.device == CPU else f", device={device_name(self.device)}"
        if self.numel() <= 64 and self.device == CPU:
            body = repr(self.tolist())
        else:
            body = f"<{self.numel()} elements>"
        return f"tensor({body}, shape={self._shape}, dtype={self.dtype}{dev})"

    # -- conversion --
    def numpy(self):
        """A new numpy array of the tensor's shape and element type (a copy; numpy.from_dlpack
        shares the memory instead)."""
        return self._buf.to_numpy().reshape(self._shape)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        """Nested lists of Python floats (or ints), a number for a 0-d tensor."""
        flat = self._buf.to_list() if self.dtype == float32 else self._buf.to_int_list()
        if not self._shape:
            return flat[0]

        def nest(values, shape):
            if len(shape) == 1:
                return values
            step = _numel(shape[1:])
            return [nest(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
        return nest(flat, self._shape)

    def item(self):
        """The one value of a one-element tensor, as a Python number."""
        if self.numel() != 1:
            raise ShapeError(f"item: the tensor has {self.numel()} elements, not 1", "item")
        return (self._buf.to_list() if self.dtype == float32 else self._buf.to_int_list())[0]

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def to(self, device):
        """A copy on `device` (the same Tensor if it is already there)."""
        device = _as_device(device)
        return self if device == self.device else Tensor._wrap(self._buf.to(device), self._shape)

    def cpu(self):
        return self.to(CPU)

    def cuda(self, ordinal=0):
        return self.to(_cuda(ordinal))

    def copy(self):
        """A copy with its own buffer."""
        return Tensor._wrap(self._buf.copy(), self._shape)

    def __dlpack_device__(self):
        return self._buf.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this tensor (its shape, row-major strides) sharing the buffer;
        the arguments are those of Buffer.__dlpack__."""
        return self._buf.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                                    copy=copy, dims=self._shape)

    @classmethod
    def from_dlpack(cls, obj, *, device=None):
        """A Tensor sharing the memory of `obj` (anything with __dlpack__, or a capsule), with
        its shape: no copy. The tensor must be contiguous, of float32, int32 or int64."""
        buf, shape = _dlpack_import(obj, device)
        if len(shape) > MAX_RANK:  # the buffer is flat already; keep the values, refuse the rank
            raise ShapeError(f"from_dlpack: rank {len(shape)} exceeds {MAX_RANK}", "from_dlpack")
        return cls._wrap(buf, shape)

    # -- layout --
    def reshape(self, *shape):
        """The same values as `shape` (one entry may be -1: inferred). No copy: the result shares
        the buffer."""
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        shape = tuple(operator.index(d) for d in shape)
        n = self.numel()
        if shape.count(-1) > 1:
            raise ShapeError(f"reshape: more than one -1 in {shape}", "reshape")
        if -1 in shape:
            rest = _numel(d for d in shape if d != -1)
            if rest == 0 or n % rest:
                raise ShapeError(f"reshape: cannot infer -1 of {shape} for {n} elements",
                                 "reshape")
            shape = tuple(n // rest if d == -1 else d for d in shape)
        shape = _check_shape(shape, "reshape")
        if _numel(shape) != n:
            raise ShapeError(f"reshape: shape {shape} has {_numel(shape)} elements, the tensor "
                             f"{self._shape} has {n}", "reshape")
        return Tensor._wrap(self._buf, shape)

    def flatten(self):
        return self.reshape(-1)

    def permute(self, *axes):
        """The axes reordered: result axis j is input axis axes[j] (tlrt_permute, a copy)."""
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(axes[0])
        r = self.ndim
        axes = tuple(a + r if a < 0 else a for a in (operator.index(a) for a in axes))
        if sorted(axes) != list(range(r)):
            raise ShapeError(f"permute: {axes} is not a permutation of the {r} axes of "
                             f"{self._shape}", "permute")
        if axes == tuple(range(r)):
            return self
        out = OPS["permute"](self._buf, list(self._shape), list(axes))
        return Tensor._wrap(out, tuple(self._shape[a] for a in axes))

    def transpose(self, *axes):
        """Without arguments, the axes reversed (numpy's .T; tlrt_transpose2d for a matrix);
        with two axes, those two swapped."""
        r = self.ndim
        if not axes:
            if r < 2:
                return self
            if r == 2:
                rows, cols = self._shape
                return Tensor._wrap(OPS["transpose2d"](self._buf, rows, cols), (cols, rows))
            return self.permute(tuple(reversed(range(r))))
        if len(axes) != 2:
            raise TypeError("transpose() takes no axes (reverse them all) or two axes to swap")
        p = list(range(r))
        i, j = (a + r if a < 0 else a for a in axes)
        if not (0 <= i < r and 0 <= j < r):
            raise IndexError(f"transpose: axes {axes} out of range for rank {r}")
        p[i], p[j] = p[j], p[i]
        return self.permute(p)

    @property
    def T(self):
        return self.transpose()

    def __getitem__(self, key):
        """t[i], t[a:b], t[i, j], t[:, a:b], ...: ints and unit-step slices per axis (copies)."""
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IndexError(f"too many indices ({len(key)}) for a tensor of rank {self.ndim}")
        t, drop = self, []
        for axis, k in enumerate(key):
            n = self._shape[axis]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step != 1:
                    raise NotImplementedError("slices with a step other than 1 are not supported "
                                              "(the library has no strided view)")
                start, length = start, max(0, stop - start)
                if (start, length) == (0, n):
                    continue
            elif isinstance(k, numbers.Integral) and not isinstance(k, bool):
                i = operator.index(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of range for axis {axis} of size {n}")
                start, length = i % n, 1
                drop.append(axis)
            else:
                raise TypeError(f"tensor indices are ints and slices, not {type(k).__name__} "
                                "(no Ellipsis, None, masks or index arrays)")
            t = t._slice_axis(axis, start, length)
        if drop:
            t = t.reshape(tuple(d for a, d in enumerate(t._shape) if a not in drop))
        return t

    def _slice_axis(self, axis, start, length):
        """Entries start .. start + length along `axis` (tlrt_slice_axis0 on the axis brought to
        the front; no move needed when the axes before it have size 1)."""
        shape = self._shape
        if _numel(shape[:axis]) == 1:
            inner = _numel(shape[axis + 1:])
            out = OPS["slice_axis0"](self._buf, shape[axis], inner, start, length)
            return Tensor._wrap(out, shape[:axis] + (length,) + shape[axis + 1:])
        order = (axis,) + tuple(a for a in range(self.ndim) if a != axis)
        moved = self.permute(order)._slice_axis(0, start, length)
        back = [0] * self.ndim
        for j, a in enumerate(order):
            back[a] = j
        return moved.permute(back)

    def expand(self, *shape):
        """The values broadcast to `shape` (NumPy rules; tlrt_broadcast_to, a copy)."""
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        shape = _check_shape(shape, "expand")
        if _broadcast_shapes(self._shape, shape, "expand") != shape:
            raise ShapeError(f"expand: shape {self._shape} does not broadcast to {shape}",
                             "expand")
        return self._expand(shape)

    def _expand(self, shape):
        if shape == self._shape:
            return self
        k, r = self.ndim, len(shape)
        axis_map = [0] * (r - k) + list(range(1, k + 1))
        out = OPS["broadcast_to"](self._buf, list(self._shape), list(shape), axis_map)
        return Tensor._wrap(out, shape)

    # -- arithmetic --
    def _other(self, other):
        """`other` as a Tensor (a numpy array or nested list: copied to this tensor's device),
        or None if it is not tensor-like."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (list, tuple)) or (_np is not None and
                                                isinstance(other, _np.ndarray)):
            return tensor(other, device=self.device)
        return None

    def _binary(self, other, op, function, reflected=False):
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            # A Python number: a filled buffer of this tensor's shape (one fill, no broadcast).
            o = Tensor._wrap(Buffer.full(self.numel(), float(other), self.device), self._shape)
        else:
            o = self._other(other)
            if o is None:
                return NotImplemented
        a, b = (o, self) if reflected else (self, o)
        shape = _broadcast_shapes(a._shape, b._shape, function)
        return Tensor._wrap(OPS[op](a._expand(shape)._buf, b._expand(shape)._buf), shape)

    def __add__(self, other):
        return self._binary(other, "add", "add")

    def __radd__(self, other):
        return self._binary(other, "add", "add", reflected=True)

    def __sub__(self, other):
        return self._binary(other, "sub", "sub")

    def __rsub__(self, other):
        return self._binary(other, "sub", "sub", reflected=True)

    def __mul__(self, other):
        return self._binary(other, "mul", "mul")

    def __rmul__(self, other):
        return self._binary(other, "mul", "mul", reflected=True)

    def __truediv__(self, other):
        return self._binary(other, "div", "div")

    def __rtruediv__(self, other):
        return self._binary(other, "div", "div", reflected=True)

    def maximum(self, other):
        """Elementwise max with broadcasting (NaN propagates; -0 < +0)."""
        r = self._binary(other, "max", "maximum")
        if r is NotImplemented:
            raise TypeError(f"maximum: unsupported operand {type(other).__name__}")
        return r

    def minimum(self, other):
        """Elementwise min with broadcasting (NaN propagates; -0 < +0)."""
        r = self._binary(other, "min", "minimum")
        if r is NotImplemented:
            raise TypeError(f"minimum: unsupported operand {type(other).__name__}")
        return r

    def __neg__(self):
        return Tensor._wrap(OPS["neg"](self._buf), self._shape)

    def __pos__(self):
        return self

    def __abs__(self):
        return Tensor._wrap(OPS["abs"](self._buf), self._shape)

    def __matmul__(self, other):
        o = self._other(other)
        return NotImplemented if o is None else _matmul(self, o)

    def __rmatmul__(self, other):
        o = self._other(other)
        return NotImplemented if o is None else _matmul(o, self)

    def matmul(self, other):
        return self @ other

    def clamp(self, lo, hi):
        """tlrt_clamp: values limited to [lo, hi] (infinite bounds allowed)."""
        return Tensor._wrap(OPS["clamp"](self._buf, lo, hi), self._shape)

    def scale(self, c):
        """tlrt_scale: every value times the host scalar c (rounded once to float32)."""
        return Tensor._wrap(OPS["scale"](self._buf, c), self._shape)

    # -- reductions --
    def _axes(self, axis, function):
        r = self.ndim
        axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
        out = set()
        for a in axes:
            a = operator.index(a)
            if not -r <= a < r:
                raise IndexError(f"{function}: axis {a} is out of range for rank {r}")
            out.add(a % r)
        return sorted(out, reverse=True)

    def sum(self, axis=None, keepdims=False):
        """The sum over all values (a 0-d tensor; tlrt_reduce_sum) or over `axis` (an int or a
        tuple; tlrt_reduce_sum_axis per axis). keepdims keeps the reduced axes with size 1."""
        if axis is None:
            out = Tensor._wrap(OPS["reduce_sum"](self._buf), ())
            return out.reshape((1,) * self.ndim) if keepdims else out
        t, shape = self, list(self._shape)
        for a in self._axes(axis, "sum"):
            buf = OPS["reduce_sum_axis"](t._buf, list(t._shape), a)
            t = Tensor._wrap(buf, t._shape[:a] + t._shape[a + 1:])
            shape[a] = 1
        return t.reshape(shape) if keepdims else t

    def mean(self, axis=None, keepdims=False):
        """The mean over all values (tlrt_reduce_mean) or over `axis`: the sum over the axes
        divided by the number of values reduced (one float32 division)."""
        if axis is None:
            out = Tensor._wrap(OPS["reduce_mean"](self._buf), ())
            return out.reshape((1,) * self.ndim) if keepdims else out
        count = _numel(self._shape[a] for a in self._axes(axis, "mean"))
        s = self.sum(axis, keepdims)
        return Tensor._wrap(OPS["div"](s._buf, Buffer.full(s.numel(), count, s.device)), s._shape)

    def _last_axis(self, function, axis):
        if not self._shape:
            raise ShapeError(f"{function}: a 0-d tensor has no last axis", function)
        if axis not in (-1, self.ndim - 1):
            raise NotImplementedError(f"{function} over the last axis only (permute first)")
        if self.dtype != float32:
            raise TypeError(f"{function}: a float32 tensor, not {self.dtype}")
        return _numel(self._shape[:-1]), self._shape[-1]

    def argmax(self, axis=-1, dtype=int64):
        """The index of the maximum along the last axis (tlrt_argmax_rows; torch.argmax(dim=-1)):
        an int64 (or dtype int32) tensor of the leading shape. NaN is the maximum (the first NaN
        wins), ties go to the lowest index, -0 == +0. It feeds the index-buffer gathers (an
        embedding of the picked tokens) directly."""
        rows, cols = self._last_axis("argmax", axis)
        return Tensor._wrap(OPS["argmax_rows"](self._buf, rows, cols, _dtype_name(dtype)),
                            self._shape[:-1])

    def topk(self, k, axis=-1, dtype=int64):
        """The k largest values along the last axis in descending order with their indices
        (tlrt_topk_rows; torch.topk(k, dim=-1, sorted=True) on the CPU): (values, indices), each of
        the shape with the last axis k; NaN is the largest, ties by lower index."""
        rows, cols = self._last_axis("topk", axis)
        k = operator.index(k)
        if not 0 <= k <= cols:
            raise ValueError(f"topk: k = {k} is not in [0, {cols}]")
        v, i = OPS["topk_rows"](self._buf, rows, cols, k, _dtype_name(dtype))
        shape = self._shape[:-1] + (k,)
        return Tensor._wrap(v, shape), Tensor._wrap(i, shape)

    def _rows(self, op):
        if not self._shape:
            raise ShapeError(f"{op}: a 0-d tensor has no last axis", op)
        cols = self._shape[-1]
        rows = _numel(self._shape[:-1])
        return Tensor._wrap(OPS[op](self._buf, rows, cols), self._shape)

    def softmax(self, axis=-1):
        """Softmax over the last axis (tlrt_softmax on rows of the last axis)."""
        if axis not in (-1, self.ndim - 1):
            raise NotImplementedError("softmax over the last axis only (permute first)")
        return self._rows("softmax")

    def log_softmax(self, axis=-1):
        """Log-softmax over the last axis (tlrt_log_softmax)."""
        if axis not in (-1, self.ndim - 1):
            raise NotImplementedError("log_softmax over the last axis only (permute first)")
        return self._rows("log_softmax")

    def rms_norm(self, gamma=None, eps=1e-5):
        """RMS norm over the last axis (tlrt_rms_norm_fwd): self / sqrt(mean(self^2) + eps),
        times gamma (a 1-D tensor of the last axis's size on the same device), or unscaled for
        gamma None. The forward's inv_rms is dropped."""
        if not self._shape:
            raise ShapeError("rms_norm: a 0-d tensor has no last axis", "rms_norm")
        cols = self._shape[-1]
        rows = _numel(self._shape[:-1])
        g = None
        if gamma is not None:
            gamma = as_tensor(gamma, self.device)
            if gamma.shape != (cols,):
                raise ShapeError(f"rms_norm: gamma of shape {gamma.shape} for a tensor of shape "
                                 f"{self._shape} (expected ({cols},))", "rms_norm")
            g = gamma._buf
        y, inv_rms = OPS["rms_norm_fwd"](self._buf, g, rows, cols, float(eps))
        inv_rms.free()
        return Tensor._wrap(y, self._shape)


def _heads_d(t, heads, what, function):
    """d of a (B, T, heads d) tensor, ShapeError otherwise."""
    if t.ndim != 3 or heads <= 0 or t.shape[2] % heads:
        raise ShapeError(f"{function}: {what} has shape {t.shape}, not (batch, tokens, "
                         f"{heads} heads of equal width)", function)
    return t.shape[2] // heads


def _scale_of(scale, d):
    return 1.0 / (d ** 0.5) if scale is None and d > 0 else (1.0 if scale is None else scale)


def _attention_qkv(self, heads_q, heads_kv=None, causal=False, scale=None):
    """Self-attention of this fused projection (B, T, (heads_q + 2 heads_kv) d): per token
    heads_q query heads, then heads_kv key heads, then heads_kv value heads, read in place
    (tlrt_attention_fwd; heads_kv defaults to heads_q, scale to 1 / sqrt(d); causal aligned
    bottom-right). Returns (B, T, heads_q d), token-major: the output projection's input."""
    heads_kv = heads_q if heads_kv is None else heads_kv
    d = _heads_d(self, heads_q + 2 * heads_kv, "qkv", "attention_qkv")
    B, T = self.shape[0], self.shape[1]
    g = _attention_qkv_geometry(B, T, heads_q, heads_kv, d)
    out, _ = OPS["attention_fwd"](self._buf, self._buf, self._buf, None, g, _scale_of(scale, d),
                                  bool(causal), float("-inf"))
    return Tensor._wrap(out, (B, T, heads_q * d))


Tensor.attention_qkv = _attention_qkv


def attention(q, k, v, heads_q, heads_kv=None, causal=False, scale=None, mask=None,
              mask_fill=float("-inf")):
    """Attention of q (B, Tq, heads_q d) over k and v (B, Tk, heads_kv d), read in place
    (tlrt_attention_fwd): grouped heads (query head h reads key / value head h / (heads_q /
    heads_kv); heads_kv defaults to heads_q), Tq != Tk (causal aligned bottom-right, a KV cache's
    convention: with Tq = 1 the query sees every key), an optional 0 / 1 mask Tensor of Tq Tk or
    B heads_q Tq Tk elements. scale defaults to 1 / sqrt(d). Returns (B, Tq, heads_q d)."""
    heads_kv = heads_q if heads_kv is None else heads_kv
    d = _heads_d(q, heads_q, "q", "attention")
    _heads_d(k, heads_kv, "k", "attention")
    if k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[2] != heads_kv * d:
        raise ShapeError(f"attention: k {k.shape} and v {v.shape} must both be "
                         f"({q.shape[0]}, len_k, {heads_kv * d}) for q {q.shape}", "attention")
    B, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
    g = _attention_geometry(B, heads_q, heads_kv, Tq, Tk, d)
    m = None if mask is None else (mask._buf if isinstance(mask, Tensor) else mask)
    out, _ = OPS["attention_fwd"](q._buf, k._buf, v._buf, m, g, _scale_of(scale, d),
                                  bool(causal), float(mask_fill))
    return Tensor._wrap(out, (B, Tq, heads_q * d))


def _unary(name):
    op = OPS[name]

    def method(self):
        return Tensor._wrap(op(self._buf), self._shape)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Elementwise {name}, the tensor's shape kept.\n\n{op.__doc__}"
    return method


for _name in ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "softplus", "abs",
              "neg"):
    setattr(Tensor, _name, _unary(_name))
del _name


def _matmul(a, b):
    """NumPy's matmul: 1-D operands are promoted (a vector on the left is a row, on the right a
    column) and the added axis removed; batch axes (all but the last two) broadcast."""
    if not a._shape or not b._shape:
        raise ShapeError(f"matmul: a 0-d operand ({a._shape} @ {b._shape}); use *", "matmul")
    a2 = a.reshape(1, a._shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b._shape[0], 1) if b.ndim == 1 else b
    (m, n), (n2, p) = a2._shape[-2:], b2._shape[-2:]
    if n != n2:
        raise ShapeError(f"matmul: {a._shape} @ {b._shape}: inner dimensions {n} and {n2} differ",
                         "matmul")
    if a2.ndim == 2 and b2.ndim == 2:
        out, shape = OPS["matmul"](a2._buf, b2._buf, m, n, p, False, False), (m, p)
    elif b2.ndim == 2:  # batched @ matrix: the batch folds into the rows
        batch = a2._shape[:-2]
        out = OPS["matmul"](a2._buf, b2._buf, _numel(batch) * m, n, p, False, False)
        shape = batch + (m, p)
    else:
        batch = _broadcast_shapes(a2._shape[:-2], b2._shape[:-2], "matmul")
        a3, b3 = a2._expand(batch + (m, n)), b2._expand(batch + (n, p))
        out = OPS["bmm"](a3._buf, b3._buf, _numel(batch), m, n, p, False, False)
        shape = batch + (m, p)
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return Tensor._wrap(out, shape)


# ---------------------------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------------------------

def _upload_flat(values, dtype, device):
    if dtype == float32:
        return Buffer.from_buffer(_array.array("f", values), device)
    return Buffer.from_ints(values, dtype, device)


def tensor(data, dtype=None, device=CPU):
    """A new Tensor holding a copy of `data`: a number, nested lists / tuples of numbers, a numpy
    array, a Tensor, or anything with __dlpack__. Floats become float32 and ints int64 unless
    dtype ('float32', 'int32', 'int64', numpy dtypes, float, int) says otherwise."""
    dtype = _dtype_name(dtype)
    device = _as_device(device)
    if isinstance(data, Tensor):
        if dtype not in (None, data.dtype):
            raise TypeError(f"tensor: converting {data.dtype} to {dtype} is not supported")
        return data.copy() if data.device == device else data.to(device)
    if _np is not None and isinstance(data, (_np.ndarray, _np.generic)):
        return from_numpy(_np.array(data, dtype=_np.dtype(dtype) if dtype else None), device)
    if hasattr(data, "__dlpack__") and not isinstance(data, Buffer):
        return tensor(Tensor.from_dlpack(data), dtype, device)
    if isinstance(data, Buffer):
        raise TypeError("tensor: wrap a Buffer with Tensor(buffer, shape)")
    shape, flat = _flatten(data, "tensor")
    _check_shape(shape, "tensor")
    if dtype is None:
        dtype = int64 if flat and all(isinstance(v, numbers.Integral) for v in flat) else float32
    if dtype == float32 and not flat:
        return Tensor._wrap(Buffer.zeros(0, device), shape)
    return Tensor._wrap(_upload_flat(flat, dtype, device), shape)


def as_tensor(data, device=None):
    """A Tensor sharing memory with `data` where it can (a Tensor: itself; __dlpack__ objects
    of the library's element types: zero-copy), else tensor(data)."""
    if isinstance(data, Tensor) and device in (None, data.device):
        return data
    if hasattr(data, "__dlpack__") and not isinstance(data, Tensor):
        try:
            t = Tensor.from_dlpack(data)
        except (TlrtError, TypeError, BufferError):
            t = None
        if t is not None:
            return t if device in (None, t.device) else t.to(device)
    return tensor(data, device=CPU if device is None else device)


def from_numpy(a, device=CPU):
    """A Tensor with a copy of the numpy array `a` (float64 rounded to float32 by the library;
    bool and other types refused)."""
    if _np is None:
        raise ImportError("from_numpy needs numpy")
    a = _np.asarray(a)
    shape = _check_shape(a.shape, "from_numpy")
    if a.dtype.kind in "iu":
        want = _np.int32 if a.dtype == _np.int32 else _np.int64
        return Tensor._wrap(Buffer.from_ints(a, "int32" if want is _np.int32 else "int64",
                                             device), shape)
    if a.dtype in (_np.float32, _np.float64):
        return Tensor._wrap(Buffer.from_buffer(_np.ascontiguousarray(a).reshape(-1), device),
                            shape)
    if a.dtype.kind == "f":
        return Tensor._wrap(Buffer.from_buffer(_np.ascontiguousarray(a, _np.float32).reshape(-1),
                                               device), shape)
    raise TypeError(f"from_numpy: numpy {a.dtype} is not one of the library's element types")


def zeros(shape, dtype=float32, device=CPU):
    """A Tensor of zeros (+0) of `shape` (an int or a sequence)."""
    shape, dtype = _check_shape(shape, "zeros"), _dtype_name(dtype)
    out = ctypes.c_void_p()
    _check(lib.tlrt_buffer_zeros_of(_as_device(device), _DTYPE_CODES[dtype], _numel(shape),
                                    ctypes.byref(out)), "tlrt_buffer_zeros_of")
    return Tensor._wrap(Buffer(out.value), shape)


def full(shape, value, dtype=None, device=CPU):
    """A Tensor of `shape` filled with `value` (float32 unless dtype or an int value with
    dtype int32 / int64 says otherwise)."""
    shape, dtype = _check_shape(shape, "full"), _dtype_name(dtype)
    if dtype in (None, float32):
        return Tensor._wrap(Buffer.full(_numel(shape), float(value), _as_device(device)), shape)
    return Tensor._wrap(Buffer.from_ints([operator.index(value)] * _numel(shape), dtype,
                                         _as_device(device)), shape)


def ones(shape, dtype=float32, device=CPU):
    """A Tensor of ones of `shape`."""
    return full(shape, 1, dtype, device)


def arange(start, stop=None, step=1, dtype=None, device=CPU):
    """Values start, start + step, ... below stop (like range; float32 if any argument is a
    float, else int64)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if all(isinstance(v, numbers.Integral) for v in (start, stop, step)) and dtype != float32:
        return tensor(list(range(start, stop, step)), dtype or int64, device)
    n = max(0, -(-(stop - start) // step))
    return tensor([start + i * step for i in range(int(n))], dtype or float32, device)
