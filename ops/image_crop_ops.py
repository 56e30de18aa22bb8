"""CropAndResize and its gradients (TF's `tf.image.crop_and_resize`,
CropAndResizeGradImage, CropAndResizeGradBoxes).

Each box [y1, x1, y2, x2] (normalised: 0 and 1 are the first and last pixel centres)
of image box_ind[i] is sampled on a crop_height x crop_width grid, bilinearly or at the
nearest pixel; grid points outside the image take `extrapolation_value`.  The sample
positions are TF's kernel's: in_y = y1 * (H - 1) + y * (y2 - y1) * (H - 1) / (ch - 1),
or the box centre when ch == 1.  The output is float32 whatever the image dtype.
Gradients flow to the image (bilinear: each sample's four weights, scattered back) and
to the boxes (by the bilinear formula whatever the method, as TF), never to box_ind or
crop_size.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import check_ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["crop_and_resize"]

_IMAGE_T = TypeConstraint(
    ["uint8", "uint16", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
     "float64"]
)  # fmt: skip
_FLOATS = TypeConstraint(["float16", "float32", "float64"], "float32")
_METHODS = ("bilinear", "nearest")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _host(x) -> np.ndarray:
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def _crop_shape(op):
    image, boxes, box_ind, crop_size = (t.shape for t in op.inputs)
    image = image.with_rank(4)
    boxes = boxes.with_rank(2)
    box_ind = box_ind.with_rank(1)
    n = boxes.dims[0] if boxes.dims[0] is not None else box_ind.dims[0]
    if boxes.dims[1] is not None and boxes.dims[1] != 4:
        raise ValueError(f"Dimension must be 4 but is {boxes.dims[1]}")
    crop_size = crop_size.with_rank(1)
    if crop_size.dims[0] is not None and crop_size.dims[0] != 2:
        raise ValueError(f"Dimension must be 2 but is {crop_size.dims[0]} for crop_size")
    size = ops.constant_value(op.inputs[3])
    ch, cw = (int(size[0]), int(size[1])) if size is not None else (None, None)
    return [tensor_shape.TensorShape([n, ch, cw, image.dims[3]])]


CropAndResize = register_op(
    "CropAndResize",
    inputs=["image: T", "boxes: float32", "box_ind: int32", "crop_size: int32"],
    outputs=["crops: float32"],
    attrs={"T": _IMAGE_T, "method": "bilinear", "extrapolation_value": 0.0},
    shape_fn=_crop_shape,
)


def _check(image, boxes, box_ind, crop_size, method):
    if method not in _METHODS:
        raise _invalid(f"method must be 'bilinear' or 'nearest', got {method!r}")
    if image.ndim != 4:
        raise _invalid(f"input image must be 4-D, got shape {list(image.shape)}")
    if image.shape[1] <= 0 or image.shape[2] <= 0:
        raise _invalid("image dimensions must be positive")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise _invalid(f"boxes must be 2-D [num_boxes, 4], got {list(boxes.shape)}")
    if box_ind.ndim != 1 or box_ind.shape[0] != boxes.shape[0]:
        raise _invalid(f"box_index has incompatible shape {list(box_ind.shape)}")
    size = _host(crop_size).reshape(-1)
    if size.shape != (2,):
        raise _invalid(f"crop_size must be a 1-D tensor of length 2, got {list(size.shape)}")
    if size[0] <= 0 or size[1] <= 0:
        raise _invalid("crop dimensions must be positive")
    if box_ind.size and ((box_ind < 0) | (box_ind >= image.shape[0])).any():
        raise errors.OutOfRangeError(None, None, "box_index has values outside [0, batch_size)")
    return int(size[0]), int(size[1])


def _positions(lo, hi, n, size):
    """Sample positions [num_boxes, n] along one axis, as TF's kernel computes them."""
    lo, hi = lo[:, None].astype(np.float32), hi[:, None].astype(np.float32)
    if n > 1:
        scale = (hi - lo) * np.float32(size - 1) / np.float32(n - 1)
        return lo * np.float32(size - 1) + np.arange(n, dtype=np.float32)[None, :] * scale
    return np.float32(0.5) * (lo + hi) * np.float32(size - 1) + np.zeros((1, n), np.float32)


def _roundf(v):
    """C's roundf (half away from zero; positions in range are >= 0), not NumPy's
    half-to-even."""
    return np.floor(np.asarray(v) + 0.5).astype(np.int64)


def _grid(boxes, h, w, ch, cw):
    ys = _positions(boxes[:, 0], boxes[:, 2], ch, h)
    xs = _positions(boxes[:, 1], boxes[:, 3], cw, w)
    valid_y = (ys >= 0) & (ys <= h - 1)
    valid_x = (xs >= 0) & (xs <= w - 1)
    return ys, xs, valid_y, valid_x


