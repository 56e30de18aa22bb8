"""Exporters run by train_and_evaluate after evaluations (TF1's FinalExporter, ...).

FinalExporter writes a SavedModel only for the evaluation of the last step;
LatestExporter writes one after every evaluation and keeps the newest
`exports_to_keep` under its directory (export_dir_base/<timestamp> each).
"""

from __future__ import annotations

import os
import shutil

from asyncflow.estimator.training import Exporter

__all__ = ["FinalExporter", "LatestExporter"]


class _SavedModelExporter(Exporter):
    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
        self._name = name
        self._receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self):
        return self._name

    def _export(self, estimator, export_path, checkpoint_path):
        return estimator.export_saved_model(
            export_path,
            self._receiver_fn,
            assets_extra=self._assets_extra,
            as_text=self._as_text,
            checkpoint_path=checkpoint_path,
        )


class FinalExporter(_SavedModelExporter):
    """Exports a SavedModel once, for the final evaluation of a training run."""

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if not is_the_final_export:
            return None
        return self._export(estimator, export_path, checkpoint_path)


class LatestExporter(_SavedModelExporter):
    """Exports a SavedModel after every evaluation, keeping the newest exports_to_keep.

    Raises:
      ValueError: exports_to_keep not positive.
    """

    def __init__(
        self,
        name,
        serving_input_receiver_fn,
        assets_extra=None,
        as_text=False,
        exports_to_keep=5,
    ):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError("`exports_to_keep`, if provided, must be positive number")
        self._exports_to_keep = exports_to_keep

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        path = self._export(estimator, export_path, checkpoint_path)
        self._garbage_collect(export_path)
        return path

    def _garbage_collect(self, export_dir_base) -> None:
        if self._exports_to_keep is None:
            return
        stamps = sorted(int(n) for n in os.listdir(export_dir_base) if n.isdigit())
        for stamp in stamps[: -self._exports_to_keep]:
            shutil.rmtree(os.path.join(export_dir_base, str(stamp)), ignore_errors=True)
