"""`tf.keras.utils`: to_categorical, normalize, Sequence, and the object (de)serialization
and custom-object scope of keras/serialization.py (with the lookup error Keras raises for
an unknown name)."""

from __future__ import annotations

import numpy as np

from asyncflow.keras import serialization as _serialization
from asyncflow.keras.data_utils import get_file
from asyncflow.keras.image_utils import array_to_img, img_to_array, load_img, save_img
from asyncflow.keras.migration_utils import DeterministicRandomTestTool, StepsPerExecutionTuner
from asyncflow.keras.serialization import (
    CustomObjectScope,
    custom_object_scope,
    get_custom_objects,
    get_registered_name,
    register_keras_serializable,
    serialize_keras_object,
)
from asyncflow.keras.serialization import (
    deserialize_keras_object_api as deserialize_keras_object,
)
from asyncflow.keras.serialization import unknown_object as unknown_object
from asyncflow.keras.utils_more import (
    GeneratorEnqueuer,
    OrderedEnqueuer,
    Progbar,
    SequenceEnqueuer,
    disable_interactive_logging,
    enable_interactive_logging,
    get_registered_object,
    get_source_inputs,
    is_interactive_logging_enabled,
    pad_sequences,
    to_ordinal,
)

__all__ = [
    "DeterministicRandomTestTool",
    "StepsPerExecutionTuner",
    "to_categorical",
    "normalize",
    "Sequence",
    "CustomObjectScope",
    "custom_object_scope",
    "get_custom_objects",
    "get_registered_name",
    "register_keras_serializable",
    "serialize_keras_object",
    "deserialize_keras_object",
    "Progbar",
    "to_ordinal",
    "get_source_inputs",
    "get_registered_object",
    "pad_sequences",
    "SequenceEnqueuer",
    "OrderedEnqueuer",
    "GeneratorEnqueuer",
    "array_to_img",
    "img_to_array",
    "load_img",
    "save_img",
    "enable_interactive_logging",
    "disable_interactive_logging",
    "is_interactive_logging_enabled",
    "legacy",
    "get_file",
]


def _legacy_serialize(instance):
    """Keras 2's serialize_keras_object (TF's argument name)."""
    return serialize_keras_object(instance)


class _Legacy:
    """`tf.keras.utils.legacy`: the Keras 2 object (de)serialization, with its own
    signatures (deserialize_keras_object(identifier, module_objects, custom_objects,
    printable_module_name))."""

    serialize_keras_object = staticmethod(_legacy_serialize)
    deserialize_keras_object = staticmethod(_serialization.deserialize_keras_object)


legacy = _Legacy()


def to_categorical(y, num_classes=None, dtype="float32"):
    """One-hot rows for integer class labels (a trailing axis of size 1 is dropped);
    `num_classes` defaults to max(y) + 1."""
    y = np.array(y, dtype="int")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = tuple(shape[:-1])
    y = y.reshape(-1)
    if not num_classes:
        num_classes = int(np.max(y)) + 1
    out = np.zeros((y.shape[0], num_classes), dtype=dtype)
    out[np.arange(y.shape[0]), y] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis=-1, order=2):
    """`x` scaled to unit `order`-norm along `axis` (zero rows stay zero)."""
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)


class Sequence:
    """Base class for batch sources of `fit_generator`: `__len__` (batches per epoch) and
    `__getitem__(index)` (one batch); `on_epoch_end` runs after each epoch."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def on_epoch_end(self) -> None:
        pass

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]
