"""TF's Unicode string ops: UnicodeDecode / UnicodeDecodeWithOffsets, UnicodeEncode,
UnicodeTranscode, UnicodeScript, StringNGrams and UnsortedSegmentJoin, with the
`tf.strings` builders over them (`unicode_decode[_with_offsets]`,
`unicode_split[_with_offsets]`, `unicode_encode`, `unicode_transcode`, `unicode_script`,
`ngrams`, `bytes_split`, `unsorted_segment_join`), ragged results as RaggedTensor.

TF decodes with ICU converters; Python's codecs give the very same code points for
UTF-8, UTF-16 and UTF-32 input, ill-formed sequences included (both replace each
maximal ill-formed subpart with one replacement character, as Unicode recommends), so
the decoders here are Python's, with an error handler that records where each
replacement starts (a character's byte offset).  Control characters (U+0000..U+001F)
are replaced under `replace_control_characters` in every mode, and dropped with
`errors='ignore'` (as TF's transcoder does).  Script codes are ICU's UScriptCode, from a
table TF itself produced (ops/unicode_script_data.py).  Every kernel is a host (CPU)
kernel over NumPy object arrays of bytes; checked against TF 2.21's recorded results
(tests/ops/test_string_unicode_ops.py).
"""

from __future__ import annotations

import codecs
import threading

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.string_ops import check_choice
from asyncflow.ragged import RaggedTensor, is_ragged
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = []  # tf.strings.* names only (asyncflow/namespaces.py); TF1 has no top-level ones

_SPLITS = TypeConstraint([dtypes.int32, dtypes.int64], default=dtypes.int64)
_OUT_ENCODINGS = ("UTF-8", "UTF-16-BE", "UTF-32-BE")
_ERRORS = ("strict", "replace", "ignore")
_MAX_CP = 0x10FFFF


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- decoding -----------------------------------------------------------------------------

# Each decode call collects the (start, end) byte spans its codec could not decode;
# worker threads decode concurrently, so the list is per thread.
_spans = threading.local()


def _record_span(exc: UnicodeDecodeError):
    _spans.items.append((exc.start, exc.end))
    return "\ufffd", exc.end


codecs.register_error("asyncflow.unicode_ops", _record_span)

# Byte width of a code point, for the codecs whose widths are fixed by the code point.
_WIDTHS = {
    "utf-8": lambda cp: 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000),
    "utf-16-be": lambda cp: 2 + 2 * (cp >= 0x10000),
    "utf-16-le": lambda cp: 2 + 2 * (cp >= 0x10000),
    "utf-32-be": lambda cp: 4 + 0 * cp,
    "utf-32-le": lambda cp: 4 + 0 * cp,
}


def _codec(encoding: str) -> str:
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise _invalid(f"Could not create converter for input encoding: {encoding}") from None


def _check_replacement(rc: int) -> int:
    if not 0 <= rc <= _MAX_CP:
        raise _invalid("replacement_char out of unicode codepoint range")
    return rc


