"""TF's SampleDistortedBoundingBox(V2) (`tf.image.sample_distorted_bounding_box`) against
TF 2.21's recorded crops (tests/fixtures/sample_box/, recorded by
record_sample_box_tf.py from sample_box_cases.py): with fixed seeds each run of each op
gives TF's crop exactly (TF's Philox stream, read as TF's SimplePhilox reads it), built
here and from TF's own GraphDef; the crop's documented constraints for any seed; TF's
errors.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import sample_box_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "sample_box" / "values.json").read_text())


def _check(runs):
    for k, rec in TABLE.items():
        for i, want in enumerate(rec["runs"]):
            got = np.asarray(runs[i][k])
            assert got.dtype == np.dtype(rec["dtype"]), k
            assert got.tolist() == want, (k, i)


def test_built_here_matches_tf_run_after_run():
    with tf.Graph().as_default():
        out = cases.build(tf)
        assert out["default_begin"].op.type == "SampleDistortedBoundingBoxV2"
        with tf.Session() as sess:
            runs = [sess.run(out) for _ in range(cases.RUNS)]
    _check(runs)


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "sample_box" / "graph.pb").read_bytes())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        out = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in TABLE.items()}
        with tf.Session() as sess:
            runs = [sess.run(out) for _ in range(cases.RUNS)]
    _check(runs)


def test_constraints_hold_for_unseeded_draws():
    h, w = 120, 90
    boxes = np.array([[[0.2, 0.3, 0.6, 0.7]]], np.float32)
    area_range, ratio_range, covered = (0.2, 0.8), (0.6, 1.6), 0.3
    with tf.Graph().as_default(), tf.Session() as sess:
        begin, size, bbox = tf.image.sample_distorted_bounding_box(
            [h, w, 3], boxes, min_object_covered=covered, aspect_ratio_range=ratio_range,
            area_range=area_range,
        )  # fmt: skip
        for _ in range(30):
            (y, x, z), (ch, cw, c), bb = sess.run([begin, size, bbox])
            assert z == 0 and c == -1 and 0 <= y and y + ch <= h and 0 <= x and x + cw <= w
            if (ch, cw) == (h, w):
                continue  # (no attempt succeeded: the whole image, as TF)
            assert area_range[0] * h * w - cw <= ch * cw <= area_range[1] * h * w + cw
            # (the box in pixels as TF's kernel makes it: float32 products, truncated;
            # in doubles 0.7 * 90 is 62.99999..., one column short, and an unseeded draw
            # at the edge failed now and then)
            by0, bx0, by1, bx1 = (
                int(np.float32(f) * np.float32(n))
                for f, n in ((0.2, h), (0.3, w), (0.6, h), (0.7, w))
            )
            inter = max(0, min(y + ch, by1) - max(y, by0)) * max(0, min(x + cw, bx1) - max(x, bx0))
            assert inter / ((by1 - by0) * (bx1 - bx0)) >= covered - 1e-6
            np.testing.assert_allclose(bb[0, 0], [y / h, x / w, (y + ch) / h, (x + cw) / w],
                                       rtol=1e-6)  # fmt: skip


def test_errors():
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):
            tf.image.sample_distorted_bounding_box([4, 4], cases.BOXES)
        out = tf.image.sample_distorted_bounding_box([40, 40, 3], np.zeros((1, 0, 4), np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="No bounding boxes provided"):
            sess.run(out)
        bad = tf.image.sample_distorted_bounding_box([40, 40, 3], [[[0.1, 0.1, 1.5, 0.5]]])
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"must be in \[0.0, 1.0\]"):
            sess.run(bad)
