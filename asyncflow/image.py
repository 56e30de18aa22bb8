"""`af.image`: TF1's `tf.image` (graph mode), built on the resize and codec ops of
ops/image_ops.py and ordinary array and math ops (so those parts differentiate).

Images are 3-D [height, width, channels] or 4-D [batch, height, width, channels].
Float images hold values in [0, 1]; integer images the full range of their dtype, as
`convert_image_dtype` maps between them.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, image_ssim
from asyncflow import graph as ops
from asyncflow.deprecation import deprecated_argument_lookup
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    control_flow_cond,
    control_flow_ordering,
    conv_ops,
    image_crop_ops,
    image_draw_ops,
    image_nms_ops,
    image_ops,
    image_patches_ops,
    image_sample_box_ops,
    manip_ops,
    math_ops,
    matmul_ops,
    random_ops,
    reduction_ops,
    slicing_ops,
    string_ops,
)
from asyncflow.ops.image_proposals_ops import generate_bounding_box_proposals
from asyncflow.ops.jpeg_ops import (
    decode_and_crop_jpeg,
    decode_webp,
    encode_jpeg_variable_quality,
    extract_jpeg_shape,
)

__all__ = [
    "adjust_jpeg_quality",
    "random_jpeg_quality",
    "decode_and_crop_jpeg",
    "decode_webp",
    "extract_jpeg_shape",
    "extract_image_patches",
    "extract_patches",
    "crop_and_resize",
    "combined_non_max_suppression",
    "draw_bounding_boxes",
    "extract_glimpse",
    "generate_bounding_box_proposals",
    "non_max_suppression",
    "non_max_suppression_overlaps",
    "non_max_suppression_padded",
    "non_max_suppression_with_scores",
    "sample_distorted_bounding_box",
    "ssim",
    "ssim_multiscale",
    "sobel_edges",
    "yuv_to_rgb",
    "rgb_to_yuv",
    "yiq_to_rgb",
    "rgb_to_yiq",
    "random_saturation",
    "random_hue",
    "adjust_saturation",
    "adjust_hue",
    "hsv_to_rgb",
    "rgb_to_hsv",
    "ResizeMethod",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "central_crop",
    "convert_image_dtype",
    "crop_to_bounding_box",
    "decode_bmp",
    "decode_gif",
    "decode_image",
    "decode_jpeg",
    "decode_png",
    "decode_jxl",
    "encode_jpeg",
    "encode_png",
    "flip_left_right",
    "flip_up_down",
    "grayscale_to_rgb",
    "image_gradients",
    "is_jpeg",
    "pad_to_bounding_box",
    "per_image_standardization",
    "psnr",
    "random_brightness",
    "random_contrast",
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "resize",
    "resize_area",
    "resize_bicubic",
    "resize_bilinear",
    "resize_image_with_crop_or_pad",
    "resize_image_with_pad",
    "resize_images",
    "resize_nearest_neighbor",
    "resize_with_crop_or_pad",
    "rgb_to_grayscale",
    "rot90",
    "total_variation",
    "transpose",
    "transpose_image",
]


class ResizeMethod:
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


_KIND = {
    0: "Bilinear",
    1: "NearestNeighbor",
    2: "Bicubic",
    3: "Area",
    "bilinear": "Bilinear",
    "nearest": "NearestNeighbor",
    "bicubic": "Bicubic",
    "area": "Area",
}


def _image(image, name="image"):
    image = ops.convert_to_tensor(image, name=name)
    if image.shape.ndims is not None and image.shape.ndims not in (3, 4):
        if name == "images":  # TF's resize words it without the shape
            raise ValueError("'images' must have either 3 or 4 dimensions.")
        raise ValueError(f"'image' (shape {image.shape}) must have either 3 or 4 dimensions.")
    return image


def _batched(image):
    """(4-D image, whether it was 3-D)."""
    if image.shape.ndims == 3:
        return array_ops.expand_dims(image, 0), True
    return image, False


def _unbatch(image, was_3d):
    return array_ops.squeeze(image, [0]) if was_3d else image


# -- resizing -------------------------------------------------------------


def _resize_op(kind, images, size, align_corners=False, name=None, half_pixel_centers=False):
    images = _image(images, "images")
    x, was_3d = _batched(images)
    out = image_ops.resize(kind, x, size, align_corners, half_pixel_centers, name=name)
    return _unbatch(out, was_3d)


def resize_bilinear(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bilinear resize to `size` = [new_height, new_width] (float32 result)."""
    return _resize_op("Bilinear", images, size, align_corners, name, half_pixel_centers)


def resize_nearest_neighbor(
    images, size, align_corners=False, name=None, half_pixel_centers=False
):
    """Nearest-neighbour resize (keeps the dtype)."""
    return _resize_op("NearestNeighbor", images, size, align_corners, name, half_pixel_centers)


