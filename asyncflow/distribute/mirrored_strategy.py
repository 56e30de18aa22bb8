"""MirroredStrategy and OneDeviceStrategy over the runtime's local devices.

MirroredStrategy builds one copy of the model per device (a replica) in one graph.
`run(fn)` calls `fn` on one Python thread per replica, as TF does, because a replica may
stop half way in `merge_call` until every replica reaches it; the threads take turns
(never two building at once), so the graph sees one builder at a time.  While they run,
the graph's building stacks are thread-local and each replica thread starts from the
caller's name scope, variable scope and devices, plus its own device and "replica_<i>"
name scope.

Invariants:
- Exactly one of the caller and the replica threads runs at any time; handing over is
  `should_run.set()` to the thread that runs next, then waiting on its `has_paused`.
- Variables made in a replica are made once, by replica 0 (a MirroredVariable over every
  device); the other replicas get the same variable back, matched by creation order.
"""

from __future__ import annotations

import contextlib
import re
import threading

from asyncflow import graph as ops
from asyncflow import var_scope
from asyncflow.device_spec import DeviceSpec
from asyncflow.distribute import context, distribute_lib
from asyncflow.distribute import cross_device_ops as cross_device_ops_lib
from asyncflow.distribute import values as values_lib
from asyncflow.graph import GraphKeys
from asyncflow.variables import VariableAggregation, VariableSynchronization

__all__ = ["MirroredStrategy", "OneDeviceStrategy"]


def canonical_device(name: str) -> str:
    """'/cpu:1' (or '/device:CPU:1', 'GPU:0', ...) as TF's '/replica:0/task:0/device:CPU:1'.

    Raises:
      ValueError: not a device name (DeviceSpec's message).
    """
    spec = DeviceSpec.from_string(str(name))
    kind = (spec.device_type or "CPU").upper()
    return f"/replica:0/task:0/device:{kind}:{spec.device_index or 0}"


def _default_devices() -> tuple:
    from asyncflow import device_lib

    gpus = [d.name for d in device_lib.list_local_devices() if d.device_type == "GPU"]
    return tuple(canonical_device(g.split("/device:")[-1]) for g in gpus) or (
        "/replica:0/task:0/device:CPU:0",
    )


def _validate_aggregation(aggregation, name) -> VariableAggregation:
    if aggregation is None:
        return VariableAggregation.NONE
    names = {a.name for a in VariableAggregation}
    if getattr(aggregation, "name", None) not in names:
        raise ValueError(f"Invalid variable aggregation mode: {aggregation} for variable: {name}")
    return VariableAggregation[aggregation.name]


