"""tf.image.generate_bounding_box_proposals (GenerateBoundingBoxProposals): region
proposals from anchor scores and box deltas, as TF 2.21's kernel computes them.

TF registers this op for GPUs only (tensorflow-cpu has no kernel); this CPU kernel
follows the GPU kernel's steps, per image:
1. sort the H*W*A scores descending (stably: ties keep their (h, w, a) order) and keep
   the first min(H*W*A, pre_nms_topn);
2. decode each kept box from its anchor ([y1, x1, y2, x2], anchors laid out as
   [H, W, 4*A], shared by the images) and deltas [dy, dx, dh, dw] (dh, dw capped at
   log(1000/16)): centre + size * d, size * exp(d); clip to [0, width] x [0, height];
3. drop boxes whose shorter side is below min_size * image_info[2] (order kept);
4. greedy NMS in score order: a box is suppressed by a kept box when
   intersection > (area_a + area_b - intersection) * nms_threshold (boxes of zero
   area suppress nothing), stopping at post_nms_topn boxes;
5. write [y1, x1, y2, x2] and the score of each kept box, zeros after them.
All arithmetic is float32, as the kernel's.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, register_op

__all__ = ["generate_bounding_box_proposals"]

_XFORM_CLIP = np.float32(math.log(1000.0 / 16.0))
# TF's builder returns its op's outputs as this named tuple
_Proposals = collections.namedtuple("GenerateBoundingBoxProposals", ["rois", "roi_probabilities"])


def _shapes(op):
    n = op.inputs[0].shape.dims[0] if op.inputs[0].shape.ndims else None
    n = None if n is None else (n.value if hasattr(n, "value") else n)
    k = op._attr("post_nms_topn")
    return [tensor_shape.TensorShape([n, k, 4]), tensor_shape.TensorShape([n, k])]


GenerateBoundingBoxProposals = register_op(
    "GenerateBoundingBoxProposals",
    inputs=[
        "scores: float",
        "bbox_deltas: float",
        "image_info: float",
        "anchors: float",
        "nms_threshold: float",
        "pre_nms_topn: int32",
        "min_size: float",
    ],
    outputs=["rois: float", "roi_probabilities: float"],
    attrs={"post_nms_topn": 300},
    shape_fn=_shapes,
)
NotDifferentiable("GenerateBoundingBoxProposals")


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _scalar(v, i, kind):
    a = np.asarray(v)
    if a.shape != ():
        raise _bad(f"Expected a scalar in input {i}but got shape [{','.join(map(str, a.shape))}]")
    return kind(a)


def _decode(anchors, deltas, info, min_size):
    """Boxes (x1, y1, x2, y2) of the kept anchors and their keep flags."""
    f = np.float32
    y1, x1, y2, x2 = (anchors[:, i] for i in range(4))
    dy, dx, dh, dw = (deltas[:, i] for i in range(4))
    dw, dh = np.minimum(dw, _XFORM_CLIP), np.minimum(dh, _XFORM_CLIP)
    w = x2 - x1
    cx = x1 + f(0.5) * w
    pcx = cx + w * dx
    pw = w * np.exp(dw)
    nx1, nx2 = pcx - f(0.5) * pw, pcx + f(0.5) * pw
    h = y2 - y1
    cy = y1 + f(0.5) * h
    pcy = cy + h * dy
    ph = h * np.exp(dh)
    ny1, ny2 = pcy - f(0.5) * ph, pcy + f(0.5) * ph
    img_h, img_w, scale = f(info[0]), f(info[1]), f(info[2])
    nx1, nx2 = (np.maximum(np.minimum(v, img_w), f(0)) for v in (nx1, nx2))
    ny1, ny2 = (np.maximum(np.minimum(v, img_h), f(0)) for v in (ny1, ny2))
    keep = np.minimum(nx2 - nx1, ny2 - ny1) >= f(min_size) * scale
    return np.stack([nx1, ny1, nx2, ny2], 1), keep


def _nms(boxes, threshold, limit) -> list[int]:
    f = np.float32
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    alive = np.ones(len(boxes), bool)
    kept: list[int] = []
    for i in range(len(boxes)):
        if len(kept) == limit:
            break
        if not alive[i]:
            continue
        kept.append(i)
        rest = slice(i + 1, None)
        b = boxes[rest]
        w = np.maximum(np.minimum(boxes[i, 2], b[:, 2]) - np.maximum(boxes[i, 0], b[:, 0]), f(0))
        h = np.maximum(np.minimum(boxes[i, 3], b[:, 3]) - np.maximum(boxes[i, 1], b[:, 1]), f(0))
        inter = w * h
        over = inter > (area[i] + area[rest] - inter) * f(threshold)
        over &= (area[i] != 0) & (area[rest] != 0)
        alive[rest] &= ~over
    return kept


def _proposals(scores, deltas, info, anchors, threshold, pre_n, min_size, post_n):
    n, hh, ww, a = scores.shape
    boxes_n = hh * ww * a
    flat_anchors = anchors.reshape(-1, 4)[:boxes_n].astype(np.float32)
    rois = np.zeros((n, post_n, 4), np.float32)
    probs = np.zeros((n, post_n), np.float32)
    take = min(boxes_n, pre_n)
    for i in range(n):
        s = scores[i].reshape(-1).astype(np.float32)
        order = np.argsort(-s, kind="stable")[:take]
        d = deltas[i].reshape(-1, 4)[order].astype(np.float32)
        boxes, keep = _decode(flat_anchors[order], d, info[i].astype(np.float32), min_size)
        boxes, kept_scores = boxes[keep], s[order][keep]
        sel = _nms(boxes, threshold, post_n)
        out = boxes[sel]
        rois[i, : len(sel)] = out[:, [1, 0, 3, 2]]
        probs[i, : len(sel)] = kept_scores[sel]
    return rois, probs


@GenerateBoundingBoxProposals.kernel("CPU")
async def _generate(ctx, scores, deltas, info, anchors, nms_threshold, pre_nms_topn, min_size):
    post_n = int(ctx.attrs["post_nms_topn"])
    if post_n <= 0:
        raise _bad("post_nms_topn can't be 0 or less")
    scores, deltas = np.asarray(scores), np.asarray(deltas)
    info, anchors = np.asarray(info), np.asarray(anchors)
    if scores.ndim != 4 or deltas.ndim != 4 or anchors.ndim < 3 or info.ndim != 2:
        raise _bad("scores and bbox_deltas must be 4-D, image_info 2-D and anchors 3-D")
    a = scores.shape[3]
    if a == 0 or anchors.shape[2] // a != 4:
        raise errors.OutOfRangeError(None, None, "Box dimensions need to be 4")
    threshold = _scalar(nms_threshold, 4, float)
    if threshold < 0 or threshold > 1.0:
        raise _bad(f"nms_threshold should be between 0 and 1. Got {threshold:g}")
    pre_n = _scalar(pre_nms_topn, 5, int)
    if pre_n <= 0:
        raise _bad(f"pre_nms_topn should be greater than 0{pre_n}")
    size = _scalar(min_size, 6, float)
    n, hh, ww = scores.shape[:3]
    if deltas.shape != (n, hh, ww, 4 * a) or anchors.size < hh * ww * a * 4 or info.shape[0] < n:
        raise _bad("bbox_deltas, anchors and image_info do not match the scores' shape")
    return await ctx.compute(
        _proposals, scores, deltas, info, anchors, threshold, pre_n, size, post_n,
        cost=float(scores.size) * 8,
    )  # fmt: skip


def generate_bounding_box_proposals(
    scores,
    bbox_deltas,
    image_info,
    anchors,
    nms_threshold=0.7,
    pre_nms_topn=6000,
    min_size=16,
    post_nms_topn=300,
    name=None,
):
    """(rois [N, post_nms_topn, 4] as [y1, x1, y2, x2], roi_probabilities
    [N, post_nms_topn]) from anchor scores and deltas (see the module note).

    Raises:
      InvalidArgumentError (when run): post_nms_topn <= 0, nms_threshold outside [0, 1],
        pre_nms_topn <= 0.
      OutOfRangeError (when run): anchors whose last dimension is not 4 * num_anchors.
    """
    with ops.name_scope(name, "generate_bounding_box_proposals"):
        args = [
            ops.convert_to_tensor(v, dtype=dt, name=nm)
            for v, dt, nm in (
                (scores, dtypes.float32, "scores"),
                (bbox_deltas, dtypes.float32, "bbox_deltas"),
                (image_info, dtypes.float32, "image_info"),
                (anchors, dtypes.float32, "anchors"),
                (nms_threshold, dtypes.float32, "nms_threshold"),
                (pre_nms_topn, dtypes.int32, "pre_nms_topn"),
                (min_size, dtypes.float32, "min_size"),
            )
        ]
        op = ops.apply_op(
            "GenerateBoundingBoxProposals",
            args,
            {"post_nms_topn": int(post_nms_topn)},
            name="GenerateBoundingBoxProposals",
        )
        return _Proposals(op.outputs[0], op.outputs[1])
