"""`tf.train.Checkpoint`, its load statuses and `tf.train.CheckpointManager`, as
tf.compat.v1 has them in graph mode.

An object-based checkpoint is an ordinary V2 bundle whose keys are object paths
("model/layer/kernel/.ATTRIBUTES/VARIABLE_VALUE") and which holds the object graph itself,
a serialized TrackableObjectGraph, under "_CHECKPOINTABLE_OBJECT_GRAPH" (asyncflow/
trackable.py builds both).  TF reads ours and we read TF's.

Graph mode, as TF1: `save`/`write` build SaveV2 once per object-graph shape (cached) and
run it in the session, the prefix and the serialized object graph fed; `restore` reads
only the checkpoint's object graph and returns a status; nothing is assigned until
`status.run_restore_ops(session)` / `initialize_or_restore(session)`.  Each of those
walks the current Python objects again and matches them to the checkpoint's nodes by
name from the root, so objects attached after `restore` (a layer built later, slot
variables an optimizer made later) are restored too: TF's deferred restoration.

Invariants: restore ops are built once per distinct (key, variable) set and graph; a
checkpoint's object graph is read from the bundle through the bounded readers of
checkpoint_format.
"""

from __future__ import annotations

import collections
import glob
import logging
import os
import time

import numpy as np

from asyncflow import dtypes, errors, layer_classes, trackable
from asyncflow import graph as ops
from asyncflow import variables as variables_mod
from asyncflow.ops import array_ops, control_flow_ops, io_ops
from asyncflow.protos.trackable_object_graph_pb2 import TrackableObjectGraph
from asyncflow.resource_variable import ResourceVariable
from asyncflow.train import checkpoint_utils
from asyncflow.train import optimizer as optimizer_mod
from asyncflow.train import saver as saver_mod

__all__ = ["Checkpoint", "CheckpointManager", "CheckpointOptions"]

_log = logging.getLogger("asyncflow")


def _optimizer_children(opt) -> list:
    graph = ops.get_default_graph()
    return [
        (name, v)
        for (name, g), v in sorted(opt._non_slot_dict.items(), key=lambda kv: kv[0][0])
        if g is graph
    ]


def _optimizer_slots(opt) -> list:
    """(slot name, variable, slot) for the current graph: names sorted, as TF lists."""
    graph = ops.get_default_graph()
    out = []
    for slot_name in opt.get_slot_names():
        for key, slot in opt._slots[slot_name].items():
            if key[0] is graph:
                out.append((slot_name, key, slot))
    return out


def _layer_children(layer) -> list:
    """A tf.layers layer's weights, named as Keras names them ("kernel", "moving_mean"):
    the variable's name inside the layer's scope, in creation order."""
    prefix = layer._scope.name + "/" if layer._scope is not None else None
    out = []
    for v in layer._variables:
        name = v.op.name
        out.append((name[len(prefix) :] if prefix and name.startswith(prefix) else name, v))
    return out


trackable.register_trackable(optimizer_mod.Optimizer, _optimizer_children, _optimizer_slots)
trackable.register_trackable(layer_classes.Layer, _layer_children)


class CheckpointOptions:
    """Options for checkpoint writing and reading (`tf.train.CheckpointOptions`).

    Accepted for TF's signature: asyncflow writes and reads on the host and always
    synchronously, so the device and async options change nothing here.
    """

    __slots__ = (
        "experimental_io_device", "experimental_enable_async_checkpoint",
        "experimental_write_callbacks", "enable_async", "experimental_skip_slot_variables",
        "experimental_sharding_callback",
    )  # fmt: skip

    def __init__(
        self,
        experimental_io_device=None,
        experimental_enable_async_checkpoint=False,
        experimental_write_callbacks=None,
        enable_async=False,
        experimental_skip_slot_variables=False,
        experimental_sharding_callback=None,
    ):
        self.experimental_io_device = experimental_io_device
        self.experimental_enable_async_checkpoint = experimental_enable_async_checkpoint
        self.experimental_write_callbacks = experimental_write_callbacks
        self.enable_async = enable_async
        self.experimental_skip_slot_variables = experimental_skip_slot_variables
        self.experimental_sharding_callback = experimental_sharding_callback


