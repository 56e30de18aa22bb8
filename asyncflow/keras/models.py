"""`tf.keras.models`: Model and Sequential, model configs (`model_from_config`,
`model_from_json`, `clone_model`) and whole-model files (`save_model`, `load_model`): Keras'
HDF5 files (saving.py) and its v3 `.keras` archives (saving_v3.py), picked by the path."""

from __future__ import annotations

from asyncflow import nest
from asyncflow.keras.engine import Input, InputLayer, keras_history
from asyncflow.keras.model_config import (
    first_node_offset,
    model_from_config,
    model_from_json,
    resolve_tensor_refs,
)
from asyncflow.keras.saving_api import load_model, save_model
from asyncflow.keras.training import Model, Sequential

__all__ = [
    "Model",
    "Sequential",
    "model_from_config",
    "model_from_json",
    "model_from_yaml",
    "clone_model",
    "save_model",
    "load_model",
]


def model_from_yaml(yaml_string, custom_objects=None):
    """Removed from Keras (a YAML loader could build arbitrary objects).

    Raises:
      RuntimeError: always, as TF 2.21 does.
    """
    raise RuntimeError(
        "Method `model_from_yaml()` has been removed due to security risk of arbitrary code "
        "execution. Please use `Model.to_json()` and `model_from_json()` instead."
    )


def clone_model(model, input_tensors=None, clone_function=None):
    """A model of the same structure with new layers (made from each layer's config;
    `clone_function(layer)` instead when given) and so new, freshly initialized weights.

    Raises:
      ValueError: a subclassed model, or input_tensors that do not match the inputs.
    """
    clone = clone_function or (lambda layer: type(layer).from_config(layer.get_config()))
    if isinstance(model, Sequential):
        layers = [clone(layer) for layer in model.layers]
        if input_tensors is not None:
            tensors = (
                input_tensors if isinstance(input_tensors, (list, tuple)) else [input_tensors]
            )
            if len(tensors) != 1:
                raise ValueError(
                    "To clone a `Sequential` model, we expect at most one tensor as part of "
                    f"`input_tensors`. Received: input_tensors={input_tensors}"
                )
            return Sequential([InputLayer(input_tensor=tensors[0])] + layers, name=model.name)
        if model._input_layer is not None:
            first = model._input_layer.get_config()
            layers.insert(0, InputLayer.from_config(first))
        return Sequential(layers, name=model.name)
    if not model._is_graph_network:
        raise ValueError(
            "Expected `model` argument to be a functional `Model` instance, but got a "
            f"subclassed model instead: {model}"
        )
    config = model.get_config()
    new_layers = {}
    for layer in model.layers:
        if isinstance(layer, InputLayer):
            continue
        new_layers[layer.name] = clone(layer)
    return _rebuild(model, config, new_layers, input_tensors)


def _rebuild(model, config, new_layers, input_tensors):
    """Replay `config`'s calls on the cloned layers (new Inputs, or `input_tensors`)."""
    made = {}
    inputs = []
    given = nest.flatten(input_tensors) if input_tensors is not None else None
    if given is not None and len(given) != len(model.inputs):
        raise ValueError(
            f"The model has {len(model.inputs)} inputs; input_tensors has {len(given)}"
        )
    for i, (name, _, _) in enumerate(config["input_layers"]):
        layer = model.get_layer(name)
        if given is not None:
            tensor = given[i]
            if keras_history(tensor) is None:
                # A plain tensor (an Estimator's features) becomes the clone's Input.
                tensor = Input(tensor=tensor, name=name)
        else:
            c = layer.get_config()
            tensor = Input(batch_shape=c["batch_input_shape"], dtype=c["dtype"], name=name)
        made[(name, 0, 0)] = tensor
        inputs.append(tensor)
    pending = [
        (entry["name"], i, node)
        for entry in config["layers"]
        for i, node in enumerate(entry["inbound_nodes"])
    ]
    while pending:
        rest = []
        for name, node_index, node in pending:
            refs = [(r[0], r[1], r[2]) for r in node]
            if not all(ref in made for ref in refs):
                rest.append((name, node_index, node))
                continue
            args = [made[ref] for ref in refs]
            kwargs = dict(node[0][3]) if len(node[0]) > 3 and node[0][3] else {}
            kwargs = resolve_tensor_refs(kwargs, lambda r: made.get((r[0], r[1], r[2])))
            if kwargs is None:  # (a keyword tensor not made yet)
                rest.append((name, node_index, node))
                continue
            out = new_layers[name](args[0] if len(args) == 1 else args, **kwargs)
            index = node_index + first_node_offset(new_layers[name])
            for t_index, t in enumerate(nest.flatten(out)):
                made[(name, index, t_index)] = t
        if len(rest) == len(pending):
            raise ValueError("clone_model: the model's layer calls cannot be replayed")
        pending = rest
    outputs = [made[(n, i, t)] for n, i, t, *_ in config["output_layers"]]
    return Model(inputs, outputs if len(outputs) > 1 else outputs[0], name=model.name)
