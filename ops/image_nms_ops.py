"""TF's non-max suppression ops: NonMaxSuppression (V1-V5), NonMaxSuppressionWithOverlaps
and CombinedNonMaxSuppression, behind `tf.image.non_max_suppression*` and
`tf.image.combined_non_max_suppression`.

The selection is TF's greedy one: candidates scoring above `score_threshold` leave a
priority queue best score first (ties: the lower box index); each is compared with the
boxes already selected, newest first, and dropped when one overlaps it by more than the
threshold.  Soft-NMS (V5, sigma > 0) instead scales the candidate's score by
exp(-0.5 * iou^2 / sigma) for each selected box, selects it when no box changed its
score, and otherwise puts it back with the lower score while it stays above the
threshold.  IoU is computed in float32 as TF's kernel does (min/max of each box's
corners, 0 for an empty box), so the same inputs select the same boxes.

Invariant: every kernel returns new arrays.  None differentiates: V1, V2 and
WithOverlaps are marked so, the others have no gradient (a LookupError), as in TF.
"""

from __future__ import annotations

import heapq

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "combined_non_max_suppression",
    "non_max_suppression",
    "non_max_suppression_overlaps",
    "non_max_suppression_padded",
    "non_max_suppression_with_scores",
]

_HALF_FLOAT = TypeConstraint(["float16", "float32"], "float32")
_MAX_BOXES = 1 << 24  # (a bound on the work one kernel accepts)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _rank(shape, rank: int) -> tensor_shape.TensorShape:
    if shape.ndims is not None and shape.ndims != rank:
        raise ValueError(f"Shape must be rank {rank} but is rank {shape.ndims}")
    return shape if shape.ndims is not None else tensor_shape.unknown_shape(rank)


def _equal(a, b):
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimensions must be equal, but are {a} and {b}")
    return a if a is not None else b


def _boxes_scores_shape(op, n_scalars: int):
    boxes = _rank(op.inputs[0].shape, 2)
    scores = _rank(op.inputs[1].shape, 1)
    if boxes.dims[1] is not None and boxes.dims[1] != 4:
        raise ValueError(f"Dimension must be 4 but is {boxes.dims[1]}")
    _equal(boxes.dims[0], scores.dims[0])
    for t in op.inputs[2 : 2 + n_scalars]:
        _rank(t.shape, 0)


def _padded_length(op):
    if not op._attr("pad_to_max_output_size"):
        return None
    size = ops.constant_value(op.inputs[2])
    return None if size is None else int(size)


def _nms_shape(n_scalars):
    def shape(op):
        _boxes_scores_shape(op, n_scalars)
        return [tensor_shape.TensorShape([None])]

    return shape


def _nms_v4_shape(op):
    _boxes_scores_shape(op, 3)
    n = _padded_length(op)
    return [tensor_shape.TensorShape([n]), tensor_shape.scalar()]


def _nms_v5_shape(op):
    _boxes_scores_shape(op, 4)
    n = _padded_length(op)
    return [tensor_shape.TensorShape([n])] * 2 + [tensor_shape.scalar()]


_BOX_INPUTS = ["boxes: T", "scores: T", "max_output_size: int32"]
NonMaxSuppression = register_op(
    "NonMaxSuppression",
    inputs=["boxes: float32", "scores: float32", "max_output_size: int32"],
    outputs=["selected_indices: int32"],
    attrs={"iou_threshold": 0.5},
    shape_fn=_nms_shape(1),
)
NonMaxSuppressionV2 = register_op(
    "NonMaxSuppressionV2",
    inputs=[*_BOX_INPUTS, "iou_threshold: T_threshold"],
    outputs=["selected_indices: int32"],
    attrs={"T": _HALF_FLOAT, "T_threshold": _HALF_FLOAT},
    shape_fn=_nms_shape(2),
)
NonMaxSuppressionV3 = register_op(
    "NonMaxSuppressionV3",
    inputs=[*_BOX_INPUTS, "iou_threshold: T_threshold", "score_threshold: T_threshold"],
    outputs=["selected_indices: int32"],
    attrs={"T": _HALF_FLOAT, "T_threshold": _HALF_FLOAT},
    shape_fn=_nms_shape(3),
)
NonMaxSuppressionV4 = register_op(
    "NonMaxSuppressionV4",
    inputs=[*_BOX_INPUTS, "iou_threshold: T_threshold", "score_threshold: T_threshold"],
    outputs=["selected_indices: int32", "valid_outputs: int32"],
    attrs={"T": _HALF_FLOAT, "T_threshold": _HALF_FLOAT, "pad_to_max_output_size": False},
    shape_fn=_nms_v4_shape,
)
NonMaxSuppressionV5 = register_op(
    "NonMaxSuppressionV5",
    inputs=[*_BOX_INPUTS, "iou_threshold: T", "score_threshold: T", "soft_nms_sigma: T"],
    outputs=["selected_indices: int32", "selected_scores: T", "valid_outputs: int32"],
    attrs={"T": _HALF_FLOAT, "pad_to_max_output_size": False},
    shape_fn=_nms_v5_shape,
)


