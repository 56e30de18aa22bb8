"""tf.extract_image_patches (op ExtractImagePatches) and its gradient against TF 2.21's
recorded results (tests/fixtures/extract_image_patches_tf.json, from
tests/fixtures/record_extract_image_patches_tf.py), and the gradient against finite
differences."""

import json
import os

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.test_util import compute_gradient

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "extract_image_patches_tf.json")
with open(FIXTURE) as _f:
    CASES = json.load(_f)["cases"]


def _input(c):
    shape = c["shape"]
    return (np.arange(np.prod(shape)).reshape(shape) % 7 - 3).astype(c["dtype"]) * 0.5


@pytest.mark.parametrize("c", [pytest.param(c, id=c["name"]) for c in CASES])
def test_patches_and_gradient_match_tf(c):
    x = _input(c)
    with tf.Graph().as_default():
        xt = tf.constant(x)
        p = tf.extract_image_patches(xt, c["ksizes"], c["strides"], c["rates"], c["padding"])
        fetches = [p]
        if "grad" in c:
            fetches.append(tf.gradients(tf.reduce_sum(p * p), xt)[0])
        with tf.Session() as sess:
            if "error" in c:
                with pytest.raises(errors.OpError) as info:
                    sess.run(p)
                assert type(info.value).__name__ == c["error"]
                assert c["message"] in str(info.value)
                return
            got = sess.run(fetches)
        assert p.shape.as_list() == c["static_shape"]
    np.testing.assert_array_equal(got[0], np.array(c["patches"], x.dtype).reshape(got[0].shape))
    if "grad" in c:
        np.testing.assert_allclose(got[1], c["grad"], rtol=1e-6)


def test_gradient_matches_finite_differences_with_a_batch_fed():
    rng = np.random.RandomState(0)
    x0 = rng.randn(2, 5, 4, 2)
    w = rng.randn(2, 3, 4, 12)  # the patches' shape: weights make every element count
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, 5, 4, 2])  # the batch known only when fed
        p = tf.extract_image_patches(x, [1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 1, 1], "SAME")
        loss = tf.reduce_sum(p * w)
        got, num = compute_gradient(x, x0.shape, loss, [], x_init_value=x0, delta=1e-6)
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-8)


def test_image_namespace_and_argument_checks():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    with tf.Graph().as_default():
        a = tf.image.extract_patches(x, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        b = tf.image.extract_image_patches(x, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        with tf.Session() as sess:
            got_a, got_b = sess.run([a, b])
        with pytest.raises(ValueError, match="padding"):
            tf.extract_image_patches(x, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "FULL")
    np.testing.assert_array_equal(got_a, got_b)
    np.testing.assert_array_equal(got_a[0, 0, 0], [0, 1, 4, 5])
