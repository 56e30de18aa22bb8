"""`tf.keras.utils.model_to_dot` and `plot_model`, as TF 2.21's tf_keras: the model's
layers as pydot record nodes (named by `id(layer)`, labelled with the layer's name and
class, and as asked its dtype, input and output shapes, activation and trainability) and
an edge per call from each inbound layer, in a `pydot.Dot` (a `pydot.Cluster` with
`subgraph=True`).  With expand_nested a nested functional or Sequential model is a
cluster ("cluster_<name>") of its own layers, drawn the same way, the edges into it going
to its first node and those out of it leaving its last (of its own nodes, not of the
clusters within it, as TF's).  pydot is optional (the `plot`
extra): without it both raise TF's ImportError; plot_model also needs graphviz's `dot`
program (TF's check: pydot rendering an empty graph), and writes the file in the format
its extension names.

Invariant: the dot source is TF's for the same model (same labels, attributes and edge
order), up to the node names, which are Python object ids in both.
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["model_to_dot", "plot_model"]

_PYDOT_MESSAGE = "You must install pydot (`pip install pydot`) for model_to_dot to work."
_GRAPHVIZ_MESSAGE = (
    "You must install pydot (`pip install pydot`) and install graphviz (see "
    "instructions at https://graphviz.gitlab.io/download/) for plot_model to work."
)
_UNBUILT_MESSAGE = (
    "This model has not yet been built. Build the model first by calling `build()` or "
    "by calling the model on a batch of data."
)


def _pydot():
    try:
        import pydot
    except ImportError:
        return None
    return pydot


def _have_graphviz() -> bool:
    """Whether pydot can render (graphviz's `dot` on the PATH): TF's check."""
    pydot = _pydot()
    if pydot is None:
        return False
    try:
        pydot.Dot.create(pydot.Dot())
        return True
    except OSError:  # (`dot` not found; pydot 4 raises FileNotFoundError)
        return False
    except Exception as e:  # noqa: BLE001 - pydot's own failure (PydotException, ...)
        if type(e).__module__.startswith("pydot"):
            return False
        raise


def _layer_range(model, layer_range):
    """[first, last + 1] of the layers whose names match layer_range's two patterns
    (indexes of `model.layers`, as TF's)."""
    if len(layer_range) != 2:
        raise ValueError(
            "layer_range must be of shape (2,). Received: "
            f"layer_range = {layer_range} of length {len(layer_range)}"
        )
    if not isinstance(layer_range[0], str) or not isinstance(layer_range[1], str):
        raise ValueError(f"layer_range should contain string type only. Received: {layer_range}")
    names = [layer.name for layer in model.layers]
    lower = [i for i, n in enumerate(names) if re.match(layer_range[0], n)]
    upper = [i for i, n in enumerate(names) if re.match(layer_range[1], n)]
    if not lower or not upper:
        raise ValueError(
            "Passed layer_names do not match the layer names in the model. "
            f"Received: {layer_range}"
        )
    bounds = [min(upper), max(lower) + 1] if min(lower) > max(upper) else [
        min(lower), max(upper) + 1]  # fmt: skip
    if bounds[0] < 0 or bounds[1] > len(names):
        raise ValueError(
            f"Both values in layer_range should be in range (0, {len(names)}. Received: {bounds}"
        )
    return bounds


def _all_layers(model) -> list:
    """The layers TF draws: a Sequential's with its input layer first."""
    from asyncflow.keras.training import Sequential

    if isinstance(model, Sequential):
        return list(model._layers)
    return list(model.layers)


def _shape_text(shape) -> str:
    return str(shape).replace("{", r"\{").replace("}", r"\}")


def _is_wrapper(layer) -> bool:
    """TF's Wrapper layers (TimeDistributed, Bidirectional, ...): a layer around one."""
    from asyncflow.keras.engine import Layer
    from asyncflow.keras.layers_more import TimeDistributed
    from asyncflow.keras.layers_rnn_cells import Wrapper
    from asyncflow.keras.recurrent import Bidirectional

    return isinstance(layer, (Wrapper, TimeDistributed, Bidirectional)) and isinstance(
        getattr(layer, "layer", None), Layer
    )


def _is_expanded(layer, expand_nested) -> bool:
    """A nested network drawn as its own cluster (expand_nested)."""
    from asyncflow.keras.network import Network

    return expand_nested and isinstance(layer, Network) and layer._is_graph_network


def _label(layer, show_shapes, show_dtype, show_layer_names, show_layer_activations,
           show_trainable) -> str:  # fmt: skip
    from asyncflow.keras.engine import InputLayer

    name, label = layer.name, type(layer).__name__
    if _is_wrapper(layer):
        name = f"{name}({layer.layer.name})"
        label = f"{label}({type(layer.layer).__name__})"
    activation = getattr(layer, "activation", None) if show_layer_activations else None
    if activation is not None:
        text = getattr(activation, "name", None) or getattr(activation, "__name__", None)
        label = "{" + f"{label}|{text or str(activation)}" + "}"
    if show_layer_names:
        label = f"{name}|{label}"
    if show_dtype:
        label = f"{label}|{'?' if layer.dtype is None else layer.dtype}"
    if show_shapes:
        try:
            outputs = _shape_text(layer.output_shape)
        except AttributeError:
            outputs = "?"
        if isinstance(layer, InputLayer):
            inputs = outputs  # (TF's input layers list their shape as their input's)
        else:
            try:
                inputs = _shape_text(layer.input_shape)
            except AttributeError:
                inputs = "?"
        label = "{" + label + "}|{input:|output:}|{{" + inputs + "}|{" + outputs + "}}"
    if show_trainable:
        label = f"{'T' if layer.trainable else 'NT'}|{label}"
    return label


def model_to_dot(model, show_shapes=False, show_dtype=False, show_layer_names=True,
                 rankdir="TB", expand_nested=False, dpi=96, subgraph=False, layer_range=None,
                 show_layer_activations=False, show_trainable=False):  # fmt: skip
    """The model as a `pydot.Dot` (a `pydot.Cluster` when `subgraph`), as TF's.

    Raises:
      ValueError: a model not built, or a bad layer_range.
      ImportError: pydot is not installed (TF's message).
    """
    if not model.built:
        raise ValueError(_UNBUILT_MESSAGE)
    pydot = _pydot()
    if pydot is None:
        raise ImportError(_PYDOT_MESSAGE)
    from asyncflow.keras.backend_config import keras_history
    from asyncflow.keras.engine import InputLayer

    if subgraph:
        dot = pydot.Cluster(style="dashed", graph_name=model.name)
        dot.set("label", model.name)
        dot.set("labeljust", "l")
    else:
        dot = pydot.Dot()
        dot.set("rankdir", rankdir)
        dot.set("concentrate", True)
        dot.set("dpi", dpi)
        dot.set_node_defaults(shape="record")
    bounds = _layer_range(model, layer_range) if layer_range is not None else None
    if not getattr(model, "_is_graph_network", False):
        dot.add_node(pydot.Node(str(id(model)), label=model.name))
        return dot
    layers = _all_layers(model)
    # A nested network expanded is a cluster of its own layers (drawn as this model is);
    # the edges into it go to its first layer, the edges out of it leave its last one.
    first, last = {}, {}
    for i, layer in enumerate(layers):
        if bounds and (i < bounds[0] or i >= bounds[1]):
            continue
        if _is_expanded(layer, expand_nested):
            cluster = model_to_dot(
                layer, show_shapes=show_shapes, show_dtype=show_dtype,
                show_layer_names=show_layer_names, rankdir=rankdir, expand_nested=True,
                dpi=dpi, subgraph=True, show_layer_activations=show_layer_activations,
                show_trainable=show_trainable,
            )  # fmt: skip
            # (TF's ends: the cluster's own first and last nodes, not its clusters')
            nodes = cluster.get_nodes()
            first[id(layer)], last[id(layer)] = nodes[0].get_name(), nodes[-1].get_name()
            dot.add_subgraph(cluster)
            continue
        label = _label(layer, show_shapes, show_dtype, show_layer_names,
                       show_layer_activations, show_trainable)  # fmt: skip
        dot.add_node(pydot.Node(str(id(layer)), label=label))
    in_model = {id(n) for n in model._nodes}
    for i, layer in enumerate(layers):
        if bounds and (i <= bounds[0] or i >= bounds[1]) or isinstance(layer, InputLayer):
            continue
        for node in layer._inbound_nodes:
            if id(node) not in in_model:
                continue
            for tensor in node.keras_inputs:
                source = keras_history(tensor)[0]
                src = last.get(id(source), str(id(source)))
                dst = first.get(id(layer), str(id(layer)))
                if not (id(source) in last or id(layer) in first) and (
                    not dot.get_node(src) or not dot.get_node(dst)
                ):
                    # (TF's assert: a layer_range that cuts the model's calls)
                    raise AssertionError()
                if not dot.get_edge(src, dst):
                    dot.add_edge(pydot.Edge(src, dst))
    return dot


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False,
               show_layer_names=True, rankdir="TB", expand_nested=False, dpi=96,
               layer_range=None, show_layer_activations=False, show_trainable=False):  # fmt: skip
    """model_to_dot's graph drawn by graphviz into `to_file` (its extension the format,
    png without one); an IPython Image of it where IPython is installed (not for pdf),
    else None.

    Raises:
      ValueError: a model not built.
      ImportError: pydot or graphviz is not installed (TF's message; in IPython it is
        printed instead, and nothing is drawn).
    """
    if not model.built:
        raise ValueError(_UNBUILT_MESSAGE)
    if not _have_graphviz():
        if "IPython.core.magics.namespace" in sys.modules:
            print(_GRAPHVIZ_MESSAGE)
            return None
        raise ImportError(_GRAPHVIZ_MESSAGE)
    dot = model_to_dot(model, show_shapes=show_shapes, show_dtype=show_dtype,
                       show_layer_names=show_layer_names, rankdir=rankdir,
                       expand_nested=expand_nested, dpi=dpi, layer_range=layer_range,
                       show_layer_activations=show_layer_activations,
                       show_trainable=show_trainable)  # fmt: skip
    to_file = os.fspath(to_file)
    extension = os.path.splitext(to_file)[1][1:] or "png"
    dot.write(to_file, format=extension)
    if extension != "pdf":
        try:
            from IPython import display
        except ImportError:
            return None
        return display.Image(filename=to_file)
    return None
