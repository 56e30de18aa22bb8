"""Array ops against NumPy: values, dtypes, static shapes and TF's errors."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow.ops  # noqa: F401 - registers every family
from asyncflow import dtypes, errors, executor, tensor_shape
from asyncflow import graph as ops
from asyncflow.devices import gpu
from asyncflow.ops import array_ops as A
from asyncflow.registry import all_op_defs
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def graph(monkeypatch):
    monkeypatch.setattr(executor, "_CHECK_KERNELS", True)  # kernels' dtypes/shapes checked
    g = ops.Graph()
    with g.as_default():
        yield g


def run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def feed(value, shape="known"):
    """A placeholder for `value` (shape: "known", "unknown" dims, or "none" = rank)."""
    value = np.asarray(value)
    dt = dtypes.as_dtype(value.dtype)
    if shape == "known":
        ph = A.placeholder(dt, value.shape)
    elif shape == "unknown":
        ph = A.placeholder(dt, [None] * value.ndim)
    else:
        ph = A.placeholder(dt)
    return ph, {ph: value}


def check(t, want, feeds=None):
    got = run(t, feeds)
    want = np.asarray(want)
    assert np.asarray(got).dtype == want.dtype, (got, want)
    np.testing.assert_array_equal(got, want)
    assert t.shape.is_compatible_with(want.shape)
    return got


X = np.arange(24).reshape(2, 3, 4)
STRS = np.array([[b"a", b"b", b"c"], [b"d", b"e", b"f"]], dtype=object)
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.complex64]


def typed(dtype, shape=(2, 3, 4)):
    x = np.arange(int(np.prod(shape))).reshape(shape)
    return (x % 2).astype(dtype) if dtype is np.bool_ else x.astype(dtype)


# -- values against NumPy ------------------------------------------------------------------

# (name, builder(x_tensor), numpy reference(x)) applied to a 2x3x4 input of each dtype.
UNARY_CASES = [
    ("identity", A.identity, lambda x: x),
    ("reshape", lambda t: A.reshape(t, [4, -1]), lambda x: x.reshape(4, -1)),
    ("reshape_flat", lambda t: A.reshape(t, [-1]), lambda x: x.reshape(-1)),
    ("transpose", A.transpose, lambda x: x.T),
    ("transpose_perm", lambda t: A.transpose(t, [1, 0, 2]), lambda x: x.transpose(1, 0, 2)),
    ("expand0", lambda t: A.expand_dims(t, 0), lambda x: x[None]),
    ("expand_neg", lambda t: A.expand_dims(t, -1), lambda x: x[..., None]),
    ("expand_dim_kw", lambda t: A.expand_dims(t, dim=2), lambda x: np.expand_dims(x, 2)),
    ("squeeze", lambda t: A.squeeze(A.reshape(t, [1, 24, 1])), lambda x: x.reshape(24)),
    (
        "squeeze_axis",
        lambda t: A.squeeze(A.reshape(t, [1, 24, 1]), axis=[-1]),
        lambda x: x.reshape(1, 24),
    ),
    ("concat", lambda t: A.concat([t, t], 1), lambda x: np.concatenate([x, x], 1)),
    ("concat_neg", lambda t: A.concat([t, t, t], -1), lambda x: np.concatenate([x] * 3, -1)),
    ("concat_one", lambda t: A.concat([t], 0), lambda x: x),
    ("stack", lambda t: A.stack([t, t]), lambda x: np.stack([x, x])),
    ("stack_axis", lambda t: A.stack([t, t], axis=-1), lambda x: np.stack([x, x], -1)),
    ("slice", lambda t: A.slice(t, [1, 0, 1], [1, -1, 2]), lambda x: x[1:2, :, 1:3]),
    ("gather", lambda t: A.gather(t, [1, 0, 1]), lambda x: x[[1, 0, 1]]),
    ("gather_axis", lambda t: A.gather(t, [[3, 0]], axis=2), lambda x: x[:, :, [[3, 0]]]),
    ("gather_neg_axis", lambda t: A.gather(t, [2], axis=-2), lambda x: x[:, [2]]),
    ("tile", lambda t: A.tile(t, [1, 2, 3]), lambda x: np.tile(x, [1, 2, 3])),
    (
        "tile_one",
        lambda t: A.tile(t[:1, :1, :1], [3, 0, 2]),
        lambda x: np.tile(x[:1, :1, :1], [3, 0, 2]),
    ),
    ("tile_one_2", lambda t: A.tile(t[1, 2, 3:4], [5]), lambda x: np.tile(x[1, 2, 3:4], [5])),
    ("reverse", lambda t: A.reverse(t, [0, -1]), lambda x: x[::-1, :, ::-1]),
    ("reverse_v2_none", lambda t: A.reverse_v2(t, []), lambda x: x),
    (
        "pad",
        lambda t: A.pad(t, [[0, 1], [2, 0], [1, 1]]),
        lambda x: np.pad(x, [(0, 1), (2, 0), (1, 1)]),
    ),
    (
        "pad_reflect",
        lambda t: A.pad(t, [[1, 1], [2, 1], [3, 0]], "reflect"),
        lambda x: np.pad(x, [(1, 1), (2, 1), (3, 0)], "reflect"),
    ),
    (
        "pad_symmetric",
        lambda t: A.pad(t, [[2, 2], [3, 0], [0, 4]], "Symmetric"),
        lambda x: np.pad(x, [(2, 2), (3, 0), (0, 4)], "symmetric"),
    ),
    ("getitem", lambda t: t[1, ::-2, 1:], lambda x: x[1, ::-2, 1:]),
    ("zeros_like", A.zeros_like, np.zeros_like),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape_kind", ["known", "unknown", "none"])
@pytest.mark.parametrize("name,builder,ref", UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
def test_unary_against_numpy(name, builder, ref, dtype, shape_kind):
    x = typed(dtype)
    ph, feeds = feed(x, shape_kind)
    check(builder(ph), ref(x), feeds)


STRING_CASES = [
    c for c in UNARY_CASES if c[0] not in ("zeros_like", "pad_reflect", "pad_symmetric")
]


@pytest.mark.parametrize("name,builder,ref", STRING_CASES, ids=[c[0] for c in STRING_CASES])
def test_unary_strings(name, builder, ref):
    x = np.array([str(i).encode() for i in range(24)], dtype=object).reshape(2, 3, 4)
    ph, feeds = feed(x, "unknown")
    want = ref(x)
    if name == "pad":
        want = np.pad(x, [(0, 1), (2, 0), (1, 1)], constant_values=b"")
    got = run(builder(ph), feeds)
    assert got.dtype == object and got.tolist() == want.tolist()


def test_const_placeholder_identity():
    c = A.constant([[1, 2], [3, 4]], name="c")
    assert c.op.type == "Const" and c.dtype == dtypes.int32 and c.shape == [2, 2]
    p = A.placeholder_with_default(c, [None, 2])
    assert p.shape.as_list() == [None, 2]
    check(p, np.array([[1, 2], [3, 4]], np.int32))
    check(A.identity(p), np.zeros((3, 2), np.int32), {p: np.zeros((3, 2), np.int32)})
    with pytest.raises(errors.InvalidArgumentError, match="must feed a value for placeholder"):
        run(A.placeholder(dtypes.float32, [2]))
    with pytest.raises(ValueError):
        A.placeholder_with_default([1, 2], [3])
    assert A.newaxis is None


def test_identity_n():
    x, y = A.constant([1.0, 2.0]), A.constant([b"a"])
    outs = A.identity_n([x, y])
    assert [t.dtype for t in outs] == [dtypes.float32, dtypes.string]
    assert outs[0].shape == [2] and outs[1].shape == [1]
    a, b = run(outs)
    np.testing.assert_array_equal(a, [1.0, 2.0])
    assert b.tolist() == [b"a"]
    (only,) = A.identity_n([x])
    np.testing.assert_array_equal(run(only), [1.0, 2.0])


@pytest.mark.parametrize(
    "dtype,zero,one",
    [
        (dtypes.float32, 0, 1),
        (dtypes.int64, 0, 1),
        (dtypes.bool, False, True),
        (dtypes.complex128, 0, 1),
        (dtypes.string, b"", None),
    ],
)
@pytest.mark.parametrize("shape", [[2, 3], [], [0, 4], (40, 30)])
def test_zeros_ones(dtype, zero, one, shape):
    np_dt = dtype.as_numpy_dtype
    z = A.zeros(shape, dtype)
    assert z.dtype == dtype and z.shape.as_list() == list(shape)
    assert z.op.type == ("Fill" if np.prod(shape) >= 1000 else "Const")
    got = np.asarray(run(z), dtype=np_dt)
    assert got.shape == tuple(shape) and got.dtype == np.dtype(np_dt)
    assert (got == zero).all()
    if one is not None:
        o = A.ones(shape, dtype)
        got = np.asarray(run(o))
        assert got.shape == tuple(shape) and (got == one).all() and got.dtype == np.dtype(np_dt)


def test_zeros_with_tensor_shape():
    s = A.placeholder(dtypes.int32, [2])
    z = A.zeros(s, dtypes.int32, name="zz")
    assert z.op.type == "Fill" and z.op.name == "zz" and z.shape.as_list() == [None, None]
    check(z, np.zeros((2, 5), np.int32), {s: [2, 5]})
    scalar = A.placeholder(dtypes.int32, [])
    check(A.ones(scalar), np.ones(3, np.float32), {scalar: 3})
    d = A.placeholder(dtypes.int32, [])
    mixed = A.zeros([d, 3])
    assert mixed.shape.as_list() == [None, 3]
    check(mixed, np.zeros((2, 3), np.float32), {d: 2})


@pytest.mark.parametrize("shape_kind", ["known", "unknown", "none"])
@pytest.mark.parametrize("dtype", [None, dtypes.int32, dtypes.bool])
def test_zeros_like_ones_like(shape_kind, dtype):
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    ph, feeds = feed(x, shape_kind)
    np_dt = np.float64 if dtype is None else dtype.as_numpy_dtype
    z, o = A.zeros_like(ph, dtype=dtype), A.ones_like(ph, dtype=dtype)
    check(z, np.zeros((2, 3), np_dt), feeds)
    check(o, np.ones((2, 3), np_dt), feeds)
    if shape_kind != "none":
        assert o.shape.ndims == 2 and o.shape[1].value in (3, None)
    check(A.zeros_like(ph, optimize=False), np.zeros((2, 3)), feeds)


def test_fill():
    check(A.fill([2, 3], 9), np.full((2, 3), 9, np.int32))
    check(A.fill([2], 1.5), np.full(2, 1.5, np.float32))
    check(A.fill([], True), np.array(True))
    got = run(A.fill([2, 2], "ab"))
    assert got.tolist() == [[b"ab", b"ab"], [b"ab", b"ab"]]
    dims = A.placeholder(dtypes.int64, [3])
    f = A.fill(dims, np.float64(2))
    assert f.shape.as_list() == [None, None, None]
    check(f, np.full((1, 2, 0), 2.0), {dims: [1, 2, 0]})


def test_reshape_shapes_and_strings():
    x = A.placeholder(dtypes.float32, [None, 6])
    assert A.reshape(x, [-1, 2, 3]).shape.as_list() == [None, 2, 3]
    assert A.reshape(x, [2, -1]).shape.as_list() == [2, None]
    y = A.placeholder(dtypes.float32, [4, 6])
    assert A.reshape(y, [-1, 8]).shape.as_list() == [3, 8]
    assert A.reshape(y, [-1]).shape.as_list() == [24]
    assert A.reshape(y, A.shape(x)).shape.as_list() == [4, 6]  # as TF: 24 / 6
    n = A.placeholder(dtypes.int32, [])
    assert A.reshape(y, A.stack([n, 12])).shape.as_list() == [2, 12]  # inferred from 24
    assert A.reshape(y, A.placeholder(dtypes.int32, [3])).shape.as_list() == [None] * 3
    assert A.reshape(y, A.placeholder(dtypes.int32)).shape.ndims is None
    check(A.reshape(STRS, [3, 2]), STRS.reshape(3, 2))
    check(A.reshape(np.zeros((0, 3)), [0, -1]), np.zeros((0, 3)))  # TF leaves 0s out of -1
    check(A.reshape(np.zeros((2, 0)), [-1]), np.zeros(0))


def test_split_and_unstack():
    x = typed(np.float32, (4, 6))
    ph, feeds = feed(x, "unknown")
    parts = A.split(ph, 3, axis=1)
    for got, want in zip(run(parts, feeds), np.split(x, 3, axis=1), strict=True):
        np.testing.assert_array_equal(got, want)
    parts = A.split(ph, [1, -1, 2], axis=-1)
    for got, want in zip(run(parts, feeds), np.split(x, [1, 4], axis=1), strict=True):
        np.testing.assert_array_equal(got, want)
    (one,) = A.split(ph, 1)
    np.testing.assert_array_equal(run(one, feeds), x)
    rows = A.unstack(x)
    assert len(rows) == 4 and rows[0].shape == [6]
    for got, want in zip(run(rows), x, strict=True):
        np.testing.assert_array_equal(got, want)
    cols = A.unstack(ph, num=6, axis=1)
    for got, want in zip(run(cols, feeds), x.T, strict=True):
        np.testing.assert_array_equal(got, want)
    strs = A.split(STRS, [2, 1], axis=1)
    assert [s.tolist() for s in run(strs)] == [STRS[:, :2].tolist(), STRS[:, 2:].tolist()]


def test_split_static_shapes():
    x = A.placeholder(dtypes.float32, [None, 6])
    assert [p.shape.as_list() for p in A.split(x, 2, axis=1)] == [[None, 3]] * 2
    assert [p.shape.as_list() for p in A.split(x, 2)] == [[None, 6]] * 2
    assert [p.shape.as_list() for p in A.split(x, [1, -1], 1)] == [[None, 1], [None, 5]]
    sizes = A.placeholder(dtypes.int32, [3])
    assert [p.shape.as_list() for p in A.split(x, sizes, 1)] == [[None, None]] * 3
    axis = A.placeholder(dtypes.int32, [])
    assert [p.shape.as_list() for p in A.split(x, 3, axis=axis)] == [[None, None]] * 3


def test_stack_and_autopacking():
    x = A.placeholder(dtypes.float32, [2])
    s = A.stack([x, [1.0, 2.0]], axis=1)
    assert s.op.type == "Pack" and s.shape.as_list() == [2, 2]
    check(s, np.array([[3, 1], [4, 2]], np.float32), {x: [3, 4]})
    c = A.stack([1, 2, 3], name="cst")
    assert c.op.type == "Const" and c.op.name == "cst"
    packed = ops.convert_to_tensor([x[0], 1.0])
    assert packed.op.type == "Pack" and packed.dtype == dtypes.float32 and packed.shape == [2]
    check(packed, np.array([3, 1], np.float32), {x: [3, 4]})
    nested = ops.convert_to_tensor([[x[0], 0.0], [1.0, x[1]]])
    assert nested.shape == [2, 2]
    check(nested, np.array([[3, 0], [1, 4]], np.float32), {x: [3, 4]})
    with pytest.raises(TypeError, match="Cannot convert a list containing a tensor"):
        ops.convert_to_tensor([x[0], A.constant(1)])
    with pytest.raises(TypeError):
        ops.convert_to_tensor([A.constant(1), 1.5])
    with pytest.raises(ValueError, match=r"axis = 2 not in \[-2, 2\)"):
        A.stack([x, x], axis=2)


def test_one_hot():
    idx = np.array([[0, 2], [5, -1]])
    ph, feeds = feed(idx, "unknown")
    eye = np.eye(3, dtype=np.float32)
    want = np.where((idx[..., None] == np.arange(3)), 1, 0).astype(np.float32)
    check(A.one_hot(ph, 3), want, feeds)
    check(A.one_hot(ph, 3, axis=0), np.moveaxis(want, -1, 0), feeds)
    check(A.one_hot(ph, 3, axis=1), np.moveaxis(want, -1, 1), feeds)
    got = check(
        A.one_hot(ph, 3, on_value=5, off_value=-1),
        np.where(want > 0, 5, -1).astype(np.int32),
        feeds,
    )
    assert got.dtype == np.int32
    check(A.one_hot([1], 3, dtype=dtypes.bool), np.array([[False, True, False]]))
    check(A.one_hot(np.uint8(2), 3), eye[2])
    assert A.one_hot(A.placeholder(dtypes.int32, [None, 4]), 7).shape.as_list() == [None, 4, 7]
    assert A.one_hot([1, 2], A.placeholder(dtypes.int32, [])).shape.as_list() == [2, None]
    with pytest.raises(TypeError, match="does not match"):
        A.one_hot([1], 3, on_value=1.0, off_value=0)
    with pytest.raises(TypeError, match="does not match dtype parameter"):
        A.one_hot([1], 3, on_value=1.0, dtype=dtypes.int32)
    with pytest.raises(ValueError):
        A.one_hot([1], 3, axis=3)
    # TF 2.21: Python on/off values take `dtype` as a hint, so a float16 one_hot may be
    # given on_value=1.0 beside a float16 off_value (recorded: [[1, 0, 0], [0, 1, 0]]).
    half = A.one_hot([0, 1], 3, on_value=1.0, off_value=A.constant(0.0, dtypes.float16),
                     dtype=dtypes.float16)  # fmt: skip
    got = check(half, np.eye(3, dtype=np.float16)[:2])
    assert got.dtype == np.float16


def test_pad_variants():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    pads = [[1, 0], [0, 2]]
    check(A.pad(x, pads, constant_values=7), np.pad(x, pads, constant_values=7))
    assert A.pad(x, pads, constant_values=7).op.type == "PadV2"
    assert A.pad(x, pads).op.type == "Pad"
    p = A.placeholder(dtypes.int32, [2, 2])
    out = A.pad(A.placeholder(dtypes.int32, [None, 3]), p)
    assert out.shape.as_list() == [None, None]
    assert A.pad(A.placeholder(dtypes.int32, [None, 3]), pads).shape.as_list() == [None, 5]
    check(A.pad(x, p, mode="constant"), np.pad(x, pads), {p: pads})
    with pytest.raises(ValueError, match="Unknown padding mode"):
        A.pad(x, pads, mode="wrap")


def test_where():
    cond = np.array([[True, False, True], [False, False, True]])
    ph, feeds = feed(cond, "none")
    w = A.where(ph)
    assert w.dtype == dtypes.int64 and w.shape.as_list() == [None, None]
    check(w, np.argwhere(cond).astype(np.int64), feeds)
    assert A.where(cond).shape.as_list() == [None, 2]
    check(A.where(np.array([0, 3, 0, 1], np.int32)), np.array([[1], [3]], np.int64))
    x, y = np.arange(6).reshape(2, 3), -np.arange(6).reshape(2, 3)
    check(A.where(cond, x, y), np.where(cond, x, y))
    check(A.where([True, False], x, y), np.where([[True], [False]], x, y))
    check(A.where(True, x, y), x)
    check(A.where(cond, STRS, STRS[::-1]), np.where(cond, STRS, STRS[::-1]))
    cond_ph = A.placeholder(dtypes.bool, [None])
    sel = A.where(cond_ph, A.placeholder(dtypes.float32, [None, 3]), np.zeros((2, 3), np.float32))
    assert sel.shape.as_list() == [2, 3]
    with pytest.raises(ValueError, match="x and y must both be non-None"):
        A.where(cond, x)


@pytest.mark.parametrize("dtype", DTYPES + [np.float16, np.int8, np.complex128])
@pytest.mark.parametrize("cond_shape", ["same", "rows", "scalar"])
def test_select_large_matches_numpy_bit_for_bit(dtype, cond_shape):
    # Large float/int values take Select's bitwise path: every value exactly, -0.0,
    # nan and inf included, whatever the mask.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((48, 40)) * 100).astype(dtype)
    y = (rng.standard_normal((48, 40)) * 100).astype(dtype)
    if np.dtype(dtype).kind in "fc":
        x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
        y[1, :4] = [-np.inf, np.nan, 0.0, -0.0]
    cond = {
        "same": rng.random((48, 40)) < 0.5,
        "rows": rng.random(48) < 0.5,
        "scalar": np.bool_(False),
    }[cond_shape]
    want = np.where(cond.reshape(-1, 1) if cond.ndim == 1 else cond, x, y)
    got = run(A.where(cond, x, y))
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


def test_shape_size_rank():
    x = A.placeholder(dtypes.float32, [None, 3])
    feeds = {x: np.zeros((5, 3), np.float32)}
    s = A.shape(x)
    assert s.op.type == "Shape" and s.shape == [2] and s.op.name == "Shape"
    check(s, np.array([5, 3], np.int32), feeds)
    check(A.shape(x, out_type=dtypes.int64), np.array([5, 3], np.int64), feeds)
    check(A.size(x), np.int32(15), feeds)
    check(A.size(x, out_type=dtypes.int64), np.int64(15), feeds)
    check(A.rank(x), np.int32(2), feeds)
    u = A.placeholder(dtypes.float32)
    r = A.rank(u)
    assert r.op.type == "Rank"
    check(r, np.int32(3), {u: np.zeros((1, 2, 3), np.float32)})
    known = A.shape(np.zeros((2, 4)))
    assert known.op.type == "Const" and ops.constant_value(known).tolist() == [2, 4]
    assert ops.constant_value(A.size(np.zeros((2, 4)))) == 8
    a, b = A.shape_n([x, np.zeros((2, 3), np.float32)])
    assert a.shape == [2] and b.shape == [2]
    ra, rb = run([a, b], feeds)
    assert ra.tolist() == [5, 3] and rb.tolist() == [2, 3] and ra.dtype == np.int32
    assert ops.constant_value(b).tolist() == [2, 3]
    assert ops.constant_shape(a).as_list() == [None, 3]
    check(A.size(STRS), np.int32(6))


def test_transpose_more():
    c = np.arange(6).reshape(2, 3).astype(np.complex64) * (1 + 1j)
    check(A.transpose(c, conjugate=True), np.conj(c.T))
    assert A.transpose(c, conjugate=True).op.type == "ConjugateTranspose"
    x = A.placeholder(dtypes.float32, [2, None, 4])
    assert A.transpose(x).shape.as_list() == [4, None, 2]
    assert A.transpose(x, A.placeholder(dtypes.int32, [3])).shape.as_list() == [None] * 3
    u = A.placeholder(dtypes.float32)
    assert A.transpose(u, [1, 0, 2]).shape.ndims == 3
    if "Range" in all_op_defs() and "Sub" in all_op_defs():
        t = A.transpose(u)
        check(t, X.astype(np.float32).T, {u: X.astype(np.float32)})


def test_check_alloc_called(monkeypatch):
    """Sized allocations ask the device first: the CPU's check against host memory, a
    GPU's against its pool limit (whichever device the ops are placed on)."""
    seen = []

    from asyncflow.devices import base

    def spying(cls):
        orig = cls.check_alloc

        def spy(self, n, dtype):
            seen.append(int(n))
            return orig(self, n, dtype)

        monkeypatch.setattr(cls, "check_alloc", spy)

    spying(base.Device)
    spying(gpu.GPUDevice)
    d = A.placeholder(dtypes.int32, [2])
    m = A.placeholder(dtypes.int32, [2])
    i = A.placeholder(dtypes.int32, [2])
    run(
        [A.fill(d, 1.0), A.tile(np.ones((2, 2)), m), A.pad(np.ones((2, 2)), [[1, 1], [0, 0]]),
         A.one_hot(i, 5)],
        {d: [3, 4], m: [2, 3], i: [0, 1]},
    )  # fmt: skip
    assert {12, 24, 8, 10} <= set(seen)


