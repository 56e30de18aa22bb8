"""`tf.image.ssim` and `tf.image.ssim_multiscale`: composites of ordinary ops built as TF
2.21 builds them (an 11x11 Gaussian window from a softmax, a VALID depthwise
convolution as the local mean, luminance x contrast-structure averaged over height and
width, then channels; MS-SSIM over five 2x2 average-pooled scales, odd sizes padded
symmetrically first), so they give TF's numbers and differentiate like any graph.
asyncflow.image binds them to its `convert_image_dtype` (which lives there).
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    control_flow_cond,
    conv_ops,
    manip_ops,
    math_ops,
    nn_ops,
    pooling_ops,
    reduction_ops,
)

__all__ = ["ssim", "ssim_multiscale"]

MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _gauss(size, sigma):
    """The size x size x 1 x 1 Gaussian window (MATLAB's fspecial), normalised by a softmax."""
    coords = cast_ops.cast(reduction_ops.range(size), sigma.dtype)
    coords -= cast_ops.cast(size - 1, sigma.dtype) / 2.0
    g = math_ops.square(coords)
    g *= -0.5 / math_ops.square(sigma)
    g = array_ops.reshape(g, [1, -1]) + array_ops.reshape(g, [-1, 1])
    g = nn_ops.softmax(array_ops.reshape(g, [1, -1]))
    return array_ops.reshape(g, [size, size, 1, 1])


def _per_channel(img1, img2, max_val, filter_size, filter_sigma, k1, k2, index_map=False):
    filter_size = ops.convert_to_tensor(filter_size, dtypes.int32)
    filter_sigma = ops.convert_to_tensor(filter_sigma, img1.dtype)
    shape1, shape2 = array_ops.shape_n([img1, img2])
    checks = [
        check_ops.Assert(
            reduction_ops.reduce_all(math_ops.greater_equal(s[-3:-1], filter_size)),
            [s, filter_size],
            summarize=8,
        )
        for s in (shape1, shape2)
    ]
    with ops.control_dependencies(checks):
        img1 = array_ops.identity(img1)
    kernel = _gauss(filter_size, filter_sigma)
    kernel = manip_ops.tile(kernel, [1, 1, shape1[-1], 1])

    def reducer(x):
        shape = array_ops.shape(x)
        x = array_ops.reshape(x, manip_ops.concat([[-1], shape[-3:]], 0))
        y = conv_ops.depthwise_conv2d(x, kernel, strides=[1, 1, 1, 1], padding="VALID")
        return array_ops.reshape(y, manip_ops.concat([shape[:-3], array_ops.shape(y)[1:]], 0))

    c1 = (k1 * max_val) ** 2
    c2 = (k2 * max_val) ** 2
    mean0, mean1 = reducer(img1), reducer(img2)
    num0 = mean0 * mean1 * 2.0
    den0 = math_ops.square(mean0) + math_ops.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(img1 * img2) * 2.0
    den1 = reducer(math_ops.square(img1) + math_ops.square(img2))
    c2 *= 1.0  # (TF's compensation: 1.0, to match MATLAB's MS-SSIM)
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    if index_map:
        return luminance * cs, cs
    axes = ops.convert_to_tensor([-3, -2], dtypes.int32)
    return reduction_ops.reduce_mean(luminance * cs, axes), reduction_ops.reduce_mean(cs, axes)


def _prepare(convert, img1, img2, max_val):
    img1 = ops.convert_to_tensor(img1, name="img1")
    img2 = ops.convert_to_tensor(img2, name="img2")
    s1, s2 = img1.shape, img2.shape
    if s1.ndims is not None and s1.ndims < 3 or s2.ndims is not None and s2.ndims < 3:
        raise ValueError("Shape must be at least rank 3")
    if s1.ndims is not None and s2.ndims is not None:
        for a, b in zip(s1.dims[-3:], s2.dims[-3:]):
            if a is not None and b is not None and a != b:
                raise ValueError(f"Shapes {s1} and {s2} are incompatible")
    shape1, shape2 = array_ops.shape(img1), array_ops.shape(img2)
    checks = [check_ops.assert_equal(shape1[-3:], shape2[-3:], message="Shapes must be equal")]
    with ops.control_dependencies(checks):
        img1 = array_ops.identity(img1)
    max_val = cast_ops.cast(max_val, img1.dtype)
    max_val = convert(max_val, dtypes.float32)
    img1 = convert(img1, dtypes.float32)
    img2 = convert(img2, dtypes.float32)
    return img1, img2, shape1, shape2, max_val


def ssim(convert, img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         return_index_map=False):  # fmt: skip
    """Structural similarity of two batches of images [..., height, width, channels],
    averaged over channels (TF's `tf.image.ssim`); `convert` is `convert_image_dtype`
    (asyncflow.image binds it).

    Raises:
      ValueError: at build time, for images of rank < 3 or different image shapes.
      InvalidArgumentError: at run time, for images smaller than the filter or of
        different shapes.
    """
    with ops.name_scope(None, "SSIM", [img1, img2]):
        img1, img2, _, _, max_val = _prepare(convert, img1, img2, max_val)
        value, _ = _per_channel(
            img1, img2, max_val, filter_size, filter_sigma, k1, k2, return_index_map
        )
        return reduction_ops.reduce_mean(value, [-1])


def ssim_multiscale(convert, img1, img2, max_val, power_factors=MSSSIM_WEIGHTS, filter_size=11,
                    filter_sigma=1.5, k1=0.01, k2=0.03):  # fmt: skip
    """Multi-scale SSIM (TF's `tf.image.ssim_multiscale`): the contrast-structure of each
    scale but the last and the last's SSIM, each relu'd, raised to `power_factors` and
    multiplied; averaged over channels.

    Raises:
      ValueError / InvalidArgumentError: as `ssim` (each scale must still hold the filter).
    """
    with ops.name_scope(None, "MS-SSIM", [img1, img2]):
        img1, img2, shape1, shape2, max_val = _prepare(convert, img1, img2, max_val)
        imgs = [img1, img2]
        heads = [s[:-3] for s in (shape1, shape2)]
        tails = [s[-3:] for s in (shape1, shape2)]
        divisor = [1, 2, 2, 1]
        divisor_tensor = ops.convert_to_tensor(divisor[1:], dtypes.int32)

        def do_pad(images, remainder):
            padding = array_ops.expand_dims(remainder, -1)
            padding = manip_ops.pad(padding, [[1, 0], [1, 0]])
            return [manip_ops.pad(x, padding, mode="SYMMETRIC") for x in images]

        mcs = []
        value = None
        for k in range(len(power_factors)):
            with ops.name_scope(None, f"Scale{k}", imgs):
                if k > 0:
                    flat = [
                        array_ops.reshape(x, manip_ops.concat([[-1], t], 0))
                        for x, t in zip(imgs, tails)
                    ]
                    remainder = tails[0] % divisor_tensor
                    need = reduction_ops.reduce_any(math_ops.not_equal(remainder, 0))
                    padded = control_flow_cond.cond(
                        need, lambda f=flat, r=remainder: do_pad(f, r), lambda f=flat: f
                    )
                    down = [pooling_ops.avg_pool(x, divisor, divisor, "VALID") for x in padded]
                    tails = [x[1:] for x in array_ops.shape_n(down)]
                    imgs = [
                        array_ops.reshape(x, manip_ops.concat([h, t], 0))
                        for x, h, t in zip(down, heads, tails)
                    ]
                value, cs = _per_channel(*imgs, max_val, filter_size, filter_sigma, k1, k2)
                mcs.append(nn_ops.relu(cs))
        mcs.pop()  # (the last scale contributes its full SSIM instead)
        stacked = manip_ops.stack([*mcs, nn_ops.relu(value)], axis=-1)
        ms = reduction_ops.reduce_prod(math_ops.pow(stacked, list(power_factors)), [-1])
        return reduction_ops.reduce_mean(ms, [-1])