def _overlaps_shape(op):
    overlaps = _rank(op.inputs[0].shape, 2)
    scores = _rank(op.inputs[1].shape, 1)
    for t in op.inputs[2:]:
        _rank(t.shape, 0)
    _equal(overlaps.dims[0], scores.dims[0])
    _equal(overlaps.dims[0], overlaps.dims[1])
    return [tensor_shape.TensorShape([None])]


NonMaxSuppressionWithOverlaps = register_op(
    "NonMaxSuppressionWithOverlaps",
    inputs=[
        "overlaps: float32", "scores: float32", "max_output_size: int32",
        "overlap_threshold: float32", "score_threshold: float32",
    ],
    outputs=["selected_indices: int32"],
    shape_fn=_overlaps_shape,
)  # fmt: skip

# TF marks V1, V2 and WithOverlaps not differentiable and registers no gradient for
# V3-V5 and CombinedNonMaxSuppression (differentiating them raises LookupError, here too).
for _name in ("NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionWithOverlaps"):
    NotDifferentiable(_name)


# -- the selection ---------------------------------------------------------------------


class _Boxes:
    """Boxes with their sorted corners and areas computed once, in float32 as TF's
    kernel: `iou(i, js)` is box i's IoU with boxes js (0 for an empty box)."""

    def __init__(self, boxes: np.ndarray):
        b = boxes.astype(np.float32, copy=False)
        self.lo = np.minimum(b[:, :2], b[:, 2:])
        self.hi = np.maximum(b[:, :2], b[:, 2:])
        self.area = (self.hi[:, 0] - self.lo[:, 0]) * (self.hi[:, 1] - self.lo[:, 1])

    def iou(self, i: int, js: np.ndarray) -> np.ndarray:
        zero = np.float32(0)
        inter_lo = np.maximum(self.lo[i], self.lo[js])
        inter_hi = np.minimum(self.hi[i], self.hi[js])
        inter = np.maximum(inter_hi[:, 0] - inter_lo[:, 0], zero) * np.maximum(
            inter_hi[:, 1] - inter_lo[:, 1], zero
        )
        area_i, area_j = self.area[i], self.area[js]
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = inter / (area_i + area_j - inter)
        return np.where((area_i <= 0) | (area_j <= 0), zero, iou).astype(np.float32)


def _greedy(scores, similarity, max_out, threshold, score_threshold, sigma=0.0):
    """TF's DoNonMaxSuppressionOp: (selected indices, their final scores).

    `similarity(i, js)` gives candidate i's similarity to the selected boxes js; scores
    and thresholds are numpy scalars of the op's type, so the comparisons and the soft
    score products round as TF's do.
    """
    t = scores.dtype.type
    threshold, score_threshold = t(threshold), t(score_threshold)
    soft = sigma > 0
    scale = t(-0.5) / t(sigma) if soft else t(0)
    heap = [(-float(s), int(i), 0) for i, s in enumerate(scores) if s > score_threshold]
    heapq.heapify(heap)
    selected: list[int] = []
    selected_scores: list = []
    while len(selected) < max_out and heap:
        neg, i, begin = heapq.heappop(heap)
        original = score = t(-neg)
        hard = False
        if begin < len(selected) and not soft:
            # (hard NMS: the score never changes, so any overlap above the threshold
            # suppresses, whichever selected box the loop would meet first)
            sims = similarity(i, np.asarray(selected[begin:])).astype(t)
            hard = bool((sims > threshold).any())
        elif begin < len(selected):  # (soft: decayed by each selected box, newest first)
            sims = similarity(i, np.asarray(selected[begin:][::-1])).astype(t)
            for sim in sims:
                score = t(score * np.exp(scale * sim * sim))
                if score <= score_threshold:
                    break
        if hard:
            continue
        if score == original:
            selected.append(i)
            selected_scores.append(score)
        elif score > score_threshold:
            heapq.heappush(heap, (-float(score), i, len(selected)))
    return np.asarray(selected, np.int32), np.asarray(selected_scores, scores.dtype)


