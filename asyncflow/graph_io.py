"""GraphDef export and import as TF's protobuf messages (asyncflow/protos/graph.proto).

`Graph.as_graph_def()` is a `GraphDef` message: `SerializeToString()` gives the bytes TF
writes to a `.pb`, `text_format` the `.pbtxt` form, and TF's `tf.import_graph_def`
loads either.  `import_graph_def` takes a GraphDef message (ours or TF's own class),
its binary serialization, or the JSON layout earlier asyncflow versions wrote (protobuf's
JSON mapping of the same message).

Invariants:
- `decode_attr(attr_value(v))` gives back `v` for every attr value the graph keeps:
  DType, bool (never confused with int), int, float, TensorShape, numpy arrays (dtype
  and shape kept; decoded arrays are read-only, as Const values are), and lists of
  those.  Proto strings carry no str/bytes distinction, so an "s" value decodes to the
  type of the OpDef's default for that attr; without one, attrs named "_..." (TF's
  internal attrs such as "_class") decode to bytes, others to str when they are valid
  UTF-8.  Tuples decode as lists unless the OpDef's default is a tuple.
- Decoding never allocates more than the message holds plus `MAX_FILL_ELEMENTS` for a
  tensor TF wrote compressed (its last value repeated); anything malformed is a
  ValueError naming the attr.
- `import_graph_def` creates every op through `graph.apply_op`, in topological order,
  and either imports the whole GraphDef or leaves the graph as it found it.  The one
  cycle allowed is a while loop's (TF's rule): an edge NextIteration -> Merge is a back
  edge, left out of the order and set on the Merge once everything is built; any other
  cycle is a ValueError naming its nodes.  TF's Ref* primitives (RefEnter, ...) import
  as the plain ones carrying the reference, and export under TF's Ref* names.  Calls of
  the GraphDef's function library (Defun ops, PartitionedCall) are inlined first
  (`function_library`), so a TF graph with functions imports as plain ops.  An op type
  asyncflow lacks is a `NotFoundError` naming the op and the node.
"""

from __future__ import annotations

import contextvars
import heapq
import json
import re
import sys
import weakref
from typing import Any

import numpy as np
from google.protobuf import json_format, text_format
from google.protobuf import message as _pb_message

from asyncflow import device_spec, dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.dataset_functions import FUNCTION_LIST_ATTRS
from asyncflow.dataset_functions import export as export_dataset_functions
from asyncflow.dataset_functions import instantiate as instantiate_dataset_functions
from asyncflow.function_library import inline_calls
from asyncflow.protos.attr_value_pb2 import AttrValue
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.protos.node_def_pb2 import NodeDef
from asyncflow.protos.tensor_pb2 import TensorProto
from asyncflow.protos.tensor_shape_pb2 import TensorShapeProto
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def
from asyncflow.tf_export import resource_twins, tensor_array_handles

__all__ = [
    "attr_value",
    "encode_attr",
    "decode_attr",
    "shape_proto",
    "shape_from_proto",
    "tensor_proto",
    "tensor_from_proto",
    "tensor_content_proto",
    "fill_values",
    "node_def",
    "node_def_text",
    "graph_to_graph_def",
    "as_graph_def_message",
    "graph_def_to_dict",
    "import_graph_def",
    "MAX_FILL_ELEMENTS",
]

GRAPH_DEF_VERSION = 27

# The producer version of the GraphDef being imported (None when building): an op TF
# has removed since that version is refused (ops/legacy_ops.py), as TF's importer does.
_IMPORT_PRODUCER: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "import_producer", default=None
)


def importing_producer() -> int | None:
    """The producer version of the GraphDef being imported now, else None."""
    return _IMPORT_PRODUCER.get()


# A TensorProto may give fewer values than its shape holds (the last one repeats); a
# file could so ask for any size.  Fills past this many elements are refused.
MAX_FILL_ELEMENTS = 1 << 28

# -- dtypes ----------------------------------------------------------------------------


def _dtype_enum(dt) -> int:
    return dtypes.as_dtype(dt).base_dtype.as_datatype_enum


def _dtype_from_enum(enum: int) -> dtypes.DType:
    """A DType from TF's DataType enum ("_REF" values name the same element type)."""
    enum = int(enum)
    try:
        return dtypes.as_dtype(enum - 100 if enum > 100 else enum)
    except TypeError:
        raise ValueError(f"Unsupported DataType {enum}") from None


# -- shapes and tensors ------------------------------------------------------------------


def shape_proto(shape, out: TensorShapeProto | None = None) -> TensorShapeProto:
    """`shape` (anything TensorShape takes) as a TensorShapeProto (-1: unknown size)."""
    made = tensor_shape.as_shape(shape).as_proto()
    if out is None:
        return made
    out.CopyFrom(made)
    return out


def shape_from_proto(p: TensorShapeProto) -> tensor_shape.TensorShape:
    if not p.unknown_rank and any(d.size < -1 for d in p.dim):
        raise ValueError(f"Shape {[d.size for d in p.dim]} has a negative dimension")
    return tensor_shape.TensorShape(p)


