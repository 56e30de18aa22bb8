"""Load a SavedModel into a session (TF1's `tf.saved_model.loader.load`).

Reads TF's layout (see builder.py), whether TF or asyncflow wrote it: saved_model.pb
(or .pbtxt), the V2 checkpoint under variables/, and assets/.  The init op is the one
the "__saved_model_init_op" signature names (TF 2's TF1 builder), else the collection
"saved_model_main_op", else "legacy_init_op"; it runs with the asset paths fed.
"""

from __future__ import annotations

import os

from asyncflow import errors, meta_graph
from asyncflow import graph as ops
from asyncflow.protos.meta_graph_pb2 import AssetFileDef
from asyncflow.protos.saved_model_pb2 import SavedModel
from asyncflow.saved_model.builder import (
    ASSETS_DIRECTORY,
    ASSETS_KEY,
    INIT_OP_SIGNATURE_KEY,
    LEGACY_INIT_OP_KEY,
    MAIN_OP_KEY,
    SAVED_MODEL_FILENAME,
    SAVED_MODEL_FILENAME_PBTXT,
    variables_prefix,
)
from asyncflow.train import saver as saver_mod

__all__ = ["load", "maybe_saved_model_directory", "contains_saved_model", "read_saved_model"]


def _saved_model_path(export_dir: str) -> str | None:
    for name in (SAVED_MODEL_FILENAME, SAVED_MODEL_FILENAME_PBTXT):
        path = os.path.join(export_dir, name)
        if os.path.isfile(path):
            return path
    return None


def maybe_saved_model_directory(export_dir) -> bool:
    """Whether `export_dir` looks like a SavedModel directory."""
    return _saved_model_path(os.fsdecode(export_dir)) is not None


def contains_saved_model(export_dir) -> bool:
    """Whether `export_dir` holds a saved_model.pb or .pbtxt (TF's contains_saved_model)."""
    return maybe_saved_model_directory(export_dir)


def read_saved_model(export_dir) -> SavedModel:
    """The parsed saved_model.pb (or .pbtxt).

    Raises:
      OSError: there is neither file.
      DataLossError: too large or unparsable.
    """
    export_dir = os.fsdecode(export_dir)  # TF accepts bytes too (export_saved_model returns them)
    path = _saved_model_path(export_dir)
    if path is None:
        raise OSError(
            f"SavedModel file does not exist at: {export_dir}/{{{SAVED_MODEL_FILENAME_PBTXT}"
            f"|{SAVED_MODEL_FILENAME}}}"
        )
    return meta_graph.parse_message(meta_graph.read_file_bounded(path), SavedModel, path)


def _find(saved_model: SavedModel, tags):
    wanted = set(tags)
    available = []
    for mg in saved_model.meta_graphs:
        have = list(mg.meta_info_def.tags)
        if set(have) == wanted:
            return mg
        available.append(have)
    raise RuntimeError(
        f"MetaGraphDef associated with tags {str(list(tags)).strip('[]')} could not be found "
        "in SavedModel. To inspect available tag-sets in the SavedModel, please use the "
        f"SavedModel CLI: `saved_model_cli`\navailable_tags: {available}"
    )


def _scoped(name: str, import_scope) -> str:
    return name if not import_scope else import_scope.rstrip("/") + "/" + name


def _asset_defs(mg) -> list:
    """asset_file_def (TF 2 writers), else the "saved_model_assets" Any list (TF1's
    builder, and ours), as TF's loader reads them."""
    if mg.asset_file_def:
        return list(mg.asset_file_def)
    if ASSETS_KEY not in mg.collection_def:
        return []
    out = []
    for packed in mg.collection_def[ASSETS_KEY].any_list.value:
        if not packed.type_url.endswith("tensorflow.AssetFileDef"):
            raise errors.DataLossError(
                None, None, f"{ASSETS_KEY} holds a {packed.type_url}, not an AssetFileDef"
            )
        out.append(AssetFileDef.FromString(packed.value))
    return out


def _asset_feeds(mg, export_dir, import_scope) -> dict:
    feeds = {}
    for asset in _asset_defs(mg):
        path = os.path.join(export_dir, ASSETS_DIRECTORY, asset.filename)
        feeds[_scoped(asset.tensor_info.name, import_scope)] = path
    return feeds


def _init_op_name(mg) -> str | None:
    sig = mg.signature_def.get(INIT_OP_SIGNATURE_KEY)
    if sig is not None and INIT_OP_SIGNATURE_KEY in sig.outputs:
        return sig.outputs[INIT_OP_SIGNATURE_KEY].name
    for key in (MAIN_OP_KEY, LEGACY_INIT_OP_KEY):
        if key in mg.collection_def and mg.collection_def[key].node_list.value:
            return mg.collection_def[key].node_list.value[0]
    return None


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
    """Import the meta graph tagged `tags` into sess.graph, restore its variables, run its
    init op (with asset paths fed); returns the MetaGraphDef (with its signature_def).

    Raises:
      OSError: no SavedModel at export_dir.
      DataLossError: a corrupt saved_model.pb or checkpoint.
      RuntimeError: no meta graph with exactly these tags.
    """
    export_dir = os.fsdecode(export_dir)  # TF accepts bytes too (export_saved_model returns them)
    mg = _find(read_saved_model(export_dir), tags)
    with sess.graph.as_default():
        saver = saver_mod.import_meta_graph(mg, import_scope=import_scope, **saver_kwargs)
        prefix = variables_prefix(export_dir)
        if saver is not None and saver_mod.checkpoint_exists(prefix):
            saver.restore(sess, prefix)
        name = _init_op_name(mg)
        if name:
            name = _scoped(name.split(":")[0], import_scope)
            try:
                op = ops.get_default_graph().get_operation_by_name(name)
            except KeyError:
                raise errors.NotFoundError(
                    None, None, f"The SavedModel's init op {name} is not in its graph"
                ) from None
            sess.run(op, _asset_feeds(mg, export_dir, import_scope) or None)
    return mg
