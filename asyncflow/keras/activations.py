"""`tf.keras.activations`: the activation functions by name, and `get`/`serialize`.

`softmax` normalises over the last axis (as `nn.softmax` does) and accepts `axis`;
`relu` takes Keras' `alpha`, `max_value` and `threshold`.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import math_composites
from asyncflow.keras.serialization import deserialize_keras_object, get_custom_objects
from asyncflow.keras.utils import unknown_object
from asyncflow.ops import math_ops, nn_ops, special_math_ops

__all__ = [
    "linear",
    "relu",
    "elu",
    "selu",
    "softmax",
    "sigmoid",
    "hard_sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "exponential",
    "swish",
    "mish",
    "gelu",
    "get",
    "serialize",
    "deserialize",
]


def linear(x):
    return x


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    """max(x, 0), with a slope `alpha` below `threshold` and a cap `max_value`."""
    if alpha == 0.0 and max_value is None and threshold == 0.0:
        return nn_ops.relu(x)
    x = ops.convert_to_tensor(x)
    negative = None
    if alpha != 0.0:
        negative = nn_ops.relu(-x + threshold) if threshold != 0 else nn_ops.relu(-x)
    if threshold != 0.0:
        x = x * math_ops.cast(math_ops.greater(x, threshold), x.dtype)
    else:
        x = nn_ops.relu(x)
    if max_value is not None:
        x = math_ops.minimum(x, math_ops.cast(max_value, x.dtype))
    if negative is not None:
        x = x - alpha * negative
    return x


def elu(x, alpha=1.0):
    out = nn_ops.elu(x)
    return out if alpha == 1 else math_composites.where_v2(x > 0, out, alpha * out)


def selu(x):
    return nn_ops.selu(x)


def softmax(x, axis=-1):
    x = ops.convert_to_tensor(x)
    out = nn_ops.softmax(x, axis=axis)
    out._keras_logits = x  # (TF's: the crossentropies then work from the logits)
    return out


def sigmoid(x):
    x = ops.convert_to_tensor(x)
    out = math_ops.sigmoid(x)
    out._keras_logits = x
    return out


def hard_sigmoid(x):
    x = 0.2 * ops.convert_to_tensor(x) + 0.5
    return math_ops.minimum(math_ops.maximum(x, 0.0), 1.0)


def tanh(x):
    return math_ops.tanh(x)


def softplus(x):
    return nn_ops.softplus(x)


def softsign(x):
    return nn_ops.softsign(x)


def exponential(x):
    return math_ops.exp(x)


def swish(x):
    return x * math_ops.sigmoid(x)


def mish(x):
    """x * tanh(softplus(x)): smooth, non-monotonic, about relu for large |x|."""
    return x * math_ops.tanh(nn_ops.softplus(x))


def gelu(x, approximate=False):
    """x * Phi(x) (the normal CDF); with `approximate`, its tanh approximation."""
    x = ops.convert_to_tensor(x)
    if approximate:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + math_ops.tanh(inner))
    return 0.5 * x * (1.0 + special_math_ops.erf(x / 1.4142135623730951))


_BY_NAME = {
    f.__name__: f
    for f in (
        linear,
        relu,
        elu,
        selu,
        softmax,
        sigmoid,
        hard_sigmoid,
        tanh,
        softplus,
        softsign,
        exponential,
        swish,
        mish,
        gelu,
    )
}


def get(identifier):
    """The activation function named `identifier` (None means linear).

    Raises:
      ValueError: an unknown name or a non-callable identifier.
    """
    if identifier is None:
        return linear
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier in get_custom_objects():
            return get_custom_objects()[identifier]
        if identifier not in _BY_NAME:
            raise unknown_object("activation function", identifier)
        return _BY_NAME[identifier]
    if callable(identifier):
        return identifier
    raise TypeError(f"Could not interpret activation function identifier: {identifier}")


def serialize(activation, use_legacy_format=False) -> str:
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return getattr(activation, "__name__", str(activation))


def deserialize(name, custom_objects=None, use_legacy_format=False):
    """The activation function `name` names (custom objects first).

    Raises:
      ValueError: an unknown name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(name, _BY_NAME, custom_objects, "activation function")
