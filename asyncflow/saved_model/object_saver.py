"""`tf.saved_model.save` in graph mode: a tf.Module as a TF 2 (object-based) SavedModel.

What is written is what TF 2's loaders read (object_loader.py reads it back):

- saved_model.pb: one meta graph tagged "serve" whose GraphDef holds a VarHandleOp per
  variable and, per signature, Placeholders "<key>_<arg>" feeding a
  StatefulPartitionedCall of the signature's function; its library holds a FunctionDef
  per traced tf.function (tf_function_export writes them) and one per signature (the
  same body, its outputs named and ordered by the signature's output keys); its
  SavedObjectGraph lists the objects: node 0 the root, then, breadth first, each
  object's trackable children (modules, variables), its tf.functions (attribute name
  order), and under the root "signatures";
- fingerprint.pb: the hashes TF 2.21 computes of the rest (saved_model/fingerprinting.py);
- variables/variables: a V2 bundle written by SaveV2 in the default session, keyed by
  object path ("inner/w/.ATTRIBUTES/VARIABLE_VALUE") with the TrackableObjectGraph of
  the same nodes under "_CHECKPOINTABLE_OBJECT_GRAPH" (both graphs number nodes alike).

A lookup table (StaticHashTable, StaticVocabularyTable) is a resource node whose
`_create_resource`, `_initialize` and `_destroy_resource` functions TF's loaders call;
its vocabulary file is an asset, copied into assets/ and fed (asset_file_def) to the
table's initializer call, which the init op ("__saved_model_init_op") runs for TF1's
loader.  A Const a function captures (a table's default value, its keys) is a
SavedConstant beside a Const node of the same value.  A signature's FunctionDef takes
its keyword arguments sorted, as TF's loaders flatten them.

A tf.function is saved with its traces (its input_signature's when it has one); one
never traced is saved with none, as TF saves it (calling it after loading fails).  A
function may capture only variables of the saved object (their handles become the
function's last inputs, `bound_inputs`).  Without `signatures`, a root with exactly
one input-signature tf.function gets it as "serving_default", as TF's save does.

Composite tensors (RaggedTensor, SparseTensor, IndexedSlices) are saved as TF saves
them: a function's input_signature, canonicalized input signature and output signature
hold their TypeSpecProtos (TF's type_spec_class, the spec's `_serialize()` tuple as its
type_state, the number of component tensors); a signature takes a composite argument as
one keyword per component ("x", "x_1", ...: the trace's placeholders), and returns a
composite as its components, its SignatureDef output a coo_sparse (a SparseTensor) or
a composite_tensor (its TypeSpec and components).  An ExtensionType's spec is refused
as TF 2.21 refuses one that is not registered (NotEncodableError).

The meta graph's saver_def names plain ops beside the variables ("saver/..."; TF 2
writes functions there) that save and restore the same keys, so that TF1's
`tf.saved_model.loader.load` (TF's, TF Serving's, asyncflow's) restores the variables too.
"""

from __future__ import annotations

import collections
import inspect
import os
import shutil

from asyncflow import dtypes, errors, nest, tensor_shape, trackable
from asyncflow import graph as ops
from asyncflow.composite_specs import IndexedSlicesSpec, type_spec_from_value
from asyncflow.framework_extras import TensorSpec, make_ndarray, make_tensor_proto
from asyncflow.graph_io import GRAPH_DEF_VERSION
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.meta_graph import (
    TENSORFLOW_VERSION,
    strip_graph_default_valued_attrs,
    stripped_op_list_for_graph,
)
from asyncflow.ops import array_ops, io_ops
from asyncflow.protos import saved_object_graph_pb2 as sog
from asyncflow.protos.saved_model_pb2 import SavedModel
from asyncflow.protos.trackable_object_graph_pb2 import TrackableObjectGraph
from asyncflow.resource_variable import ResourceVariable
from asyncflow.saved_model import fingerprinting
from asyncflow.saved_model.builder import INIT_OP_SIGNATURE_KEY
from asyncflow.saved_model.nested_structure import encode as _value
from asyncflow.saved_model.nested_structure import encode_type_spec as _type_spec
from asyncflow.saved_model.save_options import Asset
from asyncflow.sparse_tensor import SparseTensor
from asyncflow.tf_function import ConcreteFunction, Function, _component_specs
from asyncflow.tf_function_export import _function_def
from asyncflow.type_spec import TypeSpec

__all__ = ["save"]

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_SERVING_DEFAULT = "serving_default"
_PREDICT = "tensorflow/serving/predict"


