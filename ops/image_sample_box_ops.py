"""TF's SampleDistortedBoundingBox and SampleDistortedBoundingBoxV2 (TF1's
`tf.image.sample_distorted_bounding_box`): a random crop of an image covering at least
`min_object_covered` of one of the given boxes, for Inception-style augmentation.

The draws are TF's own: each op keeps TF's GuardedPhiloxRandom (seed, seed2; drawn
from the OS when both are 0), each run reserves `max_attempts` Philox blocks and reads
them one 32-bit word at a time (SimplePhilox: RandFloat from 23 mantissa bits, Uniform(n)
by rejection as TF's ExactUniformInt), so the same seeds give TF's crops run after run.
The crop arithmetic is TF's in float32 (lrintf: round half to even), with one double
expression where TF's C++ has one.

Invariant: stateful ops; kernels return new arrays; not differentiable (as TF).
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import philox_random
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["sample_distorted_bounding_box"]

_SIZE_T = TypeConstraint(["uint8", "int8", "int16", "int32", "int64"])
_F32 = np.float32


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape(op):
    size = op.inputs[0].shape
    if size.ndims is not None and size.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {size.ndims}")
    if size.ndims == 1 and size.dims[0] is not None and size.dims[0] != 3:
        raise ValueError(f"Dimension must be 3 but is {size.dims[0]}")
    boxes = op.inputs[1].shape
    if boxes.ndims is not None and boxes.ndims != 3:
        raise ValueError(f"Shape must be rank 3 but is rank {boxes.ndims}")
    if boxes.ndims == 3 and boxes.dims[2] is not None and boxes.dims[2] != 4:
        raise ValueError(f"Dimension must be 4 but is {boxes.dims[2]}")
    return [tensor_shape.TensorShape([3])] * 2 + [tensor_shape.TensorShape([1, 1, 4])]


_ATTRS = {
    "T": _SIZE_T,
    "seed": 0,
    "seed2": 0,
    "aspect_ratio_range": [0.75, 1.33],
    "area_range": [0.05, 1.0],
    "max_attempts": 100,
    "use_image_if_no_bounding_boxes": False,
}
_OUTPUTS = ["begin: T", "size: T", "bboxes: float32"]
SampleDistortedBoundingBox = register_op(
    "SampleDistortedBoundingBox",
    inputs=["image_size: T", "bounding_boxes: float32"],
    outputs=_OUTPUTS,
    attrs={**_ATTRS, "min_object_covered": 0.1},
    shape_fn=_shape,
    stateful=True,
)
SampleDistortedBoundingBoxV2 = register_op(
    "SampleDistortedBoundingBoxV2",
    inputs=["image_size: T", "bounding_boxes: float32", "min_object_covered: float32"],
    outputs=_OUTPUTS,
    attrs=dict(_ATTRS),
    shape_fn=_shape,
    stateful=True,
)
NotDifferentiable("SampleDistortedBoundingBox")
NotDifferentiable("SampleDistortedBoundingBoxV2")


class _SimplePhilox:
    """TF's SimplePhilox over a SingleSampleAdapter of the reserved blocks."""

    def __init__(self, key, counter):
        self._key, self._counter = key, counter
        self._words: list[int] = []

    def rand32(self) -> int:
        if not self._words:
            block = philox_random.philox_words(np, self._key, self._counter, 1)
            self._words = block.reshape(-1).tolist()[::-1]
            self._counter = (self._counter + 1) & ((1 << 128) - 1)
        return self._words.pop()

    def rand_float(self) -> np.float32:
        bits = np.uint32(0x3F800000 | (self.rand32() & 0x7FFFFF))
        return bits.view(np.float32) - _F32(1)

    def uniform(self, n: int) -> int:
        if n & (n - 1) == 0:
            return self.rand32() & (n - 1)
        rem = (0xFFFFFFFF % n) + 1
        while True:
            r = self.rand32()
            if r >= rem:
                return r % n


def _lrintf(v) -> int:
    return int(np.rint(_F32(v)))


