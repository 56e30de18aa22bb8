"""ArgMax / ArgMin with NaNs as TF computes them (Eigen's tuple reducers: a NaN is never
greater nor less, so it is skipped; every value NaN gives 0), where NumPy's argmax stops
at the first NaN.  Values recorded from TF 2.21 (tensorflow-cpu 2.21.0, tf.compat.v1)."""

import numpy as np
import pytest

import asyncflow as af

nan, inf = float("nan"), float("inf")

# (input, TF's argmax, TF's argmin)
_TF = [
    ([1.0, nan, 3.0], 2, 0),
    ([nan, 1.0, 3.0], 2, 1),
    ([nan, nan], 0, 0),
    ([3.0, nan, 1.0], 0, 2),
    ([1.0, 3.0, nan], 1, 0),
    ([-inf, nan], 0, 0),
    ([nan, -inf, 2.0], 2, 1),
    ([2.0, 2.0, nan, 2.0], 0, 0),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("values, argmax, argmin", _TF)
def test_arg_reductions_skip_nans_as_tf(values, argmax, argmin, dtype):
    with af.Graph().as_default(), af.device("/cpu:0"):
        x = af.constant(np.array(values, dtype))
        with af.Session() as sess:
            assert sess.run([af.argmax(x), af.argmin(x)]) == [argmax, argmin]


def test_arg_reductions_along_an_axis_skip_nans_as_tf():
    m = np.array([[1.0, nan], [nan, 2.0], [3.0, 0.0]], np.float32)
    with af.Graph().as_default(), af.device("/cpu:0"):
        x = af.constant(m)
        with af.Session() as sess:
            got = sess.run([af.argmax(x, 0), af.argmin(x, 0), af.argmax(x, 1), af.argmin(x, 1)])
    assert [g.tolist() for g in got] == [[2, 1], [0, 2], [0, 1, 0], [0, 1, 1]]


def test_arg_reductions_without_nans_are_numpys():
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    x[1, 3] = x[1, 5] = x[1].max() + 1  # (ties: the first)
    with af.Graph().as_default(), af.device("/cpu:0"):
        c = af.constant(x)
        with af.Session() as sess:
            got = sess.run([af.argmax(c, 1), af.argmin(c, 0), af.argmax(af.constant([3, 9, 9]))])
    assert got[0].tolist() == np.argmax(x, 1).tolist()
    assert got[1].tolist() == np.argmin(x, 0).tolist()
    assert got[2] == 1
