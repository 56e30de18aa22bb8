"""tf.image.generate_bounding_box_proposals.  TF 2.21 has this op's kernel for GPUs only
(tensorflow-cpu cannot run it), so the results are checked against a scalar Python
reference of the GPU kernel's steps written here (decode, clip, min-size filter, greedy
NMS by score), and the shapes and errors against TF's op definition."""

import math

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

pytestmark = pytest.mark.timeout(120)


def reference(scores, deltas, info, anchors, thr, pre_n, min_size, post_n):
    """One box at a time, in float64 (the kernel's float32 agrees to ~1e-5)."""
    n, hh, ww, a = scores.shape
    rois = np.zeros((n, post_n, 4))
    probs = np.zeros((n, post_n))
    flat_anchors = anchors.reshape(-1, 4)
    clip = math.log(1000.0 / 16.0)
    for i in range(n):
        s = scores[i].reshape(-1)
        order = sorted(range(len(s)), key=lambda k: -s[k])[: min(len(s), pre_n)]
        cands = []
        for k in order:
            y1, x1, y2, x2 = flat_anchors[k]
            dy, dx, dh, dw = deltas[i].reshape(-1, 4)[k]
            dw, dh = min(dw, clip), min(dh, clip)
            w, h = x2 - x1, y2 - y1
            cx, cy = x1 + 0.5 * w + w * dx, y1 + 0.5 * h + h * dy
            pw, ph = w * math.exp(dw), h * math.exp(dh)
            bx1, bx2 = (min(max(v, 0.0), info[i][1]) for v in (cx - 0.5 * pw, cx + 0.5 * pw))
            by1, by2 = (min(max(v, 0.0), info[i][0]) for v in (cy - 0.5 * ph, cy + 0.5 * ph))
            if min(bx2 - bx1, by2 - by1) >= min_size * info[i][2]:
                cands.append(((by1, bx1, by2, bx2), s[k]))
        kept = []
        for box, score in cands:
            if len(kept) == post_n:
                break
            ok = True
            for other, _ in kept:
                area_a = (other[2] - other[0]) * (other[3] - other[1])
                area_b = (box[2] - box[0]) * (box[3] - box[1])
                if area_a == 0 or area_b == 0:
                    continue
                ih = max(min(other[2], box[2]) - max(other[0], box[0]), 0)
                iw = max(min(other[3], box[3]) - max(other[1], box[1]), 0)
                inter = ih * iw
                if inter > (area_a + area_b - inter) * thr:
                    ok = False
                    break
            if ok:
                kept.append((box, score))
        for j, (box, score) in enumerate(kept):
            rois[i, j], probs[i, j] = box, score
    return rois, probs


def _inputs(seed, n=2, hh=4, ww=5, a=3):
    rng = np.random.default_rng(seed)
    scores = rng.random((n, hh, ww, a)).astype(np.float32)
    deltas = (rng.standard_normal((n, hh, ww, 4 * a)) * 0.3).astype(np.float32)
    info = np.array([[64, 80, 1.0, 0, 0], [50, 60, 0.5, 0, 0]][:n], np.float32)
    ys, xs = np.meshgrid(np.arange(hh) * 16.0, np.arange(ww) * 16.0, indexing="ij")
    sizes = [(16, 16), (24, 12), (12, 28)][:a]
    anchors = np.zeros((hh, ww, 4 * a), np.float32)
    for j, (bh, bw) in enumerate(sizes):
        anchors[..., 4 * j : 4 * j + 4] = np.stack([ys, xs, ys + bh, xs + bw], -1)
    return scores, deltas, info, anchors


@pytest.mark.parametrize(
    "seed,thr,pre_n,min_size,post_n",
    [(0, 0.7, 6000, 4.0, 300), (1, 0.3, 20, 8.0, 10), (2, 0.0, 50, 0.0, 5), (3, 1.0, 7, 2.0, 40)],
)
def test_matches_reference(sess, seed, thr, pre_n, min_size, post_n):
    scores, deltas, info, anchors = _inputs(seed)
    out = af.image.generate_bounding_box_proposals(
        scores, deltas, info, anchors, thr, pre_n, min_size, post_n
    )
    assert out.rois.shape.as_list() == [2, post_n, 4]
    assert out.roi_probabilities.shape.as_list() == [2, post_n]
    rois, probs = sess.run(out)
    want_rois, want_probs = reference(scores, deltas, info, anchors, thr, pre_n, min_size, post_n)
    np.testing.assert_allclose(rois, want_rois, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(probs, want_probs.astype(np.float32))


def test_identical_boxes_suppressed_and_ties_in_order(sess):
    """Two anchors giving the same box: the higher score stays; equal scores keep the
    earlier (h, w, a) position."""
    scores = np.array([[[[0.5, 0.9, 0.9]]]], np.float32)
    deltas = np.zeros((1, 1, 1, 12), np.float32)
    anchors = np.array([[[0, 0, 10, 10, 0, 0, 10, 10, 20, 20, 30, 30]]], np.float32)
    info = np.array([[40, 40, 1, 0, 0]], np.float32)
    rois, probs = sess.run(
        af.image.generate_bounding_box_proposals(scores, deltas, info, anchors, 0.5, 10, 1, 4)
    )
    np.testing.assert_array_equal(probs[0], np.float32([0.9, 0.9, 0, 0]))
    np.testing.assert_array_equal(rois[0, :2], [[0, 0, 10, 10], [20, 20, 30, 30]])


@pytest.mark.parametrize(
    "kwargs,err,msg",
    [
        (
            {"nms_threshold": 1.5},
            errors.InvalidArgumentError,
            "nms_threshold should be between 0 and 1",
        ),
        (
            {"pre_nms_topn": 0},
            errors.InvalidArgumentError,
            "pre_nms_topn should be greater than 0",
        ),
        ({"post_nms_topn": 0}, errors.InvalidArgumentError, "post_nms_topn can't be 0 or less"),
    ],
)
def test_errors(sess, kwargs, err, msg):
    scores, deltas, info, anchors = _inputs(0)
    out = af.image.generate_bounding_box_proposals(scores, deltas, info, anchors, **kwargs)
    with pytest.raises(err, match=msg):
        sess.run(out)


def test_anchor_width(sess):
    scores, deltas, info, anchors = _inputs(0)
    out = af.image.generate_bounding_box_proposals(scores, deltas, info, anchors[..., :-1])
    with pytest.raises(errors.OutOfRangeError, match="Box dimensions need to be 4"):
        sess.run(out)
