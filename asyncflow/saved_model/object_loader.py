"""`tf.compat.v1.saved_model.load_v2`: a TF 2 (object-based) SavedModel in a TF1 graph.

TF 2's `tf.saved_model.save` writes, beside the graph, a SavedObjectGraph
(MetaGraphDef.object_graph_def): the saved Python objects, node 0 the root, each a user
object, a variable, a tf.function (its traced concrete functions named in the graph's
function library) or a signature (a bare concrete function under the "signatures" node).
`load_v2` rebuilds those objects in the default graph, as TF does in graph mode:

- a variable becomes a resource variable named as saved, whose initializer restores its
  value from variables/ (RestoreV2 of the key the checkpoint's object graph gives the
  same node: the two graphs number their nodes alike), so the saved values appear once
  the session runs the initializers;
- a call of a restored function or signature imports one call node of the function
  (its inputs: the flattened arguments, then the handles of the objects it captured,
  `bound_inputs`) with the SavedModel's library; graph_io inlines the call on import.

Arguments bind as TF binds them: to the one concrete function whose input signature
they fit (dtype equal, shape compatible), else TF's TypeError; keyword-only Python
arguments (given, else their saved defaults) pick the trace made with those values.
A composite argument (RaggedTensor, SparseTensor, IndexedSlices: a TypeSpecProto in
the saved signature) fits when it is of the spec's type and each of its component
tensors fits the spec's; a composite result is rebuilt from the call's outputs by its
saved TypeSpec.

A SavedModel without an object graph (TF1's builder) loads as TF's load_v1_in_v2 does:
an AutoTrackable whose `.variables` are its resource variables (recreated, restored by
their initializers from variables/, keyed by op name as TF1's Saver keys them) and whose
`.signatures` import, per call, the part of the meta graph the signature's outputs need,
its inputs and the variables' handles mapped in.  A reference variable (VariableV2) is
imported with that part, uninitialized, so running it fails as in TF
(FailedPreconditionError).
"""

from __future__ import annotations

import collections
import os

from asyncflow import dtypes, graph_io, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.framework_extras import TensorSpec, make_ndarray
from asyncflow.ops import array_ops, io_ops
from asyncflow.protos.graph_debug_info_pb2 import GraphDebugInfo
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.protos.trackable_object_graph_pb2 import TrackableObjectGraph
from asyncflow.protos.variable_pb2 import VariableDef
from asyncflow.resource_variable import ResourceVariable
from asyncflow.saved_model.builder import variables_prefix
from asyncflow.saved_model.loader import read_saved_model
from asyncflow.saved_model.nested_structure import decode as _structure
from asyncflow.tf_function import _component_specs, _from_components
from asyncflow.train import checkpoint_utils
from asyncflow.type_spec import TypeSpec

__all__ = ["load_v2"]

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_DEBUG_INFO = os.path.join("debug", "saved_model_debug_info.pb")


class _UserObject:
    """A restored user object (tf.Module, AutoTrackable): its saved children as
    attributes."""


class _CallableUserObject(_UserObject):
    """A restored user object with a `__call__` child (a Keras model's traced call):
    calling it calls that function, as TF's loader makes such objects callable."""

    def __call__(self, *args, **kwargs):
        return self.__dict__["__call__"](*args, **kwargs)


class _RestoredAsset:
    """A restored `tf.saved_model.Asset`: `asset_path` is the file's path under the
    SavedModel's assets/ directory, a string constant in the default graph."""

    def __init__(self, path: str):
        self._path = path
        self._tensor = None

    @property
    def asset_path(self):
        if self._tensor is None:
            with ops.device("/device:CPU:0"):
                self._tensor = array_ops.constant(self._path, name="asset_path")
        return self._tensor


class _RestoredConstant:
    """A tensor a saved function captured by value (SavedConstant): the Const node of
    the meta graph's GraphDef it names, rebuilt in the default graph."""

    def __init__(self, node):
        self._node = node
        self._tensor = None

    @property
    def tensor(self):
        if self._tensor is None:
            value = make_ndarray(self._node.attr["value"].tensor)
            dtype = dtypes.as_dtype(self._node.attr["dtype"].type)
            self._tensor = array_ops.constant(value, dtype=dtype, name=self._node.name)
        return self._tensor