def _random_crop(width, height, min_rel, max_rel, aspect, rng):
    """TF's GenerateRandomCrop: (x, y, w, h) or None."""
    if max_rel <= 0 or aspect <= 0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return None
    min_area = _F32(min_rel) * _F32(width) * _F32(height)
    max_area = _F32(max_rel) * _F32(width) * _F32(height)
    h = _lrintf(np.sqrt(_F32(min_area / aspect)))
    max_h = _lrintf(np.sqrt(_F32(max_area / aspect)))
    if _lrintf(_F32(max_h) * aspect) > width:
        max_h = int((width + 0.5 - float(_F32(1e-7))) / float(aspect))  # (double, as TF)
        if _lrintf(_F32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += rng.uniform(max_h - h + 1)
    w = _lrintf(_F32(h) * aspect)
    area = _F32(w * h)
    if area < min_area:
        h += 1
        w = _lrintf(_F32(h) * aspect)
        area = _F32(w * h)
    if area > max_area:
        h -= 1
        w = _lrintf(_F32(h) * aspect)
        area = _F32(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return None
    y = rng.uniform(height - h) if h < height else 0
    x = rng.uniform(width - w) if w < width else 0
    return x, y, w, h


def _covers(crop, min_covered, boxes) -> bool:
    """TF's SatisfiesOverlapConstraints: the crop has a pixel and covers enough of one box."""
    x, y, w, h = crop
    if w * h < 1:
        return False
    for x0, y0, x1, y1 in boxes:
        area = (x1 - x0) * (y1 - y0)
        if area < 1:
            continue
        ix = min(x + w, x1) - max(x, x0)
        iy = min(y + h, y1) - max(y, y0)
        if ix <= 0 or iy <= 0:
            continue
        if _F32(ix * iy) / _F32(area) >= min_covered:
            return True
    return False


def _sample(height, width, boxes, min_covered, attrs, key, counter):
    lo_ar, hi_ar = (_F32(v) for v in attrs["aspect_ratio_range"])
    min_area, max_area = (_F32(v) for v in attrs["area_range"])
    rng = _SimplePhilox(key, counter)
    crop = None
    for _ in range(attrs["max_attempts"]):
        aspect = _F32(rng.rand_float() * (hi_ar - lo_ar) + lo_ar)
        c = _random_crop(width, height, min_area, max_area, aspect, rng)
        if c is not None and _covers(c, min_covered, boxes):
            crop = c
            break
    return crop if crop is not None else (0, 0, width, height)


def _check_attrs(attrs):
    ar, area = attrs["aspect_ratio_range"], attrs["area_range"]
    if len(ar) != 2:
        raise _invalid(f"Aspect ratio range field must specify 2 dimensions, got {len(ar)}")
    if ar[0] <= 0 or ar[1] <= 0:
        raise _invalid(f"Aspect ratio range must be non-negative: [{ar[0]}, {ar[1]}]")
    if len(area) != 2:
        raise _invalid(f"Area range field must specify 2 dimensions, got {len(area)}")
    if not (0 < area[0] <= 1 and 0 < area[1] <= 1):
        raise _invalid(f"Area range must be in (0, 1]: [{area[0]}, {area[1]}]")
    if attrs["max_attempts"] <= 0:
        raise _invalid(f"Max attempts must be positive: {attrs['max_attempts']}")


async def _kernel(ctx, image_size, bounding_boxes, min_object_covered, key_counter=None):
    """`key_counter`: the stateless op's Philox (key, counter); else the op's seeded one."""
    attrs = ctx.attrs
    _check_attrs(attrs)
    size = np.asarray(image_size)
    if size.ndim != 1:
        raise _invalid(f"image_size must be 1-dimensional, got shape {list(size.shape)}")
    if size.shape[0] != 3:
        raise _invalid(f"image_size must contain 3 elements, got {size.shape[0]}")
    height, width = int(size[0]), int(size[1])
    boxes_in = np.asarray(bounding_boxes, np.float32)
    if boxes_in.size and (boxes_in.ndim < 1 or boxes_in.shape[-1] != 4):
        raise _invalid(f"input boxes must be shaped [batch, N, 4], got {list(boxes_in.shape)}")
    min_covered = _F32(np.asarray(min_object_covered))
    if min_covered < 0:
        raise _invalid(f"min_object_covered must be non-negative: {min_covered}")
    boxes = []
    for box in boxes_in.reshape(-1, 4):
        for v in box:
            if not 0.0 <= v <= 1.0:
                raise _invalid(f"All bounding box coordinates must be in [0.0, 1.0]: {v}")
        y0, x0 = int(box[0] * _F32(height)), int(box[1] * _F32(width))
        y1, x1 = int(box[2] * _F32(height)), int(box[3] * _F32(width))
        boxes.append((x0, y0, x1, y1))
    if not boxes:
        if not attrs["use_image_if_no_bounding_boxes"]:
            raise _invalid(
                "No bounding boxes provided as input. One must enable "
                "use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes."
            )
        boxes.append((0, 0, width, height))
    if key_counter is None:
        gen = philox_random.tf_generator(ctx)
        counter = gen.counter  # (ReserveSamples32(4 * max_attempts): max_attempts blocks)
        gen.counter = (counter + attrs["max_attempts"]) & ((1 << 128) - 1)
        key_counter = gen.key, counter
    x, y, w, h = await ctx.device.compute(
        _sample, height, width, boxes, min_covered, attrs, *key_counter
    )
    dt = size.dtype
    bbox = np.array(
        [[[_F32(y) / _F32(height), _F32(x) / _F32(width), _F32(y + h) / _F32(height),
           _F32(x + w) / _F32(width)]]], np.float32,
    )  # fmt: skip
    return np.array([y, x, 0], dt), np.array([h, w, -1], dt), bbox


@SampleDistortedBoundingBox.kernel("CPU")
async def _sample_v1(ctx, image_size, bounding_boxes):
    return await _kernel(ctx, image_size, bounding_boxes, ctx.attrs["min_object_covered"])


@SampleDistortedBoundingBoxV2.kernel("CPU")
async def _sample_v2(ctx, image_size, bounding_boxes, min_object_covered):
    return await _kernel(ctx, image_size, bounding_boxes, min_object_covered)


def sample_distorted_bounding_box(
    image_size, bounding_boxes, seed=None, seed2=None, min_object_covered=0.1,
    aspect_ratio_range=None, area_range=None, max_attempts=None,
    use_image_if_no_bounding_boxes=None, name=None,
):  # fmt: skip
    """TF1's `tf.image.sample_distorted_bounding_box` (SampleDistortedBoundingBoxV2):
    (begin, size, bboxes) of a random crop; begin and size feed `tf.slice`.

    Raises:
      ValueError: at build time, for image_size not [3] or boxes not [batch, N, 4].
      InvalidArgumentError: at run time, for box coordinates outside [0, 1], or no
        boxes without use_image_if_no_bounding_boxes.
    """
    attrs = {"seed": int(seed or 0), "seed2": int(seed2 or 0)}
    if aspect_ratio_range is not None:
        attrs["aspect_ratio_range"] = [float(v) for v in aspect_ratio_range]
    if area_range is not None:
        attrs["area_range"] = [float(v) for v in area_range]
    if max_attempts is not None:
        attrs["max_attempts"] = int(max_attempts)
    if use_image_if_no_bounding_boxes is not None:
        attrs["use_image_if_no_bounding_boxes"] = bool(use_image_if_no_bounding_boxes)
    with ops.name_scope(name, "sample_distorted_bounding_box"):
        covered = ops.convert_to_tensor(min_object_covered, name="min_object_covered")
        return tuple(
            ops.apply_op(
                "SampleDistortedBoundingBoxV2", [image_size, bounding_boxes, covered], attrs,
                name=name,
            ).outputs
        )  # fmt: skip
