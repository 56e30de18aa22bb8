"""Sparse ops, special functions, complex parts, sort/argsort/repeat/roll/bitcast and
friends against values and gradients recorded from TF 2.21 (tests/fixtures/
record_api_extras_tf.py builds the same cases, tests/fixtures/api_extras_cases.py),
plus gradients against finite differences and TF's errors."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "fixtures"))
from api_extras_cases import GRADS, VALUES  # noqa: E402

RECORDED = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "api_extras_tf.json").read_text()
)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(t, feed=None):
    with af.Session() as s:
        return s.run(t, feed)


def _compare(got, want, key):
    if isinstance(want, dict) and "indices" in want:
        np.testing.assert_array_equal(got.indices, want["indices"], err_msg=key)
        np.testing.assert_allclose(got.values, want["values"], rtol=1e-5, atol=1e-6, err_msg=key)
        np.testing.assert_array_equal(got.dense_shape, want["dense_shape"], err_msg=key)
    elif isinstance(want, dict) and "re" in want:
        np.testing.assert_allclose(np.real(got), want["re"], rtol=1e-5, err_msg=key)
        np.testing.assert_allclose(np.imag(got), want["im"], rtol=1e-5, err_msg=key)
    elif isinstance(got, list | tuple) and not isinstance(got, np.ndarray):
        assert len(got) == len(want), key
        for g, w in zip(got, want):
            _compare(g, w, key)
    else:
        np.testing.assert_allclose(
            np.asarray(got, np.float64),
            np.asarray(want, np.float64),
            rtol=2e-5,
            atol=1e-6,
            err_msg=key,
        )


@pytest.mark.parametrize("key", sorted(VALUES))
def test_values_match_tf(key):
    _compare(_run(VALUES[key](af)), RECORDED["values"][key], key)


@pytest.mark.parametrize("key", sorted(GRADS))
def test_gradients_match_tf(key):
    build, inputs = GRADS[key]
    xs = [af.cast(af.constant(np.asarray(v, np.float64)), af.float32) for v in inputs]
    y = build(af, xs[0], xs[1] if len(xs) > 1 else None)
    shape = _run(y).shape
    w = af.constant(np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape), af.float32)
    grads = af.gradients(af.reduce_sum(y * w), xs)
    want = RECORDED["grads"][key]
    for g, w_ in zip(grads, want):
        if w_ is None:
            assert g is None, key
        else:
            _compare(_run(g), w_, key)


# -- finite differences (float64), where TF defines a gradient -------------------------------

_FD = {
    "lgamma": (lambda x: af.lgamma(x), [[0.7, 1.3, 4.2]]),
    "digamma": (lambda x: af.digamma(x), [[0.7, 1.3, 4.2]]),
    "igamma_a_and_x": (lambda a, x: af.igamma(a, x), [[0.8, 2.5], [0.6, 3.0]]),
    "igammac_a_and_x": (lambda a, x: af.igammac(a, x), [[0.8, 2.5], [0.6, 3.0]]),
    "zeta_q": (lambda q: af.zeta(af.constant([2.5, 3.0], af.float64), q), [[1.2, 2.0]]),
    "betainc_x": (
        lambda x: af.betainc(
            af.constant([0.5, 2.0], af.float64), af.constant([2.0, 3.0], af.float64), x
        ),
        [[0.3, 0.6]],
    ),
    "spmm": (
        lambda v, b: af.sparse_tensor_dense_matmul(
            af.SparseTensor([[0, 0], [1, 2], [2, 1]], v, [3, 3]), b
        ),
        [[1.0, -2.0, 0.5], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]],
    ),
    "sparse_softmax": (
        lambda v: af.sparse_softmax(af.SparseTensor([[0, 0], [0, 2], [1, 1]], v, [2, 3])).values,
        [[0.3, -1.0, 2.0]],
    ),
    "sparse_reduce_sum": (
        lambda v: af.sparse_reduce_sum(af.SparseTensor([[0, 0], [0, 2], [1, 1]], v, [2, 3]), 1),
        [[0.3, -1.0, 2.0]],
    ),
    "segment_sqrt_n": (
        lambda d: af.sparse_segment_sqrt_n(d, [0, 1, 1], [0, 0, 1]),
        [[[1.0, 2.0], [3.0, -4.0]]],
    ),
    "complex_angle": (lambda x, y: af.angle(af.complex(x, y)), [[1.0, -2.0], [0.5, 3.0]]),
    "roll": (lambda x: af.roll(x, [1, -1], [0, 1]), [[[1.0, 2.0], [3.0, 4.0]]]),
    "repeat": (lambda x: af.repeat(x, [1, 2], axis=1), [[[1.0, 2.0], [3.0, 4.0]]]),
    "sort": (lambda x: af.sort(x, axis=0), [[[1.0, 5.0], [3.0, -4.0]]]),
}


@pytest.mark.parametrize("key", sorted(_FD))
def test_gradients_match_finite_differences(key):
    fn, inputs = _FD[key]
    xs = [af.constant(np.asarray(v, np.float64)) for v in inputs]
    y = fn(*xs)
    shape = list(_run(y).shape)
    err = compute_gradient_error(
        xs,
        [list(np.shape(v)) for v in inputs],
        y,
        shape,
        x_init_value=[np.asarray(v, np.float64) for v in inputs],
    )
    assert err < 1e-5, (key, err)


def test_sparse_errors_match_tf():
    with pytest.raises(errors.InvalidArgumentError, match="out of order"):
        _run(af.sparse_to_dense([[1], [0]], [3], [1.0, 2.0]))
    with pytest.raises(errors.InvalidArgumentError, match="repeated"):
        _run(af.sparse_to_dense([[1], [1]], [3], [1.0, 2.0]))
    with pytest.raises(errors.InvalidArgumentError, match="out of bounds"):
        _run(af.sparse_to_dense([[3]], [3], [1.0]))
    a = af.SparseTensor([[0, 0]], [1.0], [2, 2])
    b = af.SparseTensor([[0, 0]], [1.0], [2, 3])
    with pytest.raises(ValueError, match="incompatible"):  # static shapes: at build, as TF
        af.sparse_add(a, b)
    shape = af.placeholder(af.int64, [2])
    with pytest.raises(errors.InvalidArgumentError):
        _run(af.sparse_add(a, af.SparseTensor([[0, 0]], [1.0], shape)).values, {shape: [2, 3]})
    with pytest.raises(TypeError, match="SparseTensor"):
        af.sparse_add(af.constant(1.0), af.constant(2.0))
    with pytest.raises(ValueError):
        af.sparse_reshape(a, [3, 3])
    with pytest.raises(errors.InvalidArgumentError, match="not increasing"):
        _run(af.sparse_segment_sum([[1.0], [2.0]], [0, 1], [1, 0]))
    with pytest.raises(NotImplementedError):
        af.gradients(af.sparse_maximum(a, a).values, [a.values])
    with pytest.raises(ValueError, match="Keyword"):
        af.sparse_split(1, a, 2)
    with pytest.raises(ValueError, match="new_shape"):
        af.sparse_reset_shape(a, [1, 1])


def test_sparse_placeholder_parts_and_namespace():
    sp = af.sparse_placeholder(af.float32, [3, 4])
    dense = af.sparse_tensor_to_dense(sp)
    got = _run(dense, {sp.indices: [[0, 1], [2, 3]], sp.values: [1.0, 2.0]})
    want = np.zeros((3, 4), np.float32)
    want[0, 1], want[2, 3] = 1.0, 2.0
    np.testing.assert_array_equal(got, want)
    assert af.sparse.add is af.sparse_add and af.sparse.to_dense is af.sparse_tensor_to_dense
    assert af.sparse.reduce_sum is af.sparse_reduce_sum
    v = _run(af.sparse.from_dense([[0, 3], [4, 0]]))
    np.testing.assert_array_equal(v.indices, [[0, 1], [1, 0]])
    np.testing.assert_array_equal(v.values, [3, 4])
    masked = af.sparse_mask(
        af.IndexedSlices(af.constant([[1.0], [2.0], [3.0]]), af.constant([4, 7, 9])), [7]
    )
    vals, idx = _run([masked.values, masked.indices])
    np.testing.assert_array_equal(idx, [4, 9])
    np.testing.assert_array_equal(vals, [[1.0], [3.0]])


def test_special_and_misc_errors_match_tf():
    with pytest.raises(TypeError):
        af.complex(af.constant([1.0]), af.constant([1.0], af.float64))
    with pytest.raises(ValueError):
        af.bitcast(af.constant([1, 2, 3], af.uint8), af.float32)
    with pytest.raises(errors.InvalidArgumentError):
        _run(af.unravel_index([12], [3, 4]))
    with pytest.raises(ValueError):  # TF's shape function, at build time
        af.betainc([1.0, 2.0], [1.0, 2.0, 3.0], [0.5, 0.5])
    with pytest.raises(errors.InvalidArgumentError, match="inconsistent"):
        p = af.placeholder(af.float32, [None])
        _run(af.betainc(p, [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]), {p: [1.0, 2.0]})
    with pytest.raises(ValueError, match="direction"):
        af.sort([1.0], direction="UP")
    with pytest.raises(ValueError):
        af.accumulate_n([])
    with pytest.raises(ValueError):
        af.accumulate_n([af.constant([1.0]), af.constant([1, 2])])
    assert af.rint([0.5]).op.type == "Rint"
    assert af.gradients(af.rint(af.constant([0.5])), af.constant([0.5])) == [None]
