"""tf.train.sdca_fprint (op SdcaFprint) against TF 2.21's recorded fingerprints
(tests/fixtures/sdca_cluster_tf.json, recorded by record_sdca_cluster_tf.py) for strings
of every length 0..300 and longer ones: each row is the (low, high) 64-bit halves of
FarmHash's Fingerprint128, as int64."""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
from record_sdca_cluster_tf import strings  # noqa: E402 - the recorder's inputs (no TF import)

REC = json.loads((HERE / "sdca_cluster_tf.json").read_text())


def test_fprint_matches_tf_for_every_length():
    ss = strings()
    with af.Graph().as_default():
        x = af.placeholder(af.string, [None])
        y = af.train.sdca_fprint(x)
        assert y.op.type == "SdcaFprint" and y.shape.as_list() == [None, 2]
        with af.Session() as s:
            got = s.run(y, {x: np.array(ss, dtype=object)})
    assert got.dtype == np.int64 and got.shape == (len(ss), 2)
    np.testing.assert_array_equal(got, np.array(REC["fprint_rows"], np.int64))


def test_fprint_static_shape_and_rank_error():
    with af.Graph().as_default():
        assert af.train.sdca_fprint(af.constant([b"a", b"b", b"c"])).shape.as_list() == [3, 2]
        assert REC["fprint_rank2"].startswith("ValueError: Shape must be rank 1 but is rank 2")
        with pytest.raises(ValueError, match="rank 1"):
            af.train.sdca_fprint(af.constant([[b"a"]]))


def test_fprint_empty_and_not_differentiable():
    with af.Graph().as_default():
        y = af.train.sdca_fprint(af.constant(np.array([], dtype=object), dtype=af.string))
        with af.Session() as s:
            assert s.run(y).shape == (0, 2)
