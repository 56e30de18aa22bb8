"""Keras' `Layer` base in TF1 graph mode, its call history, `InputLayer` and `Input`.

A layer is named when it is made ("dense", "dense_1", ... uniquified per graph by
backend.unique_object_name).  Calling it on graph tensors opens a name scope named after
it, builds its weights once (resource variables "<scope>/dense/kernel:0" made from
an initializer function, so their initial values are drawn from the graph seed as TF
draws them), runs `call`, and -- when its inputs are Keras tensors (from `Input` or other
layers) -- records a node: which layer made each output tensor from which inputs.
Models walk those nodes back from their outputs to their inputs.  Layers held in
attributes are sublayers: their weights count as the holder's.

Invariant: a layer's `weights` is its trainable weights then its non-trainable ones,
each in creation order, as Keras lists them (get_weights/set_weights use that order).
"""

from __future__ import annotations

import collections
import inspect
import re

import numpy as np

from asyncflow import dtypes, nest
from asyncflow import graph as ops
from asyncflow import resource_variable as _rv
from asyncflow.keras import backend, backend_config
from asyncflow.keras import initializers as _initializers
from asyncflow.layer_classes import InputSpec
from asyncflow.ops import array_ops, cast_ops

__all__ = ["Layer", "InputLayer", "Input", "InputSpec", "keras_history", "input_masks"]

keras_history = backend_config.keras_history
_HISTORY = backend_config.HISTORY