def _functions_of(obj, with_signature=False) -> list:
    """(attribute name, bound tf.function) of `obj`'s class and instance, by name; only
    those with an input_signature when `with_signature`."""
    names = {n for c in type(obj).__mro__ for n, v in vars(c).items() if isinstance(v, Function)}
    names |= {n for n, v in getattr(obj, "__dict__", {}).items() if isinstance(v, Function)}
    out = []
    for name in sorted(names):
        fn = getattr(obj, name)
        if not with_signature or fn.input_signature is not None:
            out.append((name, fn))
    return out


def _traces(fn) -> list:
    """The concrete functions saved for `fn`: its traces, or its input_signature's."""
    if not fn._traces and fn.input_signature is not None:
        fn.get_concrete_function()
    return list(fn._traces)


def _argspec(fn):
    params = list(inspect.signature(fn.python_function).parameters.values())
    args = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    defaults = [p.default for p in params if p.name in args and p.default is not p.empty]
    kwonly = [p.name for p in params if p.kind == p.KEYWORD_ONLY]
    return _FullArgSpec(
        args,
        next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None),
        next((p.name for p in params if p.kind == p.VAR_KEYWORD), None),
        tuple(defaults) if defaults else None,
        kwonly,
        None,
        {},
    )


_FullArgSpec = collections.namedtuple(
    "FullArgSpec",
    ["args", "varargs", "varkw", "defaults", "kwonlyargs", "kwonlydefaults", "annotations"],
)


def _fullargspec(args, kwonly=()) -> _FullArgSpec:
    return _FullArgSpec(list(args), None, None, None, list(kwonly), None, {})


def _output_spec(t, name):
    """A result's spec: a tensor's TensorSpec named `name`, a composite's TypeSpec."""
    if nest.is_composite(t):
        return type_spec_from_value(t)
    return TensorSpec(t.shape, t.dtype.base_dtype, name)


def _signature_output_spec(t, name):
    """A signature result's spec, as TF's wrapper, which calls the function, sees it: an
    IndexedSlices' dense shape is then a tensor of unknown value (its rank known); a
    SparseTensor and a RaggedTensor keep their shapes."""
    if isinstance(t, IndexedSlices) and t.dense_shape is not None:
        spec = type_spec_from_value(t)
        shape, values_dtype, indices_dtype, dense_dtype, indices_shape = spec._serialize()
        rank = t.dense_shape.shape[0].value if t.dense_shape.shape.rank == 1 else None
        shape = tensor_shape.unknown_shape(rank)
        return IndexedSlicesSpec(shape, values_dtype, indices_dtype, dense_dtype, indices_shape)
    return _output_spec(t, name)


def _is_resource(obj) -> bool:
    """A tracked resource (a lookup table): saved with its creator, initializer and
    destroyer functions."""
    return hasattr(obj, "_resource_functions") and not isinstance(obj, Function)


