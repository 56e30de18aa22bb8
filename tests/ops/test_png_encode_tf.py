"""encode_png writes TF 2.21's bytes (fixtures/png_encode_tf.json, recorded by
fixtures/record_png_encode_tf.py from fixtures/png_encode_cases.py): 1-4 channels,
uint8 and uint16, every filter libpng picks, several IDAT chunks, compression levels
-1 to 9, batches; and what we decode back is the image."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import png_encode_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "png_encode_tf.json").read_text())


@pytest.fixture(scope="module")
def encoded():
    with ops.Graph().as_default():
        out = cases.build(af)
        with Session() as sess:
            return sess.run(out)


@pytest.mark.parametrize("key", sorted(TF))
def test_bytes_as_tf(encoded, key):
    assert cases.digest(encoded[key]) == TF[key]


def test_decodes_back(encoded):
    imgs = cases.images()
    with ops.Graph().as_default(), Session() as sess:
        for name in ("noise_u8_c2", "smooth_u16_c4", "big"):
            dtype = af.uint16 if imgs[name].dtype == np.uint16 else af.uint8
            got = sess.run(af.image.decode_png(encoded[name], dtype=dtype))
            np.testing.assert_array_equal(got, imgs[name])


def test_batch_shape_and_errors():
    with ops.Graph().as_default():
        t = af.image.encode_png(af.zeros([2, 3, 4, 5, 1], af.uint8))
        assert t.shape.as_list() == [2, 3]
        with pytest.raises(ValueError, match="^Shape must be at least rank 3 but is rank 2 for "):
            af.image.encode_png(af.zeros([3, 4], af.uint8))
        with Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="1, 2, 3, or 4 channels"):
                sess.run(af.image.encode_png(af.zeros([2, 3, 5], af.uint8)))
            with pytest.raises(errors.InvalidArgumentError, match="nonzero height and width"):
                sess.run(af.image.encode_png(af.zeros([0, 3, 3], af.uint8)))
