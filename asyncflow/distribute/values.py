"""Values that have one part per replica: PerReplica, Mirrored, and the distributed
variables MirroredVariable and SyncOnReadVariable.

A PerReplica holds what each replica computed (possibly different); a Mirrored holds
copies known to be equal.  A MirroredVariable is one variable per device, kept equal by
updating every copy; which copy a use reads depends on the context: the replica's own in
a replica context, the copy being written inside `extended.update`, else the first.  A
SyncOnReadVariable's copies differ (each replica writes its own) and are combined when
read outside the replicas (metrics).

Invariant: `values[i]` lives on the strategy's i-th device.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.distribute import context
from asyncflow.nest import flatten, is_nested, pack_sequence_as
from asyncflow.variables import Variable, VariableAggregation, VariableSynchronization

__all__ = [
    "AggregatingVariable",
    "DistributedValues",
    "DistributedVariable",
    "Mirrored",
    "MirroredVariable",
    "PerReplica",
    "SyncOnReadVariable",
]


class DistributedValues:
    """One value per replica."""

    def __init__(self, values):
        self._values = tuple(values)

    @property
    def values(self) -> tuple:
        return self._values

    def _primary(self):
        return self._values[0]

    def _show(self, show) -> str:
        parts = ",\n".join(f"  {i}: {show(v)}" for i, v in enumerate(self._values))
        return f"{type(self).__name__}:{{\n{parts}\n}}"

    def __str__(self) -> str:
        return self._show(str)

    def __repr__(self) -> str:
        return self._show(repr)


class PerReplica(DistributedValues):
    """What each replica produced."""


class Mirrored(DistributedValues):
    """Equal copies, one per replica; used as a tensor it is the current replica's copy
    (the first one in the cross-replica context)."""

    def _local_value(self):
        replica = context.get_replica_context()
        if replica is not None and context.has_strategy():
            return self._values[replica._replica_id]
        return self._values[0]

    device = property(lambda self: self._local_value().device)
    op = property(lambda self: self._local_value().op)
    name = property(lambda self: self._local_value().name)
    dtype = property(lambda self: self._local_value().dtype)
    shape = property(lambda self: self._local_value().shape)

    def _as_graph_element(self):
        value = self._local_value()
        as_element = getattr(value, "_as_graph_element", None)
        return as_element() if as_element is not None else value


def select_replica(replica_id: int, structure):
    """Each DistributedValues in `structure` replaced by its `replica_id`-th part."""

    def pick(x):
        if isinstance(x, DistributedVariable):
            return x
        if isinstance(x, DistributedValues):
            return x.values[replica_id]
        return x

    if isinstance(structure, DistributedValues):
        return pick(structure)
    if not is_nested(structure):
        return structure
    return pack_sequence_as(structure, [pick(x) for x in flatten(structure)])


def regroup(per_replica: list, wrap=PerReplica):
    """The replicas' (equally structured) results as one structure: a leaf every replica
    returned identically stays as is, the replicas' own copies of one MirroredVariable
    become that variable, other leaves become `wrap(parts)`."""
    first = per_replica[0]
    if not is_nested(first):
        return _regroup_leaf(per_replica, wrap)
    flats = [flatten(r) for r in per_replica]
    leaves = [_regroup_leaf(parts, wrap) for parts in zip(*flats, strict=True)]
    return pack_sequence_as(first, leaves)


def _regroup_leaf(parts, wrap):
    first = parts[0]
    if all(p is first for p in parts):
        return first
    container = getattr(first, "_distributed_container", None)
    if container is not None and all(any(p is c for c in container.values) for p in parts):
        return container
    return wrap(parts)


class DistributedVariable(Variable):
    """One variable per device of a strategy (the base of TF's MirroredVariable and
    SyncOnReadVariable); `values[i]` is the copy on the strategy's i-th device.

    Reads take the copy of the current replica (or of the device being updated), else
    the first.  Writes, as a MirroredVariable's: in the cross-replica context every
    copy; in a replica, a variable with aggregation NONE writes the replica's own copy,
    one with SUM / MEAN / ONLY_FIRST_REPLICA combines the replicas' values first and
    writes every copy.
    """

    _kind = "DistributedVariable"

    def __init__(self, strategy, values, aggregation=VariableAggregation.NONE):
        self._distribute_strategy_obj = strategy
        self._values = tuple(values)
        self._aggregation = aggregation
        for v in self._values:
            v._distributed_container = self

    # -- which copy ---------------------------------------------------------------------
    @property
    def values(self) -> tuple:
        return self._values

    @property
    def primary(self):
        return self._values[0]

    def _local(self):
        replica = context.get_replica_context()
        if replica is not None and context.get_strategy() is self._distribute_strategy_obj:
            return self._values[replica._replica_id]
        device = context.get_update_device()
        if device is not None:
            for v in self._values:
                if v.device == device:
                    return v
        return self._values[0]

    # -- Variable's read-side API, on the local copy ------------------------------------
    name = property(lambda self: self.primary.name)
    op = property(lambda self: self._local().op)
    graph = property(lambda self: self.primary.graph)
    device = property(lambda self: self._local().device)
    dtype = property(lambda self: self.primary.dtype)
    shape = property(lambda self: self.primary.shape)
    initial_value = property(lambda self: self.primary.initial_value)
    trainable = property(lambda self: self.primary.trainable)
    constraint = property(lambda self: self.primary.constraint)
    handle = property(lambda self: self._local().handle)
    _snapshot = property(lambda self: self._local()._snapshot)
    _save_slice_info = property(lambda self: None)
    _distribute_strategy = property(lambda self: self._distribute_strategy_obj)

    # What a MetaGraphDef records of a variable: the first copy's (TF's).
    _handle = property(lambda self: self.primary._handle)
    _initial_value = property(lambda self: self.primary._initial_value)
    _initializer_op = property(lambda self: self.primary._initializer_op)
    _variable = property(lambda self: self.primary._variable)
    _graph_element = property(lambda self: self.primary._graph_element)

    @property
    def synchronization(self):
        return VariableSynchronization.ON_WRITE

    @property
    def aggregation(self):
        return self._aggregation

    @property
    def initializer(self) -> ops.Operation:
        from asyncflow.ops import control_flow_ordering

        return control_flow_ordering.group(*[v.initializer for v in self._values])

    def get_shape(self):
        return self.primary.get_shape()

    def value(self):
        return self._local().value()

    def read_value(self):
        return self._local().read_value()

    def initialized_value(self):
        return self.primary.initialized_value()

    def is_initialized(self, name=None):
        return self.primary.is_initialized(name=name)

    def _ref(self):
        return self._local()._ref()

    def _gradient_source(self):
        return self._local()._gradient_source()

    def _as_graph_element(self):
        return self.primary._as_graph_element()

    def eval(self, session=None):
        return self.primary.eval(session)

    def get(self):
        return self._local()

    def __repr__(self) -> str:
        parts = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self._values))
        return f"{self._kind}:{{\n{parts}\n}}"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other

    # -- writes ------------------------------------------------------------------------
    def _update(self, method: str, value, **kwargs):
        strategy = self._distribute_strategy_obj
        replica = context.get_replica_context()
        if context.get_update_device() is not None:
            return getattr(self._local(), method)(value, **kwargs)
        if replica is None or context.get_strategy() is not strategy:
            return strategy.extended.update(
                self, lambda v, x: getattr(v, method)(x, **kwargs), args=(value,)
            )
        if self._aggregation == VariableAggregation.NONE:
            return getattr(self._local(), method)(value, **kwargs)

        def merge(strategy, value):
            if self._aggregation == VariableAggregation.ONLY_FIRST_REPLICA:
                value = Mirrored([value.values[0]] * len(value.values))
            else:
                op = context.ReduceOp.from_variable_aggregation(self._aggregation)
                value = strategy.extended.reduce_to(op, value, self)
            return strategy.extended.update(
                self, lambda v, x: getattr(v, method)(x, **kwargs), args=(value,)
            )

        return replica.merge_call(merge, args=(value,))

    def assign(self, value, use_locking=False, name=None, read_value=True):
        return self._update("assign", value, name=name, read_value=read_value)

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        return self._update("assign_add", delta, name=name, read_value=read_value)

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        return self._update("assign_sub", delta, name=name, read_value=read_value)


class MirroredVariable(DistributedVariable):
    """Copies kept equal: every write goes to every copy (see DistributedVariable)."""

    _kind = "MirroredVariable"


class AggregatingVariable(DistributedVariable):
    """One variable, on a parameter device, that several replicas use (TF's, for
    CentralStorageStrategy and ParameterServerStrategy): every replica reads it; a
    write in a replica combines the replicas' values by the aggregation and writes once.

    Invariant: `values` is the one variable (`values[0]`), whatever the replica.
    """

    _kind = "AggregatingVariable"

    def _local(self):
        return self._values[0]

    def __repr__(self) -> str:
        return repr(self._values[0])

    def _update(self, method: str, value, **kwargs):
        """Raises ValueError: written in a replica with aggregation NONE (TF's)."""
        replica = context.get_replica_context()
        in_replica = replica is not None and context.get_strategy() is self._distribute_strategy
        if in_replica and self._aggregation == VariableAggregation.NONE:
            raise ValueError(
                "You must specify an aggregation method to update a AggregatingVariable in "
                "Replica Context: give tf.Variable(..., aggregation=...) (SUM, MEAN or "
                "ONLY_FIRST_REPLICA) so the replicas' values can be combined, or update it "
                "in the cross-replica context (merge_call and extended.update)."
            )
        return super()._update(method, value, **kwargs)


class SyncOnReadVariable(DistributedVariable):
    """A copy per replica, each written by its own replica only (TF's, for metrics):
    outside the replicas a read combines the copies by the aggregation (SUM adds them,
    MEAN averages, ONLY_FIRST_REPLICA and NONE take the first), and a write gives
    every copy its share (a SUM variable's value is divided among the copies)."""

    _kind = "SyncOnReadVariable"

    @property
    def synchronization(self):
        return VariableSynchronization.ON_READ

    def _in_replica(self) -> bool:
        replica = context.get_replica_context()
        if replica is not None and context.get_strategy() is self._distribute_strategy_obj:
            return True
        return context.get_update_device() is not None

    def _combined(self):
        from asyncflow.ops import math_ops

        primary = self.primary
        with ops.device(primary.device):
            if self._aggregation not in (VariableAggregation.SUM, VariableAggregation.MEAN):
                return primary.value()
            total = math_ops.add_n([v.value() for v in self._values])
            if self._aggregation == VariableAggregation.MEAN:
                total = math_ops.truediv(total, math_ops.cast(len(self._values), total.dtype))
            return total

    @property
    def _snapshot(self):
        if self._in_replica():
            return self._local()._snapshot
        if getattr(self, "_combined_element", None) is None and self.graph.finalized:
            return self.primary._snapshot  # (a MetaGraphDef written after finalize)
        return self._as_graph_element()

    def value(self):
        return self._local().value() if self._in_replica() else self._combined()

    def read_value(self):
        return self._local().read_value() if self._in_replica() else self._combined()

    def _as_graph_element(self):
        if self._in_replica():
            return self._local()._as_graph_element()
        if getattr(self, "_combined_element", None) is None:
            with self.graph.as_default(), self.graph.control_dependencies(None):
                self._combined_element = self._combined()
        return self._combined_element

    def _update(self, method: str, value, **kwargs):
        if self._in_replica():
            return getattr(self._local(), method)(value, **kwargs)
        from asyncflow.ops import math_ops

        if self._aggregation == VariableAggregation.SUM and method == "assign":
            value = ops.convert_to_tensor(value, dtype=self.dtype)
            value = math_ops.truediv(value, math_ops.cast(len(self._values), value.dtype))
        return self._distribute_strategy_obj.extended.update(
            self, lambda v, x: getattr(v, method)(x, **kwargs), args=(value,)
        )


def _to_tensor(v: DistributedVariable, dtype=None, name=None, as_ref=False):
    if isinstance(v, SyncOnReadVariable) and not as_ref and not v._in_replica():
        return ops.convert_to_tensor(v._combined(), dtype=dtype, name=name)
    return ops.convert_to_tensor(v._local(), dtype=dtype, name=name, as_ref=as_ref)


ops.register_tensor_conversion_function(DistributedVariable, _to_tensor)


def _per_replica_tensor_error(v, dtype=None, name=None, as_ref=False):
    raise TypeError(
        f"Cannot convert a {type(v).__name__} to a Tensor: use "
        "strategy.experimental_local_results (or reduce) to get its parts."
    )


def _mirrored_to_tensor(v: Mirrored, dtype=None, name=None, as_ref=False):
    return ops.convert_to_tensor(v._local_value(), dtype=dtype, name=name, as_ref=as_ref)


ops.register_tensor_conversion_function(Mirrored, _mirrored_to_tensor)
ops.register_tensor_conversion_function(PerReplica, _per_replica_tensor_error)
