"""TF's DrawBoundingBoxes (V1, V2) and ExtractGlimpse (V1, V2): `tf.image.draw_bounding_boxes`
and `tf.image.extract_glimpse`.

DrawBoundingBoxes paints each box's one-pixel outline in a colour of the table (the
box's index modulo its length; TF's default table when none is given), at rows and
columns `int(coordinate * (size - 1))` (float32 product, truncated); edges outside the
image are skipped, inverted or wholly outside boxes are not drawn.

ExtractGlimpse cuts a size[0] x size[1] window per image at an offset (y, x): pixels when
not `normalized`, fractions of the size when `normalized`, from the image's centre (-1 to
1) when `centered`; V1 and V2 differ in how (see `_corner`, checked against TF for
every mode).  Where the window leaves the image TF fills it with noise: "uniform" (the
image's range), "gaussian" (each channel's mean and deviation) or "zero".
Noise is drawn here from NumPy's generator: TF's is its own unseeded Eigen stream, so
only its distribution, never its values, can match.

Invariant: the kernels return new arrays.  As in TF, the V1 ops are not
differentiable and the V2 ops have no gradient (differentiating them raises LookupError).
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["draw_bounding_boxes", "extract_glimpse", "extract_glimpse_v2"]

_DRAW_T = TypeConstraint(["float32", "float16"], "float32")
_MAX_ELEMENTS = 1 << 31

# TF's default colours (RGBA): yellow, blue, red, lime, purple, olive, maroon, navy,
# aqua, fuchsia.
_DEFAULT_COLORS = np.array(
    [[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
     [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]],
    np.float32,
)  # fmt: skip


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _draw_shape(op):
    images = op.inputs[0].shape
    if images.ndims is not None and images.ndims != 4:
        raise ValueError(f"Shape must be rank 4 but is rank {images.ndims}")
    boxes = op.inputs[1].shape
    if boxes.ndims is not None and boxes.ndims != 3:
        raise ValueError(f"Shape must be rank 3 but is rank {boxes.ndims}")
    if boxes.ndims is not None and boxes.dims[2] is not None and boxes.dims[2] != 4:
        raise ValueError(f"Dimension must be 4 but is {boxes.dims[2]}")
    if len(op.inputs) > 2:
        colors = op.inputs[2].shape
        if colors.ndims is not None and colors.ndims != 2:
            raise ValueError(f"Shape must be rank 2 but is rank {colors.ndims}")
    return [images if images.ndims is not None else tensor_shape.unknown_shape(4)]


DrawBoundingBoxes = register_op(
    "DrawBoundingBoxes",
    inputs=["images: T", "boxes: float32"],
    outputs=["output: T"],
    attrs={"T": _DRAW_T},
    shape_fn=_draw_shape,
)
DrawBoundingBoxesV2 = register_op(
    "DrawBoundingBoxesV2",
    inputs=["images: T", "boxes: float32", "colors: float32"],
    outputs=["output: T"],
    attrs={"T": _DRAW_T},
    shape_fn=_draw_shape,
)
NotDifferentiable("DrawBoundingBoxes")


def _color_table(colors, depth):
    if colors is not None:
        colors = np.asarray(colors, np.float32)
        if colors.ndim != 2:
            raise _invalid(f"colors must be a 2-D matrix{list(colors.shape)}")
        if colors.shape[1] < depth:
            raise _invalid(
                "colors must have equal or more channels than the image provided: "
                f"[{','.join(map(str, colors.shape))}]"
            )
        if colors.size:
            return colors
    table = _DEFAULT_COLORS.copy()
    if depth == 1:
        table[:, 0] = 1
    return table


def _draw(images, boxes, table):
    canvas = images.copy()
    batch, height, width, depth = canvas.shape
    for b in range(batch):
        for k, box in enumerate(boxes[b]):
            color = table[k % len(table), :depth].astype(canvas.dtype)
            # (the float32 product, truncated toward zero as TF's int64 cast)
            r0, c0, r1, c1 = (
                math.trunc(float(np.float32(box[i]) * np.float32(n - 1)))
                for i, n in ((0, height), (1, width), (2, height), (3, width))
            )
            if r0 > r1 or c0 > c1:
                continue  # inverted: not drawn
            if r0 >= height or r1 < 0 or c0 >= width or c1 < 0:
                continue  # wholly outside
            r0c, r1c = max(r0, 0), min(r1, height - 1)
            c0c, c1c = max(c0, 0), min(c1, width - 1)
            if r0 >= 0:
                canvas[b, r0, c0c : c1c + 1] = color
            if r1 < height:
                canvas[b, r1, c0c : c1c + 1] = color
            if c0 >= 0:
                canvas[b, r0c : r1c + 1, c0] = color
            if c1 < width:
                canvas[b, r0c : r1c + 1, c1] = color
    return canvas


async def _draw_kernel(ctx, images, boxes, colors=None):
    images, boxes = np.asarray(images), np.asarray(boxes, np.float32)
    if images.ndim != 4:
        raise _invalid(f"The rank of the images should be 4{list(images.shape)}")
    if images.shape[0] < 1:
        raise _invalid(f"Batch size must be >= 1{list(images.shape)}")
    depth = images.shape[3]
    if depth not in (1, 3, 4):
        raise _invalid("Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)")
    if boxes.ndim != 3 or boxes.shape[2] != 4 or boxes.shape[0] != images.shape[0]:
        raise _invalid(
            f"boxes must be [batch, num_boxes, 4] with the images' batch, got {list(boxes.shape)}"
        )
    table = _color_table(colors, depth)
    return await ctx.device.compute(_draw, images, boxes, table)


@DrawBoundingBoxes.kernel("CPU")
async def _draw_v1(ctx, images, boxes):
    return await _draw_kernel(ctx, images, boxes)


@DrawBoundingBoxesV2.kernel("CPU")
async def _draw_v2(ctx, images, boxes, colors):
    return await _draw_kernel(ctx, images, boxes, colors)


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """`images` [batch, height, width, depth] (float32 or half, depth 1, 3 or 4) with
    the outline of each box in `boxes` [batch, num_boxes, 4] drawn (TF1's
    `tf.image.draw_bounding_boxes`: DrawBoundingBoxes, or DrawBoundingBoxesV2 with
    `colors` [num_colors, >= depth]).

    Raises:
      ValueError: at build time, for images not 4-D or boxes not [batch, n, 4].
      InvalidArgumentError: at run time, for a depth other than 1, 3 or 4, or colors
        with fewer channels than the images.
    """
    if colors is None:
        return ops.apply_op("DrawBoundingBoxes", [images, boxes], name=name).outputs[0]
    return ops.apply_op("DrawBoundingBoxesV2", [images, boxes, colors], name=name).outputs[0]


# -- ExtractGlimpse ----------------------------------------------------------------------


def _glimpse_shape(op):
    images = op.inputs[0].shape
    if images.ndims is not None and images.ndims != 4:
        raise ValueError(f"Shape must be rank 4 but is rank {images.ndims}")
    size = op.inputs[1].shape
    if size.ndims is not None and size.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {size.ndims}")
    if size.ndims == 1 and size.dims[0] is not None and size.dims[0] != 2:
        raise ValueError(f"Dimension must be 2 but is {size.dims[0]}")
    offsets = op.inputs[2].shape
    if offsets.ndims is not None and offsets.ndims != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {offsets.ndims}")
    batch = images.dims[0] if images.ndims is not None else None
    depth = images.dims[3] if images.ndims is not None else None
    if offsets.ndims is not None:
        if batch is not None and offsets.dims[0] is not None and batch != offsets.dims[0]:
            raise ValueError(f"Dimensions must be equal, but are {batch} and {offsets.dims[0]}")
        if offsets.dims[1] is not None and offsets.dims[1] != 2:
            raise ValueError(f"Dimension must be 2 but is {offsets.dims[1]}")
        batch = batch if batch is not None else offsets.dims[0]
    value = ops.constant_value(op.inputs[1])
    h, w = (int(value[0]), int(value[1])) if value is not None else (None, None)
    return [tensor_shape.TensorShape([batch, h, w, depth])]


_GLIMPSE_ATTRS = {"centered": True, "normalized": True, "uniform_noise": True, "noise": "uniform"}
ExtractGlimpse = register_op(
    "ExtractGlimpse",
    inputs=["input: float32", "size: int32", "offsets: float32"],
    outputs=["glimpse: float32"],
    attrs=dict(_GLIMPSE_ATTRS),
    shape_fn=_glimpse_shape,
)
ExtractGlimpseV2 = register_op(
    "ExtractGlimpseV2",
    inputs=["input: float32", "size: int32", "offsets: float32"],
    outputs=["glimpse: float32"],
    attrs=dict(_GLIMPSE_ATTRS),
    shape_fn=_glimpse_shape,
)
NotDifferentiable("ExtractGlimpse")


def _corner(offset, size, window, normalized, centered, legacy):
    """The window's first row (or column), in float32 and truncated, as TF's kernels.

    V2: normalized offsets scale by the size; centered ones move by half the size, and
    only a normalized centered offset (the window's centre) loses half the window.  V1
    (`legacy`) halves every centered offset and always takes half the window off.
    """
    half = np.float32(size / 2.0)
    v = np.float32(offset)
    if normalized:
        v = v * np.float32(size)
    if legacy:
        if centered:
            v = v / np.float32(2) + half
        v = v - np.float32(window / 2.0)
    elif centered:
        v = v / np.float32(2) + half - np.float32(window / 2.0) if normalized else v + half
    return math.trunc(float(v))


def _glimpse(images, gh, gw, offsets, normalized, centered, noise, legacy, rng):
    batch, h, w, depth = images.shape
    out = np.zeros((batch, gh, gw, depth), np.float32)
    for b in range(batch):
        y0 = _corner(offsets[b, 0], h, gh, normalized, centered, legacy)
        x0 = _corner(offsets[b, 1], w, gw, normalized, centered, legacy)
        img = images[b]
        inside = y0 >= 0 and x0 >= 0 and y0 + gh < h and x0 + gw < w
        if not inside:
            if noise == "uniform":
                lo, hi = img.min(), img.max()
                out[b] = lo + rng.random((gh, gw, depth), np.float32) * (hi - lo)
            elif noise == "gaussian":
                flat = img.reshape(-1, depth).astype(np.float32)
                mean, sigma = flat.mean(0), flat.std(0)
                draw = mean + rng.standard_normal((gh, gw, depth), np.float32) * sigma
                out[b] = np.clip(draw, flat.min(0), flat.max(0))
        ys, xs = max(y0, 0), max(x0, 0)
        ye, xe = min(y0 + gh, h), min(x0 + gw, w)
        if ye > ys and xe > xs:
            out[b, ys - y0 : ye - y0, xs - x0 : xe - x0] = img[ys:ye, xs:xe]
    return out


def _glimpse_kernel(legacy):
    async def kernel(ctx, images, size, offsets):
        images = np.asarray(images, np.float32)
        size, offsets = np.asarray(size), np.asarray(offsets, np.float32)
        if images.ndim != 4:
            raise _invalid(f"input must be 4-dimensional{list(images.shape)}")
        batch, h, w, depth = images.shape
        if h <= 0 or w <= 0:
            raise _invalid(f"input must have a positive height and width{list(images.shape)}")
        if size.shape != (2,):
            raise _invalid(f"input must be a vector of size 2 (height, width){list(size.shape)}")
        gh, gw = int(size[0]), int(size[1])
        if gh <= 0 or gw <= 0:
            raise _invalid("input must be a vector of size 2 with positive entries")
        if offsets.shape != (batch, 2):
            raise _invalid(
                f"offsets must be [batch_size, 2], got {list(offsets.shape)} for a batch of "
                f"{batch}"
            )
        if batch * gh * gw * depth > _MAX_ELEMENTS:
            raise errors.ResourceExhaustedError(None, None, "glimpse too large")
        noise = ctx.attrs["noise"]
        noise = noise.decode() if isinstance(noise, bytes) else noise
        if not ctx.attrs["uniform_noise"] and noise == "uniform":
            noise = "gaussian"  # (TF: uniform_noise=False means gaussian)
        elif ctx.attrs["uniform_noise"] and noise not in ("uniform", ""):
            raise _invalid("The uniform_noise and noise should not be specified at the same time")
        if noise not in ("uniform", "gaussian", "zero", ""):
            raise _invalid(f"noise must be 'uniform', 'gaussian' or 'zero', got {noise!r}")
        return await ctx.device.compute(
            _glimpse, images, gh, gw, offsets, ctx.attrs["normalized"], ctx.attrs["centered"],
            noise or "uniform", legacy, np.random.default_rng(),
        )  # fmt: skip

    return kernel


ExtractGlimpse.kernel("CPU")(_glimpse_kernel(legacy=True))
ExtractGlimpseV2.kernel("CPU")(_glimpse_kernel(legacy=False))


def _glimpse_builder(op_type, input, size, offsets, centered, normalized, uniform_noise,
                     noise, name):  # fmt: skip
    attrs = {
        "centered": bool(centered), "normalized": bool(normalized),
        "uniform_noise": bool(uniform_noise), "noise": noise,
    }  # fmt: skip
    return ops.apply_op(op_type, [input, size, offsets], attrs, name=name).outputs[0]


def extract_glimpse(
    input, size, offsets, centered=True, normalized=True, uniform_noise=True, name=None
):  # noqa: A002 - TF's argument name
    """TF1's `tf.image.extract_glimpse` (ExtractGlimpse): a size = [h, w] window per image
    at `offsets` [batch, 2] (y, x), noise where it leaves the image.

    Raises:
      ValueError: at build time, for input not 4-D or offsets not [batch, 2].
      InvalidArgumentError: at run time, for a size not 2 positive ints.
    """
    return _glimpse_builder(
        "ExtractGlimpse", input, size, offsets, centered, normalized, uniform_noise,
        "uniform", name,
    )  # fmt: skip


def extract_glimpse_v2(
    input, size, offsets, centered=True, normalized=True, noise="uniform", name=None
):  # noqa: A002 - TF's argument name
    """TF2's `tf.image.extract_glimpse` (ExtractGlimpseV2: the corner truncated, not
    legacy), noise "uniform", "gaussian" or "zero"."""
    return _glimpse_builder(
        "ExtractGlimpseV2", input, size, offsets, centered, normalized, False, noise, name
    )
