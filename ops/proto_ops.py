"""TF's DecodeProtoV2 and EncodeProto (`tf.io.decode_proto`, `tf.io.encode_proto`):
fields of serialized protocol buffers as tensors, and back, for message types named by
a descriptor source.

The source is "local://" (the descriptors this process has: asyncflow's own protos,
which carry TF's package and message names, e.g. "tensorflow.Example"), "bytes://"
followed by a serialized FileDescriptorSet, or the path of a file holding one.
Decoding reads the wire format itself, as TF's kernel does, rather than parsing whole
messages: a message field comes out as the bytes it has on the wire (a group with its
start and end tags, as TF's), the last occurrence of a singular field wins, repeated
numbers are read packed or not, and a value whose wire type does not fit its field is
skipped.  Sizes are [batch..., fields]; each value tensor is [batch..., n], n the
largest count in the batch and at least 1, filled with the field's default for a
missing singular field and with zeros (empty strings) past a repeated field's values.
Encoding writes the fields in field-number order, `sizes[..., i]` values of field i
(a singular field written that many times, as TF's), packed where the field is.

Input is untrusted: every length read from the wire is checked against the buffer
before use, a descriptor file is read only up to `_MAX_DESCRIPTOR_BYTES`.
"""

from __future__ import annotations

import collections
import importlib
import pkgutil
import struct
import threading

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.proto_wire import varint
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = ["decode_proto", "encode_proto"]

_LIST = TypeConstraint(None, is_list=True)
_DecodeProtoV2 = collections.namedtuple("DecodeProtoV2", ["sizes", "values"])
_MAX_DESCRIPTOR_BYTES = 64 << 20

# FieldDescriptor.TYPE_* numbers (descriptor.proto), TF's type names for messages, the
# wire type of one value, and the output dtypes TF accepts (its own choice first).
_DOUBLE, _FLOAT, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL = 1, 2, 3, 4, 5, 6, 7, 8
_STRING, _GROUP, _MESSAGE, _BYTES, _UINT32, _ENUM = 9, 10, 11, 12, 13, 14
_SFIXED32, _SFIXED64, _SINT32, _SINT64 = 15, 16, 17, 18
_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5
_TYPES = {
    _DOUBLE: ("double", _I64, ("float64",)),
    _FLOAT: ("float", _I32, ("float32", "float64")),
    _INT64: ("int64", _VARINT, ("int64",)),
    _UINT64: ("uint64", _VARINT, ("uint64",)),
    _INT32: ("int32", _VARINT, ("int32", "int64")),
    _FIXED64: ("fixed64", _I64, ("uint64",)),
    _FIXED32: ("fixed32", _I32, ("uint32", "uint64")),
    _BOOL: ("bool", _VARINT, ("bool",)),
    _STRING: ("string", _LEN, ("string",)),
    _GROUP: ("group", _SGROUP, ("string",)),
    _MESSAGE: ("message", _LEN, ("string",)),
    _BYTES: ("bytes", _LEN, ("string",)),
    _UINT32: ("uint32", _VARINT, ("uint32", "uint64")),
    _ENUM: ("enum", _VARINT, ("int32",)),
    _SFIXED32: ("sfixed32", _I32, ("int32", "int64")),
    _SFIXED64: ("sfixed64", _I64, ("int64",)),
    _SINT32: ("sint32", _VARINT, ("int32", "int64")),
    _SINT64: ("sint64", _VARINT, ("int64",)),
}
_M32, _M64 = (1 << 32) - 1, (1 << 64) - 1


class _WireError(Exception):
    """A malformed buffer; the message is TF's."""


# -- descriptor sources ------------------------------------------------------------------

_pools: dict = {}  # source -> DescriptorPool (a few sources per process)
_pools_lock = threading.Lock()
_MAX_POOLS = 32


def _local_pool():
    from google.protobuf import descriptor_pool

    import asyncflow.protos as protos

    for mod in pkgutil.walk_packages(protos.__path__, protos.__name__ + "."):
        if mod.name.endswith("_pb2"):  # (registers its messages in the default pool)
            importlib.import_module(mod.name)
    return descriptor_pool.Default()


