"""`af.layers`: TF1's `tf.compat.v1.layers`, functions (layer_functions.py) and classes
(layer_classes.py)."""

import functools as _functools
import inspect as _inspect
import types as _types

from asyncflow import layer_classes, layer_functions, layer_functions_3d
from asyncflow.layer_classes import *  # noqa: F403
from asyncflow.layer_functions import *  # noqa: F403
from asyncflow.layer_functions_3d import *  # noqa: F403

__all__ = [*layer_functions.__all__, *layer_functions_3d.__all__, *layer_classes.__all__]


def _keras_style_aware(fn, cls):
    """`fn`, which in Keras style makes a `cls` layer and calls it, as TF's functional
    layers do (their `name` then being a refused scope, as TF refuses it)."""
    signature = _inspect.signature(fn)

    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not layer_classes._KERAS_STYLE[0]:
            return fn(*args, **kwargs)
        given = signature.bind(*args, **kwargs).arguments
        inputs = given.pop("inputs")
        name, reuse = given.pop("name", None), given.pop("reuse", None)
        call = {"training": given.pop("training")} if "training" in given else {}
        return cls(**given, name=name, _reuse=reuse, _scope=name)(inputs, **call)

    return wrapper


for _fn_name, _cls in [
    ("dense", Dense),  # noqa: F405
    ("conv1d", Conv1D),  # noqa: F405
    ("conv2d", Conv2D),  # noqa: F405
    ("conv2d_transpose", Conv2DTranspose),  # noqa: F405
    ("conv3d", Conv3D),  # noqa: F405
    ("conv3d_transpose", Conv3DTranspose),  # noqa: F405
    ("separable_conv1d", SeparableConv1D),  # noqa: F405
    ("separable_conv2d", SeparableConv2D),  # noqa: F405
    ("max_pooling1d", MaxPooling1D),  # noqa: F405
    ("max_pooling2d", MaxPooling2D),  # noqa: F405
    ("max_pooling3d", MaxPooling3D),  # noqa: F405
    ("average_pooling1d", AveragePooling1D),  # noqa: F405
    ("average_pooling2d", AveragePooling2D),  # noqa: F405
    ("average_pooling3d", AveragePooling3D),  # noqa: F405
    ("flatten", Flatten),  # noqa: F405
    ("dropout", Dropout),  # noqa: F405
    ("batch_normalization", BatchNormalization),  # noqa: F405
]:
    globals()[_fn_name] = _keras_style_aware(globals()[_fn_name], _cls)

# tf.layers.experimental: Keras-style variable management for these layers.
experimental = _types.ModuleType("asyncflow.layers.experimental", "TF1's tf.layers.experimental.")
experimental.keras_style_scope = layer_classes.keras_style_scope
experimental.set_keras_style = layer_classes.set_keras_style
__all__.append("experimental")