class _RestoredResource(_UserObject):
    """A restored resource (a lookup table, ...): its `_create_resource` function makes
    the handle; its `_initialize` function (captures: the resource, its assets) runs
    with the graph's table initializers, as TF's loader adds it in graph mode."""

    def __init__(self, device: str):
        self._resource_device = device
        self._resource_handle_value = None

    @property
    def resource_handle(self):
        if self._resource_handle_value is None:
            create = getattr(self, "_create_resource", None)
            if create is None:
                raise ValueError("load_v2: a saved resource has no _create_resource function")
            with ops.device(self._resource_device):
                self._resource_handle_value = create()
        return self._resource_handle_value

    def _restore(self):
        """The handle, and the initializer added to TABLE_INITIALIZERS."""
        handle = self.resource_handle
        init = getattr(self, "_initialize", None)
        if init is not None:
            with ops.device(self._resource_device):
                out = init()
            if out is not None:
                for t in nest.flatten(out):
                    ops.add_to_collection(ops.GraphKeys.TABLE_INITIALIZERS, t)
        return handle


class _SignatureMap(collections.abc.Mapping):
    """`.signatures`: signature key -> restored signature function."""

    def __init__(self):
        self._signatures: dict = {}

    def __getitem__(self, key):
        return self._signatures[key]

    def __iter__(self):
        return iter(self._signatures)

    def __len__(self):
        return len(self._signatures)

    def __repr__(self):
        return f"_SignatureMap({self._signatures!r})"


def _pack_outputs(structure, flat: list):
    """The call's flat outputs in the shape of `structure`, a composite's TypeSpec
    rebuilt from its components; a tensor takes its saved spec's static shape, as TF's
    call of a concrete function sets its outputs' shapes from the function's."""
    leaves, pos = [], 0
    for leaf in nest.flatten(structure):
        if isinstance(leaf, TypeSpec) and not isinstance(leaf, TensorSpec):
            n = len(_component_specs(leaf))
            leaves.append(_from_components(leaf, list(flat[pos : pos + n])))
            pos += n
        else:
            out = flat[pos]
            if isinstance(leaf, TensorSpec) and isinstance(out, ops.Tensor):
                if leaf.shape.is_compatible_with(out.shape):
                    out.set_shape(leaf.shape)
            leaves.append(out)
            pos += 1
    if pos != len(flat):
        raise ValueError(f"load_v2: the function returns {len(flat)} tensors, its outputs {pos}")
    return nest.pack_sequence_as(structure, leaves)


