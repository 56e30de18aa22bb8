"""Image and pooling op types that graphs from TF 1.x tools and Keras preprocessing hold:
ImageProjectiveTransformV2 / V3 (tf.contrib.image.transform, Keras' RandomRotation,
RandomZoom, ...), MaxPoolGradGradWithArgmax (TF 2.21 runs it on GPUs only: on a CPU
it raises TF's "No OpKernel" error, as there), and the graph-transform tool's fused
FusedPadConv2D and FusedResizeAndPadConv2D.

ImageProjectiveTransform maps each output pixel (x, y) through the 8 numbers
[a0, a1, a2, b0, b1, b2, c0, c1] of its image to the input point
((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1 (k == 0 gives
the fill value), brings that point inside the image by `fill_mode` (REFLECT, WRAP,
NEAREST; CONSTANT leaves it) and reads it by `interpolation` (NEAREST: rounded half
away from zero; BILINEAR: the four neighbours), a neighbour outside the image reading
`fill_value` (V2: 0).  All in float32, as TF's kernel.  Its gradient is TF's: the
incoming gradient transformed by the inverse matrices.

The fused convolutions pad by MirrorPad (REFLECT or SYMMETRIC) -- after a bilinear
resize for FusedResizeAndPadConv2D -- and then convolve as Conv2D (NHWC).  TF 2.21
registers no gradient for them, nor for MaxPoolGradGradWithArgmax.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import conv_ops, image_ops
from asyncflow.registry import INDEX, REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_F32 = np.float32


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- ImageProjectiveTransformV2 / V3 -------------------------------------------------------------


def _map_coordinate(c, size: int, mode: str):
    """Bring float32 coordinates `c` into [0, size - 1] by `mode` (TF's MapCoordinate)."""
    if mode == "CONSTANT":
        return c
    if mode == "NEAREST" or size <= 1:
        return np.clip(c, _F32(0), _F32(size - 1)) if size > 1 else np.zeros_like(c)
    c = c.copy()
    lo, hi = c < 0, c > size - 1  # (one branch per point: taken before either moves it)
    if mode == "REFLECT":
        sz2 = _F32(2 * size)
        v = c[lo]
        far = v < -sz2
        v[far] = sz2 * np.trunc(-v[far] / sz2) + v[far]
        c[lo] = np.where(v < -size, v + sz2, -v - _F32(1))
        v = c[hi]
        v = v - sz2 * np.trunc(v / sz2)
        c[hi] = np.where(v >= size, sz2 - v - _F32(1), v)
    elif mode == "WRAP":
        sz = _F32(size - 1)
        c[lo] += _F32(size) * (np.trunc(-c[lo] / sz) + _F32(1))
        c[hi] -= _F32(size) * np.trunc(c[hi] / sz)
    return np.clip(c, _F32(0), _F32(size - 1))


def _read(image, y, x, fill):
    """image[y, x] per point (integer arrays), `fill` outside; image [h, w, c]."""
    h, w = image.shape[:2]
    inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
    values = image[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)]
    return np.where(inside[..., None], values, fill)


def _round(v):
    """C's round: halves away from zero (NumPy's round to even)."""
    return (np.sign(v) * np.floor(np.abs(v) + _F32(0.5))).astype(np.int64)


