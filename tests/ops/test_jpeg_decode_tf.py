"""JPEG decoding pixel for pixel as TF 2.21 (fixtures/jpeg_decode/decodes.json, recorded
by fixtures/record_jpeg_decode_tf.py from fixtures/jpeg_decode_cases.py): seven JPEGs
(gray, progressive, 4:2:0 and 4:4:4 chroma, qualities 35 to 95) through decode_jpeg
with every dct_method (TF's default is libjpeg's fast integer IDCT), channels 0/1/3,
ratio 1/2/4/8 and fancy_upscaling on and off, decode_image and decode_and_crop_jpeg:
532 decodes, each compared by shape and pixel digest."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import jpeg_decode_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "jpeg_decode" / "decodes.json").read_text())
pytest.importorskip("simplejpeg")  # (a dependency: CI has it)


def test_every_decode_has_tfs_pixels():
    data = {f.name: f.read_bytes() for f in cases.FILES}
    with ops.Graph().as_default():
        out = cases.build(af, data)
        with Session() as sess:
            got = sess.run(out)
    assert set(got) == set(TF)
    wrong = sorted(k for k in got if cases.digest(got[k]) != TF[k])
    assert not wrong, f"{len(wrong)} of {len(TF)} decodes differ from TF's: {wrong[:8]}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dct_method": "FOO"}, "dct_method must be one of {'', 'INTEGER_FAST', 'INTEGER_"),
        ({"ratio": 3}, "ratio must be 1, 2, 4, or 8, got 3"),
    ],
)
def test_bad_attrs_as_tf(kwargs, message):
    with ops.Graph().as_default():
        img = af.image.decode_jpeg(cases.FILES[2].read_bytes(), **kwargs)
        with Session() as sess, pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(img)
    assert message in info.value.message


def test_huge_declared_size_is_refused_before_allocating():
    """A JPEG whose frame header claims 30000 x 30000 pixels (2.7 GB decoded) is refused
    from the header, as TF refuses images of 2^29 bytes or more."""
    data = bytearray(cases.FILES[2].read_bytes())
    sof = data.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
    data[sof + 5 : sof + 9] = (30000).to_bytes(2, "big") * 2
    with ops.Graph().as_default():
        img = af.image.decode_jpeg(bytes(data))
        with Session() as sess, pytest.raises(errors.InvalidArgumentError, match="too large"):
            sess.run(img)