class _Constant:
    """A Const tensor a saved function captures: a SavedConstant node and a Const node of
    the same value in the saved graph."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.name = None  # its Const node's name in the saved GraphDef


class _Saver:
    def __init__(self, root, signatures, children=None, identifier=None, slots=None):
        self.root = root
        # (Keras' hooks: a SavedModel's extra children, its objects' identifiers, an
        # optimizer's slot variables)
        self._children_of = children or trackable.children_of
        self._identifier = identifier or (lambda obj: "_generic_user_object")
        self._slots_of = slots or (lambda obj: [])
        self.slot_refs: dict = {}  # node id -> [(original id, slot name, slot id)]
        self.objects: list = []  # (object, kind) by node id
        self.children: list = []  # node id -> [(local name, node id)]
        self.paths: list = []  # node id -> object path ("" for the root)
        self.ids: dict = {}
        self.functions: dict = {}  # node id -> (attribute name, Function)
        # (TF checks the signatures first)
        self.signatures = self._signatures(signatures)
        self._walk()
        self._add_slots()
        self.assets = [o for o in self.objects if isinstance(o, Asset)]
        self._add_constants()
        self.library: list = []
        self.concrete: dict = {}  # function name -> SavedConcreteFunction
        self._count = 0

    def _add(self, obj, path) -> int:
        key = id(obj)
        if key in self.ids:
            return self.ids[key]
        self.ids[key] = len(self.objects)
        self.objects.append(obj)
        self.children.append([])
        self.paths.append(path)
        return self.ids[key]

    def _walk(self) -> None:
        self._add(self.root, "")
        queue = collections.deque([0])
        while queue:
            i = queue.popleft()
            obj = self.objects[i]
            if isinstance(obj, Function):
                continue
            prefix = self.paths[i] + "/" if self.paths[i] else ""
            named = list(self._children_of(obj)) + _functions_of(obj)
            if _is_resource(obj):
                named += obj._resource_functions()
            for name, child in named:
                if trackable.is_variable(child) and not isinstance(child, ResourceVariable):
                    raise TypeError(
                        f"save: variable {child.name} is not a resource variable; create it "
                        "with use_resource=True (a TF 2 SavedModel holds resource variables)"
                    )
                seen = id(child) in self.ids
                j = self._add(child, prefix + trackable.escape_local_name(name))
                self.children[i].append((name, j))
                if not seen:
                    queue.append(j)

    def _add_slots(self) -> None:
        """Nodes for the optimizers' slot variables of saved variables, after the walk's
        (as TF numbers them), keyed "<variable>/.OPTIMIZER_SLOT/<optimizer>/<slot>"."""
        for i in range(len(self.objects)):
            for slot_name, var, slot in self._slots_of(self.objects[i]):
                if id(var) not in self.ids or id(slot) in self.ids:
                    continue
                vid = self.ids[id(var)]
                path = (
                    f"{self.paths[vid]}/.OPTIMIZER_SLOT/{self.paths[i]}/"
                    + trackable.escape_local_name(slot_name)
                )
                sid = self._add(slot, path)
                self.slot_refs.setdefault(i, []).append((vid, slot_name, sid))

    def _signatures(self, signatures) -> dict:
        if signatures is None:
            fns = _functions_of(self.root, with_signature=True)
            signatures = {_SERVING_DEFAULT: fns[0][1]} if len(fns) == 1 else {}
        elif not isinstance(signatures, dict):
            signatures = {_SERVING_DEFAULT: signatures}
        out = {}
        for key, fn in signatures.items():
            if isinstance(fn, Function) and getattr(fn, "_input_signature", None) is not None:
                fn = fn.get_concrete_function()
            if not isinstance(fn, ConcreteFunction):
                raise ValueError(
                    "Expected a TensorFlow function for which to generate a signature, but "
                    f"got {fn}. Only `tf.functions` with an input signature or concrete "
                    "functions can be used as a signature."
                )
            out[key] = fn
        return out

    def _captures(self) -> dict:
        """id of a tensor a function may capture -> the node that stands for it."""
        out = {}
        for i, obj in enumerate(self.objects):
            if isinstance(obj, ResourceVariable):
                out[id(obj.handle)] = i
            elif _is_resource(obj):
                out[id(obj.resource_handle)] = i
            elif isinstance(obj, Asset):
                out[id(obj.asset_path)] = i
            elif isinstance(obj, _Constant):
                out[id(obj.tensor)] = i
        return out

    def _add_constants(self) -> None:
        """A node for each Const tensor a saved function captures (after the walk's
        nodes, so that their ids stand)."""
        concretes = [c for o in self.objects if isinstance(o, Function) for c in _traces(o)]
        concretes += list(self.signatures.values())
        known = self._captures()
        for concrete in concretes:
            for t in concrete.captured_inputs:
                if id(t) in known:
                    continue
                if t.op.type != "Const":
                    raise ValueError(
                        f"save: {concrete.name} captures {t.name}, which is not a variable, "
                        "table, asset or constant of the saved object"
                    )
                known[id(t)] = self._add(_Constant(t), "")

    def _bound_inputs(self, concrete) -> list:
        handles = self._captures()
        bound = []
        for t in concrete.captured_inputs:
            if id(t) not in handles:
                raise ValueError(
                    f"save: {concrete.name} captures {t.name}, which is not a variable of "
                    "the saved object"
                )
            bound.append(handles[id(t)])
        return bound

    def _name(self, base: str) -> str:
        self._count += 1
        return f"__inference_{base}_{self._count}"

    def _const_name(self) -> str:
        """TF's name for a saved constant: the first free `Const`, `Const_1`, ..."""
        taken = {o.name for o in self.objects if isinstance(o, _Constant)}
        taken |= {o.op.name for o in self.objects if isinstance(o, ResourceVariable)}
        name, k = "Const", 0
        while name in taken:
            k += 1
            name = f"Const_{k}"
        return name

    def function_node(self, name, fn, saved) -> None:
        for concrete in _traces(fn):
            fname = self._name(name)
            self.library.append(_function_def(concrete.graph, fname))
            entry = self.concrete[fname] = sog.SavedConcreteFunction()
            entry.bound_inputs.extend(self._bound_inputs(concrete))
            _value(entry.canonicalized_input_signature, concrete.structured_input_signature)
            _value(
                entry.output_signature,
                nest.map_structure(
                    lambda t: _output_spec(t, "unknown"), concrete.structured_outputs
                ),
            )
            saved.concrete_functions.append(fname)
        _value(saved.function_spec.fullargspec, _argspec(fn))
        saved.function_spec.is_method = False
        if fn.input_signature is None:
            _value(saved.function_spec.input_signature, None)
        else:
            _value(saved.function_spec.input_signature, tuple(fn.input_signature))

    def signature_node(self, key, concrete, saved) -> tuple:
        """The signature's FunctionDef (returned with its keywords and output keys).

        A composite argument (a RaggedTensorSpec, SparseTensorSpec...) becomes one
        keyword per component tensor, named as the trace's placeholders ("x", "x_1",
        ...: TF's), and a composite result leaves as its components, rebuilt from the
        output_signature's TypeSpec by the loaders."""
        specs = concrete.structured_input_signature[0]
        if concrete.structured_input_signature[1]:
            raise ValueError(f"save: signature {key!r} takes keyword-only arguments")
        keywords, specs = self._signature_keywords(concrete, specs)
        outputs = concrete.structured_outputs
        if isinstance(outputs, ops.Tensor) or nest.is_composite(outputs):
            named = {"output_0": outputs}
        elif isinstance(outputs, dict):
            named = dict(outputs)
        elif isinstance(outputs, list | tuple):
            named = {f"output_{k}": t for k, t in enumerate(outputs)}
        else:
            raise ValueError(f"save: signature {key!r} returns {outputs!r}, not tensors")
        if not all(isinstance(t, ops.Tensor) or nest.is_composite(t) for t in named.values()):
            raise ValueError(f"save: signature {key!r} must return tensors")
        flat = nest.flatten(outputs, expand_composites=True)
        fname = self._name("signature_wrapper")
        fdef = _function_def(concrete.graph, fname)
        # A signature's arguments are keywords, flattened in sorted order (as a dict is)
        # by every loader: the wrapper takes them so, its captures after them.
        ranked = sorted(range(len(keywords)), key=lambda k: keywords[k])
        in_args = list(fdef.signature.input_arg)
        del fdef.signature.input_arg[:]
        fdef.signature.input_arg.extend([in_args[k] for k in ranked] + in_args[len(keywords) :])
        specs = [specs[k] for k in ranked]
        keywords = [keywords[k] for k in ranked]
        order = sorted(named)
        position = {id(t): k for k, t in enumerate(flat)}
        args = list(fdef.signature.output_arg)
        rets = dict(fdef.ret)
        del fdef.signature.output_arg[:]
        fdef.ClearField("ret")
        parts = [t for out_key in order for t in nest.flatten(named[out_key], True)]
        for k, t in enumerate(parts):
            src = args[position[id(t)]]
            arg = fdef.signature.output_arg.add(name=f"identity_{k}" if k else "identity")
            arg.type = src.type
            fdef.ret[arg.name] = rets[src.name]
        self.library.append(fdef)
        entry = self.concrete[fname] = sog.SavedConcreteFunction()
        entry.bound_inputs.extend(self._bound_inputs(concrete))
        in_specs = {
            kw: TensorSpec(s.shape, s.dtype, kw) for kw, s in zip(keywords, specs, strict=True)
        }
        _value(entry.canonicalized_input_signature, ((), in_specs))
        out_specs = {k: _signature_output_spec(t, k) for k, t in named.items()}
        _value(entry.output_signature, out_specs)
        saved.concrete_function_name = fname
        saved.argument_keywords.extend(keywords)
        saved.allowed_positional_arguments = len(keywords)
        _value(saved.function_spec.fullargspec, _fullargspec([], keywords))
        _value(saved.function_spec.input_signature, None)
        return fdef, keywords, order, [named[k] for k in order], in_specs, entry.bound_inputs

    @staticmethod
    def _signature_keywords(concrete, specs) -> tuple:
        """(keyword, TensorSpec) of each flat input of a signature's function: a
        TensorSpec argument's name (else "arg_<k>"), a composite's component placeholders'
        names."""
        keywords, flat_specs = [], []
        inputs = iter(concrete.graph.inputs)
        for k, spec in enumerate(nest.flatten(list(specs))):
            if isinstance(spec, TensorSpec):
                next(inputs)
                keywords.append(spec.name or f"arg_{k}")
                flat_specs.append(spec)
            elif isinstance(spec, TypeSpec):
                for _ in _component_specs(spec):
                    t = next(inputs)
                    keywords.append(t.op.name)
                    flat_specs.append(TensorSpec(t.shape, t.dtype.base_dtype))
        return keywords, flat_specs

    def build(self):
        """(SavedObjectGraph, TrackableObjectGraph, MetaGraphDef pieces)."""
        graph = sog.SavedObjectGraph()
        ckpt = TrackableObjectGraph()
        for i, obj in enumerate(self.objects):
            node = graph.nodes.add()
            cnode = ckpt.nodes.add()
            for name, j in self.children[i]:
                node.children.add(node_id=j, local_name=name)
                cnode.children.add(node_id=j, local_name=name)
            for vid, slot_name, sid in self.slot_refs.get(i, ()):
                for n in (node, cnode):
                    n.slot_variables.add(
                        original_variable_node_id=vid, slot_name=slot_name,
                        slot_variable_node_id=sid,
                    )  # fmt: skip
            if isinstance(obj, ResourceVariable):
                var = node.variable
                var.dtype = obj.dtype.base_dtype.as_datatype_enum
                var.shape.CopyFrom(obj.shape.as_proto())
                var.trainable = obj.trainable
                var.name = obj.op.name
                attr = cnode.attributes.add(name="VARIABLE_VALUE", full_name=obj.op.name)
                attr.checkpoint_key = f"{self.paths[i]}/.ATTRIBUTES/VARIABLE_VALUE"
            elif isinstance(obj, Function):
                parent = self.paths[i].rsplit("/", 1)[-1]
                self.function_node(parent, obj, node.function)
            elif _is_resource(obj):
                node.resource.SetInParent()
            elif isinstance(obj, Asset):
                node.asset.asset_file_def_index = self.assets.index(obj)
            elif isinstance(obj, _Constant):
                node.constant.operation = obj.name = self._const_name()
            else:
                node.user_object.identifier = self._identifier(obj)
                node.user_object.version.producer = 1
                node.user_object.version.min_consumer = 1
        # The signature map and its functions, after the objects (so that the walk's ids
        # stand), as children of the root.
        sig_map = len(graph.nodes)
        graph.nodes[0].children.add(node_id=sig_map, local_name="signatures")
        ckpt.nodes[0].children.add(node_id=sig_map, local_name="signatures")
        node = graph.nodes.add()
        ckpt.nodes.add()
        node.user_object.identifier = "signature_map"
        node.user_object.version.producer = 1
        node.user_object.version.min_consumer = 1
        built = {}
        for key in sorted(self.signatures):
            j = len(graph.nodes)
            graph.nodes[sig_map].children.add(node_id=j, local_name=key)
            ckpt.nodes[sig_map].children.add(node_id=j, local_name=key)
            sig_node = graph.nodes.add()
            ckpt.nodes.add()
            built[key] = self.signature_node(
                key, self.signatures[key], sig_node.bare_concrete_function
            )
        for fname, entry in self.concrete.items():
            graph.concrete_functions[fname].CopyFrom(entry)
        return graph, ckpt, built