def resize_bicubic(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bicubic resize (TF's Keys kernel; float32 result)."""
    return _resize_op("Bicubic", images, size, align_corners, name, half_pixel_centers)


def resize_area(images, size, align_corners=False, name=None):
    """Area-averaging resize (float32 result; no gradient, as in TF)."""
    return _resize_op("Area", images, size, align_corners, name)


def resize_images(
    images,
    size,
    method=ResizeMethod.BILINEAR,
    align_corners=False,
    preserve_aspect_ratio=False,
    name=None,
):
    """TF1's `tf.image.resize_images`: float32 unless NEAREST_NEIGHBOR; an image already
    of the requested static size comes back unchanged.

    Raises:
      ValueError: a bad rank or method.
    """
    with ops.name_scope(name, "resize", [images, size]):
        images = _image(images, "images")
        if method not in _KIND:
            raise ValueError("Resize method is not implemented: " + repr(method))
        size_v = _static_size(size)
        x, was_3d = _batched(images)
        h, w = x.shape[1].value, x.shape[2].value
        if preserve_aspect_ratio:
            if size_v is None or h is None or w is None:
                raise ValueError("preserve_aspect_ratio needs static sizes in asyncflow")
            f = min(size_v[0] / h, size_v[1] / w)
            size_v = np.array([int(round(h * f)), int(round(w * f))], np.int32)
            size = size_v
        if size_v is not None and (h, w) == (int(size_v[0]), int(size_v[1])):
            return _unbatch(x, was_3d)
        out = image_ops.resize(_KIND[method], x, size, align_corners)
        return _unbatch(out, was_3d)


def _static_size(size):
    """`size`'s value when known at build time, without making a Const for it (the
    resize op converts it: TF's "resize/size")."""
    if ops.is_tensor(size):
        return ops.constant_value(ops.convert_to_tensor(size))
    try:
        return np.asarray(size, np.int32)
    except (TypeError, ValueError):  # a list holding tensors
        return None


def resize(
    images,
    size,
    method=ResizeMethod.BILINEAR,
    align_corners=False,
    preserve_aspect_ratio=False,
    name=None,
):
    """`tf.compat.v1.image.resize` (= resize_images)."""
    return resize_images(images, size, method, align_corners, preserve_aspect_ratio, name)


# -- dtypes and value adjustments -----------------------------------------


@_dispatch.add_dispatch_support
def convert_image_dtype(image, dtype, saturate=False, name=None):
    """Convert between image dtypes, rescaling: integers span their range, floats [0, 1]."""
    image = ops.convert_to_tensor(image, name="image")
    dtype = dtypes.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer):
        raise AttributeError("dtype must be either floating point or integer")  # (TF's class)
    src = image.dtype.base_dtype
    if src == dtype:  # TF names this Identity outside the convert_image scope
        return array_ops.identity(image, name=name)
    # the last op of each path takes the scope's own name ("convert_image:0"), as in TF
    with ops.name_scope(name, "convert_image", [image]) as scope:
        if src.is_integer and dtype.is_integer:
            smax, dmax = int(src.max), int(dtype.max)
            if smax > dmax:
                scaled = math_ops.floordiv(image, (smax + 1) // (dmax + 1))
                return cast_ops.cast(scaled, dtype, name=scope)
            cast = cast_ops.cast(image, dtype)
            return math_ops.multiply(cast, (dmax + 1) // (smax + 1), name=scope)
        if src.is_floating and dtype.is_floating:
            return cast_ops.cast(image, dtype, name=scope)
        if src.is_integer:
            return math_ops.multiply(cast_ops.cast(image, dtype), 1.0 / int(src.max), name=scope)
        scaled = math_ops.multiply(image, float(dtype.max) + 0.5)
        if saturate:
            scaled = math_ops.minimum(math_ops.maximum(scaled, float(dtype.min)), float(dtype.max))
        return cast_ops.cast(scaled, dtype, name=scope)


def _as_float(image):
    image = _image(image)
    return image, convert_image_dtype(image, dtypes.float32)


def _as_float_or_half(image):
    """TF's colour-adjust kernels take float16 or float32 as is, anything else converted."""
    image = _image(image)
    if image.dtype.base_dtype in (dtypes.float16, dtypes.float32):
        return image, image
    return image, convert_image_dtype(image, dtypes.float32)


def _back(adjusted, like):
    return convert_image_dtype(adjusted, like.dtype, saturate=True)


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1/sqrt(N)) over each image's pixels and channels."""
    with ops.name_scope(None, "per_image_standardization", [image]) as scope:
        image = _image(image)
        image = cast_ops.cast(image, dtypes.float32)  # TF: float32 whatever the input
        axes = [-1, -2, -3]
        n = reduction_ops.reduce_prod(array_ops.shape(image)[-3:])
        mean = reduction_ops.reduce_mean(image, axes, keepdims=True)
        var = reduction_ops.reduce_mean(math_ops.square(image - mean), axes, keepdims=True)
        floor = math_ops.rsqrt(cast_ops.cast(n, image.dtype))
        adjusted = math_ops.maximum(math_ops.sqrt(var), floor)
        return math_ops.truediv(image - mean, adjusted, name=scope)


@_dispatch.add_dispatch_support
def adjust_brightness(image, delta):
    """image + delta (in the [0, 1] float scale)."""
    with ops.name_scope(None, "adjust_brightness", [image, delta]):
        image, flt = _as_float_or_half(image)
        return _back(flt + delta, image)


def adjust_contrast(images, contrast_factor):
    """(x - mean) * factor + mean, the mean per image and channel."""
    with ops.name_scope(None, "adjust_contrast", [images, contrast_factor]) as name:
        images, flt = _as_float_or_half(images)
        adjusted = ops.apply_op("AdjustContrastv2", [flt, contrast_factor], name=name).outputs[0]
        return _back(adjusted, images)


@_dispatch.add_dispatch_support
def adjust_gamma(image, gamma=1, gain=1):
    """gain * image ** gamma (in the [0, 1] float scale)."""
    with ops.name_scope(None, "adjust_gamma", [image, gamma, gain]):
        image, flt = _as_float_or_half(image)
        return _back(gain * math_ops.pow(flt, gamma), image)


@_dispatch.add_dispatch_support
def random_brightness(image, max_delta, seed=None):
    """adjust_brightness by a delta drawn uniformly from [-max_delta, max_delta).

    Raises:
      ValueError: max_delta < 0.
    """
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = random_ops.random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_brightness(image, delta)


def random_contrast(image, lower, upper, seed=None):
    """adjust_contrast by a factor drawn uniformly from [lower, upper).

    Raises:
      ValueError: upper <= lower or lower < 0.
    """
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = random_ops.random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


def rgb_to_grayscale(images, name=None):
    """Luma 0.2989 R + 0.5870 G + 0.1140 B, keeping a channel axis of 1."""
    with ops.name_scope(name, "rgb_to_grayscale", [images]) as scope:
        images = ops.convert_to_tensor(images, name="images")
        flt = convert_image_dtype(images, dtypes.float32)
        w = np.array([0.2989, 0.5870, 0.1140], np.float32)
        gray = reduction_ops.reduce_sum(flt * w, -1, keepdims=True)
        return convert_image_dtype(gray, images.dtype, name=scope)


def grayscale_to_rgb(images, name=None):
    """The one channel repeated three times."""
    with ops.name_scope(name, "grayscale_to_rgb", [images]) as scope:
        images = ops.convert_to_tensor(images, name="images")
        # TF: a Tile named after the scope, multiples [1, ..., 1, 3]
        ones = array_ops.ones(array_ops.expand_dims(array_ops.rank(images) - 1, 0), dtypes.int32)
        multiples = manip_ops.concat([ones, [3]], 0)
        rgb = manip_ops.tile(images, multiples, name=scope)
        if images.shape.ndims is not None:
            rgb.set_shape(images.shape[:-1].concatenate([3]))
        return rgb


# -- colour spaces ---------------------------------------------------------
# Built from element-wise ops, so they differentiate (almost everywhere) as TF's do.


def rgb_to_hsv(images, name=None):
    """Float RGB in [0, 1] to HSV (hue in [0, 1))."""
    with ops.name_scope(name, "rgb_to_hsv", [images]):
        x = ops.convert_to_tensor(images, name="images")
        r, g, b = (x[..., i] for i in range(3))
        v = reduction_ops.reduce_max(x, -1)
        rng = v - reduction_ops.reduce_min(x, -1)
        pos = math_ops.greater(rng, 0.0)
        safe = slicing_ops.where(pos, rng, array_ops.ones_like(rng))
        norm = 1.0 / (6.0 * safe)
        h = slicing_ops.where(
            math_ops.equal(r, v),
            norm * (g - b),
            slicing_ops.where(
                math_ops.equal(g, v), norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0
            ),
        )
        h = slicing_ops.where(pos, h, array_ops.zeros_like(h))
        h = slicing_ops.where(math_ops.less(h, 0.0), h + 1.0, h)
        vpos = math_ops.greater(v, 0.0)
        s = slicing_ops.where(
            vpos, rng / slicing_ops.where(vpos, v, array_ops.ones_like(v)), array_ops.zeros_like(v)
        )
        return manip_ops.stack([h, s, v], -1)


def hsv_to_rgb(images, name=None):
    """HSV (hue in [0, 1]) to float RGB."""
    with ops.name_scope(name, "hsv_to_rgb", [images]):
        x = ops.convert_to_tensor(images, name="images")
        h, s, v = (x[..., i] for i in range(3))
        c = s * v
        m = v - c
        dh = h * 6.0
        cat = math_ops.floor(dh)
        xx = c * (1.0 - math_ops.abs(math_ops.floormod(dh, 2.0) - 1.0))
        zero = array_ops.zeros_like(c)
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
            hit = math_ops.equal(cat, float(k))
            out = [slicing_ops.where(hit, row[i], out[i]) for i in range(3)]
        return manip_ops.stack([o + m for o in out], -1)


def _in_hsv(op_type, image, value, name, default):
    # One AdjustHue / AdjustSaturation op (ops/image_adjust_ops.py), which TF gives no
    # gradient: tf.gradients through it raises LookupError, as in TF.
    with ops.name_scope(name, default, [image]):
        image, flt = _as_float_or_half(image)
        return _back(ops.apply_op(op_type, [flt, value]).outputs[0], image)


def adjust_hue(image, delta, name=None):
    """Rotate the hue by `delta` (a fraction of the colour wheel, in [-1, 1])."""
    return _in_hsv("AdjustHue", image, delta, name, "adjust_hue")


def adjust_saturation(image, saturation_factor, name=None):
    """Scale the saturation by `saturation_factor` (clipped to [0, 1])."""
    return _in_hsv("AdjustSaturation", image, saturation_factor, name, "adjust_saturation")


def random_hue(image, max_delta, seed=None):
    """adjust_hue by a delta drawn from [-max_delta, max_delta] (max_delta <= 0.5).

    Raises:
      ValueError: max_delta outside [0, 0.5].
    """
    if not 0 <= max_delta <= 0.5:
        raise ValueError("max_delta must be in the interval [0, 0.5].")
    return adjust_hue(image, random_ops.random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image, lower, upper, seed=None):
    """adjust_saturation by a factor drawn from [lower, upper).

    Raises:
      ValueError: upper <= lower or lower < 0.
    """
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_saturation(image, random_ops.random_uniform([], lower, upper, seed=seed))


# TF's colour-space matrices (rows: input channel, columns: output channel).
_RGB_TO_YIQ = [
    [0.299, 0.59590059, 0.2115],
    [0.587, -0.27455667, -0.52273617],
    [0.114, -0.32134392, 0.31119955],
]
_YIQ_TO_RGB = [
    [1, 1, 1],
    [0.95598634, -0.27201283, -1.10674021],
    [0.6208248, -0.64720424, 1.70423049],
]
_RGB_TO_YUV = [
    [0.299, -0.14714119, 0.61497538],
    [0.587, -0.28886916, -0.51496512],
    [0.114, 0.43601035, -0.10001026],
]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _mix(images, kernel, name):
    with ops.name_scope(None, name, [images]):
        x = ops.convert_to_tensor(images, name="images")
        k = array_ops.constant(np.asarray(kernel, x.dtype.as_numpy_dtype))
        flat = array_ops.reshape(x, [-1, 3])
        return array_ops.reshape(matmul_ops.matmul(flat, k), array_ops.shape(x))


def rgb_to_yiq(images):
    return _mix(images, _RGB_TO_YIQ, "rgb_to_yiq")


def yiq_to_rgb(images):
    return _mix(images, _YIQ_TO_RGB, "yiq_to_rgb")


def rgb_to_yuv(images):
    return _mix(images, _RGB_TO_YUV, "rgb_to_yuv")


def yuv_to_rgb(images):
    return _mix(images, _YUV_TO_RGB, "yuv_to_rgb")


crop_and_resize = image_crop_ops.crop_and_resize
draw_bounding_boxes = image_draw_ops.draw_bounding_boxes
extract_glimpse = image_draw_ops.extract_glimpse
non_max_suppression = image_nms_ops.non_max_suppression
non_max_suppression_with_scores = image_nms_ops.non_max_suppression_with_scores
non_max_suppression_padded = image_nms_ops.non_max_suppression_padded
non_max_suppression_overlaps = image_nms_ops.non_max_suppression_overlaps
combined_non_max_suppression = image_nms_ops.combined_non_max_suppression
sample_distorted_bounding_box = image_sample_box_ops.sample_distorted_bounding_box


def sobel_edges(image):
    """Sobel dy and dx of a 4-D batch, edges reflected: [batch, h, w, depth, 2]."""
    image = ops.convert_to_tensor(image)
    depth = image.shape[3].value
    if depth is None:
        raise ValueError("sobel_edges needs a known depth")
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], image.dtype.as_numpy_dtype)
    k = np.stack([ky, ky.T], -1)  # [3, 3, 2]
    k = np.tile(k[:, :, None, :], [1, 1, depth, 1])  # [3, 3, depth, 2]
    padded = manip_ops.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    out = conv_ops.depthwise_conv2d(padded, k, [1, 1, 1, 1], "VALID")
    shape = manip_ops.concat([array_ops.shape(image), [2]], 0)
    return array_ops.reshape(out, shape)


