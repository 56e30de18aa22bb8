"""Every shipped Keras layer's config, in one table: the keys `get_config` adds to the
base config (name, trainable, dtype, batch_input_shape) and how `from_config` turns a
config back into constructor arguments, as TF 2.21's tf_keras writes and reads them.

A spec lists the attributes that are constructor arguments of the same name (objects
serialized as `{"class_name", "config"}`, functions by name, tuples as lists), the
float32 ones (Keras stores them cast to floatx, so 0.2 reads back 0.20000000298023224),
computed keys, and "fixed" keys TF writes for options asyncflow does not have
(groups=1): `from_config` accepts those only at the value written.
engine.Layer.get_config / from_config look a layer's spec up by its class (the nearest
class in its MRO that has one).  The layer name table for deserialization is
`LAYER_CLASSES`; Sequential and Model add themselves (training.py).
"""

from __future__ import annotations

import numpy as np

from asyncflow.keras import (
    engine,
    feature_layers,
    layers,
    layers_attention,
    layers_conv3d,
    layers_einsum,
    layers_kernelized,
    layers_local,
    layers_more,
    layers_norm_act,
    layers_preprocessing,
    layers_rnn_cells,
    layers_shape,
    recurrent,
)
from asyncflow.keras import regularizers as _regularizers
from asyncflow.keras.serialization import (
    deserialize_keras_object,
    module_table,
    plain,
    serialize_keras_object,
)

__all__ = ["LAYER_CLASSES", "serialize", "deserialize", "register_layer_classes"]


def _value(value):
    if callable(value) or hasattr(value, "get_config"):
        return serialize_keras_object(value)
    return plain(value)


def _f32(value):
    return None if value is None else float(np.float32(value))


class _Spec:
    """The config keys of one layer class beyond the base ones."""

    def __init__(self, *fields, f32=(), fixed=None, computed=None, nested=()):
        self.fields, self.f32, self.nested = fields, f32, nested
        self.fixed = fixed or {}
        self.computed = computed or {}

    def config(self, layer) -> dict:
        out = {name: _value(getattr(layer, name)) for name in self.fields}
        out.update({name: _f32(getattr(layer, name)) for name in self.f32})
        out.update({key: plain(fn(layer)) for key, fn in self.computed.items()})
        out.update(self.fixed)
        return out

    def arguments(self, cls, config: dict, custom_objects) -> dict:
        """Constructor arguments from `config` (nested layers made, fixed keys checked).

        Raises:
          ValueError: a fixed key at a value asyncflow does not support.
        """
        config = dict(config)
        for key, value in self.fixed.items():
            given = config.pop(key, value)
            if given != value:
                raise ValueError(
                    f"{cls.__name__}: {key}={given!r} is not supported "
                    f"(asyncflow supports {key}={value!r} only)"
                )
        for key in self.nested:
            if isinstance(config.get(key), dict):
                config[key] = deserialize(config[key], custom_objects)
        return config


_CONV = (
    "filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
    "activation", "use_bias", "kernel_initializer", "bias_initializer",
    "kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
    "bias_constraint",
)  # fmt: skip
_CELL = (
    "units", "activation", "use_bias", "kernel_initializer", "recurrent_initializer",
    "bias_initializer", "kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
    "kernel_constraint", "recurrent_constraint", "bias_constraint", "dropout",
    "recurrent_dropout",
)  # fmt: skip
_RNN_FLAGS = {
    "return_sequences": lambda lyr: lyr.return_sequences,
    "return_state": lambda lyr: lyr.return_state,
    "go_backwards": lambda lyr: lyr.go_backwards,
    "stateful": lambda lyr: getattr(lyr, "stateful", False),
    "unroll": lambda lyr: lyr.unroll,
    "time_major": lambda lyr: getattr(lyr, "time_major", False),
}
_POOL = ("pool_size", "strides", "padding", "data_format")


def _bn_axis(layer):
    # Built, Keras keeps the axis as a list of non-negative axes.
    return [layer._ax] if getattr(layer, "_ax", None) is not None else layer.axis


