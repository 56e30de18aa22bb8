"""GraphDef export and import as JSON-ready dicts that use TF's proto field names.

A GraphDef here is `{"node": [NodeDef...], "versions": {"producer": 27}, "library": {}}`
with NodeDef `{"name", "op", "input", "device", "attr"}` and AttrValues spelt as TF's
JSON mapping does (`{"type": "DT_FLOAT"}`, `{"shape": {"dim": [{"size": 2}]}}`, ...).
Bytes travel as base64 strings, so `json.dumps` takes the result as it is and nothing
is ever unpickled or evaluated on the way back.

Invariants:
- `decode_attr(encode_attr(v))` gives back `v` for every attr value the graph keeps:
  DType, bool (never confused with int), int, float, TensorShape, numpy arrays (dtype
  and shape kept; decoded arrays are read-only, as Const values are), and lists of
  those.  Proto strings carry no str/bytes distinction, so an "s" value decodes to the
  type of the OpDef's default for that attr; without one, attrs named "_..." (TF's
  internal attrs such as "_class") decode to bytes, others to str when they are valid
  UTF-8.  Tuples decode as lists unless the OpDef's default is a tuple.
- `import_graph_def` creates every op through `graph.apply_op`, in topological order,
  and either imports the whole GraphDef or leaves the graph as it found it.
"""

from __future__ import annotations

import base64
import heapq
import json
import re
import sys
from typing import Any

import numpy as np

from asyncflow import device_spec, dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def

__all__ = [
    "encode_attr",
    "decode_attr",
    "node_def",
    "node_def_text",
    "graph_to_graph_def",
    "import_graph_def",
]

GRAPH_DEF_VERSION = 27

# -- dtypes ----------------------------------------------------------------------------

_DT_ENUM_NAMES = {
    dtypes.float32: "DT_FLOAT",
    dtypes.float64: "DT_DOUBLE",
    dtypes.int32: "DT_INT32",
    dtypes.uint8: "DT_UINT8",
    dtypes.int16: "DT_INT16",
    dtypes.int8: "DT_INT8",
    dtypes.string: "DT_STRING",
    dtypes.complex64: "DT_COMPLEX64",
    dtypes.int64: "DT_INT64",
    dtypes.bool_: "DT_BOOL",
    dtypes.bfloat16: "DT_BFLOAT16",
    dtypes.uint16: "DT_UINT16",
    dtypes.complex128: "DT_COMPLEX128",
    dtypes.float16: "DT_HALF",
    dtypes.uint32: "DT_UINT32",
    dtypes.uint64: "DT_UINT64",
}
_DT_BY_ENUM_NAME = {v: k for k, v in _DT_ENUM_NAMES.items()}


def _dtype_to_json(dt: dtypes.DType) -> str:
    return _DT_ENUM_NAMES[dtypes.as_dtype(dt)]


def _dtype_from_json(value: Any) -> dtypes.DType:
    """A DType from "DT_FLOAT" or TF's integer enum ("_REF" names the same element type)."""
    if isinstance(value, str):
        name = value[:-4] if value.endswith("_REF") else value
        if name in _DT_BY_ENUM_NAME:
            return _DT_BY_ENUM_NAME[name]
        raise ValueError(f"Unknown DataType {value!r}")
    enum = int(value)
    return dtypes.as_dtype(enum - 100 if enum > 100 else enum)


# -- bytes, shapes, tensors ------------------------------------------------------------


def _b64(value: str | bytes) -> str:
    if isinstance(value, str):
        value = value.encode("utf-8")
    return base64.b64encode(bytes(value)).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _shape_to_json(shape: tensor_shape.TensorShape) -> dict:
    if shape.ndims is None:
        return {"unknown_rank": True}
    return {"dim": [{"size": -1 if d is None else int(d)} for d in shape.as_list()]}


def _shape_from_json(d: dict) -> tensor_shape.TensorShape:
    if d.get("unknown_rank"):
        return tensor_shape.unknown_shape()
    sizes = [int(dim.get("size", 0)) for dim in d.get("dim", [])]
    return tensor_shape.TensorShape([None if s < 0 else s for s in sizes])