# TF's make_tensor_proto writes the values it was given: as raw tensor_content when they
# fill the shape and the dtype is one of these (and there are two or more of them), else
# in the dtype's typed field, where fewer values than the shape holds mean "the last one
# repeats".  `fill_values` and `tensor_from_proto` remember, per array, the values its
# proto lists when that is not what the array alone would give (keyed by id, dropped
# when the array is collected), so a Const built or read so writes the same bytes again.
# (Not its strides: a broadcast view made anywhere else is written whole, as TF writes a
# NumPy array it is given.)
_CONTENT_DTYPES = frozenset(
    ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
     "uint8", "uint16", "uint32", "uint64", "qint8", "quint8", "qint16", "quint16", "qint32",
     "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
     "float8_e5m2fnuz", "float4_e2m1fn")
)  # fmt: skip
# TF 2.21 writes a single narrow float (a scalar, or one value filling a shape) as its
# byte in float8_val, except the fnuz kinds, which its make_tensor_proto refuses; the
# 4- and 2-bit integers always go to int_val, one value per element.
_FLOAT8_VAL_DTYPES = frozenset(("float8_e5m2", "float8_e4m3fn", "float4_e2m1fn"))
_NO_TYPED_FIELD = frozenset(("float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2fnuz"))
_NARROW_INTS = frozenset(("int4", "uint4", "int2", "uint2"))
_LISTED: dict[int, np.ndarray] = {}


def _remember_listed(arr: np.ndarray, values: np.ndarray) -> None:
    key = id(arr)
    _LISTED[key] = values
    weakref.finalize(arr, _LISTED.pop, key, None)


def fill_values(values, shape) -> np.ndarray:
    """`values` (flattened, no more than `shape` holds) filled out to `shape` with its last
    value (zeros when empty), read-only, as a TF1 graph constant given fewer values; its
    TensorProto lists just `values`, as TF writes it.  One value repeated is a broadcast
    view: nothing of the shape's size is allocated until a kernel needs it."""
    values = np.asarray(values).reshape(-1)
    shape = tuple(shape)
    if values.size == 1:
        arr = np.broadcast_to(values.reshape(()).copy(), shape)
    else:
        arr = _fill(values, shape, int(np.prod(shape, dtype=np.int64)))
    if values.size != arr.size and arr.size:
        _remember_listed(arr, values.copy())
    arr.flags.writeable = False
    return arr


def tensor_proto(arr, out: TensorProto | None = None) -> TensorProto:
    """A numpy array as TF's make_tensor_proto writes it (see `_CONTENT_DTYPES`): raw
    little-endian tensor_content, or the values in the dtype's typed field; an array
    from `fill_values` or `tensor_from_proto`, the values its proto lists."""
    listed = _LISTED.get(id(arr)) if isinstance(arr, np.ndarray) else None
    arr = np.asarray(arr)
    dt = dtypes.as_dtype(arr.dtype)
    out = TensorProto() if out is None else out
    out.dtype = _dtype_enum(dt)
    out.tensor_shape.SetInParent()  # (a scalar's too: TF writes "tensor_shape {}")
    shape_proto(arr.shape, out.tensor_shape)
    if listed is not None:
        values = listed
    else:
        values = arr.reshape(-1) if arr.size == 1 or dt.name not in _CONTENT_DTYPES else None
    if values is not None and _typed_values(values, dt, out):
        pass
    elif arr.size:
        arr = np.ascontiguousarray(arr)
        if sys.byteorder != "little":
            arr = arr.byteswap()
        out.tensor_content = arr.tobytes()
    return out


ops.register_tensor_attr_proto(tensor_proto)  # (Operation.get_attr's TensorProtos)


def tensor_content_proto(arr, out: TensorProto | None = None) -> TensorProto:
    """A computed value as TF's kernels write one (Tensor::AsProtoTensorContent): every
    value as raw little-endian tensor_content, a scalar's too; strings as `tensor_proto`
    writes them."""
    arr = np.asarray(arr)
    if arr.dtype == object:
        return tensor_proto(arr, out)
    out = TensorProto() if out is None else out
    out.dtype = _dtype_enum(dtypes.as_dtype(arr.dtype))
    out.tensor_shape.SetInParent()
    shape_proto(arr.shape, out.tensor_shape)
    out.tensor_content = np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).tobytes()
    return out


_TYPED_FIELDS = {  # dtype name -> the TensorProto field TF writes its values to
    "float32": "float_val",
    "float64": "double_val",
    "int32": "int_val",
    "int16": "int_val",
    "int8": "int_val",
    "uint8": "int_val",
    "uint16": "int_val",
    "int64": "int64_val",
    "uint32": "uint32_val",
    "uint64": "uint64_val",
    "bool": "bool_val",
    "int4": "int_val",
    "uint4": "int_val",
    "int2": "int_val",
    "uint2": "int_val",
}


def _typed_values(values: np.ndarray, dt, out) -> bool:
    """Write `values` to `dt`'s typed field, as TF does; False for a dtype without one
    here (its tensor_content then)."""
    name = dt.name
    if name == "string":
        out.string_val.extend(
            v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values.tolist()
        )
    elif name in ("float16", "bfloat16"):
        out.half_val.extend(values.view(np.uint16).tolist())
    elif name in ("complex64", "complex128"):
        field = out.scomplex_val if name == "complex64" else out.dcomplex_val
        pairs = np.empty((values.size, 2), np.float64)
        pairs[:, 0], pairs[:, 1] = values.real, values.imag
        field.extend(pairs.reshape(-1).tolist())
    elif name in _TYPED_FIELDS:
        if name in _NARROW_INTS:  # (their NumPy scalars are not Python ints)
            values = values.astype(np.int64)
        getattr(out, _TYPED_FIELDS[name]).extend(values.tolist())
    elif name in _FLOAT8_VAL_DTYPES:
        out.float8_val = np.ascontiguousarray(values).view(np.uint8).tobytes()
    elif name in _NO_TYPED_FIELD:
        raise TypeError(f"Element type not supported in TensorProto: {name}.")
    else:
        return False
    return True


