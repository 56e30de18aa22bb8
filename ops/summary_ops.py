"""Summary ops: ScalarSummary, HistogramSummary, ImageSummary, AudioSummaryV2,
TensorSummaryV2, MergeSummary, and TF1's `tf.summary.*` builders over them.

Each kernel returns one serialized `Summary` protocol buffer (a scalar string tensor),
with TF's tags, values and encodings: histograms use TF's default bucket limits (1e-12
growing by 10% to 1e20, mirrored for negatives, then +-DBL_MAX) and collapse runs of
empty buckets as `Histogram::EncodeToProto`; images are PNG (floats normalised per image
as TF's ImageSummary: [0, max] -> [0, 255], or symmetric around 128 when negative, non-
finite pixels painted `bad_color`); audio is 16-bit PCM WAV.  The builders name ops and
tags as TF1's `summary_scope` (family prefixes) and add the op to the SUMMARIES
collection unless `collections` says otherwise.
"""

from __future__ import annotations

import re
import struct
import sys
import zlib

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.graph_io import tensor_proto
from asyncflow.protos.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "audio",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "tensor_summary",
    "text",
]

_SCALAR = lambda op: [tensor_shape.TensorShape([])]  # noqa: E731
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_REAL = TypeConstraint(_FLOATS + _INTS, default=dtypes.float32)


def _serialized(summary: Summary) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


def _tag(value) -> str:
    t = np.asarray(value, dtype=object).reshape(-1)[0] if np.ndim(value) else value
    t = t[()] if isinstance(t, np.ndarray) else t
    return t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t)


def _check_scalar_tag(tag, what="tag"):
    if np.ndim(tag) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"{what} must be scalar; got shape {list(np.shape(tag))}"
        )


# -- ScalarSummary ------------------------------------------------------------------------

ScalarSummary = register_op(
    "ScalarSummary",
    inputs=["tags: string", "values: T"],
    outputs=["summary: string"],
    attrs={"T": _REAL},
    shape_fn=_SCALAR,
)


@ScalarSummary.kernel("CPU")
async def _scalar_summary(ctx, tags, values):
    if np.shape(tags) != np.shape(values):
        raise errors.InvalidArgumentError(
            None,
            None,
            "tags and values are not the same shape: "
            f"[{','.join(map(str, np.shape(tags)))}] != "
            f"[{','.join(map(str, np.shape(values)))}]",
        )
    summary = Summary()
    flat_values = np.asarray(values).reshape(-1)
    for tag, v in zip(np.asarray(tags, dtype=object).reshape(-1), flat_values):
        summary.value.add(tag=_tag(tag), simple_value=float(np.float32(v)))
    return _serialized(summary)


# -- HistogramSummary ---------------------------------------------------------------------


def _default_bucket_limits() -> list[float]:
    pos, v = [], 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


_BUCKET_LIMITS = _default_bucket_limits()
_LIMITS = np.array(_BUCKET_LIMITS)


# Bucket lookup in O(1) per value, exactly `np.searchsorted(_LIMITS, v, side="right")`
# (TF's upper_bound): a float64's top 20 bits (sign, exponent, 8 mantissa bits) name a
# cell of relative width 2**-8, narrower than a bucket (10%), so at most one limit falls
# inside a cell; the table holds the bucket of each cell's lowest value and one
# comparison with the next limit settles the value.  30x faster than a binary search
# over the 1,546 limits (0.9 ms for 400k values); built on first use (30 ms, 2 MiB).
_TABLE: np.ndarray | None = None
_LIMITS_INF = np.append(_LIMITS, np.inf)


def _bucket_table() -> np.ndarray:
    global _TABLE
    if _TABLE is None:
        keys = np.arange(1 << 20, dtype=np.uint64)
        negative = (keys >> np.uint64(19)) == 1
        low = np.where(negative, np.uint64((1 << 44) - 1), np.uint64(0))
        with np.errstate(invalid="ignore"):  # the NaN/inf cells are never looked up
            lowest = ((keys << np.uint64(44)) | low).view(np.float64)
        _TABLE = np.searchsorted(_LIMITS, lowest, side="right").astype(np.int16)
    return _TABLE


def bucket_indices(v: np.ndarray) -> np.ndarray:
    """For finite float64 `v`: the index of each value's bucket (TF's upper_bound)."""
    idx = _bucket_table()[v.view(np.uint64) >> np.uint64(44)].astype(np.intp)
    idx += v >= _LIMITS_INF[idx]
    return idx


# Up to this many values the sums add one value at a time, as TF does (bit-identical);
# above, numpy's pairwise sum (faster, as accurate or more; may differ in the last bits).
_SEQUENTIAL_SUM_MAX = 1 << 16


