#!/usr/bin/env python3
"""Suite 'bindings', test 'python_tensor' (and CI's installed-wheel check): torchlean_rt.Tensor.

Runs against whatever `import torchlean_rt` finds: the source tree (meson passes PYTHONPATH and
TORCHLEAN_RT_LIB) or a package installed by `pip install .` (.ci/run, in a fresh virtual
environment, with TLRT_EXPECT_INSTALLED=1: then the library must be the packaged one). Known
answers and NumPy as the reference (seeded random shapes); exact where the float32 result is
exact (small integers), to a few ulp for the transcendental ops. Errors are checked by type and
status: ShapeError (TLRT_ERR_SHAPE, also a ValueError) from the binding's own shape checks,
TlrtError with the library's status otherwise.

Run as a script it hands itself to pytest when importable, else runs every test_* itself; exit
0 pass, 1 fail, 77 skip (valgrind: CPython under memcheck is slow, the C++ suites cover the code).
"""
import os
import random
import sys

if os.environ.get("TLRT_UNDER_VALGRIND"):
    if __name__ == "__main__":
        print("python_tensor: skipped under valgrind")
        sys.exit(77)
    import pytest
    pytest.skip("skipped under valgrind", allow_module_level=True)

import torchlean_rt as t  # noqa: E402

try:
    import numpy as np
except ImportError:  # the NumPy comparisons skip
    np = None

try:
    import pytest
except ImportError:
    pytest = None


def raises(exc, fn, *args, **kwargs):
    """The exception fn raised (asserting its type), for further checks."""
    try:
        fn(*args, **kwargs)
    except exc as e:
        return e
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"expected {exc.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {exc.__name__}, nothing raised")


def need_numpy():
    if np is None:
        if pytest is not None:
            pytest.skip("numpy is not importable")
        raise _Skip("numpy is not importable")


class _Skip(Exception):
    pass


def test_issue_example():
    r = (t.tensor([[1., 2.], [3., 4.]]) @ t.ones((2, 2)))
    assert r.shape == (2, 2) and r.dtype == "float32"
    assert r.tolist() == [[3.0, 3.0], [7.0, 7.0]]
    if np is not None:
        assert np.array_equal(r.numpy(), np.array([[3, 3], [7, 7]], np.float32))


def test_installed_package():
    if os.environ.get("TLRT_EXPECT_INSTALLED") != "1":
        return
    pkg = os.path.dirname(os.path.abspath(t.__file__))
    assert "site-packages" in pkg, pkg
    assert os.path.dirname(os.path.abspath(t.LIB_PATH)) == pkg, (t.LIB_PATH, pkg)
    inc = t.get_include()
    assert inc and os.path.isfile(os.path.join(inc, "torchlean_rt", "torchlean_rt.h"))
    assert t.build_info()


def test_construction():
    a = t.tensor([[1.5, 2], [3, 4]])
    assert (a.shape, a.ndim, a.numel(), a.dtype, len(a)) == ((2, 2), 2, 4, "float32", 2)
    assert a.device == t.CPU
    i = t.tensor([[1, 2, 3]])
    assert (i.shape, i.dtype, i.tolist()) == ((1, 3), "int64", [[1, 2, 3]])
    assert t.tensor([1, 2], dtype="int32").dtype == "int32"
    assert t.tensor([1, 2], dtype=float).tolist() == [1.0, 2.0]
    s = t.tensor(2.5)
    assert (s.shape, s.item(), float(s)) == ((), 2.5, 2.5)
    raises(TypeError, len, s)
    e = t.tensor([])
    assert (e.shape, e.numel(), e.tolist()) == ((0,), 0, [])
    err = raises(t.ShapeError, t.tensor, [[1, 2], [3]])
    assert err.status == t.TLRT_ERR_SHAPE and isinstance(err, ValueError)
    raises(TypeError, t.tensor, [True, False])
    raises(TypeError, t.tensor, ["a"])
    raises(TypeError, t.tensor, [1.0], dtype="float16")
    raises(t.ShapeError, t.tensor, [[[[[[[[[1.0]]]]]]]]])  # rank 9
    # Tensor(buffer, shape): the product must be the buffer's size.
    b = t.Buffer.from_list([1, 2, 3, 4, 5, 6])
    assert t.Tensor(b, (2, 3)).shape == (2, 3)
    assert t.Tensor(b).shape == (6,)
    err = raises(t.ShapeError, t.Tensor, b, (4, 2))
    assert "(4, 2)" in err.message and "6" in err.message
    raises(TypeError, t.Tensor, [1.0, 2.0], (2,))
    # Copies: tensor(x) of a Tensor does not share.
    c = t.tensor(a)
    assert c.buffer.handle != a.buffer.handle and c.tolist() == a.tolist()