class _MirroredExtended(distribute_lib.StrategyExtended):
    def __init__(self, container_strategy, devices, cross_device_ops):
        super().__init__(container_strategy)
        self._devices = tuple(canonical_device(d) for d in devices)
        if len(set(self._devices)) != len(self._devices):
            raise AssertionError(f"No duplicates allowed in `devices` argument: {self._devices}")
        self._cross_device_ops = cross_device_ops or cross_device_ops_lib.ReductionToOneDevice()
        self._host_device = "/replica:0/task:0/device:CPU:0"

    # -- variables --------------------------------------------------------------------
    def _variable_creator(self, next_creator, **kwargs):
        # The creator stack is the graph's, shared by the replica threads: a replica's
        # variable is made by replica 0 and handed to the others here.
        thread = threading.current_thread()
        if isinstance(thread, _ReplicaThread) and thread.run_.extended is self:
            return thread.shared_create(
                lambda **kw: self._create_mirrored(next_creator, **kw), kwargs
            )
        return self._create_mirrored(next_creator, **kwargs)

    def _create_mirrored(self, next_creator, **kwargs):
        from asyncflow.ops import array_ops

        collections = kwargs.pop("collections", None)
        collections = [GraphKeys.GLOBAL_VARIABLES] if collections is None else list(collections)
        synchronization = kwargs.get("synchronization") or VariableSynchronization.AUTO
        on_read = synchronization == VariableSynchronization.ON_READ
        aggregation = _validate_aggregation(kwargs.get("aggregation"), kwargs.get("name"))
        if not on_read:
            synchronization = VariableSynchronization.ON_WRITE
        kwargs["synchronization"] = synchronization
        kwargs["aggregation"] = aggregation
        kwargs["use_resource"] = True
        kwargs["collections"] = []
        kwargs.pop("caching_device", None)
        created: list = []
        for i, device in enumerate(self._devices):
            with ops.device(device):
                if i > 0:
                    primary = created[0]
                    kwargs["name"] = f"{primary.op.name}/replica_{i}/"
                    kwargs["initial_value"] = lambda p=primary: array_ops.identity(p.initial_value)
                created.append(next_creator(**kwargs))
        kind = values_lib.SyncOnReadVariable if on_read else values_lib.MirroredVariable
        result = kind(self._container_strategy(), created, aggregation)
        graph = ops.get_default_graph()
        if kwargs.get("trainable"):
            # As TF: asked for trainable=True (get_variable always is), the mirrored
            # variable is the trainable one; left to default, its copies are.
            trainable = graph.get_collection_ref(GraphKeys.TRAINABLE_VARIABLES)
            trainable[:] = [t for t in trainable if not any(t is c for c in created)]
            if GraphKeys.TRAINABLE_VARIABLES not in collections:
                collections.append(GraphKeys.TRAINABLE_VARIABLES)
        graph.add_to_collections(collections, result)
        return result

    # -- replicas ---------------------------------------------------------------------
    def _call_for_each_replica(self, fn, args, kwargs):
        return _ReplicaRun(self, fn, args, kwargs).run()

    def _merge_call(self, replica_id, merge_fn, args, kwargs):
        thread = threading.current_thread()
        if not isinstance(thread, _ReplicaThread):
            raise RuntimeError("merge_call called outside the replica's own thread")
        return thread.merge(merge_fn, args, kwargs)

    # -- reductions and updates -------------------------------------------------------
    def _reduce(self, reduce_op, value):
        if not isinstance(value, values_lib.DistributedValues):
            return _reduce_plain(reduce_op, value, self._container_strategy())
        mirrored = self.reduce_to(reduce_op, value, self._host_device)
        return mirrored.values[0]

    def reduce_to(self, reduce_op, value, destinations, options=None):
        """`value` reduced over the replicas, copied to `destinations` (Mirrored).

        Raises:
          RuntimeError: called in a replica (use merge_call).
        """
        context.require_cross_replica(self._container_strategy())
        reduce_op = distribute_lib.ReduceOp.as_reduce_op(reduce_op)
        if not isinstance(value, values_lib.DistributedValues):
            value = values_lib.PerReplica([value] * len(self._devices))
        return self._cross_device_ops.reduce(reduce_op, value, destinations)

    def batch_reduce_to(self, reduce_op, value_destination_pairs, options=None) -> list:
        context.require_cross_replica(self._container_strategy())
        return [self.reduce_to(reduce_op, v, d) for v, d in value_destination_pairs]

    def update(self, var, fn, args=(), kwargs=None, group=True):
        """`fn(copy, *args)` for every copy of `var`, on its device (each argument's
        part for that replica); returns the results, grouped if `group`.  In a replica,
        `fn` runs once, on that replica's copy (TF's)."""
        kwargs = kwargs or {}
        if distribute_lib.get_replica_context() is not None and distribute_lib.has_strategy():
            local = var.get() if isinstance(var, values_lib.DistributedVariable) else var
            with ops.colocate_with(local.op):
                return fn(local, *args, **kwargs)
        if not isinstance(var, values_lib.DistributedVariable):
            with ops.colocate_with(var.op):
                result = fn(var, *args, **kwargs)
            return result
        results = []
        strategy = self._container_strategy()
        for i, v in enumerate(var.values):
            with (
                ops.device(v.device),
                context.push_update_context(strategy, v.device),
                ops.name_scope(f"update_{i}"),
            ):
                results.append(
                    fn(
                        v,
                        *values_lib.select_replica(i, args),
                        **values_lib.select_replica(i, kwargs),
                    )
                )
        return _update_result(strategy, results, group)

    def update_non_slot(self, colocate_with, fn, args=(), kwargs=None, group=True):
        with ops.device(self._devices[0]):
            result = fn(*args, **(kwargs or {}))
        return result

    def read_var(self, v):
        from asyncflow.ops import array_ops

        return array_ops.identity(v.values[0] if hasattr(v, "values") else v)

    def value_container(self, value):
        return getattr(value, "_distributed_container", value)

    def colocate_vars_with(self, colocate_with_variable):
        return contextlib.nullcontext()


def _update_result(strategy, results, group):
    if not group:
        return values_lib.regroup(results, values_lib.Mirrored)
    return values_lib.regroup(results, _grouped_mirrored)


