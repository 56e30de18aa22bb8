"""The image array functions of `tf.keras.preprocessing.image` and `tf.keras.utils`:
PIL image <-> numpy array conversion, loading and saving, and the random affine, channel-shift
and brightness augmentations (numpy, scipy.ndimage and Pillow, outside the graph).

The random transforms draw their parameters from NumPy's global generator in Keras'
order, so `np.random.seed` gives Keras' images.
"""

from __future__ import annotations

import io
import pathlib

import numpy as np

from asyncflow.keras.backend_config import floatx, image_data_format

__all__ = [
    "array_to_img",
    "img_to_array",
    "load_img",
    "save_img",
    "apply_affine_transform",
    "transform_matrix_offset_center",
    "random_rotation",
    "random_shift",
    "random_shear",
    "random_zoom",
    "apply_channel_shift",
    "random_channel_shift",
    "apply_brightness_shift",
    "random_brightness",
]


def _pil():
    from PIL import Image  # noqa: PLC0415 - Pillow loads only when images are used

    return Image


_RESAMPLE = {"nearest": 0, "bilinear": 2, "bicubic": 3, "hamming": 5, "box": 4, "lanczos": 1}


def array_to_img(x, data_format=None, scale=True, dtype=None):
    """A PIL image of a rank-3 array (1, 3 or 4 channels); `scale` maps its range onto
    0..255.

    Raises:
      ValueError: not rank 3, an unknown data_format, or another channel count.
    """
    data_format = data_format or image_data_format()
    x = np.asarray(x, dtype=dtype or floatx())
    if x.ndim != 3:
        raise ValueError(
            f"Expected image array to have rank 3 (single image). Got array with shape: {x.shape}"
        )
    if data_format not in {"channels_first", "channels_last"}:
        raise ValueError(f"Invalid data_format: {data_format}")
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - np.min(x)
        x_max = np.max(x)
        if x_max != 0:
            x /= x_max
        x *= 255
    image = _pil()
    channels = x.shape[2]
    if channels == 4:
        return image.fromarray(x.astype("uint8"), "RGBA")
    if channels == 3:
        return image.fromarray(x.astype("uint8"), "RGB")
    if channels == 1:
        if np.max(x) > 255:
            return image.fromarray(x[:, :, 0].astype("int32"), "I")
        return image.fromarray(x[:, :, 0].astype("uint8"), "L")
    raise ValueError(f"Unsupported channel number: {channels}")


def img_to_array(img, data_format=None, dtype=None):
    """The image as a rank-3 array (a grayscale image gets a channel axis).

    Raises:
      ValueError: an unknown data_format or an image of another rank.
    """
    data_format = data_format or image_data_format()
    if data_format not in {"channels_first", "channels_last"}:
        raise ValueError(f"Unknown data_format: {data_format}")
    x = np.asarray(img, dtype=dtype or floatx())
    if x.ndim == 3:
        return x.transpose(2, 0, 1) if data_format == "channels_first" else x
    if x.ndim == 2:
        if data_format == "channels_first":
            return x.reshape((1, x.shape[0], x.shape[1]))
        return x.reshape((x.shape[0], x.shape[1], 1))
    raise ValueError(f"Unsupported image shape: {x.shape}")


def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs):
    img = array_to_img(x, data_format=data_format or image_data_format(), scale=scale)
    if img.mode == "RGBA" and file_format in ("jpg", "jpeg"):
        img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)