def test_factories():
    z = t.zeros((2, 3))
    assert (z.shape, z.dtype, z.tolist()) == ((2, 3), "float32", [[0.0] * 3] * 2)
    assert t.zeros(3, dtype="int32").tolist() == [0, 0, 0]
    assert t.ones((2,), dtype=t.int64).tolist() == [1, 1]
    assert t.full((2, 2), -1.5).tolist() == [[-1.5, -1.5], [-1.5, -1.5]]
    assert t.full((3,), 7, dtype="int32").tolist() == [7, 7, 7]
    assert t.arange(4).tolist() == [0, 1, 2, 3] and t.arange(4).dtype == "int64"
    assert t.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert t.arange(5, 0, -2).tolist() == [5, 3, 1]
    raises(ValueError, t.arange, 0, 1, 0)
    assert t.zeros((0, 4)).shape == (0, 4)
    raises(t.ShapeError, t.zeros, (-1, 2))
    raises(TypeError, t.zeros, "ab")


def test_numpy_round_trip():
    need_numpy()
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.int32, np.int64):
        x = (rng.standard_normal((3, 4, 5)) * 100).astype(dtype)
        tx = t.from_numpy(x)
        assert tx.shape == x.shape and tx.dtype == np.dtype(dtype).name
        assert np.array_equal(tx.numpy(), x) and np.array_equal(np.asarray(tx), x)
        assert np.array_equal(t.tensor(x).numpy(), x)
    d = rng.standard_normal((2, 3))
    assert np.array_equal(t.tensor(d).numpy(), d.astype(np.float32))  # float64 -> float32
    nc = np.arange(12, dtype=np.float32).reshape(3, 4).T  # not contiguous: copied in order
    assert np.array_equal(t.from_numpy(nc).numpy(), nc)
    raises(TypeError, t.from_numpy, np.array([True]))


def test_dlpack_with_shape():
    need_numpy()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    tx = t.Tensor.from_dlpack(x)  # zero-copy: writes to x show through
    assert tx.shape == (2, 3)
    x[1, 2] = 42.0
    assert tx.tolist()[1][2] == 42.0
    y = np.from_dlpack(t.arange(24, dtype="float32").reshape(2, 3, 4))
    assert y.shape == (2, 3, 4) and y[1, 2, 3] == 23.0
    s = np.from_dlpack(t.tensor(3.0))
    assert s.shape == () and float(s) == 3.0
    i = t.Tensor.from_dlpack(np.arange(4, dtype=np.int64).reshape(2, 2))
    assert i.dtype == "int64" and i.tolist() == [[0, 1], [2, 3]]
    assert t.as_tensor(x).buffer.size == 6
    assert t.as_tensor(tx) is tx


def _shapes(rng, rank):
    return tuple(rng.choice([1, 2, 3, 4]) for _ in range(rank))


