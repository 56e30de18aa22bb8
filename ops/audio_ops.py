"""TF's WAV codec: DecodeWav and EncodeWav (`tf.audio.decode_wav` / `encode_wav`, TF1's
`tf.contrib.framework.python.ops.audio_ops`), 16-bit PCM only, as TF's.

Decoding reads TF's layout and says TF's words for what it refuses (all recorded from TF
2.21): a "RIFF" header, "WAVE", then a "fmt " chunk right away (16 or 18 bytes: PCM,
16 bits, consistent block and byte rates), then chunks until the input ends, one of
them "data"; other chunks are skipped by their size.  Samples are int16 / 32768.  The
input is untrusted: every read is bounds-checked before anything is allocated ("Data
too short when trying to read string"), and a chunk may not claim more than 2**31 - 1
bytes.  As TF's reader, the data chunk advances the reading position only by the whole
frames read, so bytes left over from a partial frame are read as the next chunk.

Encoding writes TF's 44-byte header and rounds `sample * 32768` half away from zero,
clamped to int16 (NaN as 0).
"""

from __future__ import annotations

import struct

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, named_outputs, register_op

__all__ = ["decode_wav", "encode_wav"]

_INT32_MAX = 2**31 - 1


def _decode_wav_shape(op):
    op.inputs[0].shape.with_rank(0)
    channels, samples = op._attr("desired_channels"), op._attr("desired_samples")
    audio = tensor_shape.TensorShape(
        [samples if samples > 0 else None, channels if channels > 0 else None]
    )
    return [audio, tensor_shape.TensorShape([])]


DecodeWav = register_op(
    "DecodeWav",
    inputs=["contents: string"],
    outputs=["audio: float", "sample_rate: int32"],
    attrs={"desired_channels": -1, "desired_samples": -1},
    shape_fn=_decode_wav_shape,
)
NotDifferentiable("DecodeWav")


def _encode_wav_shape(op):
    op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(0)
    return [tensor_shape.TensorShape([])]


EncodeWav = register_op(
    "EncodeWav",
    inputs=["audio: float", "sample_rate: int32"],
    outputs=["contents: string"],
    shape_fn=_encode_wav_shape,
)
NotDifferentiable("EncodeWav")


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