class _Loader:
    """The state of one load: the meta graph, the rebuilt nodes, and the call builder."""

    def __init__(self, export_dir, mg):
        self.export_dir = export_dir
        self.mg = mg
        self.proto = mg.object_graph_def
        self.library = mg.graph_def.library
        self.fdefs = {f.signature.name: f for f in self.library.function}
        self.keys = self._checkpoint_keys()
        self.nodes: list = [None] * len(self.proto.nodes)

    def _checkpoint_keys(self) -> dict:
        prefix = variables_prefix(self.export_dir)
        reader = checkpoint_utils.NewCheckpointReader(prefix)
        if not reader.has_tensor(_OBJECT_GRAPH_KEY):
            return {}
        raw = reader.get_tensor(_OBJECT_GRAPH_KEY)
        raw = raw.item() if hasattr(raw, "item") else raw
        graph = TrackableObjectGraph.FromString(raw)
        keys = {}
        for i, node in enumerate(graph.nodes):
            for attr in node.attributes:
                if attr.name == "VARIABLE_VALUE":
                    keys[i] = attr.checkpoint_key
        return keys

    def load(self):
        for i, node in enumerate(self.proto.nodes):
            self.nodes[i] = self._create(i, node)
        for i, node in enumerate(self.proto.nodes):
            obj = self.nodes[i]
            for child in node.children:
                value = self.nodes[child.node_id]
                if isinstance(obj, _SignatureMap):
                    obj._signatures[child.local_name] = value
                elif isinstance(obj, _UserObject):
                    setattr(obj, child.local_name, value)
                    if child.local_name == "__call__" and type(obj) is _UserObject:
                        obj.__class__ = _CallableUserObject
        for obj in self.nodes:
            if isinstance(obj, _RestoredResource):
                obj._restore()
        return self.nodes[0]

    def _create(self, i, node):
        kind = node.WhichOneof("kind")
        if kind == "user_object":
            if node.user_object.identifier == "signature_map":
                return _SignatureMap()
            return _UserObject()
        if kind == "variable":
            return self._variable(i, node.variable)
        if kind == "function":
            return RestoredFunction(self, node.function)
        if kind == "bare_concrete_function":
            return _WrapperFunction(self, node.bare_concrete_function)
        if kind == "asset":
            index = node.asset.asset_file_def_index
            if index >= len(self.mg.asset_file_def):
                raise ValueError(f"load_v2: asset node {i} names asset {index}, which is absent")
            name = self.mg.asset_file_def[index].filename
            return _RestoredAsset(os.path.join(self.export_dir, "assets", name))
        if kind == "constant":
            name = node.constant.operation
            found = [nd for nd in self.mg.graph_def.node if nd.name == name]
            if not found or found[0].op != "Const":
                raise ValueError(f"load_v2: constant node {i} names {name!r}, no Const there")
            return _RestoredConstant(found[0])
        if kind == "resource":
            return _RestoredResource(node.resource.device)
        # Other kinds (captured_tensor, a Keras layer's bookkeeping) load as plain
        # objects so that the rest of the model is still usable.
        return _UserObject()

    def _variable(self, i, saved):
        dtype = dtypes.as_dtype(saved.dtype)
        shape = tensor_shape.TensorShape(saved.shape)
        key = self.keys.get(i)
        prefix = variables_prefix(self.export_dir)
        if key is None:
            raise ValueError(
                f"load_v2: variable {saved.name!r} (node {i}) has no value in {prefix}"
            )

        def restored():
            with ops.device("/device:CPU:0"):
                return io_ops.restore_v2(
                    array_ops.constant(prefix),
                    array_ops.constant([key]),
                    array_ops.constant([""]),
                    [dtype],
                )[0]

        return ResourceVariable(
            initial_value=restored,
            trainable=saved.trainable,
            name=saved.name or None,
            dtype=dtype,
            shape=shape,
        )

    def call(self, fname: str, flat_args: list, bound_inputs) -> list:
        """Outputs of one call of library function `fname` on `flat_args` then the
        captured objects' handles."""
        fdef = self.fdefs[fname]
        captured = [self._handle(self.nodes[n]) for n in bound_inputs]
        inputs = list(flat_args) + captured
        sig = fdef.signature
        if len(inputs) != len(sig.input_arg):
            raise ValueError(
                f"load_v2: function {fname} takes {len(sig.input_arg)} inputs, {len(inputs)} given"
            )
        gd = GraphDef()
        gd.library.CopyFrom(self.library)
        gd.versions.CopyFrom(self.mg.graph_def.versions)
        input_map = {}
        for k, (arg, t) in enumerate(zip(sig.input_arg, inputs, strict=True)):
            ph = gd.node.add(name=f"input_{k}", op="Placeholder")
            ph.attr["dtype"].type = arg.type
            input_map[f"input_{k}:0"] = t
        call = gd.node.add(name="call", op="StatefulPartitionedCall")
        call.input.extend(f"input_{k}" for k in range(len(inputs)))
        call.attr["Tin"].list.type.extend(a.type for a in sig.input_arg)
        call.attr["Tout"].list.type.extend(a.type for a in sig.output_arg)
        call.attr["f"].func.name = fname
        for attr in ("config", "config_proto", "executor_type"):
            call.attr[attr].s = b""
        name = ops.get_default_graph().unique_name("StatefulPartitionedCall", mark_as_used=False)
        return graph_io.import_graph_def(
            gd,
            input_map=input_map,
            return_elements=[f"call:{k}" for k in range(len(sig.output_arg))],
            name=name,
        )

    @staticmethod
    def _handle(obj):
        if isinstance(obj, ResourceVariable):
            return obj.handle
        if isinstance(obj, _RestoredResource):
            return obj.resource_handle
        if isinstance(obj, _RestoredAsset):
            return obj.asset_path
        if isinstance(obj, _RestoredConstant):
            return obj.tensor
        raise ValueError(f"load_v2: a restored function captures a {type(obj).__name__}")


def _signature_text(specs: dict) -> str:
    return ", ".join(f"{k}: {v!r}" for k, v in specs.items())


