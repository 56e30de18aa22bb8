"""More string ops: StringStrip, ReduceJoin, EncodeBase64 / DecodeBase64 (web-safe
alphabet, as TF), DecodeCompressed (zlib / gzip), StringLower / StringUpper, with TF1's
builders (`string_strip`, `reduce_join`, `encode_base64`, `decode_base64`,
`decode_compressed`, `strings.lower`, `strings.upper`).

String tensors are NumPy object arrays of bytes; the kernels are host (CPU) kernels.
"""

from __future__ import annotations

import base64
import binascii
import zlib

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.registry import NotDifferentiable, register_op

__all__ = [
    "string_strip",
    "reduce_join",
    "encode_base64",
    "decode_base64",
    "decode_compressed",
]  # (string_lower/upper: tf.strings.lower/upper only; TF1 has no top-level names)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _obj(x) -> np.ndarray:
    return np.asarray(x, dtype=object)


def _map(fn, x) -> np.ndarray:
    x = _obj(x)
    out = np.empty(x.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(x.reshape(-1)):
        flat[i] = fn(v)
    return out


def _elementwise(op_type: str, fn, attrs=None):
    op_def = register_op(
        op_type,
        inputs=["input: string"],
        outputs=["output: string"],
        attrs=attrs or {},
        shape_fn=lambda op: [op.inputs[0].shape],
    )
    NotDifferentiable(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx, x):
        return _map(lambda v: fn(ctx.attrs, v), x)

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


_WHITESPACE = b" \t\n\v\f\r"
StringStrip = _elementwise("StringStrip", lambda attrs, v: bytes(v).strip(_WHITESPACE))


def _encode(attrs, v):
    out = base64.urlsafe_b64encode(bytes(v))
    return out if attrs["pad"] else out.rstrip(b"=")


_WEB_SAFE = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _decode(attrs, v):
    """TF's Base64Decode: the web-safe alphabet only (no '+', '/', whitespace), blocks
    of four characters, the last one of two to four, padded with one or two '=' or not
    (Python's decoder skips what is not in its alphabet: "!!!" would give b'')."""
    v = bytes(v)
    if not v:
        return b""
    blocks = (len(v) - 1) // 4 * 4  # (TF's loop: whole blocks while more than 4 remain)
    head, tail = v[:blocks], v[blocks:]
    if head.translate(None, _WEB_SAFE):
        raise _invalid("Invalid character found in base64.")
    if len(tail) == 1:
        raise _invalid("Base64 string length cannot be 1 modulo 4.")
    if len(tail) == 4 and tail.endswith(b"="):
        tail = tail[:2] if tail[2:3] == b"=" else tail[:3]
    if tail.translate(None, _WEB_SAFE):
        raise _invalid("Invalid character found in base64.")
    try:
        return base64.urlsafe_b64decode(head + tail + b"=" * (-len(tail) % 4))
    except (binascii.Error, ValueError):  # (cannot happen: every character checked)
        raise _invalid("Invalid character found in base64.") from None


EncodeBase64 = _elementwise("EncodeBase64", _encode, {"pad": False})
DecodeBase64 = _elementwise("DecodeBase64", _decode)


def _decompress(attrs, v):
    """TF's DecodeCompressed reads the stream with zlib's inflate until its input ends:
    a truncated stream gives what it held, an empty one b"", and gzip members follow
    one another; an inflate error is a DataLossError in TF's words."""
    kind = attrs["compression_type"]
    v = bytes(v)
    if kind == "":
        return v
    if kind not in ("ZLIB", "GZIP"):
        raise _invalid("Only ZLIB, GZIP or NONE are supported compressions")
    wbits = zlib.MAX_WBITS + (16 if kind == "GZIP" else 0)
    out = []
    try:
        while v:
            inflate = zlib.decompressobj(wbits)
            out.append(inflate.decompress(v))
            out.append(inflate.flush())
            v = inflate.unused_data if kind == "GZIP" and inflate.eof else b""
    except zlib.error as e:
        code, _, reason = str(e).removeprefix("Error ").partition(" while decompressing data: ")
        raise errors.DataLossError(
            None, None, f"inflate() failed with error {code}: {reason}"
        ) from None
    return b"".join(out)


DecodeCompressed = _elementwise("DecodeCompressed", _decompress, {"compression_type": ""})


def _case(method: str):
    """TF's StringLower/StringUpper: with encoding "" each ASCII letter's case changes
    (other bytes as they are); with "utf-8" Unicode's case mapping (ß -> SS), invalid
    bytes read as U+FFFD."""

    def convert(attrs, v):
        encoding = attrs["encoding"]
        if encoding == "":
            return getattr(bytes(v), method)()  # bytes.lower/upper: ASCII only
        if encoding == "utf-8":
            text = bytes(v).decode("utf-8", "replace")
            return getattr(text, method)().encode("utf-8")
        raise _invalid(f"only utf-8 or '' (no encoding) is supported, received {encoding}")

    return convert


StringLower = _elementwise("StringLower", _case("lower"), {"encoding": ""})
StringUpper = _elementwise("StringUpper", _case("upper"), {"encoding": ""})


def _reduce_join_shape(op):
    shape = op.inputs[0].shape
    axes = ops.constant_value(op.inputs[1])
    if shape.ndims is None or axes is None:
        return [tensor_shape.unknown_shape()]
    rank = shape.ndims
    axes = [int(a) for a in np.reshape(axes, -1)]
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"Invalid reduction dimension {a} for input with {rank} dimensions.")
    axes = [a % rank for a in axes]
    dims = shape.as_list()
    if op.get_attr("keep_dims"):
        return [tensor_shape.TensorShape([1 if i in axes else d for i, d in enumerate(dims)])]
    return [tensor_shape.TensorShape([d for i, d in enumerate(dims) if i not in axes])]