def load_img(
    path,
    grayscale=False,
    color_mode="rgb",
    target_size=None,
    interpolation="nearest",
    keep_aspect_ratio=False,
):
    """A PIL image from a file (or BytesIO), converted to `color_mode` and resized to
    `target_size` (height, width), center-cropped first with keep_aspect_ratio.

    Raises:
      TypeError: `path` of another kind.
      ValueError: an unknown color_mode or interpolation.
    """
    if grayscale:
        color_mode = "grayscale"
    image = _pil()
    if isinstance(path, io.BytesIO):
        img = image.open(path)
    elif isinstance(path, (pathlib.Path, bytes, str)):
        if isinstance(path, pathlib.Path):
            path = str(path.resolve())
        with open(path, "rb") as f:
            img = image.open(io.BytesIO(f.read()))
    else:
        raise TypeError(f"path should be path-like or io.BytesIO, not {type(path)}")
    modes = {
        "grayscale": ("L", ("L", "I;16", "I")),
        "rgba": ("RGBA", ("RGBA",)),
        "rgb": ("RGB", ("RGB",)),
    }
    if color_mode not in modes:
        raise ValueError('color_mode must be "grayscale", "rgb", or "rgba"')
    target_mode, accepted = modes[color_mode]
    if img.mode not in accepted:
        img = img.convert(target_mode)
    if target_size is not None:
        size = (target_size[1], target_size[0])
        if img.size != size:
            if interpolation not in _RESAMPLE:
                raise ValueError(
                    f"Invalid interpolation method {interpolation} specified. Supported "
                    f"methods are {', '.join(_RESAMPLE)}"
                )
            resample = _RESAMPLE[interpolation]
            if keep_aspect_ratio:
                width, height = img.size
                crop_h = min(height, (width * size[1]) // size[0])
                crop_w = min(width, (height * size[0]) // size[1])
                top, left = (height - crop_h) // 2, (width - crop_w) // 2
                img = img.resize(size, resample, box=[left, top, left + crop_w, top + crop_h])
            else:
                img = img.resize(size, resample)
    return img


def transform_matrix_offset_center(matrix, x, y):
    """`matrix` applied about the image center rather than the origin."""
    o_x, o_y = float(x) / 2 - 0.5, float(y) / 2 - 0.5
    to_center = np.array([[1, 0, o_x], [0, 1, o_y], [0, 0, 1]])
    back = np.array([[1, 0, -o_x], [0, 1, -o_y], [0, 0, 1]])
    return np.dot(np.dot(to_center, matrix), back)


def apply_affine_transform(
    x,
    theta=0,
    tx=0,
    ty=0,
    shear=0,
    zx=1,
    zy=1,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    order=1,
):
    """Rotation (degrees), shift, shear (degrees) and zoom of a rank-3 image, composed
    in that order about its center and resampled channel by channel.

    Raises:
      ValueError: axes not a permutation of 0, 1, 2, not rank 3, or channels in the
        middle.
    """
    from scipy import ndimage  # noqa: PLC0415 - SciPy loads only when images are used

    if np.unique([row_axis, col_axis, channel_axis]).size != 3:
        raise ValueError("'row_axis', 'col_axis', and 'channel_axis' must be distinct")
    given = {row_axis, col_axis, channel_axis}
    if given != {0, 1, 2}:
        raise ValueError(f"Invalid axis' indices: {given - {0, 1, 2}}")
    if x.ndim != 3:
        raise ValueError("Input arrays must be multi-channel 2D images.")
    if channel_axis not in (0, 2):
        raise ValueError("Channels are allowed and the first and last dimensions.")
    matrices = []
    if theta != 0:
        t = np.deg2rad(theta)
        matrices.append(
            np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
        )
    if tx != 0 or ty != 0:
        matrices.append(np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]]))
    if shear != 0:
        s = np.deg2rad(shear)
        matrices.append(np.array([[1, -np.sin(s), 0], [0, np.cos(s), 0], [0, 0, 1]]))
    if zx != 1 or zy != 1:
        matrices.append(np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]]))
    if not matrices:
        return x
    matrix = matrices[0]
    for m in matrices[1:]:
        matrix = np.dot(matrix, m)
    h, w = x.shape[row_axis], x.shape[col_axis]
    matrix = transform_matrix_offset_center(matrix, h, w)
    x = np.rollaxis(x, channel_axis, 0)
    if col_axis > row_axis:
        # The matrix is in (row, col) order; swap to the array's axis order.
        matrix[:, [0, 1]] = matrix[:, [1, 0]]
        matrix[[0, 1]] = matrix[[1, 0]]
    channels = [
        ndimage.affine_transform(
            c, matrix[:2, :2], matrix[:2, 2], order=order, mode=fill_mode, cval=cval
        )
        for c in x
    ]
    x = np.stack(channels, axis=0)
    return np.rollaxis(x, 0, channel_axis + 1)