# -- geometry -------------------------------------------------------------


def _axis(image, which):
    """The height (which=0) or width (1) axis of a 3-D or 4-D image."""
    return which + (1 if image.shape.ndims == 4 else 0)


def flip_left_right(image):
    image = _image(image)
    return slicing_ops.reverse(image, [_axis(image, 1)])


def flip_up_down(image):
    image = _image(image)
    return slicing_ops.reverse(image, [_axis(image, 0)])


def _random_flip(image, which, seed, scope_name):
    # TF: a cond for one image (its Merge the result), a 0/1 blend per image of a batch
    with ops.name_scope(None, scope_name, [image]) as scope:
        image = _image(image)
        axis = _axis(image, which)
        if image.shape.ndims == 3:
            draw = random_ops.random_uniform([], 0, 1.0, seed=seed)
            return control_flow_cond.cond(
                math_ops.less(draw, 0.5),
                lambda: slicing_ops.reverse(image, [axis]),
                lambda: image,
                name=scope,
            )
        n = array_ops.shape(image)[:1]
        draw = random_ops.random_uniform(n, 0, 1.0, seed=seed)
        flips = cast_ops.cast(math_ops.round(array_ops.reshape(draw, [-1, 1, 1, 1])), image.dtype)
        flipped = slicing_ops.reverse(image, [axis])
        return flips * flipped + (1 - flips) * image