def _session(session):
    if session is None:
        session = ops.get_default_session()
    if session is None:
        raise ValueError(
            "No default session: pass `session=` or call inside `with sess.as_default():`"
        )
    return session


def _read_value(var):
    with ops.colocate_with(var.op):
        return var.value() if not isinstance(var, ResourceVariable) else var.read_value()


class _GraphOps:
    """Save and restore ops built in one graph, cached by what they save / restore."""

    def __init__(self):
        self.save: dict = {}
        self.restore: dict = {}

    def save_op(self, graph, values):
        cache_key = tuple((k, id(v)) for k, v in values)
        built = self.save.get(cache_key)
        if built is None:
            with graph.as_default(), ops.name_scope("save"), ops.device("/device:CPU:0"):
                prefix = array_ops.placeholder(dtypes.string, [], name="file_prefix")
                proto = array_ops.placeholder(dtypes.string, [], name="object_graph")
                names = [trackable.OBJECT_GRAPH_KEY] + [k for k, _ in values]
                # A PythonState's string is fed when the checkpoint is written.
                states = [
                    (array_ops.placeholder(dtypes.string, [], name="py_state"), v)
                    for _, v in values
                    if isinstance(v, trackable.PythonState)
                ]
                fed = {id(v): p for p, v in states}
                tensors = [proto] + [
                    fed[id(v)] if id(v) in fed else _read_value(v) for _, v in values
                ]
                op = io_ops.save_v2(
                    prefix, array_ops.constant(names), array_ops.constant([""] * len(names)),
                    tensors,
                )  # fmt: skip
            # The variables ride along: alive, their ids cannot be reused by others.
            built = self.save[cache_key] = (prefix, proto, op, states, [v for _, v in values])
        return built[:4]

    def restore_op(self, graph, pairs):
        cache_key = tuple((k, id(v)) for k, v in pairs)
        built = self.restore.get(cache_key)
        if built is None:
            with graph.as_default(), ops.name_scope("restore"):
                with ops.device("/device:CPU:0"):
                    prefix = array_ops.placeholder(dtypes.string, [], name="file_prefix")
                    restored = io_ops.restore_v2(
                        prefix, array_ops.constant([k for k, _ in pairs]),
                        array_ops.constant([""] * len(pairs)),
                        [v.dtype.base_dtype for _, v in pairs],
                    )  # fmt: skip
                if len(pairs) == 1:
                    restored = [restored] if not isinstance(restored, list | tuple) else restored
                assigns = []
                for (_, var), t in zip(pairs, restored, strict=True):
                    with ops.colocate_with(var.op):
                        assigns.append(var.assign(t, read_value=False))
                op = control_flow_ops.group(*assigns)
            built = self.restore[cache_key] = (prefix, op, [v for _, v in pairs])
        return built[:2]


def _read_object_graph(save_path: str):
    """The checkpoint's TrackableObjectGraph, or None for a name-based checkpoint.

    Raises: NotFoundError (no checkpoint), DataLossError (corrupt files).
    """
    reader = checkpoint_utils.load_checkpoint(save_path)
    if not reader.has_tensor(trackable.OBJECT_GRAPH_KEY):
        return reader, None
    raw = reader.get_tensor(trackable.OBJECT_GRAPH_KEY)
    raw = raw.item() if isinstance(raw, np.ndarray) else raw
    proto = TrackableObjectGraph()
    try:
        proto.ParseFromString(raw)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise errors.DataLossError(
            None, None, f"Checkpoint {save_path}: corrupt object graph: {e}"
        ) from None
    return reader, proto