def histogram_proto(values) -> HistogramProto:
    """TF's `Histogram` of `values` (as float64), encoded as `EncodeToProto(h, False)`."""
    v = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    proto = HistogramProto()
    if v.size:
        counts = np.bincount(bucket_indices(v), minlength=_LIMITS.size)
        proto.min, proto.max, proto.num = float(v.min()), float(v.max()), float(v.size)
        if v.size <= _SEQUENTIAL_SUM_MAX:
            proto.sum = float(np.cumsum(v)[-1])
            proto.sum_squares = float(np.cumsum(v * v)[-1])
        else:
            proto.sum = float(v.sum())
            proto.sum_squares = float(np.dot(v, v))
        nonzero = np.flatnonzero(counts)
        limits, buckets = [], []
        prev = -1
        for i in nonzero.tolist():
            if i > prev + 1:  # a run of empty buckets collapses into its last limit
                limits.append(_BUCKET_LIMITS[i - 1])
                buckets.append(0.0)
            limits.append(_BUCKET_LIMITS[i])
            buckets.append(float(counts[i]))
            prev = i
        if prev < len(_BUCKET_LIMITS) - 1:
            limits.append(_BUCKET_LIMITS[-1])
            buckets.append(0.0)
        proto.bucket_limit.extend(limits)
        proto.bucket.extend(buckets)
    else:
        proto.min, proto.max = _BUCKET_LIMITS[-1], -_BUCKET_LIMITS[-1]
        proto.bucket_limit.append(_BUCKET_LIMITS[-1])
        proto.bucket.append(0.0)
    return proto


HistogramSummary = register_op(
    "HistogramSummary",
    inputs=["tag: string", "values: T"],
    outputs=["summary: string"],
    attrs={"T": _REAL},
    shape_fn=_SCALAR,
)


@HistogramSummary.kernel("CPU")
async def _histogram_summary(ctx, tag, values):
    _check_scalar_tag(tag)
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        kind = "Nan" if np.isnan(v).any() else "Infinity"
        raise errors.InvalidArgumentError(
            None, None, f"{kind} in summary histogram for: {ctx.op.name}"
        )
    summary = Summary()
    summary.value.add(tag=_tag(tag), histo=histogram_proto(v))
    return _serialized(summary)


# -- ImageSummary -------------------------------------------------------------------------


