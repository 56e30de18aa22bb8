"""Einsum gradients for operands with a repeated subscript (a diagonal) against
finite differences and numpy's einsum."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ii->i", [(3, 3)]),
        ("ii", [(4, 4)]),
        ("iij->j", [(3, 3, 2)]),
        ("iik,kj->ij", [(3, 3, 2), (2, 4)]),
        ("ijij->", [(2, 3, 2, 3)]),
        ("iiab->b", [(2, 2, 3, 4)]),
        ("ij,kkj->ik", [(2, 3), (4, 4, 3)]),
    ],
)
def test_repeated_subscript_gradients(eq, shapes):
    rng = np.random.RandomState(len(eq))
    values = [rng.randn(*s) for s in shapes]
    with ops.Graph().as_default():
        xs = [af.constant(v) for v in values]
        y = af.einsum(eq, *xs)
        with af.Session() as sess:
            np.testing.assert_allclose(sess.run(y), np.einsum(eq, *values), rtol=1e-12)
        out_shape = y.shape.as_list()
        for x, v, s in zip(xs, values, shapes):
            err = compute_gradient_error(x, list(s), y, out_shape, x_init_value=v)
            assert err < 1e-8
