"""ParseTensor and SerializeTensor (`tf.io.parse_tensor`, `tf.io.serialize_tensor`): a
tensor to and from its serialized TensorProto, the bytes TF writes (raw little-endian
`tensor_content`, `string_val` for strings)."""

from __future__ import annotations

import base64

import numpy as np
from google.protobuf import message as _pb_message

from asyncflow import dtypes, errors, graph_io, tensor_shape
from asyncflow import graph as ops
from asyncflow.protos.tensor_pb2 import TensorProto
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__ = ["parse_tensor", "serialize_tensor"]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


ParseTensor = register_op(
    "ParseTensor",
    inputs=["serialized: string"],
    outputs=["output: out_type"],
    attrs={"out_type": ANY},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("ParseTensor")


@ParseTensor.kernel()
async def _parse_tensor(ctx, serialized):
    serialized = np.asarray(serialized, dtype=object)
    if serialized.shape != ():
        raise _invalid(
            "Expected `serialized` to be a scalar, got shape: "
            + "[" + ",".join(str(d) for d in serialized.shape) + "]"
        )  # fmt: skip
    data = serialized[()]
    data = data.encode() if isinstance(data, str) else bytes(data)
    proto = TensorProto()
    try:
        proto.ParseFromString(data)
        value = graph_io.tensor_from_proto(proto)
    except (_pb_message.DecodeError, ValueError, TypeError, KeyError):
        raise _invalid(
            "Could not parse `serialized` as TensorProto, base64: "
            + base64.b64encode(data).decode()
        ) from None
    want = ctx.attrs["out_type"]
    got = dtypes.as_dtype(value.dtype) if value.dtype != object else dtypes.string
    if got != want:
        raise _invalid(f"Type mismatch between parsed tensor ({_c_name(got)}) and dtype "
                       f"({_c_name(want)})")  # fmt: skip
    return np.array(value, copy=True)


def _c_name(dt) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double"."""
    return {"float32": "float", "float64": "double"}.get(dt.name, dt.name)


SerializeTensor = register_op(
    "SerializeTensor",
    inputs=["tensor: T"],
    outputs=["serialized: string"],
    attrs={"T": ANY},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)
NotDifferentiable("SerializeTensor")


@SerializeTensor.kernel()
async def _serialize_tensor(ctx, tensor):
    arr = np.asarray(tensor)
    if arr.dtype == object:
        arr = np.array(
            [v if isinstance(v, bytes) else str(v).encode() for v in arr.reshape(-1)],
            dtype=object,
        ).reshape(arr.shape)
    if arr.dtype == object:
        proto = graph_io.tensor_proto(arr)
    else:
        # TF's kernel writes every numeric tensor, a single value too, as raw content
        # (make_tensor_proto's one-value typed fields are the Python API's choice).
        proto = graph_io.tensor_proto(np.zeros((0,), arr.dtype))
        proto.tensor_shape.Clear()
        graph_io.shape_proto(arr.shape, proto.tensor_shape)
        proto.tensor_content = np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).tobytes()
    proto.tensor_shape.SetInParent()  # a scalar's empty shape is written too, as TF's
    out = np.empty((), dtype=object)
    out[()] = proto.SerializeToString()
    return out


def parse_tensor(serialized, out_type, name=None):
    """The tensor a serialized TensorProto holds (`tf.io.parse_tensor`).

    Raises (when run): InvalidArgumentError for bytes that are not a TensorProto, a
    non-scalar input, or a dtype other than `out_type`.
    """
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    return ops.apply_op("ParseTensor", [serialized], attrs, name=name).outputs[0]


def serialize_tensor(tensor, name=None):
    """`tensor` as a serialized TensorProto (`tf.io.serialize_tensor`)."""
    return ops.apply_op("SerializeTensor", [tensor], name=name).outputs[0]