def test_broadcasting_against_numpy():
    need_numpy()
    rng = random.Random(2024)
    nrng = np.random.default_rng(2024)
    ops = [("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b),
           ("/", lambda a, b: a / b)]
    for _ in range(200):
        out = _shapes(rng, rng.randint(0, 4))
        sa = tuple(d if rng.random() < 0.7 else 1 for d in out[rng.randint(0, len(out)):])
        sb = tuple(d if rng.random() < 0.7 else 1 for d in out[rng.randint(0, len(out)):])
        a = nrng.integers(-9, 10, sa).astype(np.float32)
        b = nrng.integers(1, 10, sb).astype(np.float32)  # nonzero divisors
        for name, f in ops:
            got = f(t.from_numpy(a), t.from_numpy(b))
            want = f(a, b)
            assert got.shape == want.shape, (name, sa, sb, got.shape, want.shape)
            assert np.array_equal(got.numpy(), want), (name, sa, sb)
        m = t.from_numpy(a).maximum(t.from_numpy(b))
        assert np.array_equal(m.numpy(), np.maximum(a, b))
        m = t.from_numpy(a).minimum(t.from_numpy(b))
        assert np.array_equal(m.numpy(), np.minimum(a, b))


def test_broadcasting_known_answers():
    a = t.tensor([[1., 2., 3.], [4., 5., 6.]])
    assert (a + t.tensor([10., 20., 30.])).tolist() == [[11, 22, 33], [14, 25, 36]]
    col = t.tensor([[1.], [2.]])
    row = t.tensor([[10., 20., 30.]])
    assert (col * row).tolist() == [[10, 20, 30], [20, 40, 60]]
    assert (a * 2).tolist() == [[2, 4, 6], [8, 10, 12]]
    assert (2 * a).tolist() == (a * 2).tolist()
    assert (1 - a).tolist() == [[0, -1, -2], [-3, -4, -5]]
    assert (a / 2).tolist() == [[0.5, 1, 1.5], [2, 2.5, 3]]
    assert (6 / a).tolist()[0] == [6, 3, 2]
    assert (a + [1., 1., 1.]).tolist()[0] == [2, 3, 4]
    assert (-a).tolist()[0] == [-1, -2, -3] and abs(-a).tolist() == a.tolist()
    assert (a + float("inf")).tolist()[0] == [float("inf")] * 3
    err = raises(t.ShapeError, lambda: a + t.ones((2,)))
    assert "(2, 3)" in err.message and "(2,)" in err.message and err.status == t.TLRT_ERR_SHAPE
    raises(TypeError, lambda: a + "x")
    e = t.zeros((0, 3)) + t.ones((3,))
    assert e.shape == (0, 3) and e.tolist() == []
    if np is not None:  # numpy on the left defers to the Tensor
        r = np.ones((2, 3), np.float32) + a
        assert isinstance(r, t.Tensor) and r.tolist()[1] == [5, 6, 7]


def test_integer_tensors_fail_in_the_library():
    i = t.tensor([1, 2, 3])
    err = raises(t.TlrtError, lambda: i + i)
    assert err.status == t.TLRT_ERR_DTYPE and not isinstance(err, t.ShapeError)
    raises(t.TlrtError, lambda: i.exp())


def test_matmul():
    a = t.tensor([[1., 2.], [3., 4.]])
    v = t.tensor([1., 1.])
    assert (a @ v).shape == (2,) and (a @ v).tolist() == [3, 7]
    assert (v @ a).tolist() == [4, 6]
    d = v @ v
    assert d.shape == () and d.item() == 2.0
    assert a.matmul(a).tolist() == [[7, 10], [15, 22]]
    err = raises(t.ShapeError, lambda: a @ t.ones((3, 2)))
    assert "(2, 2)" in err.message and "(3, 2)" in err.message
    raises(t.ShapeError, lambda: a @ t.tensor(1.0))
    assert (t.zeros((2, 0)) @ t.zeros((0, 3))).tolist() == [[0, 0, 0], [0, 0, 0]]
    if np is None:
        return
    nrng = np.random.default_rng(5)
    cases = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
             ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
             ((1, 3, 4), (6, 4, 2)), ((4,), (2, 4, 3))]
    for sa, sb in cases:
        x = nrng.integers(-4, 5, sa).astype(np.float32)
        y = nrng.integers(-4, 5, sb).astype(np.float32)
        got = t.from_numpy(x) @ t.from_numpy(y)
        want = x @ y
        assert got.shape == want.shape, (sa, sb, got.shape, want.shape)
        assert np.array_equal(got.numpy(), want), (sa, sb)
        assert np.array_equal((x @ t.from_numpy(y)).numpy(), want)  # numpy on the left


