"""ExtractVolumePatches (`tf.extract_volume_patches`): the [ksize_planes, ksize_rows,
ksize_cols] patches of an NDHWC volume batch, each flattened into the depth of the
output, as TF computes them: patches start `strides` apart; VALID keeps the windows
inside the volume, SAME pads (zeros) as TF's 3-D convolutions do, the extra padding
after.  The output is [batch, out_planes, out_rows, out_cols, kp * kr * kc * depth], a
patch laid out plane by plane, row by row, column by column, depth last.  Its gradient
adds each patch's gradient back where it came from (padding dropped), from TF's ops.
ksizes and strides act on space only: other values are TF's UnimplementedError.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as g
from asyncflow.ops import manip_ops
from asyncflow.ops.image_patches_ops import _out_and_pad
from asyncflow.registry import REAL, REQUIRED, register_op

__all__ = ["extract_volume_patches"]


def _volume_patches_shape(op):
    x = op.inputs[0].shape
    if x.ndims is not None and x.ndims != 5:
        raise ValueError(f"Shape must be rank 5 but is rank {x.ndims}")
    k, s = op._attr("ksizes"), op._attr("strides")
    for name, v in (("ksizes", k), ("strides", s)):
        if len(v) != 5:
            raise ValueError(
                f"ExtractVolumePatches requires the {name} attribute to contain 5 values, "
                f"but got: {len(v)}"
            )
    padding = _str(op._attr("padding"))
    if x.ndims is None:
        return [tensor_shape.unknown_shape(5)]
    b, planes, rows, cols, depth = x.as_list()
    dims = [b]
    for i, size in ((1, planes), (2, rows), (3, cols)):
        dims.append(None if size is None else _out_and_pad(size, k[i], s[i], 1, padding)[0])
    dims.append(None if depth is None else k[1] * k[2] * k[3] * depth)
    return [tensor_shape.TensorShape(dims)]


def _str(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


ExtractVolumePatches = register_op(
    "ExtractVolumePatches",
    inputs=["input: T"],
    outputs=["patches: T"],
    attrs={"ksizes": REQUIRED, "strides": REQUIRED, "padding": REQUIRED, "T": REAL},
    shape_fn=_volume_patches_shape,
)


def _axis_indices(size, k, stride, padding):
    """Indices into the padded axis of each patch element [out, k], and the padding."""
    out, before = _out_and_pad(size, k, stride, 1, padding)
    idx = np.arange(out)[:, None] * stride + np.arange(k)[None, :]
    after = max(0, int(idx.max()) + 1 - before - size) if idx.size else 0
    return idx, (before, after)


def extract(x, ksizes, strides, padding):
    x = np.asarray(x)
    if x.ndim != 5:
        raise errors.InvalidArgumentError(
            None, None, f"input must be 5-dimensional{list(x.shape)}"
        )
    for what, v in (("ksizes", ksizes), ("strides", strides)):
        if v[0] != 1 or v[4] != 1:
            raise errors.UnimplementedError(None, None, f"Only support {what} across space.")
    axes = [_axis_indices(x.shape[i], ksizes[i], strides[i], padding) for i in (1, 2, 3)]
    pads = [(0, 0), *(p for _, p in axes), (0, 0)]
    if any(any(p) for p in pads):
        x = np.pad(x, pads)
    (pi, _), (ri, _), (ci, _) = axes
    # [b, op, kp, or, kr, oc, kc, d] -> [b, op, or, oc, kp, kr, kc, d]
    p = x[:, pi[:, :, None, None, None, None], ri[None, None, :, :, None, None],
          ci[None, None, None, None, :, :], :]  # fmt: skip
    p = p.transpose(0, 1, 3, 5, 2, 4, 6, 7)
    b, depth = x.shape[0], x.shape[4]
    size = ksizes[1] * ksizes[2] * ksizes[3] * depth
    return np.ascontiguousarray(p).reshape(b, pi.shape[0], ri.shape[0], ci.shape[0], size)


@ExtractVolumePatches.kernel("CPU")
async def _extract_kernel(ctx, x):
    a = ctx.attrs
    return await ctx.compute(extract, x, list(a["ksizes"]), list(a["strides"]), _str(a["padding"]))


@ExtractVolumePatches.gradient
def _extract_volume_patches_grad(op, grad):
    """From TF's ops only (the gradient graph loads in TF): the patches of a volume of
    the input's positions (1-based; padding 0) say where each element of `grad` came
    from, and UnsortedSegmentSum adds them there (segment 0, the padding, dropped)."""
    x = op.inputs[0]
    attrs = {k: op._attr(k) for k in ("ksizes", "strides", "padding")}
    kp, kr, kc = attrs["ksizes"][1:4]
    in_shape = g.shape(x)
    batch, planes, rows, cols, depth = (in_shape[i] for i in range(5))
    n = planes * rows * cols
    positions = g.apply("Range", g.constant(1, dtypes.int32), n + 1, g.constant(1, dtypes.int32))
    positions = g.reshape(positions, manip_ops.stack([1, planes, rows, cols, 1]))
    sources = g.apply("ExtractVolumePatches", positions, **attrs)
    g_shape = g.shape(grad)
    out_p, out_r, out_c = g_shape[1], g_shape[2], g_shape[3]
    flat = g.reshape(grad, manip_ops.stack([batch, out_p, out_r, out_c, kp * kr * kc, depth]))
    flat = g.transpose(flat, [1, 2, 3, 4, 0, 5])
    flat = g.reshape(flat, manip_ops.stack([-1, batch * depth]))
    summed = g.unsorted_segment_sum(flat, g.reshape(sources, [-1]), n + 1)
    summed = g.apply("Slice", summed, g.constant([1, 0]), g.constant([-1, -1]))
    out = g.reshape(summed, manip_ops.stack([planes, rows, cols, batch, depth]))
    out = g.transpose(out, [3, 0, 1, 2, 4])
    out.set_shape(x.shape)
    return [out]


def extract_volume_patches(input, ksizes, strides, padding, name=None):  # noqa: A002
    """`tf.extract_volume_patches`: the 3-D patches of a [batch, planes, rows, cols,
    depth] volume, each flattened into the output's depth.

    Raises:
      ValueError: input not of rank 5, ksizes / strides not of length 5 (build time).
      UnimplementedError (run time): ksizes or strides not 1 in batch and depth.
    """
    attrs = {
        "ksizes": [int(v) for v in ksizes],
        "strides": [int(v) for v in strides],
        "padding": _str(padding),
    }
    return ops.apply_op("ExtractVolumePatches", [input], attrs, name=name).outputs[0]
