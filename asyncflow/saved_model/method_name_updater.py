"""`tf.saved_model.signature_def_utils.MethodNameUpdater`: rewrite the method names of a
SavedModel's SignatureDefs in place, as TF 2.21 does.

It reads saved_model.pb (or .pbtxt) once; `replace_method_name` edits the parsed
message (the meta graph with exactly the given tag set, or every meta graph when `tags`
is None, each then needing the signature); `save` writes the message back in the form it was
read, into the original directory or `new_export_dir` (which must exist: only that file
is written there, as in TF).
"""

from __future__ import annotations

import os

from asyncflow import checkpoint_format as cf
from asyncflow import meta_graph
from asyncflow.saved_model.constants import SAVED_MODEL_FILENAME_PB, SAVED_MODEL_FILENAME_PBTXT
from asyncflow.saved_model.loader import _saved_model_path, read_saved_model

__all__ = ["MethodNameUpdater"]


class MethodNameUpdater:
    """Edits the method names of a SavedModel's signatures, then `save`s it.

    Raises (constructor):
      OSError: `export_dir` holds no saved_model.pb / .pbtxt.
    """

    def __init__(self, export_dir):
        self._export_dir = os.fsdecode(export_dir)
        self._saved_model = read_saved_model(self._export_dir)
        read_from = _saved_model_path(self._export_dir)
        self._as_text = read_from.endswith(SAVED_MODEL_FILENAME_PBTXT)

    def replace_method_name(self, signature_key, method_name, tags=None):
        """Set the method name of signature `signature_key` in the meta graph tagged
        exactly `tags` (a tag or list of tags; None: in every meta graph).

        Raises:
          ValueError: an empty key or method name, no meta graph with those tags, or no
            such signature in it.
        """
        if not signature_key:
            raise ValueError("`signature_key` must be defined.")
        if not method_name:
            raise ValueError("`method_name` must be defined.")
        if tags is not None and not isinstance(tags, list):
            tags = [tags]
        meta_graphs = self._saved_model.meta_graphs
        if tags is None:  # every meta graph, each of which must have the signature
            found = list(meta_graphs)
        else:
            found = [mg for mg in meta_graphs if set(mg.meta_info_def.tags) == set(tags)]
        if not found:
            raise ValueError(
                f"MetaGraphDef associated with tags {tags} could not be found in "
                "SavedModel. This means either you specified invalid tags or your "
                "SavedModel does not have a MetaGraphDef with the specified tags."
            )
        for mg in found:
            if signature_key not in mg.signature_def:
                raise ValueError(
                    f"MetaGraphDef associated with tags {tags} does not have a "
                    f"signature_def with key: '{signature_key}'. This means either you "
                    "specified the wrong signature key or forgot to put the signature_def "
                    "with the corresponding key in your SavedModel."
                )
            mg.signature_def[signature_key].method_name = method_name

    def save(self, new_export_dir=None):
        """Write the edited SavedModel in the form it was read (saved_model.pb, or
        saved_model.pbtxt).

        Raises:
          NotFoundError: the target directory does not exist.
        """
        target = self._export_dir if new_export_dir is None else os.fsdecode(new_export_dir)
        name = SAVED_MODEL_FILENAME_PBTXT if self._as_text else SAVED_MODEL_FILENAME_PB
        path = os.path.join(target, name)
        cf.atomic_write(path, meta_graph.encode_meta_graph(self._saved_model, self._as_text))
