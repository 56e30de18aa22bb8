"""Keras' HDF5 files: whole models (`model.save('m.h5')`, `load_model`) and weights
(`save_weights('w.h5')`, `load_weights`), in TF 2.21's tf_keras layout, so that files
written by either side load in the other.

Layout (attributes in brackets):
  /            [keras_version, backend, model_config (JSON), training_config (JSON)]
  /model_weights                      [layer_names, backend, keras_version]
  /model_weights/<layer>              [weight_names: the variables' names, "d1/kernel:0"]
  /model_weights/<layer>/d1/kernel:0  the values (the name's "/" make the subgroups)
  /model_weights/top_level_model_weights   [weight_names] (empty: no weights of its own)
  /optimizer_weights                  [weight_names] iterations, then the slots
A weights file is the `model_weights` group at the root.  A header attribute above
HDF5's 64 KiB limit is split as name0, name1, ... (as Keras does).

Loading reads untrusted input: every array's shape and dtype are checked against the
variable it restores before it is read, and attributes are size-bounded.
"""

from __future__ import annotations

import json
import logging
import os

import numpy as np

from asyncflow.keras import backend
from asyncflow.keras import losses as losses_mod
from asyncflow.keras import metrics as metrics_mod
from asyncflow.keras import optimizers as optimizers_mod
from asyncflow.keras.model_config import KERAS_VERSION, model_from_config, saved_config
from asyncflow.keras.serialization import CustomObjectScope, get_registered_name

__all__ = [
    "save_model",
    "load_model",
    "save_weights_to_hdf5",
    "load_weights_from_hdf5",
    "is_hdf5_filepath",
]

_LOG = logging.getLogger("asyncflow.keras")
_HDF5_OBJECT_HEADER_LIMIT = 64512
# No config or name list Keras writes comes near this; a larger attribute is refused
# before it is read.
_MAX_ATTRIBUTE_BYTES = 64 << 20
_MAX_ATTRIBUTE_ITEMS = 1 << 20


def _h5py():
    try:
        import h5py
    except ImportError as e:  # pragma: no cover - h5py is a dependency
        raise ImportError("Keras' HDF5 format needs h5py (`pip install h5py`)") from e
    return h5py


def is_hdf5_filepath(filepath) -> bool:
    """Whether Keras picks HDF5 for `filepath` by its extension."""
    path = os.fspath(filepath)
    return path.endswith((".h5", ".hdf5"))


# -- attributes ---------------------------------------------------------------------------------


def _save_names(group, name, names) -> None:
    h5py = _h5py()
    data = [n.encode("utf8") for n in names]
    if not data:
        group.attrs[name] = np.asarray([])
        return
    chunks = 1
    while sum(len(x) for x in data) > _HDF5_OBJECT_HEADER_LIMIT * chunks:
        chunks += 1
    if chunks == 1:
        group.attrs.create(name, data, dtype=h5py.special_dtype(vlen=bytes))
        return
    for i, part in enumerate(np.array_split(np.array(data, dtype=object), chunks)):
        group.attrs.create(f"{name}{i}", list(part), dtype=h5py.special_dtype(vlen=bytes))


def _read_attr(group, name):
    attr = group.attrs.get_id(name)
    count = int(np.prod(attr.shape, dtype=np.int64)) if attr.shape else 1
    if count == 0:
        return np.asarray([])
    # (a variable-length string's storage is its pointer: its text is bounded by the
    # element count times HDF5's own limits)
    size = attr.get_storage_size()
    if count > _MAX_ATTRIBUTE_ITEMS or size > _MAX_ATTRIBUTE_BYTES:
        raise ValueError(f"HDF5 attribute {name!r} is too large ({count} items, {size} bytes)")
    return group.attrs[name]


def _load_names(group, name) -> list:
    if name in group.attrs:
        values = _read_attr(group, name)
    else:
        values, i = [], 0
        while f"{name}{i}" in group.attrs:
            values.extend(_read_attr(group, f"{name}{i}"))
            i += 1
    out = []
    for v in np.atleast_1d(values):
        out.append(v.decode("utf8") if isinstance(v, bytes) else str(v))
    return out