def _variables_in(graph_view: trackable.ObjectGraph) -> list:
    return [o for o in graph_view.nodes if trackable.is_variable(o)]


class _Status:
    """Shared by the load statuses: the root, the checkpoint and the ops cache."""

    def __init__(self, checkpoint, save_path):
        self._root = checkpoint
        self._save_path = save_path
        self._partial = False

    def expect_partial(self):
        """Silence warnings about values of the checkpoint left unused."""
        self._partial = True
        return self

    def _initializers_for(self, variables):
        return [v.initializer for v in variables]


class CheckpointLoadStatus(_Status):
    """What `Checkpoint.restore` returns for an object-based checkpoint.

    `run_restore_ops` / `initialize_or_restore` assign every value whose object is
    matched when they run, so objects attached after `restore` are restored then.
    The assert_* methods raise AssertionError (TF's messages) and return self.
    """

    def __init__(self, checkpoint, save_path, reader, proto):
        super().__init__(checkpoint, save_path)
        self._reader = reader
        self._proto = proto
        self._names = _node_names(proto)

    def _match(self):
        """({checkpoint node id: object}, the current object graph)."""
        view = trackable.build_object_graph(self._root)
        nodes = self._proto.nodes
        matched = {0: self._root}
        queue = collections.deque([0])
        while queue:
            nid = queue.popleft()
            kids = dict(trackable.children_of(matched[nid]))
            legacy = None
            for ref in nodes[nid].children:
                child = kids.get(ref.local_name)
                if child is None:
                    # A key of an older asyncflow's layout (a Keras RNN's "kernel").
                    if legacy is None:
                        legacy = dict(trackable.legacy_children_of(matched[nid]))
                    child = legacy.get(ref.local_name)
                if child is not None and ref.node_id not in matched:
                    matched[ref.node_id] = child
                    queue.append(ref.node_id)
        for nid, obj in list(matched.items()):
            if not nodes[nid].slot_variables:
                continue
            slots = {(key, name): s for name, key, s in trackable.slots_of(obj)}
            for ref in nodes[nid].slot_variables:
                var = matched.get(ref.original_variable_node_id)
                slot = None
                if trackable.is_variable(var):
                    slot = slots.get((trackable.variable_identity(var), ref.slot_name))
                if slot is not None:
                    matched[ref.slot_variable_node_id] = slot
        return matched, view

    def _restore_pairs(self, matched):
        pairs = []
        for nid, obj in sorted(matched.items()):
            if not trackable.is_variable(obj):
                continue
            for attr in self._proto.nodes[nid].attributes:
                if attr.name == trackable.VARIABLE_VALUE:
                    pairs.append((attr.checkpoint_key, obj))
        return pairs

    def run_restore_ops(self, session=None) -> None:
        """Assign the checkpoint's values to every matched variable.

        Raises: NotFoundError / DataLossError (files), InvalidArgumentError (a shape).
        """
        session = _session(session)
        matched, _ = self._match()
        for nid, obj in sorted(matched.items()):
            if isinstance(obj, trackable.PythonState):
                for attr in self._proto.nodes[nid].attributes:
                    if attr.name == trackable.PY_STATE:
                        value = self._reader.get_tensor(attr.checkpoint_key)
                        obj.deserialize(value.item() if isinstance(value, np.ndarray) else value)
        pairs = self._restore_pairs(matched)
        if not pairs:
            return
        prefix, op = self._root._graph_ops(session.graph).restore_op(session.graph, pairs)
        session.run(op, feed_dict={prefix: self._save_path})

    def initialize_or_restore(self, session=None) -> None:
        """Restore the matched variables and run the initializers of the others."""
        session = _session(session)
        matched, view = self._match()
        done = {id(o) for o in matched.values()}
        inits = [v.initializer for v in _variables_in(view) if id(v) not in done]
        self.run_restore_ops(session)
        if inits:
            session.run(inits)

    def assert_consumed(self):
        """Every value in the checkpoint has an object, and every object a value.

        Raises: AssertionError.
        """
        self.assert_existing_objects_matched()
        matched, _ = self._match()
        for nid, node in enumerate(self._proto.nodes):
            if node.attributes and nid not in matched:
                raise AssertionError(f"Unresolved object in checkpoint {self._names[nid]}: {node}")
        unused = [
            f"{self._names[nid]} ({obj}): {list(self._proto.nodes[nid].attributes)}"
            for nid, obj in sorted(matched.items())
            if self._proto.nodes[nid].attributes
            and not (trackable.is_variable(obj) or isinstance(obj, trackable.PythonState))
        ]
        if unused:
            raise AssertionError(
                "Unused attributes in these objects (the attributes exist in the "
                "checkpoint but were not restored):\n" + "\n".join(unused)
            )
        return self

    def assert_existing_objects_matched(self):
        """Every variable reachable from the root has a value in the checkpoint.

        Raises: AssertionError.
        """
        matched, view = self._match()
        done = {id(o) for o in matched.values()}
        unused = [v for v in _variables_in(view) if id(v) not in done]
        if unused:
            n = len(unused)
            shown = min(10, n)
            raise AssertionError(
                f"Found {n} Python objects that were not bound to checkpointed values, "
                "likely due to changes in the Python program. Showing "
                f"{shown} of {n} unmatched objects: {unused[:shown]}"
            )
        return self

    def assert_nontrivial_match(self):
        """Something besides the root matched.

        Raises: AssertionError.
        """
        matched, view = self._match()
        if len(matched) <= 1:
            done = {id(o) for o in matched.values()}
            unused = [v for v in _variables_in(view) if id(v) not in done]
            if unused:
                raise AssertionError(
                    "Nothing except the root object matched a checkpointed value. "
                    "Typically this means that the checkpoint does not match the Python "
                    "program. The following objects have no matching checkpointed "
                    f"value: {unused}"
                )
            raise AssertionError(
                f"Nothing to load. No dependencies have been added to {self._root} yet."
            )
        return self


