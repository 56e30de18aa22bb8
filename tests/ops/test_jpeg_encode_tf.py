"""encode_jpeg writes TF 2.21's bytes (fixtures/jpeg_encode_tf.json, recorded by
fixtures/record_jpeg_encode_tf.py from fixtures/jpeg_encode_cases.py): RGB and gray
images at qualities 10-100, without chroma downsampling, progressive, optimized,
densities in inches and centimetres, XMP metadata, and the format attr; then TF's
errors."""

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
import jpeg_encode_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "jpeg_encode_tf.json").read_text())


@pytest.fixture(scope="module")
def encoded():
    with ops.Graph().as_default():
        out = cases.build(af)
        got = {}
        with Session() as sess:
            for key, t in out.items():
                try:
                    got[key] = cases.digest(sess.run(t))
                except errors.OpError as exc:
                    got[key] = f"error: {type(exc).__name__}"
        return got


@pytest.mark.parametrize("key", sorted(TF))
def test_bytes_as_tf(encoded, key):
    assert encoded[key] == TF[key]


@pytest.mark.parametrize(
    ("image", "kwargs", "message"),
    [
        (np.zeros((4, 5, 1), np.uint8), {"format": "rgb"},
         "format rgb expects 3 channels, got [4,5,1]"),
        (np.zeros((4, 5, 3), np.uint8), {"format": "grayscale"},
         "format grayscale expects 1 channels, got [4,5,3]"),
        (np.zeros((4, 5, 2), np.uint8), {}, "image must have 1 or 3 channels, got [4,5,2]"),
        (np.zeros((4, 5, 3), np.uint8), {"quality": 101}, "quality must be in [0,100], got 101"),
    ],
)  # fmt: skip
def test_errors_as_tf(image, kwargs, message):
    with ops.Graph().as_default():
        t = af.image.encode_jpeg(image, **kwargs)
        with Session() as sess, pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(t)
    assert info.value.message.split("\n\t [[")[0] == message