def _pool_from_set(data: bytes):
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message import DecodeError

    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except DecodeError:
        fds = descriptor_pb2.FileDescriptorSet()  # (TF: no descriptor for the type then)
    pool = descriptor_pool.DescriptorPool()
    files = {f.name: f for f in fds.file}
    added: set = set()

    def add(f) -> None:  # dependencies first
        if f.name in added:
            return
        added.add(f.name)
        for dep in f.dependency:
            if dep in files:
                add(files[dep])
        try:
            pool.Add(f)
        except (TypeError, ValueError) as exc:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid descriptor set: file {f.name}: {exc}"
            ) from None

    for f in fds.file:
        add(f)
    return pool


def _pool(source: bytes):
    pool = _pools.get(source)
    if pool is not None:
        return pool
    if source == b"local://":
        pool = _local_pool()
    elif source.startswith(b"bytes://"):
        pool = _pool_from_set(source[len(b"bytes://") :])
    else:
        path = source.decode("utf-8", "replace")
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_DESCRIPTOR_BYTES + 1)
        except OSError:
            data = None
        if data is None or len(data) > _MAX_DESCRIPTOR_BYTES:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Source does not represent serialized file descriptor set proto. This may "
                "be due to a missing dependency on the file containing "
                f'REGISTER_DESCRIPTOR_POOL("{path}", ...);',
            )
        pool = _pool_from_set(data)
    with _pools_lock:
        if len(_pools) >= _MAX_POOLS:
            _pools.clear()
        _pools[source] = pool
    return pool


def _message_descriptor(source: bytes, message_type: str):
    pool = _pool(source)
    names = [message_type]
    if source == b"local://" and message_type.startswith("tensorflow."):
        names.append("asyncflow." + message_type)  # (asyncflow.protos' package)
    for name in names:
        try:
            return pool.FindMessageTypeByName(name)
        except KeyError:
            pass
    raise errors.InvalidArgumentError(
        None, None, f"No descriptor found for message type {message_type}"
    )


def _fields(desc, type_name: str, names) -> list:
    out = []
    for name in names:
        field = desc.fields_by_name.get(name)
        if field is None:
            raise errors.InvalidArgumentError(
                None, None, f"Unknown field: {name} in message type {type_name}"
            )
        out.append(field)
    return out


def _repeated(field) -> bool:
    return bool(field.is_repeated)


def _packed(field) -> bool:
    if not _repeated(field) or _TYPES[field.type][1] == _LEN or field.type == _GROUP:
        return False
    return bool(field.is_packed)


# -- the wire format ---------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    end = min(len(buf), pos + 10)
    while pos < end:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value & _M64, pos
        shift += 7
    raise _WireError("varint")


def _skip(buf: bytes, pos: int, wire: int, number: int) -> int:
    """The position after one value of `wire` type (a group through its end tag)."""
    if wire == _VARINT:
        return _varint(buf, pos)[1]
    if wire == _I64:
        pos += 8
    elif wire == _I32:
        pos += 4
    elif wire == _LEN:
        n, pos = _varint(buf, pos)
        pos += n
    elif wire == _SGROUP:
        while True:
            tag, pos = _varint(buf, pos)
            if tag & 7 == _EGROUP:
                if tag >> 3 != number:
                    raise _WireError("group")
                return pos
            pos = _skip(buf, pos, tag & 7, tag >> 3)
    else:
        raise _WireError("wire type")
    if pos > len(buf):
        raise _WireError("truncated")
    return pos


def _scan(buf: bytes, wanted: dict) -> dict:
    """{field number: [raw values]} of the fields in `wanted` ({number: (wire type,
    repeated)}): ints for numbers (fixed ones unsigned), bytes for strings, messages and
    groups (with their tags)."""
    found: dict = {}
    pos, end = 0, len(buf)
    while pos < end:
        start = pos
        try:
            tag, pos = _varint(buf, pos)
        except _WireError:
            raise _WireError("CountFields: Failed to consume entire buffer") from None
        number, wire = tag >> 3, tag & 7
        if number == 0 or wire > 5:
            raise _WireError("CountFields: Failed to consume entire buffer")
        want = wanted.get(number)
        if want is None or (wire != want[0] and not (wire == _LEN and want[2])):
            try:
                pos = _skip(buf, pos, wire, number)
            except _WireError:
                raise _WireError("Failed skipping unrequested field") from None
            continue
        try:
            if wire == _LEN and want[0] != _LEN:  # packed numbers
                n, pos = _varint(buf, pos)
                stop = pos + n
                if stop > end:
                    raise _WireError("truncated")
                values = []
                while pos < stop:
                    values.append(_one(buf, pos, want[0]))
                    pos = _skip(buf, pos, want[0], number)
                if pos != stop:
                    raise _WireError("packed")
            else:
                after = _skip(buf, pos, wire, number)
                if wire == _SGROUP:
                    values = [buf[start:after]]
                elif wire == _LEN:
                    n, p = _varint(buf, pos)
                    values = [buf[p : p + n]]
                else:
                    values = [_one(buf, pos, wire)]
                pos = after
        except _WireError:
            raise _WireError("ReadValue: Failed skipping field when counting") from None
        if want[1]:
            found.setdefault(number, []).extend(values)
        else:
            found[number] = values[-1:]
    return found


