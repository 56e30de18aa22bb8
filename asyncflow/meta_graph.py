"""MetaGraphDefs in TF's protobuf format: export_meta_graph, import_scoped_meta_graph.

A MetaGraphDef is the message of asyncflow/protos/meta_graph.proto (`af.MetaGraphDef`):
meta_info_def, graph_def (a GraphDef, see graph_io), saver_def, collection_def,
signature_def and asset_file_def, written as TF writes them: binary (`.meta`,
`saved_model.pb`) or text format (`as_text=True`).

Collections become CollectionDefs as TF makes them:
  node_list   Tensors ("x:0") and Operations ("x") by name
  bytes_list  str/bytes (imported back as bytes, as TF does), and the serialized protos
              of collections with registered proto functions: VariableDef for TF's
              variable collections ("variables", "trainable_variables", ...), SaverDef
              for "savers", CondContextDef / WhileContextDef for "cond_context" /
              "while_context" (ops/control_flow_context_defs: an imported loop or
              cond gets its context back, so gradients through it work), and
              whatever `register_proto_function` adds
  int64_list, float_list
  any_list    google.protobuf Any messages (SavedModel's "saved_model_assets"), kept as Any
Variables rebuilt from VariableDefs are `af.Variable` objects bound to the imported ops,
one object per variable, shared by every collection naming it (a node_list entry naming
a variable's tensor in another collection gets the same object).
No pickle, no eval: the bytes are parsed by protobuf and rebuilt through the op registry.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from google.protobuf import any_pb2, text_format
from google.protobuf import message as _pb_message

from asyncflow import checkpoint_format as cf
from asyncflow import errors, graph_io
from asyncflow import graph as ops
from asyncflow import variables as variables_mod
from asyncflow.graph import GraphKeys
from asyncflow.op_default_gaps import NOT_TF_DEFAULTS
from asyncflow.ops import control_flow_context_defs as cf_defs
from asyncflow.ops import resource_variable_ops as rvo
from asyncflow.partitioned_variables import SaveSliceInfo
from asyncflow.protos.control_flow_pb2 import CondContextDef, WhileContextDef
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.protos.meta_graph_pb2 import CollectionDef, MetaGraphDef
from asyncflow.protos.saver_pb2 import SaverDef
from asyncflow.protos.variable_pb2 import VariableDef
from asyncflow.registry import REQUIRED, ArgDef, OpDef, TypeConstraint, get_op_def
from asyncflow.resource_variable import ResourceVariable

__all__ = [
    "MetaGraphDef",
    "export_meta_graph",
    "op_def_proto",
    "strip_graph_default_valued_attrs",
    "strip_graph_def_default_attrs",
    "stripped_op_list_for_graph",
    "import_scoped_meta_graph",
    "read_meta_graph_file",
    "encode_meta_graph",
    "write_graph",
    "register_proto_function",
    "get_to_proto_function",
    "get_from_proto_function",
    "variable_to_def",
    "variable_from_def",
    "MAX_META_GRAPH_BYTES",
    "META_GRAPH_VERSION",
]

_log = logging.getLogger("asyncflow")
# protobuf refuses messages of 2 GiB and more; a file that large is not a meta graph.
MAX_META_GRAPH_BYTES = (1 << 31) - 1
META_GRAPH_VERSION = "v1.0"
TENSORFLOW_VERSION = "1.15.0"  # the TF1 API asyncflow implements (meta_info_def)


# -- proto functions (TF's ops.register_proto_function) -------------------------------

_PROTO_FUNCTIONS: dict[str, tuple[Any, Callable | None, Callable | None]] = {}


def register_proto_function(collection_name, proto_type=None, to_proto=None, from_proto=None):
    """Serialise collection `collection_name` into a bytes_list of `proto_type` messages
    made by `to_proto(value, export_scope=...)` (None: skip the value), and rebuild each
    value with `from_proto(message, import_scope=...)`."""
    _PROTO_FUNCTIONS[collection_name] = (proto_type, to_proto, from_proto)


def get_collection_proto_type(collection_name):
    return _PROTO_FUNCTIONS.get(collection_name, (None, None, None))[0]


def get_to_proto_function(collection_name):
    return _PROTO_FUNCTIONS.get(collection_name, (None, None, None))[1]


def get_from_proto_function(collection_name):
    return _PROTO_FUNCTIONS.get(collection_name, (None, None, None))[2]


# -- variables --------------------------------------------------------------------------


def _strip(name: str, scope: str | None) -> str | None:
    """`name` relative to `scope`, or None when outside it."""
    if not scope:
        return name
    prefix = scope.rstrip("/") + "/"
    caret = name.startswith("^")
    bare = name[1:] if caret else name
    if not bare.startswith(prefix):
        return None
    return ("^" if caret else "") + bare[len(prefix) :]


def _prepend(name: str, scope: str | None) -> str:
    if not scope:
        return name
    if name.startswith("^"):
        return "^" + scope.rstrip("/") + "/" + name[1:]
    return scope.rstrip("/") + "/" + name


def variable_to_def(var, export_scope=None) -> VariableDef | None:
    """TF's VariableDef of a Variable, names relative to `export_scope` (None: outside)."""
    if not isinstance(var, variables_mod.Variable):
        return None
    resource = getattr(var, "_handle", None) is not None
    names = {
        # A resource variable as TF writes it: its handle, read by its graph element.
        "variable_name": var._handle.name if resource else var._variable.name,
        "initial_value_name": var._initial_value.name,
        "initializer_name": var._initializer_op.name,
        "snapshot_name": var._snapshot.name,
    }
    out = VariableDef(
        trainable=bool(var.trainable),
        is_resource=resource,
        synchronization=var.synchronization.value,
        aggregation=var.aggregation.value,
    )
    for key, name in names.items():
        stripped = _strip(name, export_scope)
        if stripped is None:
            return None
        setattr(out, key, stripped)
    info = var._save_slice_info
    if info is not None:
        info_def = info.to_proto(export_scope)
        if info_def is not None:
            out.save_slice_info_def.CopyFrom(info_def)
    return out