def _dims(x) -> str:
    """A shape as TF's messages print it: [2,3]."""
    return "[" + ",".join(str(d) for d in np.shape(x)) + "]"


def _scalar(x, name: str):
    x = np.asarray(x)
    if x.ndim != 0:
        raise _invalid(f"{name} must be 0-D, got shape {list(x.shape)}")
    return x[()]


def _check_boxes(boxes, scores) -> int:
    if boxes.ndim != 2:
        raise _invalid(f"boxes must be 2-D{_dims(boxes)}")
    if boxes.shape[1] != 4:
        raise _invalid(f"boxes must have 4 columns, got shape {list(boxes.shape)}")
    n = boxes.shape[0]
    if scores.ndim != 1 or scores.shape[0] != n:
        raise _invalid(f"scores has incompatible shape {list(scores.shape)}")
    if n > _MAX_BOXES:
        raise _invalid(f"too many boxes ({n}), at most {_MAX_BOXES}")
    return n


def _check_common(max_output_size, iou_threshold):
    size = int(_scalar(max_output_size, "max_output_size"))
    iou = _scalar(iou_threshold, "iou_threshold")
    if not 0 <= iou <= 1:
        raise _invalid("iou_threshold must be in [0, 1]")
    if size < 0:
        raise _invalid("output size must be non-negative")
    return size, iou


def _pad(x: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, x.dtype)
    out[: x.shape[0]] = x
    return out


async def _run_nms(ctx, boxes, scores, max_output_size, iou, score_threshold, sigma=0.0):
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    n = _check_boxes(boxes, scores)
    size, iou = _check_common(max_output_size, iou)
    score_threshold = _scalar(score_threshold, "score_threshold")
    return size, await ctx.device.compute(
        _greedy, scores, _Boxes(boxes).iou, min(size, n), iou, score_threshold, sigma
    )


@NonMaxSuppression.kernel("CPU")
async def _nms_v1(ctx, boxes, scores, max_output_size):
    iou = np.float32(ctx.attrs["iou_threshold"])
    _, (idx, _) = await _run_nms(ctx, boxes, scores, max_output_size, iou, -np.inf)
    return idx


@NonMaxSuppressionV2.kernel("CPU")
async def _nms_v2(ctx, boxes, scores, max_output_size, iou_threshold):
    _, (idx, _) = await _run_nms(ctx, boxes, scores, max_output_size, iou_threshold, -np.inf)
    return idx


@NonMaxSuppressionV3.kernel("CPU")
async def _nms_v3(ctx, boxes, scores, max_output_size, iou_threshold, score_threshold):
    _, (idx, _) = await _run_nms(
        ctx, boxes, scores, max_output_size, iou_threshold, score_threshold
    )
    return idx


@NonMaxSuppressionV4.kernel("CPU")
async def _nms_v4(ctx, boxes, scores, max_output_size, iou_threshold, score_threshold):
    size, (idx, _) = await _run_nms(
        ctx, boxes, scores, max_output_size, iou_threshold, score_threshold
    )
    valid = np.int32(idx.shape[0])
    if ctx.attrs["pad_to_max_output_size"]:
        idx = _pad(idx, size)
    return idx, np.array(valid)


@NonMaxSuppressionV5.kernel("CPU")
async def _nms_v5(ctx, boxes, scores, max_output_size, iou, score_threshold, soft_nms_sigma):
    sigma = _scalar(soft_nms_sigma, "soft_nms_sigma")
    if sigma < 0:
        raise _invalid("soft_nms_sigma_val must be >= 0")
    size, (idx, sel) = await _run_nms(
        ctx, boxes, scores, max_output_size, iou, score_threshold, sigma
    )
    valid = np.int32(idx.shape[0])
    if ctx.attrs["pad_to_max_output_size"]:
        idx, sel = _pad(idx, size), _pad(sel, size)
    return idx, sel, np.array(valid)


