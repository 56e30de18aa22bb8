"""Keras' graph networks: the layers between a model's inputs and outputs, their
order, re-applying them to new inputs, and `summary()`.

The layers are found by walking the call history (engine.keras_history) back from the
outputs, through each call's inputs and the tensors among its keyword arguments; they
are ordered by depth (inputs first), ties by the order that walk first met them, which
is Keras' `model.layers` order.
"""

from __future__ import annotations

import numpy as np

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.keras import backend
from asyncflow.keras.engine import InputLayer, Layer, input_masks, keras_history

__all__ = ["Network"]


def _node_of(tensor):
    history = keras_history(tensor)
    if history is None:
        return None
    layer, node_index, _ = history
    return layer._inbound_nodes[node_index]


def _parents(node) -> list:
    if isinstance(node.layer, InputLayer):
        return []
    out = []
    for t in node.keras_inputs:
        parent = _node_of(t)
        if parent is not None:
            out.append(parent)
    return out


def map_graph(inputs, outputs):
    """(nodes deepest first, layers in Keras' order) of the network from `inputs` to
    `outputs`.

    Raises:
      ValueError: an output not made by Keras layers, or a graph input other than `inputs`
        (a disconnected graph).
    """
    finished, in_progress, post_order, layer_index = set(), set(), [], {}
    input_ids = {id(t) for t in inputs}

    def visit(tensor):
        node = _node_of(tensor)
        if node is None:
            raise ValueError(
                "Output tensors of a Functional model must be the output of a TensorFlow "
                f"`Layer` (thus holding past layer metadata). Found: {tensor}"
            )
        if id(node) in finished:
            return
        if id(node) in in_progress:
            raise ValueError(
                f"The tensor {tensor} at layer '{node.layer.name}' is part of a cycle."
            )
        layer_index.setdefault(node.layer, len(layer_index))
        in_progress.add(id(node))
        if not isinstance(node.layer, InputLayer):
            for t in node.keras_inputs:
                source = _node_of(t)
                if (
                    source is not None
                    and isinstance(source.layer, InputLayer)
                    and id(t) not in input_ids
                ):
                    raise ValueError(
                        f"Graph disconnected: cannot obtain value for tensor {t} at layer "
                        f'"{node.layer.name}". The following previous layers were accessed '
                        "without issue: []"
                    )
                visit(t)
        finished.add(id(node))
        in_progress.discard(id(node))
        post_order.append(node)

    for t in outputs:
        visit(t)
    node_depth, layer_depth = {}, {}
    for node in reversed(post_order):
        depth = max(node_depth.setdefault(id(node), 0), layer_depth.get(node.layer, 0))
        layer_depth[node.layer] = depth
        node_depth[id(node)] = depth
        for parent in _parents(node):
            node_depth[id(parent)] = max(depth + 1, node_depth.get(id(parent), 0))
    nodes = sorted(post_order, key=lambda n: -node_depth[id(n)])
    layers = sorted(layer_index, key=lambda lyr: (-layer_depth[lyr], layer_index[lyr]))
    return nodes, layers, node_depth


