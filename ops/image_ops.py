"""Image ops: resizing (ResizeBilinear, ResizeNearestNeighbor, ResizeBicubic, ResizeArea
and the gradients TF defines) and codecs (DecodeJpeg, DecodePng, DecodeGif, DecodeBmp,
DecodeImage, EncodeJpeg, EncodePng).

Every resize method is separable and linear in the image: output = Wy . image . Wx^T,
with one interpolation matrix per axis built exactly as TF's kernels place their
samples (legacy `x * scale`, `align_corners`, `half_pixel_centers`; bicubic with TF's
1024-entry Keys-kernel table, a = -0.75, or a = -0.5 with out-of-image taps dropped and
renormalised under half-pixel centers).  So the gradient of a resize is the same
product with the matrices transposed.  Nearest-neighbour gathers rather than
multiplies, so integer images stay exact.

Codecs use Pillow on a worker thread: decoding never runs on the event loop.
"""

from __future__ import annotations

import asyncio
import io as _io

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import jxl_codec, png_codec
from asyncflow.registry import REAL, NotDifferentiable, TypeConstraint, register_op

__all__: list[str] = []

_RESIZE_ATTRS = {"T": REAL, "align_corners": False, "half_pixel_centers": False}


def _scale(in_size: int, out_size: int, align_corners: bool) -> float:
    if align_corners and out_size > 1:
        return (in_size - 1) / (out_size - 1)
    return in_size / out_size


def _f32(x) -> float:
    return float(np.float32(x))


def bilinear_matrix(in_size, out_size, align_corners, half_pixel):
    s = _f32(_scale(in_size, out_size, align_corners))
    w = np.zeros((out_size, in_size))
    for o in range(out_size):
        src = _f32((o + 0.5) * s - 0.5) if half_pixel else _f32(o * s)
        f = np.floor(src)
        lo, hi = max(int(f), 0), min(int(np.ceil(src)), in_size - 1)
        lerp = src - f
        w[o, lo] += 1.0 - lerp
        w[o, hi] += lerp
    return w


def nearest_index(in_size, out_size, align_corners, half_pixel):
    s = _f32(_scale(in_size, out_size, align_corners))
    idx = np.empty(out_size, np.int64)
    for o in range(out_size):
        src = _f32((o + 0.5) * s) if half_pixel else _f32(o * s)
        # roundf: halves away from zero
        i = int(np.floor(src + 0.5)) if align_corners else int(np.floor(src))
        i = min(i, in_size - 1)
        idx[o] = max(i, 0) if half_pixel else i
    return idx


_TABLE = 1024


def _cubic_table(a: float) -> np.ndarray:
    x = np.arange(_TABLE + 1, dtype=np.float64) / _TABLE
    t = np.empty((_TABLE + 1, 2), np.float32)
    t[:, 0] = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1
    t[:, 1] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return t


_TABLES = {True: _cubic_table(-0.5), False: _cubic_table(-0.75)}


def bicubic_matrix(in_size, out_size, align_corners, half_pixel):
    s = _f32(_scale(in_size, out_size, align_corners))
    table = _TABLES[bool(half_pixel)]
    w = np.zeros((out_size, in_size))
    for o in range(out_size):
        src = _f32((o + 0.5) * s - 0.5) if half_pixel else _f32(o * s)
        base = int(np.floor(src))
        off = int(np.rint((src - base) * _TABLE))
        taps = [table[off, 1], table[off, 0], table[_TABLE - off, 0], table[_TABLE - off, 1]]
        idx = [base - 1, base, base + 1, base + 2]
        bounded = [min(in_size - 1, max(0, i)) for i in idx]
        if half_pixel:  # taps outside the image drop out; the rest renormalised
            taps = [t if b == i else 0.0 for t, b, i in zip(taps, bounded, idx)]
            total = sum(taps)
            if abs(total) >= 1000.0 * np.finfo(np.float32).tiny:
                taps = [t / total for t in taps]
        for t, b in zip(taps, bounded):
            w[o, b] += t
    return w