def tensor_from_proto(p: TensorProto) -> np.ndarray:
    """The read-only array a TensorProto holds.

    Raises:
      ValueError: an unknown dtype, a partially known shape, or values that do not fit it.
    """
    dt = _dtype_from_enum(p.dtype)
    shape = shape_from_proto(p.tensor_shape)
    if not shape.is_fully_defined():
        raise ValueError(f"Tensor proto has a partially known shape {shape}")
    dims = tuple(shape.as_list())
    size = int(np.prod(dims, dtype=object))
    if dt == dtypes.string:
        values = _string_content(p.tensor_content, size) if p.tensor_content else p.string_val
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
        flat, arr = arr, _fill(arr, dims, size)
        if not p.tensor_content and flat.size != size:
            _remember_listed(arr, flat)
    elif p.tensor_content:
        np_dt = np.dtype(dt.as_numpy_dtype)
        if len(p.tensor_content) != size * np_dt.itemsize:
            raise ValueError(
                f"Tensor proto holds {len(p.tensor_content)} bytes for {list(dims)} "
                f"{dt.name} values"
            )
        arr = np.frombuffer(p.tensor_content, dtype=np_dt.newbyteorder("<"))
        arr = arr.astype(np_dt).reshape(dims)
    else:
        flat = _typed_vals(p, dt)
        arr = _fill(flat, dims, size)
        if flat.size != size or (size > 1 and dt.name in _CONTENT_DTYPES):
            _remember_listed(arr, flat)  # (TF keeps a proto as read: so do its bytes here)
    arr.flags.writeable = False
    return arr


def _string_content_bytes(values: list[bytes]) -> bytes:
    """`values` as a string tensor's tensor_content (`_string_content` reads it back):
    their lengths as varints, then their bytes."""
    head = bytearray()
    for value in values:
        n = len(value)
        while n > 0x7F:
            head.append((n & 0x7F) | 0x80)
            n >>= 7
        head.append(n)
    return bytes(head) + b"".join(values)


def _string_content(data: bytes, size: int) -> list[bytes]:
    """The strings of a string tensor's tensor_content, as TF encodes it (its
    Tensor::AsProtoTensorContent): `size` varint lengths, then the bytes one after another.

    Raises:
      ValueError: content that does not hold `size` strings exactly.
    """
    lengths, pos = [], 0
    for _ in range(size):
        n = shift = 0
        while True:
            if pos >= len(data) or shift > 28:
                raise ValueError("String tensor content is truncated")
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        lengths.append(n)
    if pos + sum(lengths) != len(data):
        raise ValueError(f"String tensor content does not hold {size} strings")
    out = []
    for n in lengths:
        out.append(bytes(data[pos : pos + n]))
        pos += n
    return out


def _typed_vals(p: TensorProto, dt: dtypes.DType) -> np.ndarray:
    np_dt = dt.as_numpy_dtype
    if p.half_val:  # IEEE half / bfloat16 bit patterns
        return np.asarray(p.half_val, np.uint32).astype(np.uint16).view(np_dt)
    if p.float8_val:  # one byte per value
        return np.frombuffer(p.float8_val, np.uint8).view(np_dt).copy()
    if p.scomplex_val or p.dcomplex_val:
        flat = np.asarray(p.scomplex_val or p.dcomplex_val, np.float64)
        if flat.size % 2:
            raise ValueError("Complex tensor proto has an odd number of components")
        return (flat[0::2] + 1j * flat[1::2]).astype(np_dt)
    for field in ("float_val", "double_val", "int_val", "int64_val", "uint32_val",
                  "uint64_val", "bool_val"):  # fmt: skip
        vals = getattr(p, field)
        if vals:
            return np.asarray(vals).astype(np_dt)
    return np.zeros(0, np_dt)


def _fill(flat: np.ndarray, dims: tuple, size: int) -> np.ndarray:
    if flat.size == size:
        return flat.reshape(dims).copy()
    if flat.size > size:
        raise ValueError(f"Tensor proto has {flat.size} values for shape {list(dims)}")
    if size > MAX_FILL_ELEMENTS:
        raise ValueError(
            f"Tensor proto of shape {list(dims)} repeats {flat.size} values to "
            f"{size} elements, more than {MAX_FILL_ELEMENTS}"
        )
    if flat.size <= 1:
        # One value (or none) repeated: a read-only broadcast view, nothing allocated, so
        # a tiny file cannot make the import allocate what its shape declares (issue 18).
        one = flat.reshape(()) if flat.size else np.zeros((), flat.dtype)
        if flat.dtype == object and not flat.size:
            one = np.array(b"", dtype=object)
        return np.broadcast_to(one, dims)
    out = np.empty(size, dtype=flat.dtype)
    out[: flat.size] = flat
    out[flat.size :] = flat[-1]
    return out.reshape(dims)


# -- AttrValue -------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """The AttrValue field that holds `value`."""
    if isinstance(value, dtypes.DType):
        return "type"
    if isinstance(value, bool | np.bool_):
        return "b"
    if isinstance(value, int | np.integer):
        return "i"
    if isinstance(value, float | np.floating):
        return "f"
    if isinstance(value, str | bytes):
        return "s"
    if isinstance(value, tensor_shape.TensorShape):
        return "shape"
    if isinstance(value, np.ndarray | np.generic):
        return "tensor"
    raise TypeError(f"Cannot serialise an attr value of type {type(value).__name__}")


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _set_scalar(av: AttrValue, kind: str, value: Any) -> None:
    if kind == "type":
        av.type = _dtype_enum(value)
    elif kind == "b":
        av.b = bool(value)
    elif kind == "i":
        av.i = int(value)
    elif kind == "f":
        av.f = float(value)
    elif kind == "s":
        av.s = _as_bytes(value)
    elif kind == "shape":
        av.shape.SetInParent()  # a scalar's shape has no field set: mark it present
        shape_proto(value, av.shape)
    else:
        av.tensor.SetInParent()
        tensor_proto(value, av.tensor)


