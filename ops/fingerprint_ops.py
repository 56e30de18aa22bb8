"""TF's Fingerprint op (`tf.fingerprint`): one 64-bit FarmHash Fingerprint64 per row of
`data` (its first dimension), as 8 little-endian bytes: of the row's bytes for numeric
data; for strings, of the string itself when a row holds one, else of the row's
strings' fingerprints laid end to end.  The values are TF's bits (the hash is
ops/string_hash_ops.fingerprint64, checked against TF).
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.string_hash_ops import fingerprint64
from asyncflow.registry import ANY, register_op

__all__ = ["fingerprint"]

_METHODS = ("farmhash64",)


def _as_bytes(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _fingerprint_shape(op):
    data, method = op.inputs[0].shape, op.inputs[1].shape
    if data.ndims is not None and data.ndims < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank {data.ndims}")
    if method.ndims is not None and method.ndims != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {method.ndims}")
    value = ops.constant_value(op.inputs[1])
    if value is not None:
        name = value.item() if isinstance(value, np.ndarray) else value
        name = name.decode() if isinstance(name, bytes) else str(name)
        if name not in _METHODS:
            raise ValueError(f"Unsupported method: {name}")
    rows = data[0] if data.ndims is not None else tensor_shape.Dimension(None)
    return [tensor_shape.TensorShape([rows, 8])]


Fingerprint = register_op(
    "Fingerprint",
    inputs=["data: T", "method: string"],
    outputs=["fingerprint: uint8"],
    attrs={"T": ANY},
    shape_fn=_fingerprint_shape,
)
# (TF registers no gradient: tf.gradients through it raises LookupError, as there)


def _le(h: int) -> bytes:
    return h.to_bytes(8, "little")


def _fingerprints(data: np.ndarray) -> np.ndarray:
    rows = data.shape[0]
    width = int(np.prod(data.shape[1:], dtype=np.int64))
    out = bytearray()
    if data.dtype == object:
        flat = data.reshape(rows, width)
        for row in flat:
            if width == 1:
                out += _le(fingerprint64(_as_bytes(row[0])))
            else:
                out += _le(fingerprint64(b"".join(_le(fingerprint64(_as_bytes(s))) for s in row)))
    else:
        flat = np.ascontiguousarray(data).reshape(rows, -1)
        if flat.dtype.byteorder == ">":
            flat = flat.byteswap()
        raw = flat.view(np.uint8).reshape(rows, -1) if flat.size else np.zeros((rows, 0), np.uint8)
        for row in raw:
            out += _le(fingerprint64(row.tobytes()))
    return np.frombuffer(bytes(out), np.uint8).reshape(rows, 8).copy()


@Fingerprint.kernel("CPU")
async def _fingerprint(ctx, data, method):
    method = np.asarray(method, dtype=object)
    if method.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"`method` should be a scalar string: {list(method.shape)}"
        )
    name = _as_bytes(method[()]).decode("utf-8", "replace")
    if name not in _METHODS:
        raise errors.InvalidArgumentError(None, None, f"Unsupported fingerprint method: {name}")
    data = np.asarray(data)
    if data.ndim < 1:
        raise errors.InvalidArgumentError(
            None, None, f"`data` should have at least one dimension: {list(data.shape)}"
        )
    if data.dtype.names:  # a quantized record: its integers' bytes
        data = data.view(data.dtype.fields[data.dtype.names[0]][0])
    return await ctx.compute(_fingerprints, data)


def fingerprint(data, method="farmhash64", name=None):
    """`tf.fingerprint`: a uint8 [rows, 8] tensor, FarmHash Fingerprint64 of each row
    of `data` (first dimension), little-endian.

    Raises:
      ValueError: data of rank 0, or an unknown method, at build time.
      InvalidArgumentError: the same at run time.
    """
    return ops.apply_op("Fingerprint", [data, method], name=name).outputs[0]