def _grouped_mirrored(parts):
    """TF's grouped update result: every copy's value, read after all copies are
    written (a group of the ops when the results are not tensors)."""
    from asyncflow.ops import array_ops, control_flow_ordering

    if len(parts) == 1:
        return values_lib.Mirrored(parts)
    done = control_flow_ordering.group(*parts)
    if not all(isinstance(p, ops.Tensor) or hasattr(p, "_as_graph_element") for p in parts):
        return done
    with_dep = []
    for p in parts:
        with ops.device(p.device), ops.control_dependencies([done]):
            with_dep.append(array_ops.identity(p))
    return values_lib.Mirrored(with_dep)


def _reduce_plain(reduce_op, value, strategy):
    """A value that is not per-replica: MEAN (or one replica) is the value itself.

    Raises:
      ValueError: SUM over several replicas (TF's).
    """
    if reduce_op is distribute_lib.ReduceOp.MEAN or strategy.num_replicas_in_sync == 1:
        return value
    raise ValueError(
        f"A non-DistributedValues value {value} cannot be reduced with the given reduce op "
        f"{reduce_op}."
    )


# -- the replica threads --------------------------------------------------------------------


class _Aborted(BaseException):
    """Raised in a replica thread parked in merge_call when another replica failed."""


class _ReplicaThread(threading.Thread):
    def __init__(self, run_, replica_id: int):
        super().__init__(name=f"asyncflow-replica-{replica_id}", daemon=True)
        self.run_ = run_
        self.replica_id = replica_id
        self.should_run = threading.Event()
        self.has_paused = threading.Event()
        self.done = False
        self.aborted = False
        self.result = None
        self.error: BaseException | None = None
        self.merge_request = None  # (merge_fn, args, kwargs, name scope, var scope)
        self.merge_result = None
        self.created: dict = {}  # canonical name -> how many of replica 0's were taken

    def run(self) -> None:
        self.should_run.wait()
        self.should_run.clear()
        if self.aborted:  # another replica failed before this one began
            self.done = True
            return
        try:
            with self.run_.replica_scopes(self.replica_id):
                fn, args, kwargs = self.run_.fn, self.run_.args, self.run_.kwargs
                self.result = fn(
                    *values_lib.select_replica(self.replica_id, args),
                    **values_lib.select_replica(self.replica_id, kwargs),
                )
        except _Aborted:
            pass
        except BaseException as e:  # handed to the caller's thread, which re-raises it
            self.error = e
        finally:
            self.done = True
            self.has_paused.set()

    def shared_create(self, create, kwargs):
        """Replica 0 makes the variable; replica i gets the one replica 0 made under the
        same name, in the same order.

        Raises:
          RuntimeError: replica 0 made no such variable.
        """
        store = self.run_.store
        key = _canonical_variable_name(kwargs.get("name"))
        if self.replica_id == 0:
            v = create(**kwargs)
            store.setdefault(key, []).append(v)
            return v
        index = self.created.get(key, 0)
        try:
            v = store[key][index]
        except (KeyError, IndexError):
            raise RuntimeError(
                f"Tried to create variable {kwargs.get('name')} with mismatching name on "
                f"device {self.replica_id}"
            ) from None
        self.created[key] = index + 1
        return v

    def merge(self, merge_fn, args, kwargs):
        graph = ops.get_default_graph()
        scope = var_scope.get_variable_scope()
        self.merge_request = (merge_fn, args, kwargs, graph.get_name_scope(), scope)
        self.has_paused.set()
        self.should_run.wait()
        self.should_run.clear()
        if self.aborted:
            raise _Aborted()
        return values_lib.select_replica(self.replica_id, self.merge_result)