class _Decoder:
    """One configuration of TF's decode: the attrs of a UnicodeDecode(-WithOffsets) or
    UnicodeTranscode op."""

    def __init__(self, attrs):
        self.codec = _codec(attrs["input_encoding"])
        self.errors = attrs["errors"]
        self.rc = _check_replacement(int(attrs["replacement_char"]))
        self.ctl = bool(attrs["replace_control_characters"])

    def __call__(self, s: bytes) -> tuple[np.ndarray, np.ndarray]:
        """The code points of `s` and the byte offset each starts at."""
        try:
            text, spans = s.decode(self.codec), []
        except UnicodeDecodeError:
            if self.errors == "strict":
                raise _invalid("Invalid formatting on input string") from None
            _spans.items = []
            text, spans = s.decode(self.codec, "asyncflow.unicode_ops"), _spans.items
        cps = np.frombuffer(text.encode("utf-32-le"), "<u4").astype(np.int32)
        offsets = self._offsets(text, cps, spans)
        keep = None
        if spans:
            bad = np.isin(offsets, [a for a, _ in spans]) & (cps == 0xFFFD)
            if self.errors == "ignore":
                keep = ~bad
            else:
                cps[bad] = self.rc
        if self.ctl:
            ctl = (cps >= 0) & (cps < 0x20)
            if self.errors == "ignore":
                keep = ~ctl if keep is None else keep & ~ctl
            else:
                cps[ctl] = self.rc
        if keep is not None:
            cps, offsets = cps[keep], offsets[keep]
        return cps, offsets

    def batch(self, texts: list, width) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Code points, offsets and per-string counts of well-formed decoded `texts`."""
        lengths = np.array([len(t) for t in texts], np.int64)
        cps = np.frombuffer("".join(texts).encode("utf-32-le"), "<u4").astype(np.int32)
        if width is None:  # (every text is "": the strings were decoded one by one)
            return cps, np.zeros(len(cps), np.int64), lengths
        w = width(cps.astype(np.int64))
        ends = np.cumsum(w)
        starts = np.concatenate([[0], ends])[np.cumsum(lengths) - lengths]
        offsets = ends - w - np.repeat(starts, lengths)
        if self.ctl:
            ctl = (cps >= 0) & (cps < 0x20)
            if self.errors == "ignore":
                row = np.repeat(np.arange(len(texts)), lengths)
                cps, offsets = cps[~ctl], offsets[~ctl]
                lengths = np.bincount(row[~ctl], minlength=len(texts)).astype(np.int64)
            else:
                cps[ctl] = self.rc
        return cps, offsets, lengths

    def _offsets(self, text: str, cps: np.ndarray, spans) -> np.ndarray:
        width = _WIDTHS.get(self.codec)
        if width is not None and not spans:
            w = width(cps.astype(np.int64))
            return (np.cumsum(w) - w).astype(np.int64)
        out, pos, i = np.empty(len(cps), np.int64), 0, 0
        for k, ch in enumerate(text):
            out[k] = pos
            if i < len(spans) and pos == spans[i][0]:
                pos = spans[i][1]
                i += 1
            elif width is not None:
                pos += width(ord(ch))
            else:  # a stateless codec (Latin-1, ASCII, ...): the character's own bytes
                pos += len(ch.encode(self.codec))
        return out


def _decode_all(decoder: _Decoder, flat, split_dtype):
    """(row_splits, code points, offsets) of every string.  Well-formed strings of a
    fixed-width codec are decoded together (one UTF-32 conversion, one offsets pass for
    the batch); the others one by one."""
    width = _WIDTHS.get(decoder.codec)
    texts, alone = [], {}
    for i, s in enumerate(flat):
        text = None
        if width is not None:
            try:
                text = s.decode(decoder.codec)
            except UnicodeDecodeError:
                pass
        if text is None:
            alone[i] = decoder(s)
        texts.append(text or "")
    cps, offsets, lengths = decoder.batch(texts, width)
    if alone:
        rows = np.split(cps, np.cumsum(lengths)[:-1]), np.split(offsets, np.cumsum(lengths)[:-1])
        parts = [alone.get(i, (c, o)) for i, (c, o) in enumerate(zip(*rows))]
        lengths = [len(c) for c, _ in parts]
        cps = np.concatenate([c for c, _ in parts]) if parts else cps
        offsets = np.concatenate([o for _, o in parts]) if parts else offsets
    splits = np.zeros(len(texts) + 1, split_dtype)
    np.cumsum(lengths, out=splits[1:])
    return splits, cps.astype(np.int32), offsets.astype(np.int64)


# -- encoding -----------------------------------------------------------------------------


def _encoder(attrs):
    codec = codecs.lookup(attrs["output_encoding"]).name
    mode = attrs["errors"]
    rc = _check_replacement(int(attrs["replacement_char"]))
    if 0xD800 <= rc <= 0xDFFF:  # not encodable: TF's converter substitutes U+FFFD
        rc = 0xFFFD

    def encode(cps: np.ndarray) -> bytes:
        cps = np.asarray(cps, np.int64)
        bad = (cps < 0) | (cps > _MAX_CP) | ((cps >= 0xD800) & (cps <= 0xDFFF))
        if bad.any():
            if mode == "strict":
                raise _invalid("Code point is out of range for Unicode, or is a surrogate.")
            cps = cps[~bad] if mode == "ignore" else np.where(bad, rc, cps)
        return cps.astype("<u4").tobytes().decode("utf-32-le").encode(codec)

    return encode


# -- UnicodeDecode / UnicodeDecodeWithOffsets -------------------------------------------------


def _decode_attrs():
    return {
        "input_encoding": REQUIRED,
        "errors": "replace",
        "replacement_char": 65533,
        "replace_control_characters": False,
        "Tsplits": _SPLITS,
    }


def _decode_shape(op):
    n = op.inputs[0].shape.num_elements()
    splits = tensor_shape.TensorShape([None if n is None else n + 1])
    return [splits] + [tensor_shape.TensorShape([None])] * (len(op.outputs) - 1)


UnicodeDecode = register_op(
    "UnicodeDecode",
    inputs=["input: string"],
    outputs=["row_splits: Tsplits", "char_values: int32"],
    attrs=_decode_attrs(),
    shape_fn=_decode_shape,
)
UnicodeDecodeWithOffsets = register_op(
    "UnicodeDecodeWithOffsets",
    inputs=["input: string"],
    outputs=["row_splits: Tsplits", "char_values: int32", "char_to_byte_starts: int64"],
    attrs=_decode_attrs(),
    shape_fn=_decode_shape,
)
NotDifferentiable("UnicodeDecode")
NotDifferentiable("UnicodeDecodeWithOffsets")


def _split_np(ctx):
    return dtypes.as_dtype(ctx.attrs["Tsplits"]).as_numpy_dtype


@UnicodeDecode.kernel("CPU")
async def _unicode_decode(ctx, x):
    flat = np.asarray(x, dtype=object).reshape(-1)
    splits, cps, _ = await ctx.compute(_decode_all, _Decoder(ctx.attrs), flat, _split_np(ctx))
    return splits, cps


@UnicodeDecodeWithOffsets.kernel("CPU")
async def _unicode_decode_with_offsets(ctx, x):
    flat = np.asarray(x, dtype=object).reshape(-1)
    return await ctx.compute(_decode_all, _Decoder(ctx.attrs), flat, _split_np(ctx))


# -- UnicodeEncode ----------------------------------------------------------------------------


def _encode_shape(op):
    op.inputs[0].shape.with_rank(1)
    splits = op.inputs[1].shape.with_rank(1)
    n = splits[0].value
    if n is not None and n < 1:
        raise ValueError(
            f"Negative dimension size caused by subtracting 1 from {n} for "
            f"'{{{{node {op.name}}}}} = UnicodeEncode' with input shapes: "
            f"{op.inputs[0].shape}, {splits}."
        )
    return [tensor_shape.TensorShape([None if n is None else n - 1])]


UnicodeEncode = register_op(
    "UnicodeEncode",
    inputs=["input_values: int32", "input_splits: Tsplits"],
    outputs=["output: string"],
    attrs={
        "errors": "replace",
        "output_encoding": REQUIRED,
        "replacement_char": 65533,
        "Tsplits": _SPLITS,
    },
    shape_fn=_encode_shape,
)
NotDifferentiable("UnicodeEncode")


def _check_encode_splits(values, splits):
    if splits[0] != 0:
        raise _invalid("First value in input_splits must be zero.")
    if splits[-1] != len(values):
        raise _invalid("Last value in input_splits must be equal to length of input_tensor.")
    if (splits > len(values)).any():
        raise _invalid("Values in input_splits must be less than or equal to input_tensor length.")
    if (np.diff(splits) < 0).any():
        raise _invalid("Values in input_splits must be equal or in ascending order.")


def _encode_all(encode, values, splits):
    out = np.empty(len(splits) - 1, dtype=object)
    for i in range(len(out)):
        out[i] = encode(values[splits[i] : splits[i + 1]])
    return out


@UnicodeEncode.kernel("CPU")
async def _unicode_encode(ctx, values, splits):
    values, splits = np.asarray(values), np.asarray(splits, np.int64)
    if splits.size == 0:
        raise _invalid("input_splits must have at least one value")
    _check_encode_splits(values, splits)
    return await ctx.compute(_encode_all, _encoder(ctx.attrs), values, splits)


# -- UnicodeTranscode --------------------------------------------------------------------------

UnicodeTranscode = register_op(
    "UnicodeTranscode",
    inputs=["input: string"],
    outputs=["output: string"],
    attrs={
        "input_encoding": REQUIRED,
        "output_encoding": REQUIRED,
        "errors": "replace",
        "replacement_char": 65533,
        "replace_control_characters": False,
    },
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("UnicodeTranscode")


def _transcode_all(decode, encode, x):
    x = np.asarray(x, dtype=object)
    out = np.empty(x.shape, dtype=object)
    flat = out.reshape(-1)
    for i, s in enumerate(x.reshape(-1)):
        flat[i] = encode(decode(s)[0])
    return out


@UnicodeTranscode.kernel("CPU")
async def _unicode_transcode(ctx, x):
    decode = _Decoder(ctx.attrs)
    attrs = dict(ctx.attrs)
    attrs["errors"] = "replace"  # what the decoder left is encodable (but a surrogate rc)
    return await ctx.compute(_transcode_all, decode, _encoder(attrs), x)


# -- UnicodeScript ------------------------------------------------------------------------------

UnicodeScript = register_op(
    "UnicodeScript",
    inputs=["input: int32"],
    outputs=["output: int32"],
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("UnicodeScript")

_script_table: tuple[np.ndarray, np.ndarray] | None = None


def _scripts(cps) -> np.ndarray:
    global _script_table
    if _script_table is None:
        from asyncflow.ops.unicode_script_data import RUNS

        _script_table = (
            np.array([s for s, _ in RUNS], np.int64),
            np.array([c for _, c in RUNS], np.int32),
        )
    starts, codes = _script_table
    cps = np.asarray(cps, np.int64)
    out = codes[np.clip(np.searchsorted(starts, cps, side="right") - 1, 0, None)]
    return np.where((cps < 0) | (cps > _MAX_CP), np.int32(-1), out).astype(np.int32)


@UnicodeScript.kernel("CPU")
async def _unicode_script(ctx, x):
    return await ctx.compute(_scripts, x)


# -- StringNGrams --------------------------------------------------------------------------------


def _ngrams_shape(op):
    op.inputs[0].shape.with_rank(1)
    splits = op.inputs[1].shape.with_rank(1)
    return [tensor_shape.TensorShape([None]), splits]


StringNGrams = register_op(
    "StringNGrams",
    inputs=["data: string", "data_splits: Tsplits"],
    outputs=["ngrams: string", "ngrams_splits: Tsplits"],
    attrs={
        "separator": REQUIRED,
        "ngram_widths": REQUIRED,
        "left_pad": REQUIRED,
        "right_pad": REQUIRED,
        "pad_width": REQUIRED,
        "preserve_short_sequences": REQUIRED,
        "Tsplits": _SPLITS,
    },
    shape_fn=_ngrams_shape,
)
NotDifferentiable("StringNGrams")


class _NGrammer:
    """TF's StringNGramsOp: each row's n-grams of every width, padded."""

    def __init__(self, attrs):
        as_bytes = lambda v: v if isinstance(v, bytes) else str(v).encode()  # noqa: E731
        self.sep = as_bytes(attrs["separator"])
        self.lpad, self.rpad = as_bytes(attrs["left_pad"]), as_bytes(attrs["right_pad"])
        self.pad = int(attrs["pad_width"])
        self.widths = [int(w) for w in attrs["ngram_widths"]]
        self.short = bool(attrs["preserve_short_sequences"])

    def pad_width(self, width: int) -> int:
        return min(width - 1 if self.pad < 0 else self.pad, width - 1)

    def count(self, length: int, width: int) -> int:
        return max(0, length + 2 * self.pad_width(width) - width + 1)

    def make(self, data: list, n: int, width: int) -> list:
        pad, out = self.pad_width(width), []
        if pad == 0:  # (the common case: windows of the row itself)
            return [self.sep.join(data[k : k + width]) for k in range(n)]
        for k in range(n):
            left = max(0, pad - k)
            right = max(0, pad - (n - (k + 1)))
            tokens = width - left - right
            first = 0 if left > 0 else k - pad
            parts = [self.lpad] * left + data[first : first + tokens]
            parts += [self.rpad] * right
            out.append(self.sep.join(parts))
        return out

    def __call__(self, data, splits):
        out_splits = np.zeros(len(splits), splits.dtype)
        out, data, bounds = [], data.tolist(), splits.tolist()
        for i in range(len(bounds) - 1):
            row = data[bounds[i] : bounds[i + 1]]
            start = len(out)
            for w in self.widths:
                out += self.make(row, self.count(len(row), w), w)
            if self.short and len(out) == start and len(row) > 0:
                if self.pad < 0:
                    raise _invalid(
                        "Pad width should be >= 0 when preserve_short_sequences is True and "
                        f"ngram_widths are not provided, got {self.pad}"
                    )
                out += self.make(row, 1, len(row) + 2 * self.pad)
            out_splits[i + 1] = len(out)
        values = np.empty(len(out), dtype=object)
        values[:] = out
        return values, out_splits


def _check_ngram_splits(splits, size: int):
    if splits[0] != 0:
        raise _invalid(f"First split value must be 0, got {splits[0]}")
    prev = 0
    for s in splits[1:]:
        if not prev <= s <= size:
            raise _invalid(f"Invalid split value {s}, must be in [{prev}, {size}]")
        prev = s
    if prev != size:
        raise _invalid(f"Last split value must be data size. Expected {size}, got {prev}")


@StringNGrams.kernel("CPU")
async def _string_ngrams(ctx, data, splits):
    grammer = _NGrammer(ctx.attrs)
    if any(w <= 0 for w in grammer.widths):
        raise _invalid("ngram_widths must contain positive values")
    data, splits = np.asarray(data, dtype=object), np.asarray(splits)
    if data.size == 0 or splits.size == 0:  # TF's early return, shapes included
        return np.full(data.shape, b"", dtype=object), np.zeros(splits.shape, splits.dtype)
    _check_ngram_splits(splits.tolist(), data.size)
    return await ctx.compute(grammer, data, splits)


# -- UnsortedSegmentJoin --------------------------------------------------------------------------


def _segment_join_shape(op):
    data, ids = op.inputs[0].shape, op.inputs[1].shape
    n = ops.constant_value(op.inputs[2])
    if n is not None and int(n) < 0:
        raise ValueError(
            f"Dimension size, given by scalar input 2, must be non-negative but is {int(n)}"
        )
    if data.ndims is None or ids.ndims is None:
        return [tensor_shape.unknown_shape()]
    for a, b in zip(data.as_list()[: ids.ndims], ids.as_list()):
        if a is not None and b is not None and a != b:
            raise ValueError(f"Dimensions must be equal, but are {a} and {b}")
    n = None if n is None else int(n)
    return [tensor_shape.TensorShape([n]).concatenate(data[ids.ndims :])]


UnsortedSegmentJoin = register_op(
    "UnsortedSegmentJoin",
    inputs=["inputs: string", "segment_ids: Tindices", "num_segments: Tnumsegments"],
    outputs=["output: string"],
    attrs={
        "separator": "",
        "Tindices": TypeConstraint([dtypes.int32, dtypes.int64]),
        "Tnumsegments": TypeConstraint([dtypes.int32, dtypes.int64], default=dtypes.int32),
    },
    shape_fn=_segment_join_shape,
)
NotDifferentiable("UnsortedSegmentJoin")


def _segment_join(inputs, ids, n: int, sep: bytes):
    lead = ids.ndim
    rows = inputs.reshape(ids.size, -1)
    inner = inputs.shape[lead:]
    parts = [[[] for _ in range(rows.shape[1])] for _ in range(n)]
    for r, seg in enumerate(ids.reshape(-1).tolist()):
        for j in range(rows.shape[1]):
            parts[seg][j].append(rows[r, j])
    out = np.empty((n, rows.shape[1]), dtype=object)
    for seg in range(n):
        for j in range(rows.shape[1]):
            out[seg, j] = sep.join(parts[seg][j])
    return out.reshape((n, *inner))


@UnsortedSegmentJoin.kernel("CPU")
async def _unsorted_segment_join(ctx, inputs, ids, num_segments):
    inputs, ids = np.asarray(inputs, dtype=object), np.asarray(ids, np.int64)
    if ids.ndim == 0:
        raise _invalid("Segment_id cannot have rank 0")
    if ids.ndim > inputs.ndim:
        raise errors.OutOfRangeError(
            None, None,
            f"Invalid segment_id rank {ids.ndim} for input with {inputs.ndim} dimension(s)",
        )  # fmt: skip
    for i in range(ids.ndim):
        if ids.shape[i] != inputs.shape[i]:
            raise _invalid(
                f"Segment dimension is {ids.shape[i]} while input dimension is "
                f"{inputs.ndim} in rank {i}"
            )  # (TF's message names the input's rank, not the dimension)
    n = int(np.asarray(num_segments))
    if n < 0:
        raise _invalid("Number of segments cannot be negative.")
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise _invalid(
            "segment_ids are not allowed to exceed num_segments or to have negative values."
        )
    sep = ctx.attrs["separator"]
    sep = sep if isinstance(sep, bytes) else str(sep).encode()
    return await ctx.compute(_segment_join, inputs, ids, n, sep)


# -- builders ------------------------------------------------------------------------------------


def _as_strings(x, name: str):
    if is_ragged(x):
        return x
    return ops.convert_to_tensor(x, dtype=dtypes.string, name=name)


def _apply(op_type: str, inputs: list, attrs: dict, name=None):
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs


def _shape_dim(t, i: int):
    d = t.shape[i].value
    if d is not None:
        return ops.convert_to_tensor(d, dtypes.int64)
    shape = _apply("Shape", [t], {"out_type": dtypes.int64})[0]
    return shape[i]


def _uniform(values, length, nvals):
    """Rows of `length` values each (tensors), as TF's RaggedTensor.from_tensor."""
    zero = ops.convert_to_tensor(0, dtypes.int64)
    limit = _apply("AddV2", [nvals, ops.convert_to_tensor(1, dtypes.int64)], {})[0]
    splits = _apply("Range", [zero, limit, length], {})[0]
    static = ops.constant_value(length)
    return RaggedTensor(
        values, splits, uniform_row_length=None if static is None else int(static), internal=True
    )


