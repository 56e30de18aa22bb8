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
    mixed_precision,
    models,
    optimizers,
    preprocessing,
    regularizers,
    saving,
    utils,
)
from asyncflow.keras import dynamic_embedding as _dynamic_embedding
from asyncflow.keras import export_archive as _export_archive
from asyncflow.keras import layer_configs as _layer_configs
from asyncflow.keras.callbacks_sidecar import SidecarEvaluatorModelExport as _SidecarExport
from asyncflow.keras.callbacks_tensorboard import TensorBoard as _TensorBoard
from asyncflow.keras.engine import Input
from asyncflow.keras.estimator_lib import model_to_estimator as _model_to_estimator
from asyncflow.keras.feature_layers import SequenceFeatures as _SequenceFeatures
from asyncflow.keras.premade_models import LinearModel as _LinearModel
from asyncflow.keras.premade_models import WideDeepModel as _WideDeepModel
from asyncflow.keras.tf1_style import get_or_create_layer as _get_or_create_layer
from asyncflow.keras.tf1_style import track_tf1_style_variables as _track_tf1_style
from asyncflow.keras.training import Model, Sequential
from asyncflow.keras.utils_embedding import warmstart_embedding_matrix as _warmstart
from asyncflow.keras.vis_utils import model_to_dot as _model_to_dot
from asyncflow.keras.vis_utils import plot_model as _plot_model

# tf.keras.layers.serialize/deserialize live with the layer table, which needs every
# layer module imported first (layers.py itself cannot import it).
layers.serialize = _layer_configs.serialize
layers.deserialize = _layer_configs.deserialize
# TensorBoard has its own module (it builds summary ops); tf.keras.callbacks shows it.
callbacks.TensorBoard = _TensorBoard
callbacks.SidecarEvaluatorModelExport = _SidecarExport
# The premade models subclass Model, which models.py re-exports (so it cannot import them).
models.LinearModel = _LinearModel
models.WideDeepModel = _WideDeepModel
utils.warmstart_embedding_matrix = _warmstart
utils.get_or_create_layer = _get_or_create_layer
utils.track_tf1_style_variables = _track_tf1_style
# model_to_dot reads models (training, network), which import utils.
utils.model_to_dot = _model_to_dot
utils.plot_model = _plot_model
# The dynamic embedding layers and their callback build on layers.py and callbacks.py.
layers.experimental.DynamicLookup = _dynamic_embedding.DynamicLookup
layers.experimental.DynamicEmbedding = _dynamic_embedding.DynamicEmbedding


class _CallbacksExperimental:
    """`tf.keras.callbacks.experimental`."""

    UpdateEmbeddingCallback = _dynamic_embedding.UpdateEmbeddingCallback


callbacks.experimental = _CallbacksExperimental()


class _Experimental:
    """`tf.keras.experimental` (the part asyncflow has)."""

    SequenceFeatures = _SequenceFeatures
    CosineDecay = optimizers.schedules.CosineDecay
    CosineDecayRestarts = optimizers.schedules.CosineDecayRestarts
    LinearModel = _LinearModel
    WideDeepModel = _WideDeepModel


experimental = _Experimental()


class _Export:
    """`tf.keras.export`."""

    ExportArchive = _export_archive.ExportArchive


export = _Export()


class _Estimator:
    """`tf.keras.estimator`."""

    model_to_estimator = staticmethod(_model_to_estimator)


estimator = _Estimator()

__all__ = [
    "activations",
    "applications",
    "experimental",
    "estimator",
    "export",
    "backend",
    "callbacks",
    "constraints",
    "datasets",
    "initializers",
    "layers",
    "losses",
    "metrics",
    "mixed_precision",
    "models",
    "optimizers",
    "preprocessing",
    "regularizers",
    "saving",
    "utils",
    "Input",
    "Model",
    "Sequential",
]
