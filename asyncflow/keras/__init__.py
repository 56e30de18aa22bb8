"""`tf.keras` in TF1 graph mode (a core subset of Keras 2, `tf.compat.v1.keras`).

Layers are callables on graph tensors; `Sequential` and functional `Model` compile to
graph ops and run in Keras' backend session (`backend.get_session()`), as TF1's
`tf.keras` does when v2 behaviour is disabled.
"""

from asyncflow.keras import (
    activations,
    applications,
    backend,
    callbacks,
    constraints,
    datasets,
    initializers,
    layers,
    losses,
    metrics,
    models,
    optimizers,
    preprocessing,
    regularizers,
    utils,
)
from asyncflow.keras import layer_configs as _layer_configs
from asyncflow.keras.engine import Input
from asyncflow.keras.feature_layers import SequenceFeatures as _SequenceFeatures
from asyncflow.keras.training import Model, Sequential

# tf.keras.layers.serialize/deserialize live with the layer table, which needs every
# layer module imported first (layers.py itself cannot import it).
layers.serialize = _layer_configs.serialize
layers.deserialize = _layer_configs.deserialize


class _Experimental:
    """`tf.keras.experimental` (the part asyncflow has)."""

    SequenceFeatures = _SequenceFeatures


experimental = _Experimental()

__all__ = [
    "activations",
    "applications",
    "experimental",
    "backend",
    "callbacks",
    "constraints",
    "datasets",
    "initializers",
    "layers",
    "losses",
    "metrics",
    "models",
    "optimizers",
    "preprocessing",
    "regularizers",
    "utils",
    "Input",
    "Model",
    "Sequential",
]