def _from_dense(x, flat_result, ragged_rank: int):
    """Nest `flat_result` (one row per element of dense `x`, in order) under x's leading
    `ragged_rank` dimensions, each a uniform ragged dimension."""
    out = flat_result
    count = None
    dims = [_shape_dim(x, i) for i in range(x.shape.ndims)]
    for k in range(ragged_rank, 0, -1):
        count = dims[0]
        for d in dims[1:k]:
            count = _apply("Mul", [count, d], {})[0]
        out = _uniform(out, dims[k], _apply("Mul", [count, dims[k]], {})[0])
    return out


def _with_flat_values(rt, new_flat):
    if isinstance(rt.values, RaggedTensor):
        return rt.with_values(_with_flat_values(rt.values, new_flat))
    return rt.with_values(new_flat)


def _flat_strings(x):
    flat = x.flat_values if is_ragged(x) else x
    shape = ops.convert_to_tensor([-1], dtypes.int32)
    return _apply("Reshape", [flat, shape], {})[0]


def _decode(input, encoding, errors_, rc, ctl, with_offsets: bool):  # noqa: A002
    x = _as_strings(input, "input")
    ndims = x.shape.ndims
    if ndims is None:
        raise ValueError("Rank of `input` must be statically known.")
    op_type = "UnicodeDecodeWithOffsets" if with_offsets else "UnicodeDecode"
    check_choice(op_type, "errors", errors_, _DECODE_ERRORS)
    attrs = {
        "input_encoding": encoding,
        "errors": errors_,
        "replacement_char": int(rc),
        "replace_control_characters": bool(ctl),
    }
    outs = _apply(op_type, [_flat_strings(x)], attrs)
    if ndims == 0:
        return (outs[1], outs[2]) if with_offsets else outs[1]
    results = [RaggedTensor.from_row_splits(v, outs[0], validate=False) for v in outs[1:]]
    if is_ragged(x):
        results = [_with_flat_values(x, r) for r in results]
    elif ndims > 1:
        results = [_from_dense(x, r, ndims - 1) for r in results]
    return tuple(results) if with_offsets else results[0]