def _transform_one(image, t, out_h, out_w, interpolation, mode, fill):
    h, w = image.shape[:2]
    ys, xs = np.meshgrid(np.arange(out_h, dtype=_F32), np.arange(out_w, dtype=_F32), indexing="ij")
    k = t[6] * xs + t[7] * ys + _F32(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        in_x = (t[0] * xs + t[1] * ys + t[2]) / k
        in_y = (t[3] * xs + t[4] * ys + t[5]) / k
    zero_k = k == 0
    in_x = np.where(zero_k, _F32(0), in_x).astype(_F32)
    in_y = np.where(zero_k, _F32(0), in_y).astype(_F32)
    in_x = _map_coordinate(in_x, w, mode)
    in_y = _map_coordinate(in_y, h, mode)
    img = image.astype(_F32)
    if interpolation == "NEAREST":
        out = _read(img, _round(in_y), _round(in_x), fill)
    else:
        y0, x0 = np.floor(in_y), np.floor(in_x)
        y1, x1 = y0 + _F32(1), x0 + _F32(1)
        iy0, ix0, iy1, ix1 = (a.astype(np.int64) for a in (y0, x0, y1, x1))
        wx0, wx1 = (x1 - in_x)[..., None], (in_x - x0)[..., None]
        top = wx0 * _read(img, iy0, ix0, fill) + wx1 * _read(img, iy0, ix1, fill)
        bottom = wx0 * _read(img, iy1, ix0, fill) + wx1 * _read(img, iy1, ix1, fill)
        out = (y1 - in_y)[..., None] * top + (in_y - y0)[..., None] * bottom
    return np.where(zero_k[..., None], fill, out)


def _transform_shape(op):
    images = op.inputs[0].shape.with_rank(4)
    op.inputs[1].shape.with_rank(2)
    size = ops.constant_value(op.inputs[2])
    h, w = (None, None) if size is None else (int(size[0]), int(size[1]))
    return [tensor_shape.TensorShape([images[0], h, w, images[3]])]


_IMAGE_T = TypeConstraint(["uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"])


def _register_transform(name: str, with_fill: bool):
    inputs = ["images: dtype", "transforms: float32", "output_shape: int32"]
    op_def = register_op(
        name,
        inputs=inputs + (["fill_value: float32"] if with_fill else []),
        outputs=["transformed_images: dtype"],
        attrs={"dtype": _IMAGE_T, "interpolation": REQUIRED, "fill_mode": "CONSTANT"},
        shape_fn=_transform_shape,
    )

    @op_def.kernel("CPU", host_memory=("output_shape",))
    async def _kernel(ctx, images, transforms, output_shape, fill_value=0.0):
        images, transforms = np.asarray(images), np.asarray(transforms, _F32)
        size = np.asarray(output_shape).reshape(-1)
        if images.ndim != 4:
            raise _invalid(f"Input images must have rank 4{list(images.shape)}")
        if (
            transforms.ndim != 2
            or transforms.shape[1] != 8
            or (transforms.shape[0] not in (1, images.shape[0]))
        ):
            raise _invalid("Input transform should be num_images x 8 or 1 x 8")
        if size.shape != (2,):
            raise _invalid("output shape must be 1-dimensional" if size.ndim != 1 else
                           "output shape must have two elements")  # fmt: skip
        out_h, out_w = int(size[0]), int(size[1])
        if out_h <= 0 or out_w <= 0:
            raise _invalid("output dimensions must be positive")
        attrs = ctx.attrs
        fill = _F32(np.asarray(fill_value))

        def run():
            out = np.zeros((images.shape[0], out_h, out_w, images.shape[3]), _F32)
            for b in range(images.shape[0]):
                t = transforms[min(b, len(transforms) - 1)]
                out[b] = _transform_one(
                    images[b], t, out_h, out_w, attrs["interpolation"], attrs["fill_mode"], fill
                )
            return out.astype(images.dtype)

        return await ctx.device.compute(run)

    @op_def.gradient
    def _grad(op, grad):
        transforms = op.inputs[1]
        ones = ops.apply_op("OnesLike", [transforms[:, :1]]).outputs[0]
        full = ops.apply_op("ConcatV2", [[transforms, ones], np.int32(1)]).outputs[0]
        matrices = ops.apply_op("Reshape", [full, np.array([-1, 3, 3], np.int32)]).outputs[0]
        inverse = ops.apply_op("MatrixInverse", [matrices]).outputs[0]
        flat = ops.apply_op("Reshape", [inverse, np.array([-1, 9], np.int32)]).outputs[0]
        flat = ops.apply_op("RealDiv", [flat[:, :8], flat[:, 8:]]).outputs[0]
        shape = ops.apply_op("Shape", [op.inputs[0]]).outputs[0][1:3]
        back = ops.apply_op(
            "ImageProjectiveTransformV2",
            [grad, flat, shape],
            {"interpolation": op._attr("interpolation"), "fill_mode": op._attr("fill_mode")},
        ).outputs[0]
        return [back, None, None] + ([None] if with_fill else [])

    _kernel.__name__ = f"_{name.lower()}_kernel"
    return op_def


ImageProjectiveTransformV2 = _register_transform("ImageProjectiveTransformV2", False)
ImageProjectiveTransformV3 = _register_transform("ImageProjectiveTransformV3", True)


# -- MaxPoolGradGradWithArgmax -------------------------------------------------------------------


def _pool_out_shape(op):
    return [op.inputs[2].shape]


MaxPoolGradGradWithArgmax = register_op(
    "MaxPoolGradGradWithArgmax",
    inputs=["input: T", "grad: T", "argmax: Targmax"],
    outputs=["output: T"],
    attrs={
        "ksize": REQUIRED,
        "strides": REQUIRED,
        "padding": REQUIRED,
        "include_batch_in_index": False,
        "Targmax": INDEX,
        "T": TypeConstraint(
            [
                "float32",
                "float64",
                "int32",
                "uint8",
                "int16",
                "int8",
                "int64",
                "bfloat16",
                "uint16",
                "float16",
                "uint32",
                "uint64",
            ]
        ),  # fmt: skip
    },
    shape_fn=_pool_out_shape,
)


@MaxPoolGradGradWithArgmax.kernel("CPU")
async def _max_pool_grad_grad_with_argmax(ctx, x, grad, argmax):
    # TF 2.21 has GPU kernels only (float types, int64 argmax): on a CPU its error.
    a = ctx.attrs
    attrs = (
        f"T={_dt(a['T'])}, ksize={list(a['ksize'])}, strides={list(a['strides'])}, "
        f'Targmax={_dt(a["Targmax"])}, padding="{a["padding"]}", '
        f"include_batch_in_index={str(a['include_batch_in_index']).lower()}"
    )
    kernels = "".join(
        f"\n  device='GPU'; T in [DT_{t}]; Targmax in [DT_INT64]"
        for t in ("DOUBLE", "FLOAT", "BFLOAT16", "HALF")
    )
    raise _invalid(
        "No OpKernel was registered to support Op 'MaxPoolGradGradWithArgmax' used by "
        f"{{{{node {ctx.op.name}}}}} with these attrs: [{attrs}]\nRegistered devices: [CPU]\n"
        f"Registered kernels:{kernels}"
    )


def _dt(dtype) -> str:
    names = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "HALF"}
    return "DT_" + names.get(dtype.name, dtype.name.upper())


