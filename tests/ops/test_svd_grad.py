"""The Svd gradient through u and v (as well as s) against finite differences of
functions that do not depend on the singular vectors' signs (TF 2.21 gives the same
values: checked when this was written)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error


@pytest.mark.parametrize(
    "shape,full",
    [
        ((3, 3), False),
        ((4, 3), False),
        ((3, 5), False),
        ((2, 4, 3), False),
        ((4, 3), True),
        ((3, 4), True),
    ],  # fmt: skip
)
def test_svd_gradient_through_u_and_v(shape, full):
    a0 = np.random.RandomState(sum(shape)).randn(*shape)
    r = min(shape[-2:])
    with ops.Graph().as_default():
        a = af.constant(a0)
        s, u, v = af.linalg.svd(a, full_matrices=full)
        cu, cv = u.shape.as_list()[-1], v.shape.as_list()[-1]
        y = (
            af.reduce_sum(s * 1.3)
            + af.reduce_sum(u * u * np.arange(cu))
            + af.reduce_sum(v * v * np.arange(cv)[::-1])
            + af.reduce_sum(
                af.matmul(u[..., :, :r] * 2.0, v[..., :, :r], adjoint_b=True) ** 2
                * np.linspace(0.1, 1, shape[-1])
            )
        )
        err = compute_gradient_error(a, list(shape), y, [], x_init_value=a0, delta=1e-6)
        assert err < 1e-5


def test_svd_gradient_of_u_alone_and_its_limits():
    a0 = np.random.RandomState(1).randn(4, 4)
    with ops.Graph().as_default():
        a = af.constant(a0)
        _, u, _ = af.linalg.svd(a)
        y = u * u
        assert compute_gradient_error(a, [4, 4], y, [4, 4], x_init_value=a0, delta=1e-6) < 1e-5
        _, u, _ = af.linalg.svd(af.constant(np.ones((5, 2))), full_matrices=True)
        with pytest.raises(NotImplementedError, match="full_matrices"):
            af.gradients(af.reduce_sum(u * u), [u.op.inputs[0]])


def test_complex_svd_singular_values_are_real_as_tf():
    """TF's tf.linalg.svd takes the real part of the op's complex s (its dtype is the
    input's real dtype); tf.linalg.pinv refuses complex input as TF does."""
    import asyncflow as af

    rng = np.random.default_rng(4)
    x = (rng.random((2, 4, 3)) + 1j * rng.random((2, 4, 3))).astype(np.complex64)
    with af.Graph().as_default():
        s = af.linalg.svd(x, compute_uv=False)
        s2, u, v = af.linalg.svd(x)
        assert s.dtype == af.float32 and s2.dtype == af.float32 and u.dtype == af.complex64
        with af.Session() as sess:
            got = sess.run(s)
        np.testing.assert_allclose(got, np.linalg.svd(x, compute_uv=False), rtol=1e-5)
        with pytest.raises(TypeError, match="must have `float`-like `dtype` \\(saw complex64\\)"):
            af.linalg.pinv(x)