def attr_value(value: Any) -> AttrValue:
    """A Python attr value as an AttrValue message.

    Raises:
      TypeError: for a value no AttrValue field can hold (a mixed list included).
    """
    av = AttrValue()
    if isinstance(value, list | tuple):
        # A list inside a list attr can only be a shape (AttrValue has no nested lists):
        # tf.raw_ops callers write output_shapes=[[]] or [[2, None]], as TF accepts.
        value = [tensor_shape.TensorShape(v) if isinstance(v, list | tuple) else v for v in value]
        kinds = {_kind(v) for v in value}
        if kinds == {"i", "f"}:
            kinds = {"f"}  # as TF, a list mixing ints and floats is a list(float)
        if len(kinds) > 1:
            raise TypeError(f"Cannot serialise a list mixing {sorted(kinds)}: {value!r}")
        av.list.SetInParent()
        if not kinds:
            return av
        (kind,) = kinds
        field = getattr(av.list, kind)
        if kind == "shape":
            for v in value:
                shape_proto(v, field.add())
        elif kind == "tensor":
            for v in value:
                tensor_proto(v, field.add())
        elif kind == "type":
            field.extend(_dtype_enum(v) for v in value)
        elif kind == "s":
            field.extend(_as_bytes(v) for v in value)
        else:
            conv = {"b": bool, "i": int, "f": float}[kind]
            field.extend(conv(v) for v in value)
        return av
    _set_scalar(av, _kind(value), value)
    return av


def encode_attr(value: Any) -> dict:
    """`attr_value(value)` in protobuf's JSON mapping (TF's field names, base64 bytes)."""
    return json_format.MessageToDict(attr_value(value), preserving_proto_field_name=True)


_LIST_KINDS = ("s", "i", "f", "b", "type", "shape", "tensor", "func")


def decode_attr(attr: AttrValue, hint: Any = None, name: str = "") -> Any:
    """The inverse of `attr_value`; `hint` is the OpDef's default for the attr, if any.

    Raises:
      ValueError: for an AttrValue with no field this runtime understands.
    """
    if isinstance(attr, dict):  # the JSON mapping (encode_attr's output)
        attr = json_format.ParseDict(attr, AttrValue())
    which = attr.WhichOneof("value")
    if which == "list":
        lst = attr.list
        kind = next((k for k in _LIST_KINDS if len(getattr(lst, k))), None)
        if kind is None:
            return tuple() if isinstance(hint, tuple) else []
        elem_hint = hint[0] if isinstance(hint, list | tuple) and hint else None
        values = [_decode_one(kind, v, elem_hint, name) for v in getattr(lst, kind)]
        return tuple(values) if isinstance(hint, tuple) else values
    if which is None or which in ("func", "placeholder"):
        shown = text_format.MessageToString(attr, as_one_line=True)
        raise ValueError(f"Unsupported AttrValue {{{shown}}} for attr '{name}'")
    return _decode_one(which, getattr(attr, which), hint, name)


def _decode_one(kind: str, value: Any, hint: Any, name: str) -> Any:
    if kind == "type":
        return _dtype_from_enum(value)
    if kind == "shape":
        return shape_from_proto(value)
    if kind == "tensor":
        return tensor_from_proto(value)
    if kind == "func":
        raise ValueError(f"Attr '{name}' names a function, which asyncflow does not import")
    if kind != "s":
        return value
    out = bytes(value)
    if isinstance(hint, bytes) or (hint is None and name.startswith("_")):
        return out
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        if isinstance(hint, str):
            raise ValueError(f"Attr '{name}' expects a UTF-8 string, got {out!r}") from None
        return out


def _attr_hint(op_def, name: str) -> Any:
    spec = op_def.attrs.get(name) if op_def is not None else None
    return None if spec is REQUIRED or isinstance(spec, TypeConstraint) else spec


# TF's reference variants of the control-flow primitives (a variable passed through a
# loop or cond as itself).  asyncflow's primitives carry references (their outputs stay
# references when the input is one), so these import as the plain ops.
_REF_CONTROL_FLOW = {
    "RefEnter": "Enter",
    "RefExit": "Exit",
    "RefSwitch": "Switch",
    "RefMerge": "Merge",
    "RefNextIteration": "NextIteration",
}
_REF_VARIANT = {v: k for k, v in _REF_CONTROL_FLOW.items()}
_MERGES = ("Merge", "RefMerge")
# Outputs that are resource handles in TF and handle tensors of another shape here.
_TF_HANDLE_OUTPUTS = {
    "TensorArrayV3": (0,),
    "TensorArrayGradV3": (0,),
    "TensorArrayGradWithShape": (0,),
    "StackV2": (0,),
}
_FORWARDING = frozenset(["Enter", "Exit", "Switch", "Merge", "NextIteration", "Identity"])
_NEXT_ITERATIONS = ("NextIteration", "RefNextIteration")


# -- export ----------------------------------------------------------------------------


def _input_name(t: ops.Tensor) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def node_def(op: ops.Operation, out: NodeDef | None = None, text: bool = False) -> NodeDef:
    """The NodeDef of `op` (filled into `out` when given).

    Raises:
      TypeError: when an attr holds a value no AttrValue can hold (with `text`, such a
        value is shown by its repr instead: text is for people).
    """
    nd = NodeDef() if out is None else out
    nd.name = op.name
    nd.op = op.type
    if op.type in _REF_VARIANT and op._outputs and op._outputs[0]._is_ref:
        nd.op = _REF_VARIANT[op.type]  # a variable passed on as itself: TF's RefEnter...
    nd.input.extend(_input_name(t) for t in op.inputs)
    nd.input.extend("^" + c.name for c in op.control_inputs)
    if op.device:
        nd.device = op.device
    for key in sorted(op._attrs):
        value = op._attrs[key]
        if value is None:
            continue
        try:
            nd.attr[key].CopyFrom(attr_value(value))
        except TypeError as e:
            if not text:
                raise TypeError(f"Attr '{key}' of op '{op.name}': {e}") from None
            nd.attr[key].s = repr(value).encode("utf-8")
    return nd