def unicode_decode(
    input,
    input_encoding,
    errors="replace",
    replacement_char=0xFFFD,
    replace_control_characters=False,
    name=None,
):
    """`tf.strings.unicode_decode`: each string of `input` (rank N, dense or ragged) as
    its code points, an int32 RaggedTensor of rank N + 1 (a Tensor for a scalar).

    Raises (when run):
      InvalidArgumentError: ill-formed input with errors='strict' ("Invalid formatting
        on input string"); an unknown encoding; replacement_char outside U+0..U+10FFFF.
    """
    with ops.name_scope(name, "UnicodeDecode", [input]):
        return _decode(input, input_encoding, errors, replacement_char,
                       replace_control_characters, False)  # fmt: skip


def unicode_decode_with_offsets(
    input,
    input_encoding,
    errors="replace",
    replacement_char=0xFFFD,
    replace_control_characters=False,
    name=None,
):
    """`tf.strings.unicode_decode_with_offsets`: (code points, byte offset where each
    starts), as `unicode_decode` (offsets int64)."""
    with ops.name_scope(name, "UnicodeDecodeWithOffsets", [input]):
        return _decode(input, input_encoding, errors, replacement_char,
                       replace_control_characters, True)  # fmt: skip


def _encode_each(codepoints, encoding, errors_, rc):
    """Each code point of a dense vector as its own string (UnicodeEncode of rows of 1)."""
    _check_encode_attrs("UnicodeEncode", encoding, errors_)
    n = _apply("Size", [codepoints], {"out_type": dtypes.int64})[0]
    zero, one = (ops.convert_to_tensor(v, dtypes.int64) for v in (0, 1))
    limit = _apply("AddV2", [n, one], {})[0]
    splits = _apply("Range", [zero, limit, one], {})[0]
    attrs = {"output_encoding": encoding, "errors": errors_, "replacement_char": int(rc)}
    return _apply("UnicodeEncode", [codepoints, splits], attrs)[0]