def random_rotation(
    x,
    rg,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    theta = np.random.uniform(-rg, rg)
    return apply_affine_transform(
        x,
        theta=theta,
        row_axis=row_axis,
        col_axis=col_axis,
        channel_axis=channel_axis,
        fill_mode=fill_mode,
        cval=cval,
        order=interpolation_order,
    )


def random_shift(
    x,
    wrg,
    hrg,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    h, w = x.shape[row_axis], x.shape[col_axis]
    tx = np.random.uniform(-hrg, hrg) * h
    ty = np.random.uniform(-wrg, wrg) * w
    return apply_affine_transform(
        x,
        tx=tx,
        ty=ty,
        row_axis=row_axis,
        col_axis=col_axis,
        channel_axis=channel_axis,
        fill_mode=fill_mode,
        cval=cval,
        order=interpolation_order,
    )


def random_shear(
    x,
    intensity,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    shear = np.random.uniform(-intensity, intensity)
    return apply_affine_transform(
        x,
        shear=shear,
        row_axis=row_axis,
        col_axis=col_axis,
        channel_axis=channel_axis,
        fill_mode=fill_mode,
        cval=cval,
        order=interpolation_order,
    )


def random_zoom(
    x,
    zoom_range,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    """Raises ValueError: `zoom_range` not two numbers."""
    if len(zoom_range) != 2:
        raise ValueError(
            f"`zoom_range` should be a tuple or list of two floats. Received: {zoom_range}"
        )
    if zoom_range[0] == 1 and zoom_range[1] == 1:
        zx, zy = 1, 1
    else:
        zx, zy = np.random.uniform(zoom_range[0], zoom_range[1], 2)
    return apply_affine_transform(
        x,
        zx=zx,
        zy=zy,
        row_axis=row_axis,
        col_axis=col_axis,
        channel_axis=channel_axis,
        fill_mode=fill_mode,
        cval=cval,
        order=interpolation_order,
    )


def apply_channel_shift(x, intensity, channel_axis=0):
    """Each channel plus `intensity`, clipped to the image's original range."""
    x = np.rollaxis(x, channel_axis, 0)
    low, high = np.min(x), np.max(x)
    x = np.stack([np.clip(c + intensity, low, high) for c in x], axis=0)
    return np.rollaxis(x, 0, channel_axis + 1)


def random_channel_shift(x, intensity_range, channel_axis=0):
    intensity = np.random.uniform(-intensity_range, intensity_range)
    return apply_channel_shift(x, intensity, channel_axis=channel_axis)


def apply_brightness_shift(x, brightness, scale=True):
    """The image brightened by `brightness` (PIL's ImageEnhance), through uint8."""
    from PIL import ImageEnhance  # noqa: PLC0415 - Pillow loads only when images are used

    x_min, x_max = np.min(x), np.max(x)
    local_scale = (x_min < 0) or (x_max > 255)
    img = array_to_img(x, scale=local_scale or scale)
    x = img_to_array(ImageEnhance.Brightness(img).enhance(brightness))
    if not scale and local_scale:
        x = x / 255 * (x_max - x_min) + x_min
    return x


def random_brightness(x, brightness_range, scale=True):
    """Raises ValueError: `brightness_range` not two numbers."""
    if len(brightness_range) != 2:
        raise ValueError(
            "`brightness_range should be tuple or list of two floats. "
            f"Received: {brightness_range}"
        )
    u = np.random.uniform(brightness_range[0], brightness_range[1])
    return apply_brightness_shift(x, u, scale)