def random_flip_left_right(image, seed=None):
    """Flip horizontally with probability 1/2 (each image of a batch on its own)."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """Flip vertically with probability 1/2 (each image of a batch on its own)."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


def _swap_hw(image, name=None):
    image = _image(image)
    perm = [0, 2, 1, 3] if image.shape.ndims == 4 else [1, 0, 2]
    return array_ops.transpose(image, perm, name=name)


def transpose_image(image, name=None):
    """`tf.image.transpose`: height and width swapped (of one image or a batch)."""
    with ops.name_scope(name, "transpose", [image]):
        return _swap_hw(image, name=name)


transpose = transpose_image


def rot90(image, k=1, name=None):
    """Rotate counter-clockwise by k * 90 degrees (k a Python int)."""
    with ops.name_scope(name, "rot90", [image]):
        image = _image(image)
        try:
            k = ops.convert_to_tensor(k, dtype=dtypes.int32, name="k")
        except ValueError as e:  # TF's conversion names the argument in its message
            raise ValueError(f"k: {e}") from None
        known = ops.constant_value(k)
        rotations = [
            lambda: image,
            lambda: flip_up_down(_swap_hw(image)),
            lambda: flip_up_down(flip_left_right(image)),
            lambda: _swap_hw(flip_up_down(image)),
        ]
        if known is not None:
            return rotations[int(known) % 4]()
        # a k known only when run: TF's choice among the four rotations
        k = math_ops.floormod(k, 4)

        def choose(i):  # the outermost cond first, so the result is "rot90/cond/Merge"
            if i == 3:
                return rotations[3]()
            return control_flow_cond.cond(
                math_ops.equal(k, i), rotations[i], lambda: choose(i + 1)
            )

        return choose(0)


