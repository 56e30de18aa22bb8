"""Keras models in the SavedModel format (`model.save("dir")`, save_format="tf"), as
TF's tf_keras writes and reads them in graph mode.

Saving writes the model through tf.saved_model's object saver
(saved_model/object_saver.py) with

- the model's layers as children of the model ("layer_with_weights-<k>" then
  "layer-<k>", per layer in `model.layers` order, as Keras' SavedModel names them; the
  variables keep their checkpoint keys "layer_with_weights-0/kernel/..."); a subclassed
  model's layers under their attribute names, after its variable lists (so its variables
  are keyed "variables/<k>/...", as TF keys them); a layer's own weights and the layers
  it holds under the attributes holding them ("layer", "forward_layer", "cell", a
  custom layer's), each of those a Keras layer of the SavedModel too;
- the model's traced call, as Keras traces it for loaders without the config: its
  `variables`, `trainable_variables`, `regularization_losses` lists, `__call__` (the
  outputs) and `call_and_return_all_conditional_losses` ((outputs, losses)) on the
  inputs' specs (a network's `inputs, training=False, mask=None`, traced with training
  True and False; a subclassed model's own call arguments), and a "keras_api" child
  holding them again (with `call_and_return_conditional_losses`) and the compiled
  metrics ("keras_api/metrics/<k>" with their total/count): TF's plain
  tf.saved_model.load makes the model callable from them;
- with include_optimizer, the optimizer ("optimizer": "iter" and its hyperparameters'
  variables) and its slots ("<variable>/.OPTIMIZER_SLOT/optimizer/<slot>"), as TF
  writes them;
- Keras' identifiers on the objects' nodes ("_tf_keras_sequential", "_tf_keras_network",
  "_tf_keras_layer", "_tf_keras_input_layer", ...);
- the serving signature "serving_default": the model called on its inputs' specs
  (named as the input layers), its outputs keyed by the output layers' names;
- keras_metadata.pb: a SavedMetadata entry per Keras object (its node id, its path
  "root.layer_with_weights-0", its identifier and its metadata JSON: class name,
  config, build input shape and, for the model, its training config).

Loading reads keras_metadata.pb, rebuilds the model from the root's class name and
config, restores its variables from variables/ by object path and, with `compile`,
compiles it from the training config.  A model without a config, or of a class not
known here (a subclassed model), is revived as Keras revives it: a Model subclass
named as the saved class whose call runs the saved call_and_return_conditional_losses
and whose layers (the metadata's "root.<attribute>" nodes) are revived too, holding the
very variables the saved call computes with: a layer of a known class with a config and
a build input shape is rebuilt from its config and built on the saved variables, the
layers it holds (a wrapper's layer, a Bidirectional's forward and backward layers, an
RNN's cell) on theirs; any other is a generic revived layer (named as its saved class,
its call the saved one, its config the saved one) holding its layers revived the same
way; a nested functional or Sequential model is rebuilt from its config with its layers
on the saved variables.  The variables in no layer are the
model's own; its config is the saved one ({} for a class whose __init__ takes no
arguments, as Keras writes it).  A network whose config names layer classes not known
here is rebuilt from its config the same way, those layers revived generically.
Layers a subclassed model calls are saved with the shape they were built for (their
build_input_shape, and their traced calls on it); a call whose layers take `training`
is traced with it, as Keras does.  The optimizer's saved state is not
restored: TF 2.21's load_model compiles a fresh optimizer (iterations 0, zero slots).
Each layer other than an input layer gets the same lists, functions (on its first
call's input specs, named "inputs") and keras_api.  Not written: `_default_save_signature`,
a Dropout's random generator object, a BatchNormalization's `axis`.
"""

from __future__ import annotations

import inspect
import json
import logging
import os

from asyncflow import errors, nest, trackable
from asyncflow import graph as ops
from asyncflow.framework_extras import TensorSpec
from asyncflow.keras import backend, layer_configs
from asyncflow.keras import saving_hdf5 as hdf5
from asyncflow.keras.engine import InputLayer, Layer
from asyncflow.keras.metrics_more import Metric
from asyncflow.keras.model_config import KERAS_VERSION, model_from_config, saved_config
from asyncflow.keras.network import Network
from asyncflow.keras.optimizers import Optimizer
from asyncflow.keras.serialization import (
    CustomObjectScope,
    get_custom_objects,
    get_registered_name,
)
from asyncflow.keras.serialization import (
    _from_config as _class_from_config,
)
from asyncflow.protos.saved_metadata_pb2 import SavedMetadata
from asyncflow.saved_model import object_loader, object_saver
from asyncflow.tf_function import function

__all__ = ["save_model", "load_model", "is_keras_savedmodel"]

_LOG = logging.getLogger("asyncflow.keras")
METADATA_FILE = "keras_metadata.pb"


def is_keras_savedmodel(path) -> bool:
    return os.path.isfile(os.path.join(os.fspath(path), METADATA_FILE))


def _is_model(obj) -> bool:
    return isinstance(obj, Network)


def _is_sequential(obj) -> bool:
    # (by class: training.py, which defines Sequential, saves through this module)
    return any(
        c.__name__ == "Sequential" and c.__module__ == "asyncflow.keras.training"
        for c in type(obj).__mro__
    )


