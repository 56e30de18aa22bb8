"""TF's sparse serialization ops: SerializeSparse, SerializeManySparse,
DeserializeManySparse and DeserializeSparse, with TF1's builders (`serialize_sparse`,
`serialize_many_sparse`, `deserialize_many_sparse`, also under `tf.io`).

A serialized SparseTensor is three serialized TensorProtos (indices, values, shape) in
a string vector, the very bytes TF writes (`AsProtoTensorContent`: dtype, shape and
`tensor_content`, little-endian; a string tensor's content is every length as a varint
first, then the bytes), so either system reads the other's.  With out_type=variant the
three components stay arrays in a variant tensor, as TF keeps them in Tensors.

Deserializing reads untrusted bytes: every length and element count is checked against
the bytes that hold it before anything is allocated, and a TensorProto that repeats a
value to its shape goes through graph_io's bounded fill.
"""

from __future__ import annotations

import math

import numpy as np
from google.protobuf import message as _pb_message

from asyncflow import dtypes, errors, graph_io, tensor_shape
from asyncflow import graph as ops
from asyncflow.proto_wire import varint as _varint
from asyncflow.protos.tensor_pb2 import TensorProto
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = ["serialize_sparse", "serialize_many_sparse", "deserialize_many_sparse"]

_OUT = TypeConstraint([dtypes.string, dtypes.variant], default=dtypes.string)
_MAX_ROWS = 1 << 26  # rows SerializeManySparse may emit (the count is the input's shape[0])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- TensorProto bytes ------------------------------------------------------------------------



def _to_proto_bytes(arr: np.ndarray, dtype: dtypes.DType) -> bytes:
    p = TensorProto()
    p.dtype = dtype.as_datatype_enum
    for d in arr.shape:
        p.tensor_shape.dim.add().size = d
    if dtype == dtypes.string:
        items = [v if isinstance(v, bytes) else str(v).encode() for v in arr.reshape(-1)]
        if items:
            p.tensor_content = b"".join(_varint(len(v)) for v in items) + b"".join(items)
    elif arr.size:
        np_dt = np.dtype(dtype.as_numpy_dtype).newbyteorder("<")
        p.tensor_content = np.ascontiguousarray(arr, dtype=np_dt).tobytes()
    return p.SerializeToString()


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data) or shift > 35:
            raise ValueError("truncated string tensor content")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, pos


def _strings_from_content(content: bytes, size: int) -> np.ndarray:
    if size > len(content):  # each element takes at least its one-byte length
        raise ValueError("string tensor content too short for its shape")
    lengths, pos = [], 0
    for _ in range(size):
        n, pos = _read_varint(content, pos)
        lengths.append(n)
    if pos + sum(lengths) != len(content):
        raise ValueError("string tensor content does not match its lengths")
    out = np.empty(size, dtype=object)
    for i, n in enumerate(lengths):
        out[i] = content[pos : pos + n]
        pos += n
    return out


def _from_proto_bytes(data: bytes) -> tuple[np.ndarray, dtypes.DType]:
    p = TensorProto()
    try:
        p.ParseFromString(data)
        dtype = dtypes.as_dtype(p.dtype)
        dims = [d.size for d in p.tensor_shape.dim]
        if any(d < 0 for d in dims):
            raise ValueError("negative dimension")
        size = math.prod(dims)
        content = p.tensor_content
        if dtype == dtypes.string and content:
            return _strings_from_content(content, size).reshape(dims), dtype
        if content:  # (TF's own form: checked against the bytes, then viewed)
            np_dt = np.dtype(dtype.as_numpy_dtype).newbyteorder("<")
            if len(content) != size * np_dt.itemsize:
                raise ValueError("tensor content does not match its shape")
            return np.frombuffer(content, np_dt).astype(np_dt.newbyteorder("=")).reshape(
                dims
            ), dtype
        return np.array(graph_io.tensor_from_proto(p)), dtype
    except (_pb_message.DecodeError, ValueError, TypeError, KeyError):
        raise _invalid("Could not parse serialized proto") from None


# -- SerializeSparse / SerializeManySparse ----------------------------------------------------


