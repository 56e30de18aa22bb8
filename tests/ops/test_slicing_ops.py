"""StridedSlice / `Tensor.__getitem__` and friends against NumPy indexing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asyncflow.ops  # noqa: F401 - registers every family
from asyncflow import dtypes, errors, executor
from asyncflow import graph as ops
from asyncflow.ops import array_ops as A
from asyncflow.session import Session

X = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)


@pytest.fixture(autouse=True)
def graph(monkeypatch):
    monkeypatch.setattr(executor, "_CHECK_KERNELS", True)
    g = ops.Graph()
    with g.as_default():
        yield g


def run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


INDEXES = [
    1,
    -1,
    (0, 2),
    (slice(None), 1),
    slice(None, None, -1),
    slice(1, None),
    (Ellipsis, 0),
    (Ellipsis, slice(None, None, 2)),
    (None, 1),
    (0, None, Ellipsis, None, 1),
    (slice(-10, 10), slice(None, None, -2), slice(3, 0, -1)),
    (slice(5, 1), 1),
    (slice(None), slice(None), slice(None), slice(None), None),
    (1, 2, 3, 4),
    (-2, -3, -4, -5),
    (Ellipsis,),
    (),
    (slice(0, 0), Ellipsis),
    (slice(None, -1, 3), Ellipsis, slice(-1, None, -1)),
    (None, None, Ellipsis, 0),
    (Ellipsis, None, 2, None),
]


@pytest.mark.parametrize("shape_kind", ["known", "unknown", "none"])
@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem_table(index, shape_kind):
    shape = {"known": X.shape, "unknown": [None] * 4, "none": None}[shape_kind]
    x = A.placeholder(dtypes.int64, shape)
    y = x[index]
    want = X[index]
    got = run(y, {x: X})
    np.testing.assert_array_equal(got, want)
    assert y.shape.is_compatible_with(want.shape)
    if shape_kind == "known":
        assert y.shape.as_list() == list(want.shape)


def _slice_parts():
    bound = st.one_of(st.none(), st.integers(-7, 7))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    sl = st.builds(slice, bound, bound, step)
    return st.one_of(sl, st.integers(-2, 1), st.just(None))


@st.composite
def index_exprs(draw):
    parts = draw(st.lists(_slice_parts(), max_size=4))
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), Ellipsis)
    return tuple(parts)


@settings(max_examples=30, deadline=None)
@given(index=index_exprs())
def test_getitem_hypothesis(index):
    g = ops.Graph()
    with g.as_default():
        try:
            want = X[index]
        except IndexError:
            return  # too many indices for NumPy; TF errors too (checked elsewhere)
        x = A.placeholder(dtypes.int64, X.shape)
        y = x[index]
        assert y.shape.as_list() == list(want.shape)
        with Session(graph=g) as sess:
            np.testing.assert_array_equal(sess.run(y, {x: X}), want)


def test_getitem_tensor_indices():
    x = A.placeholder(dtypes.int64, [2, 3, 4, 5])
    i = A.placeholder(dtypes.int32, [])
    j = A.placeholder(dtypes.int64, [])
    y = x[i, 1:, j]
    assert y.shape.as_list() == [None, 5]  # begin is not constant: sliced dims unknown
    np.testing.assert_array_equal(run(y, {x: X, i: 1, j: -1}), X[1, 1:, -1])
    z = x[:, i:2]
    np.testing.assert_array_equal(run(z, {x: X, i: 1}), X[:, 1:2])
    assert x[[1, 2]].shape.as_list() == [4, 5]  # TF1 reads a list as a tuple of indices
    w = x[A.constant(1), ..., A.constant(np.int64(2))]
    assert w.shape.as_list() == [3, 4]
    np.testing.assert_array_equal(run(w, {x: X}), X[1, ..., 2])
    s = A.placeholder(dtypes.int32, [])
    np.testing.assert_array_equal(run(x[::s], {x: X, s: -1}), X[::-1])


def test_getitem_strings_and_shape_of():
    strs = A.constant([[b"a", b"b"], [b"c", b"d"]])
    assert run(strs[1, ::-1]).tolist() == [b"d", b"c"]
    x = A.placeholder(dtypes.float32, [None, 7])
    assert ops.constant_value(A.shape(np.zeros((3, 4)))[1]) == 4
    assert ops.constant_shape(A.shape(x)[1:]).as_list() == [7]


@pytest.mark.parametrize(
    "bad",
    [1.5, "a", True, np.array([1, 2]), slice(0.5, None)],
    ids=["float", "str", "bool", "array", "float_bound"],
)
def test_getitem_type_errors(bad):
    x = A.placeholder(dtypes.float32, [3, 3])
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[bad]
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[A.constant([1, 2])]
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[A.constant(1.0)]


def test_getitem_errors():
    x = A.placeholder(dtypes.float32, [3, 3])
    with pytest.raises(ValueError, match="slice index 3 of dimension 0 out of bounds"):
        x[3]
    with pytest.raises(ValueError, match="Index out of range using input dim 2"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="Multiple ellipses"):
        x[..., ...]
    with pytest.raises(ValueError, match="strides\\[0\\] must be non-zero"):
        x[::0]
    i = A.placeholder(dtypes.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="slice index -4 of dimension 1"):
        run(x[:, i], {x: np.zeros((3, 3), np.float32), i: -4})
    s = A.placeholder(dtypes.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="must be non-zero"):
        run(x[::s], {x: np.zeros((3, 3), np.float32), s: 0})


def test_strided_slice_masks():
    x = A.constant(X)
    # begin_mask/end_mask on dim 0, shrink dim 1, new axis at 2, ellipsis rest.
    y = A.strided_slice(
        x, [5, 1, 0, 0], [0, 2, 0, 0], [-1, 1, 1, 1],
        begin_mask=1, end_mask=1, shrink_axis_mask=2, new_axis_mask=4, ellipsis_mask=8,
    )  # fmt: skip
    want = X[::-1, 1, None, ...]
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(run(y), want)
    z = A.strided_slice(x, [0, 1], [2, 3])  # strides default to ones
    np.testing.assert_array_equal(run(z), X[0:2, 1:3])
    b = A.placeholder(dtypes.int32, [2])
    u = A.strided_slice(x, b, [2, 3], [1, 1], end_mask=1)
    assert u.shape.as_list() == [None, None, 4, 5]
    np.testing.assert_array_equal(run(u, {b: [1, 0]}), X[1:, 0:3])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex128, object])
def test_slice_and_gather_dtypes(dtype):
    x = X.astype(dtype) if dtype is not object else X.astype(str).astype(bytes).astype(object)
    c = A.constant(x)
    got = run(A.slice(c, [1, 0, 2, 1], [-1, 2, -1, 3]))
    assert got.tolist() == x[1:, 0:2, 2:, 1:4].tolist()
    got = run(A.gather(c, [[2, 0]], axis=2))
    assert got.tolist() == np.take(x, [[2, 0]], axis=2).tolist()
    got = run(A.reverse(c, [1, 3]))
    assert got.tolist() == x[:, ::-1, :, ::-1].tolist()


def test_gather_batch_dims():
    params = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(np.float32)
    idx = np.array([[0, 2], [1, 1]], np.int64)
    y = A.gather(params, idx, axis=2, batch_dims=1)
    want = np.stack([np.take(params[b], idx[b], axis=1) for b in range(2)])
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(run(y), want)
    y = A.gather(params, idx[:, :1], batch_dims=1)  # axis defaults to batch_dims
    want = np.stack([params[b][idx[b, :1]] for b in range(2)])
    np.testing.assert_array_equal(run(y), want)
    with pytest.raises(ValueError, match="batch_dims"):
        A.gather(params, idx, axis=0, batch_dims=1)


# -- issue 18: the GatherV2 gradient with a tensor axis or batch_dims ---------------------------


def test_gather_index_out_of_range_names_it_as_tf():
    # TF 2.21's messages: "indices[0,1] = 5 is not in [0, 3)"; a scalar index has no
    # position: "indices = 7 is not in [0, 3)".  (The CPU kernel's: on a GPU, TF's kernel
    # gives zeros for an index out of range, tests/ops/test_device_indexing.py.)
    import asyncflow as af

    i = af.placeholder(af.int32, [])
    with af.Session() as sess, af.device("/cpu:0"):
        with pytest.raises(errors.InvalidArgumentError, match=r"^indices = 7 is not in \[0, 3\)"):
            sess.run(af.gather(af.constant([1.0, 2.0, 3.0]), i), {i: 7})
        with pytest.raises(errors.InvalidArgumentError, match=r"^indices\[0,1\] = 5 is not in"):
            sess.run(af.gather(af.constant([1.0, 2.0, 3.0]), af.constant([[0, 5]])))


def test_gather_gradient_with_a_fed_axis_matches_tf():
    # TF 2.21: d sum(gather(p[3,4], [1, 1, 3], axis=ax) * 2) / dp with ax fed 1 is
    # [[0, 4, 0, 2]] * 3 (a dense tensor).
    import asyncflow as af

    p = af.constant(np.arange(12.0).reshape(3, 4))
    ax = af.placeholder(af.int32, [])
    (g,) = af.gradients(af.reduce_sum(af.gather(p, [1, 1, 3], axis=ax) * 2.0), [p])
    with af.Session() as sess:
        assert sess.run(g, {ax: 1}).tolist() == [[0.0, 4.0, 0.0, 2.0]] * 3
        assert sess.run(g, {ax: -1}).tolist() == [[0.0, 4.0, 0.0, 2.0]] * 3


def test_gather_gradient_with_batch_dims_matches_tf():
    # TF 2.21: gather(p[2,3,2], [[0, 2], [1, 1]], axis=1, batch_dims=1) weighted by
    # [[[1,2],[3,4]],[[5,6],[7,8]]] has gradient [[[1,2],[0,0],[3,4]],[[0,0],[12,14],[0,0]]].
    import asyncflow as af

    p = af.constant(np.arange(12.0).reshape(2, 3, 2))
    w = af.constant(np.arange(1.0, 9.0).reshape(2, 2, 2))
    y = af.gather(p, [[0, 2], [1, 1]], axis=1, batch_dims=1)
    (g,) = af.gradients(af.reduce_sum(y * w), [p])
    with af.Session() as sess:
        assert sess.run(g).tolist() == [
            [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]],
            [[0.0, 0.0], [12.0, 14.0], [0.0, 0.0]],
        ]


@pytest.mark.parametrize(
    "shape,indices,axis,batch_dims",
    [
        ((2, 3, 4), [[0, 2], [1, 1]], 2, 1),
        ((2, 2, 3, 2), [[[2], [0]], [[1], [1]]], 2, 2),
        ((3, 4), [[1, 0], [3, 3]], 1, 0),
        ((2, 3, 4), [[2, 0, 1], [1, 1, 1]], 1, -1),
    ],
)
def test_gather_gradient_general_against_finite_differences(shape, indices, axis, batch_dims):
    import asyncflow as af
    from asyncflow.test_util import compute_gradient_error

    x0 = np.random.default_rng(4).standard_normal(shape)
    x = af.constant(x0)
    ax = af.placeholder_with_default(np.int32(axis), [])  # the axis is a tensor
    y = af.gather(x, np.array(indices, np.int32), axis=ax, batch_dims=batch_dims)
    with af.Session() as sess:
        y_shape = sess.run(y).shape
        assert compute_gradient_error(x, list(shape), y, list(y_shape), x_init_value=x0) < 1e-8


def test_batch_gather_matches_tf():
    # TF 2.21: batch_gather(arange(12).reshape(2, 3, 2), [[2, 0], [1, 1]]) =
    # [[[4, 5], [0, 1]], [[8, 9], [8, 9]]]; batch_gather([[1,2,3],[4,5,6]], [[2],[0]]) =
    # [[3], [4]].
    import asyncflow as af

    a = af.batch_gather(np.arange(12).reshape(2, 3, 2), [[2, 0], [1, 1]])
    b = af.batch_gather([[1, 2, 3], [4, 5, 6]], [[2], [0]])
    assert a.shape.as_list() == [2, 2, 2]
    with af.Session() as sess:
        assert sess.run(a).tolist() == [[[4, 5], [0, 1]], [[8, 9], [8, 9]]]
        assert sess.run(b).tolist() == [[3], [4]]
