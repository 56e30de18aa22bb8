"""`af.train.Saver` and checkpoint management, as TF1's `tf.train.Saver` does them.

A Saver builds, under a name scope ("save", "save_1", ...), the ops TF1 builds:
  save/filename, save/Const      the prefix to write (PlaceholderWithDefault, fed)
  save/SaveV2                    the variables' values -> "<prefix>.index" + data file
  save/control_dependency        the prefix, once written (SaverDef.save_tensor_name)
  save/RestoreV2, save/Assign*   read and assign back, grouped as save/restore_all
With sharded=True there is one SaveV2 per device, writing "<prefix>_temp/part-...",
merged by MergeV2Checkpoints (save/Identity is then the save tensor).

After a save the Saver records the checkpoint, rewrites the `checkpoint` state file (TF's
text format, written atomically), deletes checkpoints beyond max_to_keep (keeping one per
keep_checkpoint_every_n_hours), and writes "<prefix>.meta".  State file first, deletions
after: the state file never names a checkpoint that is gone.

`save`/`restore` run on any thread (through `Session.run`); `asave`/`arestore` are their
twins for code on the session's event loop and do their file work off the loop.
"""

from __future__ import annotations

import asyncio
import collections
import glob
import logging
import numbers
import os
import re
import time

from google.protobuf import message as _pb_message
from google.protobuf import text_format

from asyncflow import checkpoint_format as cf
from asyncflow import errors, meta_graph
from asyncflow import graph as ops
from asyncflow import variables as variables_mod
from asyncflow.graph import GraphKeys
from asyncflow.ops import array_ops, control_flow_ops, io_ops, state_ops, string_ops
from asyncflow.partitioned_variables import PartitionedVariable
from asyncflow.protos.checkpoint_state_pb2 import CheckpointState
from asyncflow.protos.meta_graph_pb2 import MetaGraphDef
from asyncflow.protos.saver_pb2 import SaverDef
from asyncflow.resource_variable import is_resource_variable

__all__ = [
    "Saver",
    "SaverDef",
    "SaveSpec",
    "SaveableObject",
    "BaseSaverBuilder",
    "BulkSaverBuilder",
    "CheckpointState",
    "latest_checkpoint",
    "get_checkpoint_state",
    "update_checkpoint_state",
    "generate_checkpoint_state_proto",
    "checkpoint_exists",
    "get_checkpoint_mtimes",
    "remove_checkpoint",
    "meta_graph_filename",
    "import_meta_graph",
]

_log = logging.getLogger("asyncflow")
_DEFAULT_LATEST = "checkpoint"


# -- the `checkpoint` state file -------------------------------------------------------


def _state_to_text(state: CheckpointState) -> str:
    """The `checkpoint` file's text: protobuf text format, as TF writes it."""
    return text_format.MessageToString(state)


def _state_from_text(text: str) -> CheckpointState:
    """Parse the `checkpoint` file.  Raises ValueError for anything else."""
    try:
        return text_format.Parse(text, CheckpointState())
    except text_format.ParseError as e:
        raise ValueError(str(e)) from None


def _state_filename(save_dir: str, latest_filename: str | None) -> str:
    return os.path.join(save_dir, latest_filename or _DEFAULT_LATEST)


