"""The placer: which device runs each op (whitepaper §3.2.1, §4.3).

1. Colocation groups (union-find): ops joined by `colocate_with` (their "_class" attr)
   and ops that take a variable by reference (Assign, Scatter*, Apply*) with the
   variable, so state and its updates never sit on different devices.
2. Each group's constraint is the merge of its members' device specs; its feasible
   devices are those matching the constraint that have a kernel for every member.
   None feasible: `allow_soft_placement` drops the constraint, otherwise
   InvalidArgumentError "Cannot assign a device for operation ...", as TF.
3. Groups left with a choice are placed by the whitepaper's greedy simulation: walking
   ops in topological order, each group goes to the device where its first op would
   finish earliest, given when that device is free and what moving its inputs costs.

Invariant: once a session placed an op, its device never changes (state lives there);
later plans only place ops not seen before.
"""

from __future__ import annotations

import sys

import numpy as np

from asyncflow import device_spec, dtypes, errors
from asyncflow.graph import Operation

__all__ = ["Placer"]

# tf.debugging.set_log_device_placement's switch: sessions made while it is on log
# their placements as if their ConfigProto asked (TF 2.21 merges it so in graph mode).
LOG_ALL_PLACEMENTS = {"enabled": False}

# Static cost model (seconds): the loop's cost of one op and of one Send/Recv pair, and
# rough throughputs for arithmetic and copies on this kind of machine.
_OP_OVERHEAD = 1e-6
_TRANSFER_OVERHEAD = 20e-6
_FLOPS = 2e10
_BYTES_PER_S = 5e9


def _num_elements(t) -> int:
    n = t.shape.num_elements() if t.shape.ndims is not None else None
    return int(n) if n is not None else 1


def _nbytes(t) -> int:
    try:
        itemsize = np.dtype(t.dtype.as_numpy_dtype).itemsize
    except TypeError:
        itemsize = 8
    return _num_elements(t) * itemsize


def estimate_compute(op: Operation) -> float:
    """Seconds of compute `op` needs, from its static shapes and type."""
    if op.type in ("MatMul", "BatchMatMul", "BatchMatMulV2") and len(op.inputs) == 2:
        a = op.inputs[0].shape
        k = a[-1].value if a.ndims else None
        if op._attr("transpose_a") if "transpose_a" in op._attrs else False:
            k = a[-2].value if a.ndims and a.ndims >= 2 else None
        flops = 2.0 * _num_elements(op.outputs[0]) * (k or 1)
        return _OP_OVERHEAD + flops / _FLOPS
    elems = sum(_num_elements(t) for t in op.outputs) if op.outputs else 0
    return _OP_OVERHEAD + elems / _FLOPS * 4


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        parent = self.parent
        root = x
        while parent.get(root, root) is not root:
            root = parent[root]
        while parent.get(x, x) is not root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