ReduceJoin = register_op(
    "ReduceJoin",
    inputs=["inputs: string", "reduction_indices: int32"],
    outputs=["output: string"],
    attrs={"keep_dims": False, "separator": ""},
    shape_fn=_reduce_join_shape,
)
NotDifferentiable("ReduceJoin")


@ReduceJoin.kernel("CPU")
async def _reduce_join(ctx, x, axes):
    """Axes are reduced one after another in the order given, so the first one listed
    varies fastest in each joined string; no axes leaves the input as it is."""
    x = _obj(x)
    rank = x.ndim
    order = []
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise _invalid(f"Invalid reduction dimension {a} for input with {rank} dimensions.")
        if a % rank in order:
            raise _invalid(f"Duplicate reduction dimension {a}")
        order.append(a % rank)
    sep = ctx.attrs["separator"]
    sep = sep.encode() if isinstance(sep, str) else bytes(sep)
    kept = [i for i in range(rank) if i not in order]
    moved = np.transpose(x, kept + order[::-1])
    lead = moved.shape[: len(kept)]
    flat = moved.reshape(int(np.prod(lead, dtype=np.int64)), -1)
    joined = np.empty(flat.shape[0], dtype=object)
    for i, row in enumerate(flat):
        joined[i] = sep.join(bytes(v) for v in row)
    out = joined.reshape(lead)
    if ctx.attrs["keep_dims"]:
        out = out.reshape([1 if i in order else x.shape[i] for i in range(rank)])
    return out


@_ragged.dispatch_unary
def string_strip(input, name=None):  # noqa: A002 - TF's name
    """Leading and trailing whitespace removed from each string."""
    return ops.apply_op("StringStrip", [input], name=name).outputs[0]


def reduce_join(inputs, axis=None, keep_dims=None, separator="", name=None,
                reduction_indices=None, keepdims=None):  # fmt: skip
    """Strings joined with `separator` across `axis` (all axes when None). The axes are
    reduced in the order listed: the first one varies fastest in each joined string.

    Raises:
      ValueError: both axis and reduction_indices, or keep_dims and keepdims; an axis
        outside a known rank.
      InvalidArgumentError: (when run) an axis outside the rank, or listed twice.
    """
    if reduction_indices is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'reduction_indices'.")
        axis = reduction_indices
    if keepdims is not None:
        if keep_dims is not None:
            raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'.")
        keep_dims = keepdims
    if _ragged.is_ragged(inputs):
        return _ragged.reduce_join(inputs, axis, bool(keep_dims), separator, name)
    with ops.name_scope(None, "ReduceJoin", [inputs, axis]):  # TF's ReduceJoin/ReduceJoin
        inputs = ops.convert_to_tensor(inputs, dtype=dtypes.string)
        if axis is None:
            # TF reduces every axis, last first, so the result reads in row-major order.
            rank = inputs.shape.ndims
            if rank is None:
                rank = ops.apply_op("Rank", [inputs]).outputs[0]
                axis = ops.apply_op("Range", [rank - 1, -1, -1]).outputs[0]
            else:
                axis = np.arange(rank - 1, -1, -1, dtype=np.int32)
        axes = ops.convert_to_tensor(axis, dtype=dtypes.int32)
        attrs = {"keep_dims": bool(keep_dims), "separator": separator}
        return ops.apply_op("ReduceJoin", [inputs, axes], attrs, name=name).outputs[0]


@_dispatch.add_dispatch_support
def encode_base64(input, pad=False, name=None):  # noqa: A002
    """Web-safe base64 (- and _ for + and /) of each string; '=' padding when pad."""
    return ops.apply_op("EncodeBase64", [input], {"pad": bool(pad)}, name=name).outputs[0]


@_dispatch.add_dispatch_support
def decode_base64(input, name=None):  # noqa: A002
    """The bytes of web-safe base64 strings (padding optional).

    Raises:
      InvalidArgumentError: (when run) a character outside the alphabet.
    """
    return ops.apply_op("DecodeBase64", [input], name=name).outputs[0]


@_dispatch.add_dispatch_support
def decode_compressed(bytes, compression_type="", name=None):  # noqa: A002 - TF's name
    """Each string decompressed ("" none, "ZLIB" or "GZIP").

    Raises:
      InvalidArgumentError: (when run) an unknown compression type.
      DataLossError: (when run) data that does not decompress.
    """
    attrs = {"compression_type": compression_type}
    return ops.apply_op("DecodeCompressed", [bytes], attrs, name=name).outputs[0]


@_ragged.dispatch_unary
def string_lower(input, encoding="", name=None):  # noqa: A002 - TF's name
    """`tf.strings.lower`: each string in lowercase (ASCII letters, or all of Unicode's
    with encoding="utf-8")."""
    return ops.apply_op("StringLower", [input], {"encoding": encoding}, name=name).outputs[0]


@_ragged.dispatch_unary
def string_upper(input, encoding="", name=None):  # noqa: A002 - TF's name
    """`tf.strings.upper`: each string in uppercase (ASCII letters, or all of Unicode's
    with encoding="utf-8")."""
    return ops.apply_op("StringUpper", [input], {"encoding": encoding}, name=name).outputs[0]