class _ReplicaRun:
    """One `call_for_each_replica`: the threads, the hand-overs and the merges."""

    def __init__(self, extended, fn, args, kwargs):
        self.extended = extended
        self.strategy = extended._container_strategy()
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.graph = ops.get_default_graph()
        name_scope = self.graph.get_name_scope()
        self.name_scope = name_scope + "/" if name_scope else ""
        self.var_scope = var_scope.get_variable_scope()
        self.device_stack = list(self.graph._device_stack)
        self.store: dict = {}  # canonical name -> variables made by replica 0, in order

    @contextlib.contextmanager
    def replica_scopes(self, replica_id: int):
        graph = self.graph
        graph._stacks.name_stack = self.name_scope.rstrip("/")
        graph._stacks.device_stack = list(self.device_stack)
        graph._stacks.control_stack = []
        graph._stacks.colocation_stack = []
        with contextlib.ExitStack() as stack:
            stack.enter_context(graph.as_default())
            replica = distribute_lib.ReplicaContext(self.strategy, replica_id)
            stack.enter_context(distribute_lib.push_replica_context(self.strategy, replica))
            stack.enter_context(var_scope.variable_scope(self.var_scope, reuse=replica_id > 0))
            # Entering a variable scope object also opens its name scope; the replica's
            # ops belong in the caller's name scope (plus "replica_<i>/"), so go there.
            replica_scope = self.name_scope + (f"replica_{replica_id}/" if replica_id else "")
            stack.enter_context(graph.name_scope(replica_scope or None))
            stack.enter_context(graph.device(self.extended._devices[replica_id]))
            yield

    # -- the caller's side ----------------------------------------------------------------
    def run(self):
        graph = self.graph
        saved = graph._stacks
        thread_local = isinstance(saved, ops._ThreadLocalStacks)
        if not thread_local:
            graph.switch_to_thread_local()
        threads = [_ReplicaThread(self, i) for i in range(len(self.extended._devices))]
        try:
            for t in threads:
                t.start()
            self._step(threads)
            while not all(t.done for t in threads):
                if any(t.done for t in threads):
                    raise RuntimeError(
                        "Some replicas made a different number of "
                        "replica_context().merge_call() calls."
                    )
                self._merge(threads)
                self._step(threads)
        finally:
            for t in threads:
                if not t.done:
                    t.aborted = True
                    t.should_run.set()
                t.join()
            if not thread_local:
                graph._stacks = saved
        return values_lib.regroup([t.result for t in threads])

    def _step(self, threads) -> None:
        for t in threads:
            if t.done:
                continue
            t.has_paused.clear()
            t.should_run.set()
            t.has_paused.wait()
            if t.error is not None:
                raise t.error

    def _merge(self, threads) -> None:
        requests = [t.merge_request for t in threads]
        merge_fn, _, _, name_scope, scope = requests[0]
        args = values_lib.regroup([r[1] for r in requests])
        kwargs = values_lib.regroup([r[2] for r in requests])
        # As TF: the merge runs in replica 0's variable scope and name scope.
        with (
            distribute_lib.push_cross_replica_context(self.strategy),
            var_scope.variable_scope(scope),
            self.graph.name_scope(name_scope + "/" if name_scope else None),
        ):
            result = merge_fn(self.strategy, *args, **kwargs)
        for t in threads:
            t.merge_result = result


def _canonical_variable_name(name) -> str:
    if name is None:
        return "Variable"
    return re.sub(r"_\d+$", "", re.sub(r"replica_\d+/", "", str(name)))


class MirroredStrategy(distribute_lib.Strategy):
    """Synchronous training on the devices of this process: one replica per device,
    variables mirrored on every device and updated with the replicas' summed gradients.

    Raises (at construction):
      ValueError: an empty or duplicated `devices`, or a name that is not a device.
    """

    def __init__(self, devices=None, cross_device_ops=None):
        if not devices:
            devices = _default_devices()
        super().__init__(_MirroredExtended(self, devices, cross_device_ops))


class _OneDeviceExtended(_MirroredExtended):
    def _variable_creator(self, next_creator, **kwargs):
        kwargs["use_resource"] = True  # as TF's strategies
        with ops.device(self._devices[0]):
            return next_creator(**kwargs)

    def _call_for_each_replica(self, fn, args, kwargs):
        strategy = self._container_strategy()
        replica = distribute_lib.ReplicaContext(strategy, 0)
        with distribute_lib.push_replica_context(strategy, replica), ops.device(self._devices[0]):
            return fn(*args, **kwargs)

    def _merge_call(self, replica_id, merge_fn, args, kwargs):
        strategy = self._container_strategy()
        with distribute_lib.push_cross_replica_context(strategy):
            return merge_fn(strategy, *args, **kwargs)

    def _reduce(self, reduce_op, value):
        from asyncflow.ops import array_ops

        with ops.device(self._devices[0]):
            return array_ops.identity(value)

    def reduce_to(self, reduce_op, value, destinations, options=None):
        return value

    def batch_reduce_to(self, reduce_op, value_destination_pairs, options=None) -> list:
        return [v for v, _ in value_destination_pairs]

    def update(self, var, fn, args=(), kwargs=None, group=True):
        with ops.colocate_with(var.op):
            return fn(var, *args, **(kwargs or {}))


class OneDeviceStrategy(distribute_lib.Strategy):
    """Everything on one device: variables and the (single) replica's ops."""

    def __init__(self, device):
        super().__init__(_OneDeviceExtended(self, [device], None))