# Rewrites of a finished GraphDef that modules above this one register (tf.function's
# calls as TF's call nodes: asyncflow/tf_function_export.py); run in registration order.
_GRAPH_DEF_EXPORTERS: list = []


def register_graph_def_exporter(fn) -> None:
    """`fn(graph, graph_def)` rewrites the GraphDef of `graph` in place, last."""
    _GRAPH_DEF_EXPORTERS.append(fn)


def graph_to_graph_def(graph: ops.Graph, add_shapes: bool = False, only=None) -> GraphDef:
    """`graph` as a GraphDef; `add_shapes` adds each node's "_output_shapes" attr;
    `only` (a set of op names) keeps those ops alone (a subgraph that stands alone)."""
    gd = GraphDef()
    for op in graph.get_operations():
        if only is not None and op.name not in only:
            continue
        nd = node_def(op, gd.node.add())
        if add_shapes:
            shapes = nd.attr["_output_shapes"].list
            shapes.SetInParent()
            for t in op.outputs:
                shape_proto(t.shape, shapes.shape.add())
    export_dataset_functions(graph, gd)  # tf.data functions as TF's FunctionDefs
    resource_twins(gd)  # resource variables' updates as TF's Resource* ops
    tensor_array_handles(gd)  # TensorArray handles through loops as TF's resources
    for exporter in _GRAPH_DEF_EXPORTERS:
        exporter(graph, gd)
    gd.versions.producer = GRAPH_DEF_VERSION
    return gd


def node_def_text(op: ops.Operation) -> str:
    """`op`'s NodeDef in protobuf text format, as `str(op)` shows it in TF."""
    return text_format.MessageToString(node_def(op, text=True))


def graph_def_to_dict(graph_def: GraphDef) -> dict:
    """A GraphDef in protobuf's JSON mapping with TF's field names (base64 bytes)."""
    return json_format.MessageToDict(graph_def, preserving_proto_field_name=True)


def as_graph_def_message(graph_def) -> GraphDef:
    """A GraphDef message from a GraphDef (asyncflow's or TF's class), its binary
    serialization, or its JSON mapping (a dict, or JSON text as str/bytes).

    Raises:
      TypeError: for anything else.
      ValueError: for bytes or JSON that do not parse as a GraphDef.
    """
    if isinstance(graph_def, GraphDef):
        return graph_def
    if isinstance(graph_def, _pb_message.Message):
        if graph_def.DESCRIPTOR.name != "GraphDef":
            raise TypeError(f"graph_def must be a GraphDef proto, got {graph_def.DESCRIPTOR.name}")
        return _parse_binary(graph_def.SerializeToString())
    if isinstance(graph_def, bytes | bytearray | memoryview):
        data = bytes(graph_def)
        if data.lstrip()[:1] != b"{":
            return _parse_binary(data)
        graph_def = data.decode("utf-8", errors="replace")
    if isinstance(graph_def, str):
        try:
            graph_def = json.loads(graph_def)
        except json.JSONDecodeError as e:
            raise ValueError(f"graph_def is not valid JSON: {e}") from None
    if not isinstance(graph_def, dict):
        raise TypeError(f"graph_def must be a GraphDef proto, got {type(graph_def).__name__}")
    try:
        return json_format.ParseDict(graph_def, GraphDef())
    except json_format.ParseError as e:
        raise ValueError(f"graph_def is not a GraphDef: {e}") from None


def _parse_binary(data: bytes) -> GraphDef:
    try:
        return GraphDef.FromString(data)
    except _pb_message.DecodeError as e:
        raise ValueError(f"graph_def is not a valid binary GraphDef: {e}") from None


# -- import ----------------------------------------------------------------------------

_VALID_NODE_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")


def _load_graph_def(graph_def, inside: set[str] | None = None) -> list[NodeDef]:
    """The GraphDef's nodes, calls of its function library inlined (function_library);
    the names of those made from its dataset functions go into `inside`
    (dataset_functions.instantiate)."""
    message = as_graph_def_message(graph_def)
    nodes = list(message.node)
    seen: set[str] = set()
    for nd in nodes:
        name = nd.name
        if not _VALID_NODE_NAME.match(name):
            raise ValueError(f"Node name {name!r} is not a valid node name")
        if name in seen:
            raise ValueError(f"Duplicate node name in graph: '{name}'")
        seen.add(name)
    if message.library.function:
        nodes = inline_calls(nodes, message.library)
    expanded = instantiate_dataset_functions(nodes, message.library, inside)
    if message.library.function or expanded is not nodes:
        seen = set()
        for nd in expanded:
            if nd.name in seen:
                raise ValueError(f"Duplicate node name in graph: '{nd.name}' (inlined)")
            seen.add(nd.name)
    return expanded


def _parse_input(text: str) -> tuple[str, int, bool]:
    """Split an input name.

    "x:2" -> ("x", 2, False); "x" -> ("x", 0, False); "^x" -> ("x", -1, True).
    """
    if text.startswith("^"):
        return text[1:], -1, True
    name, sep, idx = text.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx), False
    return text, 0, False


