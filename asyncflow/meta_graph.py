"""MetaGraphDefs as JSON: export_meta_graph, import_meta_graph, write_graph.

A MetaGraphDef is a dict with TF's proto field names (and attribute access, as TF's
proto objects have):
  {"meta_info_def": {"meta_graph_version", "tags", "tensorflow_version", ...},
   "graph_def": <GraphDef dict, see graph_io>,
   "saver_def": {"filename_tensor_name", "save_tensor_name", "restore_op_name", ...},
   "collection_def": {key: CollectionDef},
   "signature_def": {key: {"inputs": {name: TensorInfo}, "outputs": {...}, "method_name"}},
   "asset_file_def": [{"tensor_info": TensorInfo, "filename": str}]}
A CollectionDef holds exactly one of
  {"node_list": {"value": [names]}}    Tensors ("x:0") and Operations ("x") by name
  {"bytes_list": {"value": [base64]}}  str/bytes (imported back as bytes, as TF does)
  {"int64_list": {"value": [ints]}}, {"float_list": {"value": [floats]}}
  {"variable_list": {"value": [VariableDef dicts]}}  TF1 variables, rebuilt as
      `af.Variable` objects bound to the imported ops (one object per variable, shared
      by every collection naming it)
  {"proto_list": {"value": [dicts]}}   collections with functions registered through
      `register_proto_function` (Savers, queue runners ...).
No pickle, no eval: everything is JSON and is rebuilt through the op registry.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from asyncflow import checkpoint_format as cf
from asyncflow import graph as ops
from asyncflow import graph_io
from asyncflow import variables as variables_mod
from asyncflow.graph import GraphKeys
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def

__all__ = [
    "MetaGraphDef",
    "Message",
    "export_meta_graph",
    "import_meta_graph",
    "read_meta_graph_file",
    "encode_meta_graph",
    "write_graph",
    "register_proto_function",
    "get_to_proto_function",
    "get_from_proto_function",
    "variable_to_def",
    "variable_from_def",
    "MAX_META_GRAPH_BYTES",
]

_log = logging.getLogger("asyncflow")
MAX_META_GRAPH_BYTES = 1 << 31


class Message(dict):
    """A JSON message with attribute access (`sig.inputs["x"].name`), like TF's protos."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        self[key] = value


class MetaGraphDef(Message):
    """A MetaGraphDef dict (see the module note); `MetaGraphDef.from_dict` wraps JSON."""

    @classmethod
    def from_dict(cls, d: dict) -> MetaGraphDef:
        if not isinstance(d, dict):
            raise ValueError(f"A MetaGraphDef must be a JSON object, got {type(d).__name__}")
        out = cls({k: v for k, v in d.items()})
        out.setdefault("meta_info_def", {})
        out["meta_info_def"] = Message(out["meta_info_def"])
        out.setdefault("graph_def", {"node": []})
        out.setdefault("collection_def", {})
        sigs = out.get("signature_def") or {}
        out["signature_def"] = {k: _signature(v) for k, v in sigs.items()}
        out.setdefault("asset_file_def", [])
        return out


def _signature(d: dict) -> Message:
    return Message(
        inputs={k: Message(v) for k, v in (d.get("inputs") or {}).items()},
        outputs={k: Message(v) for k, v in (d.get("outputs") or {}).items()},
        method_name=d.get("method_name", ""),
    )


# -- proto functions (TF's ops.register_proto_function) -------------------------------

_PROTO_FUNCTIONS: dict[str, tuple[Callable | None, Callable | None]] = {}


def register_proto_function(collection_name, proto_type=None, to_proto=None, from_proto=None):
    """Serialise collection `collection_name` with `to_proto(value, export_scope) -> dict`
    and rebuild it with `from_proto(dict, import_scope) -> value`."""
    del proto_type
    _PROTO_FUNCTIONS[collection_name] = (to_proto, from_proto)


def get_to_proto_function(collection_name):
    return _PROTO_FUNCTIONS.get(collection_name, (None, None))[0]


def get_from_proto_function(collection_name):
    return _PROTO_FUNCTIONS.get(collection_name, (None, None))[1]


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


def variable_to_def(var, export_scope=None) -> dict | None:
    """TF's VariableDef of a Variable, names relative to `export_scope`."""
    names = {
        "variable_name": var._variable.name,
        "initial_value_name": var._initial_value.name,
        "initializer_name": var._initializer_op.name,
        "snapshot_name": var._snapshot.name,
    }
    out: dict[str, Any] = {}
    for key, name in names.items():
        stripped = _strip(name, export_scope)
        if stripped is None:
            return None
        out[key] = stripped
    out["trainable"] = bool(var.trainable)
    out["is_resource"] = False
    return out