class Network(Layer):
    """A layer made of layers: `Model(inputs, outputs)`'s structure (without training)."""

    def __init__(self, inputs=None, outputs=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.inputs, self.outputs = [], []
        self._layers: list = []
        self._nodes: list = []
        self._node_depth: dict = {}
        self._is_graph_network = inputs is not None and outputs is not None
        if self._is_graph_network:
            self._init_graph(inputs, outputs)

    def _init_graph(self, inputs, outputs) -> None:
        self._is_graph_network = True
        self._nested_inputs, self._nested_outputs = inputs, outputs
        self.inputs = list(nest.flatten(inputs))
        self.outputs = list(nest.flatten(outputs))
        self._nodes, self._layers, self._node_depth = map_graph(self.inputs, self.outputs)
        counts: dict = {}
        for layer in self._layers:
            counts[layer.name] = counts.get(layer.name, 0) + 1
        for layer_name, n in counts.items():
            if n != 1:
                raise ValueError(
                    f'The name "{layer_name}" is used {n} times in the model. All layer names '
                    "should be unique."
                )
        self.built = True

    @property
    def layers(self) -> list:
        if self._is_graph_network:
            return list(self._layers)
        return super()._sublayers()

    def _sublayers(self) -> list:
        return self.layers

    def get_layer(self, name=None, index=None):
        """The layer named `name` (or at `index`).

        Raises:
          ValueError: no such layer, or neither/both of name and index given.
        """
        if index is not None and name is not None:
            raise ValueError(
                "Provide only a layer name or a layer index. Received: "
                f"index={index}, name={name}."
            )
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError(
                    f"Was asked to retrieve layer at index {index} but model only has "
                    f"{len(self.layers)} layers."
                )
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(
            f"No such layer: {name}. Existing layers are: {[lyr.name for lyr in self.layers]}."
        )

    @property
    def input_names(self) -> list:
        if not self._is_graph_network:
            return [f"input_{i + 1}" for i in range(len(self.inputs))]
        return [keras_history(t)[0].name for t in self.inputs]

    @property
    def output_names(self) -> list:
        if not self._is_graph_network:
            return [f"output_{i + 1}" for i in range(len(self.outputs))]
        return [keras_history(t)[0].name for t in self.outputs]

    @property
    def input(self):
        return self.inputs[0] if len(self.inputs) == 1 else list(self.inputs)

    @property
    def output(self):
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)

    @property
    def input_shape(self):
        shapes = [backend.int_shape(t) for t in self.inputs]
        return shapes[0] if len(shapes) == 1 else shapes

    @property
    def output_shape(self):
        shapes = [backend.int_shape(t) for t in self.outputs]
        return shapes[0] if len(shapes) == 1 else shapes

    def call(self, inputs, training=None, mask=None):
        """The network's layers applied, in order, to new `inputs`."""
        values = {}
        masks = nest.flatten(mask) if mask is not None else [None] * len(self.inputs)
        for ref, new, m in zip(self.inputs, nest.flatten(inputs), masks, strict=True):
            values[id(ref)] = new
            if m is not None:
                # The inner layers find the mask on their inputs, as on any Keras tensor.
                new._keras_mask = m
        for node in self._nodes:
            if isinstance(node.layer, InputLayer):
                continue
            args = nest.map_structure(lambda t: values[id(t)], node.input_tensors)
            # (keyword tensors from the layer graph are replaced too: an attention mask)
            kwargs = nest.map_structure(
                lambda v: values.get(id(v), v) if isinstance(v, ops.Tensor) else v,
                dict(node.arguments),
            )
            if training is not None and "training" in _call_args(node.layer):
                kwargs["training"] = training
            out = node.layer(args, **kwargs)
            for ref, new in zip(nest.flatten(node.output_tensors), nest.flatten(out), strict=True):
                values[id(ref)] = new
        outs = [values[id(t)] for t in self.outputs]
        return outs[0] if len(outs) == 1 else outs

    def __call__(self, inputs, *args, **kwargs):
        inputs = nest.map_structure(
            lambda x: x if isinstance(x, ops.Tensor) else ops.convert_to_tensor(x), inputs
        )
        recorded = dict(kwargs)
        if "mask" not in kwargs:
            masks = input_masks(inputs)
            if masks is not None:
                kwargs["mask"] = masks
        with ops.name_scope(self.name):
            outputs = self.call(inputs, *args, **kwargs)
        self._record(inputs, outputs, recorded)
        return outputs

    # -- summary --------------------------------------------------------------------------------

    def _sequential_like(self) -> bool:
        if not self._is_graph_network:
            return True
        depths = {}
        for node in self._nodes:
            depths.setdefault(self._node_depth[id(node)], []).append(node)
        for nodes in depths.values():
            if len(nodes) > 1 or len(nest.flatten(nodes[0].input_tensors)) > 1:
                return False
        node_ids = {id(n) for n in self._nodes}
        for layer in self.layers:
            if sum(1 for n in layer._inbound_nodes if id(n) in node_ids) > 1:
                return False
        return True

    def _summary_layers(self) -> list:
        return self.layers

    def summary(self, line_length=None, positions=None, print_fn=None, **kwargs) -> None:
        """Print the layers, their output shapes and parameter counts, as Keras does.

        Raises:
          ValueError: the model has not been built yet.
        """
        if not self.built:
            raise ValueError(
                "This model has not yet been built. Build the model first by calling "
                "`build()` or by calling the model on a batch of data."
            )
        print_fn = print_fn or print
        sequential = self._sequential_like()
        line_length = line_length or (65 if sequential else 98)
        fractions = positions or ([0.45, 0.85, 1.0] if sequential else [0.3, 0.6, 0.7, 1.0])
        if fractions[-1] <= 1:
            fractions = [int(line_length * p) for p in fractions]
        header = ["Layer (type)", "Output Shape", "Param #"]
        if not sequential:
            header.append("Connected to")
        print_fn(f'Model: "{self.name}"')
        print_fn("_" * line_length)
        _print_row(header, fractions, print_fn)
        print_fn("=" * line_length)
        node_ids = {id(n) for n in self._nodes}
        layers = self._summary_layers()
        for i, layer in enumerate(layers):
            fields = [
                f"{layer.name} ({type(layer).__name__})",
                _shape_text(layer),
                layer.count_params() if layer.built else "0 (unused)",
            ]
            if not sequential:
                links = []
                for node in layer._inbound_nodes:
                    if id(node) not in node_ids or isinstance(layer, InputLayer):
                        continue
                    for t in node.keras_inputs:
                        lyr, ni, ti = keras_history(t)
                        links.append(f"{lyr.name}[{ni}][{ti}]")
                fields.append(links)
            _print_row(fields, fractions, print_fn)
            print_fn(" " * line_length if i < len(layers) - 1 else " " * line_length)
        print_fn("=" * line_length)
        trainable = _unique(self.trainable_weights)
        frozen = _unique(self.non_trainable_weights)
        n_train, n_frozen = _count(trainable), _count(frozen)
        m_train, m_frozen = _memory(trainable), _memory(frozen)
        print_fn(f"Total params: {n_train + n_frozen} ({_readable(m_train + m_frozen)})")
        print_fn(f"Trainable params: {n_train} ({_readable(m_train)})")
        print_fn(f"Non-trainable params: {n_frozen} ({_readable(m_frozen)})")
        print_fn("_" * line_length)


