"""Model configs as TF's Keras writes them, and models rebuilt from them.

A functional model's config lists its layers (in `model.layers` order), each with its
own config and its inbound nodes: for every call of the layer inside this model, the
`[layer_name, node_index, tensor_index, call_kwargs]` of each input.  Node indexes count
only the calls that belong to the model (a layer shared with another model has calls
that do not), so they are renumbered here.  `input_layers`/`output_layers` name the
model's inputs and outputs the same way.

Rebuilding creates every layer from its config, then replays the calls in layer order,
deferring a call whose inputs are not made yet and retrying it on the next pass (a
pass that makes no progress means the config is inconsistent).
"""

from __future__ import annotations

import json

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.keras import backend, layer_configs
from asyncflow.keras.engine import InputLayer, keras_history
from asyncflow.keras.network import Network
from asyncflow.keras.serialization import plain, serialize_keras_object

__all__ = [
    "KERAS_VERSION",
    "first_node_offset",
    "resolve_tensor_refs",
    "network_config",
    "reconstruct",
    "sequential_config",
    "saved_config",
    "model_to_json",
    "model_from_config",
    "model_from_json",
]

# What TF 2.21's tf_keras stamps on configs and files (readers check it, not we).
KERAS_VERSION = "2.21.0"


def first_node_offset(layer) -> int:
    """1 for a model used as a layer: TF's Keras gives a model a node of its own (its
    inputs to its outputs) before any call, and counts it in configs; asyncflow's
    models have no such node, so their calls are numbered from 1 here."""
    return 1 if isinstance(layer, Network) and layer._is_graph_network else 0


def _kept_node_indexes(model) -> dict:
    """id(layer) -> {id(node): index among the layer's calls that are in `model`}."""
    in_model = {id(n) for n in model._nodes}
    out = {}
    for layer in model.layers:
        kept = [n for n in layer._inbound_nodes if id(n) in in_model]
        offset = first_node_offset(layer)
        out[id(layer)] = {id(n): i + offset for i, n in enumerate(kept)}
    return out


def _tensor_ref(tensor, kept) -> list:
    layer, node_index, tensor_index = keras_history(tensor)
    node = layer._inbound_nodes[node_index]
    return [layer.name, kept[id(layer)][id(node)], tensor_index]


def _keyword_refs(arguments, kept) -> dict:
    """A call's keyword arguments with each Keras tensor among them (nested too: an
    Attention's mask list) written as a reference, [layer name, node index, tensor
    index], and any other tensor as its value, as Keras writes them.

    Raises:
      errors.OpError: the value of a tensor that is not a Keras tensor cannot be
        computed (a placeholder's), as in TF.
    """

    def ref(value):
        if isinstance(value, ops.Tensor):
            if keras_history(value) is not None:
                return _tensor_ref(value, kept)
            return backend.get_value(value)
        return value

    return nest.map_structure(ref, dict(arguments))


def network_config(model) -> dict:
    """A functional model's config: name, trainable, layers (with inbound nodes),
    input_layers, output_layers."""
    kept = _kept_node_indexes(model)
    in_model = {id(n) for n in model._nodes}
    layer_configs_out = []
    for layer in model.layers:
        nodes = []
        if not isinstance(layer, InputLayer):
            for node in layer._inbound_nodes:
                if id(node) not in in_model:
                    continue
                kwargs = plain(_keyword_refs(node.arguments, kept))
                inputs = nest.flatten(node.input_tensors)
                keywords = getattr(layer, "_tensor_keywords", ())
                if keywords and isinstance(node.input_tensors, (list, tuple)):
                    # Keras writes the tensors given by keyword (MultiHeadAttention's
                    # value and key) as references among the first input's arguments.
                    for word, t in zip(keywords, inputs[1:], strict=False):
                        kwargs[word] = _tensor_ref(t, kept)
                    inputs = inputs[:1]
                nodes.append([_tensor_ref(t, kept) + [kwargs] for t in inputs])
        entry = serialize_keras_object(layer)
        entry["name"] = layer.name
        entry["inbound_nodes"] = nodes
        layer_configs_out.append(entry)
    return {
        "name": model.name,
        "trainable": model.trainable,
        "layers": layer_configs_out,
        "input_layers": [_tensor_ref(t, kept) for t in model.inputs],
        "output_layers": [_tensor_ref(t, kept) for t in model.outputs],
    }


def _is_tensor_ref(value) -> bool:
    """Whether an argument in a config's node is a reference to a tensor given by
    keyword: [layer name, node index, tensor index]."""
    return (
        isinstance(value, (list, tuple))
        and len(value) == 3
        and isinstance(value[0], str)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:])
    )


def _made_tensor(ref, created):
    """The tensor a reference names, or None when its layer has not made it yet."""
    name, node_index, tensor_index = ref[0], ref[1], ref[2]
    inbound = created.get(name)
    if inbound is None:
        raise ValueError(f"The model config refers to an unknown layer {name!r}")
    node_index -= first_node_offset(inbound)
    if len(inbound._inbound_nodes) <= node_index:
        return None
    return nest.flatten(inbound._inbound_nodes[node_index].output_tensors)[tensor_index]