def generate_checkpoint_state_proto(
    save_dir,
    model_checkpoint_path,
    all_model_checkpoint_paths=None,
    all_model_checkpoint_timestamps=None,
    last_preserved_timestamp=None,
) -> CheckpointState:
    """A CheckpointState whose last path is `model_checkpoint_path` (TF's rules)."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    if not os.path.isabs(save_dir):  # relative paths become relative to save_dir
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir) for p in paths]
    return CheckpointState(
        model_checkpoint_path=model_checkpoint_path,
        all_model_checkpoint_paths=paths,
        all_model_checkpoint_timestamps=list(all_model_checkpoint_timestamps or []),
        last_preserved_timestamp=last_preserved_timestamp or 0.0,
    )


def _state_for_update(save_dir, model_checkpoint_path, all_paths, save_relative_paths, ts):
    if save_relative_paths:

        def rel(p):
            return os.path.relpath(p, save_dir) if os.path.isabs(p) else p

        model_checkpoint_path = rel(model_checkpoint_path)
        all_paths = [rel(p) for p in all_paths or []]
    return generate_checkpoint_state_proto(save_dir, model_checkpoint_path, all_paths, ts)


def update_checkpoint_state(
    save_dir,
    model_checkpoint_path,
    all_model_checkpoint_paths=None,
    latest_filename=None,
    all_model_checkpoint_timestamps=None,
    last_preserved_timestamp=None,
    save_relative_paths=False,
) -> None:
    """Write the state file `save_dir/<latest_filename or "checkpoint">` atomically.

    Raises:
      RuntimeError: the state file's path equals the checkpoint path.
    """
    state = _state_for_update(
        save_dir,
        model_checkpoint_path,
        all_model_checkpoint_paths,
        save_relative_paths,
        all_model_checkpoint_timestamps,
    )
    if last_preserved_timestamp:
        state.last_preserved_timestamp = last_preserved_timestamp
    filename = _checked_state_filename(save_dir, latest_filename, state, model_checkpoint_path)
    cf.atomic_write(filename, _state_to_text(state).encode("utf-8"))


def _checked_state_filename(save_dir, latest_filename, state, model_checkpoint_path) -> str:
    filename = _state_filename(save_dir, latest_filename)
    if filename == state.model_checkpoint_path:
        raise RuntimeError(
            f"Save path '{model_checkpoint_path}' conflicts with path used for checkpoint "
            "state.  Please use a different save path."
        )
    return filename


def get_checkpoint_state(checkpoint_dir, latest_filename=None) -> CheckpointState | None:
    """The CheckpointState of `checkpoint_dir`, or None (no or unreadable state file).

    Relative paths in the file are returned joined to `checkpoint_dir`, as TF does.

    Raises:
      ValueError: the state file names no model_checkpoint_path.
    """
    filename = _state_filename(os.fspath(checkpoint_dir), latest_filename)
    try:
        if os.path.getsize(filename) > cf.MAX_HEADER_BYTES:
            _log.warning("%s: state file too large: Checkpoint ignored", filename)
            return None
        with open(filename, encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as e:
        _log.warning("%s: %s: Checkpoint ignored", filename, e)
        return None
    try:
        state = _state_from_text(text)
    except ValueError as e:
        _log.warning("%s: %s: Checkpoint ignored", filename, e)
        return None
    if not state.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + os.fspath(checkpoint_dir))
    join = lambda p: p if os.path.isabs(p) else os.path.join(checkpoint_dir, p)
    state.model_checkpoint_path = join(state.model_checkpoint_path)
    paths = [join(p) for p in state.all_model_checkpoint_paths]
    del state.all_model_checkpoint_paths[:]
    state.all_model_checkpoint_paths.extend(paths)
    return state


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint exists at `checkpoint_prefix` (a prefix, or one of its files)."""
    prefix = os.fspath(checkpoint_prefix)
    if glob.has_magic(prefix):
        return bool(glob.glob(cf.index_path(prefix)) or glob.glob(prefix))
    return os.path.isfile(cf.index_path(prefix)) or os.path.isfile(prefix)


def latest_checkpoint(checkpoint_dir, latest_filename=None) -> str | None:
    """The prefix of the newest checkpoint the state file names, if its files exist."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state and state.model_checkpoint_path:
        if checkpoint_exists(state.model_checkpoint_path):
            return state.model_checkpoint_path
        _log.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    """The modification times of the checkpoints' index files (missing ones skipped)."""
    out = []
    for prefix in checkpoint_prefixes:
        for path in (cf.index_path(prefix), prefix):
            if glob.has_magic(path):  # a sharded V1 checkpoint: its first file's time
                path = next(iter(sorted(glob.glob(path))), path)
            try:
                out.append(os.stat(path).st_mtime)
                break
            except OSError:
                continue
        else:
            _log.warning("Couldn't match files for checkpoint %s", prefix)
    return out


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version=2, meta_graph_suffix="meta"):
    """Delete a checkpoint's index, data files and meta graph (missing files are ignored)."""
    paths = [
        cf.index_path(checkpoint_prefix),
        meta_graph_filename(checkpoint_prefix, meta_graph_suffix),
    ]
    paths += glob.glob(glob.escape(checkpoint_prefix) + ".data-?????-of-?????")
    if checkpoint_format_version == SaverDef.V1:  # the prefix is the file, or its pattern
        paths += [p for p in glob.glob(checkpoint_prefix) if os.path.isfile(p)]
    for p in paths:  # index first: the checkpoint stops existing before its data goes
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def meta_graph_filename(checkpoint_filename, meta_graph_suffix="meta") -> str:
    """The meta graph file of a checkpoint prefix: "<prefix>.meta" (shard suffixes dropped)."""
    basename = re.sub(r"-[\d\?]+-of-\d+$", "", checkpoint_filename)
    return ".".join([basename, meta_graph_suffix])


# -- SaverDef and saveables -------------------------------------------------------------


class SaveSpec:
    """One tensor a SaveableObject saves: its value, slice spec and checkpoint name."""

    def __init__(self, tensor, slice_spec, name, dtype=None, device=None):
        self.tensor = tensor
        self.slice_spec = slice_spec
        self.name = name
        self.dtype = dtype if dtype is not None else tensor.dtype
        self.device = device if device is not None else getattr(tensor, "device", "")


class SaveableObject:
    """Something a Saver can save and restore: `specs` and `restore(tensors, shapes)`."""

    def __init__(self, op, specs, name):
        self.op = op
        self.specs = specs
        self.name = name

    @property
    def device(self) -> str:
        return self.specs[0].device

    def restore(self, restored_tensors, restored_shapes):
        raise NotImplementedError