def _split(input, encoding, errors_, rc, with_offsets):  # noqa: A002
    cps, offsets = _decode(input, encoding, errors_, rc, False, True)
    if is_ragged(cps):
        chars = _with_flat_values(cps, _encode_each(cps.flat_values, encoding, errors_, rc))
    else:
        chars = _encode_each(cps, encoding, errors_, rc)
    return (chars, offsets) if with_offsets else chars


def unicode_split(
    input,
    input_encoding,
    errors="replace",
    replacement_char=0xFFFD,
    name=None,
):
    """`tf.strings.unicode_split`: each string as the substrings that encode its
    characters (a string RaggedTensor of rank N + 1; a vector for a scalar)."""
    with ops.name_scope(name, "UnicodeSplit", [input]):
        return _split(input, input_encoding, errors, replacement_char, False)


def unicode_split_with_offsets(
    input,
    input_encoding,
    errors="replace",
    replacement_char=0xFFFD,
    name=None,
):
    """`tf.strings.unicode_split_with_offsets`: (characters, byte offset of each)."""
    with ops.name_scope(name, "UnicodeSplitWithOffsets", [input]):
        return _split(input, input_encoding, errors, replacement_char, True)


# The orders TF's op definitions list the allowed values in (its messages name them so).
_DECODE_ERRORS = ("strict", "replace", "ignore")
_ENCODE_ERRORS = ("ignore", "replace", "strict")