def _resource_variable_from_def(vdef: VariableDef, graph, el):
    """A ResourceVariable on an imported handle: the ref view its updates take
    ("<handle>/Ref", `_ResourceAsRef`) is the graph's if it has one, else made here."""
    var = ResourceVariable.__new__(ResourceVariable)
    handle = el(vdef.variable_name)
    var._handle = handle
    var._dtype_base = handle.op._attr("dtype")
    var._shape_static = handle.op._attr("shape")
    var._graph_element = el(vdef.snapshot_name)
    view = graph._ops_by_name.get(handle.op.name + "/Ref")
    if view is not None and view.type == "_ResourceAsRef":
        var._variable = view.outputs[0]
    else:
        with graph.as_default(), graph.colocate_with(handle.op):
            name = handle.op.name + "/Ref"
            var._variable = rvo.resource_as_ref(handle, var._dtype_base, name=name)
    return var


def variable_from_def(vdef: VariableDef, graph=None, import_scope=None):
    """An `af.Variable` bound to existing ops named by VariableDef `vdef`.

    `Variable(variable_def=...)` is not supported by asyncflow.variables, so the object
    is assembled here with the attributes Variable.__init__ sets.

    Raises:
      KeyError/ValueError: the VariableDef names ops the graph does not have.
    """
    graph = graph or ops.get_default_graph()
    el = lambda name: graph.as_graph_element(_prepend(name, import_scope))
    if vdef.is_resource:
        var = _resource_variable_from_def(vdef, graph, el)
    else:
        var = variables_mod.Variable.__new__(variables_mod.Variable)
        var._variable = el(vdef.variable_name)
    var._initializer_op = el(vdef.initializer_name)
    var._snapshot = el(vdef.snapshot_name)
    init = vdef.initial_value_name
    var._initial_value = el(init) if init else var._initializer_op.inputs[1]
    var._trainable = bool(vdef.trainable)
    var._constraint = None
    var._synchronization = variables_mod.VariableSynchronization(vdef.synchronization)
    var._aggregation = variables_mod.VariableAggregation(vdef.aggregation)
    var._caching_device = None
    var._save_slice_info = (
        SaveSliceInfo(save_slice_info_def=vdef.save_slice_info_def, import_scope=import_scope)
        if vdef.HasField("save_slice_info_def")
        else None
    )
    return var


