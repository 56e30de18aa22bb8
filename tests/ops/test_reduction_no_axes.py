"""A reduction over no axes is its input's values, without a copy (issue 21: the
broadcast gradients of an RNN cell's Mul/Add sum over BroadcastGradientArgs' empty
axes every iteration).  NumPy's reductions over axis=() are the reference."""

import numpy as np
import pytest

import asyncflow as af

_CASES = [
    ("reduce_sum", np.sum),
    ("reduce_mean", np.mean),
    ("reduce_prod", np.prod),
    ("reduce_max", np.max),
    ("reduce_min", np.min),
]


@pytest.mark.parametrize("name, reference", _CASES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reducing_no_axes_gives_the_input(name, reference, keepdims):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [None, 4])
        axes = af.placeholder(af.int32, [None])
        y = getattr(af, name)(a * 2.0, axis=axes, keepdims=keepdims)
        with af.Session() as sess:
            got = sess.run(y, {a: x, axes: np.zeros(0, np.int32)})
    np.testing.assert_array_equal(got, reference(x * 2.0, axis=(), keepdims=keepdims))


def test_a_consumer_of_the_result_never_writes_into_the_input():
    # relu may write its output into a donated input; the sum's result shares the
    # product's buffer, which another node still reads after it.
    x = -np.arange(12, dtype=np.float32).reshape(3, 4) - 1.0
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [None, 4])
        axes = af.placeholder(af.int32, [None])
        t = a * 1.0
        r = af.nn.relu(af.reduce_sum(t, axis=axes))
        with af.control_dependencies([r]):
            w = t + 0.0
        with af.Session() as sess:
            got_r, got_w = sess.run([r, w], {a: x, axes: np.zeros(0, np.int32)})
    np.testing.assert_array_equal(got_r, np.zeros_like(x))
    np.testing.assert_array_equal(got_w, x)


def test_any_and_all_over_no_axes():
    x = np.array([[True, False], [False, False]])
    with af.Graph().as_default():
        a = af.placeholder(af.bool, [2, 2])
        axes = af.placeholder(af.int32, [None])
        ys = [af.reduce_any(a, axis=axes), af.reduce_all(a, axis=axes)]
        with af.Session() as sess:
            got = sess.run(ys, {a: x, axes: np.zeros(0, np.int32)})
    for g in got:
        np.testing.assert_array_equal(g, x)