def _identifier(obj) -> str:
    from asyncflow.keras.layers import RNN

    if _is_sequential(obj):
        return "_tf_keras_sequential"
    if _is_model(obj):
        return "_tf_keras_network" if obj._is_graph_network else "_tf_keras_model"
    if isinstance(obj, InputLayer):
        return "_tf_keras_input_layer"
    if isinstance(obj, RNN):
        return "_tf_keras_rnn_layer"
    if isinstance(obj, Layer):
        return "_tf_keras_layer"
    if isinstance(obj, list | tuple):
        return "trackable_list_wrapper"
    if isinstance(obj, dict):
        return "trackable_dict_wrapper"
    if isinstance(obj, Optimizer):
        return "optimizer"
    if _is_metric(obj):
        return "_tf_keras_metric"
    return "_generic_user_object"


class _KerasAPI:
    """A layer's "keras_api" child: its variable lists and traced call functions, as
    Keras' SavedModel serializes them for the loaders that revive a layer without its
    config."""

    def __init__(self, children):
        self._children = children

    def _trackable_children(self) -> list:
        return list(self._children)


def _layer_children(model) -> list:
    """A model's layers as Keras' SavedModel names them: "layer_with_weights-<k>" then
    "layer-<k>" for a network; a subclassed model's attribute names."""
    if not model._is_graph_network:
        return [
            (name, value)
            for name, value in vars(model).items()
            if not name.startswith("_") and isinstance(value, Layer)
        ]
    out, with_weights = [], 0
    for k, layer in enumerate(model.layers):
        if layer.weights:
            out.append((f"layer_with_weights-{with_weights}", layer))
            with_weights += 1
        out.append((f"layer-{k}", layer))
    return out


def _saved_children(root, functions, optimizer):
    """The children hook of the save: a model's layers, its variable lists, keras_api
    and traced functions (`functions`: model -> {name: Function}), the root's optimizer
    (when saved with it), in TF's order; other objects' checkpoint children."""

    def children(obj) -> list:
        if obj is optimizer:
            return _optimizer_children(obj)
        if _is_metric(obj):
            variables = list(obj.variables)
            named = [(v.op.name.split("/")[-1], v) for v in variables]
            api = _KerasAPI([("variables", variables)])
            kwargs = dict(getattr(obj, "_fn_kwargs", {}))
            return [("variables", variables), ("keras_api", api), *named, ("_fn_kwargs", kwargs)]
        if isinstance(obj, list) and any(_is_metric(m) for m in obj):
            return [(str(k), m) for k, m in enumerate(obj)]
        if isinstance(obj, InputLayer) or not isinstance(obj, Layer):
            return list(trackable.children_of(obj))
        lists = [
            ("variables", list(obj.weights)),
            ("trainable_variables", list(obj.trainable_weights)),
            ("regularization_losses", []),
        ]
        fns = functions.get(id(obj), {})
        api = _KerasAPI(
            [("non_trainable_variables", list(obj.non_trainable_weights)),
             ("layers", list(obj.layers) if _is_model(obj) else obj._sublayers()),
             ("metrics", _saved_metrics(obj) if obj is root else []),
             ("layer_regularization_losses", []), ("layer_metrics", {}), *lists]
            + [(n, fns[n]) for n in (CALL, ALL_LOSSES) if n in fns]
            + ([(LOSSES, fns[ALL_LOSSES])] if ALL_LOSSES in fns else [])
        )  # fmt: skip
        out = lists + [("keras_api", api)] + [(n, fns[n]) for n in (CALL, ALL_LOSSES) if n in fns]
        if not _is_model(obj):  # (a layer: then its weights, as checkpoints name them)
            return out + list(trackable.children_of(obj))
        layers = _layer_children(obj)
        # (a network lists its layers first, a subclassed model after its functions)
        out = layers + out if obj._is_graph_network else out + layers
        if obj is root and optimizer is not None:
            out.append(("optimizer", optimizer))
        return out

    return children


def _is_metric(obj) -> bool:
    return isinstance(obj, Metric)


def _saved_metrics(model) -> list:
    """The compiled model's metrics as Keras' SavedModel keeps them (keras_api.metrics):
    those compile was given, not the per-output loss means."""
    return [m for m in getattr(model, "_metrics", []) if not getattr(m, "_loss_tracker", False)]


def _metric_metadata(metric) -> dict:
    config = metric.get_config()
    fn = getattr(metric, "_fn", None)
    if type(metric).__name__ == "MeanMetricWrapper" and fn is not None:
        config = {**config, "fn": getattr(fn, "__name__", str(fn))}
    return {
        "class_name": type(metric).__name__,
        "name": metric.name,
        "dtype": metric.dtype.name,
        "config": config,
    }


CALL = "__call__"
ALL_LOSSES = "call_and_return_all_conditional_losses"
LOSSES = "call_and_return_conditional_losses"


def _optimizer_children(opt) -> list:
    """A Keras optimizer's checkpoint children: "iter", then its hyperparameters'
    variables by name, as TF's OptimizerV2 tracks them."""
    out = [("iter", opt._iterations)] if opt._iterations is not None else []
    return out + sorted(opt._hyper_vars.items())