def test_huge_fill_is_resource_exhausted():
    d = A.placeholder(dtypes.int64, [2])
    with pytest.raises(errors.ResourceExhaustedError):
        run(A.fill(d, 1.0), {d: [1 << 30, 1 << 30]})


# -- static shapes -------------------------------------------------------------------------


def _p(shape, dtype=dtypes.float32):
    return A.placeholder(dtype, shape)


STATIC_SHAPES = [
    ("reshape_unknown", lambda: A.reshape(_p(None), [2, -1]), [2, None]),
    ("expand_unknown_axis", lambda: A.expand_dims(_p([2, 3]), _p([], dtypes.int32)), [None] * 3),
    ("expand_rank_unknown", lambda: A.expand_dims(_p(None), 0), None),
    ("squeeze_unknown_all", lambda: A.squeeze(_p([1, None, 3])), None),
    ("squeeze_unknown_named", lambda: A.squeeze(_p([1, None, 3]), [1]), [1, 3]),
    ("squeeze_known", lambda: A.squeeze(_p([1, 2, 1])), [2]),
    ("concat_unknown_dims", lambda: A.concat([_p([None, 2]), _p([3, 4])], 1), [3, 6]),
    (
        "concat_unknown_axis",
        lambda: A.concat([_p([None, 2]), _p([3, 4])], _p([], dtypes.int32)),
        [None, None],
    ),
    ("concat_unknown_rank", lambda: A.concat([_p(None), _p([3, 4])], 0), [None, 4]),
    ("concat_sum_unknown", lambda: A.concat([_p([None, 2]), _p([3, 2])], 0), [None, 2]),
    ("stack_merge", lambda: A.stack([_p([None, 2]), _p([3, None])], 1), [3, 2, 2]),
    ("unstack_unknown", lambda: A.unstack(_p([None, 2]), num=3)[0], [2]),
    (
        "slice_unknown_begin",
        lambda: A.slice(_p([5, 6]), _p([2], dtypes.int32), [2, -1]),
        [2, None],
    ),
    ("slice_minus_one", lambda: A.slice(_p([5, None]), [1, 2], [-1, -1]), [4, None]),
    (
        "slice_unknown_size",
        lambda: A.slice(_p([5, 6]), [0, 0], _p([2], dtypes.int32)),
        [None, None],
    ),
    (
        "gather_unknown",
        lambda: A.gather(_p([None, 4]), _p([None, 2], dtypes.int32), axis=1),
        [None, None, 2],
    ),
    (
        "gather_unknown_axis",
        lambda: A.gather(_p([3, 4]), [1], axis=_p([], dtypes.int32)),
        [None, None],
    ),
    (
        "gather_batch",
        lambda: A.gather(_p([2, 5, 7]), _p([2, 3], dtypes.int32), axis=1, batch_dims=1),
        [2, 3, 7],
    ),
    ("tile_partial", lambda: A.tile(_p([None, 3]), [2, 2]), [None, 6]),
    ("tile_zero", lambda: A.tile(_p([None, 3]), [0, A.placeholder(dtypes.int32, [])]), [0, None]),
    ("fill_partial", lambda: A.fill(A.stack([3, _p([], dtypes.int32)]), 1.0), [3, None]),
    ("zeros_shape_of", lambda: A.zeros(A.shape(_p([None, 5]))), [None, 5]),
    ("zeros_shape_slice", lambda: A.zeros(A.shape(_p([None, 5, 2]))[1:]), [5, 2]),
    (
        "zeros_shape_concat",
        lambda: A.fill(A.concat([A.shape(_p([None, 5])), [7]], 0), 0.0),
        [None, 5, 7],
    ),
    (
        "where_sel_vector",
        lambda: A.where(_p([4], dtypes.bool), _p([None, 2]), _p([None, 2])),
        [4, 2],
    ),
    ("pad_unknown", lambda: A.pad(_p([None, 3]), [[1, 1], [2, 2]]), [None, 7]),
    ("transpose_unknown_rank", lambda: A.transpose(_p(None), [1, 0]), [None, None]),
    ("reverse", lambda: A.reverse(_p([None, 3]), [1]), [None, 3]),
]