class Placer:
    """Assigns ops of one graph to one session's devices, remembering its choices."""

    def __init__(
        self, devices, allow_soft_placement=False, log_device_placement=False, default_device=None
    ):
        """`default_device` (a partial spec, e.g. a cluster session's own task
        "/job:worker/replica:0/task:0") completes the constraint of every op that names
        no job, as TF's master places such ops on its own task."""
        self.devices = list(devices)
        self._default = (
            device_spec.DeviceSpec.from_string(default_device) if default_device else None
        )
        self.allow_soft = allow_soft_placement
        self.log = log_device_placement or LOG_ALL_PLACEMENTS["enabled"]
        self.assignment: dict[Operation, object] = {}
        self._flexible: set[Operation] = set()  # ops whose own device spec is ignored
        self._loc_index: dict | None = None  # `_later_members`: loc:@ names -> ops
        self._specs = [device_spec.DeviceSpec.from_string(d.name) for d in self.devices]

    def place(self, ops: list[Operation]) -> dict[Operation, object]:
        """Place every op of `ops` (topologically ordered) not placed before.

        Raises InvalidArgumentError when an explicit constraint cannot be met.
        """
        todo = [op for op in ops if op not in self.assignment]
        if not todo:
            return self.assignment
        refused = [op for op in todo if op.op_def.no_kernel_error is not None]
        if refused:
            # TF's placer meets ops without any kernel first, in graph order.
            first = min(refused, key=lambda op: op._id)
            raise first.op_def.no_kernel_error(first)
        if len(self.devices) == 1:
            dev = self.devices[0]
            for op in todo:
                self._check_feasible([op], [dev], op)
                self.assignment[op] = dev
                self._log(op, dev)
            return self.assignment
        groups = self._groups(todo)
        self._loc_index = None
        feasible = {root: self._feasible(members) for root, members in groups.items()}
        self._simulate(todo, groups, feasible)
        return self.assignment

    # -- colocation groups
    def _groups(self, todo: list[Operation]) -> dict:
        uf = _UnionFind()
        by_name = {op.name: op for op in todo}
        graph = todo[0].graph
        for op in todo:
            uf.find(op)
            for g in op._attrs.get("_class", ()):
                name = g.decode() if isinstance(g, bytes) else str(g)
                if name.startswith("loc:@"):
                    other = by_name.get(name[5:])
                    if other is None:
                        try:
                            other = graph.get_operation_by_name(name[5:])
                        except (KeyError, ValueError):
                            other = None
                    if other is not None:
                        uf.union(other, op)
            for k, t in enumerate(op._inputs):
                if _joins(op, k, t):
                    uf.union(_state_source(t), op)
        # A loop's primitives stay together on one device (its "home"); the body may
        # spread over others, which the partitioner gives control-loop state.
        from asyncflow.partition import _CF_PRIMS, static_frames

        if any(op.type in _CF_PRIMS for op in todo):
            frame_of, _ = static_frames(todo)
            first: dict = {}
            for op in todo:
                if op.type not in _CF_PRIMS:
                    continue
                frame = op._attrs["frame_name"] if op.type == "Enter" else frame_of[op]
                if frame is None:  # a cond's Switch/Merge: free to go anywhere
                    continue
                if frame in first:
                    uf.union(first[frame], op)
                else:
                    first[frame] = op
                if op.type != "LoopCond":
                    # Only the predicate's device decides the home: the Enters a loop
                    # body creates for outside values pick up the body's device scope.
                    self._flexible.add(op)
        groups: dict = {}
        for op in todo:
            groups.setdefault(uf.find(op), []).append(op)
        # A group containing an op placed by an earlier plan stays on its device.
        for members in groups.values():
            for m in members:
                for k, t in enumerate(m._inputs):
                    if _joins(m, k, t) and _state_source(t) in self.assignment:
                        members.append(_state_source(t))
                        break
        return groups

    def _feasible(self, members: list[Operation]) -> list:
        placed = {self.assignment[m] for m in members if m in self.assignment}
        if placed:
            return list(placed)
        spec = device_spec.DeviceSpec()
        constrained_by = None
        for m in members:
            if not m.device or m in self._flexible:
                continue
            s = device_spec.DeviceSpec.from_string(m.device)
            if not _compatible(spec, s):
                if self.allow_soft:
                    continue
                raise errors.InvalidArgumentError(
                    None,
                    m,
                    f"Cannot colocate nodes {constrained_by.name} and {m.name}: Cannot merge "
                    f"devices with incompatible ids: '{spec.to_string()}' and "
                    f"'{s.to_string()}'",
                )
            spec = spec.make_merged_spec(s)
            constrained_by = m
        if self._default is not None and spec.job is None:
            d = self._default
            spec = device_spec.DeviceSpec(
                d.job, d.replica, d.task, spec.device_type, spec.device_index
            )
        candidates = [d for d, ds in zip(self.devices, self._specs) if _matches(spec, ds)]
        # As TF places the whole graph: ops outside this plan that will have to join the
        # group (they take a member by reference, or ask to be colocated with one) rule
        # out the devices that cannot run them too, so that a variable initialised by
        # a first run is not stranded on a GPU its later ScatterUpdate cannot reach.
        later = self._later_members(members)
        with_kernels = [d for d in candidates if all(_supports(d, m) for m in (*members, *later))]
        if with_kernels:
            return self._preferred(spec, with_kernels, members)
        if self.allow_soft:
            relaxed = [
                d for d in self.devices if all(_supports(d, m) for m in (*members, *later))
            ] or [d for d in self.devices if all(_supports(d, m) for m in members)]
            # Prefer the requested type and index when only the job/replica/task failed.
            same_type = [d for d in relaxed if spec.device_type in (None, d.device_type)]
            if relaxed:
                return same_type or relaxed
        op = constrained_by or members[0]
        self._check_feasible(members, candidates, op, spec)
        return candidates  # unreachable: _check_feasible raised

    def _later_members(self, members: list[Operation]) -> list[Operation]:
        """The graph's ops not among `members` that are colocated with them: consumers
        of a member's reference (transitively) and ops whose `_class` names a member."""
        if not any(_is_state(t) for m in members for t in m._outputs):
            return []
        if self._loc_index is None:
            index: dict = {}
            for op in members[0].graph.get_operations():
                for g in op._attrs.get("_class", ()):
                    name = g.decode() if isinstance(g, bytes) else str(g)
                    if name.startswith("loc:@"):
                        index.setdefault(name[5:], []).append(op)
            self._loc_index = index
        seen = set(members)
        found: list[Operation] = []
        stack = list(members)
        while stack:
            op = stack.pop()
            nexts = list(self._loc_index.get(op.name, ()))
            for t in op._outputs:
                if _is_state(t):
                    nexts.extend(_state_consumers(t))
            for c in nexts:
                if c not in seen:
                    seen.add(c)
                    found.append(c)
                    stack.append(c)
        return [op for op in found if op not in self.assignment]

    def _preferred(self, spec, devices: list, members=()) -> list:
        """TF's device priority: a group whose constraint names no device type goes to
        the first device of the highest-priority type that runs it (GPU:0 before any
        CPU); devices without a priority (CPUs) stay open to the greedy simulation.

        A while loop may span devices: its TensorArray ops stay on the CPU and its math
        goes to the GPU, as in TF (the partitioner gives each device the loop's control
        state)."""
        if spec.device_type is not None:
            return devices
        best = max(getattr(d, "placement_priority", 0) for d in devices)
        if best <= 0:
            return devices
        return [next(d for d in devices if getattr(d, "placement_priority", 0) == best)]

    def _check_feasible(self, members, candidates, op, spec=None) -> None:
        spec = spec if spec is not None else device_spec.DeviceSpec.from_string(op.device or "")
        if spec.to_string() and not any(
            _matches(spec, s)
            for s in (device_spec.DeviceSpec.from_string(d.name) for d in candidates)
        ):
            if self.allow_soft:
                return
            available = ", ".join(d.name for d in self.devices)
            why = ""
            if spec.device_type is not None:
                from asyncflow.devices.registry import unavailable_reason

                reason = unavailable_reason(spec.device_type)
                why = f" ({reason})" if reason else ""
            raise errors.InvalidArgumentError(
                None,
                op,
                f"Cannot assign a device for operation {op.name}: Could not satisfy explicit "
                f"device specification '{spec.to_string()}' because no devices matching "
                f"that specification are registered in this process; available devices: "
                f"{available}{why}",
            )
        for m in members:
            missing = [d for d in candidates if not _supports(d, m)]
            if missing and len(missing) == len(candidates):
                raise errors.InvalidArgumentError(
                    None,
                    m,
                    f"Cannot assign a device for operation {m.name}: Could not satisfy "
                    f"explicit device specification '{spec.to_string()}' because no "
                    f"supported kernel for {missing[0].device_type} devices is available. "
                    f"Registered kernels: [{m.op_def.registered_kernels()}]",
                )

    # -- greedy simulation
    def _simulate(self, todo, groups, feasible) -> None:
        root_of = {}
        for root, members in groups.items():
            for m in members:
                root_of[m] = root
        free_at = {d: 0.0 for d in self.devices}
        done_at: dict[Operation, float] = {}
        chosen: dict = {}
        for op in todo:
            root = root_of[op]
            options = feasible[root]
            dev = chosen.get(root)
            if dev is None:
                if len(options) == 1:
                    dev = options[0]
                else:
                    dev = min(
                        options,
                        key=lambda d: (
                            self._finish(op, d, free_at, done_at),
                            self.devices.index(d),
                        ),
                    )
                chosen[root] = dev
            finish = self._finish(op, dev, free_at, done_at)
            free_at[dev] = finish
            done_at[op] = finish
            self.assignment[op] = dev
            self._log(op, dev)

    def _finish(self, op, dev, free_at, done_at) -> float:
        ready = 0.0
        for t in op._inputs:
            src = self.assignment.get(t.op)
            at = done_at.get(t.op, 0.0)
            if src is not None and src is not dev:
                at += _TRANSFER_OVERHEAD + _nbytes(t) / _BYTES_PER_S
            ready = max(ready, at)
        for c in op._control_inputs:
            ready = max(ready, done_at.get(c, 0.0))
        return max(ready, free_at[dev]) + estimate_compute(op)

    def _log(self, op, dev) -> None:
        if self.log:
            print(f"{op.name}: ({op.type}): {dev.name}", file=sys.stderr)


