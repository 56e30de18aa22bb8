"""GatherNd, ScatterNd, TensorScatter*, ScatterNd{Update,Add,Sub} and Scatter{Mul,Div,Min,Max}:
values and error messages recorded from TF 2.21 (tf.compat.v1, graph mode, ref variables),
gradients against finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session
from asyncflow.test_util import compute_gradient_error

P = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


# Each row: builder -> TF 2.21's value (and static shape, which equals the value's shape).
_CASES = {
    "gather_points": (lambda: af.gather_nd(P, [[1, 2], [0, 0]]), [6.0, 0.0]),
    "gather_rows": (lambda: af.gather_nd(P, [[2], [0]]), [P[2], P[0]]),
    "gather_k0": (lambda: af.gather_nd(P, np.zeros([2, 0], np.int32)), [P, P]),
    "gather_batch": (
        lambda: af.gather_nd(np.arange(8).reshape(2, 2, 2), [[1], [0]], batch_dims=1),
        [[2, 3], [4, 5]],
    ),
    "scatter_dups_add": (
        lambda: af.scatter_nd([[1], [3], [1]], [9.0, 10.0, 11.0], [5]),
        [0, 20, 0, 10, 0],
    ),  # fmt: skip
    "scatter_slices": (
        lambda: af.scatter_nd([[0, 1]], [[5, 6]], [2, 2, 2]),
        [[[0, 0], [5, 6]], [[0, 0], [0, 0]]],
    ),  # fmt: skip
    "tensor_update": (
        lambda: af.tensor_scatter_nd_update(P, [[0, 0], [2, 3]], [-1.0, -2.0]),
        np.where(np.isin(np.arange(12), [0, 11]), [-1.0] + [0] * 10 + [-2.0], P.ravel()).reshape(
            3, 4
        ),
    ),
    "tensor_add": (
        lambda: af.tensor_scatter_nd_add(P, [[0, 0], [0, 0]], [1.0, 1.0]),
        P + np.eye(1, 12).reshape(3, 4) * 2,
    ),  # fmt: skip
    "tensor_sub": (
        lambda: af.tensor_scatter_sub(P, [[1]], np.ones((1, 4), np.float32)),
        P - [[0], [1], [0]],
    ),  # fmt: skip
    "tensor_max": (
        lambda: af.tensor_scatter_nd_max(P, [[0, 0], [1, 1]], [5.0, 1.0]),
        np.where(np.arange(12).reshape(3, 4) == 0, 5.0, P),
    ),  # fmt: skip
    "tensor_min": (
        lambda: af.tensor_scatter_nd_min(P, [[0, 0], [1, 1]], [5.0, 1.0]),
        np.where(np.arange(12).reshape(3, 4) == 5, 1.0, P),
    ),  # fmt: skip
    "tensor_empty": (
        lambda: af.tensor_scatter_nd_update(
            P, np.zeros([0, 2], np.int32), np.zeros([0], np.float32)
        ),
        P,
    ),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_values_match_tf(case):
    build, want = _CASES[case]
    t = build()
    want = np.asarray(want)
    assert t.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(_run(t), want)


def test_op_types():
    assert af.gather_nd(P, [[0]]).op.type == "GatherNd"
    assert af.scatter_nd([[0]], [1.0], [2]).op.type == "ScatterNd"
    assert af.tensor_scatter_update(P, [[0, 0]], [1.0]).op.type == "TensorScatterUpdate"


@pytest.mark.parametrize(
    "build,error,match",
    [
        (lambda: af.gather_nd(P, [[3, 0]]), errors.InvalidArgumentError,
         r"indices\[0\] = \[3, 0\] does not index into param shape \[3,4\]"),
        (lambda: af.scatter_nd([[5]], [1.0], [5]), errors.InvalidArgumentError,
         r"indices\[0\] = \[5\] does not index into shape \[5\]"),
        (lambda: af.tensor_scatter_nd_update(P, [[0, 7]], [1.0]), errors.InvalidArgumentError,
         r"indices\[0\] = \[0, 7\] does not index into shape \[3,4\]"),
        # The bad row is named by its position in indices.shape[:-1], none for a vector.
        (lambda: af.gather_nd([0, 1, 2], [[[0], [7]]]), errors.InvalidArgumentError,
         r"indices\[0,1\] = \[7\] does not index into param shape \[3\]"),
        (lambda: af.gather_nd([0, 1, 2], [7]), errors.InvalidArgumentError,
         r"^indices = \[7\] does not index into param shape \[3\]"),
        (lambda: af.scatter_nd([[[0], [7]]], [[1, 2]], [3]), errors.InvalidArgumentError,
         r"indices\[0,1\] = \[7\] does not index into shape \[3\]"),
        (lambda: af.gather_nd(np.empty((0, 3), np.float32), np.zeros((1, 2), np.int32)),
         errors.InvalidArgumentError,
         r"Requested more than 0 entries, but params is empty.  Params shape: \[0,3\]"),
    ],
)  # fmt: skip
def test_run_time_errors_match_tf(build, error, match):
    with pytest.raises(error, match=match):
        _run(build())


def test_build_time_errors_match_tf():
    with pytest.raises(ValueError, match=r"indices.shape\[-1\] must be <= params.rank"):
        af.gather_nd(P, [[1, 0, 0]])
    with pytest.raises(ValueError, match=r"Dimensions \[0,1\) of indices"):
        af.scatter_nd([[1]], [1.0, 2.0], [5])


def test_unknown_shapes_checked_at_run_time():
    idx = af.placeholder(af.int32)
    upd = af.placeholder(af.float32)
    out = af.scatter_nd(idx, upd, [5])
    assert out.shape.as_list() == [5]
    with pytest.raises(errors.InvalidArgumentError, match="must match"):
        _run(out, {idx: [[1]], upd: [1.0, 2.0]})


def test_ref_variable_updates_match_tf():
    # TF 2.21 with ref variables: update [1],[2] <- 3,4; add [1],[1] += 1,1; sub [4] -= 2.
    v = af.Variable(np.zeros(5, np.float32))
    upd = af.scatter_nd_update(v, [[1], [2]], [3.0, 4.0])
    add = af.scatter_nd_add(v, [[1], [1]], [1.0, 1.0])
    sub = af.scatter_nd_sub(v, [[4]], [2.0])
    bad = af.scatter_nd_add(v, [[5]], [1.0])
    with Session() as sess:
        sess.run(v.initializer)
        assert upd.op.type == "ScatterNdUpdate"
        np.testing.assert_array_equal(sess.run(upd), [0, 3, 4, 0, 0])
        np.testing.assert_array_equal(sess.run(add), [0, 5, 4, 0, 0])
        np.testing.assert_array_equal(sess.run(sub), [0, 5, 4, 0, -2])
        with pytest.raises(errors.InvalidArgumentError, match="does not index into shape"):
            sess.run(bad)
        np.testing.assert_array_equal(sess.run(v), [0, 5, 4, 0, -2])  # unchanged


def test_scatter_mul_div_min_max_match_tf():
    # TF 2.21 (ref variable [1, 2, 3, 4]), applied in turn:
    # mul([0, 2, 0], [2, 3, 5]) -> [10, 2, 9, 4]; div([1], [4]) -> [10, .5, 9, 4];
    # min([3, 3], [1, .5]) -> [10, .5, 9, .5]; max([1], [10]) -> [10, 10, 9, .5];
    # mul([0, 1], 2.) (scalar updates) -> [20, 20, 9, .5].
    w = af.Variable(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    steps = [
        (af.scatter_mul(w, [0, 2, 0], [2.0, 3.0, 5.0]), [10, 2, 9, 4]),
        (af.scatter_div(w, [1], [4.0]), [10, 0.5, 9, 4]),
        (af.scatter_min(w, [3, 3], [1.0, 0.5]), [10, 0.5, 9, 0.5]),
        (af.scatter_max(w, [1], [10.0]), [10, 10, 9, 0.5]),
        (af.scatter_mul(w, [0, 1], 2.0), [20, 20, 9, 0.5]),
    ]
    wi = af.Variable(np.array([7, -7, 9], np.int32))
    div_int = af.scatter_div(wi, [0, 1], [2, 2])  # TF: [3, -3, 9] (truncating)
    with Session() as sess:
        sess.run([w.initializer, wi.initializer])
        for op, want in steps:
            np.testing.assert_array_equal(sess.run(op), np.float32(want))
        np.testing.assert_array_equal(sess.run(div_int), [3, -3, 9])
        with pytest.raises(errors.InvalidArgumentError, match=r"indices\[0\] = 4 is not in"):
            sess.run(af.scatter_min(w, [4], [1.0]))


def _grad_err(build, x0):
    x = af.constant(x0)
    y = build(x)
    with Session():
        return compute_gradient_error(x, list(x0.shape), y, y.shape.as_list(), x_init_value=x0)


_RNG = np.random.default_rng(18)
X = _RNG.standard_normal((3, 4))
U = _RNG.standard_normal(2)


@pytest.mark.parametrize(
    "build,x0",
    [
        (lambda x: af.gather_nd(x, [[1, 2], [0, 0], [1, 2]]), X),
        (lambda x: af.gather_nd(x, [[2], [2]]), X),
        (lambda x: af.scatter_nd([[1, 1], [1, 1], [0, 3]], x, [3, 4]), _RNG.standard_normal(3)),
        (lambda x: af.tensor_scatter_nd_update(x, [[0, 0], [2, 3]], U), X),
        (lambda x: af.tensor_scatter_nd_update(X, [[0, 0], [2, 3]], x), U),
        (lambda x: af.tensor_scatter_nd_add(x, [[0, 0], [0, 0]], U), X),
        (lambda x: af.tensor_scatter_nd_sub(X, [[1, 1], [1, 1]], x), U),
        (lambda x: af.tensor_scatter_nd_max(x, [[0, 0], [2, 3]], U), X),
        (lambda x: af.tensor_scatter_nd_min(X, [[0, 0], [2, 3]], x), U),
    ],
)  # fmt: skip
def test_gradients_against_finite_differences(build, x0):
    assert _grad_err(build, x0) < 1e-8


def test_gather_nd_int16_indices_and_empty_lookups_match_tf():
    # TF 2.21 registers GatherNd for int16 indices; empty indices into empty params are
    # fine (shape [0]).
    idx = af.constant([[4], [4], [0]], dtype=af.int16)
    out = af.gather_nd(np.array([8, 1, 2, 3, 7, 5], np.float32), idx)
    empty = af.gather_nd(np.empty((0, 3), np.float32), np.empty((0, 2), np.int32))
    got, got_empty = _run([out, empty])
    np.testing.assert_array_equal(got, [7, 7, 8])
    assert got_empty.shape == (0,) and empty.shape.as_list() == [0]


def test_gather_nd_gradient_of_whole_rows_is_indexed_slices():
    # TF's _GatherNdGrad: indices of shape [N, 1] give IndexedSlices(grad, rows); the
    # dense value of TF 2.21's gradient for rows [2, 0, 5] of a [6, 9] matrix.
    from asyncflow.indexed_slices import IndexedSlices

    x = af.constant(np.ones((6, 9)))
    out = af.gather_nd(x, af.constant([[2], [0], [5]]))
    g = af.constant(np.repeat([[1.0], [2.0], [3.0]], 9, axis=1))
    grad = af.gradients([out], [x], [g])[0]
    assert isinstance(grad, IndexedSlices)
    want = np.zeros((6, 9))
    want[2], want[0], want[5] = 1, 2, 3
    np.testing.assert_array_equal(_run(ops.convert_to_tensor(grad)), want)
    # Other index shapes keep the dense ScatterNd gradient.
    dense = af.gradients([af.gather_nd(x, [[0, 0], [1, 1]])], [x])[0]
    assert not isinstance(dense, IndexedSlices)