def _serialize_shape(many: bool):
    def shape_fn(op):
        op.inputs[0].shape.with_rank(2)
        op.inputs[1].shape.with_rank(1)
        op.inputs[2].shape.with_rank(1)
        return [tensor_shape.TensorShape([None, 3] if many else [3])]

    return shape_fn


def _serialize_op(op_type: str, many: bool):
    op_def = register_op(
        op_type,
        inputs=["sparse_indices: int64", "sparse_values: T", "sparse_shape: int64"],
        outputs=["serialized_sparse: out_type"],
        attrs={"T": ANY, "out_type": _OUT},
        shape_fn=_serialize_shape(many),
    )
    NotDifferentiable(op_type)
    return op_def


SerializeSparse = _serialize_op("SerializeSparse", False)
SerializeManySparse = _serialize_op("SerializeManySparse", True)


def _check_sparse(indices, values, shape):
    if indices.ndim != 2:
        raise _invalid(
            f"Input indices should be a matrix but received shape {_shape_str(indices.shape)}"
        )
    if values.ndim != 1:
        raise _invalid(
            f"Input values should be a vector but received shape {_shape_str(values.shape)}"
        )
    if shape.ndim != 1:
        raise _invalid(
            f"Input shape should be a vector but received shape {_shape_str(shape.shape)}"
        )
    if indices.shape[0] != values.shape[0] or indices.shape[1] != shape.shape[0]:
        raise _invalid(
            f"Number of elements/rank mismatch: indices {_shape_str(indices.shape)}, values "
            f"{_shape_str(values.shape)}, shape {_shape_str(shape.shape)}"
        )


def _components(ctx, indices, values, shape):
    """The three serialized components (bytes, or arrays for out_type=variant)."""
    if ctx.attrs["out_type"] == dtypes.variant:
        return [np.array(indices, np.int64), np.array(values), np.array(shape, np.int64)]
    t = ctx.attrs["T"]
    return [
        _to_proto_bytes(indices, dtypes.int64),
        _to_proto_bytes(values, dtypes.as_dtype(t)),
        _to_proto_bytes(shape, dtypes.int64),
    ]


def _object_array(rows, shape) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(x for row in rows for x in row):
        flat[i] = v
    return out


@SerializeSparse.kernel("CPU")
async def _serialize_sparse(ctx, indices, values, shape):
    indices, values, shape = np.asarray(indices), np.asarray(values), np.asarray(shape)
    _check_sparse(indices, values, shape)
    return _object_array([_components(ctx, indices, values, shape)], (3,))


def _check_order(indices, shape):
    """TF's SparseTensor::IndicesValid: in bounds and in row-major order."""
    prev = None
    for i, idx in enumerate(indices.tolist()):
        if any(not 0 <= v < d for v, d in zip(idx, shape)):
            raise _invalid(
                f"indices[{i}] = {_shape_str(idx)} is out of bounds: need 0 <= index < "
                f"{_shape_str(shape)}"
            )
        if prev is not None and idx <= prev:
            what = "repeated" if idx == prev else "out of order"
            raise _invalid(
                f"indices[{i}] = {_shape_str(idx)} is {what}. Many sparse ops require sorted "
                "indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"
            )
        prev = idx


def _serialize_many(ctx, indices, values, shape):
    _check_sparse(indices, values, shape)
    if shape.shape[0] < 2:
        raise _invalid(f"Rank of input SparseTensor should be > 1, but saw rank: {shape.shape[0]}")
    _check_order(indices, shape.tolist())
    n = int(shape[0])
    if n > _MAX_ROWS:
        raise errors.ResourceExhaustedError(
            None, None, f"SerializeManySparse of {n} rows: more than {_MAX_ROWS}"
        )
    rows = indices[:, 0]
    bounds = np.searchsorted(rows, np.arange(n + 1))
    inner = shape[1:]
    out = []
    for b in range(n):
        lo, hi = bounds[b], bounds[b + 1]
        out.append(_components(ctx, indices[lo:hi, 1:], values[lo:hi], inner))
    return _object_array(out, (n, 3))


@SerializeManySparse.kernel("CPU")
async def _serialize_many_sparse(ctx, indices, values, shape):
    args = np.asarray(indices), np.asarray(values), np.asarray(shape)
    return await ctx.compute(_serialize_many, ctx, *args)