def _one(buf: bytes, pos: int, wire: int) -> int:
    if wire == _VARINT:
        return _varint(buf, pos)[0]
    size = 8 if wire == _I64 else 4
    if pos + size > len(buf):
        raise _WireError("truncated")
    return int.from_bytes(buf[pos : pos + size], "little")


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _value(field_type: int, raw):
    """One raw wire value as the field's Python value."""
    if field_type in (_INT32, _ENUM):
        return _signed(raw, 32)
    if field_type in (_INT64, _SFIXED64):
        return _signed(raw, 64)
    if field_type in (_UINT32, _FIXED32):
        return raw & _M32
    if field_type in (_UINT64, _FIXED64):
        return raw
    if field_type == _SFIXED32:
        return _signed(raw, 32)
    if field_type == _SINT32:
        return _zigzag(raw & _M32)
    if field_type == _SINT64:
        return _zigzag(raw)
    if field_type == _BOOL:
        return raw != 0
    if field_type == _FLOAT:
        return struct.unpack("<f", raw.to_bytes(4, "little"))[0]
    if field_type == _DOUBLE:
        return struct.unpack("<d", raw.to_bytes(8, "little"))[0]
    return raw  # bytes


def _default(field):
    if _repeated(field) or field.type in (_MESSAGE, _GROUP):
        return b"" if _TYPES[field.type][1] in (_LEN, _SGROUP) else 0
    value = field.default_value
    if field.type == _STRING:
        return value.encode() if isinstance(value, str) else bytes(value)
    return value


def _check_type(type_name: str, field, dtype, decoding: bool) -> None:
    name, _wire, allowed = _TYPES[field.type]
    if dtype.name in allowed:
        return
    if decoding:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Unexpected output type for {type_name}.{field.name}: {name} to "
            f"DT_{dtype.name.upper()}",
        )
    saw = {"float32": "float", "float64": "double"}.get(dtype.name, dtype.name)
    raise errors.InvalidArgumentError(
        None, None, f"Incompatible type for field {field.name}.  Saw dtype: {saw} but "
        f"field type is: {name}",
    )  # fmt: skip


# -- DecodeProtoV2 ------------------------------------------------------------------------


def _decode_shape(op):
    batch = op.inputs[0].shape
    n = len(op.get_attr("field_names"))
    if batch.ndims is None:
        return [tensor_shape.unknown_shape()] * len(op.outputs)
    return [batch.concatenate([n])] + [batch.concatenate([None])] * (len(op.outputs) - 1)


DecodeProtoV2 = register_op(
    "DecodeProtoV2",
    inputs=["bytes: string"],
    outputs=["sizes: int32", "values: output_types"],
    attrs={
        "message_type": REQUIRED,
        "field_names": REQUIRED,
        "output_types": _LIST,
        "descriptor_source": "local://",
        "message_format": "binary",
        "sanitize": False,
    },
    shape_fn=_decode_shape,
)
NotDifferentiable("DecodeProtoV2")