def resolve_tensor_refs(kwargs: dict, made):
    """A config's call arguments with each tensor reference (at any depth) replaced by
    the tensor `made(ref)` gives, or None when one of them is not made yet.

    Raises:
      ValueError: a reference to a layer the config does not have (from `made`).
    """
    missing = []

    def tensor(value):
        if isinstance(value, (list, tuple)) and not _is_tensor_ref(value):
            return [tensor(v) for v in value]
        if isinstance(value, dict):
            return {k: tensor(v) for k, v in value.items()}
        if not _is_tensor_ref(value):
            return value
        out = made(value)
        if out is None:
            missing.append(value)
        return out

    out = {word: tensor(value) for word, value in kwargs.items()}
    return None if missing else out


def _call_node(layer, node_data, created) -> bool:
    """Replay one call of `layer`; False when an input is not made yet."""
    inputs, kwargs = [], {}
    for ref in node_data:
        if len(ref) > 3 and ref[3]:
            kwargs = dict(ref[3])
        tensor = _made_tensor(ref, created)
        if tensor is None:
            return False
        inputs.append(tensor)
    kwargs = resolve_tensor_refs(kwargs, lambda ref: _made_tensor(ref, created))
    if kwargs is None:
        return False
    layer(inputs[0] if len(inputs) == 1 else inputs, **kwargs)
    return True


def reconstruct(config: dict, custom_objects=None):
    """(inputs, outputs) of the layers in a functional config, made and connected anew.

    Raises:
      ValueError: an unknown layer class, or calls that cannot all be replayed.
    """
    created, pending, order = {}, {}, []
    for entry in config["layers"]:
        layer = layer_configs.deserialize(
            {"class_name": entry["class_name"], "config": entry["config"]}, custom_objects
        )
        created[entry["name"]] = layer
        order.append(entry["name"])
        if entry.get("inbound_nodes"):
            pending[entry["name"]] = list(entry["inbound_nodes"])
    while pending:
        progress = False
        for name in order:
            nodes = pending.pop(name, None)
            if not nodes:
                continue
            while nodes and _call_node(created[name], nodes[0], created):
                nodes.pop(0)
                progress = True
            if nodes:
                pending[name] = nodes
        if not progress:
            raise ValueError(
                "The model config cannot be rebuilt: the inputs of layer(s) "
                f"{sorted(pending)} are never made"
            )

    def tensors(refs):
        out = []
        for name, node_index, tensor_index, *_ in refs:
            layer = created[name]
            node = layer._inbound_nodes[node_index - first_node_offset(layer)]
            out.append(nest.flatten(node.output_tensors)[tensor_index])
        return out

    return tensors(config["input_layers"]), tensors(config["output_layers"])


def sequential_config(model) -> dict:
    """A Sequential model's config: its name and its layers (first the InputLayer made
    from its first layer's input shape, or added; not one made by build or by data)."""
    layers = [serialize_keras_object(layer) for layer in model.layers]
    first = model._input_layer
    if first is not None and not getattr(first, "_built_by_model", False):
        layers.insert(0, serialize_keras_object(first))
    return {"name": model.name, "layers": layers}


def saved_config(model) -> dict:
    """The config `model.save` writes: get_config(), plus, for a Sequential whose input
    came from build() or data, its "build_input_shape" (Keras' legacy serialization
    adds it so that the loaded model can be built before its weights are set)."""
    config = model.get_config()
    first = getattr(model, "_input_layer", None)
    if first is not None and getattr(first, "_built_by_model", False):
        config["build_input_shape"] = list(first._batch_input_shape)
    return config


def model_to_json(model, **kwargs) -> str:
    """`model.to_json()`: class name, config, keras_version and backend as JSON."""
    data = {
        "class_name": serialize_keras_object(model)["class_name"],
        "config": plain(model.get_config()),
        "keras_version": KERAS_VERSION,
        "backend": "tensorflow",
    }
    return json.dumps(data, **kwargs)


def model_from_config(config, custom_objects=None):
    """The model (or layer) a `{"class_name", "config"}` dict describes.

    Raises:
      TypeError: a list given (a Sequential's bare layer list is not a model config).
      ValueError: an unknown class name.
    """
    if isinstance(config, list):
        raise TypeError(
            "`model_from_config` expects a dictionary, not a list. Received: "
            f"config={config}. Did you meant to use `Sequential.from_config(config)`?"
        )
    return layer_configs.deserialize(config, custom_objects=custom_objects)


def model_from_json(json_string, custom_objects=None):
    """The model `model.to_json()` described.

    Raises:
      ValueError: an unknown class name, or text that is not JSON.
    """
    return model_from_config(json.loads(json_string), custom_objects=custom_objects)