def _to_tensor(value, spec):
    if isinstance(value, ops.Tensor):
        return value
    return ops.convert_to_tensor(value, dtype=spec.dtype if spec is not None else None)


def _flatten_up_to(specs, values) -> list:
    """(value, TensorSpec) pairs of `values` down to the TensorSpecs of `specs` (a
    Python list standing for one tensor stays whole); a Python value the trace was made
    with (an int, a string, None) must be given equal.

    Raises:
      ValueError: the structure or a Python value differs.
    """
    if isinstance(specs, TensorSpec):
        return [(values, specs)]
    if isinstance(specs, TypeSpec):  # (a composite: its components, each to fit)
        if not isinstance(values, specs.value_type):
            raise ValueError(f"a {type(values).__name__} given for {specs}")
        parts = nest.flatten(values, expand_composites=True)
        want = _component_specs(specs)
        if len(parts) != len(want):
            raise ValueError(f"a value of another structure given for {specs}")
        return list(zip(parts, want, strict=True))
    if isinstance(specs, dict):
        if not isinstance(values, dict) or set(values) != set(specs):
            raise ValueError("the arguments do not match the signature's structure")
        return [x for k in sorted(specs) for x in _flatten_up_to(specs[k], values[k])]
    if isinstance(specs, list | tuple):
        if not isinstance(values, list | tuple) or len(values) != len(specs):
            raise ValueError("the arguments do not match the signature's structure")
        return [x for s, v in zip(specs, values, strict=True) for x in _flatten_up_to(s, v)]
    if isinstance(values, ops.Tensor) or type(values) is not type(specs) or values != specs:
        raise ValueError("a Python argument differs from the trace's")
    return []


def _fits(tensor, spec) -> bool:
    return tensor.dtype.base_dtype == spec.dtype and spec.shape.is_compatible_with(tensor.shape)


class _ConcreteRestored:
    """One saved concrete function: its input signature, output structure, captures."""

    def __init__(self, loader, name):
        saved = loader.proto.concrete_functions[name]
        self.loader = loader
        self.name = name
        self.structured_input_signature = _structure(saved.canonicalized_input_signature)
        self.structured_outputs = _structure(saved.output_signature)
        self.bound_inputs = list(saved.bound_inputs)

    def call_flat(self, flat_args):
        outs = self.loader.call(self.name, flat_args, self.bound_inputs)
        if self.structured_outputs is None:
            return None
        return _pack_outputs(self.structured_outputs, outs)