def _as_bytes(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _decode(desc, fields, out_types, fmt, strings: np.ndarray):
    flat = strings.reshape(-1)
    count = len(flat)
    wanted = {}
    for f in fields:
        wire = _TYPES[f.type][1]
        wanted[f.number] = (wire, _repeated(f), _repeated(f) and wire not in (_LEN, _SGROUP))
    text_class = None
    if fmt == "text":
        from google.protobuf import message_factory, text_format

        text_class = message_factory.GetMessageClass(desc)
    per_message = []
    for s in flat:
        buf = _as_bytes(s)
        if text_class is not None:
            try:
                buf = text_format.Parse(buf.decode("utf-8"), text_class()).SerializeToString()
            except (text_format.ParseError, UnicodeDecodeError):
                raise errors.DataLossError(None, None, "Unable to parse text protobuf") from None
        try:
            per_message.append(_scan(buf, wanted))
        except _WireError as exc:
            raise errors.DataLossError(None, None, str(exc)) from None
    sizes = np.zeros((count, len(fields)), np.int32)
    values = []
    for i, (f, dtype) in enumerate(zip(fields, out_types)):
        raw = [m.get(f.number, ()) for m in per_message]
        sizes[:, i] = [len(r) for r in raw]
        width = max(1, int(sizes[:, i].max(initial=0)))
        if dtype == dtypes.string:
            out = np.full((count, width), b"", object)
        else:
            out = np.zeros((count, width), dtype.as_numpy_dtype)
        if not _repeated(f):  # (a singular field's width is 1)
            out[:, 0] = _default(f)
        for row, r in enumerate(raw):
            for col, v in enumerate(r):
                out[row, col] = _value(f.type, v)
        values.append(out.reshape(strings.shape + (width,)))
    return [sizes.reshape(strings.shape + (len(fields),))] + values


@DecodeProtoV2.kernel("CPU")
async def _decode_proto(ctx, strings):
    names = [_as_bytes(n).decode() for n in ctx.attrs["field_names"]]
    out_types = [dtypes.as_dtype(t) for t in ctx.attrs["output_types"]]
    if len(names) != len(out_types):
        raise errors.InvalidArgumentError(
            None, None, "field_names and output_types attributes must have the same length"
        )
    fmt = _as_bytes(ctx.attrs["message_format"]).decode()
    if fmt not in ("binary", "text"):
        raise errors.InvalidArgumentError(None, None, "format must be one of binary or text")
    type_name = _as_bytes(ctx.attrs["message_type"]).decode()
    desc = _message_descriptor(_source(ctx), type_name)
    fields = _fields(desc, type_name, names)
    for f, dtype in zip(fields, out_types):
        _check_type(type_name, f, dtype, decoding=True)
    strings = np.asarray(strings, dtype=object)
    outs = await ctx.compute(_decode, desc, fields, out_types, fmt, strings)
    return outs if len(outs) > 1 else outs[0]  # (no fields: the sizes alone)


def _source(ctx) -> bytes:
    return _as_bytes(ctx.attrs["descriptor_source"])


# -- EncodeProto ---------------------------------------------------------------------------


def _encode_varint(v: int, out: bytearray) -> None:
    out += varint(v)


def _encode_value(field_type: int, v, out: bytearray) -> None:
    if field_type in (_INT32, _ENUM, _INT64, _UINT64):
        _encode_varint(int(v), out)
    elif field_type == _UINT32:
        _encode_varint(int(v) & _M32, out)
    elif field_type == _SINT32:
        v = _signed(int(v), 32)
        _encode_varint(((v << 1) ^ (v >> 31)) & _M32, out)
    elif field_type == _SINT64:
        v = _signed(int(v), 64)
        _encode_varint((v << 1) ^ (v >> 63), out)
    elif field_type == _BOOL:
        out.append(1 if v else 0)
    elif field_type in (_FIXED32, _SFIXED32):
        out += (int(v) & _M32).to_bytes(4, "little")
    elif field_type in (_FIXED64, _SFIXED64):
        out += (int(v) & _M64).to_bytes(8, "little")
    elif field_type == _FLOAT:
        out += struct.pack("<f", float(v))
    elif field_type == _DOUBLE:
        out += struct.pack("<d", float(v))
    else:  # string, bytes, message
        data = _as_bytes(v)
        _encode_varint(len(data), out)
        out += data


def _encode(fields, sizes: np.ndarray, values: list, batch: tuple):
    count = int(np.prod(batch, dtype=np.int64))
    sizes = sizes.reshape(count, len(fields))
    flat = [v.reshape(count, -1) for v in values]
    order = sorted(range(len(fields)), key=lambda i: fields[i].number)
    out = np.empty(count, object)
    for row in range(count):
        buf = bytearray()
        for i in order:
            f, n, vals = fields[i], int(sizes[row, i]), flat[i][row]
            if n > vals.shape[0]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Size to write must not be larger than value tensor; but saw: "
                    f"{n} > {vals.shape[0]} at message {row} field {i}",
                )
            if n <= 0:
                continue
            wire = _TYPES[f.type][1]
            if _packed(f):
                body = bytearray()
                for v in vals[:n]:
                    _encode_value(f.type, v, body)
                _encode_varint(f.number << 3 | _LEN, buf)
                _encode_varint(len(body), buf)
                buf += body
            elif f.type == _GROUP:
                for v in vals[:n]:
                    _encode_varint(f.number << 3 | _SGROUP, buf)
                    buf += _as_bytes(v)
                    _encode_varint(f.number << 3 | _EGROUP, buf)
            else:
                for v in vals[:n]:
                    _encode_varint(f.number << 3 | wire, buf)
                    _encode_value(f.type, v, buf)
        out[row] = bytes(buf)
    return out.reshape(batch)


