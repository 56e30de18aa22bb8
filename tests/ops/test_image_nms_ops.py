"""tf.image's non-max suppression (NonMaxSuppression V1-V5, WithOverlaps, Combined),
draw_bounding_boxes (V1, V2), extract_glimpse (V1, V2) and ssim / ssim_multiscale against
TF 2.21's recorded results (tests/fixtures/image_nms/, recorded by record_image_nms_tf.py
from image_nms_cases.py):

- the graph built here gives TF's values: the selections, drawn pixels and glimpses
  exactly; soft-NMS scores and SSIM to float32 rounding (exp and convolution sums);
- TF's own GraphDef (with SSIM's gradient ops) imports and runs to the same values;
- TF's errors (class and message) for bad inputs, at build and at run time;
- the greedy selection against a brute-force NumPy reference, SSIM's gradient by
  finite differences, and glimpse noise within the image's range.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as ops
from asyncflow import image_ssim
from asyncflow.ops import image_draw_ops
from asyncflow.registry import get_op_def

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import image_nms_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "image_nms" / "values.json").read_text())
ERRORS = json.loads((HERE / "image_nms" / "errors.json").read_text())


def raw(op_type, **kwargs):
    """TF's tf.raw_ops.<op_type>(**kwargs) here: inputs by name, the rest attrs."""
    op_def = get_op_def(op_type)
    names = [a.name for a in op_def.inputs]
    inputs = [kwargs.pop(n) for n in names]
    return ops.apply_op(op_type, inputs, kwargs).outputs


# Outputs TF computes with exp or long float sums: compared to float32 rounding.
_APPROX = ("soft_", "v5_pad_", "ssim")


def _check(key, got, rec):
    got = np.asarray(got)
    assert got.dtype == np.dtype(rec["dtype"]), key
    want = np.asarray(rec["value"], dtype=got.dtype)
    assert got.shape == want.shape, key
    if key.startswith(_APPROX) and got.dtype.kind == "f":
        tol = 2e-3 if got.dtype == np.float16 else 2e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=key)
    else:
        np.testing.assert_array_equal(got, want, err_msg=key)


def test_built_here_matches_tf():
    with tf.Graph().as_default() as g:
        out = cases.build(tf, raw)
        with tf.Session() as sess:
            got = sess.run(out, cases.feeds(g))
    assert out["nms"].op.type == "NonMaxSuppressionV3"
    assert out["soft_0.5_0.2_indices"].op.type == "NonMaxSuppressionV5"
    assert out["overlaps"].op.type == "NonMaxSuppressionWithOverlaps"
    assert out["combined_q1_False_False_boxes"].op.type == "CombinedNonMaxSuppression"
    assert out["draw"].op.type == "DrawBoundingBoxes"
    assert out["draw_colors"].op.type == "DrawBoundingBoxesV2"
    assert out["glimpse_True_True_5x6"].op.type == "ExtractGlimpse"
    assert set(got) == set(TABLE)
    for k, rec in TABLE.items():
        _check(k, got[k], rec)


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "image_nms" / "graph.pb").read_bytes())
    types = {n.op for n in gd.node}
    assert {
        "NonMaxSuppressionV4",
        "ExtractGlimpseV2",
        "DepthwiseConv2dNativeBackpropInput",
    } <= types
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetch = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in TABLE.items()}
        with tf.Session() as sess:
            got = sess.run(fetch, cases.feeds(g))
    for k, rec in TABLE.items():
        _check(k, got[k], rec)


# Errors two ops race to raise: SSIM's size Assert and its convolution's own check.
_RACING = {"ssim_small_image": ("assertion failed", "Computed output size would be negative")}


@pytest.mark.parametrize("name", sorted(cases.ERRORS))
def test_errors_match_tf(name):
    want = ERRORS[name]
    with tf.Graph().as_default():
        if want["when"] == "build":
            with pytest.raises(ValueError) as info:
                cases.ERRORS[name](tf, raw)
            assert want["message"].strip() in str(info.value)
            return
        t = cases.ERRORS[name](tf, raw)
        with tf.Session() as sess:
            with pytest.raises(getattr(tf.errors, want["error"])) as info:
                sess.run(t)
    if name in _RACING:  # (either check may fail first, in TF as here)
        assert any(m in str(info.value) for m in _RACING[name])
        return
    # (TF adds the shape function's wording in parentheses to some; the cause is first)
    assert want["message"].split(" (")[0] in str(info.value)


def _iou(a, b):
    a = np.concatenate([np.minimum(a[:2], a[2:]), np.maximum(a[:2], a[2:])])
    b = np.concatenate([np.minimum(b[:2], b[2:]), np.maximum(b[:2], b[2:])])
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    if area(a) <= 0 or area(b) <= 0:
        return 0.0
    h = max(min(a[2], b[2]) - max(a[0], b[0]), 0)
    w = max(min(a[3], b[3]) - max(a[1], b[1]), 0)
    return h * w / (area(a) + area(b) - h * w)