_DATA_FORMAT = {"data_format": lambda lyr: getattr(lyr, "data_format", "channels_last")}
_POOL1D = {
    "pool_size": lambda lyr: (lyr.pool_size,),
    "strides": lambda lyr: (lyr.strides,),
    **_DATA_FORMAT,
}


def _embedding_shape(layer):
    return getattr(layer, "_batch_input_shape", (None, layer.input_length))


class _TransposeSpec(_Spec):
    """The transposed convolutions' configs end with `output_padding` (after `groups`)."""

    def config(self, layer) -> dict:
        out = super().config(layer)
        out["output_padding"] = _value(layer.output_padding)
        return out


class _RNNSpec(_Spec):
    """RNN: its cell and flags, and `num_constants` once a call gave it constants (Keras'
    from_config reads it back, so that the rebuilt call splits its inputs alike)."""

    def config(self, layer) -> dict:
        out = super().config(layer)
        if layer._num_constants:
            out["num_constants"] = layer._num_constants
        return out


class _RNNLayerSpec(_Spec):
    """SimpleRNN/LSTM/GRU: the cell's config (without its name) and the RNN's flags."""

    def config(self, layer) -> dict:
        cell = layer.cell.get_config()
        for key in ("name", "trainable", "dtype"):
            cell.pop(key, None)
        out = {**cell, "activity_regularizer": _value(layer.activity_regularizer)}
        out.update({key: fn(layer) for key, fn in _RNN_FLAGS.items()})
        return out

    def arguments(self, cls, config, custom_objects) -> dict:
        config = dict(config)
        reg = config.get("activity_regularizer")
        config["activity_regularizer"] = _regularizers.get(reg) if reg else None
        return config


class _StackedCellsSpec(_Spec):
    """StackedRNNCells: its cells, each serialized with its class (TF's `cells` list)."""

    def config(self, layer) -> dict:
        return {"cells": [serialize_keras_object(cell) for cell in layer.cells]}

    def arguments(self, cls, config, custom_objects) -> dict:
        config = dict(config)
        config["cells"] = [deserialize(c, custom_objects) for c in config.get("cells", [])]
        return config


class _BidirectionalSpec(_Spec):
    """Bidirectional: the wrapped layer, merge_mode, and `num_constants` once a call gave
    it constants (Keras writes it on the wrapper, not on the layer)."""

    def config(self, layer) -> dict:
        # The wrapped layer as given (its own name, never called), not the "forward_" copy.
        forward = layer.forward_layer.get_config()
        forward["name"] = forward["name"][len("forward_") :]
        forward.pop("num_constants", None)
        out = {
            "layer": {"class_name": type(layer.forward_layer).__name__, "config": forward},
            "merge_mode": layer.merge_mode,
        }
        if layer._num_constants:
            out["num_constants"] = layer._num_constants
        if not layer.backward_layer.name.startswith("backward_"):
            # (a backward layer the user gave; the default copy is not written)
            out["backward_layer"] = serialize_keras_object(layer.backward_layer)
        return out


class _MultiHeadAttentionSpec(_Spec):
    """MultiHeadAttention keeps its arguments in private attributes; the input shapes
    it was built for are written and, read back, only checked for form."""

    _KEYS = (
        "num_heads", "key_dim", "value_dim", "dropout", "use_bias", "output_shape",
        "attention_axes", "kernel_initializer", "bias_initializer", "kernel_regularizer",
        "bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint",
    )  # fmt: skip

    def config(self, layer) -> dict:
        out = {}
        for key in self._KEYS:
            value = getattr(layer, key if key == "activity_regularizer" else "_" + key)
            out[key] = _value(value)
        for key in ("query_shape", "key_shape", "value_shape"):
            out[key] = plain(getattr(layer, "_" + key))
        out["softmax_robust_masking"] = False
        return out

    def arguments(self, cls, config, custom_objects) -> dict:
        config = dict(config)
        for key in ("query_shape", "key_shape", "value_shape"):
            config.pop(key, None)
        if config.pop("softmax_robust_masking", False):
            raise ValueError(
                f"{cls.__name__}: softmax_robust_masking=True is not supported "
                "(asyncflow supports softmax_robust_masking=False only)"
            )
        return config