def _encode_shape(op):
    sizes = op.inputs[0].shape
    if sizes.ndims is None:
        return [tensor_shape.unknown_shape()]
    return [sizes[:-1]]


EncodeProto = register_op(
    "EncodeProto",
    inputs=["sizes: int32", "values: Tinput_types"],
    outputs=["bytes: string"],
    attrs={
        "field_names": REQUIRED,
        "message_type": REQUIRED,
        "descriptor_source": "local://",
        "Tinput_types": _LIST,
    },
    shape_fn=_encode_shape,
)
NotDifferentiable("EncodeProto")


@EncodeProto.kernel("CPU")
async def _encode_proto(ctx, sizes, *values):
    names = [_as_bytes(n).decode() for n in ctx.attrs["field_names"]]
    if len(names) != len(values):
        raise errors.InvalidArgumentError(
            None, None, "field_names and Tinput_types attributes must have the same length"
        )
    type_name = _as_bytes(ctx.attrs["message_type"]).decode()
    desc = _message_descriptor(_source(ctx), type_name)
    fields = _fields(desc, type_name, names)
    values = [np.asarray(v) for v in values]
    for f, v, t in zip(fields, values, ctx.attrs["Tinput_types"]):
        _check_type(type_name, f, dtypes.as_dtype(t), decoding=False)
        if v.ndim < 1:
            raise errors.InvalidArgumentError(
                None, None, f"Values for field {f.name} must have at least one dimension"
            )
    sizes = np.asarray(sizes)
    batch = values[0].shape[:-1] if values else sizes.shape[:-1]
    expected = list(batch) + [len(fields)]
    if list(sizes.shape) != expected:
        raise errors.InvalidArgumentError(
            None,
            None,
            "sizes should be batch_size + [len(field_names)].  Saw: "
            f"[{','.join(map(str, sizes.shape))}] but expected: [{','.join(map(str, expected))}]",
        )
    for f, v in zip(fields, values):
        if v.shape[:-1] != tuple(batch):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Values for field {f.name} have batch shape {list(v.shape[:-1])}, not "
                f"{list(batch)}",
            )
    return await ctx.compute(_encode, fields, sizes, values, tuple(batch))


# -- Python API ---------------------------------------------------------------------------


def _attr_source(descriptor_source):
    return descriptor_source if isinstance(descriptor_source, bytes) else str(descriptor_source)


def decode_proto(
    bytes,  # noqa: A002 - TF's argument name
    message_type,
    field_names,
    output_types,
    descriptor_source="local://",
    message_format="binary",
    sanitize=False,
    name=None,
):
    """`tf.io.decode_proto`: (sizes, values) of `field_names` in each serialized
    `message_type` of `bytes` (see the module note)."""
    attrs = {
        "message_type": str(message_type),
        "field_names": [str(n) for n in field_names],
        "output_types": [dtypes.as_dtype(t) for t in output_types],
        "descriptor_source": _attr_source(descriptor_source),
        "message_format": str(message_format),
        "sanitize": bool(sanitize),
    }
    op = ops.apply_op("DecodeProtoV2", [bytes], attrs, name=name)
    return _DecodeProtoV2(op.outputs[0], list(op.outputs[1:]))


def encode_proto(sizes, values, field_names, message_type, descriptor_source="local://",
                 name=None):  # fmt: skip
    """`tf.io.encode_proto`: one serialized `message_type` per entry of the batch
    shape, `sizes[..., i]` values of field i from `values[i]` (see the module note)."""
    attrs = {
        "field_names": [str(n) for n in field_names],
        "message_type": str(message_type),
        "descriptor_source": _attr_source(descriptor_source),
    }
    return ops.apply_op("EncodeProto", [sizes, list(values)], attrs, name=name).outputs[0]
