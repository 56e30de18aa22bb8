"""TF's JPEG header, cropped-decode and variable-quality ops, and WebP decoding:
ExtractJpegShape, DecodeAndCropJpeg, EncodeJpegVariableQuality (under
`tf.image.adjust_jpeg_quality`) and DecodeWebP, with their builders.

They share ops/image_ops.py's Pillow codecs (libjpeg-turbo and libwebp, as TF's):
DecodeAndCropJpeg decodes as DecodeJpeg does and crops, so it is pixel-equal to decode
then crop, as TF's own test asserts; ExtractJpegShape reads only the header (Pillow
opens lazily), so a huge declared size allocates nothing.  Codec work runs on worker
threads, off the loop.
"""

from __future__ import annotations

import io as _io

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.image_ops import _bytes, _decode, _encode, _off_loop, _pil, jpeg_options
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["extract_jpeg_shape", "decode_and_crop_jpeg", "decode_webp"]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- ExtractJpegShape -------------------------------------------------------------------------

ExtractJpegShape = register_op(
    "ExtractJpegShape",
    inputs=["contents: string"],
    outputs=["image_shape: output_type"],
    attrs={"output_type": TypeConstraint([dtypes.int32, dtypes.int64], default=dtypes.int32)},
    shape_fn=lambda op: [tensor_shape.TensorShape([3])],
)
NotDifferentiable("ExtractJpegShape")


def _jpeg_shape(data: bytes) -> list[int]:
    Image = _pil()
    try:
        img = Image.open(_io.BytesIO(data))
        if img.format != "JPEG":
            raise ValueError(img.format)
        return [img.size[1], img.size[0], len(img.getbands())]
    except Exception:  # noqa: BLE001 - any header failure is bad input
        raise _invalid(f"Invalid JPEG data, size {len(data)}") from None


@ExtractJpegShape.kernel("CPU")
async def _extract_jpeg_shape(ctx, contents):
    shape = await _off_loop(_jpeg_shape, _bytes(contents))
    return np.array(shape, dtypes.as_dtype(ctx.attrs["output_type"]).as_numpy_dtype)


# -- DecodeAndCropJpeg ------------------------------------------------------------------------


def _crop_shape(op):
    op.inputs[0].shape.with_rank(0)
    op.inputs[1].shape.with_rank(1)
    window = ops.constant_value(op.inputs[1])
    h = w = None
    if window is not None and np.size(window) == 4:
        h, w = int(window[2]), int(window[3])
    c = op._attr("channels") or None
    return [tensor_shape.TensorShape([h, w, c])]


DecodeAndCropJpeg = register_op(
    "DecodeAndCropJpeg",
    inputs=["contents: string", "crop_window: int32"],
    outputs=["image: uint8"],
    attrs={
        "channels": 0,
        "ratio": 1,
        "fancy_upscaling": True,
        "try_recover_truncated": False,
        "acceptable_fraction": 1.0,
        "dct_method": "",
    },
    shape_fn=_crop_shape,
    is_async=True,
)
NotDifferentiable("DecodeAndCropJpeg")

_JPEG_MAGIC = b"\xff\xd8\xff"
_KNOWN = (b"\x89PNG", b"GIF8", b"BM", b"RIFF", b"\xff\x0a", b"\x00\x00\x00\x0cJXL")


def _decode_and_crop(data: bytes, window, channels: int, ratio: int, jpeg) -> np.ndarray:
    if not data.startswith(_JPEG_MAGIC) and not data.startswith(_KNOWN):
        raise _invalid(
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required."
        )
    image = _decode(data, "JPEG", channels, np.uint8, ratio, jpeg)
    y, x, h, w = (int(v) for v in window)
    if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > image.shape[0] or x + w > image.shape[1]:
        raise _invalid("jpeg::Uncompress failed. Invalid JPEG data or crop window.")
    return np.ascontiguousarray(image[y : y + h, x : x + w])


@DecodeAndCropJpeg.kernel("CPU")
async def _decode_and_crop_jpeg(ctx, contents, crop_window):
    a = ctx.attrs
    window = np.asarray(crop_window).reshape(-1)
    if window.size != 4:
        raise _invalid(f"crop_size must have four elements [{window.size}]")
    if a["channels"] not in (0, 1, 3):
        raise _invalid("channels must be 0, 1, or 3")
    jpeg = jpeg_options(a)
    return await _off_loop(
        _decode_and_crop, _bytes(contents), window, int(a["channels"]), int(a["ratio"]), jpeg
    )


# -- EncodeJpegVariableQuality ----------------------------------------------------------------

