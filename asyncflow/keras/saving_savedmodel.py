"""Keras models in the SavedModel format (`model.save("dir")`, save_format="tf"), as
TF's tf_keras writes and reads them in graph mode.

Saving writes the model through tf.saved_model's object saver
(saved_model/object_saver.py) with

- the model's layers as children of the model ("layer_with_weights-<k>" then
  "layer-<k>", per layer in `model.layers` order, as Keras' SavedModel names them; the
  variables keep their checkpoint keys "layer_with_weights-0/kernel/...");
- Keras' identifiers on the objects' nodes ("_tf_keras_sequential", "_tf_keras_network",
  "_tf_keras_layer", "_tf_keras_input_layer", ...);
- the serving signature "serving_default": the model called on its inputs' specs
  (named as the input layers), its outputs keyed by the output layers' names;
- keras_metadata.pb: a SavedMetadata entry per Keras object (its node id, its path
  "root.layer_with_weights-0", its identifier and its metadata JSON: class name,
  config, build input shape and, for the model, its training config).

Loading reads keras_metadata.pb, rebuilds the model from the root's class name and
config, restores its variables from variables/ by object path and, with `compile`,
compiles it from the training config.  The traced call functions TF adds for models
without a config (subclassed models) are not written, and such a model is not loaded.
"""

from __future__ import annotations

import inspect
import json
import logging
import os

from asyncflow import errors, nest, trackable
from asyncflow.framework_extras import TensorSpec
from asyncflow.keras import backend
from asyncflow.keras import saving_hdf5 as hdf5
from asyncflow.keras.engine import InputLayer, Layer
from asyncflow.keras.model_config import KERAS_VERSION, model_from_config, saved_config
from asyncflow.keras.network import Network
from asyncflow.keras.serialization import CustomObjectScope, get_registered_name
from asyncflow.protos.saved_metadata_pb2 import SavedMetadata
from asyncflow.saved_model import object_saver
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
    return "_generic_user_object"


def _children(obj) -> list:
    """A model's layers besides its checkpoint children, as Keras' SavedModel has them."""
    if not _is_model(obj):
        return list(trackable.children_of(obj))
    out, with_weights = [], 0
    for k, layer in enumerate(obj.layers):
        if layer.weights:
            out.append((f"layer_with_weights-{with_weights}", layer))
            with_weights += 1
        out.append((f"layer-{k}", layer))
    return out


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
        "expects_training_arg": False,
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
    return meta


def _model_metadata(model, include_optimizer) -> dict:
    config = saved_config(model)
    meta = {
        "name": model.name,
        "trainable": model.trainable,
        "expects_training_arg": True,
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
    if model.inputs:
        shapes = [backend.int_shape(t) for t in model.inputs]
        meta["build_input_shape"] = _shape_json(shapes[0] if len(shapes) == 1 else shapes)
    if include_optimizer and getattr(model, "optimizer", None) is not None:
        if model._compile_kwargs is not None:
            meta["training_config"] = hdf5._training_config(model)
    return meta


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
      ValueError: a model whose inputs are not known (TF's message), or a subclassed
        model (no config: TF's SavedModel would hold its traced call, asyncflow's not).
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
    if signatures is None:
        signatures = {"serving_default": _serving_signature(model)}
    with backend.get_session().as_default():
        saver = object_saver.save_object(model, path, signatures, _children, _identifier)
    out = SavedMetadata()
    for i, obj in enumerate(saver.objects):
        if id(obj) not in meta or not isinstance(obj, Layer):
            continue
        node_path = ".".join(["root"] + [p for p in saver.paths[i].split("/") if p])
        node = out.nodes.add(node_id=i, node_path=node_path, identifier=_identifier(obj))
        node.version.producer = 2
        node.version.min_consumer = 1
        node.metadata = json.dumps(meta[id(obj)], default=hdf5._json_default)
    with open(os.path.join(path, METADATA_FILE), "wb") as f:
        f.write(out.SerializeToString(deterministic=True))


def _all_layers(model) -> list:
    out = []
    for layer in getattr(model, "layers", []):
        out.append(layer)
        if _is_model(layer):
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
      ValueError: an unknown class (see `custom_objects`).
      NotImplementedError: a model saved without its config (a subclassed model).
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
    if not isinstance(info.get("config"), dict) or "class_name" not in info:
        raise NotImplementedError(
            f"The Keras SavedModel at {path!r} holds a model without a config (a subclassed "
            "model without get_config); TF revives it from its traced functions, which "
            "asyncflow does not. Save it with save_weights and rebuild it in code."
        )
    prefix = os.path.join(path, "variables", "variables")
    if not os.path.exists(prefix + ".index"):
        raise errors.NotFoundError(None, None, f"No checkpoint at {prefix} (variables/)")
    with CustomObjectScope(custom_objects or {}):
        model = model_from_config(
            {"class_name": info["class_name"], "config": _plain(info["config"])},
            custom_objects=custom_objects,
        )
        model.load_weights(prefix).expect_partial()
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