class _VariableSaveable(SaveableObject):
    """A TF1 (ref) variable: saves its value, restores with Assign."""

    def __init__(self, var, name, slice_spec=""):
        ref = var._ref() if hasattr(var, "_ref") else var
        # A resource variable is saved from its read "v/Read/ReadVariableOp", as TF's
        # graph does: SaveV2 (CPU only) then takes a value, not the variable, and the
        # variable may live on a GPU.
        saved = var._graph_element if is_resource_variable(var) else ref
        spec = SaveSpec(saved, slice_spec, name, ref.dtype.base_dtype, ref.device)
        super().__init__(ref, [spec], name)
        self.var = var

    def restore(self, restored_tensors, restored_shapes):
        tensor = restored_tensors[0]
        if restored_shapes is not None:
            tensor = array_ops.reshape(tensor, restored_shapes[0])
        validate = restored_shapes is None and self.op.shape.is_fully_defined()
        with ops.colocate_with(self.op.op):
            return state_ops.assign(self.op, tensor, validate_shape=validate)


class _MirroredSaveable(_VariableSaveable):
    """A tf.distribute variable: saved once under its name (a mirrored one from its first
    copy, a sync-on-read one as its copies combined), restored as an assignment outside
    the replicas (every copy; a sync-on-read SUM variable's copies share the value)."""

    def __init__(self, var, name):
        super().__init__(var.primary, name)
        self.mirrored = var
        if var.synchronization == variables_mod.VariableSynchronization.ON_READ:
            self.specs[0].tensor = var._as_graph_element()

    def restore(self, restored_tensors, restored_shapes):
        tensor = restored_tensors[0]
        if restored_shapes is not None:
            tensor = array_ops.reshape(tensor, restored_shapes[0])
        done = self.mirrored.assign(tensor, read_value=False)
        return control_flow_ops.group(*self.mirrored._distribute_strategy.unwrap(done))


def _is_variable_op(t) -> bool:
    return isinstance(t, ops.Tensor) and t.op.type in ("VariableV2", "Variable") and t._is_ref


def op_list_to_dict(op_list) -> dict:
    """{checkpoint name: variable} for a list of variables (names are the op names).

    Raises:
      TypeError: not a list, or an element that is not a variable.
      ValueError: two variables with the same name.
    """
    if not isinstance(op_list, (list, tuple, set)):
        raise TypeError(f"Variables to save should be passed in a dict or a list: {op_list}")
    out = {}
    for var in sorted(op_list, key=lambda x: x.name):
        if isinstance(var, PartitionedVariable):
            name = var.name
        elif isinstance(var, variables_mod.Variable) and var._get_save_slice_info() is not None:
            # A slice: slices of one partitioned variable gather under its full name.
            name = var._get_save_slice_info().full_name
            if name in out and not isinstance(out[name], list):
                raise ValueError(f"Mixing slices and non-slices with the same name: {name}")
            out.setdefault(name, []).append(var)
            continue
        elif isinstance(var, variables_mod.Variable):
            name = var.op.name
        elif _is_variable_op(var) or isinstance(var, SaveableObject):
            name = var.op.name if not isinstance(var, SaveableObject) else var.name
        else:
            raise TypeError(f"Variable to save is not a Variable: {var}")
        if name in out:
            raise ValueError(f"At least two variables have the same name: {name}")
        out[name] = var
    return out


def _saveables(names_to_vars: dict) -> list[SaveableObject]:
    out = []
    for name, var in sorted(names_to_vars.items(), key=lambda kv: kv[0]):
        if isinstance(var, SaveableObject):
            out.append(var)
        elif isinstance(var, list | tuple | PartitionedVariable):
            out.extend(_slice_saveables(name, list(var)))
        elif getattr(var, "_distribute_strategy", None) is not None and hasattr(var, "values"):
            out.append(_MirroredSaveable(var, name))
        elif isinstance(var, variables_mod.Variable) or _is_variable_op(var):
            out.append(_VariableSaveable(var, name))
        else:
            raise TypeError(
                "names_to_saveables must be a dict mapping string names to Variables. "
                f"Not a variable: {var}"
            )
    return out


def _slice_saveables(name: str, slices: list) -> list[SaveableObject]:
    """One saveable per slice of a partitioned variable, saved under `name` with the
    slice's spec (TF's ReferenceVariableSaveable with a slice spec)."""
    out, full_name = [], None
    for v in sorted(slices, key=lambda v: v._get_save_slice_info().var_offset
                    if isinstance(v, variables_mod.Variable) and v._get_save_slice_info()
                    else []):  # fmt: skip
        if isinstance(v, SaveableObject):
            out.append(v)
            continue
        if not isinstance(v, variables_mod.Variable):
            raise ValueError(f"Slices must all be Variables: {v}")
        info = v._get_save_slice_info()
        if info is None:
            raise ValueError(f"Slices must all be slices: {v}")
        if full_name is None:
            full_name = info.full_name
        elif full_name != info.full_name:
            raise ValueError(
                f"Slices must all be from the same tensor: {full_name} != {info.full_name}"
            )
        saveable = _VariableSaveable(v, name, info.spec)
        saveable.specs[0].legacy_name = getattr(v, "_legacy_save_name", "")
        out.append(saveable)
    return out