def _tensor_to_json(arr: np.ndarray) -> dict:
    arr = np.asarray(arr)
    dt = dtypes.as_dtype(arr.dtype)
    out = {
        "dtype": _dtype_to_json(dt),
        "tensor_shape": _shape_to_json(tensor_shape.TensorShape(arr.shape)),
    }
    if dt == dtypes.string:
        out["string_val"] = [_b64(x) for x in arr.reshape(-1).tolist()]
    else:
        arr = np.ascontiguousarray(arr)
        if sys.byteorder != "little":
            arr = arr.byteswap()
        out["tensor_content"] = _b64(arr.tobytes())
    return out


# TF writes small tensors with typed repeated fields instead of tensor_content; the last
# value fills the rest of the tensor (an empty field means zeros).
_VAL_FIELDS = (
    "float_val", "double_val", "int_val", "int64_val", "uint32_val", "uint64_val",
    "bool_val", "half_val", "scomplex_val", "dcomplex_val",
)  # fmt: skip


def _tensor_from_json(d: dict) -> np.ndarray:
    dt = _dtype_from_json(d.get("dtype", "DT_FLOAT"))
    shape = _shape_from_json(d.get("tensor_shape", {}))
    if not shape.is_fully_defined():
        raise ValueError(f"Tensor proto has a partially known shape {shape}")
    dims = tuple(shape.as_list())
    if dt == dtypes.string:
        items = [_unb64(s) for s in d.get("string_val", [])]
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        arr = _fill(arr, dims)
    elif "tensor_content" in d:
        arr = np.frombuffer(_unb64(d["tensor_content"]), dtype=dt.as_numpy_dtype)
        if sys.byteorder != "little":
            arr = arr.byteswap()
        arr = arr.reshape(dims).copy()
    else:
        arr = _fill(_typed_vals(d, dt), dims)
    arr.flags.writeable = False
    return arr


def _typed_vals(d: dict, dt: dtypes.DType) -> np.ndarray:
    np_dt = dt.as_numpy_dtype
    for field in _VAL_FIELDS:
        if field not in d:
            continue
        vals = d[field]
        if field == "half_val":  # IEEE half / bfloat16 bit patterns
            return np.asarray([int(v) for v in vals], np.uint16).view(np_dt)
        if field in ("scomplex_val", "dcomplex_val"):
            flat = [float(v) for v in vals]
            return np.asarray(
                [complex(a, b) for a, b in zip(flat[::2], flat[1::2], strict=True)], np_dt
            )
        if field == "bool_val":
            return np.asarray([bool(v) for v in vals], np_dt)
        conv = float if field in ("float_val", "double_val") else int
        return np.asarray([conv(v) for v in vals]).astype(np_dt)
    return np.zeros(0, np_dt)


def _fill(flat: np.ndarray, dims: tuple) -> np.ndarray:
    size = int(np.prod(dims, dtype=np.int64))
    if flat.size == size:
        return flat.reshape(dims).copy()
    if flat.size > size:
        raise ValueError(f"Tensor proto has {flat.size} values for shape {list(dims)}")
    out = np.empty(size, dtype=flat.dtype)
    if flat.size == 0:
        out[:] = b"" if flat.dtype == object else 0
    else:
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


_ENCODERS = {
    "type": _dtype_to_json,
    "b": bool,
    "i": int,
    "f": float,
    "s": _b64,
    "shape": _shape_to_json,
    "tensor": _tensor_to_json,
}
_DECODERS = {
    "type": _dtype_from_json,
    "b": bool,
    "i": int,
    "f": float,
    "s": _unb64,
    "shape": _shape_from_json,
    "tensor": _tensor_from_json,
}


def encode_attr(value: Any) -> dict:
    """A Python attr value as an AttrValue dict (TF's JSON field names).

    Raises:
      TypeError: for a value no AttrValue field can hold (a mixed list included).
    """
    if isinstance(value, list | tuple):
        kinds = {_kind(v) for v in value}
        if kinds == {"i", "f"}:
            kinds = {"f"}  # as TF, a list mixing ints and floats is a list(float)
        if len(kinds) > 1:
            raise TypeError(f"Cannot serialise a list mixing {sorted(kinds)}: {value!r}")
        if not kinds:
            return {"list": {}}
        (kind,) = kinds
        return {"list": {kind: [_ENCODERS[kind](v) for v in value]}}
    kind = _kind(value)
    return {kind: _ENCODERS[kind](value)}