# Inputs that take a resource's handle (a queue, accumulator, barrier, stack, reader: a
# 0-d tensor holding the resource object).  TF colocates such consumers with the op that
# made the resource (its DT_RESOURCE edges); the handle cannot leave its process.
_HANDLE_ARGS = frozenset(["handle", "reader_handle", "resource"])
_handle_cache: dict = {}


def _handle_positions(op: Operation) -> frozenset:
    op_def = op.op_def
    pos = _handle_cache.get(op_def.name)
    if pos is None:
        found = []
        for k, a in enumerate(op_def.inputs):  # (flat positions: up to a list argument)
            spec = op_def.attrs.get(a.type_attr) if a.type_attr else None
            if a.number_attr or getattr(spec, "is_list", False):
                break
            if a.name in _HANDLE_ARGS:
                found.append(k)
        pos = _handle_cache[op_def.name] = frozenset(found)
    return pos


def _joins(op: Operation, k: int, t) -> bool:
    """Whether input `k` (tensor `t`) puts `op` in its producer's colocation group: an
    op joins the variable it takes by reference and the resource whose handle it takes
    (TF's ref and DT_RESOURCE edges)."""
    return t._is_ref or k in _handle_positions(op)


# Ops that pass a resource handle on unchanged (a loop's or a cond's primitives, an
# Identity): the handle is a host object, so they may sit on any device, and the ops
# behind them that use the handle join the resource itself.
_HANDLE_FORWARDING = frozenset(
    "Identity Enter Exit Switch Merge NextIteration RefIdentity".split()
)