def _hw(image):
    """Height and width: Python ints when static, else int32 tensors."""
    x = image.shape
    dyn = None
    out = []
    for which in (0, 1):
        v = x[_axis(image, which)].value
        if v is None:
            if dyn is None:
                dyn = array_ops.shape(image)
            v = dyn[_axis(image, which)]
        out.append(v)
    return out


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The [target_height, target_width] window at (offset_height, offset_width).

    Raises:
      ValueError: static offsets or sizes outside the image.
    """
    with ops.name_scope(None, "crop_to_bounding_box", [image]):
        image = _image(image)
        h, w = _hw(image)
        checks = image_crop_ops.bounding_box_checks([
            (offset_width >= 0, "offset_width must be >= 0."),
            (offset_height >= 0, "offset_height must be >= 0."),
            (target_width > 0, "target_width must be > 0."),
            (target_height > 0, "target_height must be > 0."),
            (w >= target_width + offset_width, "width must be >= target + offset."),
            (h >= target_height + offset_height, "height must be >= target + offset."),
        ])  # fmt: skip
        image = control_flow_ordering.with_dependencies(checks, image) if checks else image
        if image.shape.ndims == 4:
            begin = manip_ops.stack([0, offset_height, offset_width, 0])
            size = manip_ops.stack([-1, target_height, target_width, -1])
        else:
            begin = manip_ops.stack([offset_height, offset_width, 0])
            size = manip_ops.stack([target_height, target_width, -1])
        return slicing_ops.slice(image, begin, size)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """Zero-pad to [target_height, target_width] with the image at the offsets.

    Raises:
      ValueError: a static target smaller than image + offset.
    """
    with ops.name_scope(None, "pad_to_bounding_box", [image]):
        image = _image(image)
        h, w = _hw(image)
        after_h = target_height - offset_height - h
        after_w = target_width - offset_width - w
        checks = image_crop_ops.bounding_box_checks([
            (offset_height >= 0, "offset_height must be >= 0"),
            (offset_width >= 0, "offset_width must be >= 0"),
            (after_w >= 0, "width must be <= target - offset"),
            (after_h >= 0, "height must be <= target - offset"),
        ])  # fmt: skip
        image = control_flow_ordering.with_dependencies(checks, image) if checks else image
        rows = [[offset_height, after_h], [offset_width, after_w], [0, 0]]
        if image.shape.ndims == 4:
            rows = [[0, 0], *rows]
        paddings = manip_ops.stack([manip_ops.stack(r) for r in rows])
        return manip_ops.pad(image, paddings)


def _max(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return math_ops.maximum(a, b)


def _min(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return math_ops.minimum(a, b)


def _half(v):
    return v // 2 if isinstance(v, int) else math_ops.floordiv(v, 2)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Centrally crop or zero-pad each axis to the target size."""
    with ops.name_scope(None, "resize_image_with_crop_or_pad", [image]):
        image = _image(image)
        h, w = _hw(image)
        dh, dw = target_height - h, target_width - w
        cropped = crop_to_bounding_box(
            image,
            _max(_half(-dh), 0),
            _max(_half(-dw), 0),
            _min(target_height, h),
            _min(target_width, w),
        )
        out = pad_to_bounding_box(
            cropped, _max(_half(dh), 0), _max(_half(dw), 0), target_height, target_width
        )
        shape = out.shape.as_list() if out.shape.ndims is not None else None
        if shape is not None and isinstance(target_height, int) and isinstance(target_width, int):
            i = _axis(image, 0)
            shape[i], shape[i + 1] = target_height, target_width
            shape[-1] = image.shape[-1].value if image.shape.ndims else None
            out.set_shape(shape)
        return out


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def resize_image_with_pad(
    image, target_height, target_width, method=ResizeMethod.BILINEAR, align_corners=False
):
    """Resize keeping the aspect ratio, then zero-pad to the target (static sizes).

    TF's arithmetic, in float32: the resized size is floored, and the padding before is
    half of what the unfloored size leaves, floored (so it can be less than half the
    padding)."""
    with ops.name_scope(None, "resize_image_with_pad", [image]):
        image = _image(image)
        h, w = _hw(image)
        if not all(isinstance(v, int) for v in (h, w)):
            raise ValueError("resize_image_with_pad needs a static image size in asyncflow")
        f32 = np.float32
        ratio = max(f32(w) / f32(target_width), f32(h) / f32(target_height))
        rh, rw = f32(h) / ratio, f32(w) / ratio
        nh, nw = int(np.floor(rh)), int(np.floor(rw))
        ph = max(0, int(np.floor((f32(target_height) - rh) / f32(2))))
        pw = max(0, int(np.floor((f32(target_width) - rw) / f32(2))))
        resized = resize_images(image, [nh, nw], method, align_corners)
        return pad_to_bounding_box(resized, ph, pw, target_height, target_width)


