"""JPEG XL decoding as TF 2.21's DecodeJxl does it (libjxl, 8-bit output), through
imagecodecs' libjxl binding.

TF asks libjxl for 8-bit samples in the image's own channels (color, plus alpha when
there is one) and takes the first frame.  imagecodecs gives each image at its own depth
instead (uint8 for 8-bit images, uint16 for up to 16 bits, float for float images), so:

- 8-bit images (nearly all): imagecodecs' samples are libjxl's 8-bit ones, TF's pixels.
- any other depth: libjxl's conversion is redone from the samples: v = clamp(x, 0, 1) *
  255 plus libjxl's ordered dither (an 8-row, 4-column Bayer pattern of (k + 0.5) / 64 -
  0.5 by pixel position), rounded to nearest even, in float32 as libjxl computes it.
  Lossless images come out exactly as TF's; lossy ones of more than 8 bits come out of
  imagecodecs already rounded to their depth, so a sample whose value lies that close
  to a rounding boundary may be one level off TF's (measured: 0.05% of 16-bit and float
  samples, about 6% of 10-bit and float16 ones, most of a lossy 1-7-bit image's).

The header is read here before anything is decoded: its size (and sample count) is
checked against _MAX_SAMPLES before libjxl allocates the image.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors

_CODESTREAM = b"\xff\x0a"
_CONTAINER = b"\x00\x00\x00\x0cJXL \r\n\x87\n"
_MAX_SAMPLES = 1 << 30  # width * height * samples a decode may allocate
_HEADER_BYTES = 4096  # more than any header up to the bit depth needs

# libjxl's dither for 8-bit output (render_pipeline/stage_write.cc), by (y % 8, x % 4).
_BAYER = np.array(
    [[0, 32, 8, 40], [48, 16, 56, 24], [12, 44, 4, 36], [60, 28, 52, 20],
     [3, 35, 11, 43], [51, 19, 59, 27], [15, 47, 7, 39], [63, 31, 55, 23]],
)  # fmt: skip
_DITHER = ((_BAYER + 0.5) / 64 - 0.5).astype(np.float32)


def is_jxl(data: bytes) -> bool:
    return data.startswith(_CODESTREAM) or data.startswith(_CONTAINER)


def _failed() -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, "Failed to decode JXL image")


class _Bits:
    """The codestream's bits, least significant first."""

    def __init__(self, data: bytes):
        self.value = int.from_bytes(data, "little")
        self.left = len(data) * 8

    def u(self, n: int) -> int:
        if n > self.left:
            raise _failed()
        out = self.value & ((1 << n) - 1)
        self.value >>= n
        self.left -= n
        return out

    def u32(self, *dists) -> int:
        """The spec's U32: a 2-bit selector, then a constant or (bits, offset)."""
        d = dists[self.u(2)]
        return d if isinstance(d, int) else d[1] + self.u(d[0])


def _codestream(data: bytes) -> bytes:
    """The codestream's first bytes (enough for the header), from a box file too."""
    if data.startswith(_CODESTREAM):
        return data[:_HEADER_BYTES]
    pos, out = 0, b""
    while pos + 8 <= len(data) and len(out) < _HEADER_BYTES:
        size, kind = int.from_bytes(data[pos : pos + 4], "big"), data[pos + 4 : pos + 8]
        head = 8
        if size == 1:
            if pos + 16 > len(data):
                break
            size, head = int.from_bytes(data[pos + 8 : pos + 16], "big"), 16
        elif size == 0:
            size = len(data) - pos
        if size < head:
            raise _failed()
        body = data[pos + head : pos + size]
        if kind == b"jxlc":
            out += body
        elif kind == b"jxlp":
            out += body[4:]
        pos += size
    if not out.startswith(_CODESTREAM):
        raise _failed()
    return out[:_HEADER_BYTES]


_RATIOS = {1: (1, 1), 2: (12, 10), 3: (4, 3), 4: (3, 2), 5: (16, 9), 6: (5, 4), 7: (2, 1)}