# -- the builder -----------------------------------------------------------------------


class BaseSaverBuilder:
    """Builds a Saver's save and restore ops (TF's BaseSaverBuilder): SaveV2, or the V1
    format's SaveSlices; RestoreV2 reads either."""

    SaveSpec = SaveSpec
    SaveableObject = SaveableObject

    def __init__(self, write_version=SaverDef.V2):
        self._write_version = write_version

    def save_op(self, filename_tensor, saveables):
        names, slices, tensors = [], [], []
        for s in saveables:
            for spec in s.specs:
                names.append(spec.name)
                slices.append(spec.slice_spec)
                tensors.append(spec.tensor)
        g = ops.get_default_graph()
        if self._write_version == SaverDef.V1:  # one table file (TF's SaveSlices)
            with g.name_scope("save") as scope:
                names_t = array_ops.constant(names, name="tensor_names")
                slices_t = array_ops.constant(slices, name="shapes_and_slices")
                return ops.apply_op(
                    "SaveSlices", [filename_tensor, names_t, slices_t, tensors], {}, name=scope
                )
        with g.name_scope("SaveV2") as scope:
            names_t = array_ops.constant(names, name="tensor_names")
            slices_t = array_ops.constant(slices, name="shape_and_slices")
            return io_ops.save_v2(filename_tensor, names_t, slices_t, tensors, name=scope)

    def bulk_restore(self, filename_tensor, saveables, preferred_shard, restore_sequentially):
        specs = [spec for s in saveables for spec in s.specs]
        g = ops.get_default_graph()
        with g.device("/device:CPU:0"), g.name_scope("RestoreV2") as scope:
            names_t = array_ops.constant([s.name for s in specs], name="tensor_names")
            slices_t = array_ops.constant([s.slice_spec for s in specs], name="shape_and_slices")
            legacy = [getattr(s, "legacy_name", "") for s in specs]
            return io_ops.restore_v2(
                filename_tensor,
                names_t,
                slices_t,
                [s.dtype for s in specs],
                name=scope,
                legacy_names=legacy if any(legacy) else None,
            )

    def _add_save_ops(self, filename_tensor, saveables):
        save = self.save_op(filename_tensor, saveables)
        with ops.control_dependencies([save]):
            return array_ops.identity(filename_tensor, name="control_dependency")

    def _add_restore_ops(self, filename_tensor, saveables, restore_sequentially, reshape,
                         preferred_shard=-1, name="restore_all"):  # fmt: skip
        tensors = self.bulk_restore(
            filename_tensor, saveables, preferred_shard, restore_sequentially
        )
        assigns, i = [], 0
        for s in saveables:
            n = len(s.specs)
            shapes = None
            if reshape:
                shape = s.op.shape
                shapes = [shape.as_list()] if shape.is_fully_defined() else None
            assigns.append(s.restore(tensors[i : i + n], shapes))
            i += n
        return control_flow_ops.group(*assigns, name=name)

    def _add_sharded_v1_save_ops(self, filename_tensor, per_device):
        """V1: each device's shard is a file of its own; the checkpoint is their pattern."""
        num_t = array_ops.constant(len(per_device), name="num_shards")
        saves = []
        for shard, (device, saveables) in enumerate(per_device):
            with ops.device(device):
                sharded = io_ops.sharded_filename(filename_tensor, shard, num_t)
                saves.append(self._add_save_ops(sharded, saveables))
        with ops.control_dependencies([s.op for s in saves]), ops.device("/device:CPU:0"):
            return ops.apply_op(
                "ShardedFilespec", [filename_tensor, num_t], {}, name="ShardedFilespec"
            ).outputs[0]

    def _add_sharded_save_ops(self, filename_tensor, per_device):
        if self._write_version == SaverDef.V1:
            return self._add_sharded_v1_save_ops(filename_tensor, per_device)
        with ops.device("/device:CPU:0"):
            tmp_prefix = string_ops.string_join([filename_tensor, "_temp/part"])
        num = len(per_device)
        num_t = array_ops.constant(num, name="num_shards")
        saves, prefixes = [], []
        for shard, (device, saveables) in enumerate(per_device):
            with ops.device(device):
                sharded = io_ops.sharded_filename(tmp_prefix, shard, num_t)
                prefixes.append(sharded)
                saves.append(self._add_save_ops(sharded, saveables))
        with ops.control_dependencies([s.op for s in saves]), ops.device("/device:CPU:0"):
            merge = io_ops.merge_v2_checkpoints(array_ops.stack(prefixes), filename_tensor)
            with ops.control_dependencies([merge]):
                return array_ops.identity(filename_tensor)

    def _add_sharded_restore_ops(self, filename_tensor, per_device, restore_sequentially, reshape):
        restores = []
        for shard, (device, saveables) in enumerate(per_device):
            with ops.device(device):
                restores.append(
                    self._add_restore_ops(
                        filename_tensor,
                        saveables,
                        restore_sequentially,
                        reshape,
                        shard,
                        name="restore_shard",
                    )  # fmt: skip
                )
        return control_flow_ops.group(*restores, name="restore_all")

    @staticmethod
    def _group_by_devices(saveables):
        per_device = collections.defaultdict(list)
        for s in saveables:
            per_device[s.device or ""].append(s)
        return sorted(per_device.items(), key=lambda t: t[0])

    def _build_internal(self, names_to_saveables, reshape=False, sharded=False, max_to_keep=5,
                        keep_checkpoint_every_n_hours=10000.0, name=None,
                        restore_sequentially=False, filename="model", build_save=True,
                        build_restore=True) -> SaverDef:  # fmt: skip
        if not isinstance(names_to_saveables, dict):
            names_to_saveables = op_list_to_dict(names_to_saveables)
        saveables = _saveables(names_to_saveables)
        graph = ops.get_default_graph()
        if graph is not _graph_of(saveables, graph):
            graph = _graph_of(saveables, graph)
        with graph.as_default(), ops.name_scope(name, "save") as scope:
            with ops.name_scope("filename") as fscope:
                default = array_ops.constant(filename or "model", name="input")
            fname = ops.apply_op(
                "PlaceholderWithDefault", [default], {"shape": default.shape}, name=fscope
            ).outputs[0]
            fname = array_ops.placeholder_with_default(fname, shape=(), name="Const")
            save_tensor = restore_op = None
            if sharded:
                per_device = self._group_by_devices(saveables)
                if build_save:
                    save_tensor = self._add_sharded_save_ops(fname, per_device)
                if build_restore:
                    restore_op = self._add_sharded_restore_ops(
                        fname, per_device, restore_sequentially, reshape
                    )
            else:
                if build_save:
                    save_tensor = self._add_save_ops(fname, saveables)
                if build_restore:
                    restore_op = self._add_restore_ops(
                        fname, saveables, restore_sequentially, reshape
                    )
        del scope
        return SaverDef(
            filename_tensor_name=fname.name,
            save_tensor_name=save_tensor.name if save_tensor is not None else "",
            restore_op_name=restore_op.name if restore_op is not None else "",
            max_to_keep=max_to_keep,
            sharded=sharded,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            version=self._write_version,
        )