# -- DeserializeManySparse / DeserializeSparse ------------------------------------------------


def _deserialize_shape(op):
    s = op.inputs[0].shape
    if s.ndims is not None:
        s.with_rank_at_least(1)
        last = s[s.ndims - 1].value
        if last is not None and last != 3:
            raise ValueError(f"Dimension must be 3 but is {last}")
    return [tensor_shape.TensorShape([None, None]), tensor_shape.TensorShape([None]),
            tensor_shape.TensorShape([None])]  # fmt: skip


DeserializeManySparse = register_op(
    "DeserializeManySparse",
    inputs=["serialized_sparse: string"],
    outputs=["sparse_indices: int64", "sparse_values: dtype", "sparse_shape: int64"],
    attrs={"dtype": ANY},
    shape_fn=_deserialize_shape,
)
DeserializeSparse = register_op(
    "DeserializeSparse",
    inputs=["serialized_sparse: Tserialized"],
    outputs=["sparse_indices: int64", "sparse_values: dtype", "sparse_shape: int64"],
    attrs={"dtype": ANY, "Tserialized": _OUT},
    shape_fn=_deserialize_shape,
)
NotDifferentiable("DeserializeManySparse")
NotDifferentiable("DeserializeSparse")


def _component(v, memo: dict):
    """A serialized component as (array, dtype); `memo` keeps one call's parses (rows
    of a batch often share a component: the same shape, say)."""
    if isinstance(v, np.ndarray):  # out_type=variant: the component itself
        return v, dtypes.as_dtype(v.dtype) if v.dtype != object else dtypes.string
    data = v if isinstance(v, bytes) else str(v).encode()
    hit = memo.get(data)
    if hit is None:
        hit = memo[data] = _from_proto_bytes(data)
    return hit


def _one_sparse(row, index: int, dtype, memo: dict):
    indices, _ = _component(row[0], memo)
    if indices.ndim != 2:
        raise _invalid(
            f"Expected serialized_sparse[{index}, 0] to represent an index matrix but "
            f"received shape {_shape_str(indices.shape)}"
        )
    values, got = _component(row[1], memo)
    if values.ndim != 1:
        raise _invalid(
            f"Expected serialized_sparse[{index}, 1] to represent a values vector but "
            f"received shape {_shape_str(values.shape)}"
        )
    if got != dtype:
        raise _invalid(
            f"Requested SparseTensor of type {_c_name(dtype)} but "
            f"SparseTensor[{index}].values.dtype() == {_c_name(got)}"
        )
    if indices.shape[0] != values.shape[0]:
        raise _invalid(
            f"Expected row counts of SparseTensor[{index}].indices and "
            f"SparseTensor[{index}].values to match but they do not: {indices.shape[0]} vs. "
            f"{values.shape[0]}"
        )
    shape, _ = _component(row[2], memo)
    if shape.ndim != 1 or indices.shape[1] != shape.shape[0]:
        raise _invalid(
            f"Expected column counts of SparseTensor[{index}].indices to match size of "
            f"SparseTensor[{index}].shape but they do not: {indices.shape[1]} vs. "
            f"{shape.shape[0] if shape.ndim == 1 else _shape_str(shape.shape)}"
        )
    return indices.astype(np.int64), values, shape.astype(np.int64)


def _c_name(dt) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double"."""
    return {"float32": "float", "float64": "double"}.get(dt.name, dt.name)