def area_matrix(in_size, out_size, align_corners):
    s = _scale(in_size, out_size, align_corners)
    w = np.zeros((out_size, in_size))
    for o in range(out_size):
        lo, hi = _f32(o * s), _f32((o + 1) * s)
        for i in range(int(np.floor(lo)), int(np.ceil(hi))):
            cover = min(i + 1.0, hi) - max(float(i), lo)
            w[o, min(i, in_size - 1)] += cover / s
    return w


def _size(size) -> tuple[int, int]:
    size = np.asarray(size)
    if size.shape != (2,):
        raise errors.InvalidArgumentError(
            None, None, f"shape_t must be 1-dimensional and have 2 elements: {list(size.shape)}"
        )
    h, w = int(size[0]), int(size[1])
    if h <= 0 or w <= 0:
        raise errors.InvalidArgumentError(None, None, "output dimensions must be positive")
    return h, w


def _check_images(x):
    if x.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, f"input must be 4-dimensional{list(x.shape)}"
        )


def _separable(x, wy, wx):
    """x [n, h, w, c] -> [n, oh, ow, c] = wy . x . wx^T per image and channel."""
    t = np.moveaxis(np.asarray(x, np.float64), 3, 1)  # n, c, h, w
    out = wy @ t @ wx.T
    return np.moveaxis(out, 1, 3)


def _resize_shape(op):
    x = op.inputs[0].shape.with_rank(4)
    size = ops.constant_value(op.inputs[1])
    h, w = (int(size[0]), int(size[1])) if size is not None else (None, None)
    return [tensor_shape.TensorShape([x[0], h, w, x[3]])]


def _register_resize(name, out_float, matrices):
    op_def = register_op(
        name,
        inputs=["images: T", "size: int32"],
        outputs=["resized_images: float32" if out_float else "resized_images: T"],
        attrs=dict(_RESIZE_ATTRS),
        shape_fn=_resize_shape,
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, images, size):
        images = np.asarray(images)
        _check_images(images)
        oh, ow = _size(size)
        ac, hp = ctx.attrs["align_corners"], ctx.attrs["half_pixel_centers"]
        if ac and hp:
            raise errors.InvalidArgumentError(
                None, None, "If half_pixel_centers is True, align_corners must be False."
            )
        _, h, w, _ = images.shape
        if name == "ResizeNearestNeighbor":
            iy, ix = nearest_index(h, oh, ac, hp), nearest_index(w, ow, ac, hp)
            return images[:, iy][:, :, ix]
        wy, wx = matrices(h, oh, ac, hp), matrices(w, ow, ac, hp)
        out = await ctx.device.compute(_separable, images, wy, wx)
        return out.astype(np.float32)

    return op_def


ResizeBilinear = _register_resize("ResizeBilinear", True, bilinear_matrix)
ResizeBicubic = _register_resize("ResizeBicubic", True, bicubic_matrix)
ResizeArea = _register_resize("ResizeArea", True, lambda i, o, ac, hp: area_matrix(i, o, ac))
ResizeNearestNeighbor = _register_resize("ResizeNearestNeighbor", False, None)
# ResizeArea has no gradient, as in TF (none registered: tf.gradients raises LookupError)


def _grad_shape(op):
    return [
        op.inputs[1].shape
        if op.type != "ResizeNearestNeighborGrad"
        else tensor_shape.TensorShape([op.inputs[0].shape[0], None, None, op.inputs[0].shape[3]])
    ]