def _snake_case(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if s[0] != "_" else "private" + s


def _graph_element(u):
    return u.op if isinstance(u, ops.Tensor) else u


def _reachable_from(tensors) -> set:
    """The operations reachable forward from `tensors`, through data and control edges
    (an update op in a cond reaches its inputs through a control dependency only)."""
    seen: set = set()
    stack = [op for t in tensors if isinstance(t, ops.Tensor) for op in t.consumers()]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(c for t in op.outputs for c in t.consumers())
            stack.extend(op._control_outputs)
    return seen


class Node:
    """One call of a layer: its input tensors, output tensors and the layers behind
    the inputs."""

    def __init__(self, layer, input_tensors, output_tensors, arguments):
        self.layer = layer
        self.input_tensors = input_tensors
        self.output_tensors = output_tensors
        self.arguments = arguments

    @property
    def keyword_tensors(self) -> list:
        """The Keras tensors among the call's keyword arguments (a MultiHeadAttention's
        attention_mask, an Attention's mask list, a custom layer's tensor argument):
        Keras links the call to the layers that made them, as to its inputs."""
        return [
            t
            for t in nest.flatten(self.arguments)
            if isinstance(t, ops.Tensor) and keras_history(t) is not None
        ]

    @property
    def keras_inputs(self) -> list:
        """Every Keras tensor the call took: its inputs, then its keyword tensors."""
        return nest.flatten(self.input_tensors) + self.keyword_tensors


# Layer class -> its config spec (keras/layer_configs.py fills this, one table for all
# of Keras' layers); get_config/from_config use the spec of the nearest class in the MRO.
CONFIG_SPECS: dict = {}


def _spec_of(cls):
    for klass in cls.__mro__:
        if klass in CONFIG_SPECS:
            return CONFIG_SPECS[klass]
    return None


def _has_own_arguments(cls) -> bool:
    """Whether the constructor names arguments beyond the base config's keys (TF's
    Keras then needs the class's own get_config)."""
    params = inspect.signature(cls.__init__).parameters.values()
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return any(n not in ("self", "name", "trainable", "dtype", "batch_input_shape") for n in named)


# TF1 Keras' dtype rule (the "v1 dtype behaviour", tf.compat.v1's default): a layer
# given no dtype takes its first (floating) input's at its first call.  TF 2's rule
# (enable_v2_dtype_behavior): such a layer computes in floatx, its floating inputs
# cast to it.
_V2_DTYPE_BEHAVIOR = [False]


def enable_v2_dtype_behavior() -> None:
    """`tf.compat.v1.keras.layers.enable_v2_dtype_behavior`: layers without a dtype
    compute in floatx (float32), casting floating inputs to it, as in TF 2."""
    _V2_DTYPE_BEHAVIOR[0] = True


def disable_v2_dtype_behavior() -> None:
    """`tf.compat.v1.keras.layers.disable_v2_dtype_behavior`: back to TF1's rule, a
    layer without a dtype takes its first input's."""
    _V2_DTYPE_BEHAVIOR[0] = False


_LAYER_KWARGS = {
    "input_shape",
    "batch_input_shape",
    "batch_size",
    "weights",
    "activity_regularizer",
    "autocast",
    "input_dim",
    "dynamic",
}


class Layer:
    """`tf.keras.layers.Layer`: subclasses make weights in `build(input_shape)` with
    `add_weight` and compute in `call(inputs, ...)`.

    Raises:
      TypeError: an unknown keyword argument to the constructor.
    """

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        for k in kwargs:
            if k not in _LAYER_KWARGS:
                raise TypeError(f"Keyword argument not understood: {k}")
        self._trainable = trainable
        self._name = name or backend.unique_object_name(_snake_case(type(self).__name__))
        self._dtype = None if dtype is None else dtypes.as_dtype(dtype).name
        self.built = False
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self._losses: list = []
        self._updates: list = []
        self._call_inputs: list = []  # the inputs of the calls in progress, innermost last
        self._inbound_nodes: list = []
        self.input_spec = None
        self.supports_masking = False
        self._initial_weights = kwargs.get("weights")
        self.activity_regularizer = kwargs.get("activity_regularizer")
        if "input_dim" in kwargs and "input_shape" not in kwargs:
            kwargs["input_shape"] = (kwargs["input_dim"],)
        if "batch_input_shape" in kwargs:
            self._batch_input_shape = tuple(kwargs["batch_input_shape"])
        elif "input_shape" in kwargs:
            shape = kwargs["input_shape"]
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            self._batch_input_shape = (kwargs.get("batch_size"),) + shape

    # -- naming and state ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> str:
        return self._dtype or backend.floatx()

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value) -> None:
        self._trainable = bool(value)
        for layer in self._sublayers():
            layer.trainable = value

    def __setattr__(self, name, value):
        # Layers held in attributes (or lists of them) are this layer's sublayers: their
        # weights are its weights, as Keras tracks them.
        if not name.startswith("_"):
            items = value if isinstance(value, (list, tuple)) else [value]
            tracked = self.__dict__.setdefault("_tracked_layers", [])
            for item in items:
                if isinstance(item, Layer) and not any(item is t for t in tracked):
                    tracked.append(item)
        object.__setattr__(self, name, value)

    def _sublayers(self) -> list:
        return list(self.__dict__.get("_tracked_layers", []))

    @property
    def trainable_weights(self) -> list:
        if not self.trainable:
            return []
        out = list(self._trainable_weights)
        for layer in self._sublayers():
            out += [w for w in layer.trainable_weights if not any(w is o for o in out)]
        return out

    @property
    def non_trainable_weights(self) -> list:
        if self.trainable:
            out = list(self._non_trainable_weights)
            for layer in self._sublayers():
                out += layer.non_trainable_weights
            return out
        out = list(self._trainable_weights) + list(self._non_trainable_weights)
        for layer in self._sublayers():
            out += layer.weights
        return out

    @property
    def weights(self) -> list:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def losses(self) -> list:
        out = list(self._losses)
        for layer in self._sublayers():
            out += layer.losses
        return out

    @property
    def updates(self) -> list:
        if not self.trainable:
            return []
        out = list(self._updates)
        for layer in self._sublayers():
            out += layer.updates
        return out

    def add_loss(self, losses, inputs=None) -> None:
        self._losses += list(losses) if isinstance(losses, (list, tuple)) else [losses]

    def add_update(self, updates, inputs=None) -> None:
        updates = list(updates) if isinstance(updates, (list, tuple)) else [updates]
        # As Keras does, an update is conditional on the inputs it was made from: a
        # nested model's update made on its own Input is not one of its caller's.
        if self._call_inputs:
            relevant = self._call_inputs[-1]
        else:
            nodes = self._inbound_nodes
            relevant = [t for node in nodes for t in nest.flatten(node.input_tensors)]
        reachable = _reachable_from(relevant)
        for u in updates:
            if isinstance(u, (ops.Tensor, ops.Operation)):
                u._unconditional_update = _graph_element(u) not in reachable
        self._updates += updates

    def get_updates_for(self, inputs) -> list:
        """The updates made from `inputs` (those reachable from them), or with
        `inputs=None` those made from no input at all."""
        if inputs is None:
            return [u for u in self.updates if getattr(u, "_unconditional_update", True)]
        reachable = _reachable_from(nest.flatten(inputs))
        return [
            u
            for u in self.updates
            if not getattr(u, "_unconditional_update", True) and _graph_element(u) in reachable
        ]

    # -- weights --------------------------------------------------------------------------------

    def add_weight(
        self,
        name=None,
        shape=None,
        dtype=None,
        initializer=None,
        regularizer=None,
        trainable=None,
        constraint=None,
        **kwargs,
    ):
        """A resource variable `name` of this layer, initialized from `initializer`
        (glorot_uniform for floats, zeros otherwise, as Keras does)."""
        dtype = dtypes.as_dtype(dtype or self.dtype)
        shape = tuple(shape or ())
        trainable = True if trainable is None else trainable
        initializer = _initializers.get(initializer)
        if initializer is None:
            if dtype.is_floating:
                initializer = _initializers.glorot_uniform()
            else:
                initializer = _initializers.zeros()
        variable = _rv.ResourceVariable(
            lambda: initializer(shape, dtype=dtype),
            name=name,
            dtype=dtype,
            trainable=trainable,
            constraint=constraint,
        )
        if regularizer is not None:
            with ops.name_scope(name + "/Regularizer"):
                self._losses.append(regularizer(variable))
        if trainable:
            self._trainable_weights.append(variable)
        else:
            self._non_trainable_weights.append(variable)
        return variable

    def _trackable_children(self) -> list:
        """The layer's own weights under their short names ("kernel", "moving_mean") and
        its sublayers under the attributes holding them ("cell", "forward_layer"), which
        key them in object-based checkpoints as Keras tracks them; a layer with a
        sublayer held by no attribute lists all its weights as its own."""
        named = self._named_sublayers()
        if named is None:
            return [(w.op.name.split("/")[-1], w) for w in self.weights]
        own = list(self._trainable_weights) + list(self._non_trainable_weights)
        return [(w.op.name.split("/")[-1], w) for w in own] + named

    def _legacy_trackable_children(self) -> list:
        """The children asyncflow gave a layer holding layers before it keyed them as
        Keras does: every weight, its sublayers' too, under its short name (an RNN's
        "kernel" beside its "cell"); a name two weights share is left out (those
        checkpoints failed to write). Checkpoint restores fall back on these for a key
        the layer's children lack, so checkpoints written then still load."""
        if not self._sublayers():
            return []
        pairs = [(w.op.name.split("/")[-1], w) for w in self.weights]
        counts = collections.Counter(name for name, _ in pairs)
        return [(name, w) for name, w in pairs if counts[name] == 1]

    def _named_sublayers(self):
        """(attribute, sublayer or list of sublayers) for each attribute of the layer that
        holds its sublayers, in assignment order; [] for a layer without sublayers, None
        when a sublayer is held by no attribute."""
        subs = self._sublayers()
        if not subs:
            return []
        out, found = [], set()
        for attr, value in vars(self).items():
            items = value if isinstance(value, list) and value else [value]
            if attr == "_tracked_layers" or not all(
                any(item is s for s in subs) for item in items
            ):
                continue
            if any(id(item) in found for item in items):
                continue
            found.update(id(item) for item in items)
            out.append((attr, value))
        return out if all(id(s) in found for s in subs) else None

    def get_weights(self) -> list:
        return backend.batch_get_value(self.weights)

    def set_weights(self, weights) -> None:
        """Assign `weights` (numpy arrays, in `weights` order).

        Raises:
          ValueError: a different number of arrays, or an array of another shape.
        """
        backend.set_checked_weights(self.weights, weights, f'layer "{self.name}"', "layer")

    def count_params(self) -> int:
        if not self.built:
            raise ValueError(
                f"You tried to call `count_params` on layer {self.name}, but the layer isn't "
                "built. You can build it manually via: "
                f"`{self.name}.build(batch_input_shape)`."
            )
        return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in self.weights))

    # -- calling --------------------------------------------------------------------------------

    def build(self, input_shape) -> None:
        self.built = True

    def call(self, inputs, *args, **kwargs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def _maybe_build(self, inputs) -> None:
        if self.built:
            return
        shapes = nest.map_structure(lambda t: t.shape, inputs)
        # (kept as Keras keeps it: a SavedModel's layer metadata records it, and a loader
        # rebuilds the layer from its config with it)
        self._build_input_shape = shapes
        self.build(shapes)
        self.built = True

    def compute_mask(self, inputs, mask=None):
        """The outputs' mask: the input mask unchanged for a layer that supports masking,
        else None.

        Raises:
          TypeError: a mask given to a layer that does not support masking.
        """
        if not self.supports_masking:
            if any(m is not None for m in nest.flatten(mask)):
                raise TypeError(
                    f"Layer {self.name} does not support masking, but was passed an "
                    f"input_mask: {mask}"
                )
            return None
        return mask

    def __call__(self, inputs, *args, **kwargs):
        inputs = nest.map_structure(_as_tensor, inputs)
        inputs = self._apply_dtype_rule(inputs)
        # The node records the caller's arguments only: a mask found on the inputs is
        # found again on the new inputs when the network is re-applied.
        recorded = dict(kwargs)
        previous_mask = kwargs["mask"] if "mask" in kwargs else input_masks(inputs)
        if "mask" not in kwargs and previous_mask is not None and _takes_mask(self):
            kwargs["mask"] = previous_mask
        with ops.name_scope(self.name):
            self._maybe_build(inputs)
            self._call_inputs.append(nest.flatten(inputs))
            try:
                outputs = self.call(inputs, *args, **kwargs)
            finally:
                self._call_inputs.pop()
            outputs = _copy_passed_through(inputs, outputs)
            if self.activity_regularizer is not None:
                with ops.name_scope("ActivityRegularizer"):
                    for out in nest.flatten(outputs):
                        self._losses.append(self.activity_regularizer(out))
            self._set_output_masks(inputs, outputs, previous_mask)
        if self._initial_weights is not None:
            self.set_weights(self._initial_weights)
            self._initial_weights = None
        self._record(inputs, outputs, recorded)
        return outputs

    def _apply_dtype_rule(self, inputs):
        if isinstance(self, InputLayer) or hasattr(self, "_is_graph_network"):
            return inputs
        first = next((t for t in nest.flatten(inputs) if isinstance(t, ops.Tensor)), None)
        if first is None or not first.dtype.base_dtype.is_floating:
            return inputs
        if not _V2_DTYPE_BEHAVIOR[0]:
            if self._dtype is None and not self.built:
                self._dtype = first.dtype.base_dtype.name
            return inputs
        target = dtypes.as_dtype(self.dtype)
        if not target.is_floating:
            return inputs

        def cast(t):
            if isinstance(t, ops.Tensor) and t.dtype.base_dtype.is_floating and \
                    t.dtype.base_dtype != target:  # fmt: skip
                return cast_ops.cast(t, target)
            return t

        return nest.map_structure(cast, inputs)

    def _set_output_masks(self, inputs, outputs, previous_mask) -> None:
        flat = [t for t in nest.flatten(outputs) if isinstance(t, ops.Tensor)]
        if flat and all(t._keras_mask is not None for t in flat):
            return  # `call` set them itself
        # Layers that neither support masking nor compute one drop the mask (no error).
        if not self.supports_masking and type(self).compute_mask is Layer.compute_mask:
            masks = None
        else:
            masks = self.compute_mask(inputs, previous_mask)
        if isinstance(outputs, (list, tuple)):
            masks = list(masks) if isinstance(masks, (list, tuple)) else [masks] * len(outputs)
            pairs = zip(outputs, masks, strict=False)
        else:
            pairs = [(outputs, masks[0] if isinstance(masks, (list, tuple)) else masks)]
        for t, m in pairs:
            if isinstance(t, ops.Tensor) and not any(t is x for x in nest.flatten(inputs)):
                t._keras_mask = m

    def _record(self, inputs, outputs, arguments) -> None:
        # As TF1's Keras: only a call on Keras tensors (Input or layer outputs) joins the
        # layer graph; a call on plain graph tensors leaves no node and no history.
        if not all(keras_history(x) is not None for x in nest.flatten(inputs)):
            return
        node_index = len(self._inbound_nodes)
        self._inbound_nodes.append(Node(self, inputs, outputs, arguments))
        for i, t in enumerate(nest.flatten(outputs)):
            if isinstance(t, ops.Tensor):
                # An output that is one of the inputs unchanged keeps its own history.
                if keras_history(t) is None or not any(t is x for x in nest.flatten(inputs)):
                    _HISTORY[t] = (self, node_index, i)

    def _node_attr(self, attr):
        if not self._inbound_nodes:
            raise AttributeError(
                f"Layer {self.name} is not connected, no input to return."
                if attr == "input_tensors"
                else f"Layer {self.name} has no inbound nodes."
            )
        value = getattr(self._inbound_nodes[0], attr)
        return value

    @property
    def input(self):
        return self._node_attr("input_tensors")

    @property
    def output(self):
        return self._node_attr("output_tensors")

    @property
    def input_shape(self):
        if not self._inbound_nodes:
            raise AttributeError(
                f'The layer "{self.name}" has never been called and thus has no defined input '
                "shape. Note that the `input_shape` property is only available for Functional "
                "and Sequential models."
            )
        return nest.map_structure(backend.int_shape, self.input)

    @property
    def output_shape(self):
        if not self._inbound_nodes:
            raise AttributeError(
                "The layer has never been called and thus has no defined output shape."
            )
        return nest.map_structure(backend.int_shape, self.output)

    def get_config(self) -> dict:
        """The layer's constructor arguments as JSON-able values (TF's Keras config:
        name, trainable, dtype -- None until the layer is built or given one --,
        batch_input_shape when given, then the class's own keys)."""
        config = {"name": self.name, "trainable": self.trainable, "dtype": self._config_dtype()}
        if hasattr(self, "_batch_input_shape"):
            config["batch_input_shape"] = self._batch_input_shape
        spec = _spec_of(type(self))
        if spec is not None:
            config.update(spec.config(self))
        elif type(self).get_config is Layer.get_config and _has_own_arguments(type(self)):
            raise NotImplementedError(
                "Layers with arguments in `__init__` must override `get_config`."
            )
        return config

    def _config_dtype(self):
        if self._dtype is not None:
            return self._dtype
        for node in self._inbound_nodes:
            # A layer's dtype is its first input's once it is called (TF1 Keras infers it).
            for t in nest.flatten(node.input_tensors):
                if isinstance(t, ops.Tensor):
                    return t.dtype.base_dtype.name
        return backend.floatx() if self.built else None

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A new layer from `get_config()`'s dict.

        Raises:
          ValueError: a config key the class cannot take.
        """
        spec = _spec_of(cls)
        if spec is not None:
            config = spec.arguments(cls, config, custom_objects)
        return cls(**config)


def _copy_passed_through(inputs, outputs):
    """As TF1's Keras: in a functional model, an input returned unchanged (a linear
    Activation) becomes an identity op, so the layer gets a node of its own in the
    model's layer graph instead of vanishing from it."""
    flat = nest.flatten(inputs)
    if not flat or not all(keras_history(x) is not None for x in flat):
        return outputs

    def copy(t):
        if isinstance(t, ops.Tensor) and any(t is x for x in flat):
            return array_ops.identity(t)
        return t

    return nest.map_structure(copy, outputs)