def _unsupported(kind):
    class _NoConfig(_Spec):
        def config(self, layer) -> dict:
            raise NotImplementedError(
                f"{type(layer).__name__}.get_config: {kind} cannot be serialized by "
                "asyncflow (no code is written to or run from a config)"
            )

    return _NoConfig()


_SPECS = {
    layers.Dense: _Spec(
        "units",
        "activation",
        "use_bias",
        "kernel_initializer",
        "bias_initializer",
        "kernel_regularizer",
        "bias_regularizer",
        "activity_regularizer",
        "kernel_constraint",
        "bias_constraint",
    ),  # fmt: skip
    layers.Activation: _Spec("activation"),
    layers.Dropout: _Spec("rate", "noise_shape", "seed"),
    layers.Flatten: _Spec("data_format"),
    layers.Reshape: _Spec("target_shape"),
    layers.Conv2D: _Spec(*_CONV[:6], "groups", *_CONV[6:]),
    layers.MaxPooling2D: _Spec(*_POOL),
    layers.AveragePooling2D: _Spec(*_POOL),
    layers.BatchNormalization: _Spec(
        "momentum",
        "epsilon",
        "center",
        "scale",
        "beta_initializer",
        "gamma_initializer",
        "moving_mean_initializer",
        "moving_variance_initializer",
        "beta_regularizer",
        "gamma_regularizer",
        "beta_constraint",
        "gamma_constraint",
        computed={"axis": _bn_axis},
    ),  # fmt: skip
    layers.Embedding: _Spec(
        "input_dim",
        "output_dim",
        "embeddings_initializer",
        "embeddings_regularizer",
        "activity_regularizer",
        "embeddings_constraint",
        "mask_zero",
        "input_length",
        computed={
            "batch_input_shape": _embedding_shape,
            "dtype": lambda lyr: lyr._dtype or "float32",
        },
    ),  # fmt: skip
    layers.Concatenate: _Spec("axis"),
    layers.Lambda: _unsupported("a Lambda layer's Python function"),
    layers_more.Conv1D: _Spec(*_CONV, fixed={"groups": 1}),
    layers_more.Conv2DTranspose: _TransposeSpec(*_CONV, fixed={"groups": 1}),
    layers_more.MaxPooling1D: _Spec("padding", computed=_POOL1D),
    layers_more.GlobalAveragePooling1D: _Spec("data_format", "keepdims"),
    layers_more.GlobalMaxPooling1D: _Spec("data_format", "keepdims"),
    layers_more.GlobalAveragePooling2D: _Spec("data_format", "keepdims"),
    layers_more.GlobalMaxPooling2D: _Spec("data_format", "keepdims"),
    layers_more.ReLU: _Spec(f32=("max_value", "negative_slope", "threshold")),
    layers_more.LeakyReLU: _Spec(f32=("alpha",)),
    layers_more.ELU: _Spec(f32=("alpha",)),
    layers_more.Softmax: _Spec("axis"),
    layers_more.Permute: _Spec("dims"),
    layers_more.RepeatVector: _Spec("n"),
    layers_more.ZeroPadding2D: _Spec("padding", computed=_DATA_FORMAT),
    layers_more.Cropping2D: _Spec("cropping", computed=_DATA_FORMAT),
    layers_more.UpSampling2D: _Spec(
        "size", computed=_DATA_FORMAT, fixed={"interpolation": "nearest"}
    ),
    layers_more.TimeDistributed: _Spec("layer", nested=("layer",)),
    layers_more.ActivityRegularization: _Spec("l1", "l2"),
    layers_more.GaussianNoise: _Spec("stddev", "seed"),
    layers_more.GaussianDropout: _Spec("rate", "seed"),
    layers_more.SpatialDropout1D: _Spec("rate", fixed={"noise_shape": None, "seed": None}),
    layers_more.SpatialDropout2D: _Spec("rate", fixed={"noise_shape": None, "seed": None}),
    layers_more.DepthwiseConv2D: _Spec(
        *[
            f
            for f in _CONV
            if f
            not in ("filters", "kernel_initializer", "kernel_regularizer", "kernel_constraint")
        ],
        "depth_multiplier",
        "depthwise_initializer",
        "depthwise_regularizer",
        "depthwise_constraint",
        fixed={"groups": 1},
    ),  # fmt: skip
    layers_more.SeparableConv2D: _Spec(
        *_CONV,
        "depth_multiplier",
        "depthwise_initializer",
        "pointwise_initializer",
        "depthwise_regularizer",
        "pointwise_regularizer",
        "depthwise_constraint",
        "pointwise_constraint",
        fixed={"groups": 1},
    ),  # fmt: skip
    recurrent.SimpleRNNCell: _Spec(*_CELL),
    recurrent.LSTMCell: _Spec(
        *_CELL, "recurrent_activation", "unit_forget_bias", "implementation"
    ),  # fmt: skip
    recurrent.GRUCell: _Spec(*_CELL, "recurrent_activation", "implementation", "reset_after"),
    recurrent.RNN: _RNNSpec("cell", computed=_RNN_FLAGS, nested=("cell",)),
    recurrent.SimpleRNN: _RNNLayerSpec(),
    recurrent.LSTM: _RNNLayerSpec(),
    recurrent.GRU: _RNNLayerSpec(),
    recurrent.Bidirectional: _BidirectionalSpec(nested=("layer", "backward_layer")),
    recurrent.StackedRNNCells: _StackedCellsSpec(),
    layers_norm_act.LayerNormalization: _Spec(
        "axis",
        "epsilon",
        "center",
        "scale",
        "beta_initializer",
        "gamma_initializer",
        "beta_regularizer",
        "gamma_regularizer",
        "beta_constraint",
        "gamma_constraint",
    ),  # fmt: skip
    layers_norm_act.PReLU: _Spec(
        "alpha_initializer", "alpha_regularizer", "alpha_constraint", "shared_axes"
    ),  # fmt: skip
    layers_norm_act.ThresholdedReLU: _Spec(f32=("theta",)),
    layers_attention.Dot: _Spec("axes", "normalize"),
    layers_attention.Attention: _Spec("use_scale", "score_mode", "dropout"),
    layers_attention.AdditiveAttention: _Spec("use_scale", "dropout"),
    layers_einsum.EinsumDense: _Spec(
        "equation",
        "activation",
        "bias_axes",
        "kernel_initializer",
        "bias_initializer",
        "kernel_regularizer",
        "bias_regularizer",
        "activity_regularizer",
        "kernel_constraint",
        "bias_constraint",
        computed={"output_shape": lambda lyr: lyr.partial_output_shape},
    ),  # fmt: skip
    layers_einsum.MultiHeadAttention: _MultiHeadAttentionSpec(),
    feature_layers.DenseFeatures: _unsupported("a DenseFeatures layer's feature columns"),
    feature_layers.SequenceFeatures: _unsupported("a SequenceFeatures layer's feature columns"),
}
_SPECS[layers_more.AveragePooling1D] = _SPECS[layers_more.MaxPooling1D]
_SPECS.update({
    layers_conv3d.Conv3D: _Spec(*_CONV, fixed={"groups": 1}),
    layers_conv3d.Conv3DTranspose: _TransposeSpec(
        *[f for f in _CONV if f != "dilation_rate"], fixed={"groups": 1}
    ),
    layers_conv3d.Conv1DTranspose: _SPECS[layers_more.Conv2DTranspose],
    layers_conv3d.SeparableConv1D: _SPECS[layers_more.SeparableConv2D],
    layers_conv3d.DepthwiseConv1D: _SPECS[layers_more.DepthwiseConv2D],
    layers_conv3d.MaxPooling3D: _Spec(*_POOL),
    layers_conv3d.AveragePooling3D: _Spec(*_POOL),
    layers_conv3d.GlobalAveragePooling3D: _Spec("data_format", "keepdims"),
    layers_conv3d.GlobalMaxPooling3D: _Spec("data_format", "keepdims"),
    layers_shape.Cropping1D: _Spec("cropping"),
    layers_shape.Cropping3D: _Spec("cropping", "data_format"),
    layers_shape.ZeroPadding1D: _Spec("padding"),
    layers_shape.ZeroPadding3D: _Spec("padding", "data_format"),
    layers_shape.UpSampling1D: _Spec("size"),
    layers_shape.UpSampling3D: _Spec("size", "data_format"),
    layers_shape.SpatialDropout3D: _Spec("rate", fixed={"noise_shape": None, "seed": None}),
})  # fmt: skip
_PP = layers_preprocessing
_SPECS.update({
    _PP.Rescaling: _Spec("scale", "offset"),
    _PP.Resizing: _Spec("height", "width", "interpolation", "crop_to_aspect_ratio"),
    _PP.CenterCrop: _Spec("height", "width"),
    _PP.Normalization: _Spec(
        "axis", "invert",
        computed={"mean": lambda lyr: lyr.input_mean, "variance": lambda lyr: lyr.input_variance},
    ),
    _PP.Discretization: _Spec("bin_boundaries", "num_bins", "epsilon", "output_mode", "sparse"),
    _PP.Hashing: _Spec("num_bins", "salt", "mask_value", "output_mode", "sparse"),
    _PP.CategoryEncoding: _Spec("num_tokens", "output_mode", "sparse"),
    _PP.AlphaDropout: _Spec("rate", "seed"),
})  # fmt: skip
_CONV_LSTM = _Spec(
    "filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
    "activation", "recurrent_activation", "use_bias", "kernel_initializer",
    "recurrent_initializer", "bias_initializer", "unit_forget_bias", "kernel_regularizer",
    "recurrent_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
    "recurrent_constraint", "bias_constraint", "dropout", "recurrent_dropout",
    computed={k: _RNN_FLAGS[k] for k in ("return_sequences", "return_state", "go_backwards",
                                         "stateful")},
    fixed={"unroll": False, "time_major": False},
)  # fmt: skip
_LOCAL = _Spec(
    "filters", "kernel_size", "strides", "padding", "data_format", "activation", "use_bias",
    "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
    "activity_regularizer", "kernel_constraint", "bias_constraint", "implementation",
)  # fmt: skip
_SPECS.update({
    layers_local.ConvLSTM1D: _CONV_LSTM,
    layers_local.ConvLSTM2D: _CONV_LSTM,
    layers_local.ConvLSTM3D: _CONV_LSTM,
    layers_local.LocallyConnected1D: _LOCAL,
    layers_local.LocallyConnected2D: _LOCAL,
    layers_rnn_cells.Wrapper: _Spec("layer", nested=("layer",)),
    layers_kernelized.RandomFourierFeatures: _Spec("output_dim", "kernel_initializer", "scale"),
})  # fmt: skip
engine.CONFIG_SPECS.update(_SPECS)

# Name -> layer class, for deserialization (Sequential/Model/Functional added by training).
LAYER_CLASSES: dict = module_table(layers)
LAYER_CLASSES["InputLayer"] = engine.InputLayer
LAYER_CLASSES["RandomFourierFeatures"] = layers_kernelized.RandomFourierFeatures


def register_layer_classes(**classes) -> None:
    """Make layer-like classes (models) known to `deserialize` by name."""
    LAYER_CLASSES.update(classes)


def serialize(layer, use_legacy_format=False) -> dict:
    """`{"class_name": ..., "config": layer.get_config()}`."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(layer)


def deserialize(config, custom_objects=None, use_legacy_format=False):
    """The layer (or model) a serialized config describes.

    Raises:
      ValueError: an unknown class name ("Unknown layer: 'X'. ...").
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(
        config, LAYER_CLASSES, custom_objects=custom_objects, printable_module_name="layer"
    )
