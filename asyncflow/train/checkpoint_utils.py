"""Reading checkpoints outside a graph: readers, list/load variables, init_from_checkpoint.

`ckpt_dir_or_file` arguments take a directory (its latest checkpoint is used), a
checkpoint prefix, or one of the checkpoint's files (".index", ".data-...").
Readers are synchronous, for scripts; kernels never use them.
"""

from __future__ import annotations

import os

from asyncflow import checkpoint_format as cf
from asyncflow import checkpoint_v1, dtypes, errors
from asyncflow import graph as ops
from asyncflow import variables as variables_mod
from asyncflow.ops import array_ops, io_ops
from asyncflow.partitioned_variables import PartitionedVariable
from asyncflow.train import saver as saver_mod

__all__ = [
    "CheckpointReader",
    "NewCheckpointReader",
    "load_checkpoint",
    "load_variable",
    "list_variables",
    "init_from_checkpoint",
]


_V1_READER_DTYPES = {
    "float32",
    "float64",
    "int32",
    "uint8",
    "int16",
    "int8",
    "int64",
    "string",
    "bool",
}


class CheckpointReader:
    """TF's `py_checkpoint_reader.CheckpointReader` over an asyncflow checkpoint.

    Raises (at construction):
      NotFoundError: no checkpoint at the prefix.
      DataLossError: a corrupt index.
    """

    def __init__(self, filepattern):
        prefix = io_ops.checkpoint_prefix(os.fspath(filepattern))
        self._v1 = None
        try:
            self._index = cf.read_index(prefix)
        except errors.NotFoundError:
            # No ".index": a V1 checkpoint's file or file pattern, as TF's reader falls
            # back to.
            files = checkpoint_v1.matching_files(os.fspath(filepattern))
            if not files:
                raise checkpoint_v1.not_found(filepattern) from None
            self._v1 = checkpoint_v1.read_meta(files)
            self._index = {
                "tensors": {
                    k: {"dtype": t.dtype.name, "shape": t.shape} for k, t in self._v1[0].items()
                }
            }
        self._prefix = prefix

    def has_tensor(self, tensor_str) -> bool:
        return tensor_str in self._index["tensors"]

    def _get_v1_tensor(self, tensor_str):
        tensors, tables = self._v1
        t = tensors.get(tensor_str)
        if t is None:
            raise errors.NotFoundError(None, None, f"{tensor_str} not found in checkpoint file")
        # TF's reader of V1 files takes whole tensors of these dtypes only.
        if t.is_sliced:
            raise errors.UnimplementedError(None, None, "Sliced checkpoints are not supported")
        if t.dtype.name not in _V1_READER_DTYPES:
            raise errors.UnimplementedError(None, None, "Data type not supported")
        value = checkpoint_v1.read_tensors(tensors, tables, [tensor_str])[tensor_str]
        return value[()] if value.ndim == 0 else value

    def get_tensor(self, tensor_str):
        """The saved value of `tensor_str`.

        Raises: NotFoundError (unknown key), DataLossError (corrupt data),
        UnimplementedError (from a V1 checkpoint: a sliced tensor, or a dtype other
        than float32/64, int8/16/32/64, uint8, bool and string, as TF's reader).
        """
        if self._v1 is not None:
            return self._get_v1_tensor(tensor_str)
        info = self._index["tensors"].get(tensor_str)
        if info is None:
            raise errors.NotFoundError(None, None, f"Key {tensor_str} not found in checkpoint")
        filename = cf.data_path(self._prefix, info["shard"], self._index["num_shards"])
        try:
            value = cf.read_shard_tensors(filename, self._index, [tensor_str])[tensor_str]
        except KeyError:
            raise errors.DataLossError(
                None, None, f"Checkpoint file {filename} lacks tensor '{tensor_str}'"
            ) from None
        if value.ndim == 0:
            return value[()]
        return value

    def get_variable_to_shape_map(self) -> dict:
        return {k: list(v["shape"]) for k, v in self._index["tensors"].items()}

    def get_variable_to_dtype_map(self) -> dict:
        return {k: dtypes.as_dtype(v["dtype"]) for k, v in self._index["tensors"].items()}

    def debug_string(self) -> bytes:
        lines = [
            f"{k} ({v['dtype']}) {v['shape']}" for k, v in sorted(self._index["tensors"].items())
        ]
        return ("\n".join(lines) + "\n").encode("utf-8")


def NewCheckpointReader(filepattern) -> CheckpointReader:  # noqa: N802 - TF's name
    return CheckpointReader(filepattern)


def _get_checkpoint_filename(ckpt_dir_or_file) -> str:
    ckpt_dir_or_file = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(ckpt_dir_or_file):
        latest = saver_mod.latest_checkpoint(ckpt_dir_or_file)
        if latest is None:
            raise ValueError(
                "Couldn't find 'checkpoint' file or checkpoints in given directory "
                f"{ckpt_dir_or_file}"
            )
        return latest
    return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    """A reader for the checkpoint (the latest one, for a directory).

    Raises:
      ValueError: a directory without checkpoints.
      NotFoundError: no checkpoint at the path.
    """
    return CheckpointReader(_get_checkpoint_filename(ckpt_dir_or_file))


def load_variable(ckpt_dir_or_file, name):
    """The saved value of variable `name` (a trailing ":0" is ignored)."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file) -> list[tuple[str, list[int]]]:
    """[(name, shape)] of every tensor in the checkpoint, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return [(name, shapes[name]) for name in sorted(shapes)]