def _node_names(proto) -> list[str]:
    """TF's pretty names of a checkpoint's nodes: "(root).model.kernel"."""
    names: dict[int, str] = {0: "(root)"}
    queue = collections.deque([0])
    while queue:
        nid = queue.popleft()
        for ref in proto.nodes[nid].children:
            if ref.node_id not in names:
                names[ref.node_id] = f"{names[nid]}.{ref.local_name}"
                queue.append(ref.node_id)
    for nid, node in enumerate(proto.nodes):
        for ref in node.slot_variables:
            var = names.get(ref.original_variable_node_id, "?")
            names[ref.slot_variable_node_id] = (
                f"{var}'s state '{ref.slot_name}' for {names.get(nid, '?')}"
            )
    return [names.get(i, f"(unreachable node {i})") for i in range(len(proto.nodes))]


class InitializationOnlyStatus(_Status):
    """What `restore(None)` returns: nothing to restore, initializers to run."""

    def _nothing(self):
        raise AssertionError(
            "No checkpoint specified (save_path=None); nothing is being restored."
        )

    def assert_consumed(self):
        self._nothing()

    def assert_existing_objects_matched(self):
        self._nothing()

    def assert_nontrivial_match(self):
        self._nothing()

    def run_restore_ops(self, session=None) -> None:
        """Nothing to restore."""

    def initialize_or_restore(self, session=None) -> None:
        session = _session(session)
        inits = [v.initializer for v in _variables_in(trackable.build_object_graph(self._root))]
        if inits:
            session.run(inits)


