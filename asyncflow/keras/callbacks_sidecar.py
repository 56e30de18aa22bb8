"""`tf.keras.callbacks.SidecarEvaluatorModelExport`: a ModelCheckpoint (save_best_only)
for a sidecar evaluator, which evaluates the checkpoints a training job writes and
exports the best of them.

Before each evaluation (`on_test_begin`) it finds the training job's newest checkpoint
matching `checkpoint_filepath` (the directory's `checkpoint` state if it names a
matching one, else the most recently modified matching file) and takes the epoch in its
"ckpt-<n>" name; after the evaluation (`on_test_end`) it saves the model to
`export_filepath`, formatted with that epoch, when `monitor` improved.
"""

from __future__ import annotations

import os
import re

from asyncflow import gfile, tf_logging
from asyncflow.keras.callbacks import ModelCheckpoint
from asyncflow.train import saver

__all__ = ["SidecarEvaluatorModelExport"]


class SidecarEvaluatorModelExport(ModelCheckpoint):
    """Exports the best model seen by a sidecar evaluation (module docstring)."""

    def __init__(self, export_filepath, checkpoint_filepath, **kwargs):
        super().__init__(filepath=export_filepath, save_best_only=True, **kwargs)
        self._checkpoint_filepath = checkpoint_filepath
        self.export_index = 0

    def on_test_begin(self, logs=None):
        newest = _newest_matching(self._checkpoint_filepath)
        if newest is None:
            self.export_index = 0
        else:
            self.export_index = int(re.match(r".*ckpt-(?P<ckpt>\d+)", newest)["ckpt"]) - 1

    def on_test_end(self, logs=None):
        logs = logs or {}
        epoch = self.export_index
        current = logs.get(self.monitor)
        if current is None:
            tf_logging.warning(
                "Can save best model only with %s available, skipping.", self.monitor
            )
            return
        if not self.monitor_op(current, self.best):
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {self.best:.5f}")
            return
        super().on_epoch_end(epoch, logs)


def _newest_matching(pattern: str):
    """The newest file matching `pattern` (its `{...}` fields as wildcards), as Keras
    finds a training job's latest checkpoint: the directory's checkpoint state if it
    matches, else the one most recently modified file, else (a tie) the largest name;
    None when nothing matches."""
    directory, base = os.path.dirname(pattern), os.path.basename(pattern)
    regex = re.compile("^" + re.sub(r"{.*}", r".*", base) + "$")
    if not gfile.exists(directory):
        return None
    latest = saver.latest_checkpoint(directory)
    if latest is not None and regex.match(os.path.basename(latest)):
        return latest
    paths = [os.path.join(directory, n) for n in gfile.listdir(directory) if regex.match(n)]
    if not paths:
        return None
    times = {p: os.path.getmtime(p) for p in paths}
    newest = max(times.values())
    at_newest = [p for p in paths if times[p] == newest]
    return at_newest[0] if len(at_newest) == 1 else max(paths)
