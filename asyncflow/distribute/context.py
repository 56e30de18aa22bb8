"""The distribution context a graph is being built in, and ReduceOp.

A graph is always built in one distribution context: the default strategy's replica
context (no strategy in scope), a strategy's cross-replica context (inside
`strategy.scope()`), or one replica's context (inside `strategy.run(fn)`, on that
replica's thread).  The contexts form a stack kept per thread and per graph, as TF
keeps it, so replica threads each see their own replica context.

Invariant: the bottom of every stack is the default context (the default strategy, in
its replica context), so `get_strategy()` never fails; distribute_lib, which defines the
default strategy, installs it here when imported.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import weakref

from asyncflow import graph as ops

__all__ = [
    "ReduceOp",
    "get_cross_replica_context",
    "get_replica_context",
    "get_strategy",
    "get_update_device",
    "has_strategy",
    "in_cross_replica_context",
]


class ReduceOp(enum.Enum):
    """How values from the replicas combine: SUM or MEAN."""

    SUM = "SUM"
    MEAN = "MEAN"

    @staticmethod
    def from_variable_aggregation(aggregation) -> ReduceOp:
        """The ReduceOp of a VariableAggregation (SUM, MEAN, ONLY_FIRST_REPLICA).

        Raises:
          ValueError: NONE (or anything else) has no ReduceOp.
        """
        name = getattr(aggregation, "name", None)
        if name == "SUM":
            return ReduceOp.SUM
        if name in ("MEAN", "ONLY_FIRST_REPLICA"):
            return ReduceOp.MEAN
        raise ValueError(
            f"Could not convert from `tf.VariableAggregation` {aggregation} to"
            "`tf.distribute.ReduceOp` type"
        )

    @staticmethod
    def as_reduce_op(op) -> ReduceOp:
        if isinstance(op, ReduceOp):
            return op
        if isinstance(op, str):
            try:
                return ReduceOp[op.upper()]
            except KeyError:
                raise ValueError(f"{op.upper()!r} is not a valid ReduceOp") from None
        raise ValueError(f"{op!r} is not a valid ReduceOp")


# -- the per-thread, per-graph context stack ------------------------------------------

_DEFAULT: list = []  # [the default strategy, its ReplicaContext], set by distribute_lib


def set_default(strategy, replica_context) -> None:
    _DEFAULT[:] = [strategy, replica_context]


def default_strategy():
    return _DEFAULT[0]


class _Context:
    """One entry of the stack: the strategy, and which of the two contexts holds."""

    __slots__ = ("strategy", "cross_replica", "replica", "update_device")

    def __init__(self, strategy, cross_replica, replica, update_device=None):
        self.strategy = strategy
        self.cross_replica = cross_replica  # the strategy, in its cross-replica context
        self.replica = replica  # a ReplicaContext, in a replica context
        self.update_device = update_device  # the device `extended.update` is writing on


class _Stacks(threading.local):
    def __init__(self):
        self.by_graph: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_stacks = _Stacks()


def _stack(graph=None) -> list:
    graph = ops.get_default_graph() if graph is None else graph
    stack = _stacks.by_graph.get(graph)
    if stack is None:
        stack = _stacks.by_graph[graph] = [_Context(_DEFAULT[0], None, _DEFAULT[1])]
    return stack


def _top() -> _Context:
    return _stack()[-1]


@contextlib.contextmanager
def _push(context: _Context):
    stack = _stack()
    stack.append(context)
    try:
        yield context
    finally:
        stack.remove(context)


def get_strategy():
    """The strategy in scope, else the default strategy."""
    return _top().strategy


def has_strategy() -> bool:
    """Whether a strategy other than the default one is in scope."""
    return get_strategy() is not _DEFAULT[0]


def in_cross_replica_context() -> bool:
    """True inside `strategy.scope()` but outside `strategy.run`."""
    return _top().cross_replica is not None


def get_replica_context():
    """The current ReplicaContext; None in a cross-replica context."""
    return _top().replica


def get_cross_replica_context():
    """The strategy when in its cross-replica context, else None."""
    return _top().cross_replica


def get_update_device():
    """The device whose copy `extended.update` is writing, or None."""
    return _top().update_device


def push_replica_context(strategy, replica_context):
    return _push(_Context(strategy, None, replica_context))


def push_cross_replica_context(strategy):
    return _push(_Context(strategy, strategy, None))


def push_update_context(strategy, device):
    return _push(_Context(strategy, strategy, None, update_device=device))


def require_cross_replica(strategy) -> None:
    """Raises RuntimeError (TF's words) inside one of `strategy`'s replicas."""
    top = _top()
    if top.replica is not None and top.strategy is strategy and strategy is not _DEFAULT[0]:
        raise RuntimeError(
            "Method requires being in cross-replica context, use "
            "get_replica_context().merge_call()"
        )
