"""RaggedTensorToTensor, DenseBincount and StaticRegexReplace (ops TF 2.x writes) against
TF 2.21 (tests/fixtures/record_tf2_graph_ops_tf.py): values, errors, and a TF 2.x
SavedModel whose signature cleans, splits, looks up and pads text with them."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from fetched import flat as _plain  # noqa: E402
from raw_ops import RawOps  # noqa: E402
from tf2_graph_ops_cases import CASES, bad_splits  # noqa: E402

REF = json.loads((FIXTURES / "tf2_graph_ops_tf.json").read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_tf(case):
    want = REF[case]
    with tf.Graph().as_default(), tf.Session() as sess:
        t = CASES[case](tf, RawOps())
        if "error" in want:
            with pytest.raises(getattr(tf.errors, want["error"]), match=want["message"][:40]):
                sess.run(t)
            return
        got = sess.run(t)
        assert t.shape.is_compatible_with(got.shape)
    assert _plain(got) == want["value"]


def test_row_splits_past_the_values_are_invalid():
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="must equal the number"):
            sess.run(bad_splits(tf, RawOps()))


def test_text_saved_model_runs_to_tf_outputs():
    want = REF["text_saved_model"]
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        meta = tf.saved_model.loader.load(
            sess, ["serve"], str(FIXTURES / "tf2_saved_model" / "text")
        )
        sig = meta.signature_def["serving_default"]
        (arg,) = sig.inputs.values()
        got = sess.run({k: v.name for k, v in sig.outputs.items()}, {arg.name: want["x"]})
    assert got["ids"].tolist() == want["ids"]
    assert got["len"].tolist() == want["len"]