@NonMaxSuppressionWithOverlaps.kernel("CPU")
async def _nms_overlaps(ctx, overlaps, scores, max_output_size, overlap_threshold, score_thr):
    overlaps, scores = np.asarray(overlaps), np.asarray(scores)
    if overlaps.ndim != 2 or overlaps.shape[0] != overlaps.shape[1]:
        raise _invalid(f"overlaps must be square, got shape {list(overlaps.shape)}")
    n = overlaps.shape[0]
    if scores.ndim != 1 or scores.shape[0] != n:
        raise _invalid(f"scores has incompatible shape {list(scores.shape)}")
    size = int(_scalar(max_output_size, "max_output_size"))
    threshold = _scalar(overlap_threshold, "overlap_threshold")
    score_thr = _scalar(score_thr, "score_threshold")
    if size < 0:
        raise _invalid("output size must be non-negative")
    idx, _ = await ctx.device.compute(
        _greedy, scores, lambda i, js: overlaps[i, js], min(size, n), threshold, score_thr
    )
    return idx


# -- CombinedNonMaxSuppression ---------------------------------------------------------


def _combined_shape(op):
    boxes = _rank(op.inputs[0].shape, 4)
    scores = _rank(op.inputs[1].shape, 3)
    for t in op.inputs[2:]:
        _rank(t.shape, 0)
    batch = _equal(boxes.dims[0], scores.dims[0])
    _equal(boxes.dims[1], scores.dims[1])
    if boxes.dims[3] is not None and boxes.dims[3] != 4:
        raise ValueError(f"Dimension must be 4 but is {boxes.dims[3]}")
    q, classes = boxes.dims[2], scores.dims[2]
    if q is not None and classes is not None and q not in (1, classes):
        raise ValueError(
            "third dimension of boxes must be either 1 or equal to the third dimension of scores"
        )
    per_class = ops.constant_value(op.inputs[2])
    total = ops.constant_value(op.inputs[3])
    if total is not None and int(total) <= 0:
        raise ValueError("max_total_size should be > 0")
    if per_class is not None and int(per_class) <= 0:
        raise ValueError("max_output_size_per_class should be > 0")
    size = None
    if total is not None:
        size = int(total)
        if op._attr("pad_per_class"):
            size = (
                None
                if per_class is None or classes is None
                else min(size, int(per_class) * classes)
            )
    return [
        tensor_shape.TensorShape([batch, size, 4]),
        tensor_shape.TensorShape([batch, size]),
        tensor_shape.TensorShape([batch, size]),
        tensor_shape.TensorShape([batch]),
    ]


CombinedNonMaxSuppression = register_op(
    "CombinedNonMaxSuppression",
    inputs=[
        "boxes: float32", "scores: float32", "max_output_size_per_class: int32",
        "max_total_size: int32", "iou_threshold: float32", "score_threshold: float32",
    ],
    outputs=[
        "nmsed_boxes: float32", "nmsed_scores: float32", "nmsed_classes: float32",
        "valid_detections: int32",
    ],
    attrs={"pad_per_class": False, "clip_boxes": True},
    shape_fn=_combined_shape,
)  # fmt: skip


def _combined(boxes, scores, per_class, total, iou, score_threshold, pad_per_class, clip):
    batch, num_boxes, q, _ = boxes.shape
    classes = scores.shape[2]
    size_per_class = min(per_class, num_boxes)
    width = min(total, per_class * classes) if pad_per_class else total
    out_boxes = np.zeros((batch, width, 4), np.float32)
    out_scores = np.zeros((batch, width), np.float32)
    out_classes = np.zeros((batch, width), np.float32)
    valid = np.zeros(batch, np.int32)
    for b in range(batch):
        found = []  # (score, class, box index)
        for c in range(classes):
            cb = _Boxes(boxes[b, :, c if q > 1 else 0])
            idx, sel = _greedy(scores[b, :, c], cb.iou, size_per_class, iou, score_threshold)
            found.extend((float(s), c, int(i)) for i, s in zip(idx, sel))
        # TF sorts by score alone (std::sort, equal scores in no set order).
        found.sort(key=lambda r: -r[0])
        n = min(len(found), width)
        valid[b] = n
        for k, (s, c, i) in enumerate(found[:n]):
            box = boxes[b, i, c if q > 1 else 0]
            out_boxes[b, k] = np.clip(box, 0, 1) if clip else box
            out_scores[b, k] = s
            out_classes[b, k] = c
    return out_boxes, out_scores, out_classes, valid