def decode_attr(attr: dict, hint: Any = None, name: str = "") -> Any:
    """The inverse of `encode_attr`; `hint` is the OpDef's default for the attr, if any.

    Raises:
      ValueError: for an AttrValue with no field this runtime understands.
    """
    attr = _snake_keys(attr)
    if "list" in attr:
        fields = [k for k in attr["list"] if k in _DECODERS]
        if not fields:
            return tuple() if isinstance(hint, tuple) else []
        kind = fields[0]
        elem_hint = hint[0] if isinstance(hint, list | tuple) and hint else None
        values = [_decode_one(kind, v, elem_hint, name) for v in attr["list"][kind]]
        return tuple(values) if isinstance(hint, tuple) else values
    for kind in _DECODERS:
        if kind in attr:
            return _decode_one(kind, attr[kind], hint, name)
    raise ValueError(f"Unsupported AttrValue {attr!r} for attr '{name}'")


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake_keys(message: Any) -> Any:
    """TF's default JSON spells fields in lowerCamelCase ("tensorContent"): accept both."""
    if isinstance(message, dict):
        return {_CAMEL.sub(r"_\1", k).lower(): _snake_keys(v) for k, v in message.items()}
    if isinstance(message, list):
        return [_snake_keys(v) for v in message]
    return message


def _decode_one(kind: str, value: Any, hint: Any, name: str) -> Any:
    out = _DECODERS[kind](value)
    if kind != "s":
        return out
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


# -- export ----------------------------------------------------------------------------


def _input_name(t: ops.Tensor) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def node_def(op: ops.Operation) -> dict:
    """The NodeDef of `op` as a JSON-ready dict.

    Raises:
      TypeError: when an attr holds a value no AttrValue can hold.
    """
    attrs = {}
    for key in sorted(op._attrs):
        value = op._attrs[key]
        if value is None:
            continue
        try:
            attrs[key] = encode_attr(value)
        except TypeError as e:
            raise TypeError(f"Attr '{key}' of op '{op.name}': {e}") from None
    return {
        "name": op.name,
        "op": op.type,
        "input": [_input_name(t) for t in op.inputs] + ["^" + c.name for c in op.control_inputs],
        "device": op.device,
        "attr": attrs,
    }


def graph_to_graph_def(graph: ops.Graph, add_shapes: bool = False) -> dict:
    """`graph` as a GraphDef dict; `add_shapes` adds each node's "_output_shapes" attr."""
    nodes = []
    for op in graph.get_operations():
        nd = node_def(op)
        if add_shapes:
            shapes = [_shape_to_json(t.shape) for t in op.outputs]
            nd["attr"]["_output_shapes"] = {"list": {"shape": shapes}}
        nodes.append(nd)
    return {"node": nodes, "versions": {"producer": GRAPH_DEF_VERSION}, "library": {}}


# -- text form (str(op)) ---------------------------------------------------------------

_BYTES_FIELDS = frozenset({"s", "tensor_content", "string_val"})
_ENUM_FIELDS = frozenset({"type", "dtype"})


def _c_escape(data: bytes) -> str:
    """Protobuf's CEscape: printable ASCII as is, the rest as octal escapes."""
    special = {10: "\\n", 13: "\\r", 9: "\\t", 34: '\\"', 39: "\\'", 92: "\\\\"}
    out = []
    for b in data:
        if b in special:
            out.append(special[b])
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def _text_scalar(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if key in _ENUM_FIELDS:
        return str(value)
    if key in _BYTES_FIELDS:
        return f'"{_c_escape(_unb64(value))}"'
    if isinstance(value, str):
        return f'"{_c_escape(value.encode("utf-8"))}"'
    return repr(value)


def _text_lines(message: dict, indent: int) -> list[str]:
    pad = "  " * indent
    lines = []
    for key, value in message.items():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, dict):
                lines.append(f"{pad}{key} {{")
                lines.extend(_text_lines(v, indent + 1))
                lines.append(f"{pad}}}")
            else:
                lines.append(f"{pad}{key}: {_text_scalar(key, v)}")
    return lines


