"""`save_model` / `load_model` as tf.keras.models exports them: the file format is picked
by the path, a `.keras` archive (saving_v3.py), Keras' HDF5 file (saving.py) or, for
any other path, a Keras SavedModel directory (saving_savedmodel.py; HDF5 after
disable_v2_behavior, as TF's default)."""

from __future__ import annotations

from asyncflow import compat
from asyncflow.keras import saving_hdf5 as saving
from asyncflow.keras import saving_savedmodel, saving_v3

__all__ = ["save_model", "load_model"]


_LEGACY_SAVE_ARGS = ("include_optimizer", "signatures", "options", "save_traces")


def save_model(model, filepath, overwrite=True, save_format=None, **kwargs) -> None:
    """`tf.keras.models.save_model`: a `.keras` path (or save_format='keras') writes
    Keras' v3 archive, a .h5/.hdf5 path Keras' HDF5 file, any other path (or
    save_format='tf') a Keras SavedModel directory (HDF5 by default after
    disable_v2_behavior, as TF's).  As TF's, the HDF5 and
    SavedModel arguments (`include_optimizer`, `signatures`, `options`, `save_traces`)
    come by keyword.

    Raises:
      ValueError: save_format='keras' with a path that does not end in .keras, or a
        keyword argument given for the .keras format.
      TypeError: an unknown keyword argument.
      ValueError: the SavedModel format for a model whose inputs are not known.
    """
    if saving_v3.is_keras_path(filepath) or save_format == "keras":
        if kwargs:
            raise ValueError(
                "The following argument(s) are not supported with the native TF-Keras "
                f"format: {list(kwargs)}"
            )
        if not saving_v3.is_keras_path(filepath):
            raise ValueError(
                "Invalid filepath extension for saving. Please add either a `.keras` "
                "extension for the native TF-Keras format (recommended) or a `.h5` "
                f"extension. Received: filepath={filepath}"
            )
        saving_v3.save_model(model, filepath, overwrite)
        return
    unknown = [k for k in kwargs if k not in _LEGACY_SAVE_ARGS]
    if unknown:
        raise TypeError(f"save_model() got an unexpected keyword argument '{unknown[0]}'")
    include_optimizer = kwargs.get("include_optimizer", True)
    # (TF's default: a SavedModel with TF 2 behaviour on, HDF5 after disable_v2_behavior)
    default = "tf" if compat.v2_behavior_enabled() else "h5"
    fmt = (save_format or ("h5" if saving.is_hdf5_filepath(filepath) else default)).lower()
    if fmt in ("tf", "tensorflow"):
        saving_savedmodel.save_model(
            model, filepath, overwrite, include_optimizer, kwargs.get("signatures")
        )
        return
    saving.save_model(model, filepath, overwrite, include_optimizer, fmt)


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True, **kwargs):  # noqa: A002
    """`tf.keras.models.load_model`: a `.keras` archive, Keras' HDF5 file or a Keras
    SavedModel directory (`options`, by keyword, as TF's).

    Raises:
      OSError: no file at `filepath`.
      ValueError: an unknown class (see `custom_objects`), or weights that do not fit.
      TypeError: an unknown keyword argument.
    """
    unknown = [k for k in kwargs if k != "options"]
    if unknown:
        raise TypeError(f"load_model() got an unexpected keyword argument '{unknown[0]}'")
    if saving_v3.is_keras_path(filepath):
        return saving_v3.load_model(filepath, custom_objects, compile)
    if saving_savedmodel.is_keras_savedmodel(filepath):
        return saving_savedmodel.load_model(filepath, custom_objects, compile)
    return saving.load_model(filepath, custom_objects, compile, kwargs.get("options"))