def _node(gd, name, op, inputs=(), dtype=None, shape=None, **strings):
    nd = gd.node.add(name=name, op=op)
    nd.input.extend(inputs)
    if dtype is not None:
        nd.attr["dtype"].type = dtype.as_datatype_enum
    if shape is not None:
        nd.attr["shape"].shape.CopyFrom(shape.as_proto())
    for key, value in strings.items():
        nd.attr[key].s = value.encode()
    return nd


def _const(gd, name, values, dtype):
    nd = _node(gd, name, "Const", dtype=dtype)
    nd.attr["value"].tensor.CopyFrom(make_tensor_proto(values, dtype=dtype))
    return nd


def _saver_ops(saver: _Saver, mg, handles: dict) -> None:
    """Plain save and restore ops of the variables' checkpoint keys, and the saver_def
    naming them."""
    gd = mg.graph_def
    variables = [(i, o) for i, o in enumerate(saver.objects) if isinstance(o, ResourceVariable)]
    keys = [f"{saver.paths[i]}/.ATTRIBUTES/VARIABLE_VALUE" for i, _ in variables]
    types = [v.dtype.base_dtype.as_datatype_enum for _, v in variables]
    scalar = tensor_shape.TensorShape([])
    _node(gd, "saver_filename", "Placeholder", dtype=dtypes.string, shape=scalar)
    if variables:
        _const(gd, "saver/tensor_names", keys, dtypes.string)
        _const(gd, "saver/shape_and_slices", [""] * len(keys), dtypes.string)
        reads = []
        for k, (i, _) in enumerate(variables):
            nd = _node(gd, f"saver/read_{k}", "ReadVariableOp", [handles[i]])
            nd.attr["dtype"].type = types[k]
            reads.append(nd.name)
        nd = _node(
            gd,
            "saver/SaveV2",
            "SaveV2",
            ["saver_filename", "saver/tensor_names", "saver/shape_and_slices", *reads],
        )
        nd.attr["dtypes"].list.type.extend(types)
        nd = _node(
            gd, "saver/RestoreV2", "RestoreV2",
            ["saver_filename", "saver/tensor_names", "saver/shape_and_slices"],
        )  # fmt: skip
        nd.attr["dtypes"].list.type.extend(types)
        assigns = []
        for k, (i, _) in enumerate(variables):
            nd = _node(
                gd, f"saver/AssignVariableOp_{k}", "AssignVariableOp",
                [handles[i], f"saver/RestoreV2:{k}"],
            )  # fmt: skip
            nd.attr["dtype"].type = types[k]
            assigns.append("^" + nd.name)
        done = ["^saver/SaveV2"]
    else:
        assigns, done = [], []
    nd = _node(gd, "saver/Identity", "Identity", ["saver_filename", *done])
    nd.attr["T"].type = dtypes.string.as_datatype_enum
    _node(gd, "saver/restore_all", "NoOp", assigns)
    sd = mg.saver_def
    sd.filename_tensor_name = "saver_filename:0"
    sd.save_tensor_name = "saver/Identity:0"
    sd.restore_op_name = "saver/restore_all"
    sd.max_to_keep = 5
    sd.keep_checkpoint_every_n_hours = 10000.0
    sd.version = sd.V2