def _normalize_input_map(input_map) -> tuple[dict, dict]:
    """Split input_map into {(name, index): Tensor} and {name: Operation} ("^name" keys)."""
    tensors: dict[tuple[str, int], Any] = {}
    controls: dict[str, ops.Operation] = {}
    if input_map is None:
        return tensors, controls
    if not isinstance(input_map, dict):
        raise TypeError("input_map must be a dictionary mapping strings to Tensor objects.")
    if not all(isinstance(k, str) for k in input_map):
        raise TypeError("All keys for input_map must be strings.")
    for key, value in input_map.items():
        src, idx, is_control = _parse_input(key)
        if is_control:
            controls[src] = ops._to_operation(value)
        else:
            tensors[(src, idx)] = ops.convert_to_tensor(value)
    return tensors, controls


def _output_counts(nodes: list[NodeDef]) -> dict[str, int | None]:
    """{node name: how many outputs its op has}, None where that takes the attrs."""
    counts: dict[str, int | None] = {}
    for nd in nodes:
        try:
            op_def = get_op_def(_op_type(nd))
        except KeyError:
            counts[nd.name] = None
            continue
        fixed = all(
            not a.number_attr and not (a.type_attr and op_def.attrs[a.type_attr].is_list)
            for a in op_def.outputs
        )
        counts[nd.name] = len(op_def.outputs) if fixed else None
    return counts


def _op_type(nd: NodeDef) -> str:
    return _REF_CONTROL_FLOW.get(nd.op, nd.op)


def _back_edges(nodes: list[NodeDef], index: dict) -> dict[int, list[int]]:
    """{node index: positions among its data inputs} of the while loops' back edges.

    As TF's importer: a loop is the one cycle a GraphDef may hold, closed by an edge
    from a NextIteration into a Merge; the Merge is built from its other (forward)
    inputs and the back edge added once its NextIteration exists.  A Merge all of whose
    data inputs are back edges has nothing to start from, and stays in the cycle check.
    """
    back: dict[int, list[int]] = {}
    for i, nd in enumerate(nodes):
        if nd.op not in _MERGES:
            continue
        data = [t for t in nd.input if not t.startswith("^")]
        found = [
            pos
            for pos, text in enumerate(data)
            if (j := index.get(_parse_input(text)[0])) is not None
            and nodes[j].op in _NEXT_ITERATIONS
        ]
        if found and len(found) < len(data):
            back[i] = found
    return back


def _topological_order(
    nodes: list[NodeDef], tensor_map: dict, control_map: dict
) -> tuple[list[int], dict[int, list[int]]]:
    """Indices of `nodes` with producers first (GraphDef order among ready nodes), and
    the while loops' back edges (`_back_edges`), which the order leaves out.

    Raises:
      ValueError: a cycle not closed by a back edge (naming the nodes it holds up).
    """
    index = {nd.name: i for i, nd in enumerate(nodes)}
    back = _back_edges(nodes, index)
    consumers: list[list[int]] = [[] for _ in nodes]
    pending = [0] * len(nodes)
    for i, nd in enumerate(nodes):
        skip = back.get(i, ())
        pos = -1
        for text in nd.input:
            src, idx, is_control = _parse_input(text)
            if not is_control:
                pos += 1
            if (src in control_map) if is_control else ((src, idx) in tensor_map):
                continue
            if src not in index:
                raise ValueError(f"Node '{nd.name}': Unknown input node '{text}'")
            if pos in skip and not is_control:
                continue
            consumers[index[src]].append(i)
            pending[i] += 1
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in consumers[i]:
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(nodes):
        stuck = sorted(nodes[i].name for i, n in enumerate(pending) if n > 0)
        raise ValueError(f"GraphDef contains a cycle through nodes {stuck}")
    return order, back


def _group_inputs(op_def, flat: list, attrs: dict, node_name: str) -> list:
    """Regroup a NodeDef's flat inputs per OpDef argument (lists for variadic ones)."""
    sizes: list[int | None] = []
    for arg in op_def.inputs:
        spec = op_def.attrs.get(arg.type_attr) if arg.type_attr else None
        if arg.number_attr:
            n = attrs.get(arg.number_attr)
            sizes.append(None if n is None else int(n))
        elif isinstance(spec, TypeConstraint) and spec.is_list:
            types = attrs.get(arg.type_attr)
            sizes.append(None if types is None else len(types))
        else:
            sizes.append(1)
    unknown = [i for i, n in enumerate(sizes) if n is None]
    if len(unknown) == 1:  # the attr is absent: the one variadic arg takes the rest
        sizes[unknown[0]] = len(flat) - sum(n for n in sizes if n is not None)
    if unknown[1:] or sum(sizes) != len(flat) or min(sizes, default=0) < 0:
        raise ValueError(
            f"NodeDef '{node_name}' has {len(flat)} inputs, which does not match the "
            f"signature of op '{op_def.name}'"
        )
    grouped, pos = [], 0
    for arg, n in zip(op_def.inputs, sizes, strict=True):
        variadic = arg.number_attr or (
            arg.type_attr and getattr(op_def.attrs.get(arg.type_attr), "is_list", False)
        )
        grouped.append(list(flat[pos : pos + n]) if variadic else flat[pos])
        pos += n
    return grouped