class RestoredFunction:
    """A restored tf.function: called on graph tensors, it binds its arguments to the
    saved concrete function they fit."""

    def __init__(self, loader, saved):
        self._concrete = [_ConcreteRestored(loader, n) for n in saved.concrete_functions]
        spec = _structure(saved.function_spec.fullargspec) if saved.function_spec else None
        self._arg_names = list(spec.args) if spec is not None and spec.args else []
        defaults = list(spec.defaults) if spec is not None and spec.defaults else []
        if saved.function_spec.is_method and self._arg_names[:1] == ["self"]:
            self._arg_names = self._arg_names[1:]
        self._defaults = dict(
            zip(self._arg_names[len(self._arg_names) - len(defaults) :], defaults)
        )
        # Keyword-only arguments (Keras' `training` of a call whose layers take it): a
        # trace is chosen by their Python values, given or defaulted.
        self._kwonly = list(spec.kwonlyargs) if spec is not None and spec.kwonlyargs else []
        self._kwonly_defaults = (
            dict(spec.kwonlydefaults) if spec is not None and spec.kwonlydefaults else {}
        )
        kind = saved.function_spec.input_signature.WhichOneof("kind")
        self._has_signature = kind not in (None, "none_value")

    @property
    def concrete_functions(self) -> list:
        return list(self._concrete)

    def get_concrete_function(self, *args, **kwargs):
        if not args and not kwargs and len(self._concrete) == 1:
            return self._concrete[0]
        return self._bind(args, kwargs)[0]

    def _values(self, args, kwargs, pos_specs):
        """The arguments in the order of `pos_specs`, defaults filled in; None when they
        cannot fill it."""
        names = self._arg_names or [getattr(s, "name", None) for s in pos_specs]
        names = names[: len(pos_specs)]
        if len(args) > len(names) or any(k not in names[len(args) :] for k in kwargs):
            return None
        values = list(args)
        for name in names[len(args) :]:
            if name in kwargs:
                values.append(kwargs[name])
            elif name in self._defaults:
                values.append(self._defaults[name])
            else:
                return None
        return values

    def _keywords_fit(self, kw_specs, given) -> bool:
        """Whether a trace's Python keyword values are those given (or defaulted)."""
        for key, spec in (kw_specs or {}).items():
            if key not in self._kwonly or isinstance(spec, TypeSpec | TensorSpec):
                continue
            value = given.get(key, self._kwonly_defaults.get(key))
            if not isinstance(value, bool | int | float | str | None) or value != spec:
                return False
        return True

    def _bind(self, args, kwargs):
        given = {k: v for k, v in kwargs.items() if k in self._kwonly}
        kwargs = {k: v for k, v in kwargs.items() if k not in self._kwonly}
        for concrete in self._concrete:
            pos_specs, kw_specs = concrete.structured_input_signature
            if not self._keywords_fit(kw_specs, given):
                continue
            values = self._values(args, kwargs, pos_specs)
            if values is None:
                continue
            try:
                pairs = _flatten_up_to(pos_specs, values)
                flat = [_to_tensor(v, s) for v, s in pairs]
            except (TypeError, ValueError):
                continue
            if all(_fits(t, s) for t, (_, s) in zip(flat, pairs, strict=True)):
                return concrete, flat
        self._raise_binding(args, kwargs)

    def _raise_binding(self, args, kwargs):
        if not self._concrete:
            raise ValueError("Found zero restored functions for caller function.")
        if not self._has_signature:
            self._raise_no_match(args, kwargs)
        concrete = self._concrete[0]
        pos_specs, _ = concrete.structured_input_signature
        names = self._arg_names or [getattr(s, "name", None) for s in pos_specs]
        specs = dict(zip(names, pos_specs, strict=False))
        given = list(args) + [kwargs[n] for n in names[len(args) :] if n in kwargs]
        reason = "the arguments do not match the signature"
        for name, value in zip(names, given, strict=False):
            spec = specs[name]
            if (
                isinstance(spec, TensorSpec)
                and isinstance(value, ops.Tensor)
                and not _fits(value, spec)
            ):
                got = TensorSpec(value.shape, value.dtype.base_dtype, name)
                reason = f"Can not cast {got!r} to {spec!r}"
                break
            if isinstance(spec, TypeSpec) and isinstance(value, spec.value_type):
                # (a composite: the first component that does not fit, as TF says it)
                parts = nest.flatten(value, expand_composites=True)
                bad = [
                    (t, want)
                    for t, want in zip(parts, _component_specs(spec), strict=False)
                    if not _fits(t, want)
                ]
                if bad:
                    t, want = bad[0]
                    got = TensorSpec(t.shape, t.dtype.base_dtype)
                    reason = f"Can not cast {got!r} to {want!r}"
                    break
        raise TypeError(
            f"Binding inputs to tf.function failed due to `{reason}`. Received args: "
            f"{tuple(args)!r} and kwargs: {kwargs!r} for signature: ({_signature_text(specs)})."
        )

    def _raise_no_match(self, args, kwargs):
        """TF's ValueError for a function saved without an input_signature: what was
        given (defaults filled in) and each trace's arguments."""

        def describe(positional, keywords) -> str:
            lines = [f"  Positional arguments ({len(positional)} total):"]
            lines += [f"    * {v!r}" for v in positional]
            lines.append(f"  Keyword arguments: {keywords!r}")
            return "\n".join(lines)

        given = self._values(args, kwargs, self._arg_names) if self._arg_names else None
        got = describe(given, {}) if given is not None else describe(list(args), kwargs)
        options = [
            f"Option {k}:\n" + describe(list(c.structured_input_signature[0]), {})
            for k, c in enumerate(self._concrete, 1)
        ]
        raise ValueError(
            "Could not find matching concrete function to call loaded from the SavedModel. "
            f"Got:\n{got}\n\n Expected these arguments to match one of the following "
            f"{len(options)} option(s):\n\n" + "\n\n".join(options)
        )

    def __call__(self, *args, **kwargs):
        concrete, flat = self._bind(args, kwargs)
        return concrete.call_flat(flat)