def test_layout():
    a = t.arange(6, dtype="float32").reshape(2, 3)
    r = a.reshape(3, -1)
    assert r.shape == (3, 2) and r.buffer.handle == a.buffer.handle  # no copy
    assert a.reshape((6,)).shape == (6,) and a.flatten().shape == (6,)
    raises(t.ShapeError, a.reshape, 4, 2)
    raises(t.ShapeError, a.reshape, -1, -1)
    raises(t.ShapeError, a.reshape, 4, -1)
    assert a.T.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert t.tensor([1., 2.]).T.tolist() == [1, 2]
    b = t.arange(24, dtype="float32").reshape(2, 3, 4)
    p = b.permute(2, 0, 1)
    assert p.shape == (4, 2, 3) and p.tolist()[3][1][2] == b.tolist()[1][2][3]
    raises(t.ShapeError, b.permute, 0, 0, 1)
    assert b.transpose(0, 2).shape == (4, 3, 2)
    assert b.T.shape == (4, 3, 2)
    assert t.tensor([[1.], [2.]]).expand(2, 3).tolist() == [[1, 1, 1], [2, 2, 2]]
    raises(t.ShapeError, t.ones((2, 3)).expand, 3, 3)
    if np is None:
        return
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    tx = t.from_numpy(x)
    for key in (1, -1, slice(1, 3), (1, 2), (slice(None), 2), (slice(None), slice(1, 3), 4),
                (2, slice(0, 0)), (slice(None), slice(None), slice(2, None)), (-3, -4, -5)):
        got, want = tx[key], x[key]
        assert got.shape == want.shape, (key, got.shape, want.shape)
        assert np.array_equal(np.asarray(got), want), key
    assert np.array_equal(tx.T.numpy(), x.T)
    raises(IndexError, lambda: tx[3])
    raises(IndexError, lambda: tx[0, 0, 0, 0])
    raises(NotImplementedError, lambda: tx[::2])
    raises(TypeError, lambda: tx[None])
    rows = [row.tolist() for row in t.tensor([[1., 2.], [3., 4.]])]  # iteration over axis 0
    assert rows == [[1, 2], [3, 4]]


def test_reductions():
    a = t.tensor([[1., 2., 3.], [4., 5., 6.]])
    assert a.sum().shape == () and a.sum().item() == 21
    assert a.sum(0).tolist() == [5, 7, 9] and a.sum(axis=1).tolist() == [6, 15]
    assert a.sum(axis=(0, 1)).item() == 21 and a.sum(-1, keepdims=True).shape == (2, 1)
    assert a.sum(keepdims=True).shape == (1, 1)
    assert a.mean().item() == 3.5 and a.mean(0).tolist() == [2.5, 3.5, 4.5]
    assert t.full((3, 4), 0.5).mean(1).tolist() == [0.5, 0.5, 0.5]
    raises(IndexError, a.sum, 2)
    assert t.zeros((0, 3)).sum(0).tolist() == [0, 0, 0]
    sm = t.tensor([[0., 0.], [1., 1.]]).softmax()
    assert sm.tolist() == [[0.5, 0.5], [0.5, 0.5]]
    if np is None:
        return
    x = np.random.default_rng(3).integers(-5, 6, (2, 3, 4)).astype(np.float32)
    tx = t.from_numpy(x)
    for axis in (0, 1, 2, (0, 2), -1):
        assert np.array_equal(tx.sum(axis).numpy(), x.sum(axis)), axis
        assert np.array_equal(tx.sum(axis, keepdims=True).numpy(), x.sum(axis, keepdims=True))
    ls = tx.log_softmax().numpy()
    want = x - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)) - \
        x.max(-1, keepdims=True)
    assert np.allclose(ls, want, rtol=1e-5, atol=1e-5)


