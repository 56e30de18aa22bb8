"""DynamicStitch, ParallelDynamicStitch, DynamicPartition and boolean_mask: values, static
shapes and errors recorded from TF 2.21 (tf.compat.v1 graph mode); gradients against finite
differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import data_flow_ops
from asyncflow.session import Session
from asyncflow.test_util import compute_gradient_error


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


# builder -> (TF's static shape, TF's value)
_CASES = {
    "stitch": (
        lambda: af.dynamic_stitch([[0, 3], [1, 2]], [[1.0, 2.0], [3.0, 4.0]]),
        [4],
        [1, 3, 4, 2],
    ),  # fmt: skip
    "stitch_dup_last_wins": (
        lambda: af.dynamic_stitch([[0, 1], [1]], [[1.0, 2.0], [9.0]]),
        [2],
        [1, 9],
    ),  # fmt: skip
    "parallel_stitch": (
        lambda: data_flow_ops.parallel_dynamic_stitch([[0, 3], [1, 2]], [[1.0, 2.0], [3.0, 4.0]]),
        [4],
        [1, 3, 4, 2],
    ),
    "stitch_rows": (
        lambda: af.dynamic_stitch([[1], [0]], [[[1, 2]], [[3, 4]]]),
        [2, 2],
        [[3, 4], [1, 2]],
    ),  # fmt: skip
    "stitch_gap_zero": (lambda: af.dynamic_stitch([[0, 3]], [[1.0, 2.0]]), [4], [1, 0, 0, 2]),
    "stitch_scalars": (lambda: af.dynamic_stitch([0, 1], [5.0, 6.0]), [2], [5, 6]),
    "stitch_empty": (
        lambda: af.dynamic_stitch([np.zeros([0], np.int32)], [np.zeros([0, 3], np.float32)]),
        [0, 3],
        np.zeros((0, 3)),
    ),  # fmt: skip
    "mask": (
        lambda: af.boolean_mask([[1, 2], [3, 4], [5, 6]], [True, False, True]),
        [None, 2],
        [[1, 2], [5, 6]],
    ),  # fmt: skip
    "mask_2d": (
        lambda: af.boolean_mask([[1, 2], [3, 4]], [[True, False], [False, True]]),
        [None],
        [1, 4],
    ),  # fmt: skip
    "mask_axis": (
        lambda: af.boolean_mask([[1, 2], [3, 4]], [False, True], axis=1),
        [2, None],
        [[2], [4]],
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_values_match_tf(case):
    build, static, want = _CASES[case]
    t = build()
    assert t.shape.as_list() == static
    np.testing.assert_array_equal(_run(t), want)


def test_stitch_static_shape_with_unknown_indices():
    ind = af.placeholder(af.int32)
    t = af.dynamic_stitch([ind, [1]], [af.placeholder(af.float32, [None, 2]), [[1.0, 2.0]]])
    assert t.shape.as_list() == [None, 2]  # TF: (None, 2)
    assert t.op.type == "DynamicStitch"


def test_partition_matches_tf():
    parts = af.dynamic_partition([10.0, 20.0, 30.0, 40.0], [0, 1, 0, 2], 3)
    assert [p.shape.as_list() for p in parts] == [[None]] * 3
    got = _run(parts)
    for g, want in zip(got, [[10, 30], [20], [40]], strict=True):
        np.testing.assert_array_equal(g, want)
    rows = af.dynamic_partition([[1, 2], [3, 4], [5, 6]], [1, 1, 0], 2)
    assert [p.shape.as_list() for p in rows] == [[None, 2]] * 2
    a, b = _run(rows)
    np.testing.assert_array_equal(a, [[5, 6]])
    np.testing.assert_array_equal(b, [[1, 2], [3, 4]])
    a, b = _run(af.dynamic_partition([[1, 2], [3, 4]], [[0, 1], [1, 0]], 2))
    np.testing.assert_array_equal(a, [1, 4])
    np.testing.assert_array_equal(b, [2, 3])
    (one,) = af.dynamic_partition([1.0, 2.0], [0, 0], 1)
    np.testing.assert_array_equal(_run(one), [1, 2])


def test_errors_match_tf():
    with pytest.raises(ValueError):
        af.dynamic_stitch([[0, 1]], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError):
        af.dynamic_partition([1.0, 2.0], [0, 1, 0], 2)
    with pytest.raises(ValueError, match="mask cannot be scalar"):
        af.boolean_mask(1, True)
    with pytest.raises(ValueError, match="incompatible"):
        af.boolean_mask([[1, 2], [3, 4]], [True, False, True])
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] is out of range"):
        _run(af.dynamic_stitch([[0, -1]], [[1.0, 2.0]]))
    with pytest.raises(
        errors.InvalidArgumentError, match=r"partitions\[1\] = 2 is not in \[0, 2\)"
    ):
        _run(af.dynamic_partition([1.0, 2.0], [0, 2], 2))
    # A scalar partitions tensor is named without an index (TF 2.21's message).
    with pytest.raises(errors.InvalidArgumentError, match=r"^partitions = 17 is not in \[0, 7\)"):
        _run(af.dynamic_partition(np.zeros(5), 17, 7))


def test_boolean_mask_unknown_shapes():
    x = af.placeholder(af.float32, [None, 3, 4])
    m = af.placeholder(af.bool, [None, 3])
    t = af.boolean_mask(x, m)
    assert t.shape.as_list() == [None, 4]  # TF: (None, 4)
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mv = np.array([[True, False, True], [False, False, True]])
    np.testing.assert_array_equal(_run(t, {x: xv, m: mv}), xv[mv])


_RNG = np.random.default_rng(7)


def _grad_err(build, x0):
    x = af.constant(x0)
    y = build(x)
    with Session() as sess:
        y_shape = sess.run(y).shape  # some outputs' static shapes are partly unknown
        return compute_gradient_error(x, list(x0.shape), y, list(y_shape), x_init_value=x0)


@pytest.mark.parametrize(
    "build,x0",
    [
        (lambda x: af.dynamic_stitch([[0, 3], [1, 2]], [x, [3.0, 4.0]]),
         _RNG.standard_normal(2)),
        (lambda x: af.dynamic_stitch([[2, 0], [1]], [x[:2], x[2:]]), _RNG.standard_normal((3, 2))),
        (lambda x: af.dynamic_partition(x, [1, 0, 1], 2)[1], _RNG.standard_normal((3, 2))),
        (lambda x: af.dynamic_partition(x, [[1, 0], [0, 0]], 2)[0], _RNG.standard_normal((2, 2))),
        (lambda x: af.boolean_mask(x, [[True, False, True], [False, True, True]]),
         _RNG.standard_normal((2, 3))),
        (lambda x: af.boolean_mask(x, [False, True], axis=1), _RNG.standard_normal((2, 2, 2))),
    ],
)  # fmt: skip
def test_gradients_against_finite_differences(build, x0):
    assert _grad_err(build, x0) < 1e-8


def test_partition_gradient_with_an_unused_part():
    x = af.constant(np.arange(4.0))
    a, _ = af.dynamic_partition(x, [0, 1, 0, 1], 2)
    (g,) = af.gradients(af.reduce_sum(a * a), [x])
    np.testing.assert_array_equal(_run(g), [0, 0, 4, 0])