class _WrapperFunction:
    """A restored signature: keyword arguments (positional in keyword order) in, a dict
    of output tensors out."""

    def __init__(self, loader, saved):
        self._concrete = _ConcreteRestored(loader, saved.concrete_function_name)
        self._keywords = list(saved.argument_keywords)

    structured_input_signature = property(lambda self: self._concrete.structured_input_signature)
    structured_outputs = property(lambda self: self._concrete.structured_outputs)

    def __call__(self, *args, **kwargs):
        _, kw_specs = self._concrete.structured_input_signature
        if len(args) > len(self._keywords):
            raise TypeError(
                f"signature function takes {len(self._keywords)} arguments, {len(args)} given"
            )
        bound = dict(zip(self._keywords, args, strict=False))
        for key, value in kwargs.items():
            if key not in self._keywords or key in bound:
                raise TypeError(f"signature function got an unexpected keyword argument {key!r}")
            bound[key] = value
        missing = [k for k in self._keywords if k not in bound]
        if missing:
            raise TypeError(f"signature function missing required arguments: {missing}")
        flat = []
        for key in self._keywords:
            spec = kw_specs[key]
            t = _to_tensor(bound[key], spec)
            if not _fits(t, spec):
                raise TypeError(
                    f"signature function argument {key!r}: {TensorSpec(t.shape, t.dtype, key)!r} "
                    f"does not fit {spec!r}"
                )
            flat.append(t)
        return self._concrete.call_flat(flat)


def _meta_graph(saved_model, tags, export_dir):
    graphs = list(saved_model.meta_graphs)
    if tags is None:
        if len(graphs) == 1:
            return graphs[0]
        tags = ["serve"]
    tags = [tags] if isinstance(tags, str) else list(tags)
    for mg in graphs:
        if set(mg.meta_info_def.tags) == set(tags):
            return mg
    if not any(mg.HasField("object_graph_def") for mg in graphs):
        # TF hands a TF1 SavedModel to its TF1 loader, whose error this is.
        available = [set(mg.meta_info_def.tags) for mg in graphs]
        raise RuntimeError(
            f"MetaGraphDef associated with tags {str(tags).strip('[]')} could not be found in "
            f"SavedModel, with available tags '{available}'. To inspect available tag-sets "
            "in the SavedModel, please use the SavedModel CLI: `saved_model_cli`."
        )
    if len(graphs) == 1:
        raise ValueError(
            f"Got an incompatible argument to `tags`: {tags}. The SavedModel at {export_dir} "
            f"has one MetaGraph with tags {list(graphs[0].meta_info_def.tags)}. You may omit "
            "the argument, pass 'None', or pass matching tags."
        )
    raise ValueError(
        f"Got an incompatible argument to `tags`: {tags}. The SavedModel at {export_dir} "
        f"has {len(graphs)} MetaGraphs. Pass matching tags."
    )


def load_v2(export_dir, tags=None, options=None):
    """The object a TF 2 SavedModel at `export_dir` saved, rebuilt in the default graph:
    its children as attributes, variables restored by the initializers, tf.functions and
    `.signatures` callable on graph tensors.  `options` (a LoadOptions) is accepted for
    TF's signature.

    Raises:
      OSError: no SavedModel at export_dir.
      ValueError: `tags` match none of a TF 2 SavedModel's meta graphs.
      RuntimeError: `tags` match none of a TF1 SavedModel's meta graphs.
    """
    del options
    export_dir = os.fsdecode(export_dir)
    mg = _meta_graph(read_saved_model(export_dir), tags, export_dir)
    if not mg.HasField("object_graph_def"):
        return _load_v1(export_dir, mg)
    root = _Loader(export_dir, mg).load()
    if isinstance(root, _UserObject):
        root.tensorflow_version = mg.meta_info_def.tensorflow_version
        root.tensorflow_git_version = mg.meta_info_def.tensorflow_git_version
        info = GraphDebugInfo()
        path = os.path.join(export_dir, _DEBUG_INFO)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                info.ParseFromString(f.read())
        root.graph_debug_info = info
    return root


class AutoTrackable:
    """A TF1 SavedModel loaded by load_v2: `.variables` and `.signatures`."""


