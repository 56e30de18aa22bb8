"""`tf.keras.initializers` in TF1 graph mode: TF1's init_ops initializers (what Keras
uses when v2 behaviour is off), with Keras' own defaults where they differ
(RandomNormal/RandomUniform/TruncatedNormal draw at scale 0.05) and `get` by name.

An unseeded initializer takes its op seed from the graph seed's counter, so a program
with `set_random_seed` draws TF's numbers.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow.keras.serialization import (
    deserialize_keras_object,
    get_custom_objects,
    serialize_keras_object,
)
from asyncflow.keras.utils import unknown_object
from asyncflow.ops import init_ops
from asyncflow.ops.init_ops import (
    Constant,
    Identity,
    Initializer,
    Ones,
    Orthogonal,
    VarianceScaling,
    Zeros,
)

__all__ = [
    "Initializer",
    "Zeros",
    "Ones",
    "Constant",
    "RandomNormal",
    "RandomUniform",
    "TruncatedNormal",
    "VarianceScaling",
    "Orthogonal",
    "Identity",
    "zeros",
    "ones",
    "constant",
    "random_normal",
    "normal",
    "random_uniform",
    "uniform",
    "truncated_normal",
    "orthogonal",
    "identity",
    "glorot_uniform",
    "glorot_normal",
    "he_normal",
    "he_uniform",
    "lecun_normal",
    "lecun_uniform",
    "get",
    "serialize",
    "deserialize",
]


class RandomNormal(init_ops.RandomNormal):
    """Normal draws, Keras' default stddev 0.05."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None, dtype=dtypes.float32):
        super().__init__(mean=mean, stddev=stddev, seed=seed, dtype=dtype)


class RandomUniform(init_ops.RandomUniform):
    """Uniform draws in [-0.05, 0.05) by default."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None, dtype=dtypes.float32):
        super().__init__(minval=minval, maxval=maxval, seed=seed, dtype=dtype)


class TruncatedNormal(init_ops.TruncatedNormal):
    """Truncated normal draws, Keras' default stddev 0.05."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None, dtype=dtypes.float32):
        super().__init__(mean=mean, stddev=stddev, seed=seed, dtype=dtype)


def _scaling(cls_name, scale, mode, distribution):
    def __init__(self, seed=None):
        VarianceScaling.__init__(
            self, scale=scale, mode=mode, distribution=distribution, seed=seed
        )

    def get_config(self):
        return {"seed": self.seed}

    return type(cls_name, (VarianceScaling,), {"__init__": __init__, "get_config": get_config})


glorot_uniform = init_ops.GlorotUniform
glorot_normal = init_ops.GlorotNormal
he_normal = _scaling("HeNormal", 2.0, "fan_in", "truncated_normal")
he_uniform = _scaling("HeUniform", 2.0, "fan_in", "uniform")
lecun_normal = _scaling("LecunNormal", 1.0, "fan_in", "truncated_normal")
lecun_uniform = _scaling("LecunUniform", 1.0, "fan_in", "uniform")
zeros = Zeros
ones = Ones
constant = Constant
random_normal = normal = RandomNormal
random_uniform = uniform = RandomUniform
truncated_normal = TruncatedNormal
orthogonal = Orthogonal
identity = Identity

_BY_NAME = {
    "zeros": Zeros,
    "ones": Ones,
    "constant": Constant,
    "random_normal": RandomNormal,
    "randomnormal": RandomNormal,
    "normal": RandomNormal,
    "random_uniform": RandomUniform,
    "randomuniform": RandomUniform,
    "uniform": RandomUniform,
    "truncated_normal": TruncatedNormal,
    "truncatednormal": TruncatedNormal,
    "variance_scaling": VarianceScaling,
    "variancescaling": VarianceScaling,
    "orthogonal": Orthogonal,
    "identity": Identity,
    "glorot_uniform": glorot_uniform,
    "glorotuniform": glorot_uniform,
    "glorot_normal": glorot_normal,
    "glorotnormal": glorot_normal,
    "he_normal": he_normal,
    "henormal": he_normal,
    "he_uniform": he_uniform,
    "heuniform": he_uniform,
    "lecun_normal": lecun_normal,
    "lecunnormal": lecun_normal,
    "lecun_uniform": lecun_uniform,
    "lecununiform": lecun_uniform,
}


_CLASSES = {
    cls.__name__: cls
    for cls in (Zeros, Ones, Constant, RandomNormal, RandomUniform, TruncatedNormal,
                VarianceScaling, Orthogonal, Identity, glorot_uniform, glorot_normal,
                he_normal, he_uniform, lecun_normal, lecun_uniform)
}  # fmt: skip
_CLASSES.update(_BY_NAME)


def get(identifier):
    """An initializer from a name ('glorot_uniform', 'zeros', ...), a config dict
    ({'class_name': ..., 'config': ...}), or a callable (returned as is).

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _lookup_name(identifier)
        if cls is None:
            raise unknown_object("initializer", identifier)
        return cls()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret initializer identifier: {identifier}")


def _lookup_name(name):
    return get_custom_objects().get(name) or _BY_NAME.get(name.lower()) or _CLASSES.get(name)


def serialize(initializer, use_legacy_format=False) -> dict:
    """`{"class_name": ..., "config": ...}` of an initializer."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(initializer)


def deserialize(config, custom_objects=None, use_legacy_format=False):
    """The initializer a serialized config (or name) describes.

    Raises:
      ValueError: an unknown class name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(config, _CLASSES, custom_objects, "initializer")