def _asset_names(saver: _Saver, session) -> list:
    """(source path, file name under assets/) of each asset, in asset_file_def order."""
    out, taken = [], {}
    for asset in saver.assets:
        t = asset.asset_path
        if t.op.type == "Const":
            path = make_ndarray(t.op.get_attr("value")).item()
        else:
            path = session.run(t)
        path = os.fsdecode(path)
        if not os.path.isfile(path):
            # (TF 2.21 writes the SavedModel without the file, which then fails to load)
            raise errors.NotFoundError(None, None, f"save: asset file {path} does not exist")
        base = name = os.path.basename(path)
        stem, ext = os.path.splitext(base)
        k = 0
        while taken.get(name, path) != path:
            k += 1
            name = f"{stem}_{k}{ext}"
        taken[name] = path
        out.append((path, name))
    return out


def _resource_nodes(saver: _Saver, mg, object_graph, handles: dict) -> list:
    """Graph nodes of the tables, assets and captured constants (their names into
    `handles`); returns the init calls of the tables' initializer functions."""
    gd = mg.graph_def
    scalar = tensor_shape.TensorShape([])
    fdefs = {f.signature.name: f for f in saver.library}
    names = {nd.name for nd in gd.node}

    def unique(base):
        name, k = base, 0
        while name in names:
            k += 1
            name = f"{base}_{k}"
        names.add(name)
        return name

    for i, obj in enumerate(saver.objects):
        if _is_resource(obj):
            src = obj.resource_handle.op
            nd = gd.node.add(name=unique("hash_table"), op=src.type)
            nd.attr["key_dtype"].type = obj.key_dtype.as_datatype_enum
            nd.attr["value_dtype"].type = obj.value_dtype.as_datatype_enum
            if not src.type.startswith("Anonymous"):  # (an anonymous table has no name)
                for key in ("container", "shared_name"):
                    value = src.get_attr(key)
                    nd.attr[key].s = value.encode() if isinstance(value, str) else value
                sharing = src.get_attr("use_node_name_sharing")
                nd.attr["use_node_name_sharing"].b = bool(sharing)
            handles[i] = nd.name
        elif isinstance(obj, Asset):
            k = saver.assets.index(obj)
            name = unique("asset_path_initializer")
            _node(gd, name, "Placeholder", dtype=dtypes.string, shape=scalar)
            handles[i] = name
            mg.asset_file_def[k].tensor_info.name = name + ":0"
        elif isinstance(obj, _Constant):
            src = obj.tensor.op
            names.add(obj.name)
            nd = gd.node.add(name=obj.name, op="Const")
            nd.attr["dtype"].type = obj.tensor.dtype.base_dtype.as_datatype_enum
            nd.attr["value"].tensor.CopyFrom(src.get_attr("value"))
            handles[i] = obj.name
    calls = []
    for i, obj in enumerate(saver.objects):
        if not _is_resource(obj):
            continue
        j = dict(saver.children[i]).get("_initialize")
        fname = object_graph.nodes[j].function.concrete_functions[0]
        fdef = fdefs[fname]
        bound = object_graph.concrete_functions[fname].bound_inputs
        nd = gd.node.add(name=unique("StatefulPartitionedCall"), op="StatefulPartitionedCall")
        nd.input.extend(handles[b] for b in bound)
        nd.attr["Tin"].list.type.extend(a.type for a in fdef.signature.input_arg)
        nd.attr["Tin"].list.SetInParent()
        nd.attr["Tout"].list.type.extend(a.type for a in fdef.signature.output_arg)
        nd.attr["Tout"].list.SetInParent()
        nd.attr["f"].func.name = fname
        for attr in ("config", "config_proto", "executor_type"):
            nd.attr[attr].s = b""
        calls.append(nd.name)
    return calls