class _Importer:
    """State of one import_graph_def call; `created` is what a failure rolls back."""

    def __init__(self, graph, nodes, scope, tensor_map, control_map, outer_controls):
        self.graph = graph
        self.nodes = nodes
        self.prefix = scope
        self.tensor_map = tensor_map
        self.control_map = control_map
        self.outer_controls = outer_controls
        self.by_name: dict[str, ops.Operation] = {}
        self.created: list[ops.Operation] = []
        self.imported_names = {nd.name for nd in nodes}
        self.pending_back: list[tuple[str, int, str]] = []
        self.renamed = {} if scope else self._uniquified_names(graph, nodes)

    @staticmethod
    def _uniquified_names(graph, nodes) -> dict[str, str]:
        """TF's `name=""` import: a node whose name an op of the graph already has
        takes the first free "<name>_<k>" (k = 1, 2, ...) instead of failing."""
        taken = set(graph._ops_by_name) | {nd.name for nd in nodes}
        renamed = {}
        for nd in nodes:
            if nd.name in graph._ops_by_name:
                k = 1
                while f"{nd.name}_{k}" in taken:
                    k += 1
                renamed[nd.name] = f"{nd.name}_{k}"
                taken.add(renamed[nd.name])
        return renamed

    def full_name(self, name: str) -> str:
        if self.prefix:
            return f"{self.prefix}/{name}"
        return self.renamed.get(name, name)

    def _tensor(self, node_name: str, text: str) -> ops.Tensor:
        src, idx, _ = _parse_input(text)
        if (src, idx) in self.tensor_map:
            return self.tensor_map[(src, idx)]
        outputs = self.by_name[src].outputs
        if idx >= len(outputs):
            raise ValueError(
                f"Node '{node_name}': input '{text}' names output {idx} of '{src}', "
                f"which has {len(outputs)} outputs"
            )
        return outputs[idx]

    def _decode_attrs(self, op_def, nd: NodeDef) -> dict:
        attrs = {}
        for key, value in nd.attr.items():
            try:
                attrs[key] = decode_attr(value, _attr_hint(op_def, key), key)
            except ValueError as e:
                raise ValueError(f"Node '{nd.name}': {e}") from None
        for key, value in attrs.items():  # a dataset function's tensors (dataset_functions)
            if key.endswith(FUNCTION_LIST_ATTRS) and op_def.attrs.get(key) == []:
                attrs[key] = [self._tensor_name(n) for n in value]
        if "_class" in attrs:  # colocation names follow the ops they name
            groups = attrs["_class"]
            if not isinstance(groups, list) or not all(isinstance(c, bytes) for c in groups):
                raise ValueError(f"Node '{nd.name}': attr '_class' must be a list of strings")
            attrs["_class"] = [self._colocation(c) for c in groups]
        return attrs

    def _tensor_name(self, text) -> str:
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        src, _, idx = text.rpartition(":")
        if src in self.imported_names:
            return f"{self.full_name(src)}:{idx}"
        return text

    def _colocation(self, entry):
        text = entry.decode("utf-8") if isinstance(entry, bytes) else entry
        if text.startswith("loc:@") and text[5:] in self.imported_names:
            text = "loc:@" + self.full_name(text[5:])
        return text.encode("utf-8") if isinstance(entry, bytes) else text

    def build(self, nd: NodeDef, back: list[int] = ()) -> ops.Operation:
        """Create `nd`'s op; `back` lists the positions of its data inputs that are loop
        back edges (not built yet: `close_loops` sets them)."""
        name = nd.name
        op_type = _op_type(nd)
        op_def = get_op_def(op_type)
        attrs = self._decode_attrs(op_def, nd)
        shapes = attrs.pop("_output_shapes", None)
        data, controls, from_import = [], [], False
        for text in nd.input:
            src, idx, is_control = _parse_input(text)
            if is_control:
                mapped = self.control_map.get(src)
                controls.append(mapped if mapped is not None else self.by_name[src])
                from_import |= mapped is None
            elif len(data) in back:
                data.append(None)
                self.pending_back.append((name, len(data) - 1, text))
            else:
                data.append(self._tensor(name, text))
                from_import |= (src, idx) not in self.tensor_map
        if back:  # a forward input stands in for each back edge until it exists
            stand_in = next(t for t in data if t is not None)
            data = [stand_in if t is None else t for t in data]
        skip_shapes = _TF_HANDLE_OUTPUTS.get(op_type, ())
        if op_type in _FORWARDING and attrs.get("T") == dtypes.resource and data:
            # TF's TensorArray handle is a resource; asyncflow's is a string tensor
            # holding the array.  The primitive forwards whichever it gets.
            attrs["T"] = data[0].dtype
            skip_shapes = (0,)
        if not from_import:  # TF: outer control deps gate only the graph's entry nodes
            controls = self.outer_controls + controls
        grouped = _group_inputs(op_def, data, attrs, name)
        want = self.full_name(name)
        if want in self.graph._ops_by_name:
            raise ValueError(f"Node '{want}' already exists in the graph")
        with self.graph.control_dependencies(controls):
            try:
                op_name = want if self.renamed else name
                op = ops.apply_op(op_type, grouped, attrs, name=op_name, graph=self.graph)
            # Attrs come from a file: a shape function may meet values no builder makes.
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
                raise ValueError(f"Node '{name}': {e}") from e
        self.created.append(op)
        if op_type != nd.op and any(t._is_ref for t in op.inputs):
            for t in op.outputs[:1] if op_type == "Merge" else op.outputs:
                t._is_ref = True  # TF's Ref* primitives pass a reference on
        self._rename(op, want)
        if nd.device:
            op._set_device(device_spec.merge_device(op.device, nd.device))
        try:
            for k, (t, s) in enumerate(zip(op.outputs, shapes or [], strict=False)):
                if k not in skip_shapes:  # a TF handle's shape is not asyncflow's
                    t.set_shape(s)
        except ValueError as e:
            raise ValueError(f"Node '{name}': _output_shapes: {e}") from None
        self.by_name[name] = op
        return op

    def close_loops(self) -> None:
        """Add the back edges `build` left out, once every NextIteration exists."""
        for name, pos, text in self.pending_back:
            op = self.by_name[name]
            try:
                op._update_input(pos, self._tensor(name, text))
            except TypeError as e:
                raise ValueError(f"Node '{name}': {e}") from None
        self.pending_back.clear()

    def _rename(self, op: ops.Operation, want: str) -> None:
        """Names differing only in case get uniquified by the graph; keep the GraphDef's."""
        if op.name == want:
            return
        if want in self.graph._ops_by_name:
            raise ValueError(f"Node '{want}' already exists in the graph")
        del self.graph._ops_by_name[op.name]
        op._name = want
        self.graph._ops_by_name[want] = op

    def colocate(self) -> None:
        """Imported ops take the device of the first op they are colocated with (as TF)."""
        for op in self.created:
            for entry in op._attrs.get("_class", []):
                text = entry.decode("utf-8") if isinstance(entry, bytes) else str(entry)
                if not text.startswith("loc:@"):
                    continue
                target = self.graph._ops_by_name.get(text[5:])
                if target is None:
                    raise ValueError(
                        f"Specified colocation to an op that does not exist during import: "
                        f"{text[5:]} in {op.name}"
                    )
                if target.device:
                    op._set_device(target.device)
                    break

    def rollback(self) -> None:
        for op in reversed(self.created):
            ops._discard_op(self.graph, op)
        self.created.clear()

    def element(self, text: str):
        """Raises: ValueError, in TF's words: no such node, or no such output."""
        if ":" in text:
            src, idx, _ = _parse_input(text)
            if (src, idx) in self.tensor_map:
                return self.tensor_map[(src, idx)]
            op = self.by_name.get(src)
            if op is None:
                raise ValueError(f"Requested return tensor '{text}' not found in graph def")
            if idx >= len(op.outputs):
                raise ValueError(
                    f"Invalid return output {idx} of node '{src}', which has "
                    f"{len(op.outputs)} output(s)"
                )
            return op.outputs[idx]
        if text in self.by_name:
            return self.by_name[text]
        raise ValueError(f"Requested return node '{text}' not found in graph def")


