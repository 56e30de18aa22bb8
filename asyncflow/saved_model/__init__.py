"""`af.saved_model`: export a model with signatures, load it back (TF1's tf.saved_model)."""

from __future__ import annotations

from asyncflow.saved_model import (
    builder,
    constants,
    experimental,
    loader,
    main_op,
    object_loader,
    object_saver,
    signature_constants,
    signature_def_utils,
    tag_constants,
    utils,
)
from asyncflow.saved_model.builder import Builder, SavedModelBuilder
from asyncflow.saved_model.constants import (
    ASSETS_DIRECTORY,
    ASSETS_KEY,
    DEBUG_DIRECTORY,
    DEBUG_INFO_FILENAME_PB,
    LEGACY_INIT_OP_KEY,
    MAIN_OP_KEY,
    SAVED_MODEL_FILENAME_PB,
    SAVED_MODEL_FILENAME_PBTXT,
    SAVED_MODEL_SCHEMA_VERSION,
    VARIABLES_DIRECTORY,
    VARIABLES_FILENAME,
)
from asyncflow.saved_model.loader import contains_saved_model, load, maybe_saved_model_directory
from asyncflow.saved_model.main_op import main_op_with_restore
from asyncflow.saved_model.method_name_updater import MethodNameUpdater
from asyncflow.saved_model.object_loader import load_v2
from asyncflow.saved_model.object_saver import save
from asyncflow.saved_model.save_options import Asset, SaveOptions
from asyncflow.saved_model.signature_constants import (
    CLASSIFY_INPUTS,
    CLASSIFY_METHOD_NAME,
    CLASSIFY_OUTPUT_CLASSES,
    CLASSIFY_OUTPUT_SCORES,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    PREDICT_INPUTS,
    PREDICT_METHOD_NAME,
    PREDICT_OUTPUTS,
    REGRESS_INPUTS,
    REGRESS_METHOD_NAME,
    REGRESS_OUTPUTS,
)
from asyncflow.saved_model.signature_def_utils import (
    build_signature_def,
    classification_signature_def,
    is_valid_signature,
    predict_signature_def,
    regression_signature_def,
)
from asyncflow.saved_model.tag_constants import EVAL, GPU, SERVING, TPU, TRAINING
from asyncflow.saved_model.utils import build_tensor_info, get_tensor_from_tensor_info

# TF lists it in signature_def_utils; it reads SavedModels through the loader, which
# (through the builder) imports signature_def_utils, so it is attached here.
signature_def_utils.MethodNameUpdater = MethodNameUpdater

__all__ = [
    "Asset",
    "SaveOptions",
    "builder",
    "constants",
    "experimental",
    "contains_saved_model",
    "loader",
    "object_loader",
    "object_saver",
    "save",
    "main_op",
    "main_op_with_restore",
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
    "signature_constants",
    "signature_def_utils",
    "tag_constants",
    "utils",
    "Builder",
    "SavedModelBuilder",
    "load",
    "load_v2",
    "maybe_saved_model_directory",
    "contains_saved_model",
    "simple_save",
    "build_signature_def",
    "classification_signature_def",
    "is_valid_signature",
    "predict_signature_def",
    "regression_signature_def",
    "build_tensor_info",
    "get_tensor_from_tensor_info",
    "CLASSIFY_INPUTS",
    "CLASSIFY_METHOD_NAME",
    "CLASSIFY_OUTPUT_CLASSES",
    "CLASSIFY_OUTPUT_SCORES",
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY",
    "PREDICT_INPUTS",
    "PREDICT_METHOD_NAME",
    "PREDICT_OUTPUTS",
    "REGRESS_INPUTS",
    "REGRESS_METHOD_NAME",
    "REGRESS_OUTPUTS",
    "EVAL",
    "GPU",
    "SERVING",
    "TPU",
    "TRAINING",
]


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None) -> None:
    """Export a serving SavedModel with one predict signature ("serving_default").

    Raises:
      AssertionError: export_dir exists and is not empty.
      ValueError: inputs or outputs empty.
    """
    from asyncflow import graph as ops
    from asyncflow.graph import GraphKeys

    signature_def_map = {DEFAULT_SERVING_SIGNATURE_DEF_KEY: predict_signature_def(inputs, outputs)}
    b = SavedModelBuilder(export_dir)
    with session.graph.as_default():
        b.add_meta_graph_and_variables(
            session,
            tags=[SERVING],
            signature_def_map=signature_def_map,
            assets_collection=ops.get_collection(GraphKeys.ASSET_FILEPATHS),
            main_op=legacy_init_op,
            clear_devices=True,
        )
    b.save()