def _load_text(group, name):
    if name not in group.attrs:
        return None
    value = _read_attr(group, name)
    return value.decode("utf8") if isinstance(value, bytes) else str(value)


# -- weights ------------------------------------------------------------------------------------


def _write_values(group, weights) -> None:
    values = backend.batch_get_value(weights)
    _save_names(group, "weight_names", [w.name for w in weights])
    for w, value in zip(weights, values, strict=True):
        value = np.asarray(value)
        dataset = group.create_dataset(w.name, value.shape, dtype=value.dtype)
        dataset[()] = value


def save_weights_to_hdf5(group, model) -> None:
    """Write `model`'s layers' weights into an open HDF5 group (Keras' layout)."""
    layers = model.layers
    _save_names(group, "layer_names", [layer.name for layer in layers])
    group.attrs["backend"] = "tensorflow"
    group.attrs["keras_version"] = KERAS_VERSION
    # Groups are made in name order, as Keras does: a name with "/" makes its parent
    # groups, so "a/b/pad" first would leave no room for a layer named "a/b"
    # (MobileNetV3's "expanded_conv/depthwise/pad" precedes "expanded_conv/depthwise").
    for layer in sorted(layers, key=lambda la: la.name):
        _write_values(group.create_group(layer.name), _layer_weights(layer))
    top = group.create_group("top_level_model_weights")
    _save_names(top, "weight_names", [])


def _layer_weights(layer) -> list:
    return list(layer.trainable_weights) + list(layer.non_trainable_weights)


def _checked_value(dataset, variable, where=None):
    """The array in `dataset` once its shape and dtype fit `variable` (of the layer
    `where` names, or of the optimizer).

    Raises:
      ValueError: another shape, or not a numeric/bool array.
    """
    expected = tuple(variable.shape.as_list())
    got = tuple(dataset.shape)
    if got != expected and where is None:
        raise ValueError(
            f"Optimizer weight shape {expected} not compatible with provided weight shape {got}"
        )
    if got != expected:
        raise ValueError(
            f"Shape mismatch in {where} for weight {variable.name}. Weight expects shape "
            f"{expected}. Received saved weight with shape {got}"
        )
    if dataset.dtype.kind not in "biuf":
        raise ValueError(f"Weight {variable.name} in the file is not numeric ({dataset.dtype})")
    return np.asarray(dataset[()])


def _datasets(group, layer_name) -> list:
    g = group[layer_name]
    return [g[name] for name in _load_names(g, "weight_names")]


def load_weights_from_hdf5(group, model, by_name=False, skip_mismatch=False) -> None:
    """Restore `model`'s weights from an open HDF5 group written by Keras: by layer
    order (layers with weights, in turn) or, with `by_name`, by layer name.

    Raises:
      ValueError: a different number of layers with weights (by order), a layer with a
        different number of weights, or a weight of another shape (unless
        `skip_mismatch` with `by_name`).
    """
    if by_name:
        return _load_by_name(group, model, skip_mismatch)
    layers = [layer for layer in model.layers if _layer_weights(layer)]
    names = [n for n in _load_names(group, "layer_names") if _load_names(group[n], "weight_names")]
    if len(names) != len(layers):
        raise ValueError(
            "Layer count mismatch when loading weights from file. Model expected "
            f"{len(layers)} layers, found {len(names)} saved layers."
        )
    # Counts first, for every layer (as Keras checks them), then each array's shape as
    # it is read.
    matched = []
    for k, (name, layer) in enumerate(zip(names, layers, strict=True)):
        datasets = _datasets(group, name)
        weights = _layer_weights(layer)
        if len(datasets) != len(weights):
            raise ValueError(
                f"Weight count mismatch for layer #{k} (named {layer.name} in the current "
                f"model, {name} in the save file). Layer expects {len(weights)} weight(s). "
                f"Received {len(datasets)} saved weight(s)"
            )
        matched.append((f"layer #{k} (named {layer.name})", datasets, weights))
    pairs = []
    for where, datasets, weights in matched:
        pairs += [
            (w, _checked_value(ds, w, where)) for ds, w in zip(datasets, weights, strict=True)
        ]
    backend.batch_set_value(pairs)
    return None