def _crop(image, boxes, box_ind, ch, cw, method, extrapolation):
    n = boxes.shape[0]
    _, h, w, d = image.shape
    out = np.empty((n, ch, cw, d), np.float32)
    if n == 0:
        return out
    ys, xs, vy, vx = _grid(boxes, h, w, ch, cw)
    img = image.astype(np.float32, copy=False)
    b = box_ind[:, None, None]
    if method == "bilinear":
        top = np.floor(ys).astype(np.int64).clip(0, h - 1)
        bottom = np.ceil(ys).astype(np.int64).clip(0, h - 1)
        left = np.floor(xs).astype(np.int64).clip(0, w - 1)
        right = np.ceil(xs).astype(np.int64).clip(0, w - 1)
        y_lerp = (ys - np.floor(ys))[:, :, None, None]
        x_lerp = (xs - np.floor(xs))[:, None, :, None]
        t, bt = top[:, :, None], bottom[:, :, None]
        lf, rt = left[:, None, :], right[:, None, :]
        tl, tr = img[b, t, lf], img[b, t, rt]
        bl, br = img[b, bt, lf], img[b, bt, rt]
        top_v = tl + (tr - tl) * x_lerp
        bottom_v = bl + (br - bl) * x_lerp
        out[...] = top_v + (bottom_v - top_v) * y_lerp
    else:
        cy = _roundf(ys).clip(0, h - 1)
        cx = _roundf(xs).clip(0, w - 1)
        out[...] = img[b, cy[:, :, None], cx[:, None, :]]
    inside = (vy[:, :, None] & vx[:, None, :])[..., None]
    return np.where(inside, out, np.float32(extrapolation))


@CropAndResize.kernel(host_memory=("crop_size",))
async def _crop_and_resize(ctx, image, boxes, box_ind, crop_size):
    image, boxes, box_ind = _host(image), _host(boxes), _host(box_ind)
    method = ctx.attrs["method"]
    ch, cw = _check(image, boxes, box_ind, crop_size, method)
    out = await ctx.device.compute(
        _crop, image, boxes, box_ind, ch, cw, method, ctx.attrs["extrapolation_value"]
    )
    return ctx.xp.asarray(out)


# -- gradients ------------------------------------------------------------------------------

CropAndResizeGradImage = register_op(
    "CropAndResizeGradImage",
    inputs=["grads: float32", "boxes: float32", "box_ind: int32", "image_size: int32"],
    outputs=["output: T"],
    attrs={"T": _FLOATS, "method": "bilinear"},
    shape_fn=lambda op: [
        tensor_shape.TensorShape(
            None
            if ops.constant_value(op.inputs[3]) is None
            else [int(d) for d in ops.constant_value(op.inputs[3])]
        )
    ],
)
NotDifferentiable("CropAndResizeGradImage")


def _grad_image(grads, boxes, box_ind, shape, method, np_dtype):
    batch, h, w, d = shape
    out = np.zeros((batch, h, w, d), np.float64)
    n, ch, cw, _ = grads.shape
    if n == 0:
        return out.astype(np_dtype)
    ys, xs, vy, vx = _grid(boxes, h, w, ch, cw)
    inside = vy[:, :, None] & vx[:, None, :]
    bi, yi, xi = np.nonzero(inside)
    g = grads[bi, yi, xi].astype(np.float64)
    b = box_ind[bi]
    y, x = ys[bi, yi].astype(np.float64), xs[bi, xi].astype(np.float64)
    if method == "bilinear":
        top, left = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
        bottom, right = np.ceil(y).astype(np.int64), np.ceil(x).astype(np.int64)
        yl, xl = (y - top)[:, None], (x - left)[:, None]
        for rows, cols, wgt in (
            (top, left, (1 - yl) * (1 - xl)),
            (top, right, (1 - yl) * xl),
            (bottom, left, yl * (1 - xl)),
            (bottom, right, yl * xl),
        ):
            np.add.at(out, (b, rows, cols), g * wgt)
    else:
        np.add.at(out, (b, _roundf(y), _roundf(x)), g)
    return out.astype(np_dtype)


@CropAndResizeGradImage.kernel(host_memory=("image_size",))
async def _crop_and_resize_grad_image(ctx, grads, boxes, box_ind, image_size):
    grads, boxes, box_ind = _host(grads), _host(boxes), _host(box_ind)
    shape = [int(v) for v in _host(image_size).reshape(-1)]
    if len(shape) != 4 or min(shape[1:3]) <= 0:
        raise _invalid("image_size must be a 4-D vector with positive height and width")
    if box_ind.size and ((box_ind < 0) | (box_ind >= shape[0])).any():
        raise errors.OutOfRangeError(None, None, "box_index has values outside [0, batch_size)")
    dt = ctx.attrs["T"].as_numpy_dtype
    out = await ctx.device.compute(
        _grad_image, grads, boxes, box_ind, shape, ctx.attrs["method"], dt
    )
    return ctx.xp.asarray(out)


CropAndResizeGradBoxes = register_op(
    "CropAndResizeGradBoxes",
    inputs=["grads: float32", "image: T", "boxes: float32", "box_ind: int32"],
    outputs=["output: float32"],
    attrs={"T": _IMAGE_T, "method": "bilinear"},
    shape_fn=lambda op: [op.inputs[2].shape],
)
NotDifferentiable("CropAndResizeGradBoxes")