def _tensor_info(info, t, name) -> None:
    info.name = name
    info.dtype = t.dtype.base_dtype.as_datatype_enum
    info.tensor_shape.CopyFrom(t.shape.as_proto())


def _output_info(info, t, call: str, k: int) -> int:
    """Fill signature output `info` with result `t`, whose (first) tensor is output `k`
    of node `call`; returns the next output's index.  As TF writes them: a SparseTensor
    is a coo_sparse (its values' dtype, its dense shape), another composite a
    composite_tensor (its TypeSpec and component tensors)."""
    if isinstance(t, ops.Tensor):
        _tensor_info(info, t, f"{call}:{k}")
        return k + 1
    parts = nest.flatten(t, expand_composites=True)
    if isinstance(t, SparseTensor):
        coo = info.coo_sparse
        coo.indices_tensor_name = f"{call}:{k}"
        coo.values_tensor_name = f"{call}:{k + 1}"
        coo.dense_shape_tensor_name = f"{call}:{k + 2}"
        info.dtype = t.dtype.base_dtype.as_datatype_enum
        info.tensor_shape.CopyFrom(type_spec_from_value(t).shape.as_proto())
        return k + 3
    composite = info.composite_tensor
    _type_spec(composite.type_spec, _signature_output_spec(t, None))
    for j, part in enumerate(parts):
        _tensor_info(composite.components.add(), part, f"{call}:{k + j}")
    return k + len(parts)


