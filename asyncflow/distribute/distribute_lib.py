"""`tf.distribute`'s Strategy base classes, ReplicaContext, InputContext and the default
strategy (what `get_strategy()` returns when no strategy is in scope).

Invariant: a strategy's scope installs its variable creator (once, however deeply the
scope is nested) and leaving the scope removes it.
"""

from __future__ import annotations

import contextlib
import enum

from asyncflow import graph as ops
from asyncflow import variables
from asyncflow.distribute import values as values_lib
from asyncflow.distribute.context import (
    ReduceOp,
    _Context,
    _stack,
    _top,
    get_cross_replica_context,
    get_replica_context,
    get_strategy,
    get_update_device,
    has_strategy,
    in_cross_replica_context,
    push_cross_replica_context,
    push_replica_context,
    require_cross_replica,
    set_default,
)

__all__ = [
    "InputContext",
    "InputReplicationMode",
    "ReduceOp",
    "ReplicaContext",
    "Strategy",
    "StrategyExtended",
    "experimental_set_strategy",
    "get_cross_replica_context",
    "get_loss_reduction",
    "get_replica_context",
    "get_strategy",
    "get_update_device",
    "has_strategy",
    "in_cross_replica_context",
]


class InputReplicationMode(enum.Enum):
    """How an input function is replicated: one pipeline per worker."""

    PER_WORKER = "PER_WORKER"
    PER_REPLICA = "PER_REPLICA"


class InputContext:
    """What an input function is told about its place among the input pipelines."""

    def __init__(self, num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1):
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """`global_batch_size` split evenly over the replicas.

        Raises:
          ValueError: it does not divide evenly.
        """
        if global_batch_size % self._num_replicas_in_sync != 0:
            raise ValueError(
                f"The `global_batch_size` {global_batch_size!r} is not divisible by "
                f"`num_replicas_in_sync` {self._num_replicas_in_sync!r} "
            )
        return global_batch_size // self._num_replicas_in_sync

    def __str__(self) -> str:
        return (
            f"tf.distribute.InputContext(input pipeline id {self._input_pipeline_id}, "
            f"total: {self._num_input_pipelines})"
        )


# -- the per-thread, per-graph context stack ------------------------------------------


def get_loss_reduction() -> ReduceOp:
    """How the replicas' losses combine: SUM, except when an estimator trains under the
    strategy and the last tf.losses loss was not a plain SUM (then MEAN, and the
    optimizer divides each replica's loss by the number of replicas), as TF's."""
    if not getattr(get_strategy(), "_scale_loss_for_estimator", False):
        return ReduceOp.SUM
    last = ops.get_default_graph()._attached.get("last_loss_reduction")
    return ReduceOp.SUM if last == "weighted_sum" else ReduceOp.MEAN


_SET_STRATEGY_KEY = "distribute_set_strategy"


def experimental_set_strategy(strategy) -> None:
    """Make `strategy` (None: the default) current for the default graph, as entering its
    scope for good would.

    Raises:
      RuntimeError: called inside a strategy's scope.
    """
    graph = ops.get_default_graph()
    old = graph._attached.pop(_SET_STRATEGY_KEY, None)
    if old is not None:
        old.__exit__(None, None, None)
    if has_strategy():
        raise RuntimeError("Must not be called inside a `tf.distribute.Strategy` scope.")
    if strategy is not None:
        scope = strategy.scope()
        scope.__enter__()
        graph._attached[_SET_STRATEGY_KEY] = scope


# -- the Strategy API -------------------------------------------------------------------