def test_unary():
    need_numpy()
    x = np.linspace(0.1, 3.0, 12, dtype=np.float32).reshape(3, 4)
    tx = t.from_numpy(x)
    refs = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
            "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0),
            "abs": np.abs, "neg": np.negative, "softplus": lambda v: np.log1p(np.exp(v))}
    for name, ref in refs.items():
        got = getattr(tx, name)()
        assert got.shape == (3, 4) and np.allclose(got.numpy(), ref(x), rtol=1e-6), name
        assert "tlrt_" + name in getattr(t.Tensor, name).__doc__  # the header's doc comment
    assert np.array_equal(tx.clamp(0.5, 1.0).numpy(), np.clip(x, 0.5, 1.0))
    assert np.array_equal(tx.scale(2).numpy(), x * 2)
    nan = t.tensor([float("nan"), -0.0]).exp().tolist()
    assert nan[0] != nan[0] and nan[1] == 1.0
    xs = np.linspace(-6.0, 6.0, 12, dtype=np.float32).reshape(3, 4)
    silu = t.from_numpy(xs).silu()
    assert silu.shape == (3, 4) and np.allclose(silu.numpy(), xs / (1 + np.exp(-xs)), rtol=1e-6)
    assert "tlrt_silu" in t.Tensor.silu.__doc__


def test_rms_norm():
    a = t.tensor([[1., 2., 3., 4.], [0., 0., 0., 0.]])
    y = a.rms_norm(eps=0.0)  # row 0: inv_rms = 1 / sqrt(7.5); row 1: 0 * inf = NaN
    assert y.shape == (2, 4)
    row0, row1 = y.tolist()
    assert all(abs(v - w / 7.5 ** 0.5) < 1e-6 for v, w in zip(row0, [1, 2, 3, 4]))
    assert all(v != v for v in row1)
    g = a.rms_norm(t.tensor([1., -1., 2., 0.]), eps=1e-5).tolist()[0]
    assert abs(g[1] + 2 / 7.5 ** 0.5) < 1e-5 and g[3] == 0.0
    raises(t.ShapeError, a.rms_norm, t.tensor([1., 2.]))
    raises(t.ShapeError, t.tensor(1.0).rms_norm)
    err = raises(t.TlrtError, a.rms_norm, None, -1.0)
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT
    if np is None:
        return
    x = np.random.default_rng(5).standard_normal((2, 3, 8)).astype(np.float32)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
    assert np.allclose(t.from_numpy(x).rms_norm(eps=1e-6).numpy(), want, rtol=1e-5, atol=1e-6)


def test_argmax_topk():
    nan, inf = float("nan"), float("inf")
    a = t.tensor([[1., 3., 3., 0.], [nan, 2., nan, inf], [-0.0, 0.0, -1., -inf]])
    am = a.argmax()
    assert am.dtype == "int64" and am.shape == (3,) and am.tolist() == [1, 0, 0]
    assert a.argmax(dtype="int32").dtype == "int32"
    v, i = a.topk(3)
    assert v.shape == (3, 3) and i.shape == (3, 3) and i.dtype == "int64"
    assert i.tolist() == [[1, 2, 0], [0, 2, 3], [0, 1, 2]]
    vl = v.tolist()
    assert vl[0] == [3, 3, 1] and vl[1][0] != vl[1][0] and vl[1][2] == inf
    v0, i0 = a.topk(0)
    assert v0.shape == (3, 0) and i0.shape == (3, 0)
    b = t.tensor([[[4., 1.], [2., 9.]]])
    assert b.argmax().shape == (1, 2) and b.argmax().tolist() == [[0, 1]]
    raises(ValueError, a.topk, 5)
    raises(NotImplementedError, a.argmax, 0)
    raises(t.ShapeError, t.tensor(1.0).argmax)
    err = raises(t.TlrtError, t.zeros((2, 0)).argmax)
    assert err.status == t.TLRT_ERR_SHAPE
    # argmax feeds an index-buffer gather directly (the picked tokens' embeddings).
    table = t.tensor([[10., 11.], [20., 21.], [30., 31.]])
    rows = t.gather_rows(table.buffer, 3, 2, t.tensor([[0., 5., 1.]]).argmax().buffer)
    assert rows.to_list() == [20., 21.]
    if np is None:
        return
    rng = np.random.default_rng(9)
    x = rng.integers(-3, 4, (5, 37)).astype(np.float32)  # many ties
    tx = t.from_numpy(x)
    assert tx.argmax().numpy().tolist() == x.argmax(-1).tolist()
    for k in (1, 5, 37):
        v, i = tx.topk(k)
        order = np.argsort(-x, axis=-1, kind="stable")[:, :k]
        assert np.array_equal(i.numpy(), order), k
        assert np.array_equal(v.numpy(), np.take_along_axis(x, order, -1)), k