# -- FusedPadConv2D, FusedResizeAndPadConv2D -----------------------------------------------------


def _conv_valid_or_same(x, w, strides, padding):
    """Conv2D (NHWC, float64 accumulation) of x [n, h, w, c] with w [kh, kw, c, oc]."""
    kh, kw = w.shape[:2]
    sh, sw = strides[1], strides[2]
    oh, lo_h, hi_h = conv_ops.window_geometry(x.shape[1], kh, sh, 1, padding)
    ow, lo_w, hi_w = conv_ops.window_geometry(x.shape[2], kw, sw, 1, padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (lo_h, hi_h), (lo_w, hi_w), (0, 0)))
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    wf = w.astype(np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i : i + (oh - 1) * sh + 1 : sh, j : j + (ow - 1) * sw + 1 : sw, :]
            out += patch @ wf[i, j]
    return out


def _mirror(x, paddings, mode):
    paddings = np.asarray(paddings, np.int64)
    if paddings.shape != (4, 2):
        raise _invalid(f"paddings must be a matrix with 2 columns: {list(paddings.shape)}")
    for d in range(4):
        lo, hi, size = int(paddings[d, 0]), int(paddings[d, 1]), x.shape[d]
        if mode == "REFLECT" and max(lo, hi) >= size:
            raise _invalid(
                f"paddings must be less than the dimension size: {lo}, {hi} not less than {size}"
            )
        if mode == "SYMMETRIC" and max(lo, hi) > size:
            raise _invalid(
                f"paddings must be no greater than the dimension size: {lo}, {hi} greater "
                f"than {size}"
            )
    return np.pad(x, paddings, mode="reflect" if mode == "REFLECT" else "symmetric")