def _check_encode_attrs(op_type: str, encoding: str, errors_: str) -> None:
    check_choice(op_type, "output_encoding", encoding, _OUT_ENCODINGS)
    allowed = _ENCODE_ERRORS if op_type == "UnicodeEncode" else _DECODE_ERRORS
    check_choice(op_type, "errors", errors_, allowed)


def _encode(x, encoding, errors_, rc):
    attrs = {"output_encoding": encoding, "errors": errors_, "replacement_char": int(rc)}
    if is_ragged(x):
        if x.flat_values.shape.ndims is not None and x.flat_values.shape.ndims > 1:
            return _with_flat_values(x, _encode(x.flat_values, encoding, errors_, rc))
        if isinstance(x.values, RaggedTensor):
            return x.with_values(_encode(x.values, encoding, errors_, rc))
        return _apply("UnicodeEncode", [x.values, x.row_splits], attrs)[0]
    ndims = x.shape.ndims
    if ndims == 0:
        raise ValueError("input_tensor's rank must be at least 1.")
    values = _apply("Reshape", [x, ops.convert_to_tensor([-1], dtypes.int32)], {})[0]
    n = _apply("Size", [x], {"out_type": dtypes.int64})[0]
    if ndims == 1:
        splits = _apply("Pack", [[ops.convert_to_tensor(0, dtypes.int64), n]], {"axis": 0})[0]
        out = _apply("UnicodeEncode", [values, splits], attrs)[0]
        return _apply("Reshape", [out, ops.convert_to_tensor([], dtypes.int32)], {})[0]
    width = _shape_dim(x, ndims - 1)
    out = _apply("UnicodeEncode", [values, _uniform(values, width, n).row_splits], attrs)[0]
    shape = _apply("Shape", [x], {"out_type": dtypes.int32})[0][:-1]
    return _apply("Reshape", [out, shape], {})[0]