class StrategyExtended:
    """The less common parts of a strategy's API (`strategy.extended`)."""

    def __init__(self, container_strategy):
        self._container_strategy_ref = container_strategy

    def _container_strategy(self):
        return self._container_strategy_ref

    @property
    def worker_devices(self) -> tuple:
        return tuple(self._devices)

    @property
    def parameter_devices(self) -> tuple:
        return tuple(self._devices)

    @property
    def experimental_between_graph(self) -> bool:
        return False

    @property
    def experimental_should_init(self) -> bool:
        return True

    @property
    def should_checkpoint(self) -> bool:
        return True

    @property
    def should_save_summary(self) -> bool:
        return True

    @property
    def worker_devices_by_replica(self) -> list:
        return [[d] for d in self.worker_devices]

    @property
    def experimental_require_static_shapes(self) -> bool:
        return False

    def call_for_each_replica(self, fn, args=(), kwargs=None):
        """`fn` in every replica (the strategy's scope entered); results regrouped."""
        with self._container_strategy().scope():
            return self._call_for_each_replica(fn, args, kwargs or {})

    def broadcast_to(self, tensor, destinations):
        """`tensor` copied to `destinations` (a Mirrored)."""
        from asyncflow.distribute import cross_device_ops

        return cross_device_ops.CrossDeviceOps().broadcast(tensor, destinations)

    def non_slot_devices(self, var_list) -> tuple:
        return tuple(self._devices)

    def colocate_vars_with(self, colocate_with_variable):
        return contextlib.nullcontext()

    def variable_created_in_scope(self, v) -> bool:
        return getattr(v, "_distribute_strategy", None) is self._container_strategy()


class ReplicaContext:
    """What code running in one replica sees (`tf.distribute.get_replica_context()`)."""

    def __init__(self, strategy, replica_id_in_sync_group):
        self._strategy = strategy
        self._replica_id = replica_id_in_sync_group

    @property
    def strategy(self):
        return self._strategy

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self):
        """This replica's index, as an int32 constant (a Python int in the default
        context, as TF)."""
        from asyncflow.ops import array_ops

        # A multi-worker strategy numbers its replicas across the workers.
        offset = getattr(self._strategy.extended, "_replica_id_offset", 0)
        return array_ops.constant(offset + self._replica_id, name="replica_id_in_sync_group")

    @property
    def devices(self) -> tuple:
        return ((self._strategy.extended.worker_devices[self._replica_id],),)

    def merge_call(self, merge_fn, args=(), kwargs=None):
        """Run `merge_fn(strategy, *args, **kwargs)` once, in the cross-replica context,
        with every replica's arguments gathered into PerReplica values; each replica gets
        its own part of the result."""
        return self._strategy.extended._merge_call(self._replica_id, merge_fn, args, kwargs or {})

    def all_reduce(self, reduce_op, value):
        """`value` (a tensor or a structure of them) reduced over the replicas; every
        replica gets the result.  Its gradient is the all-reduce of the gradients."""
        from asyncflow.custom_gradient import custom_gradient
        from asyncflow.nest import flatten, pack_sequence_as

        reduce_op = ReduceOp.as_reduce_op(reduce_op)
        flat = [ops.convert_to_tensor(v) for v in flatten(value)]

        def merge(strategy, *values):
            pairs = [(v, v) for v in values]
            return strategy.extended.batch_reduce_to(reduce_op, pairs)

        @custom_gradient
        def reduced(*xs):
            def grad(*dys):
                return self.all_reduce(reduce_op, list(dys))

            return list(self.merge_call(merge, args=xs)), grad

        return pack_sequence_as(value, reduced(*flat))

    def __repr__(self) -> str:
        return f"<ReplicaContext replica {self._replica_id}>"


