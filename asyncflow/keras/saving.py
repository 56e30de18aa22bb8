"""`tf.keras.saving`: the names TF 2.21's tf_keras exports there: `save_model` and
`load_model` as `tf.keras.models`' (the `.keras` archive or the HDF5 file by the path;
keras/saving_api.py), and the (de)serialization registry's functions."""

from __future__ import annotations

from asyncflow.keras.saving_api import load_model, save_model
from asyncflow.keras.serialization import (
    custom_object_scope,
    get_custom_objects,
    get_registered_name,
    register_keras_serializable,
    serialize_keras_object,
)
from asyncflow.keras.serialization import (
    deserialize_keras_object_api as deserialize_keras_object,
)
from asyncflow.keras.utils_more import get_registered_object

__all__ = [
    "custom_object_scope",
    "deserialize_keras_object",
    "get_custom_objects",
    "get_registered_name",
    "get_registered_object",
    "load_model",
    "register_keras_serializable",
    "save_model",
    "serialize_keras_object",
]