@pytest.mark.parametrize("name,build,want", STATIC_SHAPES, ids=[c[0] for c in STATIC_SHAPES])
def test_static_shape(name, build, want):
    got = build().shape
    if want is None:
        assert got.ndims is None
    else:
        assert got.as_list() == want


# -- errors ----------------------------------------------------------------------------------

BUILD_ERRORS = [
    (
        "reshape_count",
        lambda: A.reshape(np.zeros((2, 3)), [4]),
        ValueError,
        "Cannot reshape a tensor with 6 elements to shape \\[4\\] \\(4 elements\\)",
    ),
    # Two -1s build in TF (shape (?, ?)) and fail at run time; below -1 fails now.
    ("reshape_below_minus_one", lambda: A.reshape(np.zeros(6), [-2, 3]), ValueError, "-2"),
    ("reshape_divisible", lambda: A.reshape(np.zeros(6), [-1, 4]), ValueError, "divisible"),
    ("reshape_bad_dtype", lambda: A.reshape(np.zeros(6), [2.0, 3.0]), TypeError, None),
    (
        "transpose_size",
        lambda: A.transpose(np.zeros((2, 3)), [0, 1, 2]),
        ValueError,
        "Dimension must be 2 but is 3",
    ),
    ("transpose_range", lambda: A.transpose(np.zeros((2, 3)), [0, 5]), ValueError, "perm dim 5"),
    (
        "expand_range",
        lambda: A.expand_dims(np.zeros((2, 3)), 4),
        ValueError,
        "not in the interval",
    ),
    ("expand_both", lambda: A.expand_dims(np.zeros(2), 0, dim=0), ValueError, "both"),
    ("expand_none", lambda: A.expand_dims(np.zeros(2)), ValueError, "Must specify an axis"),
    (
        "squeeze_non1",
        lambda: A.squeeze(np.zeros((1, 3)), [1]),
        ValueError,
        "Can not squeeze dim\\[1\\], expected a dimension of 1, got 3",
    ),
    ("squeeze_range", lambda: A.squeeze(np.zeros((1, 3)), [2]), ValueError, "Tried to squeeze"),
    ("concat_rank", lambda: A.concat([np.zeros((2, 3)), np.zeros(3)], 0), ValueError, "rank"),
    (
        "concat_dims",
        lambda: A.concat([np.zeros((2, 3)), np.zeros((2, 4))], 0),
        ValueError,
        "Dimension 1 in both shapes must be equal, but are 3 and 4",
    ),
    (
        "concat_axis",
        lambda: A.concat([np.zeros((2, 3)), np.zeros((2, 3))], 2),
        ValueError,
        "range \\[-2, 2\\), but got 2",
    ),
    ("concat_scalars", lambda: A.concat([1.0, 2.0], 0), ValueError, "Can't concatenate scalars"),
    (
        "concat_dtype",
        lambda: A.concat([_p([2]), _p([2], dtypes.int32)], 0),
        TypeError,
        None,
    ),
    ("split_uneven", lambda: A.split(np.zeros((4, 3)), 3), ValueError, "evenly divisible"),
    ("splitv_sum", lambda: A.split(np.zeros((4, 3)), [1, 2]), ValueError, "can't split axis"),
    ("splitv_two_neg", lambda: A.split(np.zeros((4, 3)), [-1, -1]), ValueError, "one -1"),
    (
        "splitv_num",
        lambda: A.split(np.zeros(4), A.placeholder(dtypes.int32, [None])),
        ValueError,
        "Cannot infer argument `num`",
    ),
    ("stack_shapes", lambda: A.stack([_p([2]), _p([3])], axis=1), ValueError, "Shapes"),
    ("unstack_num", lambda: A.unstack(_p([None, 2])), ValueError, "Cannot infer num"),
    ("unstack_dim", lambda: A.unstack(_p([3, 2]), num=2), ValueError, "Dimension must be 2"),
    # (A size past the input is the kernel's error, not the shape function's, as TF.)
    (
        "gather_axis",
        lambda: A.gather(np.zeros((3, 3)), [0], axis=2),
        ValueError,
        "rank",
    ),
    ("gather_float_idx", lambda: A.gather(np.zeros(3), [0.5]), TypeError, None),
    ("tile_len", lambda: A.tile(np.zeros((2, 2)), [1, 2, 3]), ValueError, "rank"),
    ("pad_neg", lambda: A.pad(np.zeros((2, 2)), [[-1, 0], [0, 0]]), ValueError, "non-negative"),
    ("pad_rank", lambda: A.pad(np.zeros((2, 2)), [[1, 0]]), ValueError, "rank"),
    (
        "reflect_too_big",
        lambda: A.pad(np.zeros((2, 2)), [[2, 0], [0, 0]], "REFLECT"),
        ValueError,
        "less than the dimension size",
    ),
    (
        "symmetric_too_big",
        lambda: A.pad(np.zeros((2, 2)), [[3, 0], [0, 0]], "SYMMETRIC"),
        ValueError,
        "no greater than",
    ),
    (
        "select_shapes",
        lambda: A.where([True, False], np.zeros((3, 2)), np.zeros((3, 2))),
        ValueError,
        None,
    ),
    ("reverse_dup", lambda: A.reverse(np.zeros((2, 2)), [0, -2]), ValueError, "more than once"),
    ("reverse_range", lambda: A.reverse(np.zeros((2, 2)), [2]), ValueError, "out of valid range"),
    ("fill_negative", lambda: A.fill([-1, 2], 0), ValueError, ">= 0"),
    ("fill_not_scalar", lambda: A.fill([2], [1, 2]), ValueError, "rank 0"),
]