_VARIABLE_COLLECTIONS = (
    GraphKeys.GLOBAL_VARIABLES,
    GraphKeys.TRAINABLE_VARIABLES,
    GraphKeys.LOCAL_VARIABLES,
    GraphKeys.MODEL_VARIABLES,
    GraphKeys.MOVING_AVERAGE_VARIABLES,
    "global_step",
    "metric_variables",
)


# -- collections ------------------------------------------------------------------------


def _collection_def(key, values, export_scope) -> CollectionDef | None:
    cdef = CollectionDef()
    to_proto = get_to_proto_function(key)
    if to_proto is not None:
        protos = [p for p in (to_proto(v, export_scope=export_scope) for v in values) if p]
        cdef.bytes_list.value.extend(p.SerializeToString(deterministic=True) for p in protos)
        return cdef
    if all(isinstance(v, any_pb2.Any) for v in values):  # e.g. SavedModel's assets
        cdef.any_list.value.extend(values)
        return cdef
    if all(isinstance(v, variables_mod.Variable) for v in values):
        names = [_strip(v.name, export_scope) for v in values]
        cdef.node_list.value.extend(n for n in names if n is not None)
        return cdef
    if all(isinstance(v, ops.Tensor | ops.Operation) for v in values):
        names = [n for n in (_strip(v.name, export_scope) for v in values) if n is not None]
        cdef.node_list.value.extend(names)
        return cdef
    if all(isinstance(v, str | bytes) for v in values):
        cdef.bytes_list.value.extend(
            v.encode("utf-8") if isinstance(v, str) else v for v in values
        )
        return cdef
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        cdef.int64_list.value.extend(int(v) for v in values)
        return cdef
    if all(isinstance(v, int | float) for v in values):
        cdef.float_list.value.extend(float(v) for v in values)
        return cdef
    return None


def _collections(graph, collection_list, export_scope, out: MetaGraphDef) -> None:
    keys = graph.get_all_collection_keys() if collection_list is None else collection_list
    for key in sorted(keys):
        values = graph.get_collection(key)
        if not values:
            continue
        try:
            cdef = _collection_def(key, values, export_scope)
        except Exception as e:  # noqa: BLE001 - TF logs and skips what it cannot serialise
            _log.warning("Issue encountered when serializing: %s. %s", key, e)
            continue
        if cdef is None:
            _log.warning(
                "Issue encountered when serializing: %s. Type is unsupported, or the types "
                "of the items don't match field type in CollectionDef.",
                key,
            )
            continue
        out.collection_def[key].CopyFrom(cdef)