BulkSaverBuilder = BaseSaverBuilder


def _graph_of(saveables, default):
    for s in saveables:
        g = getattr(s.op, "graph", None)
        if g is not None:
            return g
    return default


def _prepend_scope(name: str, scope: str | None) -> str:
    if not scope:
        return name
    return scope.rstrip("/") + "/" + name.lstrip("^")


def _as_str(value) -> str:
    if hasattr(value, "item"):
        value = value.item()
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _wrap_restore_error(err: errors.OpError, msg: str) -> errors.OpError:
    text = (
        f"Restoring from checkpoint failed. This is most likely due to {msg} from the "
        "checkpoint. Please ensure that you have not altered the graph expected based on "
        f"the checkpoint. Original error:\n\n{err.message}"
    )
    return type(err)(err.node_def, err.op, text)


# -- Saver -------------------------------------------------------------------------------


class Saver:
    """Saves and restores variables (TF1's `tf.train.Saver`).

    Raises (at construction):
      ValueError: no variables to save (unless allow_empty), two variables with one
        name, or a var_list with defer_build.
      TypeError: var_list holds something that is not a variable.
    """

    def __init__(
        self,
        var_list=None,
        reshape=False,
        sharded=False,
        max_to_keep=5,
        keep_checkpoint_every_n_hours=10000.0,
        name=None,
        restore_sequentially=False,
        saver_def=None,
        builder=None,
        defer_build=False,
        allow_empty=False,
        write_version=SaverDef.V2,
        pad_step_number=False,
        save_relative_paths=False,
        filename=None,
    ):
        if defer_build and var_list:
            raise ValueError(
                "If `var_list` is provided then build cannot be deferred. Either set "
                "defer_build=False or var_list=None."
            )
        if write_version not in (SaverDef.V1, SaverDef.V2):
            raise ValueError(f"Unsupported checkpoint write_version {write_version}")
        self._var_list = var_list
        self._reshape = reshape
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._restore_sequentially = restore_sequentially
        self.saver_def = saver_def
        self._builder = builder
        self._is_built = False
        self._allow_empty = allow_empty
        self._is_empty = None
        self._write_version = write_version
        self._pad_step_number = pad_step_number
        self._filename = filename
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._save_relative_paths = save_relative_paths
        self._next_checkpoint_time = None
        if not defer_build:
            self.build()
        if self.saver_def:
            self._check_saver_def()

    # -- building
    def build(self) -> None:
        self._build(self._filename, build_save=True, build_restore=True)

    def _build(self, checkpoint_path, build_save, build_restore) -> None:
        if self._is_built:
            return
        self._is_built = True
        if not self.saver_def:
            if self._builder is None:
                self._builder = BulkSaverBuilder(self._write_version)
            if self._var_list is None:
                self._var_list = ops.get_collection(
                    GraphKeys.GLOBAL_VARIABLES
                ) + ops.get_collection(GraphKeys.SAVEABLE_OBJECTS)
            if not self._var_list:
                if self._allow_empty:
                    self._is_empty = True
                    return
                raise ValueError("No variables to save")
            self._is_empty = False
            self.saver_def = self._builder._build_internal(
                self._var_list,
                reshape=self._reshape,
                sharded=self._sharded,
                max_to_keep=self._max_to_keep,
                keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours,
                name=self._name,
                restore_sequentially=self._restore_sequentially,
                filename=checkpoint_path,
                build_save=build_save,
                build_restore=build_restore,
            )
        elif self._name:
            # As TF: with a saver_def, `name` is the import scope its names live under.
            d = SaverDef()
            d.CopyFrom(self.saver_def)
            d.filename_tensor_name = _prepend_scope(d.filename_tensor_name, self._name)
            d.save_tensor_name = _prepend_scope(d.save_tensor_name, self._name)
            d.restore_op_name = _prepend_scope(d.restore_op_name, self._name)
            self.saver_def = d
        self._is_empty = False
        self._check_saver_def()
        self._next_checkpoint_time = (
            time.time() + self.saver_def.keep_checkpoint_every_n_hours * 3600
        )

    def _check_saver_def(self) -> None:
        self.saver_def = _saver_def_message(self.saver_def)
        if not isinstance(self.saver_def, SaverDef):
            raise ValueError(f"saver_def must be a SaverDef: {self.saver_def}")
        if not self.saver_def.save_tensor_name:
            raise ValueError(f"saver_def must specify the save_tensor_name: {self.saver_def}")
        if not self.saver_def.restore_op_name:
            raise ValueError(f"saver_def must specify the restore_op_name: {self.saver_def}")

    def as_saver_def(self) -> SaverDef:
        return self.saver_def

    def to_proto(self, export_scope=None) -> SaverDef | None:
        """The SaverDef, names relative to `export_scope` (None if outside it, or not
        built yet: a deferred build, as TF's, which exporters skip)."""
        if self.saver_def is None:
            return None
        d = SaverDef()
        d.CopyFrom(self.saver_def)
        if export_scope:
            prefix = export_scope.rstrip("/") + "/"
            keys = ("filename_tensor_name", "save_tensor_name", "restore_op_name")
            if not all(getattr(d, k).startswith(prefix) for k in keys):
                return None
            for k in keys:
                setattr(d, k, getattr(d, k)[len(prefix) :])
        return d

    @staticmethod
    def from_proto(saver_def, import_scope=None) -> Saver:
        return Saver(saver_def=_saver_def_message(saver_def), name=import_scope)

    # -- bookkeeping
    @property
    def last_checkpoints(self) -> list[str]:
        """The checkpoints not yet deleted, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints) -> None:
        if not isinstance(last_checkpoints, list):
            raise AssertionError(f"last_checkpoints must be a list: {last_checkpoints!r}")
        self._last_checkpoints = [(s, float("inf")) for s in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time) -> None:
        if not isinstance(last_checkpoints_with_time, list):
            raise AssertionError(
                f"last_checkpoints_with_time must be a list: {last_checkpoints_with_time!r}"
            )
        self._last_checkpoints = [tuple(x) for x in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Adopt the still existing `checkpoint_paths` (with their mtimes) as last_checkpoints."""
        found = []
        for path in checkpoint_paths:
            mtimes = get_checkpoint_mtimes([path])
            if mtimes:
                found.append((path, mtimes[0]))
        self.set_last_checkpoints_with_time(found)

    def _record_last_checkpoint(self, path: str) -> None:
        if not self.saver_def.max_to_keep:
            return
        self._last_checkpoints = [p for p in self._last_checkpoints if p[0] != path]
        self._last_checkpoints.append((path, time.time()))
        if len(self._last_checkpoints) > self.saver_def.max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _checkpoints_to_delete(self) -> list[str]:
        """Pop what _MaybeDeleteOldCheckpoints would delete (one per save, as TF)."""
        if not self._checkpoints_to_be_deleted:
            return []
        path, ts = self._checkpoints_to_be_deleted.pop(0)
        if ts > self._next_checkpoint_time:  # kept: one every n hours
            self._next_checkpoint_time += self.saver_def.keep_checkpoint_every_n_hours * 3600
            return []
        return [path]

    # -- save
    def _prepare_save(self, sess, save_path, global_step, latest_filename):
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        if latest_filename is None:
            latest_filename = _DEFAULT_LATEST
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = os.fspath(save_path)
        if global_step is not None:
            if self._pad_step_number:
                checkpoint_file = f"{save_path}-{int(global_step):08d}"
            else:
                checkpoint_file = f"{save_path}-{int(global_step)}"
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename and not self._sharded:
                raise ValueError(
                    f"'latest_filename' collides with 'save_path': '{latest_filename}' and "
                    f"'{save_path}'"
                )
        if not hasattr(sess, "run"):
            raise TypeError(f"'sess' must be a Session; {sess}")
        return checkpoint_file, latest_filename, os.path.dirname(save_path)

    def _save_failed(self, exc, save_path, parent):
        if not os.path.isdir(parent or "."):
            return ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")
        return exc

    def save(
        self,
        sess,
        save_path,
        global_step=None,
        latest_filename=None,
        meta_graph_suffix="meta",
        write_meta_graph=True,
        write_state=True,
        strip_default_attrs=False,
        save_debug_info=False,
    ):
        """Save the variables to "<save_path>[-<global_step>]"; returns that prefix.

        Returns None for an empty saver (allow_empty=True and no variables).

        Raises:
          ValueError: the parent directory of save_path does not exist, or
            latest_filename collides with save_path.
          TypeError: sess is not a Session.
          RuntimeError: defer_build and build() was not called.
        """
        if global_step is not None and not isinstance(global_step, numbers.Number):
            from asyncflow.train.training_util import global_step as _global_step

            global_step = _global_step(sess, global_step)
        checkpoint_file, latest_filename, parent = self._prepare_save(
            sess, save_path, global_step, latest_filename
        )
        path = None
        if not self._is_empty:
            d = self.saver_def
            try:
                path = _as_str(
                    sess.run(d.save_tensor_name, {d.filename_tensor_name: checkpoint_file})
                )
            except (errors.FailedPreconditionError, errors.NotFoundError) as exc:
                raise self._save_failed(exc, save_path, parent) from None
            if write_state:
                self._record_last_checkpoint(path)
                self._write_state(parent, path, latest_filename)
                for old in self._checkpoints_to_delete():
                    self._remove(old, meta_graph_suffix)
        if write_meta_graph:
            filename = meta_graph_filename(checkpoint_file, meta_graph_suffix)
            with sess.graph.as_default():
                self.export_meta_graph(filename, strip_default_attrs=strip_default_attrs)
        return path

    async def asave(
        self,
        sess,
        save_path,
        global_step=None,
        latest_filename=None,
        meta_graph_suffix="meta",
        write_meta_graph=True,
        write_state=True,
        strip_default_attrs=False,
        save_debug_info=False,
    ):
        """`save` for code on the session's event loop: every file operation is off the loop."""
        if global_step is not None and not isinstance(global_step, numbers.Number):
            global_step = int(await sess.arun(global_step))
        checkpoint_file, latest_filename, parent = self._prepare_save(
            sess, save_path, global_step, latest_filename
        )
        loop = asyncio.get_running_loop()
        path = None
        if not self._is_empty:
            d = self.saver_def
            try:
                value = await sess.arun(
                    d.save_tensor_name, {d.filename_tensor_name: checkpoint_file}
                )
            except (errors.FailedPreconditionError, errors.NotFoundError) as exc:
                raise self._save_failed(exc, save_path, parent) from None
            path = _as_str(value)
            if write_state:
                self._record_last_checkpoint(path)
                state = self._state(parent, path)
                filename = _checked_state_filename(parent, latest_filename, state, path)
                await cf.aatomic_write(filename, _state_to_text(state).encode("utf-8"))
                for old in self._checkpoints_to_delete():
                    await loop.run_in_executor(None, self._remove, old, meta_graph_suffix)
        if write_meta_graph:
            filename = meta_graph_filename(checkpoint_file, meta_graph_suffix)
            with sess.graph.as_default():
                doc = meta_graph.export_meta_graph(
                    None, saver_def=self.saver_def, strip_default_attrs=strip_default_attrs
                )
            await cf.aatomic_write(filename, meta_graph.encode_meta_graph(doc))
        return path

    def _state(self, parent: str, path: str) -> CheckpointState:
        return _state_for_update(
            parent, path, self.last_checkpoints, self._save_relative_paths, None
        )

    def _write_state(self, parent: str, path: str, latest_filename: str) -> None:
        state = self._state(parent, path)
        filename = _checked_state_filename(parent, latest_filename, state, path)
        cf.atomic_write(filename, _state_to_text(state).encode("utf-8"))

    def _remove(self, prefix: str, meta_graph_suffix: str) -> None:
        try:
            remove_checkpoint(
                prefix, self._write_version or SaverDef.V2, meta_graph_suffix=meta_graph_suffix
            )
        except OSError as e:
            _log.warning("Ignoring: %s", e)

    # -- restore
    def _check_restore(self, save_path) -> str | None:
        if self._is_empty:
            return None
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not checkpoint_exists(io_ops.checkpoint_prefix(save_path)):
            raise ValueError("The passed save_path is not a valid checkpoint: " + save_path)
        return save_path

    def restore(self, sess, save_path) -> None:
        """Restore the variables from the checkpoint `save_path` (prefix, index or data file).

        Raises:
          ValueError: save_path is None or names no checkpoint.
          NotFoundError: a variable is missing from the checkpoint.
          InvalidArgumentError: a dtype or shape differs from the checkpoint's.
          DataLossError: a corrupt checkpoint file.
        """
        save_path = self._check_restore(save_path)
        if save_path is None:
            return
        d = self.saver_def
        try:
            sess.run(d.restore_op_name, {d.filename_tensor_name: save_path})
        except errors.NotFoundError as err:
            raise _wrap_restore_error(
                err, "a Variable name or other graph key that is missing"
            ) from None
        except errors.InvalidArgumentError as err:
            raise _wrap_restore_error(
                err, "a mismatch between the current graph and the graph"
            ) from None

    async def arestore(self, sess, save_path) -> None:
        """`restore` awaited on the session's loop (same errors)."""
        loop = asyncio.get_running_loop()
        save_path = await loop.run_in_executor(None, self._check_restore, save_path)
        if save_path is None:
            return
        d = self.saver_def
        try:
            await sess.arun(d.restore_op_name, {d.filename_tensor_name: save_path})
        except errors.NotFoundError as err:
            raise _wrap_restore_error(
                err, "a Variable name or other graph key that is missing"
            ) from None
        except errors.InvalidArgumentError as err:
            raise _wrap_restore_error(
                err, "a mismatch between the current graph and the graph"
            ) from None

    # -- meta graph
    def export_meta_graph(
        self,
        filename=None,
        collection_list=None,
        as_text=False,
        export_scope=None,
        clear_devices=False,
        clear_extraneous_savers=False,
        strip_default_attrs=False,
        save_debug_info=False,
    ) -> MetaGraphDef:
        """Write (when `filename` is given) and return the MetaGraphDef with this SaverDef."""
        return meta_graph.export_meta_graph(
            filename=filename,
            graph_def=ops.get_default_graph().as_graph_def(add_shapes=True),
            saver_def=self.saver_def,
            collection_list=collection_list,
            as_text=as_text,
            export_scope=export_scope,
            clear_devices=clear_devices,
            clear_extraneous_savers=clear_extraneous_savers,
            strip_default_attrs=strip_default_attrs,
        )