def variable_from_def(vdef: dict, graph=None, import_scope=None):
    """An `af.Variable` bound to existing ops named by VariableDef `vdef`.

    `Variable(variable_def=...)` is not supported by asyncflow.variables, so the object
    is assembled here with the attributes Variable.__init__ sets.

    Raises:
      KeyError/ValueError: the VariableDef names ops the graph does not have.
    """
    graph = graph or ops.get_default_graph()
    el = lambda key: graph.as_graph_element(_prepend(vdef[key], import_scope))
    var = variables_mod.Variable.__new__(variables_mod.Variable)
    var._variable = el("variable_name")
    var._initializer_op = el("initializer_name")
    var._snapshot = el("snapshot_name")
    init = vdef.get("initial_value_name")
    var._initial_value = el("initial_value_name") if init else var._initializer_op.inputs[1]
    var._trainable = bool(vdef.get("trainable", True))
    var._constraint = None
    var._synchronization = variables_mod.VariableSynchronization.AUTO
    var._aggregation = variables_mod.VariableAggregation.NONE
    var._caching_device = None
    var._save_slice_info = None
    return var


# -- collections ------------------------------------------------------------------------


def _collection_def(key, values, export_scope) -> dict | None:
    to_proto = get_to_proto_function(key)
    if to_proto is not None:
        protos = [p for p in (to_proto(v, export_scope=export_scope) for v in values) if p]
        return {"proto_list": {"value": protos}}
    first = values[0]
    if isinstance(first, variables_mod.Variable):
        if not all(isinstance(v, variables_mod.Variable) for v in values):
            return None
        defs = [d for d in (variable_to_def(v, export_scope) for v in values) if d]
        return {"variable_list": {"value": defs}}
    if all(isinstance(v, ops.Tensor | ops.Operation) for v in values):
        names = [n for n in (_strip(v.name, export_scope) for v in values) if n is not None]
        return {"node_list": {"value": names}}
    if all(isinstance(v, str | bytes) for v in values):
        return {"bytes_list": {"value": [graph_io._b64(v) for v in values]}}
    if all(isinstance(v, int) for v in values):
        return {"int64_list": {"value": [int(v) for v in values]}}
    if all(isinstance(v, int | float) for v in values):
        return {"float_list": {"value": [float(v) for v in values]}}
    return None


def _collections(graph, collection_list, export_scope) -> dict:
    keys = graph.get_all_collection_keys() if collection_list is None else collection_list
    out = {}
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
        out[key] = cdef
    return out


def _restore_collections(graph, collection_def: dict, import_scope) -> None:
    variables: dict[str, Any] = {}
    for key in sorted(collection_def):
        cdef = collection_def[key]
        if "variable_list" in cdef:
            for vdef in cdef["variable_list"].get("value", []):
                name = vdef["variable_name"]
                if name not in variables:
                    variables[name] = variable_from_def(vdef, graph, import_scope)
                graph.add_to_collection(key, variables[name])
        elif "node_list" in cdef:
            for name in cdef["node_list"].get("value", []):
                graph.add_to_collection(key, graph.as_graph_element(_prepend(name, import_scope)))
        elif "bytes_list" in cdef:
            for v in cdef["bytes_list"].get("value", []):
                graph.add_to_collection(key, graph_io._unb64(v))
        elif "int64_list" in cdef:
            for v in cdef["int64_list"].get("value", []):
                graph.add_to_collection(key, int(v))
        elif "float_list" in cdef:
            for v in cdef["float_list"].get("value", []):
                graph.add_to_collection(key, float(v))
        elif "proto_list" in cdef:
            from_proto = get_from_proto_function(key)
            if from_proto is None:
                _log.warning("No from_proto function for collection %s: skipped", key)
                continue
            for p in cdef["proto_list"].get("value", []):
                graph.add_to_collection(key, from_proto(p, import_scope=import_scope))


# -- graph defs -----------------------------------------------------------------------


def _scoped_graph_def(graph_def: dict, export_scope, clear_devices, strip_defaults) -> dict:
    nodes = []
    for nd in graph_def.get("node", []):
        name = _strip(nd["name"], export_scope)
        if name is None:
            continue
        nd = dict(nd, name=name, attr=dict(nd.get("attr", {})))
        inputs = [_strip(i, export_scope) for i in nd.get("input", [])]
        if any(i is None for i in inputs):
            raise ValueError(f"Node '{nd['name']}' has inputs outside scope '{export_scope}'")
        nd["input"] = inputs
        if clear_devices:
            nd["device"] = ""
        if "_class" in nd["attr"] and export_scope:
            nd["attr"].pop("_class")
        if strip_defaults:
            _strip_default_attrs(nd)
        nodes.append(nd)
    return dict(graph_def, node=nodes)


def _strip_default_attrs(nd: dict) -> None:
    op_def = get_op_def(nd["op"])
    for key, spec in op_def.attrs.items():
        if spec is REQUIRED or isinstance(spec, TypeConstraint) or spec is None:
            continue
        if key in nd["attr"]:
            try:
                if graph_io.encode_attr(spec) == nd["attr"][key]:
                    del nd["attr"][key]
            except TypeError:
                pass