def _reference_nms(boxes, scores, k, iou, score_threshold):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    keep = []
    for i in order:
        if scores[i] <= score_threshold or len(keep) == k:
            break
        if all(_iou(boxes[i], boxes[j]) <= iou for j in keep):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nms_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    boxes = rng.uniform(0, 1, (80, 4)).astype(np.float64)
    scores = rng.permutation(80) / 80.0
    with tf.Graph().as_default(), tf.Session() as sess:
        got = sess.run(
            tf.image.non_max_suppression(boxes.astype(np.float32), scores.astype(np.float32),
                                         30, 0.35, 0.1)
        )  # fmt: skip
    assert got.tolist() == _reference_nms(boxes, scores, 30, 0.35, 0.1)


def test_padded_matches_v4_and_its_static_shape():
    with tf.Graph().as_default(), tf.Session() as sess:
        idx, n = tf.image.non_max_suppression_padded(
            cases.BOXES, cases.SCORES, 45, 0.4, 0.1, pad_to_max_output_size=True
        )
        assert idx.shape.as_list() == [45] and idx.op.type == "NonMaxSuppressionV4"
        i, v = sess.run([idx, n])
    np.testing.assert_array_equal(i, TABLE["v4_pad_True"]["value"])
    assert v == TABLE["v4_pad_True_valid"]["value"]
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="must be True for batched input"):
            tf.image.non_max_suppression_padded(
                np.zeros((2, 3, 4), np.float32), np.ones((2, 3)), 2
            )


def _central_differences(x, eps):
    """Every +eps and every -eps perturbation of one element of `x`, stacked on the batch
    axis: one step evaluates them all (SSIM is computed per image)."""
    n = x.size
    d = np.zeros((n,) + x.shape)
    d.reshape(n, n)[np.arange(n), np.arange(n)] = eps
    return np.concatenate([x + d, x - d]).reshape((-1,) + x.shape[1:])


@pytest.mark.parametrize("multiscale", [False, True])
def test_ssim_gradient_by_finite_differences(multiscale):
    # (in float64: tf.image.ssim converts to float32 first, too coarse for differences)
    x0 = cases.SMALL[:, :12, :12, :1].astype(np.float64)
    other0 = x0 * 0.6 + 0.2 + 0.1 * x0[:, ::-1]
    eps, n = 1e-4, x0.size
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, *x0.shape[1:]])
        # (positively correlated, so that no scale's relu(cs) is 0: pow's gradient at 0)
        other = tf.tile(tf.constant(other0), [tf.shape(x)[0] // x0.shape[0], 1, 1, 1])
        keep = lambda v, dtype: v  # noqa: E731
        if multiscale:
            y = image_ssim.ssim_multiscale(keep, x, other, 1.0, (0.4, 0.6), filter_size=3)
        else:
            y = image_ssim.ssim(keep, x, other, 1.0, filter_size=3)
        (g,) = tf.gradients(y, [x])
        with tf.Session() as sess:
            got = sess.run(g, {x: x0})
            f = sess.run(y, {x: _central_differences(x0, eps)})
    f = f.reshape(2, n, x0.shape[0]).sum(axis=2)  # sum(y) at x0 + d and at x0 - d
    num = ((f[0] - f[1]) / (2 * eps)).reshape(x0.shape)
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("noise", ["uniform", "gaussian"])
def test_glimpse_noise_within_the_image_range(noise):
    img = cases.GLIMPSE_IMAGES
    with tf.Graph().as_default(), tf.Session() as sess:
        out = sess.run(image_draw_ops.extract_glimpse_v2(img, [9, 12], cases.GLIMPSE_OUTSIDE,
                                                         noise=noise))  # fmt: skip
    zero = np.asarray(TABLE["glimpse_v2_outside_zero"]["value"], np.float32)
    copied = zero != 0  # (the part inside the image is the image's, whatever the noise)
    np.testing.assert_array_equal(out[copied], zero[copied])
    for b in range(img.shape[0]):
        lo, hi = img[b].min(), img[b].max()
        assert lo <= out[b].min() and out[b].max() <= hi


def test_no_gradient_where_tf_has_none():
    # TF 2.21: V1 draw / glimpse are NotDifferentiable (no gradient, no error); the V2
    # ops and NMS V3-V5 / Combined have no gradient registered (LookupError).
    with tf.Graph().as_default():
        images = tf.constant(cases.IMAGES)
        assert tf.gradients(tf.image.draw_bounding_boxes(images, cases.DRAW_BOXES), images) == [
            None
        ]
        drawn = tf.image.draw_bounding_boxes(images, cases.DRAW_BOXES, colors=cases.COLORS)
        with pytest.raises(LookupError, match="No gradient defined"):
            tf.gradients(drawn, images)
        boxes = tf.constant(cases.BOXES)
        _, scores = tf.image.non_max_suppression_with_scores(boxes, cases.SCORES, 5)
        with pytest.raises(LookupError, match="No gradient defined"):
            tf.gradients(scores, boxes)


def test_padded_batches_match_tf():
    # (TF 2.21's tiled composite, recorded for canonical boxes; V4 per image here)
    want = json.loads((HERE / "image_nms" / "padded.json").read_text())
    with tf.Graph().as_default(), tf.Session() as sess:
        out = cases.build_padded(tf)
        assert out["padded_batch_a"].shape.as_list() == [2, 12]
        got = sess.run(out)
    assert {k: np.asarray(v).tolist() for k, v in got.items()} == want
