"""AdjustContrastv2, AdjustHue, AdjustSaturation: TF's single-kernel colour adjustments.

TF computes each in one kernel over float32 (or half) images and registers no gradient
for any of them, so `tf.gradients` through `tf.image.adjust_contrast` / `adjust_hue` /
`adjust_saturation` (and their `random_` forms) raises LookupError there; here too.

Contrast: (x - mean) * factor + mean, the mean per image and channel over height and
width.  Hue and saturation: RGB -> HSV (hue in [0, 1)), rotate the hue by `delta` (wrapped
into [0, 1)) or scale the saturation (clipped to [0, 1]), HSV -> RGB.  Computed in float32
whatever the half/float input, then cast back, as TF's kernels do.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors
from asyncflow.ops.math_helpers import _unary_shape
from asyncflow.registry import TypeConstraint, register_op

__all__: list[str] = []

_T = TypeConstraint(["float16", "float32"])


def _images(op_type, images, min_rank, channels=None) -> np.ndarray:
    x = np.asarray(images)
    if x.ndim < min_rank:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{op_type}: input must be at least {min_rank}-D, got shape {list(x.shape)}",
        )
    if channels is not None and x.shape[-1] != channels:
        raise errors.InvalidArgumentError(
            None, None, f"{op_type}: input must have {channels} channels but input only has "
            f"{x.shape[-1]} channels."
        )  # fmt: skip
    return x


def _scalar(op_type, name, v) -> np.float32:
    v = np.asarray(v)
    if v.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"{op_type}: {name} must be scalar: {list(v.shape)}"
        )
    return np.float32(v)


def rgb_to_hsv(x: np.ndarray) -> np.ndarray:
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    v = x.max(-1)
    rng = v - x.min(-1)
    pos = rng > 0
    norm = np.float32(1.0) / (np.float32(6.0) * np.where(pos, rng, np.float32(1.0)))
    h = np.where(
        r == v,
        norm * (g - b),
        np.where(
            g == v, norm * (b - r) + np.float32(2.0 / 6.0), norm * (r - g) + np.float32(4.0 / 6.0)
        ),
    )
    h = np.where(pos, h, np.float32(0.0))
    h = np.where(h < 0, h + np.float32(1.0), h)
    vpos = v > 0
    s = np.where(vpos, rng / np.where(vpos, v, np.float32(1.0)), np.float32(0.0))
    return np.stack([h, s, v], -1).astype(np.float32, copy=False)


def hsv_to_rgb(x: np.ndarray) -> np.ndarray:
    h, s, v = x[..., 0], x[..., 1], x[..., 2]
    c = s * v
    m = v - c
    dh = h * np.float32(6.0)
    cat = np.floor(dh)
    xx = c * (np.float32(1.0) - np.abs(np.mod(dh, np.float32(2.0)) - np.float32(1.0)))
    zero = np.zeros_like(c)
    table = [
        (c, xx, zero),
        (xx, c, zero),
        (zero, c, xx),
        (zero, xx, c),
        (xx, zero, c),
        (c, zero, xx),
    ]
    out = [zero, zero, zero]
    for k, row in enumerate(table):
        hit = cat == k
        out = [np.where(hit, row[i], out[i]) for i in range(3)]
    return np.stack([o + m for o in out], -1).astype(np.float32, copy=False)


AdjustContrastv2 = register_op(
    "AdjustContrastv2",
    inputs=["images: T", "contrast_factor: float32"],
    outputs=["output: T"],
    attrs={"T": _T},
    shape_fn=_unary_shape,
)


@AdjustContrastv2.kernel("CPU", host_memory=("contrast_factor",))
async def _adjust_contrast(ctx, images, contrast_factor):
    x = _images("AdjustContrastv2", images, 3)
    f = _scalar("AdjustContrastv2", "contrast_factor", contrast_factor)
    flt = x.astype(np.float32, copy=False)
    mean = flt.mean(axis=(-3, -2), keepdims=True, dtype=np.float32)
    return ((flt - mean) * f + mean).astype(x.dtype, copy=False)


def _register_hsv(op_type, arg, adjust):
    op_def = register_op(
        op_type,
        inputs=["images: T", f"{arg}: float32"],
        outputs=["output: T"],
        attrs={"T": _T},
        shape_fn=_unary_shape,
    )

    @op_def.kernel("CPU", host_memory=(arg,))
    async def _kernel(ctx, images, value):
        x = _images(op_type, images, 3, channels=3)
        v = _scalar(op_type, arg, value)
        hsv = rgb_to_hsv(x.astype(np.float32, copy=False))
        adjust(hsv, v)
        return hsv_to_rgb(hsv).astype(x.dtype, copy=False)

    return op_def


def _rotate_hue(hsv, delta):
    h = hsv[..., 0] + delta
    hsv[..., 0] = h - np.floor(h)


def _scale_saturation(hsv, scale):
    hsv[..., 1] = np.clip(hsv[..., 1] * scale, np.float32(0.0), np.float32(1.0))


AdjustHue = _register_hsv("AdjustHue", "delta", _rotate_hue)
AdjustSaturation = _register_hsv("AdjustSaturation", "scale", _scale_saturation)