def encode_png(pixels: np.ndarray) -> bytes:
    """A [height, width, channels] uint8 array (1, 3 or 4 channels) as PNG bytes."""
    h, w, c = pixels.shape
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    rows = np.zeros((h, 1 + w * c), np.uint8)  # filter byte 0 (None) on every row
    rows[:, 1:] = pixels.reshape(h, w * c)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def _normalize_image(img: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF's NormalizeFloatImage: an affine map into uint8, computed in the image's type."""
    finite = np.isfinite(img)
    kind = img.dtype.type
    vals = img[finite]
    lo = float(vals.min()) if vals.size else np.inf
    hi = float(vals.max()) if vals.size else -np.inf
    if lo < 0:
        max_val = max(abs(lo), abs(hi))
        scale, offset = kind(0.0 if max_val < 1e-6 else 127.0 / max_val), kind(128.0)
    else:
        scale, offset = kind(0.0 if hi < 1e-6 else 255.0 / hi), kind(0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (np.where(finite, img, 0) * scale + offset).astype(np.uint8)
    bad = ~finite.all(axis=-1)
    out[bad] = bad_color[: img.shape[-1]]
    return out


ImageSummary = register_op(
    "ImageSummary",
    inputs=["tag: string", "tensor: T"],
    outputs=["summary: string"],
    attrs={
        "max_images": 3,
        "T": TypeConstraint(("uint8", "float32", "float16", "float64"), default=dtypes.float32),
        "bad_color": np.array([255, 0, 0, 255], np.uint8),
    },
    shape_fn=_SCALAR,
)


@ImageSummary.kernel("CPU")
async def _image_summary(ctx, tag, tensor):
    _check_scalar_tag(tag)
    t = np.asarray(tensor)
    if t.ndim != 4 or t.shape[-1] not in (1, 3, 4):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Tensor must be 4-D with last dim 1, 3, or 4, not [{','.join(map(str, t.shape))}]",
        )
    bad_color = np.asarray(ctx.attrs["bad_color"], np.uint8).reshape(-1)
    if bad_color.size < t.shape[-1]:
        raise errors.InvalidArgumentError(
            None, None, f"bad_color must have at least {t.shape[-1]} elements"
        )
    base = _tag(tag)
    n = min(t.shape[0], ctx.attrs["max_images"])
    summary = Summary()
    for i in range(n):
        img = t[i] if t.dtype == np.uint8 else _normalize_image(t[i], bad_color)
        one = ctx.attrs["max_images"] == 1  # (TF: by the attr, not by the batch size)
        value = summary.value.add(tag=f"{base}/image" if one else f"{base}/image/{i}")
        value.image.height, value.image.width = int(t.shape[1]), int(t.shape[2])
        value.image.colorspace = int(t.shape[3])
        value.image.encoded_image_string = encode_png(np.ascontiguousarray(img))
    return _serialized(summary)


# -- AudioSummaryV2 -----------------------------------------------------------------------


def encode_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """[frames, channels] floats in [-1, 1] as 16-bit PCM WAV (TF's EncodeAudioAsS16LEWav)."""
    frames, channels = samples.shape
    pcm = np.clip(np.round(samples.astype(np.float32) * 32768.0), -32768, 32767)
    data = pcm.astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(data),
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        sample_rate,
        sample_rate * channels * 2,
        channels * 2,
        16,
        b"data",
        len(data),
    )
    return header + data


AudioSummaryV2 = register_op(
    "AudioSummaryV2",
    inputs=["tag: string", "tensor: float", "sample_rate: float"],
    outputs=["summary: string"],
    attrs={"max_outputs": 3},
    shape_fn=_SCALAR,
)


@AudioSummaryV2.kernel("CPU")
async def _audio_summary(ctx, tag, tensor, sample_rate):
    _check_scalar_tag(tag)
    t = np.asarray(tensor, np.float32)
    if t.ndim not in (2, 3):
        raise errors.InvalidArgumentError(
            None, None, f"Tensor must be 3-D or 2-D, got: [{','.join(map(str, t.shape))}]"
        )
    if np.ndim(sample_rate) != 0:
        raise errors.InvalidArgumentError(None, None, "sample_rate must be rank-0")
    rate = float(sample_rate)
    if rate <= 0:
        raise errors.InvalidArgumentError(None, None, "sample_rate must be > 0")
    if t.ndim == 2:
        t = t[:, :, None]
    base = _tag(tag)
    n = min(t.shape[0], ctx.attrs["max_outputs"])
    summary = Summary()
    for i in range(n):
        one = ctx.attrs["max_outputs"] == 1
        value = summary.value.add(tag=f"{base}/audio" if one else f"{base}/audio/{i}")
        value.audio.sample_rate = rate
        value.audio.num_channels = int(t.shape[2])
        value.audio.length_frames = int(t.shape[1])
        value.audio.content_type = "audio/wav"
        value.audio.encoded_audio_string = encode_wav(t[i], int(rate))
    return _serialized(summary)


# -- TensorSummaryV2 ----------------------------------------------------------------------

TensorSummaryV2 = register_op(
    "TensorSummaryV2",
    inputs=["tag: string", "tensor: T", "serialized_summary_metadata: string"],
    outputs=["summary: string"],
    attrs={"T": TypeConstraint(None)},
    shape_fn=_SCALAR,
)


@TensorSummaryV2.kernel("CPU")
async def _tensor_summary(ctx, tag, tensor, serialized_summary_metadata):
    _check_scalar_tag(tag)
    summary = Summary()
    value = summary.value.add(tag=_tag(tag))
    raw = np.asarray(serialized_summary_metadata, dtype=object)[()]
    value.metadata.ParseFromString(raw if isinstance(raw, bytes) else str(raw).encode())
    tensor_proto(np.asarray(tensor), value.tensor)
    return _serialized(summary)


# -- MergeSummary -------------------------------------------------------------------------

MergeSummary = register_op(
    "MergeSummary",
    inputs=["inputs: N * string"],
    outputs=["summary: string"],
    attrs={"N": 1},
    shape_fn=_SCALAR,
)


@MergeSummary.kernel("CPU")
async def _merge_summary(ctx, *inputs):
    merged = Summary()
    seen: set[str] = set()
    for inp in inputs:
        for raw in np.asarray(inp, dtype=object).reshape(-1):
            part = Summary()
            try:
                part.ParseFromString(raw)
            except Exception:  # protobuf's DecodeError: not a Summary
                raise errors.InvalidArgumentError(
                    None, None, "Could not parse one of the summary inputs"
                ) from None
            for v in part.value:
                if v.tag in seen:
                    raise errors.InvalidArgumentError(
                        None, None, f"Duplicate tag {v.tag} found in summary inputs"
                    )
                seen.add(v.tag)
                merged.value.add().CopyFrom(v)
    return _serialized(merged)


for _name in (
    "ScalarSummary",
    "HistogramSummary",
    "ImageSummary",
    "AudioSummaryV2",
    "TensorSummaryV2",
    "MergeSummary",
):
    NotDifferentiable(_name)


# -- builders (TF1's tf.summary) ----------------------------------------------------------

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _clean_tag(name):
    """TF's `clean_tag`: invalid characters become '_', leading '/' go."""
    if name is None:
        return None
    new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if new_name != name:
        from asyncflow import tf_logging

        tf_logging.info("Summary name %s is illegal; using %s instead.", name, new_name)
    return new_name


class _SummaryScope:
    """TF's `summary_scope`: the name scope `family/name` and the tag shown."""

    def __init__(self, name, family=None, values=None):
        self._name = _clean_tag(name)
        self._family = _clean_tag(family)
        base = self._name if self._family is None else f"{self._family}/{self._name}"
        self._cm = ops.name_scope(base, None, values)

    def __enter__(self):
        scope = self._cm.__enter__()
        tag = scope.rstrip("/")
        if self._family is not None:
            tag = f"{self._family}/{tag}"
        return tag, scope

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def _collect(val, collections, default_collections):
    if collections is None:
        collections = default_collections
    for key in collections:
        ops.add_to_collection(key, val)


def _summary_op(op_type, inputs, attrs, scope):
    return ops.apply_op(op_type, inputs, attrs, name=scope).outputs[0]


def scalar(name, tensor, collections=None, family=None):
    """A Summary with one scalar value (`tf.summary.scalar`).

    Raises:
      ValueError: the tensor is not a scalar (build time, as TF).
    """
    tensor = ops.convert_to_tensor(tensor)
    if tensor.shape.ndims is not None and tensor.shape.ndims != 0:
        raise ValueError(
            f"Shapes must be equal rank, but are {tensor.shape.ndims} and 0 for "
            f"'{name}' (op: 'ScalarSummary')"
        )
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op("ScalarSummary", [tag, tensor], {}, scope)
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def histogram(name, values, collections=None, family=None):
    """A Summary with a histogram of `values` (`tf.summary.histogram`)."""
    with _SummaryScope(name, family, values=[values]) as (tag, scope):
        val = _summary_op("HistogramSummary", [tag, values], {}, scope)
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """PNG images of a [batch, height, width, channels] tensor (`tf.summary.image`)."""
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op("ImageSummary", [tag, tensor], {"max_images": max_outputs}, scope)
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def audio(name, tensor, sample_rate, max_outputs=3, collections=None, family=None):
    """WAV clips of a [batch, frames(, channels)] float tensor (`tf.summary.audio`)."""
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        sample_rate = ops.convert_to_tensor(sample_rate, dtype=dtypes.float32, name="sample_rate")
        val = _summary_op(
            "AudioSummaryV2", [tag, tensor, sample_rate], {"max_outputs": max_outputs}, scope
        )
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def tensor_summary(
    name,
    tensor,
    summary_description=None,
    collections=None,
    summary_metadata=None,
    family=None,
    display_name=None,
):
    """A Summary holding the whole tensor as a TensorProto (`tf.summary.tensor_summary`)."""
    if summary_metadata is None:
        summary_metadata = SummaryMetadata()
    if summary_description is not None:
        summary_metadata.summary_description = summary_description
    if display_name is not None:
        summary_metadata.display_name = display_name
    serialized = summary_metadata.SerializeToString()
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op(
            "TensorSummaryV2",
            [tag, tensor, ops.convert_to_tensor(np.array(serialized, dtype=object))],
            {},
            scope,
        )
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def text(name, tensor, collections=None):
    """A string tensor for TensorBoard's text plugin (`tf.summary.text`).

    Raises:
      ValueError: the tensor is not of dtype string.
    """
    tensor = ops.convert_to_tensor(tensor)
    if tensor.dtype != dtypes.string:
        raise ValueError(f"Expected tensor {tensor.name} to have dtype string, got {tensor.dtype}")
    metadata = SummaryMetadata()
    metadata.plugin_data.plugin_name = "text"
    return tensor_summary(
        name=name, tensor=tensor, summary_metadata=metadata, collections=collections
    )


def merge(inputs, collections=None, name=None):
    """One Summary with every value of `inputs` (`tf.summary.merge`).

    Raises (at run time): InvalidArgumentError for a tag that appears twice.
    """
    inputs = list(inputs)
    with ops.name_scope(name, "Merge", inputs):
        val = ops.apply_op("MergeSummary", [inputs], {"N": len(inputs)}, name=name).outputs[0]
        _collect(val, collections, [])
    return val


def merge_all(key=ops.GraphKeys.SUMMARIES, scope=None, name=None):
    """Merge every summary in collection `key` (optionally under `scope`); None if none."""
    summary_ops = ops.get_collection(key, scope=scope)
    if not summary_ops:
        return None
    return merge(summary_ops, name=name)