def central_crop(image, central_fraction):
    """The central `central_fraction` of each spatial axis.

    Raises:
      ValueError: central_fraction outside (0, 1].
    """
    if central_fraction <= 0.0 or central_fraction > 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    with ops.name_scope(None, "central_crop", [image]):
        image = _image(image)
        if central_fraction == 1.0:
            return image
        h, w = _hw(image)
        if isinstance(h, int) and isinstance(w, int):
            sh, sw = int((h - h * central_fraction) / 2), int((w - w * central_fraction) / 2)
            return crop_to_bounding_box(image, sh, sw, h - 2 * sh, w - 2 * sw)

        def start(v):
            fv = cast_ops.cast(v, dtypes.float64)
            return cast_ops.cast((fv - fv * central_fraction) / 2, dtypes.int32)

        sh, sw = start(h), start(w)
        return crop_to_bounding_box(image, sh, sw, h - 2 * sh, w - 2 * sw)


def random_crop(value, size, seed=None, name=None):
    """A uniformly placed window of `size` (TF's `tf.random_crop`)."""
    with ops.name_scope(name, "random_crop", [value, size]) as scope:
        value = ops.convert_to_tensor(value, name="value")
        size = ops.convert_to_tensor(size, dtype=dtypes.int32, name="size")
        shape = array_ops.shape(value)
        check = check_ops.Assert(
            reduction_ops.reduce_all(math_ops.greater_equal(shape, size)),
            ["Need value.shape >= size, got ", shape, size],
            summarize=1000,
        )
        shape = control_flow_ordering.with_dependencies([check], shape)
        limit = shape - size + 1
        draw = random_ops.random_uniform(
            array_ops.shape(shape), 0, np.iinfo(np.int32).max, dtype=dtypes.int32, seed=seed
        )
        offset = math_ops.floormod(draw, limit)
        out = slicing_ops.slice(value, offset, size, name=scope)
        static = ops.constant_value(size)
        if static is not None:
            out.set_shape([int(v) for v in static])
        return out