def _register_resize_grad(name, matrices, second):
    op_def = register_op(
        name,
        inputs=[
            "grads: float32" if second == "original_image" else "grads: T",
            f"{second}: T" if second == "original_image" else "size: int32",
        ],
        outputs=["output: T"],
        attrs={
            "T": REAL if second == "original_image" else REAL,
            "align_corners": False,
            "half_pixel_centers": False,
        },
        shape_fn=_grad_shape,
    )
    NotDifferentiable(name)

    @op_def.kernel("CPU")
    async def _kernel(ctx, grads, other):
        grads = np.asarray(grads)
        ac, hp = ctx.attrs["align_corners"], ctx.attrs["half_pixel_centers"]
        if second == "original_image":
            h, w = np.shape(other)[1:3]
            dtype = np.asarray(other).dtype
        else:
            h, w = _size(other)
            dtype = grads.dtype
        _, oh, ow, _ = grads.shape
        if matrices is None:  # nearest: scatter-add each output back to its source
            iy, ix = nearest_index(h, oh, ac, hp), nearest_index(w, ow, ac, hp)
            wy = np.zeros((oh, h))
            wy[np.arange(oh), iy] = 1.0
            wx = np.zeros((ow, w))
            wx[np.arange(ow), ix] = 1.0
        else:
            wy, wx = matrices(h, oh, ac, hp), matrices(w, ow, ac, hp)
        out = await ctx.device.compute(_separable, grads, wy.T, wx.T)
        return out.astype(dtype)

    return op_def


_register_resize_grad("ResizeBilinearGrad", bilinear_matrix, "original_image")
_register_resize_grad("ResizeBicubicGrad", bicubic_matrix, "original_image")
_register_resize_grad("ResizeNearestNeighborGrad", None, "size")


def _resize_attrs(op):
    return {
        "align_corners": op._attr("align_corners"),
        "half_pixel_centers": op._attr("half_pixel_centers"),
    }


@ResizeBilinear.gradient
def _resize_bilinear_grad(op, grad):
    return [
        ops.apply_op("ResizeBilinearGrad", [grad, op.inputs[0]], _resize_attrs(op)).outputs[0],
        None,
    ]


@ResizeBicubic.gradient
def _resize_bicubic_grad(op, grad):
    return [
        ops.apply_op("ResizeBicubicGrad", [grad, op.inputs[0]], _resize_attrs(op)).outputs[0],
        None,
    ]


@ResizeNearestNeighbor.gradient
def _resize_nearest_grad(op, grad):
    from asyncflow.ops import array_ops

    size = array_ops.shape(op.inputs[0])[1:3]
    return [
        ops.apply_op("ResizeNearestNeighborGrad", [grad, size], _resize_attrs(op)).outputs[0],
        None,
    ]


def resize(kind: str, images, size, align_corners=False, half_pixel_centers=False, name=None):
    """The Resize<kind> op on 4-D `images` ([batch, height, width, channels])."""
    images = ops.convert_to_tensor(images, name="images")
    size = ops.convert_to_tensor(size, dtype=dtypes.int32, name="size")
    return ops.apply_op(
        f"Resize{kind}",
        [images, size],
        {"align_corners": bool(align_corners), "half_pixel_centers": bool(half_pixel_centers)},
        name=name,
    ).outputs[0]


# -- codecs ----------------------------------------------------------------------------------


async def _off_loop(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _pil():
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - Pillow is a dependency
        raise errors.UnimplementedError(None, None, f"image codecs need Pillow: {e}") from e
    return Image


def _bytes(contents) -> bytes:
    v = contents[()] if isinstance(contents, np.ndarray) else contents
    if not isinstance(v, bytes):
        raise errors.InvalidArgumentError(None, None, "contents must be a scalar string")
    return v


_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "I;16": 1, "I": 1}


def _to_array(img, channels: int, dtype) -> np.ndarray:
    if channels == 0:
        if img.mode == "P":
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        elif img.mode not in _CHANNELS:
            img = img.convert("RGB")
    elif img.mode != _MODES[channels]:
        if dtype == np.uint16 and channels == 1 and img.mode in ("I;16", "I"):
            pass
        else:
            img = img.convert(_MODES[channels])
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[:, :, None]
    if dtype == np.uint16:
        a = a.astype(np.uint16) if a.dtype.itemsize == 2 else a.astype(np.uint16) * 257
    return np.ascontiguousarray(a.astype(dtype, copy=False))


# JPEGs decode through libjpeg-turbo with TF's settings (simplejpeg, which bundles it):
# TF's default IDCT is libjpeg's fast integer one (JDCT_IFAST; dct_method
# "INTEGER_ACCURATE" is JDCT_ISLOW), fancy upsampling on unless asked off, `ratio` as
# libjpeg's 1/ratio scaling, and libjpeg's own conversion to one channel.  So the pixels
# are TF's exactly (Pillow's decoder always takes the accurate IDCT: up to 4 levels off
# TF's default).  CMYK/YCCK JPEGs, and any JPEG that decoder refuses, go to Pillow.
_JPEG_DCT = {"": True, "INTEGER_FAST": True, "INTEGER_ACCURATE": False}