def _state_source(t) -> Operation:
    """The op that made the state `t` refers to: a resource handle is followed back
    through the ops that forward it."""
    seen = set()
    while (
        t.dtype.base_dtype == dtypes.resource
        and t.op.type in _HANDLE_FORWARDING
        and t.op._inputs
        and t.op not in seen
    ):
        seen.add(t.op)
        t = t.op._inputs[0]
    return t.op


def _state_consumers(t) -> list[Operation]:
    """The ops that join the producer of `t` through it, past handle forwarders."""
    found, stack, seen = [], [t], set()
    while stack:
        x = stack.pop()
        for c in x._consumers:
            if c in seen:
                continue
            seen.add(c)
            if x.dtype.base_dtype == dtypes.resource and c.type in _HANDLE_FORWARDING:
                stack.extend(o for o in c._outputs if o.dtype.base_dtype == dtypes.resource)
            elif _joins_any(c, x):
                found.append(c)
    return found


def _is_state(t) -> bool:
    """A variable reference or a resource handle: what colocates its consumers."""
    return t._is_ref or t.dtype.base_dtype == dtypes.resource


def _joins_any(op: Operation, t) -> bool:
    return any(_joins(op, k, x) for k, x in enumerate(op._inputs) if x is t)


def _supports(device, op: Operation) -> bool:
    """Whether `device` runs `op`: a kernel for it, and (where the device says which,
    as a GPU does: no strings in device memory) its dtypes."""
    supports_op = getattr(device, "supports_op", None)
    if supports_op is not None:
        return supports_op(op)
    return device.supports(op.op_def)


def _compatible(a: device_spec.DeviceSpec, b: device_spec.DeviceSpec) -> bool:
    for f in ("job", "replica", "task", "device_type", "device_index"):
        x, y = getattr(a, f), getattr(b, f)
        if x is not None and y is not None and x != y:
            return False
    return True


def _matches(spec: device_spec.DeviceSpec, dev: device_spec.DeviceSpec) -> bool:
    """Whether a concrete device satisfies a (partial) spec."""
    for f in ("job", "replica", "task", "device_type", "device_index"):
        want = getattr(spec, f)
        if want is not None and want != getattr(dev, f):
            return False
    return True