@CombinedNonMaxSuppression.kernel("CPU")
async def _combined_nms(ctx, boxes, scores, per_class, total, iou_threshold, score_threshold):
    boxes, scores = np.asarray(boxes, np.float32), np.asarray(scores, np.float32)
    if boxes.ndim != 4:
        raise _invalid(f"boxes must be 4-D, got shape {list(boxes.shape)}")
    if scores.ndim != 3:
        raise _invalid(f"scores must be 3-D, got shape {list(scores.shape)}")
    q, classes = boxes.shape[2], scores.shape[2]
    if boxes.shape[3] != 4 or boxes.shape[:2] != scores.shape[:2] or q not in (1, classes):
        raise _invalid(
            f"boxes has incompatible shape {list(boxes.shape)} for scores of shape "
            f"{list(scores.shape)}: third dimension of boxes must be either 1 or num classes"
        )
    per_class = int(_scalar(per_class, "max_size_per_class"))
    total = int(_scalar(total, "total_size"))
    if per_class <= 0:
        raise _invalid("max_size_per_class must be > 0")
    if total <= 0:
        raise _invalid("max_total_size must be > 0")
    iou = _scalar(iou_threshold, "iou_threshold")
    if not 0 <= iou <= 1:
        raise _invalid("iou_threshold must be in [0, 1]")
    score_threshold = _scalar(score_threshold, "score_threshold")
    if boxes.size > _MAX_BOXES or boxes.shape[0] * total > _MAX_BOXES:
        raise _invalid(f"too many boxes or detections, at most {_MAX_BOXES}")
    return await ctx.device.compute(
        _combined, boxes, scores, per_class, total, iou, score_threshold,
        ctx.attrs["pad_per_class"], ctx.attrs["clip_boxes"],
    )  # fmt: skip


# -- tf.image builders -------------------------------------------------------------------


def _thresholds(iou_threshold, score_threshold, dtype=dtypes.float32):
    return (
        ops.convert_to_tensor(iou_threshold, dtype, name="iou_threshold"),
        ops.convert_to_tensor(score_threshold, dtype, name="score_threshold"),
    )