def input_masks(inputs):
    """The Keras masks of `inputs` (same structure), or None when none has one."""
    masks = nest.map_structure(lambda t: getattr(t, "_keras_mask", None), inputs)
    return None if all(m is None for m in nest.flatten(masks)) else masks


_TAKES_MASK: dict = {}


def _takes_mask(layer) -> bool:
    cls = type(layer)
    if cls not in _TAKES_MASK:
        try:
            params = inspect.signature(layer.call).parameters
        except (TypeError, ValueError):
            params = {}
        _TAKES_MASK[cls] = "mask" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
    return _TAKES_MASK[cls]


def _as_tensor(x):
    if isinstance(x, ops.Tensor) or x is None:
        return x
    return ops.convert_to_tensor(x)


class InputLayer(Layer):
    """The layer behind `Input`: a placeholder named after the layer ("input_1", ...)
    whose shape is `(batch_size,) + input_shape`.

    Raises:
      ValueError: neither a shape nor an input tensor, or both input_shape and
        batch_input_shape.
    """

    @property
    def output_shape(self):
        # Keras reports an input layer's output shape as a one-item list (as its
        # model.summary() prints it).
        return [backend.int_shape(self.output)]

    def __init__(
        self,
        input_shape=None,
        batch_size=None,
        dtype=None,
        input_tensor=None,
        sparse=False,
        name=None,
        ragged=False,
        batch_input_shape=None,
        **kwargs,
    ):
        if input_shape is not None and batch_input_shape is not None:
            raise ValueError(
                "Only provide the input_shape OR batch_input_shape argument to InputLayer, "
                "not both at the same time."
            )
        if name is None:
            name = backend.unique_object_name("input", zero_based=False)
        super().__init__(name=name, dtype=dtype)
        if input_tensor is None:
            if batch_input_shape is None:
                if input_shape is None:
                    raise ValueError(
                        "You should provide either `input_shape` or `input_tensor` to InputLayer."
                    )
                batch_input_shape = (batch_size,) + tuple(input_shape)
            self._batch_input_shape = tuple(batch_input_shape)
            with ops.name_scope(""):
                input_tensor = backend.placeholder(
                    shape=self._batch_input_shape, dtype=self.dtype, name=self.name
                )
            self.is_placeholder = True
        else:
            self.is_placeholder = False
            self._batch_input_shape = backend.int_shape(input_tensor)
            self._dtype = input_tensor.dtype.base_dtype.name
        self.built = True
        self._record([], input_tensor, {})
        self._inbound_nodes[0].input_tensors = input_tensor

    def get_config(self) -> dict:
        return {
            "batch_input_shape": self._batch_input_shape,
            "dtype": self.dtype,
            "sparse": False,
            "ragged": False,
            "name": self.name,
            "optional": False,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        if config.pop("optional", False) or config.get("sparse") or config.get("ragged"):
            raise ValueError("InputLayer: optional, sparse and ragged inputs are not supported")
        return cls(**config)


def Input(  # noqa: N802 - Keras' name
    shape=None,
    batch_size=None,
    name=None,
    dtype=None,
    sparse=False,
    tensor=None,
    ragged=False,
    batch_shape=None,
    **kwargs,
):
    """A symbolic input: the placeholder of a new InputLayer, shape `(batch_size,) + shape`.

    Raises:
      ValueError: neither shape, batch_shape nor tensor given, or both shape and
        batch_shape.
    """
    if shape is not None and batch_shape is not None:
        raise ValueError(
            "Only provide the `shape` OR `batch_shape` argument to Input, not both at the same "
            "time."
        )
    if shape is None and batch_shape is None and tensor is None:
        raise ValueError(
            "Please provide to Input a `shape` or a `tensor` or a `type_spec` argument. Note "
            "that `shape` does not include the batch dimension."
        )
    if isinstance(shape, int):
        shape = (shape,)
    layer = InputLayer(
        input_shape=shape,
        batch_size=batch_size,
        dtype=dtype,
        input_tensor=tensor,
        name=name,
        batch_input_shape=batch_shape,
    )
    return layer.output