def node_def_text(op: ops.Operation) -> str:
    """`op`'s NodeDef in protobuf text format, as `str(op)` shows it in TF."""
    head: dict[str, Any] = {"name": op.name, "op": op.type}
    head["input"] = [_input_name(t) for t in op.inputs] + ["^" + c.name for c in op.control_inputs]
    if op.device:
        head["device"] = op.device
    lines = _text_lines(head, 0)
    for key in sorted(op._attrs):
        value = op._attrs[key]
        if value is None:
            continue
        try:
            encoded = encode_attr(value)
        except TypeError:
            encoded = {"s": _b64(repr(value))}  # text is for people: show what it holds
        lines.append("attr {")
        lines.append(f'  key: "{_c_escape(key.encode("utf-8"))}"')
        lines.append("  value {")
        lines.extend(_text_lines(encoded, 2))
        lines.append("  }")
        lines.append("}")
    return "\n".join(lines) + "\n"


# -- import ----------------------------------------------------------------------------

_VALID_NODE_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")


def _load_graph_def(graph_def) -> list[dict]:
    if isinstance(graph_def, bytes | bytearray):
        graph_def = graph_def.decode("utf-8")
    if isinstance(graph_def, str):
        try:
            graph_def = json.loads(graph_def)
        except json.JSONDecodeError as e:
            raise ValueError(f"graph_def is not valid JSON: {e}") from None
    if not isinstance(graph_def, dict):
        raise TypeError(f"graph_def must be a GraphDef dict, got {type(graph_def).__name__}")
    nodes = list(graph_def.get("node", []))
    seen: set[str] = set()
    for nd in nodes:
        name = nd.get("name") if isinstance(nd, dict) else None
        if not isinstance(name, str) or not _VALID_NODE_NAME.match(name):
            raise ValueError(f"Node name {name!r} is not a valid node name")
        if name in seen:
            raise ValueError(f"Duplicate node name in graph: '{name}'")
        seen.add(name)
    return nodes


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
    for key, value in (input_map or {}).items():
        if not isinstance(key, str):
            raise TypeError("input_map must be a dictionary mapping strings to Tensor objects")
        src, idx, is_control = _parse_input(key)
        if is_control:
            controls[src] = ops._to_operation(value)
        else:
            tensors[(src, idx)] = ops.convert_to_tensor(value)
    return tensors, controls