class Strategy:
    """Base of the strategies: the methods the default strategy and the others share."""

    def __init__(self, extended):
        self._extended = extended

    @property
    def extended(self):
        return self._extended

    @property
    def num_replicas_in_sync(self) -> int:
        return len(self._extended._devices)

    def scope(self):
        """Enter this strategy: variables made inside are its (mirrored) variables.

        Raises:
          RuntimeError: another strategy's scope is open.
        """
        return _scope(self)

    def run(self, fn, args=(), kwargs=None, options=None):
        """Call `fn` once per replica (each in its replica context); the results are
        regrouped: a value every replica returned is returned as is, differing ones as
        PerReplica."""
        with self.scope():
            return self._extended._call_for_each_replica(fn, args, kwargs or {})

    experimental_run_v2 = run  # (TF 1.15's name for run)

    def experimental_run(self, fn, input_iterator=None):
        """`fn(inputs)` in every replica, `inputs` its part of `input_iterator.get_next()`
        (no argument without an iterator)."""
        args = () if input_iterator is None else (input_iterator.get_next(),)
        return self.run(fn, args)

    def reduce(self, reduce_op, value, axis=None):
        """`value` (PerReplica) reduced over the replicas, and over `axis` too if given."""
        from asyncflow.ops import math_ops, reduction_ops

        reduce_op = ReduceOp.as_reduce_op(reduce_op)
        with self.scope():
            if axis is None:
                return self._extended._reduce(reduce_op, value)
            if reduce_op is ReduceOp.SUM:
                parts = self._map_local(value, lambda v: reduction_ops.reduce_sum(v, axis))
                return self._extended._reduce(ReduceOp.SUM, parts)
            sums = self._map_local(value, lambda v: reduction_ops.reduce_sum(v, axis))
            counts = self._map_local(value, lambda v: _axis_count(v, axis))
            total = self._extended._reduce(ReduceOp.SUM, sums)
            count = self._extended._reduce(ReduceOp.SUM, counts)
            return math_ops.truediv(total, math_ops.cast(count, total.dtype))

    def _map_local(self, value, fn):
        parts = []
        for device, v in zip(self._extended._devices, self.experimental_local_results(value)):
            with ops.device(device):
                parts.append(fn(v))
        return values_lib.PerReplica(parts)

    def experimental_local_results(self, value) -> tuple:
        """The per-replica parts of `value`, or `(value,)` for a plain one."""
        if isinstance(value, values_lib.DistributedValues):
            return tuple(value.values)
        return (value,)

    def unwrap(self, value) -> tuple:
        return self.experimental_local_results(value)

    def group(self, value, name=None):
        from asyncflow.nest import flatten
        from asyncflow.ops import control_flow_ordering

        flat = []
        for v in flatten(value):
            flat.extend(self.experimental_local_results(v))
        return control_flow_ordering.group(*flat, name=name)

    def make_input_fn_iterator(self, input_fn, replication_mode=InputReplicationMode.PER_WORKER):
        """An initializable iterator over `input_fn(InputContext)`'s dataset: each step
        gives each replica the next element, in turn (a PerReplica)."""
        from asyncflow.distribute import input_lib

        context = InputContext(1, 0, self.num_replicas_in_sync)
        dataset = input_fn(context)
        return input_lib.input_fn_dataset(self, dataset).make_initializable_iterator()

    def make_dataset_iterator(self, dataset):
        """An initializable iterator giving each replica its slice of every batch."""
        return self.experimental_distribute_dataset(dataset).make_initializable_iterator()

    def experimental_distribute_dataset(self, dataset, options=None):
        """`dataset` with every batch split into one slice per replica."""
        from asyncflow.distribute import input_lib

        return input_lib.DistributedDataset(self, dataset)

    def distribute_datasets_from_function(self, dataset_fn, options=None):
        """`dataset_fn(InputContext)`'s dataset (batched per replica): each step gives
        each replica the next element, in turn."""
        from asyncflow.distribute import input_lib

        context = InputContext(1, 0, self.num_replicas_in_sync)
        return input_lib.input_fn_dataset(self, dataset_fn(context))

    experimental_distribute_datasets_from_function = distribute_datasets_from_function

    def colocate_vars_with(self, colocate_with_variable):
        return self._extended.colocate_vars_with(colocate_with_variable)

    def experimental_make_numpy_dataset(self, numpy_input, session=None):
        from asyncflow.data import Dataset

        return Dataset.from_tensor_slices(numpy_input)

    def configure(self, session_config=None, cluster_spec=None, task_type=None, task_id=None):
        pass

    def update_config_proto(self, config_proto):
        return config_proto


def _axis_count(value, axis):
    from asyncflow.ops import array_ops

    return array_ops.shape(value, out_type="int64")[axis]


class _Scope:
    """`strategy.scope()`: the cross-replica context plus the strategy's variable creator.

    Pushes and pops by hand rather than through generator context managers, so a scope
    entered and never exited (TF allows `scope().__enter__()`) stays entered when this
    object is garbage collected.
    """

    def __init__(self, strategy):
        self._strategy = strategy
        self._entry: _Context | None = None
        self._graph = None
        self._creators = None

    def __enter__(self):
        require_cross_replica(self._strategy)
        current = get_strategy()
        if current is not self._strategy and has_strategy():
            raise RuntimeError(
                f"Mixing different tf.distribute.Strategy objects: {self._strategy} is not "
                f"{current}"
            )
        top = _top()
        if top.replica is not None and top.strategy is self._strategy:
            entry = _Context(self._strategy, None, top.replica)  # re-entered in a replica
        else:
            entry = _Context(self._strategy, self._strategy, None)
        self._graph = ops.get_default_graph()
        _stack(self._graph).append(entry)
        self._entry = entry
        creator = getattr(self._strategy.extended, "_variable_creator", None)
        if creator is not None and current is not self._strategy:  # (not when nested)
            self._creators = variables.creator_stack(self._graph)
            variables.set_creator_stack(self._graph, (*self._creators, creator))
        return self._strategy

    def __exit__(self, *exc):
        if self._creators is not None:
            variables.set_creator_stack(self._graph, self._creators)
            self._creators = None
        stack = _stack(self._graph)
        if self._entry in stack:
            stack.remove(self._entry)
        self._entry = None
        return False


