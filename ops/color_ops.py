"""RGBToHSV and HSVToRGB: colour-space conversion over the last dim (size 3) of float
images, computed in the image's own dtype.

Hue is in [0, 1): the sector of the largest channel plus the normalized difference of
the other two, over 6; saturation is (max - min) / max (0 for black); value is the
largest channel.  HSVToRGB rebuilds each channel from its distance to the hue on the
colour wheel.  HSVToRGB is not differentiable (as in TF); RGBToHSV's gradient is not
written yet (tf.gradients raises LookupError).  tf.image.rgb_to_hsv / hsv_to_rgb stay
composites of element-wise ops: same values, but they differentiate (TF's rgb_to_hsv
differs at ties, and its hsv_to_rgb has no gradient).  AdjustContrast, the op TF
removed at GraphDef version 2, is here for old GraphDefs: per-channel mean over height
and width, contrast scaled about it, clipped to [min_value, max_value], as float32;
so is RandomCrop (removed at 8): a size crop at offsets drawn as TF draws them (width's
first) from the op's TF generator, one reserved block per run.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import philox_random
from asyncflow.ops.random_ops import _tf_generator
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__: list[str] = []

_T = TypeConstraint(["bfloat16", "float16", "float32", "float64"], default="float32")


def _shape(op):
    x = op.inputs[0].shape.with_rank_at_least(1)
    if x.ndims is not None and x[-1].value is not None and x[-1].value != 3:
        raise ValueError(f"Dimension must be 3 but is {x[-1].value}")
    return [x]


def _check(x) -> None:
    if x.ndim < 1 or x.shape[-1] != 3:
        raise errors.InvalidArgumentError(
            None, None, f"input must have 3 channels but input only has {x.shape[-1]} channels."
        )


RGBToHSV = register_op(
    "RGBToHSV", inputs=["images: T"], outputs=["output: T"], attrs={"T": _T}, shape_fn=_shape
)


@RGBToHSV.kernel()
async def _rgb_to_hsv(ctx, x):
    xp = ctx.xp
    _check(x)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    v = xp.max(x, axis=-1)
    span = v - xp.min(x, axis=-1)
    some = span > 0
    safe = xp.where(some, span, 1)
    h = xp.where(r == v, (g - b) / safe, xp.where(g == v, (b - r) / safe + 2, (r - g) / safe + 4))
    h = xp.where(some, h / 6, 0)
    h = xp.where(h < 0, h + 1, h)
    s = xp.where(v > 0, span / xp.where(v > 0, v, 1), 0)
    return xp.stack([h, s, v], axis=-1).astype(x.dtype)


HSVToRGB = register_op(
    "HSVToRGB", inputs=["images: T"], outputs=["output: T"], attrs={"T": _T}, shape_fn=_shape
)


@HSVToRGB.kernel()
async def _hsv_to_rgb(ctx, x):
    xp = ctx.xp
    _check(x)
    h, s, v = x[..., 0], x[..., 1], x[..., 2]
    sector = h * 6
    # Each channel's weight from the hue's distance to that channel's place on the wheel.
    red = xp.clip(xp.abs(sector - 3) - 1, 0, 1)
    green = xp.clip(2 - xp.abs(sector - 2), 0, 1)
    blue = xp.clip(2 - xp.abs(sector - 4), 0, 1)
    grey = 1 - s
    out = [(grey + s * w) * v for w in (red, green, blue)]
    return xp.stack(out, axis=-1).astype(x.dtype)


NotDifferentiable("HSVToRGB")


# -- AdjustContrast (removed from GraphDefs at version 2; ops/legacy_ops.py) ------------

AdjustContrast = register_op(
    "AdjustContrast",
    inputs=["images: T", "contrast_factor: float", "min_value: float", "max_value: float"],
    outputs=["output: float"],
    attrs={
        "T": TypeConstraint(["uint8", "int8", "int16", "int32", "int64", "float32", "float64"])
    },
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(3)],
)


@AdjustContrast.kernel("CPU")
async def _adjust_contrast(ctx, images, factor, lo, hi):
    x = np.asarray(images, np.float32)
    if x.ndim < 3:
        raise errors.InvalidArgumentError(
            None, None, f"input must be at least 3-D, got shape {list(x.shape)}"
        )
    mean = x.mean(axis=(-3, -2), keepdims=True, dtype=np.float32)
    out = (x - mean) * np.float32(factor) + mean
    return np.clip(out, np.float32(lo), np.float32(hi)).astype(np.float32)


# -- RandomCrop (removed from GraphDefs at version 8; ops/legacy_ops.py) ---------------

RandomCrop = register_op(
    "RandomCrop",
    inputs=["image: T", "size: int64"],
    outputs=["output: T"],
    attrs={
        "T": TypeConstraint(["uint8", "int8", "int16", "int32", "int64", "float32", "float64"]),
        "seed": 0,
        "seed2": 0,
    },
    shape_fn=lambda op: [
        tensor_shape.TensorShape(
            [None, None]
            if ops.constant_value(op.inputs[1]) is None
            else [int(v) for v in ops.constant_value(op.inputs[1])]
        ).concatenate(op.inputs[0].shape.with_rank(3)[2:])
    ],
    stateful=True,
)
NotDifferentiable("RandomCrop")


@RandomCrop.kernel("CPU", host_memory=("size",))
async def _random_crop(ctx, image, size):
    image = np.asarray(image)
    if image.ndim != 3:
        raise errors.InvalidArgumentError(
            None, None, f"input must be 3-dimensional, got shape {list(image.shape)}"
        )
    target_h, target_w = (int(v) for v in np.asarray(size).reshape(-1))
    height, width = image.shape[:2]
    if target_h > height or target_w > width:
        raise errors.InvalidArgumentError(
            None, None, f"width must be >= target + offset: {width}, {target_w}"
        )
    gen = _tf_generator(ctx)
    rnd = philox_random.SimplePhilox(gen.key, gen.reserve_blocks(1))
    # (TF draws the width's offset first)
    off_w = rnd.uniform(width - target_w + 1) if width > target_w else 0
    off_h = rnd.uniform(height - target_h + 1) if height > target_h else 0
    return image[off_h : off_h + target_h, off_w : off_w + target_w].copy()