# -- measures -------------------------------------------------------------


def total_variation(images, name=None):
    """Sum of absolute differences of neighbouring pixels (per image for a batch)."""
    with ops.name_scope(name, "total_variation", [images]):
        images = _image(images, "images")
        if images.shape.ndims == 3:
            dy = images[1:, :, :] - images[:-1, :, :]
            dx = images[:, 1:, :] - images[:, :-1, :]
            axes = None
        else:
            dy = images[:, 1:, :, :] - images[:, :-1, :, :]
            dx = images[:, :, 1:, :] - images[:, :, :-1, :]
            axes = [1, 2, 3]
        return reduction_ops.reduce_sum(math_ops.abs(dy), axes) + reduction_ops.reduce_sum(
            math_ops.abs(dx), axes
        )


def image_gradients(image):
    """(dy, dx) of a 4-D batch: forward differences, zero in the last row / column."""
    image = ops.convert_to_tensor(image)
    if image.shape.ndims != 4:
        raise ValueError("image_gradients expects a 4D tensor [batch_size, h, w, d]")
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    dy = manip_ops.concat([dy, array_ops.zeros_like(image[:, :1, :, :])], 1)
    dx = manip_ops.concat([dx, array_ops.zeros_like(image[:, :, :1, :])], 2)
    return dy, dx


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         return_index_map=False):  # fmt: skip
    """TF's `tf.image.ssim` (see asyncflow.image_ssim)."""
    return image_ssim.ssim(
        convert_image_dtype, img1, img2, max_val, filter_size, filter_sigma, k1, k2,
        return_index_map,
    )  # fmt: skip