def _decode_jpeg_exact(data: bytes, channels: int, ratio: int = 1, dct_method: str = "",
                       fancy_upscaling: bool = True):  # fmt: skip
    """The JPEG as TF decodes it, or None where Pillow should decode it."""
    try:
        import simplejpeg
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        height, width, space, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:
        return None
    if space not in ("Gray", "YCbCr", "RGB"):
        return None
    gray = channels == 1 or (channels == 0 and space == "Gray")
    out_h, out_w = -(-height // ratio), -(-width // ratio)
    if out_h * out_w * (1 if gray else 3) >= 1 << 29:  # (TF's limit, before allocating)
        raise errors.InvalidArgumentError(
            None, None, f"Image too large: {out_h}x{out_w} ({len(data)} bytes of JPEG data)"
        )
    try:
        out = simplejpeg.decode_jpeg(
            data,
            colorspace="GRAY" if gray else "RGB",
            fastdct=_JPEG_DCT.get(dct_method, True),
            fastupsample=not fancy_upscaling,
            min_height=out_h,
            min_width=out_w,
            min_factor=ratio,
        )
    except ValueError:
        return None
    return out[:, :, None] if out.ndim == 2 else out


_CROSS_FORMATS = ("JPEG", "PNG", "GIF")  # TF's DecodeJpeg/Png/Gif decode any of these
_OP_OF = {"JPEG": "DecodeJpeg", "PNG": "DecodePng", "GIF": "DecodeGif", "BMP": "DecodeBmp"}


def _check_cross_format(fmt: str, got: str | None) -> None:
    """Raises TF's error when the data's format is not one op `fmt` decodes."""
    if fmt in _CROSS_FORMATS and got in _CROSS_FORMATS:
        return
    if got == "BMP" and fmt in _OP_OF:
        raise errors.InvalidArgumentError(
            None, None, "Trying to decode BMP format using a wrong op. Use `decode_bmp` or "
            f"`decode_image` instead. Op used: {_OP_OF[fmt]}"
        )  # fmt: skip
    if fmt == "BMP" and got in _CROSS_FORMATS:
        raise errors.InvalidArgumentError(
            None, None, f"Trying to decode {got} format using DecodeBmp op. Use "
            f"`decode_{got.lower()}` or `decode_image` instead."
        )  # fmt: skip
    raise errors.InvalidArgumentError(
        None, None, f"Expected image ({fmt}), got {got or 'unknown format'}"
    )


def _decode(data: bytes, fmt: str | None, channels: int, dtype, ratio: int = 1, jpeg=None):
    """One image of `data` (`fmt`: the format it must be, None any); `jpeg`: DecodeJpeg's
    (dct_method, fancy_upscaling), TF's defaults when None."""
    if channels not in (0, 1, 3, 4):  # TF checks the attr before reading any byte
        raise errors.InvalidArgumentError(
            None, None, f"`channels` must be 0, 1, 3 or 4 but got {channels}"
        )
    if (fmt in ("JPEG", "PNG", "GIF", None) and data[:3] == b"\xff\xd8\xff"
            and channels in (0, 1, 3) and dtype == np.uint8):  # fmt: skip
        out = _decode_jpeg_exact(data, channels, ratio, *(jpeg or ("", True)))
        if out is not None:
            return out[None] if fmt == "GIF" else out
    if dtype == np.uint16 and fmt in ("PNG", None):
        # (16-bit color PNGs: Pillow would give their 8-bit values)
        out = png_codec.decode_png16(data)
        if out is not None and channels in (0, out.shape[2]):
            return out
    Image = _pil()
    try:
        img = Image.open(_io.BytesIO(data))
        if fmt is not None and img.format != fmt:
            _check_cross_format(fmt, img.format)
        if img.format == "JPEG":
            mode = {1: "L", 3: "RGB"}.get(channels, img.mode)
            size = (max(img.size[0] // ratio, 1), max(img.size[1] // ratio, 1))
            img.draft(mode, size if ratio > 1 else img.size)
        if img.format == "GIF" and fmt in ("JPEG", "PNG"):  # TF: the first frame
            return _to_array(img.convert("RGB"), 3, dtype)
        if img.format == "GIF":
            frames = []
            for i in range(getattr(img, "n_frames", 1)):
                img.seek(i)
                frames.append(_to_array(img.convert("RGB"), 3, dtype))
            return np.stack(frames)
        img.load()
        out = _to_array(img, channels, dtype)
        return out[None] if fmt == "GIF" else out  # DecodeGif of a still image: 1 frame
    except errors.OpError:
        raise
    except Exception as e:  # noqa: BLE001 - any codec failure is bad input
        # TF's words where it has them (PIL's unidentified-image message names a BytesIO).
        if not data:
            raise errors.InvalidArgumentError(None, None, "Input is empty.") from None
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            raise errors.InvalidArgumentError(
                None, None, "Invalid PNG. Failed to initialize decoder."
            ) from None
        if not data.startswith(_IMAGE_SIGNATURES) and data[8:12] != b"WEBP":
            raise errors.InvalidArgumentError(
                None, None,
                "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.",
            ) from None  # fmt: skip
        raise errors.InvalidArgumentError(None, None, f"Invalid image data: {e}") from None


def _decode_shape(rank, channels_attr=True):
    def fn(op):
        c = op._attr("channels") if channels_attr else 3
        c = c or None
        return [tensor_shape.TensorShape([None] * (rank - 1) + [c])]

    return fn


def _decode_image_shape(op):
    # TF: any rank when animations may expand to [frames, h, w, c]
    if op._attr("expand_animations"):
        return [tensor_shape.unknown_shape()]
    return _decode_shape(3)(op)


def _register_decode(name, fmt, extra, rank=3, out="image: uint8", channels=True):
    attrs = {"channels": 0, **extra} if channels else dict(extra)
    op_def = register_op(
        name,
        inputs=["contents: string"],
        outputs=[out],
        attrs=attrs,
        shape_fn=_decode_image_shape if name == "DecodeImage" else _decode_shape(rank, channels),
        is_async=True,
    )
    NotDifferentiable(name)
    return op_def


DecodeJpeg = _register_decode(
    "DecodeJpeg",
    "JPEG",
    {
        "ratio": 1,
        "fancy_upscaling": True,
        "try_recover_truncated": False,
        "acceptable_fraction": 1.0,
        "dct_method": "",
    },
)
DecodePng = _register_decode(
    "DecodePng",
    "PNG",
    {"dtype": TypeConstraint(["uint8", "uint16"], default="uint8")},
    out="image: dtype",
)
DecodeBmp = _register_decode("DecodeBmp", "BMP", {})
DecodeGif = _register_decode("DecodeGif", "GIF", {}, rank=4, channels=False)
DecodeJxl = _register_decode(
    "DecodeJxl", "JXL", {"dtype": TypeConstraint(["uint8"], default="uint8")}, out="image: dtype"
)
DecodeImage = _register_decode(
    "DecodeImage",
    None,
    {
        "dtype": TypeConstraint(["uint8", "uint16", "float32"], default="uint8"),
        "expand_animations": True,
    },
    out="image: dtype",
)


def jpeg_options(attrs) -> tuple[str, bool]:
    """DecodeJpeg's (dct_method, fancy_upscaling), checked as TF checks them."""
    dct = attrs["dct_method"]
    dct = dct.decode() if isinstance(dct, bytes) else str(dct)
    if dct not in _JPEG_DCT:
        raise errors.InvalidArgumentError(
            None, None, "dct_method must be one of {'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}"
        )
    ratio = int(attrs["ratio"])
    if ratio not in (1, 2, 4, 8):
        raise errors.InvalidArgumentError(None, None, f"ratio must be 1, 2, 4, or 8, got {ratio}")
    return dct, bool(attrs["fancy_upscaling"])


@DecodeJpeg.kernel("CPU")
async def _decode_jpeg(ctx, contents):
    a = ctx.attrs
    if a["channels"] not in (0, 1, 3):
        raise errors.InvalidArgumentError(None, None, "channels must be 0, 1, or 3")
    jpeg = jpeg_options(a)
    return await _off_loop(
        _decode, _bytes(contents), "JPEG", a["channels"], np.uint8, int(a["ratio"]), jpeg
    )


@DecodePng.kernel("CPU")
async def _decode_png(ctx, contents):
    a = ctx.attrs
    return await _off_loop(
        _decode, _bytes(contents), "PNG", a["channels"], a["dtype"].as_numpy_dtype
    )


@DecodeBmp.kernel("CPU")
async def _decode_bmp(ctx, contents):
    return await _off_loop(_decode, _bytes(contents), "BMP", ctx.attrs["channels"], np.uint8)


@DecodeGif.kernel("CPU")
async def _decode_gif(ctx, contents):
    return await _off_loop(_decode, _bytes(contents), "GIF", 3, np.uint8)


_IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF8", b"BM")


@DecodeJxl.kernel("CPU")
async def _decode_jxl(ctx, contents):
    # TF's DecodeJxl is its generic image kernel: other formats decode as DecodeImage's.
    channels = ctx.attrs["channels"]
    if channels not in (0, 1, 3, 4):
        raise errors.InvalidArgumentError(
            None, None, f"`channels` must be 0, 1, 3 or 4 but got {channels}"
        )
    data = _bytes(contents)
    if not data:
        raise errors.InvalidArgumentError(None, None, "Input is empty.")
    if jxl_codec.is_jxl(data):
        return await _off_loop(jxl_codec.decode, data, channels)
    if not data.startswith(_IMAGE_SIGNATURES) and data[8:12] != b"WEBP":
        raise errors.InvalidArgumentError(
            None, None,
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.",
        )  # fmt: skip
    out = await _off_loop(_decode, data, None, channels, np.uint8)
    return out[0] if out.ndim == 4 else out


@DecodeImage.kernel("CPU")
async def _decode_image(ctx, contents):
    a = ctx.attrs
    dt = a["dtype"].as_numpy_dtype
    data = _bytes(contents)
    if jxl_codec.is_jxl(data):
        if dt != np.uint8:
            raise errors.InvalidArgumentError(None, None, "JXL only supports uint8 for dtype")
        return await _off_loop(jxl_codec.decode, data, a["channels"])
    raw = np.uint16 if dt == np.uint16 else np.uint8
    out = await _off_loop(_decode, _bytes(contents), None, a["channels"], raw)
    if out.ndim == 4 and not a["expand_animations"]:
        out = out[0]
    if dt == np.float32:
        out = out.astype(np.float32) / np.float32(np.iinfo(raw).max)
    return out


def _encode(image: np.ndarray, fmt: str, **kw) -> np.ndarray:
    Image = _pil()
    if image.ndim != 3:
        raise errors.InvalidArgumentError(None, None, "image must be 3-dimensional")
    c = image.shape[2]
    if c not in _MODES:
        raise errors.InvalidArgumentError(None, None, f"image must have 1-4 channels, got {c}")
    if image.dtype == np.uint16:
        if c != 1:
            raise errors.InvalidArgumentError(None, None, "uint16 PNGs need 1 channel here")
        img = Image.fromarray(image[:, :, 0].astype("<u2"), "I;16")
    else:
        img = Image.fromarray(image[:, :, 0] if c == 1 else image, _MODES[c])
    buf = _io.BytesIO()
    img.save(buf, fmt, **kw)
    out = np.empty((), object)
    out[()] = buf.getvalue()
    return out


EncodePng = register_op(
    "EncodePng",
    inputs=["image: T"],
    outputs=["contents: string"],
    attrs={"T": TypeConstraint(["uint8", "uint16"], default="uint8"), "compression": -1},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(3)[:-3]],
    is_async=True,
)
NotDifferentiable("EncodePng")


def _png(image: np.ndarray, level: int) -> np.ndarray:
    """One PNG per [height, width, channels] image of `image` (rank >= 3, as TF's
    batched EncodePng), TF's bytes (ops/png_codec.py)."""
    if image.ndim < 3:
        raise errors.InvalidArgumentError(
            None, None, f"image must be at least 3-dimensional[{','.join(map(str, image.shape))}]"
        )
    if image.shape[-1] not in _MODES:
        raise errors.InvalidArgumentError(
            None, None, f"image must have 1, 2, 3, or 4 channels, got {image.shape[-1]}"
        )
    if not (image.shape[-3] and image.shape[-2]):  # (TF aborts the process here)
        raise errors.InvalidArgumentError(
            None, None, f"image must have a nonzero height and width, got {list(image.shape)}"
        )
    batch = image.shape[:-3]
    flat = image.reshape((-1, *image.shape[-3:]))
    out = np.empty(len(flat), object)
    for i, one in enumerate(flat):
        out[i] = png_codec.encode_png(one, level)
    return out.reshape(batch)


@EncodePng.kernel("CPU")
async def _encode_png(ctx, image):
    level = int(ctx.attrs["compression"])
    return await _off_loop(_png, np.asarray(image), level)


EncodeJpeg = register_op(
    "EncodeJpeg",
    inputs=["image: uint8"],
    outputs=["contents: string"],
    attrs={
        "format": "",
        "quality": 95,
        "progressive": False,
        "optimize_size": False,
        "chroma_downsampling": True,
        "density_unit": "in",
        "x_density": 300,
        "y_density": 300,
        "xmp_metadata": "",
    },
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    is_async=True,
)
NotDifferentiable("EncodeJpeg")


def _shape_list(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _jpeg_with_density(image: np.ndarray, unit: str, x: int, y: int, **kw) -> np.ndarray:
    """Pillow's JPEG with TF's JFIF density: Pillow writes `dpi` as inches; for "cm"
    the APP0 segment's unit byte becomes 2 (Pillow always writes JFIF APP0 first)."""
    out = _encode(image, "JPEG", dpi=(x, y), **kw)
    if unit == "cm":
        data = bytearray(out[()])
        if data[2:4] == b"\xff\xe0" and data[6:11] == b"JFIF\x00":
            data[13] = 2
        out[()] = bytes(data)
    return out


@EncodeJpeg.kernel("CPU")
async def _encode_jpeg(ctx, image):
    a = ctx.attrs
    image = np.asarray(image)
    if image.ndim != 3:
        raise errors.InvalidArgumentError(
            None, None, f"image must be 3-dimensional{_shape_list(image.shape)}"
        )
    fmt = a["format"].decode() if isinstance(a["format"], bytes) else a["format"]
    want = {"grayscale": 1, "rgb": 3}.get(fmt)
    if want is not None and image.shape[2] != want:
        raise errors.InvalidArgumentError(
            None, None, f"format {fmt} expects {want} channels, got {_shape_list(image.shape)}"
        )
    if image.shape[2] not in (1, 3):
        raise errors.InvalidArgumentError(
            None, None, f"image must have 1 or 3 channels, got {_shape_list(image.shape)}"
        )
    quality = int(a["quality"])
    if not 0 <= quality <= 100:
        raise errors.InvalidArgumentError(None, None, f"quality must be in [0,100], got {quality}")
    unit, xmp = (v.decode() if isinstance(v, bytes) else str(v)
                 for v in (a["density_unit"], a["xmp_metadata"]))  # fmt: skip
    kw = {
        "quality": quality,
        "progressive": bool(a["progressive"]),
        "optimize": bool(a["optimize_size"]),
        # (one component: libjpeg's gray sampling is 1x1 whatever chroma_downsampling says)
        "subsampling": 2 if a["chroma_downsampling"] and image.shape[2] == 3 else 0,
    }
    if xmp:  # (an APP1 segment after JFIF's, as libjpeg writes TF's)
        kw["xmp"] = xmp.encode()
    x, y = int(a["x_density"]), int(a["y_density"])
    return await _off_loop(lambda: _jpeg_with_density(image, unit, x, y, **kw))