def _optimizer_slots(opt, params) -> list:
    """(slot name, variable, slot variable) of a Keras optimizer: slot names sorted, then
    the model's trainable variables in order, as TF lists them."""
    out = []
    for slot_name in sorted({key[0] for key in opt._slots}):
        for p in params:
            slot = opt._slots.get((slot_name, id(p)))
            if slot is not None:
                out.append((slot_name, p, slot))
    return out


def _input_specs(model):
    """The model's call argument as TensorSpecs named for its inputs (one spec, or a
    list of them)."""
    specs = [TensorSpec(t.shape, t.dtype.base_dtype, t.op.name) for t in model.inputs]
    return specs[0] if len(specs) == 1 else specs


def _call_functions(layer) -> dict:
    """`__call__` (the outputs) and `call_and_return_all_conditional_losses` ((outputs,
    losses)) of a model or layer as Keras traces them, on the specs of its inputs (a
    model's inputs, named as they are; a layer's first call's, named "inputs"): for a
    network `inputs, training=False, mask=None`, traced with training True then False;
    for a subclassed model or a layer its call's first parameter and, if it takes one,
    `training=False` (traced True then False), also given when only its sublayers take
    it.  A layer a subclassed model calls (no node) is traced on the shape it was built
    for.  The tensors among a layer's first call's keyword arguments (an attention
    mask, a custom layer's tensor) are traced as keyword inputs, as Keras traces them.
    {} for a layer never called."""
    params = [
        p for p in inspect.signature(layer.call).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]  # fmt: skip
    names = [p.name for p in params]
    keywords = {}
    if _is_model(layer):
        specs = _input_specs(layer)
    elif layer._inbound_nodes and names:
        tensors = nest.flatten(layer._inbound_nodes[0].input_tensors)
        specs = [TensorSpec(t.shape, t.dtype.base_dtype, "inputs") for t in tensors]
        specs = specs[0] if len(specs) == 1 else specs
        keywords = _keyword_specs(layer._inbound_nodes[0].arguments)
    elif getattr(layer, "_build_input_shape", None) is not None and names:
        # (a layer a subclassed model calls: the shape it was built for, in its dtype)
        shapes = nest.flatten(layer._build_input_shape)
        specs = [TensorSpec(s, layer.dtype, "inputs") for s in shapes]
        specs = specs[0] if len(specs) == 1 else specs
    else:
        return {}
    keywords.pop("training", None)
    mask = keywords.pop("mask", None)
    training = passes = "training" in names
    if _is_model(layer) and layer._is_graph_network:
        names, training = ["inputs", "training", "mask"], True
        passes = True
    elif not training and _sublayers_take_training(layer):
        # (as Keras traces a call whose layers take `training`: with it, unused here)
        names, training = [names[0], "training"], True
    sig = [inspect.Parameter(names[0], inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if training:
        sig += [
            inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
            for n, d in (("training", False), ("mask", None))
            if n in names
        ]
    if mask is not None and "mask" not in [p.name for p in sig]:
        keywords["mask"] = mask
    # (after the others, with a default, so that a loaded function binds them by name)
    sig += [
        inspect.Parameter(w, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
        for w in keywords
    ]

    signature = inspect.Signature(sig)

    def make(with_losses):
        def call(*args, **kwargs):
            given = signature.bind(*args, **kwargs)
            given.apply_defaults()
            values = given.arguments
            extra = {"training": values.get("training", False)} if passes else {}
            for word in ("mask", *keywords):  # (the traces of a network take no mask)
                if values.get(word) is not None:
                    extra[word] = values[word]
            outputs = layer(values[names[0]], **extra)
            return (outputs, []) if with_losses else outputs

        call.__signature__ = signature
        fn = function(call)
        if training:
            for flag in (True, False):
                fn.get_concrete_function(
                    specs, flag, *([mask] if "mask" in names else []), **keywords
                )
        else:
            fn.get_concrete_function(specs, **keywords)
        return fn

    return {CALL: make(False), ALL_LOSSES: make(True)}


def _all_tensors(value) -> bool:
    flat = nest.flatten(value)
    return bool(flat) and all(isinstance(t, ops.Tensor) for t in flat)


def _keyword_specs(arguments) -> dict:
    """The tensors among a layer call's keyword arguments as TensorSpecs named for their
    keyword (Keras traces its saved call functions with them; other keyword arguments
    are left out, as Keras leaves them)."""
    out = {}
    for word, value in arguments.items():
        if _all_tensors(value):
            out[word] = nest.map_structure(
                lambda t, w=word: TensorSpec(t.shape, t.dtype.base_dtype, w), value
            )
    return out


def _sublayers_take_training(layer) -> bool:
    """Whether a layer within the layer (at any depth) takes a `training` argument."""
    for sub in layer._sublayers():
        if "training" in inspect.signature(sub.call).parameters or _sublayers_take_training(sub):
            return True
    return False


def _shape_json(shape):
    if shape is None:
        return None
    if isinstance(shape, list):
        return [_shape_json(s) for s in shape]
    return {"class_name": "TensorShape", "items": list(shape)}


def _layer_metadata(layer) -> dict:
    config = layer.get_config() if hasattr(layer, "get_config") else None
    meta = {
        "name": layer.name,
        "trainable": layer.trainable,
        "expects_training_arg": "training" in inspect.signature(layer.call).parameters,
        "dtype": getattr(layer, "dtype", None) or "float32",
        "batch_input_shape": getattr(layer, "_batch_input_shape", None),
        "stateful": bool(getattr(layer, "stateful", False)),
        "must_restore_from_config": isinstance(layer, InputLayer),
        "preserve_input_structure_in_config": False,
        "autocast": True,
        "class_name": get_registered_name(type(layer)),
        "config": config,
    }
    if layer._inbound_nodes and not isinstance(layer, InputLayer):
        first_call = nest.flatten(layer._inbound_nodes[0].input_tensors)
        shapes = [backend.int_shape(t) for t in first_call]
        meta["build_input_shape"] = _shape_json(shapes[0] if len(shapes) == 1 else shapes)
    elif getattr(layer, "_build_input_shape", None) is not None:
        # (a layer a subclassed model calls: no node, the shape it was built for)
        shapes = [tuple(s.as_list()) if s.dims is not None else None
                  for s in nest.flatten(layer._build_input_shape)]  # fmt: skip
        meta["build_input_shape"] = _shape_json(shapes[0] if len(shapes) == 1 else shapes)
    return meta


def _model_metadata(model, include_optimizer) -> dict:
    try:
        config = saved_config(model)
    except NotImplementedError:  # (a subclassed model: revived from its traced call)
        # (Keras' config of a subclassed model made without arguments: {})
        config = {} if _init_takes_nothing(model) else None
    expects_training = "training" in inspect.signature(model.call).parameters
    meta = {
        "name": model.name,
        "trainable": model.trainable,
        "expects_training_arg": expects_training,
        "dtype": "float32",
        "batch_input_shape": None,
        "must_restore_from_config": False,
        "preserve_input_structure_in_config": False,
        "autocast": False,
        "class_name": get_registered_name(type(model)),
        "config": config,
        "is_graph_network": bool(model._is_graph_network),
        "keras_version": KERAS_VERSION,
        "backend": "tensorflow",
        "model_config": {"class_name": get_registered_name(type(model)), "config": config},
    }
    if config is None:
        del meta["config"], meta["model_config"]
    if model.inputs:
        shapes = [backend.int_shape(t) for t in model.inputs]
        meta["build_input_shape"] = _shape_json(shapes[0] if len(shapes) == 1 else shapes)
    if include_optimizer and getattr(model, "optimizer", None) is not None:
        if model._compile_kwargs is not None:
            meta["training_config"] = hdf5._training_config(model)
    return meta


def _init_takes_nothing(model) -> bool:
    """Whether the model's class's __init__ takes no argument but self."""
    try:
        params = list(inspect.signature(type(model).__init__).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) == 1


def _serving_signature(model):
    """The model called on its inputs' specs, its outputs keyed by output layer name."""
    inputs = model.inputs
    specs = [TensorSpec(t.shape, t.dtype.base_dtype, t.op.name) for t in inputs]
    names = [layer.name for layer in getattr(model, "_output_layers", [])]
    if not names:
        names = [t.op.name.split("/")[0] for t in model.outputs]

    def serve(*args):
        outputs = model(list(args) if len(args) > 1 else args[0])
        flat = outputs if isinstance(outputs, list | tuple) else [outputs]
        return dict(zip(names, flat, strict=True))

    # (one positional parameter per input, which is how tf.function binds the specs)
    params = [
        inspect.Parameter(f"input_{k}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for k in range(len(specs))
    ]
    serve.__signature__ = inspect.Signature(params)
    return function(serve, input_signature=specs).get_concrete_function()


def save_model(model, filepath, overwrite=True, include_optimizer=True, signatures=None,
               options=None, save_traces=True) -> None:  # fmt: skip
    """`model.save(dir)` in the SavedModel format (see the module note).

    Raises:
      ValueError: a model whose inputs are not known (TF's message: a subclassed model
        not yet called or built).
    """
    del options, save_traces
    path = os.fspath(filepath)
    if not overwrite and os.path.exists(path):
        _LOG.warning("%s exists and overwrite=False: the model was not saved", path)
        return
    if not model.inputs:
        raise ValueError(
            f"Model {model} cannot be saved either because the input shape is not "
            "available or because the forward pass of the model is not defined.To define "
            "a forward pass, please override `Model.call()`. To specify an input shape, "
            "either call `build(input_shape)` directly, or call the model on actual data "
            "using `Model()`, `Model.fit()`, or `Model.predict()`. If you have a custom "
            "training step, please make sure to invoke the forward pass in train step "
            "through `Model.__call__`, i.e. `model(inputs)`, as opposed to `model.call()`."
        )
    # The metadata first: the serving trace calls the layers again.
    meta = {id(model): _model_metadata(model, include_optimizer)}
    for layer in _all_layers(model):
        if id(layer) not in meta:
            meta[id(layer)] = (
                _model_metadata(layer, False) if _is_model(layer) else _layer_metadata(layer)
            )
    for metric in _saved_metrics(model):
        meta[id(metric)] = _metric_metadata(metric)
    if signatures is None:
        signatures = {"serving_default": _serving_signature(model)}
    functions = {id(model): _call_functions(model)}
    for layer in _all_layers(model):
        if id(layer) not in functions and not isinstance(layer, InputLayer):
            functions[id(layer)] = _call_functions(layer)
    optimizer = getattr(model, "optimizer", None) if include_optimizer else None
    optimizer = optimizer if isinstance(optimizer, Optimizer) else None
    children = _saved_children(model, functions, optimizer)

    def slots(obj):
        return _optimizer_slots(obj, model.trainable_weights) if obj is optimizer else []

    with backend.get_session().as_default():
        saver = object_saver.save_object(model, path, signatures, children, _identifier, slots)
    out = SavedMetadata()
    for i, obj in enumerate(saver.objects):
        if id(obj) not in meta or not (isinstance(obj, Layer) or _is_metric(obj)):
            continue
        node_path = ".".join(["root"] + [p for p in saver.paths[i].split("/") if p])
        node = out.nodes.add(node_id=i, node_path=node_path, identifier=_identifier(obj))
        node.version.producer = 2
        node.version.min_consumer = 1
        node.metadata = json.dumps(meta[id(obj)], default=hdf5._json_default)
    with open(os.path.join(path, METADATA_FILE), "wb") as f:
        f.write(out.SerializeToString(deterministic=True))


def _all_layers(model) -> list:
    """The layers within a model or layer at any depth (a network's layers, a layer's
    sublayers: a wrapper's layer, an RNN's cell, a custom layer's own), parents first."""
    out = []
    subs = model.layers if _is_model(model) else model._sublayers()
    for layer in subs:
        out.append(layer)
        out.extend(_all_layers(layer))
    return out


def _plain(value):
    """A metadata config as the config readers take it: TF's tuple markers
    ({"class_name": "__tuple__", "items": [...]}) as lists, its "shared_object_id"
    keys dropped."""
    if isinstance(value, dict):
        if value.get("class_name") == "__tuple__" and set(value) == {"class_name", "items"}:
            return [_plain(v) for v in value["items"]]
        return {k: _plain(v) for k, v in value.items() if k != "shared_object_id"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_model(filepath, custom_objects=None, compile=True):  # noqa: A002
    """`tf.keras.models.load_model(dir)` for a Keras SavedModel (see the module note).

    Raises:
      OSError: no keras_metadata.pb in the directory.
      ValueError: unreadable metadata; a model to revive without its traced call.
      NotFoundError: no variables/ checkpoint.
    """
    path = os.fspath(filepath)
    meta_path = os.path.join(path, METADATA_FILE)
    if not os.path.isfile(meta_path):
        raise OSError(f"No file or directory found at {meta_path}")
    metadata = SavedMetadata()
    with open(meta_path, "rb") as f:
        raw = f.read()
    try:
        metadata.ParseFromString(raw)
    except Exception as e:  # noqa: BLE001 (protobuf's DecodeError)
        raise ValueError(f"Unable to parse {meta_path}: {e}") from None
    root = next((n for n in metadata.nodes if n.node_path == "root"), None)
    if root is None:
        raise ValueError(f"{meta_path} has no entry for the model (node path 'root').")
    try:
        info = json.loads(root.metadata)
    except json.JSONDecodeError as e:
        raise ValueError(f"The model's metadata in {meta_path} is not JSON: {e}") from None
    if "class_name" not in info:
        raise ValueError(f"The model's metadata in {meta_path} names no class.")
    with CustomObjectScope(custom_objects or {}):
        if not _from_config_possible(info, custom_objects):
            model = _revive(path, info, metadata, custom_objects)
        elif _unknown_layer_classes(metadata, custom_objects):
            # (a network holding layers of classes not known here: those revived from
            # the saved objects, the rest rebuilt on the saved variables)
            model = _network_on_saved(
                object_loader.load_v2(path), info, metadata, "root", custom_objects
            )
            # (the values of any weight a layer's build made anew)
            model.load_weights(os.path.join(path, "variables", "variables")).expect_partial()
        else:
            model = _from_config(path, info, custom_objects)
        if not compile:
            return model
        training = info.get("training_config")
        if training is None:
            _LOG.warning(
                "No training configuration found in save file, so the model was *not* "
                "compiled. Compile it manually."
            )
            return model
        hdf5._compile_from(model, _plain(training), custom_objects)
    return model


def _from_config_possible(info, custom_objects) -> bool:
    """Whether the model can be rebuilt from its config: a config is saved, the model is
    a network and its class is known (a registered or custom class); otherwise it is
    revived from its traced call (TF builds a subclassed model given in custom_objects
    from its config instead, and restores it by its object graph)."""
    if not isinstance(info.get("config"), dict):
        return False
    if info.get("is_graph_network") is False:
        # (a subclassed model's config cannot rebuild its weights' object graph: its
        # variables are keyed "variables/<k>", which load_weights does not map)
        return False
    name = info["class_name"]
    known = name in (custom_objects or {}) or name in get_custom_objects()
    return known or name in layer_configs.LAYER_CLASSES


def _from_config(path, info, custom_objects):
    prefix = os.path.join(path, "variables", "variables")
    if not os.path.exists(prefix + ".index"):
        raise errors.NotFoundError(None, None, f"No checkpoint at {prefix} (variables/)")
    model = model_from_config(
        {"class_name": info["class_name"], "config": _plain(info["config"])},
        custom_objects=custom_objects,
    )
    model.load_weights(prefix).expect_partial()
    return model


def _revive(path, info, metadata, custom_objects):
    """A model without a usable config, revived as Keras does from the SavedModel's
    objects: a subclassed model (named as the saved class) whose call runs the saved
    call function and whose layers are revived (`_revive_layers`); the variables not in
    a layer are its own.

    Raises:
      ValueError: the SavedModel holds no traced call of the model.
    """
    prefix = os.path.join(path, "variables", "variables")
    if not os.path.exists(prefix + ".index"):
        raise errors.NotFoundError(None, None, f"No checkpoint at {prefix} (variables/)")
    restored = object_loader.load_v2(path)
    call = getattr(getattr(restored, "keras_api", None), LOSSES, None)
    if call is None or not getattr(call, "concrete_functions", None):
        raise ValueError(
            f"The Keras SavedModel at {path!r} holds a {info['class_name']} without a "
            "config (a subclassed model) and without its traced call functions; it "
            "cannot be revived. Pass its class in custom_objects."
        )
    cls = type(info["class_name"], (_revived_model_class(),), {})
    layers = _revive_layers(restored, metadata, custom_objects, "root")
    return cls(restored, call, info, layers)


_LAYER_IDENTIFIERS = (
    "_tf_keras_layer", "_tf_keras_rnn_layer", "_tf_keras_network", "_tf_keras_model",
    "_tf_keras_sequential",
)  # fmt: skip


def _node_info(node) -> dict:
    try:
        info = json.loads(node.metadata)
    except json.JSONDecodeError as e:
        raise ValueError(f"The metadata of {node.node_path} is not JSON: {e}") from None
    if not isinstance(info, dict):
        raise ValueError(f"The metadata of {node.node_path} is not a JSON object.")
    return info


def _revive_layers(parent, metadata, custom_objects, prefix) -> list:
    """(attribute name, layer) of the layers held by the object at node path `prefix`
    (metadata nodes "<prefix>.<name>"; parent: its saved object), in node order: each
    rebuilt from its config where Keras can (a known class, a config and, for a layer,
    the shape it was built for) on the saved variables themselves, its own sublayers
    too, else a generic revived layer named as the saved class, holding its revived
    sublayers."""
    out = []
    depth = prefix.count(".") + 1
    for node in sorted(metadata.nodes, key=lambda n: n.node_id):
        path = node.node_path
        if (
            not path.startswith(prefix + ".")
            or path.count(".") != depth
            or node.identifier not in _LAYER_IDENTIFIERS
        ):
            continue
        attr = path.rsplit(".", 1)[1]
        saved = getattr(parent, attr, None)
        if saved is None:
            continue
        info = _node_info(node)
        layer = None
        if node.identifier in ("_tf_keras_layer", "_tf_keras_rnn_layer"):
            layer = _layer_from_config(saved, info, custom_objects, metadata, path)
        elif _known_class(info.get("class_name"), custom_objects) is not None and isinstance(
            info.get("config"), dict
        ):
            layer = _network_on_saved(saved, info, metadata, path, custom_objects)
        if layer is None:
            layer = _generic_layer(saved, info, metadata, path, custom_objects)
        out.append((attr, layer))
    return out


def _generic_layer(saved, info, metadata, path, custom_objects):
    """A generic revived layer of the saved layer at node path `path`, its sublayers
    (the metadata's "<path>.<attribute>" nodes) revived and held in those attributes."""
    sublayers = _revive_layers(saved, metadata, custom_objects, path)
    cls = type(str(info.get("class_name", "Layer")), (_revived_layer_class(),), {})
    return cls(saved, info, sublayers)


def _known_class(name, custom_objects):
    """The layer class a saved class name names here (custom objects first), or None."""
    for table in (custom_objects or {}, get_custom_objects(), layer_configs.LAYER_CLASSES):
        if name in table:
            return table[name]
    return None


def _unknown_layer_classes(metadata, custom_objects) -> set:
    """The class names of the saved layers that are not known here."""
    out = set()
    for node in metadata.nodes:
        if node.node_path != "root" and node.identifier in _LAYER_IDENTIFIERS:
            name = _node_info(node).get("class_name")
            if _known_class(name, custom_objects) is None:
                out.add(name)
    return out


def _saved_layers(saved, metadata, prefix) -> dict:
    """Layer name -> (saved object, metadata, node path) of the Keras layers under node
    path `prefix` (saved: the object at `prefix`)."""
    out: dict = {}
    for node in sorted(metadata.nodes, key=lambda n: n.node_id):
        path = node.node_path
        if not path.startswith(prefix + ".") or node.identifier not in _LAYER_IDENTIFIERS:
            continue
        obj = saved
        for part in path[len(prefix) + 1 :].split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            info = _node_info(node)
            out.setdefault(info.get("name"), (obj, info, path))
    return out


class _OnSaved:
    """A layer class as the config's deserialization finds it (in custom_objects) while a
    network is rebuilt on a SavedModel's objects: the layer made from its config takes
    the saved variables of the layer of its name when built; a class not known here
    makes a generic revived layer of the saved one."""

    def __init__(self, name, real, saved, objects, metadata, custom_objects):
        self._name, self._real, self._saved, self._objects = name, real, saved, objects
        self._metadata, self._custom_objects = metadata, custom_objects

    def from_config(self, config, custom_objects=None):
        del custom_objects  # (the table this stand-in is in)
        saved, info, path = self._saved.get(config.get("name"), (None, None, None))
        if self._real is None:
            if saved is None:
                raise ValueError(f"Unknown layer: '{self._name}'.")
            return _generic_layer(saved, info, self._metadata, path, self._custom_objects)
        layer = _class_from_config(self._real, config, self._objects)
        if saved is not None and not isinstance(layer, Network):
            _adopt_all(layer, saved)
        return layer


def _network_on_saved(saved_model, info, metadata, prefix, custom_objects):
    """The functional or Sequential model of the metadata at node path `prefix` (its
    saved object: saved_model), rebuilt from its config with its layers on the
    SavedModel's variables (`_OnSaved`)."""
    saved = _saved_layers(saved_model, metadata, prefix)
    objects = dict(custom_objects or {})
    for _, layer_info, _ in saved.values():
        name = layer_info.get("class_name")
        known = _known_class(name, custom_objects)
        objects[name] = _OnSaved(name, known, saved, objects, metadata, custom_objects)
    model = model_from_config(
        {"class_name": info["class_name"], "config": _plain(info["config"])},
        custom_objects=objects,
    )
    shape = _shape_from_json(info.get("build_input_shape"))
    if not model.built and shape is not None:
        # (a Sequential built by its first call: its config holds no input shape)
        model.build(shape.as_list() if hasattr(shape, "as_list") else shape)
    for layer in _all_layers(model):
        layer.__dict__.pop("add_weight", None)
    return model


def _adopt(layer, saved) -> None:
    """Until removed, the layer's add_weight hands back the saved layer's variable of
    the name asked for (adding it to the layer's weights) instead of making one."""
    saved_vars = _saved_list(getattr(saved, "variables", None))
    cls_add_weight = type(layer).add_weight

    def add_weight(name=None, shape=None, dtype=None, initializer=None, regularizer=None,
                   trainable=None, constraint=None, **kwargs):  # fmt: skip
        variable = getattr(saved, name, None) if isinstance(name, str) else None
        if not any(variable is v for v in saved_vars):
            return cls_add_weight(layer, name, shape, dtype, initializer, regularizer,
                                  trainable, constraint, **kwargs)  # fmt: skip
        if regularizer is not None:
            with ops.name_scope(name + "/Regularizer"):
                layer._losses.append(regularizer(variable))
        trainable = True if trainable is None else trainable
        (layer._trainable_weights if trainable else layer._non_trainable_weights).append(variable)
        return variable

    layer.__dict__["add_weight"] = add_weight


def _adopt_all(layer, saved, path="") -> list:
    """`_adopt` the layer and, at any depth, each sublayer it holds already (a wrapper's
    layer, a Bidirectional's forward and backward layers, an RNN's cell) with the saved
    object of its attribute's name; (layer, its node path under `path`) of each layer
    adopted, parents first."""
    _adopt(layer, saved)
    out = [(layer, path)]
    for attr, value in layer._named_sublayers() or []:
        items = value if isinstance(value, list) else [value]
        saved_value = getattr(saved, attr, None)
        for k, item in enumerate(items):
            sub_path = f"{path}.{attr}" + (f".{k}" if isinstance(value, list) else "")
            sub = getattr(saved_value, str(k), None) if isinstance(value, list) else saved_value
            if sub is not None:
                out += _adopt_all(item, sub, sub_path)
    return out


def _shape_from_json(value):
    """A build_input_shape of the metadata (TensorShape markers, lists, None)."""
    from asyncflow.tensor_shape import TensorShape

    if isinstance(value, dict) and value.get("class_name") == "TensorShape":
        return TensorShape(value.get("items"))
    if isinstance(value, dict) and value.get("class_name") == "__tuple__":
        return [_shape_from_json(v) for v in value.get("items", [])]
    if isinstance(value, list) and all(v is None or isinstance(v, int) for v in value):
        return TensorShape(value)
    if isinstance(value, list):
        return [_shape_from_json(v) for v in value]
    return None


def _layer_from_config(saved, info, custom_objects, metadata, path):
    """The layer at node path `path`, rebuilt from its config and built for its saved
    input shape with the saved variables as its weights (`_adopt_all`), and so are the
    sublayers it holds that its build leaves unbuilt (a Bidirectional's), each for its
    own saved shape; None where Keras revives it otherwise: an unknown class, no config
    or shape, or a build that makes other weights than the saved ones."""
    name, config = info.get("class_name"), info.get("config")
    if not isinstance(config, dict) or _known_class(name, custom_objects) is None:
        return None
    shape = _shape_from_json(info.get("build_input_shape"))
    if shape is None:
        return None
    try:
        layer = layer_configs.deserialize(
            {"class_name": name, "config": _plain(config)}, custom_objects
        )
    except (ValueError, TypeError, KeyError):
        return None
    adopted = _adopt_all(layer, saved)
    nodes = {node.node_path: node for node in metadata.nodes}
    try:
        layer.build(shape)
        layer._build_input_shape = shape
        layer.built = True
        for sub, sub_path in adopted[1:]:
            node = nodes.get(path + sub_path)
            sub_shape = None if node is None else _shape_from_json(
                _node_info(node).get("build_input_shape")
            )  # fmt: skip
            if not sub.built and sub_shape is not None:
                with ops.name_scope(sub.name):
                    sub.build(sub_shape)
                sub._build_input_shape = sub_shape
                sub.built = True
    except (ValueError, TypeError):
        return None
    finally:
        for item, _ in adopted:
            del item.__dict__["add_weight"]
    saved_vars = _saved_list(getattr(saved, "variables", None))
    if sorted(map(id, layer.weights)) != sorted(map(id, saved_vars)):
        return None
    return layer


_REVIVED_LAYER: list = []


def _revived_layer_class():
    """RevivedLayer: a layer Keras cannot rebuild from its config (a class it does not
    know), revived from its saved objects: its name, trainability, dtype and variables,
    its call the saved call function, its config the saved one."""
    if _REVIVED_LAYER:
        return _REVIVED_LAYER[0]

    class RevivedLayer(Layer):
        def __init__(self, saved, info, sublayers=()):
            super().__init__(
                name=info.get("name"), trainable=bool(info.get("trainable", True)),
                dtype=info.get("dtype") or None,
            )  # fmt: skip
            in_sublayers = set()
            for attr, layer in sublayers:
                self.__dict__.setdefault("_tracked_layers", []).append(layer)
                in_sublayers.update(id(w) for w in layer.weights)
                if not hasattr(type(self), attr) and attr not in self.__dict__:
                    object.__setattr__(self, attr, layer)
            variables = _saved_list(getattr(saved, "variables", None))
            variables = [v for v in variables if id(v) not in in_sublayers]
            trainable = _saved_list(getattr(saved, "trainable_variables", None))
            self._trainable_weights = [v for v in variables if any(v is t for t in trainable)]
            self._non_trainable_weights = [
                v for v in variables if not any(v is t for t in trainable)
            ]
            api = getattr(saved, "keras_api", None)
            self._saved_call = getattr(api, LOSSES, None) or getattr(saved, ALL_LOSSES, None)
            self._saved_config = info.get("config")
            self.built = True

        def call(self, inputs, training=None, **kwargs):
            fn = self._saved_call
            if fn is None or not getattr(fn, "concrete_functions", None):
                raise ValueError(
                    f"Cannot call custom layer {self.name} of type {type(self)}, because "
                    "the call function was not serialized to the SavedModel. Implement "
                    "`get_config` and `from_config` in the layer class and pass it in "
                    "`custom_objects` when loading the model."
                )
            names = fn._arg_names + fn._kwonly
            # The tensors given by keyword that the saved call was traced with (a custom
            # layer's `scale=t`); a mask the base found on the inputs is not one.
            tensors = {
                word: value
                for word, value in kwargs.items()
                if word in names and word != "mask" and _all_tensors(value)
            }
            if "training" in names:
                tensors["training"] = bool(training)
            outputs, _ = fn(inputs, **tensors)
            return outputs

        def get_config(self):
            if not isinstance(self._saved_config, dict):
                raise NotImplementedError(
                    f"{type(self).__name__} was revived from a SavedModel without its config."
                )
            return dict(self._saved_config)

    _REVIVED_LAYER.append(RevivedLayer)
    return RevivedLayer


def _saved_list(obj) -> list:
    """The items of a restored trackable list (attributes "0", "1", ...)."""
    if obj is None:
        return []
    if isinstance(obj, list):
        return obj
    items = {int(k): v for k, v in vars(obj).items() if k.isdigit()}
    return [items[k] for k in sorted(items)]


_REVIVED: list = []


def _revived_model_class():
    """RevivedModel, made on first use: a subclassed Model (training.py defines Model and
    imports this module, so the class is looked up, not imported)."""
    if _REVIVED:
        return _REVIVED[0]
    base = layer_configs.LAYER_CLASSES["Model"]

    def __init__(self, restored, call, info, layers=()):  # noqa: N807
        base.__init__(self, name=info.get("name"))
        self._restored = restored
        self._restored_call = call
        self._expects_training = "training" in call._arg_names + call._kwonly
        self._saved_config = info.get("config")
        tracked = self.__dict__.setdefault("_tracked_layers", [])
        in_layers = set()
        for attr, layer in layers:
            tracked.append(layer)
            in_layers.update(id(w) for w in layer.weights)
            if not hasattr(type(self), attr) and attr not in self.__dict__:
                object.__setattr__(self, attr, layer)
        variables = _saved_list(getattr(restored, "variables", None))
        own = [v for v in variables if id(v) not in in_layers]
        self._trainable_weights = [v for v in own if v.trainable]
        self._non_trainable_weights = [v for v in own if not v.trainable]
        self.trainable = bool(info.get("trainable", True))
        self.built = True

    def call(self, inputs, training=None, mask=None):
        del mask
        if self._expects_training:
            outputs, _ = self._restored_call(inputs, training=bool(training))
        else:
            outputs, _ = self._restored_call(inputs)
        return outputs

    def get_config(self):
        if isinstance(self._saved_config, dict):
            return dict(self._saved_config)
        raise NotImplementedError(
            f"{type(self).__name__} was revived from a SavedModel's traced call; it has no config."
        )

    cls = type(
        "RevivedModel", (base,),
        {"__init__": __init__, "call": call, "get_config": get_config,
         "__doc__": "A Keras model revived from its SavedModel's traced call."},
    )  # fmt: skip
    _REVIVED.append(cls)
    return cls