def unicode_encode(
    input,
    output_encoding,
    errors="replace",
    replacement_char=65533,
    name=None,
):
    """`tf.strings.unicode_encode`: each innermost row of code points (rank N + 1, dense
    or ragged) as one string of `output_encoding` (rank N).

    Raises (when run):
      InvalidArgumentError: a code point that is no Unicode scalar value with
        errors='strict'; replacement_char outside U+0..U+10FFFF.
    """
    _check_encode_attrs("UnicodeEncode", output_encoding, errors)
    with ops.name_scope(name, "UnicodeEncode", [input]):
        x = input if is_ragged(input) else ops.convert_to_tensor(input, dtypes.int32)
        if x.shape.ndims is None:
            raise ValueError("Rank of input_tensor must be statically known.")
        return _encode(x, output_encoding, errors, replacement_char)


@_dispatch.add_dispatch_support
def unicode_transcode(
    input,
    input_encoding,
    output_encoding,
    errors="replace",
    replacement_char=65533,
    replace_control_characters=False,
    name=None,
):
    """`tf.strings.unicode_transcode`: each string re-encoded from `input_encoding` to
    `output_encoding` (same shape)."""
    _check_encode_attrs("UnicodeTranscode", output_encoding, errors)
    attrs = {
        "input_encoding": input_encoding,
        "output_encoding": output_encoding,
        "errors": errors,
        "replacement_char": int(replacement_char),
        "replace_control_characters": bool(replace_control_characters),
    }
    x = ops.convert_to_tensor(input, dtypes.string, name="input")
    return _apply("UnicodeTranscode", [x], attrs, name=name)[0]


@_dispatch.add_dispatch_support
def unicode_script(input, name=None):  # noqa: A002
    """`tf.strings.unicode_script`: ICU's script code (UScriptCode) of each int32 code
    point; -1 for values outside U+0..U+10FFFF."""
    x = ops.convert_to_tensor(input, dtypes.int32, name="input")
    return _apply("UnicodeScript", [x], {}, name=name)[0]


def _pads(pad_values):
    if pad_values is None:
        return b"", b""
    if isinstance(pad_values, (list, tuple)):
        if not all(isinstance(p, (bytes, str)) for p in pad_values[:2]):
            raise TypeError("pad_values must be a string, tuple of strings, or None.")
        return pad_values[0], pad_values[1]
    if not isinstance(pad_values, (bytes, str)):
        raise TypeError("pad_values must be a string, tuple of strings, or None.")
    return pad_values, pad_values


def _ngrams_ragged(data, widths, attrs):
    if isinstance(data.values, RaggedTensor):
        return data.with_values(_ngrams_ragged(data.values, widths, attrs))
    out, splits = _apply("StringNGrams", [data.values, data.row_splits], attrs)
    return RaggedTensor.from_row_splits(out, splits, validate=False)


