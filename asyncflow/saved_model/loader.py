"""Load a SavedModel into a session (TF1's `tf.saved_model.loader.load`)."""

from __future__ import annotations

import json
import os

from asyncflow import graph as ops
from asyncflow import meta_graph
from asyncflow.saved_model.builder import (
    ASSETS_DIRECTORY,
    LEGACY_INIT_OP_KEY,
    MAIN_OP_KEY,
    SAVED_MODEL_FILENAME,
    variables_prefix,
)
from asyncflow.train import saver as saver_mod

__all__ = ["load", "maybe_saved_model_directory", "read_saved_model"]


def maybe_saved_model_directory(export_dir) -> bool:
    """Whether `export_dir` looks like a SavedModel directory."""
    return os.path.isfile(os.path.join(os.fspath(export_dir), SAVED_MODEL_FILENAME))


def read_saved_model(export_dir) -> dict:
    """The parsed saved_model.json.

    Raises:
      OSError: missing, too large or unparsable.
    """
    path = os.path.join(os.fspath(export_dir), SAVED_MODEL_FILENAME)
    if not os.path.isfile(path):
        raise OSError(f"SavedModel file does not exist at: {path}")
    if os.path.getsize(path) > meta_graph.MAX_META_GRAPH_BYTES:
        raise OSError(f"Cannot parse file {path}: too large.")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
        graphs = doc["meta_graphs"]
        if not isinstance(graphs, list):
            raise ValueError("meta_graphs is not a list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise OSError(f"Cannot parse file {path}: {e}.") from None
    doc["meta_graphs"] = [meta_graph.MetaGraphDef.from_dict(m) for m in graphs]
    return doc


def _find(doc: dict, tags, export_dir):
    wanted = set(tags)
    available = []
    for mg in doc["meta_graphs"]:
        have = mg["meta_info_def"].get("tags", [])
        if set(have) == wanted:
            return mg
        available.append(have)
    raise RuntimeError(
        f"MetaGraphDef associated with tags {str(list(tags)).strip('[]')} could not be found "
        "in SavedModel. To inspect available tag-sets in the SavedModel, please use the "
        f"SavedModel CLI: `saved_model_cli`\navailable_tags: {available}"
    )


def _asset_feeds(mg, export_dir, import_scope) -> dict:
    feeds = {}
    for asset in mg.get("asset_file_def", []):
        name = asset["tensor_info"]["name"]
        if import_scope:
            name = import_scope.rstrip("/") + "/" + name
        feeds[name] = os.path.join(export_dir, ASSETS_DIRECTORY, asset["filename"])
    return feeds


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
    """Import the meta graph tagged `tags` into sess.graph, restore its variables, run its
    main op (with asset paths fed); returns the MetaGraphDef (with its signature_def).

    Raises:
      OSError: no SavedModel at export_dir.
      RuntimeError: no meta graph with exactly these tags.
    """
    export_dir = os.fspath(export_dir)
    doc = read_saved_model(export_dir)
    mg = _find(doc, tags, export_dir)
    with sess.graph.as_default():
        saver = meta_graph.import_meta_graph(mg, import_scope=import_scope, **saver_kwargs)
        prefix = variables_prefix(export_dir)
        if saver is not None and saver_mod.checkpoint_exists(prefix):
            saver.restore(sess, prefix)
        feeds = _asset_feeds(mg, export_dir, import_scope)
        for key in (MAIN_OP_KEY, LEGACY_INIT_OP_KEY):
            names = mg["collection_def"].get(key, {}).get("node_list", {}).get("value", [])
            if names:
                name = names[0] if not import_scope else import_scope.rstrip("/") + "/" + names[0]
                sess.run(ops.get_default_graph().get_operation_by_name(name), feeds or None)
                break
    return mg