def _restore_collections(graph, collection_def, import_scope) -> None:
    """Rebuild the collections; proto-typed ones first, so node_list entries naming a
    variable's tensor get the rebuilt Variable object.

    Raises:
      ValueError: a collection names an op or tensor the graph lacks.
      DataLossError: a collection's serialized proto does not parse.
    """
    by_tensor: dict[str, Any] = {}
    keys = sorted(collection_def, key=lambda k: (get_from_proto_function(k) is None, k))
    for key in keys:
        try:
            _restore_collection(graph, key, collection_def[key], import_scope, by_tensor)
        except (KeyError, ValueError, IndexError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            raise ValueError(f"Cannot import collection '{key}': {msg}") from None


def _restore_collection(graph, key, cdef, import_scope, by_tensor: dict) -> None:
    kind = cdef.WhichOneof("kind")
    from_proto = get_from_proto_function(key)
    proto_type = get_collection_proto_type(key)
    if kind == "bytes_list" and from_proto is not None and proto_type is not None:
        for raw in cdef.bytes_list.value:
            try:
                proto = proto_type.FromString(raw)
            except _pb_message.DecodeError as e:
                raise errors.DataLossError(
                    None, None, f"Collection '{key}' holds a malformed proto: {e}"
                ) from None
            if proto_type is VariableDef:
                name = _prepend(proto.variable_name, import_scope)
                if name not in by_tensor:
                    by_tensor[name] = from_proto(proto, import_scope=import_scope)
                graph.add_to_collection(key, by_tensor[name])
            else:
                graph.add_to_collection(key, from_proto(proto, import_scope=import_scope))
    elif kind == "node_list":
        for name in cdef.node_list.value:
            full = _prepend(name, import_scope)
            value = by_tensor.get(full)
            graph.add_to_collection(
                key, value if value is not None else graph.as_graph_element(full)
            )
    elif kind == "bytes_list":
        for v in cdef.bytes_list.value:
            graph.add_to_collection(key, bytes(v))
    elif kind == "int64_list":
        for v in cdef.int64_list.value:
            graph.add_to_collection(key, int(v))
    elif kind == "float_list":
        for v in cdef.float_list.value:
            graph.add_to_collection(key, float(v))
    elif kind == "any_list":  # kept as the Any messages, as TF keeps them
        for v in cdef.any_list.value:
            copy = any_pb2.Any()
            copy.CopyFrom(v)
            graph.add_to_collection(key, copy)
    elif kind is not None:
        _log.warning("Collection %s of kind %s is not imported", key, kind)


# -- graph defs -----------------------------------------------------------------------


def _scoped_graph_def(graph_def: GraphDef, export_scope, clear_devices, strip_defaults):
    out = GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    for nd in graph_def.node:
        name = _strip(nd.name, export_scope)
        if name is None:
            continue
        inputs = [_strip(i, export_scope) for i in nd.input]
        if any(i is None for i in inputs):
            raise ValueError(f"Node '{nd.name}' has inputs outside scope '{export_scope}'")
        new = out.node.add()
        new.CopyFrom(nd)
        new.name = name
        del new.input[:]
        new.input.extend(inputs)
        if clear_devices:
            new.device = ""
        if export_scope and "_class" in new.attr:
            del new.attr["_class"]
    if strip_defaults:
        strip_graph_def_default_attrs(out)
    return out


def _default_attr_value(spec, op_type=None, key=None):
    """The AttrValue of an attr's registered default; None where it has none (or, with
    `op_type` and `key`, where TF 2.21's OpDef has another or none: op_default_gaps)."""
    if op_type is not None and f"{op_type}.{key}" in NOT_TF_DEFAULTS:
        return None
    if isinstance(spec, TypeConstraint):
        spec = spec.default
    if spec is REQUIRED or spec is None:
        return None
    try:
        return graph_io.attr_value(spec)
    except TypeError:
        return None


# The function-call ops graphs and SavedModels hold, which import inlines rather than
# registering them: their inputs, outputs and attrs as TF 2.21's OpDefs declare them.
def _call_op_def(name: str) -> OpDef:
    attrs = {"Tin": TypeConstraint(is_list=True), "Tout": TypeConstraint(is_list=True),
             "f": REQUIRED, "config": "", "config_proto": "", "executor_type": ""}  # fmt: skip
    args = [ArgDef.parse(spec, attrs) for spec in ("args: Tin", "output: Tout")]
    return OpDef(name, args[:1], args[1:], attrs, None, stateful=name.startswith("Stateful"))


_CALL_OPS = {name: _call_op_def(name) for name in ("PartitionedCall", "StatefulPartitionedCall")}


def _op_def(op_type: str) -> OpDef:
    """Registered op `op_type`'s OpDef (or a function-call op's).

    Raises:
      KeyError: not registered.
    """
    return _CALL_OPS.get(op_type) or get_op_def(op_type)


def _strip_default_attrs(nd) -> None:
    """Drop `nd`'s attrs whose value is its op's default (TF's
    strip_default_attributes); importers fill them back from the op's defaults."""
    try:
        op_def = _op_def(nd.op)
    except KeyError:  # a function call, or an op this build does not have
        return
    for key, spec in op_def.attrs.items():
        if key in nd.attr:
            default = _default_attr_value(spec, nd.op, key)
            if default is not None and default == nd.attr[key]:
                del nd.attr[key]


def strip_graph_default_valued_attrs(meta_graph_def) -> None:
    """Strip default-valued attrs from the nodes of `meta_graph_def`'s graph and of its
    library's functions, and mark it `stripped_default_attrs` (TF's function of that
    name, which tf.saved_model.save and strip_default_attrs=True writers use)."""
    strip_graph_def_default_attrs(meta_graph_def.graph_def)
    meta_graph_def.meta_info_def.stripped_default_attrs = True


def strip_graph_def_default_attrs(graph_def) -> None:
    """`strip_graph_default_valued_attrs` on a GraphDef, in place (nodes and functions)."""
    functions = {f.signature.name for f in graph_def.library.function}
    for nd in graph_def.node:
        if nd.op not in functions:
            _strip_default_attrs(nd)
    for fdef in graph_def.library.function:
        for nd in fdef.node_def:
            if nd.op not in functions:
                _strip_default_attrs(nd)


_ATTR_KINDS = {"s": "string", "i": "int", "f": "float", "b": "bool", "type": "type",
               "shape": "shape", "tensor": "tensor", "func": "func"}  # fmt: skip


def _attr_type(value) -> str:
    """An AttrValue's OpDef attr type ("int", "list(type)", ...)."""
    kind = value.WhichOneof("value")
    if kind != "list":
        return _ATTR_KINDS.get(kind, "string")
    for field, name in _ATTR_KINDS.items():
        if len(getattr(value.list, field)):
            return f"list({name})"
    return "list(int)"


def op_def_proto(op_type: str, seen_attrs=None):
    """The OpDef message of registered op `op_type` (as TF's stripped_op_list holds
    them: no descriptions).  An attr without a default takes its type from
    `seen_attrs` (attr name -> an AttrValue a node gave it), else "string".

    Raises:
      KeyError: `op_type` is not registered.
    """
    from asyncflow.protos.op_def_pb2 import OpDef as OpDefProto

    op_def = _op_def(op_type)
    seen_attrs = seen_attrs or {}
    out = OpDefProto(name=op_type)
    for args, field in ((op_def.inputs, out.input_arg), (op_def.outputs, out.output_arg)):
        for arg in args:
            a = field.add(name=arg.name, is_ref=arg.is_ref)
            if arg.fixed_dtype is not None:
                a.type = arg.fixed_dtype.as_datatype_enum
            elif getattr(op_def.attrs.get(arg.type_attr), "is_list", False):
                a.type_list_attr = arg.type_attr
            else:
                a.type_attr = arg.type_attr or ""
            if arg.number_attr:
                a.number_attr = arg.number_attr
    for key, spec in op_def.attrs.items():
        if key.startswith("_"):
            continue
        attr = out.attr.add(name=key)
        default = _default_attr_value(spec, op_type, key)
        if isinstance(spec, TypeConstraint):
            attr.type = "list(type)" if spec.is_list else "type"
            if spec.allowed is not None:
                enums = sorted(d.as_datatype_enum for d in spec.allowed)
                attr.allowed_values.list.type.extend(enums)
        elif _default_attr_value(spec) is not None:
            attr.type = _attr_type(_default_attr_value(spec))
        elif key in seen_attrs:
            attr.type = _attr_type(seen_attrs[key])
        else:
            attr.type = "string"
        if default is not None:
            attr.default_value.CopyFrom(default)
    out.is_stateful = bool(op_def.stateful)
    return out


def stripped_op_list_for_graph(graph_def):
    """The OpList of the registered ops `graph_def`'s nodes and functions use, by name
    (TF's stripped_op_list_for_graph: a MetaGraphDef's meta_info_def.stripped_op_list)."""
    from asyncflow.protos.op_def_pb2 import OpList

    functions = {f.signature.name for f in graph_def.library.function}
    seen: dict[str, dict] = {}
    nodes = list(graph_def.node)
    for fdef in graph_def.library.function:
        nodes.extend(fdef.node_def)
    for nd in nodes:
        if nd.op not in functions:
            attrs = seen.setdefault(nd.op, {})
            for key, value in nd.attr.items():
                attrs.setdefault(key, value)
    out = OpList()
    for name in sorted(seen):
        try:
            proto = op_def_proto(name, seen[name])
        except KeyError:  # not registered here (TF leaves out what it cannot find too)
            continue
        out.op.add().CopyFrom(proto)
    return out


def _saver_def_message(saver_def) -> SaverDef:
    if isinstance(saver_def, SaverDef):
        return saver_def
    if isinstance(saver_def, _pb_message.Message):  # TF's own class
        return SaverDef.FromString(saver_def.SerializeToString())
    if isinstance(saver_def, dict):
        return SaverDef(**saver_def)
    raise TypeError(f"saver_def must be a SaverDef, got {type(saver_def).__name__}")


def export_meta_graph(
    filename=None,
    meta_info_def=None,
    graph_def=None,
    saver_def=None,
    collection_list=None,
    as_text=False,
    graph=None,
    export_scope=None,
    clear_devices=False,
    clear_extraneous_savers=False,
    strip_default_attrs=False,
    save_debug_info=False,
    **kwargs,
) -> MetaGraphDef:
    """The MetaGraphDef of `graph` (default graph); written to `filename` when given.

    The file is TF's: binary protobuf, or text format with `as_text`; the write is
    atomic (temp file, fsync, rename).

    Raises:
      ValueError: a node inside `export_scope` takes an input from outside it.
    """
    del clear_extraneous_savers, save_debug_info, kwargs
    graph = graph or ops.get_default_graph()
    if graph_def is None:
        graph_def = graph.as_graph_def(add_shapes=True)
    graph_def = graph_io.as_graph_def_message(graph_def)
    mg = MetaGraphDef()
    info = mg.meta_info_def
    info.meta_graph_version = META_GRAPH_VERSION
    info.tensorflow_version = TENSORFLOW_VERSION
    info.tensorflow_git_version = "asyncflow"
    if meta_info_def is not None:
        if isinstance(meta_info_def, dict):
            meta_info_def = MetaGraphDef.MetaInfoDef(**meta_info_def)
        info.MergeFrom(meta_info_def)
    info.stripped_default_attrs = bool(strip_default_attrs)
    mg.graph_def.CopyFrom(
        _scoped_graph_def(graph_def, export_scope, clear_devices, strip_default_attrs)
    )
    if not info.HasField("stripped_op_list"):
        info.stripped_op_list.CopyFrom(stripped_op_list_for_graph(mg.graph_def))
    _collections(graph, collection_list, export_scope, mg)
    if saver_def is not None:
        sd = SaverDef()
        sd.CopyFrom(_saver_def_message(saver_def))
        if export_scope:
            for k in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
                setattr(sd, k, _strip(getattr(sd, k), export_scope) or getattr(sd, k))
        mg.saver_def.CopyFrom(sd)
    if filename:
        cf.atomic_write(os.fspath(filename), encode_meta_graph(mg, as_text))
    return mg


def encode_meta_graph(message, as_text: bool = False) -> bytes:
    """A MetaGraphDef (or SavedModel, GraphDef) as TF writes it: binary or text format."""
    if as_text:
        return text_format.MessageToString(message).encode("utf-8")
    return message.SerializeToString(deterministic=True)


def parse_message(raw: bytes, message_type, filename: str):
    """`raw` as a `message_type`: binary first, then text format (TF's readers do both).

    Raises:
      DataLossError: neither parses.
    """
    try:
        return message_type.FromString(raw)
    except _pb_message.DecodeError as binary_error:
        try:
            text = raw.decode("utf-8")
            return text_format.Parse(text, message_type())
        except (UnicodeDecodeError, text_format.ParseError):
            raise errors.DataLossError(
                None, None, f"Cannot parse file {filename}: {binary_error}."
            ) from None


def read_file_bounded(filename: str, limit: int = MAX_META_GRAPH_BYTES) -> bytes:
    """The bytes of `filename`, refusing files over `limit` before reading them.

    Raises:
      NotFoundError: no such file.  DataLossError: larger than `limit`.
    """
    try:
        size = os.path.getsize(filename)
    except OSError:
        raise errors.NotFoundError(None, None, f"File {filename} does not exist.") from None
    if size > limit:
        raise errors.DataLossError(
            None, None, f"Cannot parse file {filename}: larger than {limit} bytes."
        )
    with open(filename, "rb") as f:
        return f.read(limit + 1)


def read_meta_graph_file(filename) -> MetaGraphDef:
    """Read a MetaGraphDef file (binary or text format).

    Raises:
      OSError: the file does not exist (TF's IOError).
      DataLossError: it is too large or does not parse as a MetaGraphDef.
    """
    filename = os.fspath(filename)
    if not os.path.exists(filename):
        raise OSError(f"File {filename} does not exist.")
    return parse_message(read_file_bounded(filename), MetaGraphDef, filename)


def _meta_graph_message(meta_graph_or_file) -> MetaGraphDef:
    if isinstance(meta_graph_or_file, MetaGraphDef):
        return meta_graph_or_file
    if isinstance(meta_graph_or_file, _pb_message.Message):  # TF's own class
        if meta_graph_or_file.DESCRIPTOR.name != "MetaGraphDef":
            raise TypeError(f"Expected a MetaGraphDef, got {meta_graph_or_file.DESCRIPTOR.name}")
        return MetaGraphDef.FromString(meta_graph_or_file.SerializeToString())
    return read_meta_graph_file(meta_graph_or_file)


def import_scoped_meta_graph(meta_graph_or_file, clear_devices=False, graph=None,
                             import_scope=None, input_map=None):  # fmt: skip
    """Import the graph and collections of a MetaGraphDef; returns the MetaGraphDef.

    Raises: see `asyncflow.train.saver.import_meta_graph`.
    """
    mg = _meta_graph_message(meta_graph_or_file)
    graph_def = mg.graph_def
    if clear_devices:
        graph_def = GraphDef()
        graph_def.CopyFrom(mg.graph_def)
        for nd in graph_def.node:
            nd.device = ""
    graph = graph or ops.get_default_graph()
    with graph.as_default():
        graph_io.import_graph_def(graph_def, input_map=input_map, name=import_scope or "")
        _restore_collections(graph, mg.collection_def, import_scope)
    return mg


def write_graph(graph_or_graph_def, logdir, name, as_text=True) -> str:
    """Write a GraphDef to `logdir/name` (created if needed), text format or binary as TF's
    `tf.io.write_graph`; returns the path."""
    if isinstance(graph_or_graph_def, ops.Graph):
        graph_def = graph_or_graph_def.as_graph_def()
    else:
        graph_def = graph_io.as_graph_def_message(graph_or_graph_def)
    logdir = os.fspath(logdir)
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    cf.atomic_write(path, encode_meta_graph(graph_def, as_text))
    return path


def _register() -> None:
    # The "savers" collection's functions are registered by asyncflow.train.saver, which
    # imports this module (never the other way round).
    for key in _VARIABLE_COLLECTIONS:
        register_proto_function(key, VariableDef, variable_to_def, _variable_from_proto)
    # Control flow v1's contexts, so gradients through an imported loop or cond work.
    register_proto_function(
        GraphKeys.COND_CONTEXT, CondContextDef, cf_defs.context_to_proto, cf_defs.cond_from_proto
    )
    register_proto_function(
        GraphKeys.WHILE_CONTEXT,
        WhileContextDef,
        cf_defs.context_to_proto,
        cf_defs.while_from_proto,
    )


def _variable_from_proto(vdef, import_scope=None):
    return variable_from_def(vdef, import_scope=import_scope)


_register()

# TF's `Variable.to_proto(export_scope)` / `Variable.from_proto(variable_def,
# import_scope)`, attached here because variables cannot import this module (layering).
variables_mod.Variable.to_proto = variable_to_def
variables_mod._VARIABLE_FROM_DEF[0] = variable_from_def
variables_mod.Variable.from_proto = staticmethod(_variable_from_proto)
