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