def _grad_boxes(grads, image, boxes, box_ind):
    n, ch, cw, _ = grads.shape
    _, h, w, _ = image.shape
    out = np.zeros((n, 4), np.float64)
    if n == 0:
        return out.astype(np.float32)
    img = image.astype(np.float64)
    ys, xs, vy, vx = _grid(boxes, h, w, ch, cw)
    ys, xs = ys.astype(np.float64), xs.astype(np.float64)
    for i in range(n):
        b = box_ind[i]
        for yy in range(ch):
            if not vy[i, yy]:
                continue
            in_y = ys[i, yy]
            t, bt = int(np.floor(in_y)), int(np.ceil(in_y))
            yl = in_y - t
            for xx in range(cw):
                if not vx[i, xx]:
                    continue
                in_x = xs[i, xx]
                lf, rt = int(np.floor(in_x)), int(np.ceil(in_x))
                xl = in_x - lf
                tl, tr = img[b, t, lf], img[b, t, rt]
                bl, br = img[b, bt, lf], img[b, bt, rt]
                g = grads[i, yy, xx].astype(np.float64)
                image_grad_y = np.sum(g * ((1 - xl) * (bl - tl) + xl * (br - tr)))
                image_grad_x = np.sum(g * ((1 - yl) * (tr - tl) + yl * (br - bl)))
                if ch > 1:
                    out[i, 0] += image_grad_y * ((h - 1) - yy * (h - 1) / (ch - 1))
                    out[i, 2] += image_grad_y * (yy * (h - 1) / (ch - 1))
                else:
                    out[i, 0] += image_grad_y * 0.5 * (h - 1)
                    out[i, 2] += image_grad_y * 0.5 * (h - 1)
                if cw > 1:
                    out[i, 1] += image_grad_x * ((w - 1) - xx * (w - 1) / (cw - 1))
                    out[i, 3] += image_grad_x * (xx * (w - 1) / (cw - 1))
                else:
                    out[i, 1] += image_grad_x * 0.5 * (w - 1)
                    out[i, 3] += image_grad_x * 0.5 * (w - 1)
    return out.astype(np.float32)


@CropAndResizeGradBoxes.kernel()
async def _crop_and_resize_grad_boxes(ctx, grads, image, boxes, box_ind):
    grads, image, boxes, box_ind = _host(grads), _host(image), _host(boxes), _host(box_ind)
    if box_ind.size and ((box_ind < 0) | (box_ind >= image.shape[0])).any():
        raise errors.OutOfRangeError(None, None, "box_index has values outside [0, batch_size)")
    out = await ctx.device.compute(_grad_boxes, grads, image, boxes, box_ind)
    return ctx.xp.asarray(out)


@CropAndResize.gradient
def _crop_and_resize_grad(op, grad):
    image, boxes, box_ind, _ = op.inputs
    method = op._attr("method")
    image_shape = ops.apply_op("Shape", [image]).outputs[0]
    allowed = (dtypes.float16, dtypes.float32, dtypes.float64)
    grad_image = None
    if image.dtype.base_dtype in allowed:
        grad_image = ops.apply_op(
            "CropAndResizeGradImage",
            [grad, boxes, box_ind, image_shape],
            {"T": image.dtype.base_dtype, "method": method},
        ).outputs[0]
    # As TF: the boxes' gradient is the bilinear one whatever the method.
    grad_boxes = ops.apply_op("CropAndResizeGradBoxes", [grad, image, boxes, box_ind]).outputs[0]
    return [grad_image, grad_boxes, None, None]


def crop_and_resize(
    image, boxes, box_ind=None, crop_size=None, method="bilinear", extrapolation_value=0.0,
    name=None, box_indices=None,
):  # fmt: skip
    """Crops of `image` at `boxes`, each resized to `crop_size` (`tf.image.crop_and_resize`).

    Raises:
      ValueError: at build time, for a non-4-D image or boxes not [num_boxes, 4].
      InvalidArgumentError: at run time, for a box index outside the batch or a
        non-positive crop size.
    """
    if box_ind is None:
        box_ind = box_indices
    attrs = {"method": method, "extrapolation_value": float(extrapolation_value)}
    return ops.apply_op(
        "CropAndResize", [image, boxes, box_ind, crop_size], attrs, name=name
    ).outputs[0]


def bounding_box_checks(conditions) -> list:
    """TF's `_assert` over (condition, message) pairs of a crop or pad to a bounding box,
    in TF's order: a Python bool fails at once with ValueError(message); a tensor
    becomes an Assert whose run-time failure is "assertion failed: [message]".

    Raises:
      ValueError: a condition known false at build time.
    """
    asserts = []
    for condition, message in conditions:
        if isinstance(condition, bool | np.bool_):
            if not condition:
                raise ValueError(message)
        else:
            asserts.append(check_ops.Assert(condition, [message]))
    return asserts
