"""`save_model` / `load_model` as tf.keras.models exports them: the file format is picked
by the path, a `.keras` archive (saving_v3.py) or Keras' HDF5 file (saving.py)."""

from __future__ import annotations

from asyncflow.keras import saving, saving_v3

__all__ = ["save_model", "load_model"]


def save_model(model, filepath, overwrite=True, include_optimizer=True, save_format=None,
               signatures=None, options=None, save_traces=True) -> None:  # fmt: skip
    """`tf.keras.models.save_model`: a `.keras` path (or save_format='keras') writes
    Keras' v3 archive, a .h5/.hdf5 path Keras' HDF5 file.

    Raises:
      ValueError: save_format='keras' with a path that does not end in .keras.
      NotImplementedError: the SavedModel format (any other path).
    """
    if saving_v3.is_keras_path(filepath) or save_format == "keras":
        if not saving_v3.is_keras_path(filepath):
            raise ValueError(
                "Invalid filepath extension for saving. Please add either a `.keras` "
                "extension for the native TF-Keras format (recommended) or a `.h5` "
                f"extension. Received: filepath={filepath}"
            )
        saving_v3.save_model(model, filepath, overwrite, include_optimizer)
        return
    saving.save_model(model, filepath, overwrite, include_optimizer, save_format)


def load_model(filepath, custom_objects=None, compile=True, options=None, safe_mode=True):  # noqa: A002
    """`tf.keras.models.load_model`: a `.keras` archive or Keras' HDF5 file.

    Raises:
      OSError: no file at `filepath`.
      ValueError: an unknown class (see `custom_objects`), or weights that do not fit.
    """
    if saving_v3.is_keras_path(filepath):
        return saving_v3.load_model(filepath, custom_objects, compile)
    return saving.load_model(filepath, custom_objects, compile, options)