def _load_by_name(group, model, skip_mismatch) -> None:
    by_name: dict = {}
    for layer in model.layers:
        by_name.setdefault(layer.name, []).append(layer)
    pairs = []
    for k, name in enumerate(_load_names(group, "layer_names")):
        datasets = _datasets(group, name)
        for layer in by_name.get(name, []):
            weights = _layer_weights(layer)
            if len(datasets) != len(weights):
                message = (
                    f"Weight count mismatch for layer #{k} (named {layer.name}). Layer expects "
                    f"{len(weights)} weight(s). Received {len(datasets)} saved weight(s)"
                )
                if skip_mismatch:
                    _LOG.warning("Skipping loading of weights for layer #%d: %s", k, message)
                    continue
                raise ValueError(message)
            for ds, w in zip(datasets, weights, strict=True):
                try:
                    pairs.append((w, _checked_value(ds, w, f"layer #{k} (named {layer.name})")))
                except ValueError as e:
                    if not skip_mismatch:
                        raise
                    _LOG.warning("Skipping loading weights for layer #%d: %s", k, e)
    backend.batch_set_value(pairs)


# -- whole models -------------------------------------------------------------------------------


def _serialize_nested(value):
    """compile() arguments as JSON: names stay, functions by name, objects as configs."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {k: _serialize_nested(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_serialize_nested(v) for v in value]
    return losses_mod.serialize(value)


def _training_config(model) -> dict:
    args = model._compile_kwargs
    return {
        "loss": _serialize_nested(args.get("loss")),
        "metrics": _serialize_nested(args.get("metrics")),
        "loss_weights": _serialize_nested(args.get("loss_weights")),
        "sample_weight_mode": args.get("sample_weight_mode"),
        "weighted_metrics": _serialize_nested(args.get("weighted_metrics")),
        "optimizer_config": optimizers_mod.serialize(model.optimizer),
    }


def optimizer_weights(optimizer) -> list:
    """The optimizer's state as Keras saves it (`optimizer.weights`: iterations, then
    the slots)."""
    return list(optimizer.weights)


def save_model(model, filepath, overwrite=True, include_optimizer=True, save_format=None,
               signatures=None, options=None, save_traces=True) -> None:  # fmt: skip
    """`tf.keras.models.save_model`: the model's config, weights and (compiled) its
    training config and optimizer state in one HDF5 file.

    Raises:
      NotImplementedError: the SavedModel format (a path without .h5/.hdf5, or
        save_format='tf'): use a path ending in .h5 or save_format='h5'.
      NotImplementedError: a subclassed model (no config to write).
    """
    path = os.fspath(filepath)
    fmt = (save_format or ("h5" if is_hdf5_filepath(path) else "tf")).lower()
    if path.endswith(".keras") or fmt == "keras":
        fmt = "the Keras v3 (.keras) format"
    elif fmt not in ("h5", "hdf5"):
        fmt = "the SavedModel format"
    if fmt not in ("h5", "hdf5"):
        raise NotImplementedError(
            f"Saving a Keras model in {fmt} (to {path!r}) is not supported by asyncflow; "
            "save it as HDF5 instead: model.save('model.h5') or save_format='h5'."
        )
    if not overwrite and os.path.exists(path):
        # (Keras asks on the terminal; a library must not block on input)
        _LOG.warning("%s exists and overwrite=False: the model was not saved", path)
        return
    config = {"class_name": get_registered_name(type(model)), "config": saved_config(model)}
    model_json = json.dumps(config, default=_json_default)
    h5py = _h5py()
    if os.path.dirname(path):  # Keras' model.save makes the directory
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = KERAS_VERSION
        f.attrs["backend"] = "tensorflow"
        f.attrs["model_config"] = model_json
        save_weights_to_hdf5(f.create_group("model_weights"), model)
        optimizer = getattr(model, "optimizer", None)
        if include_optimizer and optimizer is not None and model._compile_kwargs is not None:
            if isinstance(optimizer, optimizers_mod.TFOptimizer):
                _LOG.warning(
                    "TensorFlow optimizers do not make it possible to access optimizer "
                    "attributes or optimizer state after instantiation. As a result, we "
                    "cannot save the optimizer as part of the model save file."
                )
            else:
                f.attrs["training_config"] = json.dumps(
                    _training_config(model), default=_json_default
                )
                weights = optimizer_weights(optimizer)
                if weights:
                    _write_values(f.create_group("optimizer_weights"), weights)


def _json_default(value):
    if hasattr(value, "as_list"):
        return value.as_list()
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"Not JSON serializable: {value!r}")


def _deserialize_nested(value, deserialize):
    if isinstance(value, dict) and "class_name" in value and "config" in value:
        return deserialize(value)
    if isinstance(value, dict):
        return {k: _deserialize_nested(v, deserialize) for k, v in value.items()}
    if isinstance(value, list):
        return [_deserialize_nested(v, deserialize) for v in value]
    return value


def load_model(filepath, custom_objects=None, compile=True, options=None):  # noqa: A002
    """`tf.keras.models.load_model` for Keras' HDF5 files: the model rebuilt from its
    config, its weights restored, and (with `compile`, when the file has a training
    config) compiled with its optimizer state restored.

    Raises:
      OSError: no file at `filepath`.
      NotImplementedError: a SavedModel directory.
      ValueError: an unknown class (see `custom_objects`), or weights that do not fit.
    """
    path = os.fspath(filepath)
    if path.endswith(".keras"):
        raise NotImplementedError(
            f"Loading a Keras v3 (.keras) file ({path!r}) is not supported by asyncflow; "
            "save the model as HDF5 (model.save('model.h5')) and load that."
        )
    if os.path.isdir(path):
        raise NotImplementedError(
            f"The directory {path!r} has no keras_metadata.pb: asyncflow's Keras loads a "
            "Keras SavedModel (model.save(dir)), not a plain SavedModel (use "
            "tf.saved_model.load)."
        )
    if not os.path.exists(path):
        raise OSError(f"No file or directory found at {path}")
    h5py = _h5py()
    with CustomObjectScope(custom_objects or {}), h5py.File(path, "r") as f:
        text = _load_text(f, "model_config")
        if text is None:
            raise ValueError(f"No model config found in the file at {path}.")
        model = model_from_config(json.loads(text), custom_objects=custom_objects)
        load_weights_from_hdf5(f["model_weights"], model)
        training = _load_text(f, "training_config")
        if not compile:
            return model
        if training is None:
            _LOG.warning(
                "No training configuration found in the save file, so the model was "
                "*not* compiled. Compile it manually."
            )
            return model
        _compile_from(model, json.loads(training), custom_objects)
        if "optimizer_weights" in f:
            _restore_optimizer(model, f["optimizer_weights"])
    return model


def _compile_from(model, training: dict, custom_objects) -> None:
    name = str(training.get("optimizer_config", {}).get("class_name", ""))
    if name.startswith("Custom>") and name not in (custom_objects or {}):
        # (TF 2's Keras optimizers, which graph-mode Keras cannot restore either)
        raise ValueError(
            f"The file's optimizer ({name}) is TF 2's Keras optimizer, whose state "
            "graph-mode Keras cannot restore; load the model with compile=False and "
            "compile it again."
        )
    optimizer = optimizers_mod.deserialize(
        training["optimizer_config"], custom_objects=custom_objects
    )

    def loss_of(config):
        return losses_mod.deserialize(config, custom_objects=custom_objects)

    def metric_of(config):
        return metrics_mod.deserialize(config, custom_objects=custom_objects)

    model.compile(
        optimizer=optimizer,
        loss=_deserialize_nested(training.get("loss"), loss_of),
        metrics=_deserialize_nested(training.get("metrics"), metric_of),
        loss_weights=training.get("loss_weights"),
        sample_weight_mode=training.get("sample_weight_mode"),
        weighted_metrics=_deserialize_nested(training.get("weighted_metrics"), metric_of),
    )


def _restore_optimizer(model, group) -> None:
    # The slots exist once the training function is built (as Keras builds it here).
    model._function("train")
    weights = optimizer_weights(model.optimizer)
    datasets = [group[name] for name in _load_names(group, "weight_names")]
    if len(datasets) != len(weights):
        _LOG.warning(
            "Error in loading the saved optimizer state. As a result, your model is "
            "starting with a freshly initialized optimizer."
        )
        return
    backend.batch_set_value(
        [(w, _checked_value(ds, w)) for ds, w in zip(datasets, weights, strict=True)]
    )
