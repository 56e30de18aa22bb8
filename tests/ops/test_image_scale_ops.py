"""ScaleAndTranslate beyond the values, gradients and errors recorded from TF 2.21 in
test_sem18_tf.py (tests/fixtures/sem18_cases.py, scale_and_translate_*): static shape,
and the identity at scale 1 for the interpolating kernels."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.ops.image_scale_ops import scale_and_translate


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


@pytest.mark.parametrize("kernel", ["lanczos1", "lanczos3", "lanczos5", "triangle", "keyscubic"])
def test_scale_one_is_identity(kernel):
    # Interpolating kernels are 1 at 0 and 0 at every other integer.
    img = np.random.RandomState(5).rand(1, 4, 5, 2).astype(np.float32)
    y = scale_and_translate(img, [4, 5], [1.0, 1.0], [0.0, 0.0], kernel_type=kernel)
    assert y.shape.as_list() == [1, 4, 5, 2] and y.dtype == af.float32
    with af.Session() as s:
        np.testing.assert_allclose(s.run(y), img, rtol=1e-6, atol=1e-6)


def test_unknown_size_static_shape():
    size = af.placeholder(af.int32, [2])
    y = scale_and_translate(np.zeros((2, 3, 3, 1), np.uint8), size, [1.0, 1.0], [0.0, 0.0])
    assert y.shape.as_list() == [2, None, None, 1]