def _variable_defs(mg) -> dict:
    """Variable op name -> VariableDef, from the "variables" and "trainable_variables"
    collections."""
    out = {}
    for key in ("variables", "trainable_variables"):
        if key in mg.collection_def:
            for raw in mg.collection_def[key].bytes_list.value:
                vdef = VariableDef.FromString(raw)
                out[vdef.variable_name.split(":")[0]] = vdef
    return out


def _needed(gd, outputs: list, stops: set) -> list:
    """The nodes of `gd` that `outputs` (node names) depend on, not looking past
    `stops` (mapped-in nodes, kept themselves)."""
    by_name = {nd.name: nd for nd in gd.node}
    keep, todo = set(), list(outputs)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        if name in stops:
            continue
        for ref in by_name[name].input:
            todo.append(ref.lstrip("^").split(":")[0])
    return [nd for nd in gd.node if nd.name in keep]


class _V1Signature:
    """A TF1 signature callable on graph tensors: keyword arguments in (positional in
    the order of the signature's input keys), a dict of tensors out."""

    def __init__(self, mg, sig, handles: dict):
        self._mg = mg
        self._sig = sig
        self._handles = handles
        self._keys = sorted(sig.inputs)

    def __call__(self, *args, **kwargs):
        bound = dict(zip(self._keys, args, strict=False))
        for key, value in kwargs.items():
            if key not in self._sig.inputs or key in bound:
                raise TypeError(f"signature function got an unexpected keyword argument {key!r}")
            bound[key] = value
        missing = [k for k in self._keys if k not in bound]
        if missing:
            raise TypeError(f"signature function missing required arguments: {missing}")
        input_map = {}
        for key, value in bound.items():
            info = self._sig.inputs[key]
            input_map[info.name] = ops.convert_to_tensor(value, dtype=dtypes.as_dtype(info.dtype))
        out_keys = sorted(self._sig.outputs)
        names = [self._sig.outputs[k].name for k in out_keys]
        stops = {n.split(":")[0] for n in input_map} | set(self._handles)
        gd = GraphDef()
        gd.versions.CopyFrom(self._mg.graph_def.versions)
        gd.library.CopyFrom(self._mg.graph_def.library)
        kept = _needed(self._mg.graph_def, [n.split(":")[0] for n in names], stops)
        gd.node.extend(kept)
        present = {nd.name for nd in kept}
        for op_name, var in self._handles.items():
            if op_name in present:
                input_map[op_name + ":0"] = var.handle
        input_map = {k: v for k, v in input_map.items() if k.split(":")[0] in present}
        name = ops.get_default_graph().unique_name("StatefulPartitionedCall", mark_as_used=False)
        outs = graph_io.import_graph_def(gd, input_map=input_map, return_elements=names, name=name)
        return dict(zip(out_keys, outs, strict=True))


def _load_v1(export_dir, mg):
    prefix = variables_prefix(export_dir)
    reader = None
    handles = {}
    vdefs = _variable_defs(mg)
    for nd in mg.graph_def.node:
        if nd.op != "VarHandleOp":
            continue
        if reader is None:
            reader = checkpoint_utils.NewCheckpointReader(prefix)
        if not reader.has_tensor(nd.name):
            continue
        dtype = dtypes.as_dtype(nd.attr["dtype"].type)
        vdef = vdefs.get(nd.name)

        def restored(key=nd.name, dtype=dtype):
            with ops.device("/device:CPU:0"):
                return io_ops.restore_v2(
                    array_ops.constant(prefix),
                    array_ops.constant([key]),
                    array_ops.constant([""]),
                    [dtype],
                )[0]

        handles[nd.name] = ResourceVariable(
            initial_value=restored,
            trainable=vdef.trainable if vdef is not None else True,
            name=nd.name,
            dtype=dtype,
            shape=tensor_shape.TensorShape(nd.attr["shape"].shape),
        )
    root = AutoTrackable()
    root.variables = list(handles.values())
    signatures = _SignatureMap()
    for key, sig in mg.signature_def.items():
        if key.startswith("__saved_model"):
            continue  # (the init op's, not a callable signature)
        signatures._signatures[key] = _V1Signature(mg, sig, handles)
    root.signatures = signatures
    root.tensorflow_version = mg.meta_info_def.tensorflow_version
    root.tensorflow_git_version = mg.meta_info_def.tensorflow_git_version
    return root