def import_graph_def(
    graph_def,
    input_map: dict | None = None,
    return_elements: list | None = None,
    name: str | None = None,
    op_dict=None,
    producer_op_list=None,
):
    """Import a GraphDef into the default graph (TF's `tf.import_graph_def`).

    `graph_def` is a GraphDef message (asyncflow's, or TF's own class), its binary
    serialization, or its JSON mapping (dict or text: what asyncflow wrote before it
    wrote protobuf).  Op "a" becomes "<name>/a" ("import/a" by default; `name=""` keeps
    names exact).  `input_map` maps names in `graph_def` ("x:0", "x" for output 0, "^x"
    for a control input) to Tensors (Operations for "^x") of the default graph that
    replace those inputs; the mapped nodes are still imported.  `op_dict` and
    `producer_op_list` are accepted for TF's signature and ignored.

    Returns:
      None without `return_elements`; else, for each name, the Operation ("op") or the
      Tensor ("op:0") in the default graph.

    Raises:
      TypeError: when graph_def is not a GraphDef, or input_map / return_elements hold
        non-strings where names are expected.
      NotFoundError: a node's op type is not registered in asyncflow (the message names
        the op and the node).
      ValueError: a missing input or return element, a cycle, an input_map key naming no
        node, an attr asyncflow cannot decode, or any op the graph rejects (dtype or
        shape mismatch).  The graph is left unchanged.
    """
    del op_dict, producer_op_list
    graph_def = as_graph_def_message(graph_def)
    inside: set[str] = set()  # (the nodes of its dataset functions)
    nodes = _load_graph_def(graph_def, inside)
    if return_elements is not None and not all(isinstance(r, str) for r in return_elements):
        raise TypeError("return_elements must be a list of strings.")
    for nd in nodes:
        try:
            get_op_def(_op_type(nd))
        except KeyError:
            raise errors.NotFoundError(
                None,
                None,
                f"Op type not registered '{nd.op}' in binary running on asyncflow "
                f"(node '{nd.name}')",
            ) from None
    graph = ops.get_default_graph()
    outer_controls = graph._current_control_inputs()
    with graph.name_scope("import" if name is None else name) as scope:
        tensor_map, control_map = _normalize_input_map(input_map)
        outputs = _output_counts(nodes)
        missing = [
            f"{src}:{idx}"
            for src, idx in tensor_map
            if src not in outputs or (outputs[src] is not None and idx >= outputs[src])
        ] + [f"^{src}" for src in control_map if src not in outputs]
        if missing:
            raise ValueError(
                f"Attempted to map inputs that were not found in graph_def: [{', '.join(missing)}]"
            )
        order, back = _topological_order(nodes, tensor_map, control_map)
        imp = _Importer(graph, nodes, scope.rstrip("/"), tensor_map, control_map, outer_controls)
        token = _IMPORT_PRODUCER.set(graph_def.versions.producer)
        try:
            with graph.control_dependencies(None), graph.colocate_with(None, ignore_existing=True):
                for i in order:
                    imp.build(nodes[i], back.get(i, ()))
            imp.close_loops()
            imp.colocate()
            for node_name in inside:  # (a resource one makes: kernel_api.kernel_resource)
                imp.by_name[node_name]._in_dataset_function = True
            for src, idx in tensor_map:
                if idx >= len(imp.by_name[src].outputs):
                    raise ValueError(  # (an op whose output count its attrs set)
                        f"Attempted to map inputs that were not found in graph_def: [{src}:{idx}]"
                    )
            if return_elements is None:
                return None
            return [imp.element(r) for r in return_elements]
        except (TypeError, ValueError, KeyError) as e:
            imp.rollback()
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            raise ValueError(msg) from e
        except BaseException:
            imp.rollback()
            raise
        finally:
            _IMPORT_PRODUCER.reset(token)


ops.install_graph_def_codec(node_def, node_def_text, graph_to_graph_def)
