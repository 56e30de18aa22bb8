"""Keras' v3 saving format, as tf_keras 2.21 writes it: `model.save('m.keras')`,
`load_model('m.keras')`, `save_weights('w.weights.h5')` and `load_weights` of such a
file, so that files written by either side load in the other.

A `.keras` file is a zip archive (entries stored, not compressed):
  metadata.json     {"keras_version": "2.21.0", "date_saved": "YYYY-mm-dd@HH:MM:SS"}
  config.json       the model's config in the v3 serialization: every object is
                    {"module", "class_name", "config", "registered_name"} (plus
                    "build_config" and, at the top, "compile_config")
  model.weights.h5  the weights, by object path rather than by variable name:
                    /vars (the model's own), /layers/<name>/vars/0, 1, ... where <name>
                    is the layer's class in snake case ("dense", then "dense_1" for the
                    next Dense of the same list), sub-layers under the attribute that
                    holds them (lstm/cell, bidirectional/forward_layer, ...), and
                    /metrics/<name>/vars for the compiled metrics.
A `.weights.h5` file is that weights file on its own.

TF's Keras walks an object's attributes in reverse name order and saves each object once
(the first path that reaches it); the attributes that hold sub-layers here are the ones
asyncflow's layers have.  Graph-mode Keras' optimizers (TF's "legacy" ones) have no
entry in this format, as in TF: a loaded model is compiled afresh.

Loading reads untrusted input: each array's shape and dtype are checked against the
variable it restores before it is read.

Note: TF 2.21 itself refuses this format in graph mode (saving raises
NotImplementedError: numpy() needs eager execution; loading cannot resolve the classes);
the files asyncflow writes are the ones TF's eager Keras writes and reads.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import os
import re
import zipfile

import numpy as np

from asyncflow.keras import backend
from asyncflow.keras import saving_hdf5 as saving
from asyncflow.keras.model_config import KERAS_VERSION, model_from_config, saved_config
from asyncflow.keras.serialization import CustomObjectScope, get_registered_name

__all__ = [
    "is_keras_path",
    "is_weights_h5_path",
    "save_model",
    "load_model",
    "save_weights",
    "load_weights",
    "state_tree",
]

_LOG = logging.getLogger("asyncflow.keras")
_CONFIG = "config.json"
_METADATA = "metadata.json"
_WEIGHTS = "model.weights.h5"
# A config.json larger than this is refused before it is parsed.
_MAX_CONFIG_BYTES = 64 << 20

# Attributes that hold sub-layers, in the reverse name order TF's walk visits them.
_CHILD_ATTRS = ("layers", "layer", "forward_layer", "cells", "cell", "backward_layer")

_MODULES = {
    "layers": "keras.layers",
    "initializers": "keras.initializers",
    "regularizers": "keras.regularizers",
    "constraints": "keras.constraints",
    "optimizers": "keras.optimizers.legacy",
    "losses": "keras.losses",
    "metrics": "keras.metrics",
}
_V3_ONLY_KEYS = ("module", "registered_name", "build_config", "compile_config", "shared_object_id")


def is_keras_path(filepath) -> bool:
    """Whether `filepath` names a Keras v3 archive (TF picks the format by `.keras`)."""
    return os.fspath(filepath).endswith(".keras")


def is_weights_h5_path(filepath) -> bool:
    """Whether `filepath` names a v3 weights file (`.weights.h5`)."""
    return os.fspath(filepath).endswith(".weights.h5")


# -- the object tree ------------------------------------------------------------------------


def to_snake_case(name: str) -> str:
    """ "BatchNormalization" -> "batch_normalization", "GRUCell" -> "gru_cell"."""
    name = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    name = re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()
    return "private" + name if name.startswith("_") else name


def _own_variables(obj) -> list:
    if hasattr(obj, "_trainable_weights"):
        return list(obj._trainable_weights) + list(obj._non_trainable_weights)
    return list(getattr(obj, "variables", []))


def _is_trackable(value) -> bool:
    return hasattr(value, "_trainable_weights") or hasattr(value, "update_state")


def _holds(obj, child) -> bool:
    """Whether a layer tracks `child` (not so a Bidirectional's `layer`, the one it was
    given, whose copies hold the weights)."""
    sublayers = getattr(obj, "_sublayers", None)
    return sublayers is None or any(child is s for s in sublayers())


def state_tree(model) -> list:
    """[(path, variables)] for every object whose state the format saves, in visiting
    order; each object appears once, at the first path that reaches it."""
    visited: set = set()
    out: list = []

    def visit(obj, path):
        if id(obj) in visited:
            return
        visited.add(id(obj))
        out.append((path, _own_variables(obj)))
        for attr in _CHILD_ATTRS:
            child = getattr(obj, attr, None)
            if isinstance(child, (list, tuple)):
                visit_list(child, _join(path, attr))
            elif child is not None and _is_trackable(child) and _holds(obj, child):
                visit(child, _join(path, attr))

    def visit_list(items, path):
        used: dict = {}
        for item in items:
            if not _is_trackable(item) or id(item) in visited:
                continue
            name = to_snake_case(type(item).__name__)
            if name in used:
                used[name] += 1
                name = f"{name}_{used[name]}"
            else:
                used[name] = 0
            visit(item, _join(path, name))

    visit(model, "")
    if getattr(model, "_compile_kwargs", None) is not None:
        visit_list(list(model.metrics), "metrics")
    return out


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def _write_weights(h5, model) -> None:
    tree = state_tree(model)
    values = backend.batch_get_value([v for _, variables in tree for v in variables])
    it = iter(values)
    for path, variables in tree:
        group = h5.create_group(_join(path, "vars"))
        for i, _ in enumerate(variables):
            value = np.asarray(next(it))
            group.create_dataset(str(i), data=value)


def _read_weights(h5, model, skip_mismatch=False) -> None:
    assignments = []
    for path, variables in state_tree(model):
        where = _join(path, "vars")
        group = h5[where] if where in h5 else {}
        keys = list(group.keys()) if group else []
        if len(keys) != len(variables):
            message = (
                f"Layer '{path or 'model'}' expected {len(variables)} variables, but received "
                f"{len(keys)} variables during loading. Expected: {[v.name for v in variables]}"
            )
            if path.startswith("metrics/"):
                continue  # metrics are rebuilt by compile, as their state is not the model's
            if skip_mismatch:
                _LOG.warning("Skipping loading of weights: %s", message)
                continue
            raise ValueError(message)
        for i, variable in enumerate(variables):
            dataset = group[str(i)]
            try:
                assignments.append((variable, saving._checked_value(dataset, variable, path)))
            except ValueError:
                if not skip_mismatch:
                    raise
                _LOG.warning("Skipping loading of weights for %s: shape mismatch", path)
    backend.batch_set_value(assignments)


# -- configs ---------------------------------------------------------------------------------


def _kind_of(key: str, parent: str):
    if key.endswith("_initializer"):
        return "initializers"
    if key.endswith("_regularizer"):
        return "regularizers"
    if key.endswith("_constraint"):
        return "constraints"
    if key in ("layer", "layers", "cell", "cells", "backward_layer"):
        return "layers"
    return parent


def _to_v3(value, kind="layers"):
    """A legacy `{"class_name", "config"}` tree in the v3 serialization."""
    if isinstance(value, (list, tuple)):
        return [_to_v3(v, kind) for v in value]
    if not isinstance(value, dict):
        return value.as_list() if hasattr(value, "as_list") else _plain(value)
    if "class_name" in value and "config" in value:
        name = value["class_name"]
        registered = None
        module = _MODULES.get(kind, "keras")
        if isinstance(name, str) and ">" in name:
            registered, name, module = name, name.split(">", 1)[1], None
        elif name == "Sequential":
            module = "keras"
        elif name == "Functional":
            module = "tf_keras.src.engine.functional"
        config = value["config"]
        if isinstance(config, dict):
            config = {k: _to_v3(v, _kind_of(k, kind)) for k, v in config.items()}
        else:
            config = _to_v3(config, kind)
        out = {"module": module, "class_name": name, "config": config}
        out["registered_name"] = registered
        for k, v in value.items():
            if k not in ("class_name", "config"):
                out[k] = _to_v3(v, kind)
        return out
    return {k: _to_v3(v, _kind_of(k, kind)) for k, v in value.items()}


def _plain(value):
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def _from_v3(value):
    """A v3 config tree in the legacy form asyncflow's deserializers read."""
    if isinstance(value, list):
        return [_from_v3(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "class_name" in value and "config" in value:
        out = {k: _from_v3(v) for k, v in value.items() if k not in _V3_ONLY_KEYS}
        registered = value.get("registered_name")
        if isinstance(registered, str) and ">" in registered:
            out["class_name"] = registered
        return out
    return {k: _from_v3(v) for k, v in value.items()}


def _compile_config(model) -> dict:
    training = saving._training_config(model)
    return {
        "optimizer": _to_v3(training["optimizer_config"], "optimizers"),
        "loss": _to_v3(training.get("loss"), "losses"),
        "metrics": _to_v3(training.get("metrics"), "metrics"),
        "loss_weights": training.get("loss_weights"),
        "weighted_metrics": _to_v3(training.get("weighted_metrics"), "metrics"),
        "run_eagerly": None,
        "steps_per_execution": None,
        "jit_compile": None,
    }


def _model_config(model, include_optimizer=True) -> dict:
    legacy = {"class_name": get_registered_name(type(model)), "config": saved_config(model)}
    config = json.loads(json.dumps(legacy, default=saving._json_default))
    config.get("config", {}).pop("build_input_shape", None)
    out = _to_v3(config, "layers")
    inputs = getattr(model, "inputs", None)
    if inputs:
        shapes = [x.shape.as_list() for x in inputs]
        out["build_config"] = {"input_shape": shapes[0] if len(shapes) == 1 else shapes}
    optimizer = getattr(model, "optimizer", None)
    if include_optimizer and optimizer is not None and model._compile_kwargs is not None:
        out["compile_config"] = _compile_config(model)
    return out


def _compile_from(model, compile_config: dict, custom_objects) -> None:
    optimizer = compile_config.get("optimizer")
    if isinstance(optimizer, dict) and optimizer.get("module") == "keras.optimizers":
        # (TF 2's Keras optimizers, which graph-mode Keras cannot build)
        raise ValueError(
            f"The file's optimizer ({optimizer.get('class_name')}) is TF 2's Keras "
            "optimizer, which graph-mode Keras cannot restore; load the model with "
            "compile=False and compile it again."
        )
    if isinstance(optimizer, str):
        optimizer = {"class_name": optimizer, "config": {}}
    training = {
        "optimizer_config": _from_v3(optimizer),
        "loss": _from_v3(compile_config.get("loss")),
        "metrics": _from_v3(compile_config.get("metrics")),
        "loss_weights": compile_config.get("loss_weights"),
        "weighted_metrics": _from_v3(compile_config.get("weighted_metrics")),
    }
    saving._compile_from(model, training, custom_objects)


# -- entry points ----------------------------------------------------------------------------


def save_model(model, filepath, overwrite=True, include_optimizer=True) -> None:
    """`model.save('m.keras')`: the archive described in the module docstring."""
    path = os.fspath(filepath)
    if not overwrite and os.path.exists(path):
        _LOG.warning("%s exists and overwrite=False: the model was not saved", path)
        return
    config = json.dumps(_model_config(model, include_optimizer))
    metadata = json.dumps(
        {
            "keras_version": KERAS_VERSION,
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        }
    )
    h5py = saving._h5py()
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        _write_weights(h5, model)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(_METADATA, metadata)
        zf.writestr(_CONFIG, config)
        zf.writestr(_WEIGHTS, buffer.getvalue())


def load_model(filepath, custom_objects=None, compile=True):  # noqa: A002
    """`load_model('m.keras')`: the model rebuilt from config.json, its weights
    restored, compiled from its compile config when `compile` (optimizer state is not
    part of the file for graph-mode optimizers).

    Raises:
      OSError: no file at `filepath`.
      ValueError: not a Keras archive, an unknown class, or weights that do not fit.
    """
    path = os.fspath(filepath)
    if not os.path.exists(path):
        raise OSError(f"No file or directory found at {path}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"The file at {path} is not a Keras (.keras) zip archive.")
    h5py = saving._h5py()
    with zipfile.ZipFile(path, "r") as zf:
        names = zf.namelist()
        if _CONFIG not in names or _WEIGHTS not in names:
            raise ValueError(f"Expected a {_CONFIG} and a {_WEIGHTS} in the archive {path}.")
        if zf.getinfo(_CONFIG).file_size > _MAX_CONFIG_BYTES:
            raise ValueError(f"The {_CONFIG} in {path} is too large.")
        config = json.loads(zf.read(_CONFIG))
        with CustomObjectScope(custom_objects or {}):
            model = model_from_config(_from_v3(config), custom_objects=custom_objects)
            with zf.open(_WEIGHTS) as raw, h5py.File(io.BytesIO(raw.read()), "r") as h5:
                _read_weights(h5, model)
            compile_config = config.get("compile_config") if compile else None
            if compile_config:
                _compile_from(model, compile_config, custom_objects)
    return model


def save_weights(model, filepath, overwrite=True) -> None:
    """`save_weights('w.weights.h5')`: the weights file of the v3 format."""
    path = os.fspath(filepath)
    if not overwrite and os.path.exists(path):
        return
    with saving._h5py().File(path, "w") as h5:
        _write_weights(h5, model)


def load_weights(model, filepath, skip_mismatch=False) -> None:
    """`load_weights('w.weights.h5')`: restore a v3 weights file, or the weights inside
    a `.keras` archive.

    Raises:
      ValueError: weights that do not fit the model (unless `skip_mismatch`).
    """
    path = os.fspath(filepath)
    h5py = saving._h5py()
    if is_keras_path(path):
        with zipfile.ZipFile(path, "r") as zf, zf.open(_WEIGHTS) as raw:
            with h5py.File(io.BytesIO(raw.read()), "r") as h5:
                _read_weights(h5, model, skip_mismatch)
        return
    with h5py.File(path, "r") as h5:
        _read_weights(h5, model, skip_mismatch)