def ssim_multiscale(img1, img2, max_val, power_factors=image_ssim.MSSSIM_WEIGHTS,
                    filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03):  # fmt: skip
    """TF's `tf.image.ssim_multiscale` (see asyncflow.image_ssim)."""
    return image_ssim.ssim_multiscale(
        convert_image_dtype, img1, img2, max_val, power_factors, filter_size, filter_sigma,
        k1, k2,
    )  # fmt: skip


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio over the last three axes."""
    with ops.name_scope(name, "PSNR", [a, b]):
        # max_val in the images' dtype, converted as they are (255 for uint8 images is
        # 1.0 beside their [0, 1] floats); the images' shapes checked as SSIM's.
        a, b, _, _, max_val = image_ssim._prepare(convert_image_dtype, a, b, max_val)
        mse = reduction_ops.reduce_mean(math_ops.squared_difference(a, b), [-3, -2, -1])
        ten = ops.convert_to_tensor(10.0)
        return math_ops.subtract(
            20.0 * math_ops.log(max_val) / math_ops.log(ten),
            np.float32(10 / np.log(10)) * math_ops.log(mse),
            name="psnr",
        )


# -- codecs ---------------------------------------------------------------


def _codec(op_type, inputs, attrs, name):
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs[0]


def decode_jpeg(
    contents,
    channels=0,
    ratio=1,
    fancy_upscaling=True,
    try_recover_truncated=False,
    acceptable_fraction=1,
    dct_method="",
    name=None,
):
    """A JPEG as uint8 [height, width, channels], decoded on a worker thread with TF's
    settings (libjpeg-turbo; `dct_method` "" or "INTEGER_FAST" is libjpeg's fast integer
    IDCT, TF's default, "INTEGER_ACCURATE" the accurate one): TF's pixels.

    Raises:
      InvalidArgumentError (at run time): not a JPEG, or damaged.
    """
    return _codec(
        "DecodeJpeg",
        [contents],
        {
            "channels": int(channels),
            "ratio": int(ratio),
            "fancy_upscaling": bool(fancy_upscaling),
            "try_recover_truncated": bool(try_recover_truncated),
            "acceptable_fraction": float(acceptable_fraction),
            "dct_method": dct_method,
        },
        name,
    )


def adjust_jpeg_quality(image, jpeg_quality, dct_method="", name=None):
    """`tf.image.adjust_jpeg_quality`: `image` encoded as a JPEG at `jpeg_quality`
    (0..100, an int or int32 tensor) and decoded again, in its own dtype.

    Raises (when run):
      InvalidArgumentError: a quality outside [0, 100]; not 1 or 3 channels.
    """
    with ops.name_scope(name, "adjust_jpeg_quality", [image]):
        image = ops.convert_to_tensor(image, name="image")
        channels = image.shape.as_list()[-1]
        orig_dtype = image.dtype
        image = convert_image_dtype(image, dtypes.uint8, saturate=True)
        encoded = encode_jpeg_variable_quality(image, jpeg_quality)
        image = decode_jpeg(encoded, channels=channels, dct_method=dct_method)
        return convert_image_dtype(image, orig_dtype, saturate=True)


def random_jpeg_quality(image, min_jpeg_quality, max_jpeg_quality, seed=None):
    """`tf.image.random_jpeg_quality`: adjust_jpeg_quality at a quality drawn uniformly
    from [min_jpeg_quality, max_jpeg_quality).

    Raises:
      ValueError: a bound outside [0, 100], or min >= max.
    """
    if not (0 <= min_jpeg_quality <= 100 and 0 <= max_jpeg_quality <= 100):
        raise ValueError("jpeg encoding range must be between 0 and 100.")
    if min_jpeg_quality >= max_jpeg_quality:
        raise ValueError("`min_jpeg_quality` must be less than `max_jpeg_quality`.")
    quality = random_ops.random_uniform(
        [], min_jpeg_quality, max_jpeg_quality, seed=seed, dtype=dtypes.int32
    )
    return adjust_jpeg_quality(image, quality)


def decode_png(contents, channels=0, dtype=dtypes.uint8, name=None):
    """A PNG as uint8 or uint16 [height, width, channels]."""
    return _codec("DecodePng", [contents], {"channels": int(channels), "dtype": dtype}, name)


def decode_jxl(contents, channels=0, dtype=dtypes.uint8, name=None):
    """`tf.io.decode_jxl`: a JPEG XL image (its first frame) as uint8
    [height, width, channels].

    `channels` 0 keeps the image's own (color, and alpha if it has one); 1, 3 or 4
    must be the image's own.  Images of another bit depth are converted to 8 bits as
    libjxl converts them for TF (ops/jxl_codec.py).

    Raises (when run):
      InvalidArgumentError: `channels` not 0, 1, 3 or 4, or not the image's; a damaged
        image ("Failed to decode JXL image"); no image ("Unknown image file format").
      ResourceExhaustedError: an image too large to decode here.
    """
    attrs = {"channels": int(channels), "dtype": dtypes.as_dtype(dtype)}
    return _codec("DecodeJxl", [contents], attrs, name)


def decode_bmp(contents, channels=0, name=None):
    return _codec("DecodeBmp", [contents], {"channels": int(channels)}, name)


def decode_gif(contents, name=None):
    """A GIF's frames as uint8 [frames, height, width, 3]."""
    return _codec("DecodeGif", [contents], {}, name)


def decode_image(contents, channels=None, dtype=dtypes.uint8, name=None, expand_animations=True):
    """Any of JPEG, PNG, GIF, BMP; a float dtype scales to [0, 1].  Of unknown rank
    unless expand_animations is False (a GIF may give [frames, h, w, c]), as in TF."""
    with ops.name_scope(name, "decode_image"):
        attrs = {
            "channels": int(channels or 0),
            "dtype": dtype,
            "expand_animations": bool(expand_animations),
        }
        return _codec("DecodeImage", [contents], attrs, None)


def encode_png(image, compression=-1, name=None):
    """A uint8 or uint16 image [..., height, width, channels] as PNG bytes (TF's; one
    string per image of a batch).  An array keeps its dtype, as in TF (which converts
    it before the op: the op's default type would make a uint16 array uint8)."""
    image = ops.convert_to_tensor(image, name="image")
    return _codec("EncodePng", [image], {"compression": int(compression)}, name)


def encode_jpeg(
    image,
    format="",
    quality=95,
    progressive=False,
    optimize_size=False,  # noqa: A002
    chroma_downsampling=True,
    density_unit="in",
    x_density=300,
    y_density=300,
    xmp_metadata="",
    name=None,
):
    """A uint8 image [height, width, 1 or 3] as JPEG bytes."""
    return _codec(
        "EncodeJpeg",
        [image],
        {
            "format": format,
            "quality": int(quality),
            "progressive": bool(progressive),
            "optimize_size": bool(optimize_size),
            "chroma_downsampling": bool(chroma_downsampling),
            "density_unit": density_unit,
            "x_density": int(x_density),
            "y_density": int(y_density),
            "xmp_metadata": xmp_metadata,
        },
        name,
    )


def is_jpeg(contents, name=None):
    """Whether `contents` starts with the JPEG signature."""
    with ops.name_scope(name, "is_jpeg", [contents]):
        head = string_ops.substr(contents, 0, 3)
        return math_ops.equal(head, b"\xff\xd8\xff")


def extract_image_patches(
    images, ksizes=None, strides=None, rates=None, padding=None, name=None, sizes=None
):
    """`tf.image.extract_image_patches`: `tf.extract_image_patches` (`sizes` is TF 2's
    spelling of `ksizes`)."""
    ksizes = deprecated_argument_lookup("sizes", sizes, "ksizes", ksizes)
    return image_patches_ops.extract_image_patches(
        images, ksizes, strides, rates, padding, name=name
    )


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """`tf.image.extract_patches` (sizes for ksizes): `tf.extract_image_patches`."""
    return image_patches_ops.extract_image_patches(
        images, sizes, strides, rates, padding, name=name
    )