class _Reader:
    """Bounds-checked little-endian reads of a WAV string."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise _invalid("Data too short when trying to read string")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def text(self) -> str:
        return self.take(4).decode("latin-1")


def _parse_wav(data: bytes) -> tuple[np.ndarray, int, int]:
    """(int16 samples interleaved, channels, sample rate) of a 16-bit PCM WAV string."""
    r = _Reader(data)
    for want in ("RIFF", None, "WAVE"):
        if want is None:
            r.u32()  # the RIFF size: TF reads it and checks nothing
            continue
        found = r.text()
        if found != want:
            raise _invalid(f"Header mismatch: Expected {want} but found {found}")
    found = r.text()
    if found != "fmt ":
        raise _invalid(f"Unexpected field {found}")
    fmt_size = r.u32()
    if fmt_size not in (16, 18):
        raise _invalid(f"Bad format chunk size for WAV: Expected 16 or 18, but got{fmt_size}")
    audio_format = r.u16()
    if audio_format != 1:
        raise _invalid(f"Bad audio format for WAV: Expected 1 (PCM), but got{audio_format}")
    channels = r.u16()
    if channels < 1:
        raise _invalid(f"Bad number of channels for WAV: Expected at least 1, but got {channels}")
    rate, byte_rate, block, bits = r.u32(), r.u32(), r.u16(), r.u16()
    if bits != 16:
        raise _invalid(f"Can only read 16-bit WAV files, but received {bits}")
    want_block = bits * channels // 8
    if block != want_block:
        raise _invalid(
            f"Bad bytes per sample in WAV header: Expected {want_block} but got {block}"
        )
    if byte_rate != block * rate:
        raise _invalid(
            f"Bad bytes per second in WAV header: Expected {block * rate} but got {byte_rate} "
            f"(sample_rate={rate}, bytes_per_sample={block})"
        )
    if fmt_size == 18:
        r.take(2)  # (the extension's size)
    samples = None
    while r.pos < len(data):
        chunk, size = r.text(), r.u32()
        if size > _INT32_MAX:
            raise _invalid(
                f"WAV data chunk '{chunk}' is too large: {size} bytes, but the limit is "
                f"{_INT32_MAX}"
            )
        if chunk != "data":
            r.pos += size
            continue
        if samples is not None:
            raise _invalid("More than one data chunk found in WAV")
        frames = size // block
        raw = r.take(frames * channels * 2)  # (checked before anything is allocated)
        samples = np.frombuffer(raw, dtype="<i2")
    if samples is None:
        raise _invalid("No data chunk found in WAV")
    return samples, channels, rate


@DecodeWav.kernel("CPU")
async def _decode_wav(ctx, contents):
    contents = np.asarray(contents, dtype=object)
    if contents.ndim != 0:
        raise _invalid(f"contents must be scalar, got shape {list(contents.shape)}")
    value = contents[()]
    samples, channels, rate = _parse_wav(value if isinstance(value, bytes) else bytes(value))
    frames = samples.reshape(-1, channels).astype(np.float32) / np.float32(32768.0)
    want_channels = ctx.attrs["desired_channels"]
    want_samples = ctx.attrs["desired_samples"]
    if want_channels > 0 and want_channels != channels:
        # TF: a channel past the file's repeats its last one.
        frames = frames[:, np.minimum(np.arange(want_channels), channels - 1)]
    if want_samples > 0 and want_samples != len(frames):
        out = np.zeros((want_samples, frames.shape[1]), np.float32)
        n = min(want_samples, len(frames))
        out[:n] = frames[:n]
        frames = out
    return frames, np.int32(rate)


@EncodeWav.kernel("CPU")
async def _encode_wav(ctx, audio, sample_rate):
    audio = np.asarray(audio, dtype=np.float32)
    rate = int(sample_rate)
    if not 0 < rate < 2**32:  # (TF prints the rate as the uint64 it cast it to)
        raise _invalid(f"sample_rate must be in (0, 2^32), got: {rate & 0xFFFFFFFFFFFFFFFF}")
    n_frames, channels = audio.shape
    if n_frames and not channels:
        raise _invalid("audio is null")  # (TF's words: no samples for its frames)
    if not 0 < channels < 2**16:
        raise _invalid(f"num_channels must be in (0, 2^16), got: {channels}")
    scaled = audio * np.float32(32768.0)  # (exact: a power of two)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))  # half away
    rounded = np.nan_to_num(rounded, nan=0.0, posinf=32767.0, neginf=-32768.0)
    pcm = np.clip(rounded, -32768, 32767).astype("<i2").tobytes()
    if len(pcm) > 0xFFFFFFFF - 36:
        raise _invalid(f"Audio is too large for a WAV file: {len(pcm)} bytes")
    block = channels * 2
    header = b"".join(
        (
            b"RIFF",
            struct.pack("<I", 36 + len(pcm)),
            b"WAVEfmt ",
            struct.pack("<IHHIIHH", 16, 1, channels, rate, (rate * block) & 0xFFFFFFFF, block, 16),
            b"data",
            struct.pack("<I", len(pcm)),
        )
    )
    return np.asarray(header + pcm, dtype=object)


def decode_wav(contents, desired_channels=-1, desired_samples=-1, name=None):
    """`tf.audio.decode_wav`: a 16-bit PCM WAV string as float32 samples in [-1, 1),
    shape [samples, channels], and its sample rate: TF's namedtuple (audio,
    sample_rate).  `desired_channels` / `desired_samples` (> 0) fix the output's shape:
    extra channels repeat the last one, extra samples are zeros.

    Raises (when run): InvalidArgumentError with TF's words for what is not a 16-bit
    PCM WAV (see the module note)."""
    attrs = {"desired_channels": int(desired_channels), "desired_samples": int(desired_samples)}
    return named_outputs(ops.apply_op("DecodeWav", [contents], attrs, name=name))


def encode_wav(audio, sample_rate, name=None):
    """`tf.audio.encode_wav`: float32 samples [samples, channels] (clamped to [-1, 1])
    as a 16-bit PCM WAV string at `sample_rate`.

    Raises: ValueError at build for audio not of rank 2 or a non-scalar sample_rate;
    InvalidArgumentError when run for a sample rate outside (0, 2**32) or frames of no
    channels (TF's "audio is null"). NaN encodes as 0."""
    return ops.apply_op("EncodeWav", [audio, sample_rate], name=name).outputs[0]
