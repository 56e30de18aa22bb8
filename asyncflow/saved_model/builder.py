"""SavedModelBuilder: a directory with meta graphs, their variables and assets.

Layout (TF's; TF's `saved_model_cli show` and `tf.saved_model.loader.load` read it):
  export_dir/saved_model.pb          a SavedModel message (saved_model.pbtxt with as_text)
  export_dir/variables/variables.index, variables.data-0000i-of-0000N   a V2 checkpoint
  export_dir/assets/...              files named by each meta graph's asset_file_def
The main op (legacy_init_op is the same thing under its old name) and the assets are
recorded as TF's TF1 builder records them: added to the graph's collections
"saved_model_main_op" and "saved_model_assets" (an any_list of AssetFileDef), so they
stay in the graph for later meta graphs; no "__saved_model_init_op" signature and no
asset_file_def (the loader reads those too, as TF 2 writers use them).  Every file is
written atomically.
"""

from __future__ import annotations

import os
import shutil

from google.protobuf import any_pb2

from asyncflow import checkpoint_format as cf
from asyncflow import graph as ops
from asyncflow import meta_graph
from asyncflow.graph import GraphKeys
from asyncflow.protos.meta_graph_pb2 import AssetFileDef
from asyncflow.protos.saved_model_pb2 import SavedModel
from asyncflow.saved_model import signature_def_utils
from asyncflow.saved_model.constants import (  # noqa: F401 - the builder's names too (TF's)
    ASSETS_DIRECTORY,
    ASSETS_KEY,
    LEGACY_INIT_OP_KEY,
    MAIN_OP_KEY,
    SAVED_MODEL_FILENAME_PB,
    SAVED_MODEL_FILENAME_PBTXT,
    SAVED_MODEL_SCHEMA_VERSION,
    VARIABLES_DIRECTORY,
    VARIABLES_FILENAME,
)
from asyncflow.train.saver import Saver

__all__ = [
    "SavedModelBuilder",
    "Builder",
    "SAVED_MODEL_FILENAME",
    "VARIABLES_DIRECTORY",
    "VARIABLES_FILENAME",
    "ASSETS_DIRECTORY",
    "ASSETS_KEY",
    "MAIN_OP_KEY",
    "LEGACY_INIT_OP_KEY",
    "SAVED_MODEL_SCHEMA_VERSION",
]

SAVED_MODEL_FILENAME = SAVED_MODEL_FILENAME_PB
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"
# TF's own message name, so TF's loader unpacks the Any (ours is asyncflow.tensorflow.*)
ASSET_FILE_DEF_TYPE_URL = "type.googleapis.com/tensorflow.AssetFileDef"


def variables_prefix(export_dir) -> str:
    return os.path.join(os.fspath(export_dir), VARIABLES_DIRECTORY, VARIABLES_FILENAME)