def _meta_graph(saver: _Saver, mg, built, object_graph) -> None:
    gd = mg.graph_def
    gd.versions.producer = GRAPH_DEF_VERSION
    gd.library.function.extend(saver.library)
    handles = {}
    for i, obj in enumerate(saver.objects):
        if isinstance(obj, ResourceVariable):
            name = obj.op.name
            handles[i] = name
            _node(
                gd,
                name,
                "VarHandleOp",
                dtype=obj.dtype.base_dtype,
                shape=obj.shape,
                shared_name=name,
                container="",
                debug_name=name + "/",
            )
    init_calls = _resource_nodes(saver, mg, object_graph, handles)
    n_calls = 0
    for key, (fdef, keywords, order, tensors, in_specs, bound) in built.items():
        sig = mg.signature_def[key]
        sig.method_name = _PREDICT
        inputs = []
        for kw in keywords:
            ph = f"{key}_{kw}"
            spec = in_specs[kw]
            _node(
                gd,
                ph,
                "Placeholder",
                dtype=spec.dtype,
                shape=spec.shape,
            )
            inputs.append(ph)
            info = sig.inputs[kw]
            info.name = ph + ":0"
            info.dtype = spec.dtype.as_datatype_enum
            info.tensor_shape.CopyFrom(spec.shape.as_proto())
        call = "StatefulPartitionedCall" + (f"_{n_calls}" if n_calls else "")
        n_calls += 1
        while call in init_calls:
            call = f"StatefulPartitionedCall_{n_calls}"
            n_calls += 1
        nd = _node(gd, call, "StatefulPartitionedCall", inputs + [handles[b] for b in bound])
        nd.attr["Tin"].list.type.extend(a.type for a in fdef.signature.input_arg)
        nd.attr["Tin"].list.SetInParent()
        nd.attr["Tout"].list.type.extend(a.type for a in fdef.signature.output_arg)
        nd.attr["Tout"].list.SetInParent()
        nd.attr["f"].func.name = fdef.signature.name
        for attr in ("config", "config_proto", "executor_type"):
            nd.attr[attr].s = b""
        k = 0
        for out_key, t in zip(order, tensors, strict=True):
            k = _output_info(sig.outputs[out_key], t, call, k)
    _saver_ops(saver, mg, handles)
    _node(gd, "NoOp", "NoOp", ["^" + c for c in init_calls])
    init = mg.signature_def[INIT_OP_SIGNATURE_KEY].outputs[INIT_OP_SIGNATURE_KEY]
    init.name = "NoOp"
    init.tensor_shape.unknown_rank = True
    mg.meta_info_def.tags.append("serve")
    mg.meta_info_def.tensorflow_version = TENSORFLOW_VERSION
    # As TF's save: default-valued attrs stripped (graph and functions), the ops used.
    strip_graph_default_valued_attrs(mg)
    mg.meta_info_def.stripped_op_list.CopyFrom(stripped_op_list_for_graph(gd))