def _call_args(layer) -> tuple:
    import inspect

    try:
        return tuple(inspect.signature(layer.call).parameters)
    except (TypeError, ValueError):
        return ()


def _shape_text(layer) -> str:
    first = getattr(layer, "_input_layer", None)
    if getattr(first, "_built_by_model", False) and not layer._inbound_nodes:
        # (a Sequential built by its first call in a subclassed model: Keras has no
        # shapes for it, as for a layer)
        return "multiple"
    try:
        shape = layer.output_shape
    except AttributeError:
        return "multiple"
    return str(shape)


def _print_row(fields, positions, print_fn) -> None:
    left = [str(f) for f in fields]
    while any(left):
        line = ""
        for col in range(len(left)):
            start = positions[col - 1] if col > 0 else 0
            space = 2 if col != len(positions) - 1 else 0
            cutoff = positions[col] - start - space - (1 if col == 0 else 0)
            fit = left[col][:cutoff]
            # Keras breaks long cells after a closing bracket or quote.
            breaks = [fit.find(x) + len(x) for x in ("),", "},", "],", "',") if fit.find(x) >= 0]
            if breaks:
                cutoff = min(breaks)
                fit = fit[:cutoff]
            line += (" " if col == 0 else "") + fit + " " * space
            left[col] = left[col][cutoff:]
            line += " " * (positions[col] - len(line))
        print_fn(line)


def _unique(weights) -> list:
    return list({id(w): w for w in weights}.values())


def _count(weights) -> int:
    return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in weights))


def _memory(weights) -> int:
    return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) * w.dtype.size for w in weights))


def _readable(size) -> str:
    for unit in ("Byte", "KB", "MB", "GB", "TB"):
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"