def non_max_suppression(
    boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=float("-inf"), name=None
):
    """Indices of the boxes greedy non-max suppression keeps, best score first
    (`tf.image.non_max_suppression`: NonMaxSuppressionV3).

    Raises:
      ValueError: at build time, for boxes not [num_boxes, 4] or scores not [num_boxes].
      InvalidArgumentError: at run time, for an iou_threshold outside [0, 1] or a
        negative max_output_size.
    """
    with ops.name_scope(name, "non_max_suppression"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        return ops.apply_op(
            "NonMaxSuppressionV3", [boxes, scores, max_output_size, iou, score]
        ).outputs[0]


def non_max_suppression_with_scores(
    boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=float("-inf"),
    soft_nms_sigma=0.0, name=None,
):  # fmt: skip
    """(selected indices, their scores) of (soft-)NMS, NonMaxSuppressionV5: with
    soft_nms_sigma > 0 overlapping boxes lose score by exp(-iou^2 / (2 sigma)).

    Raises:
      InvalidArgumentError: at run time, for a negative soft_nms_sigma (and as
        `non_max_suppression`).
    """
    with ops.name_scope(name, "non_max_suppression_with_scores"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        sigma = ops.convert_to_tensor(soft_nms_sigma, dtypes.float32, name="soft_nms_sigma")
        out = ops.apply_op(
            "NonMaxSuppressionV5",
            [boxes, scores, max_output_size, iou, score, sigma],
            {"pad_to_max_output_size": False},
        ).outputs
        return out[0], out[1]


def non_max_suppression_padded(
    boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=float("-inf"),
    pad_to_max_output_size=False, name=None, sorted_input=False,
    canonicalized_coordinates=False, tile_size=512,
):  # fmt: skip
    """(selected indices, number valid) for one image's boxes [num_boxes, 4], padded
    with zeros to max_output_size when `pad_to_max_output_size` (NonMaxSuppressionV4).

    TF 2.21 computes this with a tiled composite; asyncflow runs TF's
    NonMaxSuppressionV4 op per image (a batch [B, num_boxes, 4] of static size B, padded:
    indices [B, max_output_size] and counts [B]).  For boxes given as [ymin, xmin, ymax,
    xmax] the two select the same boxes (checked against TF); for corners given in the
    other order TF's composite computes other overlaps and may differ.
    `sorted_input`, `canonicalized_coordinates` and `tile_size` are speed hints there.

    Raises:
      ValueError: batched boxes without pad_to_max_output_size, or of unknown batch size.
    """
    del sorted_input, canonicalized_coordinates, tile_size
    boxes = ops.convert_to_tensor(boxes, name="boxes")
    if boxes.shape.ndims is not None and boxes.shape.ndims > 2:
        if not pad_to_max_output_size:
            raise ValueError(
                f"'pad_to_max_output_size' (value {pad_to_max_output_size}) must be True "
                "for batched input"
            )
        return _padded_batch(boxes, scores, max_output_size, iou_threshold, score_threshold,
                             name)  # fmt: skip
    with ops.name_scope(name, "non_max_suppression_padded"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        out = ops.apply_op(
            "NonMaxSuppressionV4",
            [boxes, scores, max_output_size, iou, score],
            {"pad_to_max_output_size": bool(pad_to_max_output_size)},
        ).outputs
        return out[0], out[1]


def _padded_batch(boxes, scores, max_output_size, iou_threshold, score_threshold, name):
    """non_max_suppression_padded of a batch: V4 per image, stacked."""
    if boxes.shape.ndims != 3 or boxes.shape.dims[0] is None:
        raise ValueError(
            "batched non_max_suppression_padded needs boxes [batch, num_boxes, 4] of a known "
            "batch size in asyncflow"
        )
    with ops.name_scope(name, "non_max_suppression_padded"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        n = boxes.shape.dims[0]
        scores = ops.convert_to_tensor(scores, name="scores")
        per_image = [
            ops.apply_op(
                "NonMaxSuppressionV4",
                [boxes[b], scores[b], max_output_size, iou, score],
                {"pad_to_max_output_size": True},
            ).outputs
            for b in range(n)
        ]
        pack = lambda ts: ops.apply_op("Pack", [ts], {"N": n, "axis": 0}).outputs[0]  # noqa: E731
        return pack([p[0] for p in per_image]), pack([p[1] for p in per_image])


def non_max_suppression_overlaps(
    overlaps, scores, max_output_size, overlap_threshold=0.5, score_threshold=float("-inf"),
    name=None,
):  # fmt: skip
    """NMS on a given [num_boxes, num_boxes] overlap matrix
    (NonMaxSuppressionWithOverlaps)."""
    with ops.name_scope(name, "non_max_suppression_overlaps"):
        thr = ops.convert_to_tensor(overlap_threshold, dtypes.float32, name="overlap_threshold")
        score = ops.convert_to_tensor(score_threshold, dtypes.float32, name="score_threshold")
        return ops.apply_op(
            "NonMaxSuppressionWithOverlaps", [overlaps, scores, max_output_size, thr, score]
        ).outputs[0]


def combined_non_max_suppression(
    boxes, scores, max_output_size_per_class, max_total_size, iou_threshold=0.5,
    score_threshold=float("-inf"), pad_per_class=False, clip_boxes=True, name=None,
):  # fmt: skip
    """Per-class NMS over a batch, then the best `max_total_size` detections of each
    image (CombinedNonMaxSuppression): (boxes, scores, classes, valid_detections).

    Raises:
      ValueError: at build time, for boxes not [batch, num_boxes, q, 4] with q 1 or
        num_classes, or scores not [batch, num_boxes, num_classes].
      InvalidArgumentError: at run time, for non-positive sizes or an iou_threshold
        outside [0, 1].
    """
    with ops.name_scope(name, "combined_non_max_suppression"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        return tuple(
            ops.apply_op(
                "CombinedNonMaxSuppression",
                [boxes, scores, max_output_size_per_class, max_total_size, iou, score],
                {"pad_per_class": bool(pad_per_class), "clip_boxes": bool(clip_boxes)},
            ).outputs
        )