def save(obj, export_dir, signatures=None, options=None):
    """Write `obj` (a tf.Module) as a TF 2 SavedModel at `export_dir`, its variables'
    values read in the default session.  `options` (a SaveOptions) is accepted for TF's
    signature.

    Raises:
      RuntimeError: no default session (graph mode needs one to read the variables).
      ValueError: a signature that is no tf.function with an input signature or
        concrete function (TF's message); a function capturing a tensor that is not one
        of the object's variables, tables, assets or constants.
      TypeError: a reference (non-resource) variable, as TF (whose message is its
        restore function's trace error).
      NotFoundError: an asset's file does not exist (TF writes the model without it).
    """
    del options
    save_object(obj, export_dir, signatures)


def save_object(obj, export_dir, signatures=None, children=None, identifier=None,
                slots=None) -> _Saver:  # fmt: skip
    """`save`, returning the saver (its `objects` and `paths` by node id).  `children`
    (object -> [(name, child)]) stands for trackable.children_of, `identifier`
    (object -> str) names the user objects and `slots` (object -> [(slot name, variable,
    slot variable)]) gives an optimizer's slots, as Keras' SavedModel has them."""
    export_dir = os.fsdecode(export_dir)
    variables_dir = os.path.join(export_dir, "variables")
    prefix = os.path.join(variables_dir, "variables")
    session = ops.get_default_session()
    if session is None:
        os.makedirs(variables_dir, exist_ok=True)  # (TF has made it by then too)
        raise RuntimeError(
            f'Unable to save checkpoint to "{prefix}" in graph mode without a default '
            "session. Please use `with tf.Session():` to create a session."
        )
    saver = _Saver(obj, signatures, children, identifier, slots)
    object_graph, ckpt, built = saver.build()
    saved_model = SavedModel(saved_model_schema_version=1)
    mg = saved_model.meta_graphs.add()
    mg.object_graph_def.CopyFrom(object_graph)
    assets = _asset_names(saver, session)
    for _, name in assets:
        mg.asset_file_def.add(filename=name)
    _meta_graph(saver, mg, built, object_graph)
    os.makedirs(variables_dir, exist_ok=True)
    os.makedirs(os.path.join(export_dir, "assets"), exist_ok=True)
    for path, name in assets:
        shutil.copyfile(path, os.path.join(export_dir, "assets", name))
    pairs = []
    for node in ckpt.nodes:
        for attr in node.attributes:
            pairs.append(attr.checkpoint_key)
    variables = [o for o in saver.objects if isinstance(o, ResourceVariable)]
    graph = session.graph
    with graph.as_default(), ops.name_scope("saved_model_save"), ops.device("/device:CPU:0"):
        names = [_OBJECT_GRAPH_KEY] + pairs
        tensors = [array_ops.constant(ckpt.SerializeToString(), dtype=dtypes.string)]
        tensors += [v.read_value() for v in variables]
        op = io_ops.save_v2(
            array_ops.constant(prefix),
            array_ops.constant(names),
            array_ops.constant([""] * len(names)),
            tensors,
        )
    session.run(op)
    raw = fingerprinting.deterministic_bytes(saved_model)
    with open(os.path.join(export_dir, "saved_model.pb"), "wb") as f:
        f.write(raw)
    fingerprinting.write(saved_model, export_dir)
    return saver