def test_clip_grad_norm():
    g1, g2 = t.tensor([3.0]), t.tensor([[4.0, 0.0]])
    n = t.clip_grad_norm([g1, g2], 1.0)
    assert n.shape == () and n.item() == 5.0
    c = np.float32(1.0) / (np.float32(5.0) + np.float32(1e-6)) if np is not None else None
    if c is not None:
        assert g1.tolist() == [float(np.float32(3.0) * c)]
        assert g2.tolist() == [[float(np.float32(4.0) * c), 0.0]]
    b = t.Buffer.from_list([1.0, 2.0, 2.0])
    nb = t.clip_grad_norm([b], 10.0)  # below max_norm: untouched
    assert isinstance(nb, t.Buffer) and nb.to_list() == [3.0] and b.to_list() == [1.0, 2.0, 2.0]
    assert t.clip_grad_norm([], 1.0).to_list() == [0.0]
    nan = t.tensor([1.0, float("nan")])
    assert t.clip_grad_norm([nan], 1.0).item() != t.clip_grad_norm([nan], 1.0).item()
    err = raises(t.TlrtError, t.clip_grad_norm, [g1, g1], 1.0)
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT
    err = raises(t.TlrtError, t.clip_grad_norm, [g1], -1.0)
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT


def test_adam_step_multi():
    """adam_step_multi: adam_step on every tensor in one call, bit for bit; per-tensor decays."""
    import struct
    sizes = [3, 0, 1, 17, 5]

    def rows(seed, lo=-1.0, hi=1.0):
        r = random.Random(seed)
        return [[r.uniform(lo, hi) for _ in range(n)] for n in sizes]

    def bits(buf):
        return struct.pack(f"<{buf.size}f", *buf.to_list())

    start = [rows(1), rows(2), rows(3), rows(4, 0.0, 1.0)]
    wds = [0.0, 0.1, 0.25, 0.0, 0.05]
    for decoupled in (False, True):
        multi = [[t.Buffer.from_list(x) for x in arr] for arr in start]
        single = [[t.Buffer.from_list(x) for x in arr] for arr in start]
        for step in (1, 2, 3):
            t.adam_step_multi(multi[0], multi[1], multi[2], multi[3], step, 1e-2, 0.9, 0.95, 1e-8,
                              0.5, decoupled, weight_decays=wds)
            for i in range(len(sizes)):
                t.adam_step(single[0][i], single[1][i], single[2][i], single[3][i], step, 1e-2,
                            0.9, 0.95, 1e-8, wds[i], decoupled)
            for k in range(4):
                assert [bits(b) for b in multi[k]] == [bits(b) for b in single[k]], (k, step)
        assert [bits(b) for b in multi[1]] == [bits(t.Buffer.from_list(x)) for x in start[1]]
        assert any(bits(b) != bits(t.Buffer.from_list(x)) for b, x in zip(multi[0], start[0]))
    # weight_decay for every tensor when weight_decays is None; Tensors as well as Buffers.
    p, g = [t.tensor([1.0, -3.0]), t.tensor([4.0])], [t.tensor([2.0, -0.25]), t.tensor([-8.0])]
    m, v = [t.zeros((2,)), t.zeros((1,))], [t.zeros((2,)), t.zeros((1,))]
    t.adam_step_multi(p, g, m, v, 1, 0.5, 0.0, 0.0, 0.0, 0.5, True)
    assert p[0].tolist() == [0.25, -1.75] and p[1].tolist() == [3.5]  # 4 * 0.75 - 0.5 * -1
    assert m[0].tolist() == [2.0, -0.25] and v[1].tolist() == [64.0]
    t.adam_step_multi([], [], [], [], 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)  # nothing to do
    err = raises(t.TlrtError, t.adam_step_multi, [p[0], p[1]], [g[0], p[0]], m, v, 2, 1e-3, 0.9,
                 0.999, 1e-8, 0.0, True)
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT  # a parameter passed again as a gradient
    err = raises(t.TlrtError, t.adam_step_multi, p, g, m, v, 0, 1e-3, 0.9, 0.999, 1e-8, 0.0, True)
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT  # step 0
    err = raises(t.TlrtError, t.adam_step_multi, p, g, m, v, 2, 1e-3, 0.9, 0.999, 1e-8, 0.0, True,
                 weight_decays=[0.0, -1.0])
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT and "weight_decays[1]" in err.message
    err = raises(t.TlrtError, t.adam_step_multi, p, g, [m[1], m[0]], v, 2, 1e-3, 0.9, 0.999,
                 1e-8, 0.0, True)
    assert err.status == t.TLRT_ERR_SHAPE
    assert p[0].tolist() == [0.25, -1.75]  # the failing calls modified nothing
    raises(ValueError, t.adam_step_multi, p, g[:1], m, v, 2, 1e-3, 0.9, 0.999, 1e-8, 0.0, True)
    raises(ValueError, t.adam_step_multi, p, g, m, v, 2, 1e-3, 0.9, 0.999, 1e-8, 0.0, True,
           weight_decays=[0.1])