def _deserialize(serialized, dtype):
    lead = serialized.shape[:-1]
    rows = serialized.reshape(-1, 3)
    np_dtype = object if dtype == dtypes.string else dtype.as_numpy_dtype
    if serialized.ndim == 1:  # one SparseTensor: itself
        i, v, s = _one_sparse(rows[0], 0, dtype, {})
        return i.copy(), np.array(v, dtype=np_dtype), s.copy()
    parts, rank, memo = [], None, {}
    for k, row in enumerate(rows):
        i, v, s = _one_sparse(row, k, dtype, memo)
        if rank is not None and s.shape[0] != rank:
            raise _invalid(
                f"Inconsistent shape across SparseTensors: rank prior to SparseTensor[{k}] "
                f"was: {rank} but rank of SparseTensor[{k}] is: {s.shape[0]}"
            )
        rank = s.shape[0]
        parts.append((i, v, s))
    rank = 0 if rank is None else rank
    lead_idx = np.array(np.unravel_index(np.arange(len(parts)), lead)).T.reshape(-1, len(lead))
    indices = np.concatenate(
        [np.hstack([np.repeat(lead_idx[k : k + 1], len(i), 0), i]) for k, (i, _, _) in
         enumerate(parts)] or [np.zeros((0, len(lead) + rank), np.int64)]
    ).astype(np.int64)  # fmt: skip
    values = np.concatenate([v for _, v, _ in parts] or [np.zeros(0, np_dtype)])
    inner = np.max([s for _, _, s in parts], axis=0) if parts else np.zeros(rank, np.int64)
    shape = np.concatenate([np.array(lead, np.int64), inner]).astype(np.int64)
    return indices, np.asarray(values, dtype=np_dtype), shape


def _check_last_dim(serialized, matrix: bool):
    if matrix and serialized.ndim != 2:
        raise _invalid(
            f"Serialized sparse should be a matrix but received shape "
            f"{_shape_str(serialized.shape)}"
        )
    if serialized.ndim < 1 or serialized.shape[-1] != 3:
        raise _invalid(
            f"Serialized sparse should have 3 as the last dimension {_shape_str(serialized.shape)}"
        )


@DeserializeManySparse.kernel("CPU")
async def _deserialize_many_sparse(ctx, serialized):
    serialized = np.asarray(serialized, dtype=object)
    _check_last_dim(serialized, True)
    return await ctx.compute(_deserialize, serialized, dtypes.as_dtype(ctx.attrs["dtype"]))


@DeserializeSparse.kernel("CPU")
async def _deserialize_sparse(ctx, serialized):
    serialized = np.asarray(serialized, dtype=object)
    _check_last_dim(serialized, False)
    return await ctx.compute(_deserialize, serialized, dtypes.as_dtype(ctx.attrs["dtype"]))


# -- builders ----------------------------------------------------------------------------------


def _sparse_input(sp_input) -> SparseTensor:
    if isinstance(sp_input, SparseTensorValue):
        return SparseTensor.from_value(sp_input)
    if not isinstance(sp_input, SparseTensor):
        raise TypeError("Input must be a SparseTensor.")
    return sp_input


def _serialize(op_type, sp_input, name, out_type):
    sp = _sparse_input(sp_input)
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    inputs = [sp.indices, sp.values, sp.dense_shape]
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs[0]


def serialize_sparse(sp_input, name=None, out_type=dtypes.string):
    """`tf.serialize_sparse`: a SparseTensor as a 3-vector of serialized TensorProtos
    (indices, values, shape); out_type=variant keeps them as tensors.

    Raises:
      TypeError: `sp_input` is not a SparseTensor.
    """
    return _serialize("SerializeSparse", sp_input, name, out_type)


def serialize_many_sparse(sp_input, name=None, out_type=dtypes.string):
    """`tf.serialize_many_sparse`: each minibatch entry (first dimension) of a rank >= 2
    SparseTensor serialized as `serialize_sparse` does, an [N, 3] matrix.

    Raises (when run):
      InvalidArgumentError: rank < 2; indices out of bounds or not in row-major order.
    """
    return _serialize("SerializeManySparse", sp_input, name, out_type)


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None):
    """`tf.deserialize_many_sparse`: the [N, 3] serialized SparseTensors (same rank) as
    one SparseTensor of rank + 1, its shape each dimension's maximum.

    Raises (when run):
      InvalidArgumentError: bytes that are no serialized TensorProto; values of another
        dtype than `dtype`; tensors of different ranks.
    """
    attrs = {"dtype": dtypes.as_dtype(dtype)}
    x = ops.convert_to_tensor(serialized_sparse, dtypes.string, name="serialized_sparse")
    indices, values, shape = ops.apply_op("DeserializeManySparse", [x], attrs, name=name).outputs
    if rank is not None:
        indices.set_shape([None, rank])
        shape.set_shape([rank])
    return SparseTensor(indices, values, shape)