EncodeJpegVariableQuality = register_op(
    "EncodeJpegVariableQuality",
    inputs=["images: uint8", "quality: int32"],
    outputs=["contents: string"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    is_async=True,
)
NotDifferentiable("EncodeJpegVariableQuality")


@EncodeJpegVariableQuality.kernel("CPU")
async def _encode_jpeg_variable_quality(ctx, images, quality):
    images, q = np.asarray(images), int(np.asarray(quality))
    if not 0 <= q <= 100:
        raise _invalid(f"quality must be in [0,100], got {q}")
    if images.ndim != 3:
        raise _invalid(f"image must be 3-dimensional[{','.join(map(str, images.shape))}]")
    if images.shape[2] not in (1, 3):
        raise _invalid(f"image must have 1 or 3 channels, got {images.shape[2]}")
    kw = {"quality": q, "subsampling": 2, "dpi": (300, 300)}
    return await _off_loop(lambda: _encode(images, "JPEG", **kw))


# -- DecodeWebP -------------------------------------------------------------------------------

DecodeWebP = register_op(
    "DecodeWebP",
    inputs=["contents: string"],
    outputs=["image: dtype"],
    attrs={"channels": 0, "dtype": TypeConstraint([dtypes.uint8], default=dtypes.uint8)},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([None, None, None, op._attr("channels") or None])
    ],
    is_async=True,
)
NotDifferentiable("DecodeWebP")


def _decode_webp(data: bytes, channels: int) -> np.ndarray:
    Image = _pil()
    try:
        img = Image.open(_io.BytesIO(data))
        if img.format != "WEBP":
            raise ValueError(img.format)
        frames = []
        for i in range(getattr(img, "n_frames", 1)):
            img.seek(i)
            frame = img.convert("RGBA" if img.mode in ("RGBA", "LA", "PA") else "RGB")
            frames.append(np.asarray(frame))
    except Exception:  # noqa: BLE001 - any codec failure is bad input
        raise _invalid("Failed to decode WebP header.") from None
    out = np.ascontiguousarray(np.stack(frames))
    if channels not in (0, out.shape[-1]):
        raise _invalid("Number of channels requested does not match input")
    return out


@DecodeWebP.kernel("CPU")
async def _decode_webp_kernel(ctx, contents):
    channels = int(ctx.attrs["channels"])
    if channels not in (0, 3, 4):
        raise _invalid(f"channels must be 0, 3, or 4 for WebP, got {channels}")
    return await _off_loop(_decode_webp, _bytes(contents), channels)


# -- builders ---------------------------------------------------------------------------------


def extract_jpeg_shape(contents, output_type=dtypes.int32, name=None):
    """`tf.image.extract_jpeg_shape`: [height, width, channels] from a JPEG's header,
    without decoding it.

    Raises (when run):
      InvalidArgumentError: the contents are no JPEG ("Invalid JPEG data, size N").
    """
    attrs = {"output_type": dtypes.as_dtype(output_type)}
    return ops.apply_op("ExtractJpegShape", [contents], attrs, name=name).outputs[0]


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                         try_recover_truncated=False, acceptable_fraction=1,
                         dct_method="", name=None):  # fmt: skip
    """`tf.image.decode_and_crop_jpeg`: the [y, x, height, width] window of a JPEG,
    equal to decoding it and cropping.

    Raises (when run):
      InvalidArgumentError: a window outside the image or not of four elements;
        contents that are no image.
    """
    attrs = {
        "channels": int(channels),
        "ratio": int(ratio),
        "fancy_upscaling": bool(fancy_upscaling),
        "try_recover_truncated": bool(try_recover_truncated),
        "acceptable_fraction": float(acceptable_fraction),
        "dct_method": dct_method,
    }
    window = ops.convert_to_tensor(crop_window, dtypes.int32, name="crop_window")
    return ops.apply_op("DecodeAndCropJpeg", [contents, window], attrs, name=name).outputs[0]


def encode_jpeg_variable_quality(images, quality, name=None):
    """TF's EncodeJpegVariableQuality: a JPEG of `images` at `quality` (an int32 tensor)."""
    quality = ops.convert_to_tensor(quality, dtypes.int32, name="quality")
    return ops.apply_op("EncodeJpegVariableQuality", [images, quality], name=name).outputs[0]


def decode_webp(contents, channels=0, dtype=dtypes.uint8, name=None):
    """`tf.io.decode_webp`: a WebP's frames, [frames, height, width, channels] uint8.

    Raises (when run):
      InvalidArgumentError: no WebP ("Failed to decode WebP header."); channels other
        than 0 or the image's own.
    """
    attrs = {"channels": int(channels), "dtype": dtypes.as_dtype(dtype)}
    return ops.apply_op("DecodeWebP", [contents], attrs, name=name).outputs[0]