class NameBasedSaverStatus(_Status):
    """What `restore` returns for a checkpoint without an object graph (a Saver's):
    variables are restored by their graph names."""

    def __init__(self, checkpoint, save_path, reader):
        super().__init__(checkpoint, save_path)
        self._reader = reader

    def _pairs(self):
        view = trackable.build_object_graph(self._root)
        found, missing = [], []
        for v in _variables_in(view):
            name = trackable.variable_full_name(v)
            (found if self._reader.has_tensor(name) else missing).append((name, v))
        return found, missing

    def assert_consumed(self):
        """Raises: AssertionError (a variable without a value in the checkpoint)."""
        _, missing = self._pairs()
        missing = [(n, v) for n, v in missing if v is not self._root._save_counter]
        if missing:
            lines = "".join(f"\n    {v}: {n}" for n, v in missing)
            raise AssertionError(f"Some objects had attributes which were not restored: {lines}")
        return self

    def assert_existing_objects_matched(self):
        return self.assert_consumed()

    def assert_nontrivial_match(self):
        return self.assert_consumed()

    def run_restore_ops(self, session=None) -> None:
        session = _session(session)
        found, _ = self._pairs()
        if found:
            prefix, op = self._root._graph_ops(session.graph).restore_op(session.graph, found)
            session.run(op, feed_dict={prefix: self._save_path})

    def initialize_or_restore(self, session=None) -> None:
        session = _session(session)
        _, missing = self._pairs()
        self.run_restore_ops(session)
        if missing:
            session.run([v.initializer for _, v in missing])


class Checkpoint:
    """Groups trackable objects, saving and restoring them (`tf.compat.v1.train.Checkpoint`).

    Keyword arguments name the root's children (in sorted order, as TF): Modules,
    variables, optimizers, lists/dicts of them, other Checkpoints.

    Raises (at construction):
      ValueError: a value that is not trackable.
    """

    def __init__(self, **kwargs):
        object.__setattr__(self, "_deps", {})
        object.__setattr__(self, "_save_counter", None)
        object.__setattr__(self, "_save_assign", {})
        object.__setattr__(self, "_ops", {})
        for k, v in sorted(kwargs.items()):
            if not trackable.is_trackable(v):
                raise ValueError(
                    "`Checkpoint` was expecting a trackable object (an object derived from "
                    f"`Trackable`), got {v}. If you believe this object should be "
                    "trackable (i.e. it is part of the TensorFlow Python API and manages "
                    "state), please open an issue."
                )
            setattr(self, k, v)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name.startswith("_"):
            return
        if trackable.is_trackable(value):
            self._deps[name] = value
        else:
            self._deps.pop(name, None)

    def __delattr__(self, name):
        object.__delattr__(self, name)
        self._deps.pop(name, None)

    def _trackable_children(self) -> list:
        return list(self._deps.items())

    def _graph_ops(self, graph) -> _GraphOps:
        return self._ops.setdefault(graph, _GraphOps())

    @property
    def save_counter(self):
        """An int64 variable counting `save` calls (created on first use, as TF)."""
        self._maybe_create_save_counter()
        return self._save_counter

    def _maybe_create_save_counter(self) -> None:
        if self._save_counter is not None:
            return
        g = ops.get_default_graph()
        with g.name_scope(""), ops.device("/device:CPU:0"):
            v = ResourceVariable(
                np.int64(0), name="save_counter", trainable=False, dtype=dtypes.int64
            )
        object.__setattr__(self, "_save_counter", v)
        self._deps["save_counter"] = v

    def write(self, file_prefix, session=None, options=None) -> str:
        """Write a checkpoint at `file_prefix` (no numbering, no state file).

        Raises: ValueError (no session); the save op's errors when it runs.
        """
        session = _session(session)
        file_prefix = os.fspath(file_prefix)
        # TF's object-based save writes its shards through a temporary directory it
        # makes, so a missing parent directory is made too.
        if os.path.dirname(file_prefix) and "://" not in file_prefix:
            os.makedirs(os.path.dirname(file_prefix), exist_ok=True)
        with session.graph.as_default():
            view = trackable.build_object_graph(self)
            prefix, proto, op, states = self._graph_ops(session.graph).save_op(
                session.graph, view.values
            )
        feed = {prefix: file_prefix, proto: view.proto.SerializeToString()}
        feed.update({p: state.serialize() for p, state in states})
        session.run(op, feed_dict=feed)
        return file_prefix

    def save(self, file_prefix, session=None, options=None) -> str:
        """Increment `save_counter`, write "<file_prefix>-<n>" and point the `checkpoint`
        state file of its directory at it.  Returns the path written.

        Raises: ValueError (no session); the save op's errors when it runs.
        """
        session = _session(session)
        file_prefix = os.fspath(file_prefix)
        with session.graph.as_default():
            if self._save_counter is None:
                self._maybe_create_save_counter()
                session.run(self._save_counter.initializer)
            assign = self._save_assign.get(session.graph)
            if assign is None:
                with ops.colocate_with(self._save_counter.op):
                    assign = self._save_counter.assign_add(np.int64(1), read_value=True)
                self._save_assign[session.graph] = assign
        number = session.run(assign)
        path = self.write(f"{file_prefix}-{int(number)}", session=session)
        saver_mod.update_checkpoint_state(
            os.path.dirname(file_prefix), path, [path], save_relative_paths=True
        )
        return path

    def restore(self, save_path):
        """A load status for `save_path` (None: only initialization).  Nothing is
        assigned until `status.run_restore_ops()` / `initialize_or_restore()`.

        Raises: NotFoundError (no checkpoint there), DataLossError (corrupt files).
        """
        status = self.read(save_path)
        self._maybe_create_save_counter()
        return status

    def read(self, save_path, options=None):
        """As `restore`, without creating `save_counter`."""
        if save_path is None:
            return InitializationOnlyStatus(self, None)
        save_path = os.fspath(save_path)
        reader, proto = _read_object_graph(save_path)
        if proto is None:
            return NameBasedSaverStatus(self, save_path, reader)
        return CheckpointLoadStatus(self, save_path, reader, proto)


