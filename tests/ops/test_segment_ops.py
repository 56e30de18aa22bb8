"""Segment reductions against values recorded from TF 2.21 (tf.compat.v1 graph mode,
tf.math.segment_* / unsorted_segment_*), gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import segment_ops as S
from asyncflow.session import Session
from asyncflow.test_util import compute_gradient_error

D = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.0], [-7.0, 8.0]], np.float32)
IDS, UIDS = [0, 0, 2, 2], [1, -1, 1, 3]

TF = {
    "segment_sum": [[4.0, -2.0], [0.0, 0.0], [-2.0, 14.0]],
    "segment_mean": [[2.0, -1.0], [0.0, 0.0], [-1.0, 7.0]],
    "segment_max": [[3.0, 2.0], [0.0, 0.0], [5.0, 8.0]],
    "segment_min": [[1.0, -4.0], [0.0, 0.0], [-7.0, 6.0]],
    "segment_prod": [[3.0, -8.0], [1.0, 1.0], [-35.0, 48.0]],
    "unsorted_segment_max": [
        [-3.4028234663852886e38, -3.4028234663852886e38],
        [5.0, 6.0],
        [-3.4028234663852886e38, -3.4028234663852886e38],
        [-7.0, 8.0],
    ],
    "unsorted_segment_min": [
        [3.4028234663852886e38, 3.4028234663852886e38],
        [1.0, 2.0],
        [3.4028234663852886e38, 3.4028234663852886e38],
        [-7.0, 8.0],
    ],
    "unsorted_segment_prod": [[1.0, 1.0], [5.0, 12.0], [1.0, 1.0], [-7.0, 8.0]],
    "unsorted_segment_mean": [[0.0, 0.0], [3.0, 4.0], [0.0, 0.0], [-7.0, 8.0]],
    "unsorted_segment_sqrt_n": [
        [0.0, 0.0],
        [4.242640972137451, 5.656854152679443],
        [0.0, 0.0],
        [-7.0, 8.0],
    ],
    "unsorted_segment_sum": [[0.0, 0.0], [6.0, 8.0], [0.0, 0.0], [-7.0, 8.0]],
    "umax_int": [2, -2147483648],
}


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _build(name):
    if name == "umax_int":
        return S.unsorted_segment_max(np.int32([1, 2]), [0, 0], 2)
    if name == "unsorted_segment_sum":
        return af.unsorted_segment_sum(D, UIDS, 4)
    if name.startswith("unsorted"):
        return getattr(S, name)(D, UIDS, 4)
    return getattr(S, name)(D, IDS)


@pytest.mark.parametrize("name", sorted(TF))
def test_values_match_tf(name):
    t = _build(name)
    with Session() as sess:
        got = sess.run(t)
    np.testing.assert_allclose(got, np.asarray(TF[name], got.dtype), rtol=1e-6)


def test_static_shapes():
    # TF 2.21 leaves the segment count unknown even for constant ids
    assert S.segment_sum(D, IDS).shape.as_list() == [None, 2]
    assert S.unsorted_segment_max(D, UIDS, 4).shape.as_list() == [4, 2]


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: S.segment_sum(D, [1, 0, 2, 2]), "segment ids are not increasing"),
        (lambda: S.segment_sum(D, [-1, 0, 2, 2]),
         r"Segment id -1 out of range \[0, 3\), possibly because 'segment_ids' input is not"),
        (lambda: S.unsorted_segment_max(D, [0, 0, 4, 0], 4),
         r"segment_ids\[2\] = 4 is out of range \[0, 4\)"),
    ],
)  # fmt: skip
def test_errors_match_tf(build, match):
    with Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match=match):
            sess.run(build())


X = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.5], [-7.0, 8.0], [0.5, 0.25]])


@pytest.mark.parametrize(
    "build",
    [
        lambda x: S.segment_sum(x, [0, 0, 2, 2, 3]),
        lambda x: S.segment_mean(x, [0, 0, 2, 2, 3]),
        lambda x: S.segment_max(x, [0, 0, 2, 2, 3]),
        lambda x: S.segment_min(x, [0, 1, 1, 1, 3]),
        lambda x: S.unsorted_segment_max(x, [1, -1, 1, 3, 0], 4),
        lambda x: S.unsorted_segment_min(x, [1, 2, 1, 3, 0], 4),
        lambda x: S.unsorted_segment_mean(x, [1, 2, 1, 3, 1], 4),
        lambda x: S.unsorted_segment_sqrt_n(x, [1, 2, 1, 3, 1], 4),
    ],
)
def test_gradients_against_finite_differences(build):
    x = af.constant(X)
    y = build(x)
    with Session() as sess:
        y_shape = sess.run(y).shape
        assert compute_gradient_error(x, [5, 2], y, list(y_shape), x_init_value=X) < 1e-7