class SavedModelBuilder:
    """Builds a SavedModel directory (TF1's `tf.saved_model.builder.SavedModelBuilder`).

    Raises (at construction):
      AssertionError: export_dir exists and is not empty.
    """

    def __init__(self, export_dir):
        self._export_dir = os.fspath(export_dir)
        if os.path.exists(self._export_dir):
            if os.listdir(self._export_dir):
                raise AssertionError(
                    "Export directory already exists, and isn't empty. Please choose a "
                    "different export directory, or delete all the contents of the "
                    f"specified directory: {self._export_dir}"
                )
        else:
            os.makedirs(self._export_dir)
        self._saved_model = SavedModel(saved_model_schema_version=SAVED_MODEL_SCHEMA_VERSION)
        self._has_saved_variables = False

    # -- helpers
    @staticmethod
    def _validate_signature_def_map(signature_def_map) -> dict:
        out = {}
        if INIT_OP_SIGNATURE_KEY in (signature_def_map or {}):
            raise KeyError(
                f'SignatureDef map key "{INIT_OP_SIGNATURE_KEY}" is reserved for '
                "initialization. Please use a different key."
            )
        for key, sig in (signature_def_map or {}).items():
            if not isinstance(key, str):
                raise ValueError(f"signature_def_map keys must be strings, got {key!r}")
            if not signature_def_utils.is_valid_signature(sig):
                raise ValueError(f"Invalid SignatureDef for key '{key}': {sig!r}")
            out[key] = sig
        return out

    def _save_assets(self, assets_collection) -> None:
        for tensor in assets_collection or []:
            value = ops.constant_value(tensor)
            if value is None:
                raise ValueError(f"Asset tensor {tensor.name} must be a constant file path")
            path = value.item() if hasattr(value, "item") else value
            path = path.decode("utf-8") if isinstance(path, bytes) else str(path)
            filename = os.path.basename(path)
            dest_dir = os.path.join(self._export_dir, ASSETS_DIRECTORY)
            os.makedirs(dest_dir, exist_ok=True)
            dest = os.path.join(dest_dir, filename)
            if not os.path.exists(dest):
                shutil.copyfile(path, dest)
            asset = AssetFileDef(filename=filename)
            asset.tensor_info.name = tensor.name  # the name alone, as TF records it
            packed = any_pb2.Any(type_url=ASSET_FILE_DEF_TYPE_URL, value=asset.SerializeToString())
            ops.add_to_collection(ASSETS_KEY, packed)

    @staticmethod
    def _add_main_op(main_op) -> None:
        if main_op is None:
            return
        if not isinstance(main_op, ops.Operation):
            raise TypeError(
                f"Expected {main_op} to be an Operation but got type {type(main_op)} instead."
            )
        for key in (MAIN_OP_KEY, LEGACY_INIT_OP_KEY):
            if ops.get_collection(key):
                raise ValueError(
                    f"Graph already contains one or more main ops under the collection {key}."
                )
        ops.add_to_collection(MAIN_OP_KEY, main_op)

    def _add(self, saver, tags, signature_def_map, clear_devices, strip_default_attrs) -> None:
        signatures = self._validate_signature_def_map(signature_def_map)
        mg = saver.export_meta_graph(
            clear_devices=clear_devices, strip_default_attrs=strip_default_attrs
        )
        del mg.meta_info_def.tags[:]
        mg.meta_info_def.tags.extend(tags)
        for key, sig in signatures.items():
            mg.signature_def[key].CopyFrom(sig)
        self._saved_model.meta_graphs.add().CopyFrom(mg)

    @staticmethod
    def _saver(saver):
        if saver is not None:
            return saver
        var_list = ops.get_collection(GraphKeys.GLOBAL_VARIABLES) + ops.get_collection(
            GraphKeys.SAVEABLE_OBJECTS
        )
        return Saver(var_list or None, sharded=True, allow_empty=True)

    # -- the public API
    def add_meta_graph_and_variables(
        self,
        sess,
        tags,
        signature_def_map=None,
        assets_collection=None,
        legacy_init_op=None,
        clear_devices=False,
        main_op=None,
        strip_default_attrs=False,
        saver=None,
    ) -> None:
        """Save the session's variables and add the first meta graph, tagged `tags`.

        Raises:
          AssertionError: variables were already saved by this builder.
          ValueError: an invalid signature_def_map.
        """
        if self._has_saved_variables:
            raise AssertionError(
                "Graph state including variables and assets has already been saved. "
                "Please invoke `add_meta_graph()` instead."
            )
        self._validate_signature_def_map(signature_def_map)
        with sess.graph.as_default():
            self._save_assets(assets_collection)
            self._add_main_op(main_op if main_op is not None else legacy_init_op)
            saver = self._saver(saver)
            os.makedirs(os.path.join(self._export_dir, VARIABLES_DIRECTORY), exist_ok=True)
            saver.save(
                sess, variables_prefix(self._export_dir), write_meta_graph=False, write_state=False
            )
            self._add(saver, tags, signature_def_map, clear_devices, strip_default_attrs)
        self._has_saved_variables = True

    def add_meta_graph(
        self,
        tags,
        signature_def_map=None,
        assets_collection=None,
        legacy_init_op=None,
        clear_devices=False,
        main_op=None,
        strip_default_attrs=False,
        saver=None,
    ) -> None:
        """Add another meta graph of the default graph, sharing the saved variables.

        Raises:
          AssertionError: add_meta_graph_and_variables was not called first.
        """
        if not self._has_saved_variables:
            raise AssertionError(
                "Graph state including variables and assets has not been saved yet. "
                "Please invoke `add_meta_graph_and_variables()` first."
            )
        self._validate_signature_def_map(signature_def_map)
        self._save_assets(assets_collection)
        self._add_main_op(main_op if main_op is not None else legacy_init_op)
        saver = self._saver(saver)
        self._add(saver, tags, signature_def_map, clear_devices, strip_default_attrs)

    def save(self, as_text=False) -> bytes:
        """Write saved_model.pb (saved_model.pbtxt with `as_text`); returns its path (bytes,
        as TF returns)."""
        name = SAVED_MODEL_FILENAME_PBTXT if as_text else SAVED_MODEL_FILENAME
        path = os.path.join(self._export_dir, name)
        cf.atomic_write(path, meta_graph.encode_meta_graph(self._saved_model, as_text))
        return path.encode("utf-8")


Builder = SavedModelBuilder