def _is_variable(x) -> bool:
    return isinstance(x, variables_mod.Variable)


def _variable_store() -> dict:
    """Variables by name: the variable store's, then the global collection's."""
    found = {v.op.name: v for v in variables_mod.global_variables() if _is_variable(v)}
    try:
        from asyncflow import var_scope

        found.update(var_scope._get_default_variable_store()._vars)
    except (ImportError, AttributeError):
        pass
    return found


def _partitions(name: str, store: dict) -> list | None:
    """The parts `name/part_0`, `name/part_1`, ... of a partitioned variable, in order."""
    parts = []
    while f"{name}/part_{len(parts)}" in store:
        parts.append(store[f"{name}/part_{len(parts)}"])
    return parts or None


def _set_initializers(var_or_parts, ckpt_file: str, tensor_name: str) -> None:
    """One variable loads the whole tensor; each part of a partitioned one its slice.

    Raises:
      ValueError: parts of different variables.
    """
    if not isinstance(var_or_parts, (list, tuple)):
        _set_checkpoint_initializer(var_or_parts, ckpt_file, tensor_name)
        return
    full_name = None
    for part in var_or_parts:
        info = part._get_save_slice_info()
        if full_name is None:
            full_name = info.full_name
        elif info.full_name != full_name:
            raise ValueError(
                f"Slices must all be from the same tensor: {full_name} != {info.full_name}"
            )
        _set_checkpoint_initializer(part, ckpt_file, tensor_name, info.spec)


def _set_checkpoint_initializer(var, ckpt_file: str, tensor_name: str, spec: str = "") -> None:
    """Make `var`'s initializer assign the checkpoint's `tensor_name` (its `spec`
    slice for a part of a partitioned variable), as TF does."""
    graph = var.graph
    with graph.as_default(), ops.control_dependencies(None):
        with ops.colocate_with(var.op), ops.name_scope("checkpoint_initializer"):
            names = array_ops.constant([tensor_name], name="tensor_names")
            slices = array_ops.constant([spec], name="shape_and_slices")
            (value,) = io_ops.restore_v2(ckpt_file, names, slices, [var.dtype.base_dtype])
            value.set_shape(var.shape)
            saveable = saver_mod._VariableSaveable(var, tensor_name)
            init_op = saveable.restore([value], None)
    var._initializer_op = init_op.op
    var._initial_value = value


def init_from_checkpoint(ckpt_dir_or_file, assignment_map) -> None:
    """Initialise variables from a checkpoint instead of their initializers.

    `assignment_map` maps checkpoint names to current variables or names:
    {"old/": "new/"} maps a whole scope, {"/": "new/"} the whole checkpoint,
    {"old/x": "new/y"} or {"old/x": variable} one variable.  Initializers built after
    this call (global_variables_initializer) load the checkpoint's values.

    Raises:
      ValueError: a name not in the checkpoint, a shape mismatch, or a scope mapped to
        a variable name.
    """
    ckpt_file = _get_checkpoint_filename(ckpt_dir_or_file)
    reader = load_checkpoint(ckpt_dir_or_file)
    variable_map = reader.get_variable_to_shape_map()
    store = _variable_store()
    for name_in_ckpt, current in sorted(assignment_map.items(), key=lambda kv: kv[0]):
        if isinstance(current, PartitionedVariable):
            current = list(current)
        if _is_variable(current) or (
            isinstance(current, (list, tuple)) and current and all(map(_is_variable, current))
        ):
            var = current
        else:
            var = store.get(current)
            if var is None:
                var = _partitions(current, store)
        if var is not None:
            if name_in_ckpt not in variable_map:
                raise ValueError(
                    f"Tensor {name_in_ckpt} is not found in {ckpt_dir_or_file} checkpoint "
                    f"{variable_map}"
                )
            if _is_variable(var) and not var.shape.is_compatible_with(variable_map[name_in_ckpt]):
                raise ValueError(
                    f"Shape of variable {var.name} ({var.shape}) doesn't match with shape of "
                    f"tensor {name_in_ckpt} ({variable_map[name_in_ckpt]}) from checkpoint "
                    "reader."
                )
            _set_initializers(var, ckpt_file, name_in_ckpt)
            continue
        scopes = current[: current.rindex("/")] if "/" in current else ""
        if not name_in_ckpt.endswith("/"):
            raise ValueError(
                f"Assignment map with scope only name {scopes} should map to scope only "
                f"{name_in_ckpt}. Should be 'scope/': 'other_scope/'."
            )
        in_scope = {  # (a partitioned variable by its own name, as TF's)
            n[: n.index("/part_")] if "/part_" in n else n
            for n in store
            if not scopes or n.startswith(scopes + "/")
        }
        for var_name in sorted(in_scope):
            full = var_name[len(scopes) :]
            if current != "/":
                full = full[1:]
            if name_in_ckpt != "/":
                full = name_in_ckpt + full
            full = full.rstrip("/")
            if full not in variable_map:
                raise ValueError(
                    f"Tensor {full} ({var_name[len(scopes) + 1 :]} in {name_in_ckpt}) is not "
                    f"found in {ckpt_dir_or_file} checkpoint"
                )
            var = store.get(var_name)
            var = _partitions(var_name, store) if var is None else var
            _set_initializers(var, ckpt_file, full)
