"""ScaleAndTranslate and its gradient (TF's `ScaleAndTranslate`, `ScaleAndTranslateGrad`;
`image_ops.scale_and_translate`).

Output pixel x (along each of H and W separately) samples the input at
sample = (x + 0.5 - translation) / scale, pixel centres at i + 0.5.  It is a weighted
sum of the inputs i within the kernel's radius of the sample (scaled by 1/scale when
shrinking with `antialias`), each weight kernel(|i + 0.5 - sample| / kernel_scale),
normalised to sum 1; a sample outside [0, size] gives 0.  So each axis is one
[out, in] weight matrix and the op is out = Wh @ image @ Ww^T per channel, computed
in float32 (TF's output dtype whatever the input's); the gradient applies the
transposed matrices.  Kernels: TF's lanczos1/3/5, gaussian, box, triangle, keyscubic,
mitchellcubic.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["scale_and_translate"]

_IMAGE_T = TypeConstraint(
    ["uint8", "uint16", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
     "float64"]
)  # fmt: skip


# The kernels of TF's sampling_kernels.h, in float32 as there (x = |distance|).
_F = np.float32


def _lanczos(r):
    def f(x):
        if x > r:
            return _F(0)
        if x <= _F(1e-3):  # the limit of sin(x) / x
            return _F(1)
        px = _F(np.pi) * x
        return _F(r * np.sin(px) * np.sin(px / _F(r)) / (_F(np.pi) * _F(np.pi) * x * x))

    return f, _F(r)


def _gaussian(x):
    sigma = _F(0.5)
    if x >= _F(1.5):
        return _F(0)
    return _F(np.exp(-float(x) * float(x) / (2.0 * float(sigma) * float(sigma))))


def _box(x):
    return _F(1) if x < _F(0.5) else _F(0.5) if x == _F(0.5) else _F(0)


def _triangle(x):
    return _F(1) - x if x < _F(1) else _F(0)


def _keys_cubic(x):
    if x >= _F(2):
        return _F(0)
    if x >= _F(1):
        return ((_F(-0.5) * x + _F(2.5)) * x - _F(4)) * x + _F(2)
    return ((_F(1.5) * x - _F(2.5)) * x) * x + _F(1)


def _mitchell_cubic(x):
    if x >= _F(2):
        return _F(0)
    if x >= _F(1):
        return ((_F(-7 / 18) * x + _F(2)) * x - _F(10 / 3)) * x + _F(16 / 9)
    return ((_F(7 / 6) * x - _F(2)) * x) * x + _F(8 / 9)


_KERNELS = {
    "lanczos1": _lanczos(1),
    "lanczos3": _lanczos(3),
    "lanczos5": _lanczos(5),
    "gaussian": (_gaussian, _F(1.5)),
    "box": (_box, _F(1)),
    "triangle": (_triangle, _F(1)),
    "keyscubic": (_keys_cubic, _F(2)),
    "mitchellcubic": (_mitchell_cubic, _F(2)),
}


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _weights(kernel_type: str, antialias: bool, out_size: int, in_size: int, scale, shift):
    """The [out_size, in_size] float32 matrix of one axis: TF's spans, in float32 as TF
    computes them (so a sample exactly on a box kernel's edge weighs what it does there)."""
    kernel, radius = _KERNELS[kernel_type]
    with np.errstate(all="ignore"):
        inv_scale = _F(1.0 / float(_F(scale)))
        inv_shift = -inv_scale * _F(shift)
        kernel_scale = max(inv_scale, _F(1)) if antialias else _F(1)
        reach = radius * kernel_scale
        one_over = _F(1) / kernel_scale
        w = np.zeros((out_size, in_size), np.float32)
        for x in range(out_size):
            s = _F(x + 0.5) * inv_scale + inv_shift
            if s < 0 or s > in_size:
                continue
            lo = min(max(math.ceil(s - reach - _F(0.5)), 0), in_size - 1)
            hi = min(max(math.floor(s + reach - _F(0.5)), 0), in_size - 1) + 1
            row = [kernel(abs((_F(i) + _F(0.5) - s) * one_over)) for i in range(lo, hi)]
            total = _F(0)
            for v in row:
                total += v
            if abs(total) >= _F(1000) * np.finfo(np.float32).tiny:
                w[x, lo:hi] = np.array(row, np.float32) * (_F(1) / total)
    return w


def _check(attrs, size, scale, translation):
    if attrs["kernel_type"] not in _KERNELS:
        raise _invalid(f"Unrecognized kernel type: {attrs['kernel_type']}")
    size, scale, translation = (np.asarray(v) for v in (size, scale, translation))
    for name, v in (("size", size), ("scale", scale), ("translation", translation)):
        if v.shape != (2,):
            raise _invalid(f"{name} must be a 1-D tensor of 2 elements: {list(v.shape)}")
    if (size <= 0).any():
        raise _invalid("output dimensions must be positive")
    if not (scale > 0).all():
        raise _invalid("Scale must be greater than zero.")
    return [int(v) for v in size], [float(v) for v in scale], [float(v) for v in translation]


def _matrices(attrs, in_hw, size, scale, translation):
    size, scale, translation = _check(attrs, size, scale, translation)
    k, aa = attrs["kernel_type"], attrs["antialias"]
    wh = _weights(k, aa, size[0], in_hw[0], scale[0], translation[0])
    ww = _weights(k, aa, size[1], in_hw[1], scale[1], translation[1])
    return wh, ww


def _scale_shape(op):
    images = op.inputs[0].shape.with_rank(4)
    size = ops.constant_value(op.inputs[1])
    h, w = (int(size[0]), int(size[1])) if size is not None else (None, None)
    return [tensor_shape.TensorShape([images.dims[0], h, w, images.dims[3]])]


ScaleAndTranslate = register_op(
    "ScaleAndTranslate",
    inputs=["images: T", "size: int32", "scale: float32", "translation: float32"],
    outputs=["resized_images: float32"],
    attrs={"T": _IMAGE_T, "kernel_type": "lanczos3", "antialias": True},
    shape_fn=_scale_shape,
)


def _host(x) -> np.ndarray:
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


@ScaleAndTranslate.kernel("CPU", host_memory=("size", "scale", "translation"))
async def _scale_and_translate(ctx, images, size, scale, translation):
    images = _host(images)
    if images.ndim != 4:
        raise _invalid(f"input must be 4-dimensional{list(images.shape)}")
    wh, ww = _matrices(ctx.attrs, images.shape[1:3], _host(size), _host(scale),
                       _host(translation))  # fmt: skip
    x = images.astype(np.float32)
    # [H', H] x [N, H, W, C] -> [N, H', W, C], then over W
    return np.einsum("ph,nhwc,qw->npqc", wh, x, ww, optimize=True).astype(np.float32)


def _grad_shape(op):
    grads = op.inputs[0].shape.with_rank(4)
    orig = op.inputs[1].shape.with_rank(4)
    return [tensor_shape.TensorShape([grads.dims[0], orig.dims[1], orig.dims[2], grads.dims[3]])]


ScaleAndTranslateGrad = register_op(
    "ScaleAndTranslateGrad",
    inputs=["grads: T", "original_image: T", "scale: float32", "translation: float32"],
    outputs=["output: T"],
    attrs={"T": TypeConstraint(["float32"]), "kernel_type": "lanczos3", "antialias": True},
    shape_fn=_grad_shape,
)


NotDifferentiable("ScaleAndTranslateGrad")  # as in TF


@ScaleAndTranslateGrad.kernel("CPU", host_memory=("scale", "translation"))
async def _scale_and_translate_grad(ctx, grads, original, scale, translation):
    grads, original = _host(grads), _host(original)
    size = np.array(grads.shape[1:3])
    wh, ww = _matrices(ctx.attrs, original.shape[1:3], size, _host(scale), _host(translation))
    return np.einsum("ph,npqc,qw->nhwc", wh, grads.astype(np.float32), ww, optimize=True)


@ScaleAndTranslate.gradient
def _scale_and_translate_gradient(op, grad):
    attrs = {"kernel_type": op._attr("kernel_type"), "antialias": op._attr("antialias")}
    image = op.inputs[0]
    if image.dtype.base_dtype.name != "float32":
        return [None, None, None, None]
    dx = ops.apply_op(
        "ScaleAndTranslateGrad", [grad, image, op.inputs[2], op.inputs[3]], attrs
    ).outputs[0]
    return [dx, None, None, None]


def scale_and_translate(
    images, size, scale, translation, kernel_type="lanczos3", antialias=True, name=None
):
    """Resizes `images` [N, H, W, C] to `size` by sampling at (x + 0.5 - translation) /
    scale with `kernel_type`, antialiased when shrinking; float32 out.

    Raises (when run):
      InvalidArgumentError: an unknown kernel, size not positive, scale not positive,
        or images not 4-D.
    """
    with ops.name_scope(name, "ScaleAndTranslate", [images, size, scale, translation]):
        op = ops.apply_op(
            "ScaleAndTranslate",
            [
                ops.convert_to_tensor(images),
                ops.convert_to_tensor(size, dtype="int32"),
                ops.convert_to_tensor(scale, dtype="float32"),
                ops.convert_to_tensor(translation, dtype="float32"),
            ],
            {"kernel_type": kernel_type, "antialias": antialias},
            name="ScaleAndTranslate",
        )
    return op.outputs[0]
