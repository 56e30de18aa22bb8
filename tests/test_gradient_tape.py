"""`GradientTape` in graph mode (tf.compat.v1.GradientTape): the gradients of
`gradients()` for recorded sources, None for sources the tape never saw, one set of
gradients per non-persistent tape (TF raises RuntimeError on the second)."""

import numpy as np
import pytest

import asyncflow as af


def _run(fetches):
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        return sess.run(fetches)


def test_watched_tensor_and_variable_gradients_match_the_analytic_ones():
    with af.Graph().as_default():
        x = af.constant([1.0, 2.0, 3.0])
        w = af.Variable([0.5, -1.0, 2.0])
        with af.GradientTape() as tape:
            tape.watch(x)
            y = af.reduce_sum(x * x * w)
        gx, gw = tape.gradient(y, [x, w])
        gx, gw = _run([gx, gw])
    np.testing.assert_allclose(gx, 2 * np.array([1.0, 2.0, 3.0]) * [0.5, -1.0, 2.0])
    np.testing.assert_allclose(gw, np.array([1.0, 4.0, 9.0]))


def test_unwatched_constant_gets_none_or_zeros():
    with af.Graph().as_default():
        x = af.constant(3.0)
        with af.GradientTape(persistent=True) as tape:
            y = x * x
        assert tape.gradient(y, x) is None
        zero = tape.gradient(y, x, unconnected_gradients=af.UnconnectedGradients.ZERO)
        assert _run(zero) == 0.0


def test_intermediate_created_under_the_tape_is_a_source():
    with af.Graph().as_default():
        x = af.constant(2.0)
        with af.GradientTape() as tape:
            tape.watch(x)
            h = x * 3.0
            y = h * h
        assert _run(tape.gradient(y, {"h": h}))["h"] == pytest.approx(12.0)


def test_non_persistent_tape_gives_one_set_of_gradients():
    with af.Graph().as_default():
        x = af.constant(1.0)
        with af.GradientTape() as tape:
            tape.watch(x)
            y = x * x
        tape.gradient(y, x)
        with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
            tape.gradient(y, x)


def test_output_gradients_weight_the_target():
    with af.Graph().as_default():
        x = af.constant([1.0, 2.0])
        with af.GradientTape() as tape:
            tape.watch(x)
            y = x * x
        g = tape.gradient(y, x, output_gradients=af.constant([10.0, 100.0]))
        np.testing.assert_allclose(_run(g), [20.0, 400.0])
