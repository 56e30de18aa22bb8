"""ExtractImagePatches (`tf.extract_image_patches`, `tf.image.extract_patches`): the
[ksize_rows, ksize_cols] patches of an NHWC image batch, each flattened into the depth
of the output, as TF computes them.

A patch's rows and columns are `rates` apart (an effective window of
k + (k - 1) * (rate - 1)); patches start `strides` apart; VALID keeps the windows inside
the image, SAME pads (zeros) as TF's convolutions do, the extra padding after.  The
output is [batch, out_rows, out_cols, ksize_rows * ksize_cols * depth], a patch laid out
row by row, column by column, depth last.  Its gradient adds each patch's gradient back
where the patch came from (padding dropped), built from TF's ops as TF builds it.
ksizes, strides and rates act on space only: other values are TF's UnimplementedError.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import REAL, REQUIRED, register_op

__all__ = ["extract_image_patches"]


def _out_and_pad(size: int, k: int, stride: int, rate: int, padding: str):
    """(output size, padding before) of one spatial dimension, TF's rules."""
    eff = k + (k - 1) * (rate - 1)
    if padding == "VALID":
        return max(0, (size - eff + stride) // stride), 0
    out = -(-size // stride)
    pad = max(0, (out - 1) * stride + eff - size)
    return out, pad // 2


def _patches_shape(op):
    images = op.inputs[0].shape.with_rank(4)
    k, s, r = (op._attr(a) for a in ("ksizes", "strides", "rates"))
    padding = op._attr("padding")
    if images.ndims is None:
        return [tensor_shape.unknown_shape(4)]
    b, rows, cols, depth = images.as_list()
    out_r = out_c = None
    if rows is not None:
        out_r = _out_and_pad(rows, k[1], s[1], r[1], padding)[0]
    if cols is not None:
        out_c = _out_and_pad(cols, k[2], s[2], r[2], padding)[0]
    out_d = None if depth is None else k[1] * k[2] * depth
    return [tensor_shape.TensorShape([b, out_r, out_c, out_d])]


ExtractImagePatches = register_op(
    "ExtractImagePatches",
    inputs=["images: T"],
    outputs=["patches: T"],
    attrs={
        "ksizes": REQUIRED,
        "strides": REQUIRED,
        "rates": REQUIRED,
        "padding": REQUIRED,
        "T": REAL,
    },
    shape_fn=_patches_shape,
)


def _unimplemented(what: str) -> errors.UnimplementedError:
    return errors.UnimplementedError(None, None, f"Only support {what} across space.")


def _indices(shape, ksizes, strides, rates, padding):
    """Row and column indices into the padded image of every patch element, and the
    padding: rows [out_r, kr], cols [out_c, kc], (pad_top, pad_bottom, pad_left,
    pad_right)."""
    _, rows, cols, _ = shape
    out_r, top = _out_and_pad(rows, ksizes[1], strides[1], rates[1], padding)
    out_c, left = _out_and_pad(cols, ksizes[2], strides[2], rates[2], padding)
    ri = np.arange(out_r)[:, None] * strides[1] + np.arange(ksizes[1])[None, :] * rates[1]
    ci = np.arange(out_c)[:, None] * strides[2] + np.arange(ksizes[2])[None, :] * rates[2]
    bottom = max(0, int(ri.max()) + 1 - top - rows) if ri.size else 0
    right = max(0, int(ci.max()) + 1 - left - cols) if ci.size else 0
    return ri, ci, (top, bottom, left, right)


def _check(ksizes, strides, rates) -> None:
    for what, v in (("ksizes", ksizes), ("strides", strides), ("rates", rates)):
        if v[0] != 1 or v[3] != 1:
            raise _unimplemented(what)


def extract(images, ksizes, strides, rates, padding):
    x = np.asarray(images)
    if x.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, f"input must be 4-dimensional{list(x.shape)}"
        )
    _check(ksizes, strides, rates)
    b, _, _, depth = x.shape
    ri, ci, (top, bottom, left, right) = _indices(x.shape, ksizes, strides, rates, padding)
    if top or bottom or left or right:
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    # [b, out_r, kr, out_c, kc, d] -> [b, out_r, out_c, kr, kc, d]
    p = x[:, ri[:, :, None, None], ci[None, None, :, :], :]
    p = p.transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(p).reshape(
        b, ri.shape[0], ci.shape[0], ksizes[1] * ksizes[2] * depth
    )


@ExtractImagePatches.kernel("CPU")
async def _extract_kernel(ctx, images):
    a = ctx.attrs
    return await ctx.compute(
        extract, images, list(a["ksizes"]), list(a["strides"]), list(a["rates"]), a["padding"]
    )


@ExtractImagePatches.gradient
def _extract_image_patches_grad(op, grad):
    """From TF's ops only, so that the gradient graph loads in TF: the patches of an
    image of the input's positions (1-based; padding 0) say where each element of
    `grad` came from, and UnsortedSegmentSum adds them there (segment 0, the padding,
    dropped)."""
    from asyncflow.ops import gradient_ops as g
    from asyncflow.ops import manip_ops

    images = op.inputs[0]
    attrs = {k: op._attr(k) for k in ("ksizes", "strides", "rates", "padding")}
    k_r, k_c = attrs["ksizes"][1], attrs["ksizes"][2]
    in_shape = g.shape(images)
    batch, rows, cols, depth = (in_shape[i] for i in range(4))
    positions = g.apply(
        "Range", g.constant(1, dtypes.int32), rows * cols + 1, g.constant(1, dtypes.int32)
    )
    positions = g.reshape(positions, manip_ops.stack([1, rows, cols, 1]))
    sources = g.apply("ExtractImagePatches", positions, **attrs)  # [1, out_r, out_c, kr*kc]
    g_shape = g.shape(grad)
    out_r, out_c = g_shape[1], g_shape[2]
    # grad [b, out_r, out_c, kr*kc*d] -> [out_r * out_c * kr * kc, b * d]
    flat = g.reshape(grad, manip_ops.stack([batch, out_r, out_c, k_r * k_c, depth]))
    flat = g.transpose(flat, [1, 2, 3, 0, 4])
    flat = g.reshape(flat, manip_ops.stack([-1, batch * depth]))
    summed = g.unsorted_segment_sum(flat, g.reshape(sources, [-1]), rows * cols + 1)
    summed = g.apply("Slice", summed, g.constant([1, 0]), g.constant([-1, -1]))
    out = g.reshape(summed, manip_ops.stack([rows, cols, batch, depth]))
    out = g.transpose(out, [2, 0, 1, 3])
    out.set_shape(images.shape)
    return [out]


def extract_image_patches(
    images=None, ksizes=None, strides=None, rates=None, padding=None, name=None, sizes=None
):
    """TF1's `tf.extract_image_patches(images, ksizes, strides, rates, padding)` (also
    `tf.image.extract_patches` with `sizes`)."""
    if ksizes is None:
        ksizes = sizes
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    for arg, v in (("ksizes", ksizes), ("strides", strides), ("rates", rates)):
        if v is None or len(v) != 4:
            raise ValueError(f"{arg} must be a list of 4 ints, got {v!r}")
    op = ops.apply_op(
        "ExtractImagePatches",
        [images],
        {
            "ksizes": [int(v) for v in ksizes],
            "strides": [int(v) for v in strides],
            "rates": [int(v) for v in rates],
            "padding": padding,
        },
        name=name,
    )
    return op.outputs[0]