def ngrams(
    data,
    ngram_width,
    separator=" ",
    pad_values=None,
    padding_width=None,
    preserve_short_sequences=False,
    name=None,
):
    """`tf.strings.ngrams`: the n-grams of each innermost row of `data` (strings joined
    by `separator`, padded with `pad_values` up to `padding_width` a side), ragged for
    ragged data, dense (same outer shape) for dense data.

    Raises:
      ValueError: a width or padding_width below 1; padding_width without pad_values;
        data of unknown rank or rank 0.
      TypeError: pad_values not a string or pair of strings.
    """
    with ops.name_scope(name, "StringNGrams", [data]):
        left, right = _pads(pad_values)
        if padding_width is not None and padding_width < 1:
            raise ValueError("padding_width must be greater than 0.")
        if padding_width is not None and pad_values is None:
            raise ValueError("pad_values must be provided if padding_width is set.")
        widths = list(ngram_width) if isinstance(ngram_width, (list, tuple)) else [ngram_width]
        for w in widths:
            if w < 1:
                raise ValueError(f"All ngram_widths must be greater than 0. Got {ngram_width}")
        pad = 0 if pad_values is None else (-1 if padding_width is None else padding_width)
        attrs = {"separator": separator, "ngram_widths": [int(w) for w in widths],
                 "left_pad": left, "right_pad": right, "pad_width": int(pad),
                 "preserve_short_sequences": bool(preserve_short_sequences)}  # fmt: skip
        x = _as_strings(data, "data")
        if is_ragged(x):
            return _ngrams_ragged(x, widths, attrs)
        ndims = x.shape.ndims
        if ndims is None:
            raise ValueError("Rank of data must be known.")
        if ndims == 0:
            raise ValueError("Data must have rank>0")
        n = _apply("Size", [x], {"out_type": dtypes.int64})[0]
        flat = _flat_strings(x)
        if ndims == 1:
            splits = _apply("Pack", [[ops.convert_to_tensor(0, dtypes.int64), n]], {"axis": 0})
            return _apply("StringNGrams", [flat, splits[0]], attrs)[0]
        width = _shape_dim(x, ndims - 1)
        out = _apply("StringNGrams", [flat, _uniform(flat, width, n).row_splits], attrs)[0]
        outer = _apply("Shape", [x], {"out_type": dtypes.int32})[0][:-1]
        minus1 = ops.convert_to_tensor([-1], dtypes.int32)
        zero = ops.convert_to_tensor(0, dtypes.int32)
        shape = _apply("ConcatV2", [[outer, minus1], zero], {})[0]
        return _apply("Reshape", [out, shape], {})[0]


def bytes_split(input, name=None):  # noqa: A002
    """`tf.strings.bytes_split`: each string as its bytes (a string RaggedTensor of rank
    N + 1; a vector for a scalar)."""
    with ops.name_scope(name, "StringsByteSplit", [input]):
        x = _as_strings(input, "input")
        if not is_ragged(x) and x.shape.ndims is None:
            raise ValueError("input must have a statically-known rank.")
        flat = _flat_strings(x)
        _, values, _ = _apply("StringSplit", [flat, ""], {"skip_empty": False})
        lengths = _apply("StringLength", [flat], {"unit": "BYTE"})[0]
        lengths = _apply("Cast", [lengths], {"DstT": dtypes.int64})[0]
        zero = ops.convert_to_tensor(0, dtypes.int32)
        ends = _apply("Cumsum", [lengths, zero], {})[0]
        first = ops.convert_to_tensor([0], dtypes.int64)
        splits = _apply("ConcatV2", [[first, ends], zero], {})[0]
        if not is_ragged(x) and x.shape.ndims == 0:
            return values
        rows = RaggedTensor.from_row_splits(values, splits, validate=False)
        if is_ragged(x):
            return _with_flat_values(x, rows)
        if x.shape.ndims > 1:
            return _from_dense(x, rows, x.shape.ndims - 1)
        return rows


def unsorted_segment_join(inputs, segment_ids, num_segments, separator="", name=None):
    """`tf.strings.unsorted_segment_join`: the strings of each segment joined with
    `separator` (in input order), shape [num_segments] + inputs.shape[ids.rank:].

    Raises (when run):
      InvalidArgumentError: an id < 0 or >= num_segments; segment_ids of rank 0 or
        not a prefix of inputs' shape.
    """
    x = ops.convert_to_tensor(inputs, dtypes.string, name="inputs")
    ids = ops.convert_to_tensor(segment_ids, name="segment_ids")
    n = ops.convert_to_tensor(num_segments, name="num_segments")
    return _apply("UnsortedSegmentJoin", [x, ids, n], {"separator": separator}, name=name)[0]