@pytest.mark.parametrize("name,build,exc,match", BUILD_ERRORS, ids=[c[0] for c in BUILD_ERRORS])
def test_build_errors(name, build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def _ip(dtype=dtypes.int32):
    return A.placeholder(dtype)


RUN_ERRORS = [
    (
        "reshape",
        lambda p: A.reshape(p, [4]),
        np.zeros((2, 3)),
        "Input to reshape is a tensor with 6 values, but the requested shape has 4",
    ),
    (
        "reshape_multiple",
        lambda p: A.reshape(p, [-1, 4]),
        np.zeros((2, 3)),
        "requested shape requires a multiple of 4",
    ),
    ("transpose_perm", lambda p: A.transpose(p, [0, 0]), np.zeros((2, 3)), "1 is missing from"),
    (
        "expand",
        lambda p: A.expand_dims(p, 3),
        np.zeros((2, 3)),
        "Tried to expand dim index 3 for tensor with 2 dimensions.",
    ),
    (
        "squeeze",
        lambda p: A.squeeze(p, [0]),
        np.zeros((2, 3)),
        "Can not squeeze dim\\[0\\], expected a dimension of 1, got 2",
    ),
    (
        "concat",
        lambda p: A.concat([p, np.zeros((2, 4))], 0),
        np.zeros((2, 3)),
        "ConcatOp : Dimensions of inputs should match",
    ),
    (
        "split",
        lambda p: A.split(p, 3),
        np.zeros((4, 2)),
        "Number of ways to split should evenly divide the split dimension",
    ),
    ("splitv", lambda p: A.split(p, [1, 1]), np.zeros((4, 2)), "Determined shape must"),
    ("stack", lambda p: A.stack([p, np.zeros(3)]), np.zeros(2), "Shapes of all inputs must match"),
    ("unstack", lambda p: A.unstack(p, num=3), np.zeros((2, 3)), "must equal 3"),
    (
        "slice",
        lambda p: A.slice(p, [1, 0], [2, 1]),
        np.zeros((2, 3)),
        "Expected size\\[0\\] in \\[0, 1\\], but got 2",
    ),
    (
        "strided_slice_shrink",
        lambda p: p[5],
        np.zeros((2, 3)),
        "slice index 5 of dimension 0 out of bounds.",
    ),
    (
        "gather",
        lambda p: A.gather(p, [0, 7]),
        np.zeros(5),
        "indices\\[1\\] = 7 is not in \\[0, 5\\)",
    ),
    (
        "gather_2d",
        lambda p: A.gather(p, [[0], [-1]]),
        np.zeros(5),
        "indices\\[1,0\\] = -1 is not in \\[0, 5\\)",
    ),
    ("tile", lambda p: A.tile(p, [2]), np.zeros((2, 3)), "vector of length 2 but got length 1"),
    ("pad", lambda p: A.pad(p, [[1, 1]]), np.zeros((2, 3)), "The first dimension of paddings"),
    (
        "mirror",
        lambda p: A.pad(p, [[0, 0], [3, 0]], "REFLECT"),
        np.zeros((2, 3)),
        "less than the dimension size",
    ),
    (
        "select",
        lambda p: A.where([True, False, True], p, p),
        np.zeros((2, 3)),
        "Number of batches of 'then' must match size of 'cond'",
    ),
    ("reverse", lambda p: A.reverse(p, [2]), np.zeros((2, 3)), "out of valid range"),
    ("one_hot_depth", lambda p: A.one_hot([1], _ip()), None, "depth must be non-negative"),
    (
        "fill",
        lambda p: A.fill(A.placeholder(dtypes.int32, [2]), 1.0),
        None,
        "Dimension -1 must be >= 0",
    ),
]


@pytest.mark.parametrize("name,build,value,match", RUN_ERRORS, ids=[c[0] for c in RUN_ERRORS])
def test_run_errors(name, build, value, match):
    if name.startswith("gather") and gpu.default_count(None):
        pytest.skip("TF's GPU gather checks nothing (zeros): tests/ops/test_device_indexing.py")
    feeds = {}
    if value is not None:
        p = A.placeholder(dtypes.as_dtype(np.asarray(value).dtype))
        feeds[p] = value
    else:
        p = None
    t = build(p)
    for op in ops.get_default_graph().get_operations():
        if op.type == "Placeholder" and op.outputs[0] not in feeds:
            feeds[op.outputs[0]] = -1 if op.outputs[0].shape.ndims != 1 else [-1, 2]
    with pytest.raises(errors.InvalidArgumentError, match=match):
        run(t, feeds)


def test_registry_complete():
    names = [
        "Const", "Placeholder", "PlaceholderWithDefault", "Identity", "IdentityN", "Fill",
        "ZerosLike", "OnesLike", "Reshape", "Transpose", "ConjugateTranspose", "ExpandDims",
        "Squeeze", "ConcatV2", "Split", "SplitV", "Pack", "Unpack", "Slice", "StridedSlice",
        "GatherV2", "OneHot", "Tile", "Pad", "PadV2", "MirrorPad", "Where", "Select", "Shape",
        "ShapeN", "Size", "Rank", "ReverseV2",
    ]  # fmt: skip
    defs = all_op_defs()
    for n in names:
        assert defs[n].shape_fn is not None and defs[n].supports("CPU"), n
    for n in A.__all__:
        assert hasattr(A, n), n


def test_names_follow_tf():
    x = A.placeholder(dtypes.float32, [2, 3], name="x")
    first = x[0]
    assert first.op.name == "strided_slice"
    assert first.op.inputs[1].op.name == "strided_slice/stack"
    assert x[1].op.name == "strided_slice_1"
    with ops.name_scope("outer"):
        assert A.zeros([2]).op.name == "outer/zeros"
        assert A.zeros_like(x).op.name == "outer/zeros_like"
        assert A.concat([x, x], 0).op.name == "outer/concat"
    assert tensor_shape.TensorShape([2, 3]) == x.shape


@pytest.mark.parametrize("rows", [1, 3, 128, 5000])
def test_a_small_join_runs_at_once_counted_with_the_same_values(rows, monkeypatch):
    # ConcatV2 in a caller-driven step (manip_ops._LEAN): a join up to 1 MiB runs
    # through cpu_budget.call_without_blas, not the device's `compute`; a larger one
    # (5000 rows of 65: 1.3 MB of int32 or float32, 2.6 of float64) through `compute`; the values
    # np.concatenate's, dtypes and odd shapes included.
    from asyncflow.devices import cpu_budget

    calls = []
    real = cpu_budget.call_without_blas

    def spy(fn, args):
        calls.append(cpu_budget._active)
        return real(fn, args)

    monkeypatch.setattr(cpu_budget, "call_without_blas", spy)
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64, np.int32):
        x_np = (rng.standard_normal((rows, 1)) * 9).astype(dtype)
        h_np = (rng.standard_normal((rows, 64)) * 9).astype(dtype)
        with ops.device("/cpu:0"):  # (the CPU device's path; ASYNCFLOW_FAKE_GPUS=1 too)
            x = A.placeholder(dtypes.as_dtype(dtype), [None, 1])
            h = A.placeholder(dtypes.as_dtype(dtype), [None, 64])
            joined = A.concat([x, h], 1)
        calls.clear()
        got = run(joined, {x: x_np, h: h_np})
        want = np.concatenate([x_np, h_np], 1)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert bool(calls) == (want.nbytes <= 1 << 20), (dtype, rows)
