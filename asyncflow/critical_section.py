"""`tf.CriticalSection` (TF1 graph mode): `execute(fn)` builds fn's ops so that they run
only while the section's mutex (ops/accumulator_ops.py's MutexV2) is held: MutexLock
before them (and after everything
they read from outside, so arguments are computed before the lock is taken),
ConsumeMutexLock after them, the results passed out behind it.  Steps of any threads
and sessions sharing the section run its bodies one at a time.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.ops import array_ops
from asyncflow.ops.accumulator_ops import consume_mutex_lock, mutex_lock, mutex_v2
from asyncflow.ops.control_flow_ordering import group
from asyncflow.ops.control_flow_ordering import tuple as _tuple
from asyncflow.ops.tensor_array_ops import TensorArray

__all__ = ["CriticalSection"]

CRITICAL_SECTIONS = "critical_sections"


def _identity(x):
    if isinstance(x, TensorArray):
        return x.identity()
    if isinstance(x, ops.Operation):
        return group(x)
    if x is None:
        return None
    return array_ops.identity(x)


class CriticalSection:
    """`tf.CriticalSection(name=None, shared_name=None)`: a mutex-guarded section.

    Raises (from execute):
      ValueError: fn uses this section itself (it would deadlock).
    """

    def __init__(self, name=None, shared_name=None, critical_section_def=None, import_scope=None):
        if critical_section_def is not None:
            raise ValueError("CriticalSection from a CriticalSectionDef is not supported")
        graph = ops.get_default_graph()
        with ops.name_scope(name, "CriticalSection", []) as scope:
            name = scope.rstrip("/")
            saved = graph._control_flow_context
            graph._control_flow_context = None  # (TF's init_scope: outside any loop)
            try:
                with graph.control_dependencies(None):
                    self._handle = mutex_v2(
                        shared_name=shared_name or name, name=name.rsplit("/", 1)[-1]
                    )
            finally:
                graph._control_flow_context = saved
        self._name = name
        ops.add_to_collections(CRITICAL_SECTIONS, self)

    @property
    def name(self) -> str:
        return self._handle.op.name

    def execute(self, fn, exclusive_resource_access=True, name=None):
        """fn() run while holding the section; returns fn's results (identities behind
        the lock's release)."""
        graph = ops.get_default_graph()
        with ops.name_scope(name, "critical_section_execute", []):
            lock = mutex_lock(self._handle)
            existing = set(graph.get_operations())
            with ops.control_dependencies([lock]):
                r = fn()
            created = [op for op in graph.get_operations() if op not in existing]
            if any(t is self._handle for op in created for t in op.inputs):
                raise ValueError(
                    "Attempting to lock a CriticalSection in which we are already running "
                    f"(signature={self.name}). This is illegal and may cause deadlocks."
                )
            self._lock_after_arguments(created, lock.op)
            r_flat = [_identity(x) for x in nest.flatten(r)]
            with ops.control_dependencies([x for x in r_flat if x is not None]):
                with ops.colocate_with(self._handle):
                    release = consume_mutex_lock(lock)
                flat = [x for x in nest.flatten(r)]
                tensors = [x for x in flat if isinstance(x, ops.Tensor)]
                if tensors:
                    joined = iter(_tuple(tensors))
                    flat = [next(joined) if isinstance(x, ops.Tensor) else x for x in flat]
                r = nest.pack_sequence_as(r, flat)
            with ops.control_dependencies([release]):
                return nest.map_structure(_identity, r)

    def _lock_after_arguments(self, created, lock_op) -> None:
        """The lock waits for every op outside fn that fn's ops read (TF's rule)."""
        created_set = set(created)
        args = {}
        for op in created:
            for src in [t.op for t in op.inputs] + list(op.control_inputs):
                if src not in created_set:
                    args[src._id] = src
        for op in lock_op.control_inputs:
            args.pop(op._id, None)
        for t in lock_op.inputs:
            args.pop(t.op._id, None)
        args.pop(lock_op._id, None)
        args.pop(self._handle.op._id, None)
        if args:
            lock_op._add_control_inputs(list(args.values()))
