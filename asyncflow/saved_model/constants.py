"""`tf.saved_model.constants`: the SavedModel layout's file, directory and collection
names (the values TF 2.21's tf.compat.v1 gives them)."""

from __future__ import annotations

from asyncflow.saved_model.builder import (
    ASSETS_DIRECTORY,
    ASSETS_KEY,
    LEGACY_INIT_OP_KEY,
    MAIN_OP_KEY,
    SAVED_MODEL_FILENAME_PBTXT,
    SAVED_MODEL_SCHEMA_VERSION,
    VARIABLES_DIRECTORY,
    VARIABLES_FILENAME,
)
from asyncflow.saved_model.builder import SAVED_MODEL_FILENAME as SAVED_MODEL_FILENAME_PB

__all__ = [
    "ASSETS_DIRECTORY",
    "ASSETS_KEY",
    "DEBUG_DIRECTORY",
    "DEBUG_INFO_FILENAME_PB",
    "LEGACY_INIT_OP_KEY",
    "MAIN_OP_KEY",
    "SAVED_MODEL_FILENAME_PB",
    "SAVED_MODEL_FILENAME_PBTXT",
    "SAVED_MODEL_SCHEMA_VERSION",
    "VARIABLES_DIRECTORY",
    "VARIABLES_FILENAME",
]

DEBUG_DIRECTORY = "debug"
DEBUG_INFO_FILENAME_PB = "saved_model_debug_info.pb"