# -- CheckpointManager ---------------------------------------------------------------------


def _now() -> float:
    """The wall clock the manager stamps checkpoints with (a seam for tests)."""
    return time.time()


def _delete_checkpoint_files(prefix: str) -> None:
    for path in [prefix + ".index", *glob.glob(glob.escape(prefix) + ".data-?????-of-?????")]:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


class CheckpointManager:
    """Numbered checkpoints in a directory, old ones deleted (`tf.train.CheckpointManager`).

    Raises (at construction):
      ValueError: max_to_keep not positive or None; checkpoint_interval without
        step_counter.
    """

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt", step_counter=None, checkpoint_interval=None,
                 init_fn=None, last_checkpoint_step=None):  # fmt: skip
        self._checkpoint = checkpoint
        self._save_counter_assign = {}
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(
                f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep}."
            )
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._directory = os.fspath(directory)
        self._checkpoint_prefix = os.path.join(self._directory, checkpoint_name)
        self._init_fn = init_fn
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError(
                "`step_counter` should be passed if `checkpoint_interval` is not None."
            )
        self._step_counter = step_counter
        self._last_checkpoint_step = last_checkpoint_step
        self._checkpoint_interval = checkpoint_interval
        self._recover()

    def _recover(self) -> None:
        state = saver_mod.get_checkpoint_state(self._directory)
        now = _now()
        self._maybe_delete: collections.OrderedDict = collections.OrderedDict()
        if state is None:
            self._latest_checkpoint = None
            # A little in the past, so a manager re-created at once still sweeps.
            self._last_preserved_timestamp = now - 1.0
            return
        self._latest_checkpoint = state.model_checkpoint_path
        self._last_preserved_timestamp = state.last_preserved_timestamp
        if now < self._last_preserved_timestamp:
            _log.warning("time went backwards: last preserved checkpoint time reset to now")
            self._last_preserved_timestamp = now
        stamps = list(state.all_model_checkpoint_timestamps)
        paths = list(state.all_model_checkpoint_paths)
        if not stamps:
            stamps = [self._last_preserved_timestamp] * len(paths)
        for path, stamp in zip(paths, stamps, strict=False):
            stamp = min(stamp, now)
            if stamp > self._last_preserved_timestamp:
                self._maybe_delete[path] = stamp

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self):
        return self._checkpoint

    @property
    def checkpoint_interval(self):
        return self._checkpoint_interval

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint's prefix, or None."""
        return self._latest_checkpoint

    @property
    def checkpoints(self) -> list[str]:
        """The managed checkpoints, oldest first (those kept for good not included)."""
        return list(self._maybe_delete)

    def sync(self) -> None:
        """Wait for pending writes: asyncflow's writes are synchronous."""

    def _sweep(self) -> None:
        if not self._max_to_keep:
            return
        while len(self._maybe_delete) > self._max_to_keep:
            path, stamp = self._maybe_delete.popitem(last=False)
            hours = self._keep_checkpoint_every_n_hours
            if hours and stamp - hours * 3600.0 >= self._last_preserved_timestamp:
                self._last_preserved_timestamp = stamp
                continue
            _delete_checkpoint_files(path)

    def _record_state(self) -> None:
        saver_mod.update_checkpoint_state(
            self._directory,
            self._latest_checkpoint,
            list(self._maybe_delete),
            all_model_checkpoint_timestamps=list(self._maybe_delete.values()),
            last_preserved_timestamp=self._last_preserved_timestamp,
            save_relative_paths=True,
        )

    def _step(self, session):
        value = self._step_counter
        if isinstance(value, variables_mod.Variable | ops.Tensor):
            value = session.run(value)
        return int(value)

    def save(self, checkpoint_number=None, check_interval=True, options=None) -> str | None:
        """Save a checkpoint numbered `checkpoint_number` (default: the save counter),
        record it, delete those beyond max_to_keep.  Returns its path, or None when
        checkpoint_interval says it is too early.

        Raises: ValueError (no default session).
        """
        session = _session(None)
        if self._checkpoint_interval is not None:
            step = self._step(session)
            if self._last_checkpoint_step is not None:
                if step == self._last_checkpoint_step:
                    return None
                if (
                    check_interval
                    and step < self._last_checkpoint_step + self._checkpoint_interval
                ):
                    return None
            self._last_checkpoint_step = step
        ck = self._checkpoint
        if ck._save_counter is None:
            ck._maybe_create_save_counter()
            session.run(ck._save_counter.initializer)
        assign = self._save_counter_assign.get(session.graph)
        if assign is None:
            with session.graph.as_default():
                assign = ck._save_counter.assign_add(np.int64(1), read_value=False)
            self._save_counter_assign[session.graph] = assign
        session.run(assign)
        if checkpoint_number is None:
            checkpoint_number = ck._save_counter
        if not isinstance(checkpoint_number, int | np.integer):
            checkpoint_number = session.run(checkpoint_number)
        path = ck.write(f"{self._checkpoint_prefix}-{int(checkpoint_number)}", session=session)
        self._maybe_delete.pop(path, None)
        self._maybe_delete[path] = _now()
        self._latest_checkpoint = path
        # State first (a crash while deleting still finds the new checkpoint), then
        # delete, then the state without the deleted ones.
        self._record_state()
        self._sweep()
        self._record_state()
        return path

    def restore_or_initialize(self):
        """Restore the latest checkpoint (returns its path; in graph mode, as TF, the
        restore ops are left to run) or call init_fn (returns None)."""
        if self._latest_checkpoint is not None:
            self._checkpoint.restore(self._latest_checkpoint)
            if self._checkpoint_interval is not None:
                self._last_checkpoint_step = self._step(_session(None))
            return self._latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None