def _fused_conv_shape(op, resized):
    x = op.inputs[0].shape.with_rank(4)
    w = op.inputs[-1].shape.with_rank(4)
    dims = x.as_list()
    if resized:
        size = ops.constant_value(op.inputs[1])
        dims[1:3] = [None, None] if size is None else [int(size[0]), int(size[1])]
    pads = ops.constant_value(op.inputs[-2])
    if pads is None:
        return [tensor_shape.TensorShape([None, None, None, w[3]])]
    dims = [None if d is None else d + int(p[0]) + int(p[1]) for d, p in zip(dims, pads)]
    strides, padding = op._attr("strides"), op._attr("padding")
    kh, kw = w[0].value, w[1].value
    oh = conv_ops.static_out_size(dims[1], kh, strides[1], 1, padding)
    ow = conv_ops.static_out_size(dims[2], kw, strides[2], 1, padding)
    return [tensor_shape.TensorShape([dims[0], oh, ow, w[3]])]


_CONV_ATTRS = {"mode": REQUIRED, "strides": REQUIRED, "padding": REQUIRED}
FusedPadConv2D = register_op(
    "FusedPadConv2D",
    inputs=["input: T", "paddings: int32", "filter: T"],
    outputs=["output: T"],
    attrs={"T": TypeConstraint(["bfloat16", "float16", "float32", "float64"]), **_CONV_ATTRS},
    shape_fn=lambda op: _fused_conv_shape(op, False),
)
FusedResizeAndPadConv2D = register_op(
    "FusedResizeAndPadConv2D",
    inputs=["input: T", "size: int32", "paddings: int32", "filter: T"],
    outputs=["output: T"],
    attrs={
        "T": TypeConstraint(["float16", "float32", "float64"]),
        "resize_align_corners": False,
        **_CONV_ATTRS,
    },
    shape_fn=lambda op: _fused_conv_shape(op, True),
)


def _fused_conv(ctx, x, paddings, w):
    if x.ndim != 4 or w.ndim != 4:
        raise _invalid("input and filter must be 4-dimensional")
    if w.shape[2] != x.shape[3]:
        raise _invalid(f"input and filter must have the same depth: {x.shape[3]} vs {w.shape[2]}")
    padded = _mirror(x, paddings, ctx.attrs["mode"])
    out = _conv_valid_or_same(padded, w, ctx.attrs["strides"], ctx.attrs["padding"])
    return out.astype(w.dtype)


@FusedPadConv2D.kernel("CPU", host_memory=("paddings",))
async def _fused_pad_conv2d(ctx, x, paddings, w):
    x, w = np.asarray(x), np.asarray(w)
    return await ctx.device.compute(_fused_conv, ctx, x, paddings, w)


@FusedResizeAndPadConv2D.kernel("CPU", host_memory=("size", "paddings"))
async def _fused_resize_pad_conv2d(ctx, x, size, paddings, w):
    x, w = np.asarray(x), np.asarray(w)
    size = np.asarray(size).reshape(-1)
    if size.shape != (2,):
        raise _invalid(f"shape_t must be 1-dimensional with 2 elements{list(size.shape)}")
    align = ctx.attrs["resize_align_corners"]
    wy = image_ops.bilinear_matrix(x.shape[1], int(size[0]), align, False)
    wx = image_ops.bilinear_matrix(x.shape[2], int(size[1]), align, False)
    resized = image_ops._separable(x, wy, wx).astype(np.float32)
    return await ctx.device.compute(_fused_conv, ctx, resized, paddings, w)