def test_cuda_when_available():
    if not t.cuda_available():
        if pytest is not None:
            pytest.skip("no CUDA device")
        return
    a = t.tensor([[1., 2.], [3., 4.]], device=t.cuda(0))
    b = a @ t.ones((2, 2), device=t.cuda(0))
    assert b.device == t.cuda(0) and b.cpu().tolist() == [[3, 3], [7, 7]]
    err = raises(t.TlrtError, lambda: a + t.ones((2, 2)))
    assert err.status == t.TLRT_ERR_DEVICE_MISMATCH


def test_repr():
    assert repr(t.tensor([1.0, 2.0])) == "tensor([1.0, 2.0], shape=(2,), dtype=float32)"
    assert "100 elements" in repr(t.zeros(100))


def _attention_ref(q, k, v, B, Tq, Tk, hq, hkv, d, causal, scale):
    """Float64 attention of nested lists q (B, Tq, hq d), k, v (B, Tk, hkv d); causal aligned
    bottom-right (query i sees keys j <= i + Tk - Tq); rows without keys give 0."""
    import math
    G = hq // hkv
    out = [[[0.0] * (hq * d) for _ in range(Tq)] for _ in range(B)]
    for b in range(B):
        for h in range(hq):
            g = h // G
            for i in range(Tq):
                keys = [j for j in range(Tk) if not causal or j <= i + Tk - Tq]
                if not keys:
                    continue
                s = [scale * sum(q[b][i][h * d + e] * k[b][j][g * d + e] for e in range(d))
                     for j in keys]
                m = max(s)
                p = [math.exp(x - m) for x in s]
                z = sum(p)
                for e in range(d):
                    out[b][i][h * d + e] = sum(pj / z * v[b][j][g * d + e]
                                               for pj, j in zip(p, keys))
    return out