def _meta_info(meta_info_def) -> dict:
    info = {"meta_graph_version": "", "tags": [], "tensorflow_version": "asyncflow"}
    info.update(dict(meta_info_def or {}))
    return info


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

    `as_text` writes indented JSON, otherwise compact JSON (both are JSON: there is no
    binary proto here).  The write is atomic (temp file, fsync, rename).

    Raises:
      ValueError: a node inside `export_scope` takes an input from outside it.
    """
    del clear_extraneous_savers, save_debug_info, kwargs
    graph = graph or ops.get_default_graph()
    if graph_def is None:
        graph_def = graph.as_graph_def(add_shapes=True)
    graph_def = _scoped_graph_def(graph_def, export_scope, clear_devices, strip_default_attrs)
    doc = MetaGraphDef(
        meta_info_def=Message(_meta_info(meta_info_def)),
        graph_def=graph_def,
        collection_def=_collections(graph, collection_list, export_scope),
        signature_def={},
        asset_file_def=[],
    )
    if saver_def is not None:
        sd = saver_def.to_dict() if hasattr(saver_def, "to_dict") else dict(saver_def)
        if export_scope:
            for k in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
                sd[k] = _strip(sd[k], export_scope) or sd[k]
        doc["saver_def"] = sd
    if filename:
        cf.atomic_write(os.fspath(filename), encode_meta_graph(doc, as_text))
    return doc


def encode_meta_graph(doc: dict, as_text: bool = False) -> bytes:
    if as_text:
        return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def read_meta_graph_file(filename) -> MetaGraphDef:
    """Read a MetaGraphDef JSON file.

    Raises:
      OSError: the file does not exist, is too large or cannot be parsed.
    """
    filename = os.fspath(filename)
    try:
        size = os.path.getsize(filename)
    except OSError:
        raise OSError(f"File {filename} does not exist.") from None
    if size > MAX_META_GRAPH_BYTES:
        raise OSError(f"Cannot parse file {filename}: larger than {MAX_META_GRAPH_BYTES} bytes.")
    with open(filename, "rb") as f:
        raw = f.read()
    try:
        return MetaGraphDef.from_dict(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        raise OSError(f"Cannot parse file {filename}: {e}.") from None


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **kwargs):
    """Import a MetaGraphDef (file path or dict) into the default graph.

    Returns:
      A Saver built from the MetaGraphDef's saver_def; else a new Saver over the
      imported variables, if any; else None.

    Raises:
      OSError: the file is missing or unparsable.
      ValueError: the graph cannot be imported (unknown op, bad input, name clash).
    """
    from asyncflow.train.saver import Saver

    if isinstance(meta_graph_or_file, dict):
        mg = MetaGraphDef.from_dict(meta_graph_or_file)
    else:
        mg = read_meta_graph_file(meta_graph_or_file)
    graph_def = mg["graph_def"]
    if clear_devices:
        graph_def = dict(graph_def, node=[dict(n, device="") for n in graph_def.get("node", [])])
    graph = ops.get_default_graph()
    graph_io.import_graph_def(
        graph_def, input_map=kwargs.get("input_map"), name=import_scope or ""
    )
    _restore_collections(graph, mg.get("collection_def", {}), import_scope)
    if mg.get("saver_def"):
        from asyncflow.train.saver import SaverDef

        return Saver(saver_def=SaverDef.from_dict(mg["saver_def"]), name=import_scope)
    scope_re = None if not import_scope else import_scope
    if graph.get_collection(GraphKeys.GLOBAL_VARIABLES, scope_re) or graph.get_collection(
        GraphKeys.SAVEABLE_OBJECTS, scope_re
    ):
        return Saver()
    _log.info("Saver not created because there are no variables in the graph to restore")
    return None


def write_graph(graph_or_graph_def, logdir, name, as_text=True) -> str:
    """Write a GraphDef as JSON to `logdir/name` (created if needed); returns the path."""
    if isinstance(graph_or_graph_def, ops.Graph):
        graph_def = graph_or_graph_def.as_graph_def()
    else:
        graph_def = graph_or_graph_def
    logdir = os.fspath(logdir)
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    if as_text:
        data = json.dumps(graph_def, indent=1, sort_keys=True).encode("utf-8")
    else:
        data = json.dumps(graph_def, separators=(",", ":")).encode("utf-8")
    cf.atomic_write(path, data)
    return path


def _register_savers() -> None:
    def to_proto(saver, export_scope=None):
        return saver.to_proto(export_scope=export_scope)

    def from_proto(d, import_scope=None):
        from asyncflow.train.saver import Saver

        return Saver.from_proto(d, import_scope=import_scope)

    register_proto_function(GraphKeys.SAVERS, to_proto=to_proto, from_proto=from_proto)


_register_savers()