def _scope(strategy) -> _Scope:
    return _Scope(strategy)


# -- the default strategy ----------------------------------------------------------------


class _DefaultExtended(StrategyExtended):
    def __init__(self, container_strategy):
        super().__init__(container_strategy)
        self._devices = ("/device:CPU:0",)
        self._host_device = None

    @property
    def worker_devices(self) -> tuple:
        raise RuntimeError(
            "worker_devices() method unsupported by default tf.distribute.Strategy."
        )

    @property
    def parameter_devices(self) -> tuple:
        raise RuntimeError(
            "parameter_devices() method unsupported by default tf.distribute.Strategy."
        )

    def _call_for_each_replica(self, fn, args, kwargs):
        with push_replica_context(self._container_strategy(), _default_replica_context()):
            return fn(*args, **kwargs)

    def _merge_call(self, replica_id, merge_fn, args, kwargs):
        with push_cross_replica_context(self._container_strategy()):
            return merge_fn(self._container_strategy(), *args, **kwargs)

    def _reduce(self, reduce_op, value):
        return value

    def reduce_to(self, reduce_op, value, destinations, options=None):
        return value

    def batch_reduce_to(self, reduce_op, value_destination_pairs, options=None):
        return [v for v, _ in value_destination_pairs]

    def update(self, var, fn, args=(), kwargs=None, group=True):
        with ops.colocate_with(var.op):
            return fn(var, *args, **(kwargs or {}))

    def update_non_slot(self, colocate_with, fn, args=(), kwargs=None, group=True):
        return fn(*args, **(kwargs or {}))

    def read_var(self, v):
        from asyncflow.ops import array_ops

        return array_ops.identity(v)

    def value_container(self, value):
        return value


class _DefaultDistributionStrategyV1(Strategy):
    def __init__(self):
        super().__init__(_DefaultExtended(self))

    @property
    def num_replicas_in_sync(self) -> int:
        return 1

    def reduce(self, reduce_op, value, axis=None):
        ReduceOp.as_reduce_op(reduce_op)
        if axis is None:
            from asyncflow.ops import array_ops

            return value if not isinstance(value, ops.Tensor) else array_ops.identity(value)
        return super().reduce(reduce_op, value, axis)

    def _map_local(self, value, fn):
        return fn(value)

    def experimental_distribute_dataset(self, dataset, options=None):
        return dataset

    def make_dataset_iterator(self, dataset):
        from asyncflow.distribute import input_lib

        return input_lib.DistributedDataset(
            self, dataset, lambda strategy, element: element
        ).make_initializable_iterator()

    def make_input_fn_iterator(self, input_fn, replication_mode=InputReplicationMode.PER_WORKER):
        return self.make_dataset_iterator(input_fn(InputContext()))


class _DefaultReplicaContext(ReplicaContext):
    @property
    def replica_id_in_sync_group(self) -> int:
        return 0

    def merge_call(self, merge_fn, args=(), kwargs=None):
        with push_cross_replica_context(self._strategy):
            return merge_fn(self._strategy, *args, **(kwargs or {}))

    def all_reduce(self, reduce_op, value):
        from asyncflow.nest import flatten, pack_sequence_as
        from asyncflow.ops import array_ops

        ReduceOp.as_reduce_op(reduce_op)
        return pack_sequence_as(value, array_ops.identity_n(flatten(value)))


def _default_strategy():
    return _DEFAULT_STRATEGY


def _default_replica_context():
    return _DEFAULT_REPLICA


_DEFAULT_STRATEGY = _DefaultDistributionStrategyV1()
_DEFAULT_REPLICA = _DefaultReplicaContext(_DEFAULT_STRATEGY, 0)
set_default(_DEFAULT_STRATEGY, _DEFAULT_REPLICA)