def _saver_def_message(saver_def):
    """A SaverDef message from ours, TF's own class, or a dict of its fields."""
    if saver_def is None or isinstance(saver_def, SaverDef):
        return saver_def
    if isinstance(saver_def, _pb_message.Message) and saver_def.DESCRIPTOR.name == "SaverDef":
        return SaverDef.FromString(saver_def.SerializeToString())
    if isinstance(saver_def, dict):
        return SaverDef(**saver_def)
    return saver_def


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **kwargs):
    """Import a MetaGraphDef (file path or message) into the default graph (TF1's
    `tf.train.import_meta_graph`).

    Returns:
      A Saver built from the MetaGraphDef's saver_def; else a new Saver over the
      imported variables, if any; else None.

    Raises:
      OSError: no such file (TF's IOError).  NotFoundError: an op type asyncflow lacks.
      DataLossError: the file is too large or does not parse.
      ValueError: the graph cannot be imported (bad input, name clash).
    """
    mg = meta_graph.import_scoped_meta_graph(
        meta_graph_or_file,
        clear_devices,
        import_scope=import_scope,
        input_map=kwargs.get("input_map"),
    )
    graph = ops.get_default_graph()
    if mg.HasField("saver_def"):
        return Saver(saver_def=mg.saver_def, name=import_scope)
    scope_re = None if not import_scope else import_scope
    if graph.get_collection(GraphKeys.GLOBAL_VARIABLES, scope_re) or graph.get_collection(
        GraphKeys.SAVEABLE_OBJECTS, scope_re
    ):
        return Saver()
    _log.info("Saver not created because there are no variables in the graph to restore")
    return None


def _saver_to_proto(saver, export_scope=None):
    return saver.to_proto(export_scope=export_scope)


meta_graph.register_proto_function(GraphKeys.SAVERS, SaverDef, _saver_to_proto, Saver.from_proto)