def _topological_order(nodes: list[dict], tensor_map: dict, control_map: dict) -> list[int]:
    """Indices of `nodes` with producers first; GraphDef order among ready nodes."""
    index = {nd["name"]: i for i, nd in enumerate(nodes)}
    consumers: list[list[int]] = [[] for _ in nodes]
    pending = [0] * len(nodes)
    for i, nd in enumerate(nodes):
        for text in nd.get("input", []):
            src, idx, is_control = _parse_input(text)
            if (src in control_map) if is_control else ((src, idx) in tensor_map):
                continue
            if src not in index:
                raise ValueError(f"Node '{nd['name']}': Unknown input node '{text}'")
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
        stuck = sorted(nodes[i]["name"] for i, n in enumerate(pending) if n > 0)
        raise ValueError(f"GraphDef contains a cycle through nodes {stuck}")
    return order


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
        self.imported_names = {nd["name"] for nd in nodes}

    def full_name(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

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

    def _decode_attrs(self, op_def, nd: dict) -> dict:
        attrs = {}
        for key, value in (nd.get("attr") or {}).items():
            attrs[key] = decode_attr(value, _attr_hint(op_def, key), key)
        if "_class" in attrs:  # colocation names follow the ops they name
            attrs["_class"] = [self._colocation(c) for c in attrs["_class"]]
        return attrs

    def _colocation(self, entry):
        text = entry.decode("utf-8") if isinstance(entry, bytes) else entry
        if text.startswith("loc:@") and text[5:] in self.imported_names:
            text = "loc:@" + self.full_name(text[5:])
        return text.encode("utf-8") if isinstance(entry, bytes) else text

    def build(self, nd: dict) -> ops.Operation:
        name = nd["name"]
        op_def = get_op_def(nd["op"])
        attrs = self._decode_attrs(op_def, nd)
        shapes = attrs.pop("_output_shapes", None)
        data, controls, from_import = [], [], False
        for text in nd.get("input", []):
            src, idx, is_control = _parse_input(text)
            if is_control:
                mapped = self.control_map.get(src)
                controls.append(mapped if mapped is not None else self.by_name[src])
                from_import |= mapped is None
            else:
                data.append(self._tensor(name, text))
                from_import |= (src, idx) not in self.tensor_map
        if not from_import:  # TF: outer control deps gate only the graph's entry nodes
            controls = self.outer_controls + controls
        grouped = _group_inputs(op_def, data, attrs, name)
        want = self.full_name(name)
        if want in self.graph._ops_by_name:
            raise ValueError(f"Node '{want}' already exists in the graph")
        with self.graph.control_dependencies(controls):
            try:
                op = ops.apply_op(nd["op"], grouped, attrs, name=name, graph=self.graph)
            except (TypeError, ValueError) as e:
                raise ValueError(f"Node '{name}': {e}") from e
        self.created.append(op)
        self._rename(op, want)
        if nd.get("device"):
            op._set_device(device_spec.merge_device(op.device, nd["device"]))
        for t, s in zip(op.outputs, shapes or [], strict=False):
            t.set_shape(s)
        self.by_name[name] = op
        return op

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
        if ":" in text:
            src, idx, _ = _parse_input(text)
            if (src, idx) in self.tensor_map:
                return self.tensor_map[(src, idx)]
            op = self.by_name.get(src)
            if op is not None and idx < len(op.outputs):
                return op.outputs[idx]
        elif text in self.by_name:
            return self.by_name[text]
        raise ValueError(f"Requested return_element '{text}' not found in graph_def.")


def import_graph_def(
    graph_def,
    input_map: dict | None = None,
    return_elements: list | None = None,
    name: str | None = None,
    op_dict=None,
    producer_op_list=None,
):
    """Import a GraphDef (dict, or its JSON as str/bytes) into the default graph.

    Op "a" becomes "<name>/a" ("import/a" by default; `name=""` keeps names exact).
    `input_map` maps names in `graph_def` ("x:0", "x" for output 0, "^x" for a control
    input) to Tensors (Operations for "^x") of the default graph that replace those
    inputs; the mapped nodes are still imported.  `op_dict` and `producer_op_list` are
    accepted for TF's signature and ignored.

    Returns:
      None without `return_elements`; else, for each name, the Operation ("op") or the
      Tensor ("op:0") in the default graph.

    Raises:
      TypeError: when graph_def is not a GraphDef, or input_map / return_elements hold
        non-strings where names are expected.
      ValueError: for an unknown op type, a missing input or return element, a cycle,
        an input_map key naming no node, or any op the graph rejects (dtype or shape
        mismatch).  The graph is left unchanged.
    """
    del op_dict, producer_op_list
    nodes = _load_graph_def(graph_def)
    if return_elements is not None and not all(isinstance(r, str) for r in return_elements):
        raise TypeError("return_elements must be a list of strings")
    for nd in nodes:
        try:
            get_op_def(nd.get("op", ""))
        except KeyError:
            raise ValueError(
                f"Op type not registered '{nd.get('op')}' in binary (node '{nd['name']}')"
            ) from None
    graph = ops.get_default_graph()
    outer_controls = graph._current_control_inputs()
    with graph.name_scope("import" if name is None else name) as scope:
        tensor_map, control_map = _normalize_input_map(input_map)
        names = {nd["name"] for nd in nodes}
        missing = sorted(({src for src, _ in tensor_map} | set(control_map)) - names)
        if missing:
            raise ValueError(
                f"Attempted to map inputs that were not found in graph_def: {missing}"
            )
        order = _topological_order(nodes, tensor_map, control_map)
        imp = _Importer(graph, nodes, scope.rstrip("/"), tensor_map, control_map, outer_controls)
        try:
            with graph.control_dependencies(None), graph.colocate_with(None):
                for i in order:
                    imp.build(nodes[i])
            imp.colocate()
            for src, idx in tensor_map:
                if idx >= len(imp.by_name[src].outputs):
                    raise ValueError(f"input_map key '{src}:{idx}' names no output of '{src}'")
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


ops.install_graph_def_codec(node_def, node_def_text, graph_to_graph_def)