def _size(bits: _Bits, small_dims, large_dims) -> tuple[int, int]:
    """A SizeHeader or PreviewHeader: (height, width)."""
    div8 = bits.u(1)
    height = 8 * bits.u32(*small_dims) if div8 else bits.u32(*large_dims)
    ratio = bits.u(3)
    if ratio:
        num, den = _RATIOS[ratio]
        return height, height * num // den
    return height, 8 * bits.u32(*small_dims) if div8 else bits.u32(*large_dims)


def header(data: bytes) -> tuple[int, int, int, int, bool]:
    """(height, width, bits per sample, extra channels, float samples) of a JXL image.

    Raises:
      InvalidArgumentError: the header does not parse ("Failed to decode JXL image").
    """
    bits = _Bits(_codestream(data)[2:])
    image = ((5, 1),) * 4, ((9, 1), (13, 1), (18, 1), (30, 1))
    height, width = _size(bits, *image)
    depth, extra, is_float = 8, 0, False
    if not bits.u(1):  # ImageMetadata.all_default
        if bits.u(1):  # extra_fields
            bits.u(3)  # orientation
            if bits.u(1):  # have_intrinsic_size
                _size(bits, *image)
            if bits.u(1):  # have_preview
                _size(bits, (16, 32, (5, 1), (9, 33)), ((6, 1), (8, 65), (10, 321), (12, 1345)))
            if bits.u(1):  # have_animation
                bits.u32(100, 1000, (10, 1), (30, 1))
                bits.u32(1, 1001, (8, 1), (10, 1))
                bits.u32(0, (3, 0), (16, 0), (32, 0))
                bits.u(1)
        is_float = bool(bits.u(1))
        if is_float:
            depth = bits.u32(32, 16, 24, (6, 1))
            bits.u(4)
        else:
            depth = bits.u32(8, 10, 12, (6, 1))
        bits.u(1)  # modular_16bit_buffers
        extra = bits.u32(0, 1, (4, 2), (12, 1))
    if not (height and width) or not 1 <= depth <= 32:
        raise _failed()
    return height, width, depth, extra, is_float


def _to_uint8(samples: np.ndarray, depth: int) -> np.ndarray:
    """libjxl's 8-bit output from samples of another depth (see the module note)."""
    if samples.dtype.kind == "f":
        x = np.clip(samples.astype(np.float32), 0, 1)
    else:
        x = samples.astype(np.float32) * np.float32(1 / ((1 << depth) - 1))
    h, w = x.shape[:2]
    dither = _DITHER[np.arange(h)[:, None] % 8, np.arange(w)[None, :] % 4]
    v = x * np.float32(255) + dither[:, :, None]
    return np.clip(np.rint(v), 0, 255).astype(np.uint8)


def decode(data: bytes, channels: int) -> np.ndarray:
    """The first frame of a JXL image, uint8 [height, width, its channels].

    Raises:
      InvalidArgumentError: a damaged image; `channels` (non-zero) not the image's.
      ResourceExhaustedError: an image of more than _MAX_SAMPLES samples.
    """
    import imagecodecs

    height, width, depth, extra, is_float = header(data)
    if height * width * (3 + extra) > _MAX_SAMPLES:
        raise errors.ResourceExhaustedError(
            None, None, f"JXL image of {height}x{width} is too large to decode"
        )
    try:
        out = imagecodecs.jpegxl_decode(data, 0, numthreads=1)
    except Exception:  # noqa: BLE001 - any codec failure is bad input
        raise _failed() from None
    if out.ndim == 3 and extra and out.shape[0] == 1 + extra and out.shape[2] > 4:
        out = out[0]  # gray with extra channels, none alpha: imagecodecs gives planes
    if out.ndim == 2:
        out = out[:, :, None]
    if out.dtype != np.uint8 or depth != 8:
        out = _to_uint8(out, depth)
    if channels not in (0, out.shape[2]):
        raise errors.InvalidArgumentError(
            None, None, "Number of channels requested does not match input"
        )
    return np.ascontiguousarray(out)