def test_attention():
    rnd = random.Random(11)
    B, T, hq, hkv, d = 2, 5, 4, 2, 3
    W = (hq + 2 * hkv) * d
    x = [[[rnd.uniform(-1, 1) for _ in range(W)] for _ in range(T)] for _ in range(B)]
    qkv = t.tensor(x)
    # The fused projection, read in place: against float64 on its q, k, v columns.
    q = [[row[:hq * d] for row in seq] for seq in x]
    k = [[row[hq * d:(hq + hkv) * d] for row in seq] for seq in x]
    v = [[row[(hq + hkv) * d:] for row in seq] for seq in x]
    for causal in (False, True):
        o = qkv.attention_qkv(hq, hkv, causal=causal)
        assert o.shape == (B, T, hq * d)
        want = _attention_ref(q, k, v, B, T, T, hq, hkv, d, causal, 1 / d ** 0.5)
        got = o.tolist()
        assert all(abs(got[b][i][c] - want[b][i][c]) < 1e-5 for b in range(B) for i in range(T)
                   for c in range(hq * d))
        # Separate tensors: the same bits; the default scale is 1 / sqrt(d).
        o2 = t.attention(t.tensor(q), t.tensor(k), t.tensor(v), hq, hkv, causal=causal)
        assert o2.tolist() == got
        o3 = t.attention(t.tensor(q), t.tensor(k), t.tensor(v), hq, hkv, causal, 1 / d ** 0.5)
        assert o3.tolist() == got
    # A decode step (len_q 1): causal sees every key, so it equals the non-causal result.
    q1 = [[seq[-1]] for seq in q]
    a = t.attention(t.tensor(q1), t.tensor(k), t.tensor(v), hq, hkv, causal=True, scale=0.3)
    b = t.attention(t.tensor(q1), t.tensor(k), t.tensor(v), hq, hkv, causal=False, scale=0.3)
    assert a.shape == (B, 1, hq * d) and a.tolist() == b.tolist()
    want = _attention_ref(q1, k, v, B, 1, T, hq, hkv, d, True, 0.3)
    assert all(abs(x_ - y_) < 1e-5 for x_, y_ in zip(sum(sum(a.tolist(), []), []),
                                                       sum(sum(want, []), [])))
    # Shapes the binding refuses, and the library's own errors.
    raises(t.ShapeError, qkv.attention_qkv, 3, 2)  # 3 + 4 heads do not divide 24
    raises(t.ShapeError, t.attention, t.tensor(q), t.tensor(k), t.tensor(q), hq, hkv)
    err = raises(t.TlrtError, t.attention, t.tensor(q), t.tensor(k), t.tensor(v), hq, hkv, False,
                 float("nan"))
    assert err.status == t.TLRT_ERR_INVALID_ARGUMENT
    # The tape nodes: values equal the Tensor's; the gradient of the fused node is the op's
    # tlrt_attention_bwd written through the same views.
    tape = t.Tape(t.CPU)
    n = tape.leaf(qkv.buffer, [B, T, W], True)
    a = tape.attention_qkv(n, hq, hkv, True)
    assert tape.shape(a) == ([B, T, hq * d], True)
    assert tape.value(a).to_list() == qkv.attention_qkv(hq, hkv, causal=True).buffer.to_list()
    seed = t.buffer([rnd.uniform(-1, 1) for _ in range(B * T * hq * d)])
    tape.backward_seed(a, seed)
    g = t.attention_qkv_geometry(B, T, hq, hkv, d)
    out, lse = t.attention_fwd(qkv.buffer, qkv.buffer, qkv.buffer, None, g, 1 / d ** 0.5, True,
                               float("-inf"))
    dqkv = t.buffer([0.0] * (B * T * W))
    t.attention_bwd(qkv.buffer, qkv.buffer, qkv.buffer, None, seed, out, lse, g, 1 / d ** 0.5,
                    True, float("-inf"), dqkv, dqkv, dqkv, g)
    assert tape.grad(n).to_list() == dqkv.to_list()
    qn, kn, vn = (tape.leaf(t.tensor(z).buffer, [B, T, len(z[0][0])], True) for z in (q, k, v))
    s = tape.attention(qn, kn, vn, hq, hkv, True)
    assert tape.value(s).to_list() == tape.value(a).to_list()
    tape.free()


def _run_all():
    failures = skips = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print(f"ok   {name}")
            except _Skip as e:
                skips += 1
                print(f"skip {name}: {e}")
            except Exception as e:  # noqa: BLE001
                failures += 1
                print(f"FAIL {name}: {type(e).__name__}: {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    if pytest is not None:
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
    sys.exit(_run_all())
