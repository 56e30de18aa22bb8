"""Collective ops: CollectiveReduce, CollectiveGather, CollectiveBcastSend/Recv and their
V2 forms (keys and sizes as tensors), CollectiveAllToAllV2, CollectiveReduceScatterV2
and CollectiveAssignGroupV2; CollectiveReduceV3 and CollectiveAllToAllV3 on a
CollectiveInitializeCommunicator's communicator — a group of `group_size` devices,
possibly on different tasks and in different sessions, each running the op with the
same `group_key` and `instance_key` (a V3 op: the same communicator group), combine
their inputs and each get the result.

How members meet: the k-th execution of an instance on a device (counted per device)
pairs with the k-th on every other member, as TF's collectives pair executions in step
order.  Every member sends its part to the group's leader — in a cluster the task
chief:0 (worker:0 without a chief), as TF's default `collective_group_leader`; in a
plain session the process itself — which combines the parts in rank order (members'
device names sorted: task, then device; a communicator's ranks for V3 ops) and sends
each member its result.  Summing in one order on one task gives every member the same
bits.  Across tasks, parts and results travel as PUSH frames of the task services
(`collective;` keys); `deliver` is what a service calls with one.

An execution that gives up before its group completes (its timeout passed; in a plain
session also its step aborted or cancelled) did not happen: its part is withdrawn and
its number k is used again by the device's next execution, so the members stay in
step.  With the leader on another task the withdrawal asks the leader, which drops the
part unless the group has completed meanwhile; the device's next execution waits for
that answer.  On a task, a member whose step fails (or is aborted) while it is in
flight aborts its execution for the whole group instead, as TF's CollectiveExecutor
StartAbort does, unless the group completed meanwhile: the leader fails the members
waiting in it, and those still to come, with CancelledError naming the failure (a
withdrawal would leave them waiting for, or pairing with, this task's next step).

A step that fails before one of its members ran (its input failed, or never came):
- on a task, that member's execution (its device's next number) is aborted for the
  whole group: the leader fails the members waiting in it, and those still to come,
  with CancelledError, so none pairs with the failed task's next step (and a member
  waiting in a later instance of the same step is released, not left to deadlock with
  the next step's first instance).  While a withdrawal of that instance waits for its
  answer (which says the next number), the abort waits for it too.  Its keys: a V1
  op's attrs, a V2 op's constant inputs, else the key inputs that arrived in the
  failed step, else those of the member's last execution on the task (none known:
  nothing is aborted, and the others wait until their timeouts); a V3 member is not
  followed.
- in a plain session, as TF 2.21 does: a member that gave up, or a V1 member that was
  about to run (its inputs did not wait on the failure), spoils the session's
  collectives; its later collective kernels fail at once with the member's error class
  (CancelledError, or DeadlineExceededError for a timeout), "Collective ops is aborted
  by: ...".  A fresh session runs them again.  (Its members are all in the step, so withdrawal
  alone keeps them in step.)

Invariant: a member's waiter is registered before its part is sent, so a result never
arrives before the future waiting for it.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import time
import weakref
from collections import OrderedDict

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.device_spec import DeviceSpec
from asyncflow.graph import constant_shape, constant_value
from asyncflow.kernel_api import current_step
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = ["deliver", "local_collectives"]

_REDUCE_TYPES = TypeConstraint(["bfloat16", "float32", "float16", "float64", "int32", "int64"])
_GATHER_TYPES = TypeConstraint(["float32", "float16", "float64", "int32", "int64"])
_BCAST_TYPES = TypeConstraint(["bool", "float32", "float16", "float64", "int32", "int64"])
_MERGE_OPS = ("Min", "Max", "Mul", "Add")
_FINAL_OPS = ("Id", "Div")
_COMMON = {"communication_hint": "auto", "timeout_seconds": 0.0}
_KEYS = {"group_size": REQUIRED, "group_key": REQUIRED, "instance_key": REQUIRED}
# How long a member's next execution waits for the leader's answer to a withdrawal.
_WITHDRAW_WAIT = 10.0
# How many aborted executions a leader remembers until all their members are heard
# from, and how many steps a collective remembers it has not run yet (a step that
# skips it in a branch and succeeds leaves its mark behind).
_ABORTED_KEPT = 1024
# How long (seconds) a leader remembers an aborted execution whose members are not all
# heard from.  TF forgets a step's collective state when the step is cleaned up; the
# leader does not see a member's steps, so a member not heard from for this long is
# taken as gone (its task failed, or stopped running the collective).  One that comes
# back later is an absent member, as in TF: its group waits for the others until
# their timeouts (it cannot pair with another step's data: the others' numbers moved
# on past the aborted one).
_ABORTED_TTL = 600.0
_UNRUN_KEPT = 64
_ABORTED = "Collective ops is aborted by: "


def _check_choice(op, attr: str, allowed: tuple) -> None:
    value = op._attr(attr)
    value = value.decode() if isinstance(value, bytes) else value
    if value not in allowed:
        choices = ", ".join(f'"{a}"' for a in allowed)
        raise ValueError(
            f"Attr '{attr}' of '{op.type}' Op passed string '{value}' not in: {choices}."
        )


def _reduce_shape(op):
    _check_choice(op, "merge_op", _MERGE_OPS)
    _check_choice(op, "final_op", _FINAL_OPS)
    return [op.inputs[0].shape]


def _gather_shape(op):
    shape = op.inputs[0].shape
    if shape.ndims is None or shape.ndims == 0:
        return [tensor_shape.unknown_shape()]
    first = shape[0].value
    size = op._attr("group_size") if "group_size" in op._attrs else None
    dims = [None if first is None or size is None else first * size]
    return [tensor_shape.TensorShape(dims + [d.value for d in shape[1:]])]


def _v2_gather_shape(op):
    shape = op.inputs[0].shape
    if shape.ndims is None or shape.ndims == 0:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape([None] + [d.value for d in shape[1:]])]


CollectiveReduce = register_op(
    "CollectiveReduce",
    inputs=["input: T"],
    outputs=["data: T"],
    attrs={
        "T": _REDUCE_TYPES,
        **_KEYS,
        "merge_op": REQUIRED,
        "final_op": REQUIRED,
        "subdiv_offsets": REQUIRED,
        "wait_for": [],
        **_COMMON,
    },
    shape_fn=_reduce_shape,
    stateful=True,
    is_async=True,
)
CollectiveReduceV2 = register_op(
    "CollectiveReduceV2",
    inputs=[
        "input: T",
        "group_size: int32",
        "group_key: int32",
        "instance_key: int32",
        "ordering_token: Nordering_token * resource",
    ],
    outputs=["data: T"],
    attrs={
        "T": _REDUCE_TYPES,
        "merge_op": REQUIRED,
        "final_op": REQUIRED,
        **_COMMON,
        "is_stateless": False,
        "Nordering_token": 0,
        "max_subdivs_per_device": -1,
    },
    shape_fn=_reduce_shape,
    stateful=True,
    is_async=True,
)
CollectiveGather = register_op(
    "CollectiveGather",
    inputs=["input: T"],
    outputs=["data: T"],
    attrs={"T": _GATHER_TYPES, **_KEYS, "shape": REQUIRED, **_COMMON},
    shape_fn=_gather_shape,
    stateful=True,
    is_async=True,
)
CollectiveGatherV2 = register_op(
    "CollectiveGatherV2",
    inputs=[
        "input: T",
        "group_size: int32",
        "group_key: int32",
        "instance_key: int32",
        "ordering_token: Nordering_token * resource",
    ],
    outputs=["data: T"],
    attrs={"T": _GATHER_TYPES, **_COMMON, "is_stateless": False, "Nordering_token": 0},
    shape_fn=_v2_gather_shape,
    stateful=True,
    is_async=True,
)
CollectiveBcastSend = register_op(
    "CollectiveBcastSend",
    inputs=["input: T"],
    outputs=["data: T"],
    attrs={"T": _BCAST_TYPES, **_KEYS, "shape": REQUIRED, **_COMMON},
    shape_fn=lambda op: [tensor_shape.as_shape(op._attr("shape"))],
    stateful=True,
    is_async=True,
)
CollectiveBcastRecv = register_op(
    "CollectiveBcastRecv",
    outputs=["data: T"],
    attrs={"T": _BCAST_TYPES, **_KEYS, "shape": REQUIRED, **_COMMON},
    shape_fn=lambda op: [tensor_shape.as_shape(op._attr("shape"))],
    stateful=True,
    is_async=True,
)
CollectiveBcastSendV2 = register_op(
    "CollectiveBcastSendV2",
    inputs=["input: T", "group_size: int32", "group_key: int32", "instance_key: int32"],
    outputs=["data: T"],
    attrs={"T": _BCAST_TYPES, **_COMMON},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
    is_async=True,
)
CollectiveBcastRecvV2 = register_op(
    "CollectiveBcastRecvV2",
    inputs=["group_size: int32", "group_key: int32", "instance_key: int32", "shape: Tshape"],
    outputs=["data: T"],
    attrs={"T": _BCAST_TYPES, "Tshape": TypeConstraint(["int32", "int64"], "int32"), **_COMMON},
    shape_fn=lambda op: [_shape_from_tensor(op.inputs[3])],
    stateful=True,
    is_async=True,
)
for _name in (
    "CollectiveReduce",
    "CollectiveReduceV2",
    "CollectiveGather",
    "CollectiveGatherV2",
    "CollectiveBcastSend",
    "CollectiveBcastRecv",
    "CollectiveBcastSendV2",
    "CollectiveBcastRecvV2",
):
    NotDifferentiable(_name)


def _shape_from_tensor(t):
    return constant_shape(t)


# -- where the members meet -----------------------------------------------------------


class _Collectives:
    """The collective state of one task (a task service) or of a process's plain
    sessions on one event loop: execution counters, the parts gathered here as the
    leader, and the members' waiters."""

    def __init__(self, service):
        self.service = service
        # (device, group, instance) -> executions numbered so far, and the numbers
        # given back by executions that gave up (a heap)
        self.counters: dict[tuple, int] = {}
        self.free: dict[tuple, list] = {}
        # A member whose leader is on another task and that gave up: its withdrawal
        # waits for the leader's answer, (key, device) -> (count key, future), and the
        # device's next execution of that instance waits for it (count key -> futures).
        self.withdrawals: dict[tuple, tuple] = {}
        self.pending: dict[tuple, list] = {}
        # The aborts of failed steps' unrun members that wait for those answers (which
        # number is next): count key -> callables, called as the last answer comes.
        self.deferred: dict[tuple, list] = {}
        self.parts: dict[str, dict] = {}  # instance -> {device: (what, value)}
        self.waiting: dict[tuple, asyncio.Future] = {}  # (instance, device) -> future
        # (the leader) executions aborted by a member whose step failed before it ran
        # them: key -> (error, size, members heard from, when it is forgotten); the
        # others' parts get the error, now or when they come.  (In abort order, so in
        # order of expiry.)
        self.aborted: OrderedDict[str, tuple] = OrderedDict()
        # (plain sessions) session -> (error, serial of the step that spoiled it): a
        # collective of the session gave up, and its later collectives fail, as TF's.
        self.spoiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # -- the member's side
    async def _take_slot(self, count_key) -> int:
        """The execution number of this device's next execution of an instance: the
        lowest one given back by an execution that gave up, else the next unused.
        Withdrawals still waiting for the leader's answer are waited for first (at
        most `_WITHDRAW_WAIT` seconds each; unanswered, the number stays used)."""
        for fut in list(self.pending.get(count_key, ())):
            try:
                await asyncio.wait_for(asyncio.shield(fut), _WITHDRAW_WAIT)
            except TimeoutError:  # no answer (the leader is gone?): the number stays used
                for wkey, (_, f) in list(self.withdrawals.items()):
                    if f is fut:
                        self.withdrawn(wkey[0], wkey[1], False)
        return self._next_number(count_key)

    def _next_number(self, count_key) -> int:
        free = self.free.get(count_key)
        if free:
            k = heapq.heappop(free)
            if not free:
                del self.free[count_key]
            return k
        k = self.counters.get(count_key, 0)
        self.counters[count_key] = k + 1
        return k

    def spoil(self, session, error, serial) -> None:
        """A collective of plain session `session` gave up in step `serial` (or was
        about to run when it failed): its later collectives fail with `error`."""
        if session not in self.spoiled:
            self.spoiled[session] = (error, serial)

    def _give_back(self, count_key, key: str, device: str) -> None:
        """An execution that gave up before its group completed (its step aborted, it
        timed out) did not happen: its part is dropped and its number is used again
        by the device's next execution, so the members stay in step."""
        parts = self.parts.get(key)
        if parts is not None:
            parts.pop(device, None)
            if not parts:
                del self.parts[key]
        k = int(key.rsplit(";", 1)[1])
        heapq.heappush(self.free.setdefault(count_key, []), k)

    async def run(self, ctx, what, size, group, instance, value, *, once: bool = False):
        """This device's part of one execution; the combined result.

        `once`: the group meets once only (its key names a step): its numbering is
        forgotten when the execution ends.
        """
        if size <= 0:
            raise errors.InvalidArgumentError(
                None, None, f"group_size must be positive integer but got {size}"
            )
        step = current_step()
        serial = None if step is None else step.serial
        session = None if once or self.service is not None else ctx.session
        spoiled = None if session is None else self.spoiled.get(session)
        if spoiled is not None and spoiled[1] != serial:
            raise type(spoiled[0])(
                None, None,
                f"{_ABORTED}{spoiled[0].message}\nThe error could be from a previous "
                "operation. Open a new session to reset.",
            )  # fmt: skip
        device = ctx.device.name
        count_key = (device, group, instance)
        if not once and isinstance(instance, int):  # (what a failed step's member falls
            ctx.kernel_state["last_keys"] = (size, group, instance)  # back on: _step_keys)
        k = await self._take_slot(count_key)
        # (Its number taken, the member is in flight: from here its own end sees to its
        # execution, not _step_failed; cancelled while it waited for a withdrawal's
        # answer, it took no number, and _step_failed aborts the one it would have.)
        unrun = ctx.kernel_state.get("unrun")
        if unrun:
            unrun.pop(serial, None)
        key = f"{group};{instance};{k}"
        future = asyncio.get_running_loop().create_future()
        self.waiting[(key, device)] = future
        # (TF's words: a V2 member, cancelled as its group forms, says "group")
        said = "op cancelled" if "instance_key" in ctx.attrs else "group is cancelled"
        gave_up = errors.CancelledError(None, None, said)
        cancelled = False
        try:
            self._send_part(key, size, what, device, value)
            timeout = float(ctx.attrs.get("timeout_seconds") or 0)
            if timeout > 0:
                try:
                    return await asyncio.wait_for(future, timeout)
                except TimeoutError:
                    gave_up = errors.DeadlineExceededError(
                        None, None, "Collective has timed out waiting for other workers."
                    )
                    raise gave_up from None
            return await future
        except (asyncio.CancelledError, GeneratorExit):
            # Its step failed, or was aborted.  (GeneratorExit: closed in wait_for's
            # last wait, which follows the cancellation: by the executor past
            # CLEANUP_GRACE_S, or a loop going away; the same abort for the group.)
            cancelled = True
            raise
        finally:
            self.waiting.pop((key, device), None)
            completed = future.done() and not future.cancelled()
            if not completed and session is not None:
                self.spoil(session, gave_up, serial)
            in_flight = cancelled and not once and self.service is not None
            if not completed and in_flight and step is not None:
                # On a task, its step failed while the member was in flight: as TF's
                # CollectiveExecutor::StartAbort, the execution is aborted for the whole
                # group (not withdrawn: the others, waiting or to come, would wait for
                # this device's next step, or pair with it).  Its number stays used.
                step.on_failure(functools.partial(self._abort_in_flight, key, size, device))
            elif not completed and self._leader() is None:
                # Given up (timed out; in a plain session also cancelled with its
                # step) before the group completed: completion here is synchronous
                # (add_part), so the group did not complete.
                self._give_back(count_key, key, device)
            elif not completed and not once:
                # The leader is on another task: it says whether the group was still
                # incomplete (our part withdrawn: the number is given back) or not.
                self._withdraw(count_key, key, device)
            if once:
                self.counters.pop(count_key, None)
                self.free.pop(count_key, None)

    def _withdraw(self, count_key, key: str, device: str) -> None:
        future = asyncio.get_running_loop().create_future()
        self.withdrawals[(key, device)] = (count_key, future)
        self.pending.setdefault(count_key, []).append(future)
        try:
            self.service.push_collective(
                *self._leader(), f"collective;w;{key};{device}", np.zeros(0, np.uint8)
            )
        except errors.OpError:
            self.withdrawn(key, device, False)

    def withdrawn(self, key: str, device: str, removed: bool) -> None:
        """The leader's answer to a withdrawal: whether it removed the part."""
        entry = self.withdrawals.pop((key, device), None)
        if entry is None:
            return
        count_key, future = entry
        if removed:
            self._give_back(count_key, key, device)
        futures = self.pending.get(count_key, [])
        if future in futures:
            futures.remove(future)
        if not futures:
            self.pending.pop(count_key, None)
            for abort in self.deferred.pop(count_key, ()):
                abort()  # (before the next execution, woken below, takes a number)
        if not future.done():
            future.set_result(removed)

    def withdraw_part(self, key: str, device: str) -> None:
        """(The leader) a member gave up: drop its part if its group has not completed,
        and tell it whether it did."""
        parts = self.parts.get(key)
        removed = parts is not None and parts.pop(device, None) is not None
        if parts is not None and not parts:
            del self.parts[key]
        spec = DeviceSpec.from_string(device)
        self.service.push_collective(
            spec.job, spec.task or 0, f"collective;a;{key};{device}",
            np.asarray([int(removed)], np.uint8),
        )  # fmt: skip

    def _send_part(self, key, size, what, device, value) -> None:
        leader = self._leader()
        if leader is None:
            self.add_part(key, size, what, device, value)
        else:
            self.service.push_collective(
                *leader, f"collective;c;{key};{size};{what};{device}", np.asarray(value)
            )

    def _leader(self):
        """(job, task) of the group's leader, None when that is here."""
        service = self.service
        if service is None:
            return None
        jobs = service.cluster.jobs
        job = "chief" if "chief" in jobs else "worker" if "worker" in jobs else jobs[0]
        task = service.cluster.task_indices(job)[0]
        return None if (job, task) == (service.job, service.task) else (job, task)

    # -- the leader's side
    def add_part(self, key, size, what, device, value) -> None:
        self._forget_aborted()
        if key in self.aborted:  # its execution was aborted by a member's failed step
            self._heard(key, device)
            return
        parts = self.parts.setdefault(key, {})
        parts[device] = (what, value)
        if len(parts) < size:
            return
        del self.parts[key]
        ranked = sorted(parts, key=lambda d: _member_rank(d, parts[d][0]))
        try:
            results = _combine(ranked, parts)
        except errors.OpError as e:
            results = [e] * len(ranked)
        for member, result in zip(ranked, results, strict=True):
            self._send_result(key, member, result)

    def abort_execution(self, key: str, size: int, device: str, error) -> None:
        """(The leader) `device`'s step failed before its member of execution `key`
        ran: that execution is aborted, for every member.  Those waiting get `error`
        now, those still to come when they come; the execution is forgotten once all
        `size` members are heard from, or `_ABORTED_TTL` seconds after the abort (at
        most `_ABORTED_KEPT` are remembered)."""
        self._forget_aborted()
        entry = self.aborted.get(key)
        if entry is None:
            entry = self.aborted[key] = (error, size, set(), _clock() + _ABORTED_TTL)
            while len(self.aborted) > _ABORTED_KEPT:
                self.aborted.popitem(last=False)
            for member in self.parts.pop(key, {}):
                self._heard(key, member)
        self._heard(key, device, tell=False)

    def abort_incomplete(self, key: str, size: int, device: str, error) -> None:
        """(The leader) `device`'s step failed while its member of execution `key` was
        in flight: unless the group completed meanwhile (its part is no longer here),
        that execution is aborted for every member, as by `abort_execution`."""
        self._forget_aborted()
        if key in self.aborted:
            self._heard(key, device, tell=False)
        elif device in self.parts.get(key, ()):
            self.abort_execution(key, size, device, error)

    def _forget_aborted(self) -> None:
        """Forget the aborted executions whose lifetime has passed."""
        aborted = self.aborted
        if aborted:
            now = _clock()
            while aborted and next(iter(aborted.values()))[3] <= now:
                aborted.popitem(last=False)

    def _heard(self, key: str, device: str, tell: bool = True) -> None:
        entry = self.aborted.get(key)
        if entry is None:  # (all heard from already)
            return
        error, size, heard, _ = entry
        heard.add(device)
        if len(heard) >= size:
            del self.aborted[key]
        if tell:
            self._send_result(key, device, error)

    def _send_result(self, key, device, result) -> None:
        spec = DeviceSpec.from_string(device)
        service = self.service
        if service is None or (spec.job, spec.task or 0) == (service.job, service.task):
            self.set_result(key, device, result)
            return
        if isinstance(result, errors.OpError):
            code = result.error_code or errors.INVALID_ARGUMENT
            kind, value = "e", np.frombuffer(result.message.encode(), np.uint8)
            device = f"{device};{code}"
        else:
            kind, value = "r", result
        service.push_collective(
            spec.job, spec.task or 0, f"collective;{kind};{key};{device}", value
        )

    # -- a step that failed before one of its collectives ran (OpDef.step_watch)
    def unrun_failed(self, ctx, size: int, group: int, instance: int, error) -> None:
        """`ctx`'s member did not run in a step that failed: its execution, the next
        number of its device, is aborted for the whole group (on a task; a plain
        session's members are all in the step and stay in step by themselves)."""
        device = ctx.device.name
        count_key = (device, group, instance)
        if self.pending.get(count_key):
            # A withdrawal in question: which number is next is known with its answer
            # (or when the next execution stops waiting for it), so abort then.
            again = functools.partial(self.unrun_failed, ctx, size, group, instance, error)
            self.deferred.setdefault(count_key, []).append(again)
            return
        key = f"{group};{instance};{self._next_number(count_key)}"
        self._tell_abort("x", key, size, device, _reason(device, "ran", error))

    def _abort_in_flight(self, key: str, size: int, device: str, error) -> None:
        """(The step failure callback of a member cancelled in flight on a task) its
        execution `key` is aborted for the whole group, unless the group completed
        meanwhile (the leader still holds the member's part: the parts and this
        message travel to it in order)."""
        self._tell_abort("y", key, size, device, _reason(device, "completed", error))

    def _tell_abort(self, kind: str, key: str, size: int, device: str, reason) -> None:
        leader = self._leader()
        if leader is None:
            if kind == "x":
                self.abort_execution(key, size, device, reason)
            else:
                self.abort_incomplete(key, size, device, reason)
            return
        try:
            self.service.push_collective(
                *leader, f"collective;{kind};{key};{size};{device}",
                np.frombuffer(reason.message.encode(), np.uint8),
            )  # fmt: skip
        except errors.OpError:
            pass  # (no leader to tell: its members time out, or the cluster is gone)

    def set_result(self, key, device, result) -> None:
        future = self.waiting.get((key, device))
        if future is None or future.done():
            return  # the member gave up (its step was cancelled)
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


def _rank_key(device: str):
    spec = DeviceSpec.from_string(device)
    return (
        spec.job or "",
        spec.replica or 0,
        spec.task or 0,
        spec.device_type or "",
        spec.device_index or 0,
    )


def _member_rank(device: str, what: str):
    """A member's place in its group: the rank its communicator gives it (a V3 op's
    part says "what#rank"), else its device name's order (task, then device)."""
    _, sep, rank = what.partition("#")
    return (int(rank),) if sep else (-1, *_rank_key(device))


def _combine(ranked: list, parts: dict) -> list:
    """The result each member gets, in rank order.

    Raises:
      InvalidArgumentError: members disagree on what they run, or their shapes differ
        where they must agree, or a broadcast has not exactly one sender.
    """
    whats = [parts[d][0].partition("#")[0] for d in ranked]
    kinds = {w.split(":")[0] for w in whats}
    values = [parts[d][1] for d in ranked]
    n = len(values)
    if kinds <= {"bcast_send", "bcast_recv"}:
        senders = [v for w, v in zip(whats, values, strict=True) if w == "bcast_send"]
        if len(senders) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Broadcast needs exactly one sender in a group; got {len(senders)}"
            )
        return [senders[0]] * n
    if len(set(whats)) != 1:
        raise errors.InvalidArgumentError(
            None, None, "The members of a collective group ran different collective ops"
        )
    what = whats[0]
    if what == "gather":
        if len({np.shape(v)[1:] for v in values}) != 1:
            raise errors.InvalidArgumentError(
                None, None, "Collective gather members have inputs of different shapes"
            )
        return [np.concatenate([np.asarray(v) for v in values], axis=0)] * n
    if len({np.shape(v) for v in values}) != 1:
        raise errors.InvalidArgumentError(
            None, None, "Shape mismatch in the collective instance: the members' inputs differ"
        )
    if what == "alltoall":  # member r gets row r of every member, in rank order
        return [np.stack([np.asarray(v)[r] for v in values]) for r in range(n)]
    kind, merge, final = what.split(":")
    ufunc = {"Add": np.add, "Mul": np.multiply, "Min": np.minimum, "Max": np.maximum}[merge]
    total = np.asarray(values[0]).copy()
    for v in values[1:]:
        total = ufunc(total, v)
    if final == "Div":
        count = np.asarray(n, total.dtype)
        total = total // count if total.dtype.kind in "iu" else total / count
    total = np.asarray(total, dtype=np.asarray(values[0]).dtype)
    if kind == "reduce_scatter":  # member r gets the r-th of n equal slices
        rows = total.shape[0] if total.ndim else 0
        if rows % n:
            raise errors.InvalidArgumentError(
                None, None,
                f"Reduce-scatter input first dimension size ({rows}) must be a multiple "
                f"of the group size ({n})",
            )  # fmt: skip
        return list(np.split(total, n))
    return [total] * n


def _reason(device: str, before: str, error) -> errors.CancelledError:
    """The error a failed step's member aborts its execution with, for the others."""
    first = str(getattr(error, "message", error)).split("\n", 1)[0]
    return errors.CancelledError(
        None,
        None,
        f"{_ABORTED}the step of {device} failed before its collective {before}: {first}",
    )


_clock = time.monotonic  # (the aborted executions' lifetimes; tests move it on)

_LOCAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> _Collectives


def _collectives(ctx) -> _Collectives:
    """The state of the kernel's task: its task service's (which puts itself in the
    kernel state of collectives it compiles), else the event loop's."""
    service = ctx.kernel_state.get("task_service")
    if service is not None:
        state = getattr(service, "_collectives", None)
        if state is None:
            state = service._collectives = _Collectives(service)
        return state
    return local_collectives()


def local_collectives() -> _Collectives:
    """The state of the plain sessions on the running event loop (for the NCCL ops,
    whose members are the devices of one process)."""
    loop = asyncio.get_running_loop()
    state = _LOCAL.get(loop)
    if state is None:
        state = _LOCAL[loop] = _Collectives(None)
    return state


def deliver(service, key: str, value) -> None:
    """A `collective;` PUSH frame arriving at `service`: a part (this task leads) or a
    member's result (or its error)."""
    state = getattr(service, "_collectives", None)
    if state is None:
        state = service._collectives = _Collectives(service)
    fields = key.split(";")
    kind = fields[1]
    if kind == "c":
        _, _, group, instance, k, size, what, device = fields
        state.add_part(f"{group};{instance};{k}", int(size), what, device, value)
    elif kind == "r":
        _, _, group, instance, k, device = fields
        state.set_result(f"{group};{instance};{k}", device, value)
    elif kind == "w":
        _, _, group, instance, k, device = fields
        state.withdraw_part(f"{group};{instance};{k}", device)
    elif kind == "a":
        _, _, group, instance, k, device = fields
        removed = bool(np.asarray(value, np.uint8).reshape(-1)[:1].sum())
        state.withdrawn(f"{group};{instance};{k}", device, removed)
    elif kind == "e":
        group, instance, k, device = fields[2:6]
        code = int(fields[6]) if len(fields) > 6 else errors.INVALID_ARGUMENT
        try:
            cls = errors.exception_type_from_error_code(code)
        except KeyError:
            cls = errors.InvalidArgumentError
        message = bytes(np.asarray(value, np.uint8)).decode()
        state.set_result(f"{group};{instance};{k}", device, cls(None, None, message))
    elif kind in ("x", "y"):  # (y: only if the group has not completed)
        _, _, group, instance, k, size, device = fields
        message = bytes(np.asarray(value, np.uint8)).decode()
        abort = state.abort_execution if kind == "x" else state.abort_incomplete
        abort(
            f"{group};{instance};{k}",
            int(size),
            device,
            errors.CancelledError(None, None, message),
        )


# -- steps that fail before a member runs ---------------------------------------------


def _static_keys(ctx):
    """(size, group, instance) of a collective, known without running it: a V1 op's
    attrs, a V2 op's constant inputs; None when they are not known so (a V2 op's
    computed keys, a V3 op's)."""
    a = ctx.attrs
    if "instance_key" in a:
        return int(a["group_size"]), int(a["group_key"]), int(a["instance_key"])
    names = _input_names(ctx)
    try:
        values = [constant_value(ctx.op.inputs[names.index(n)]) for n in _V2_HOST]
    except (ValueError, IndexError):
        return None
    return _keys(values)


def _keys(values):
    """(size, group, instance) from the three key tensors' values, None unless each is
    a known scalar."""
    if any(v is None or np.size(v) != 1 for v in values):
        return None
    try:
        return tuple(int(np.asarray(v).reshape(-1)[0]) for v in values)
    except (TypeError, ValueError):
        return None


def _step_keys(ctx, inputs):
    """(size, group, instance) of a V2 member that did not run in a failed step: the
    key inputs that arrived in that step, else those of its last execution on this task
    (the same keys, unless they change from step to step); None when neither is known."""
    names, got = _input_names(ctx), inputs()
    keys = _keys([got[names.index(n)] if names.index(n) < len(got) else None for n in _V2_HOST])
    return keys if keys is not None else ctx.kernel_state.get("last_keys")


def _watch_step(ctx, step, inputs) -> None:
    """(OpDef.step_watch) A step holding this collective starts.  Should it fail before
    the kernel runs: on a task, the member's execution is aborted for its group (the
    others, waiting or to come, fail instead of pairing with this member's next step);
    in a plain session, a V1 member whose inputs did not wait on the failure was about
    to run and, as in TF, spoils the session's later collectives (TF's V2 members spoil
    none).  `inputs()`: the member's inputs arrived so far in that step (a V2 op's
    computed keys)."""
    st = ctx.kernel_state
    if "task_service" in st:
        if "keys" not in st:
            st["keys"] = _static_keys(ctx)
            st["dynamic"] = st["keys"] is None and _V2_HOST[2] in _input_names(ctx)
        if st["keys"] is None and not st["dynamic"]:
            return  # (a V3 member: not followed)
    elif ctx.session is None or "instance_key" not in ctx.attrs:
        return
    unrun = st.get("unrun")
    if unrun is None:
        unrun = st["unrun"] = {}
    unrun[step.serial] = None  # (the kernel takes it out as it starts)
    if len(unrun) > _UNRUN_KEPT:
        del unrun[next(iter(unrun))]
    step.on_failure(functools.partial(_step_failed, ctx, step.serial, inputs))


def _input_names(ctx) -> list:
    return [arg.name for arg in ctx.op.op_def.inputs]


def _step_failed(ctx, serial: int, inputs, error) -> None:
    st = ctx.kernel_state
    unrun = st.get("unrun")
    if unrun is None or serial not in unrun:
        return  # the kernel ran: its own end saw to its execution
    del unrun[serial]
    state = _collectives(ctx)
    if "task_service" in st:
        keys = st["keys"] or _step_keys(ctx, inputs)
        if keys is not None:
            state.unrun_failed(ctx, *keys, error)
    elif not _waits_on(ctx.op, getattr(error, "op", None)):
        state.spoil(ctx.session, errors.CancelledError(None, None, "op cancelled"), serial)


def _waits_on(op, failed) -> bool:
    """Whether `op` depends, through data or control edges, on the op `failed`."""
    if failed is None:
        return False
    if failed is op:  # (its own kernel failed, before it met the group)
        return True
    seen, todo = {failed}, [failed]
    while todo:
        o = todo.pop()
        for nxt in [c for t in o.outputs for c in t.consumers()] + o._control_outputs:
            if nxt is op:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


# -- the kernels -----------------------------------------------------------------------

# The V2 ops' sizes and keys are read on the host, whatever the device.
_V2_HOST = ("group_size", "group_key", "instance_key")


async def _host(ctx, x) -> np.ndarray:
    return np.asarray(await ctx.device.copy_to_host(x))


async def _to_device(ctx, value, dtype):
    value = np.asarray(value, dtype=dtypes.as_dtype(dtype).as_numpy_dtype)
    return await ctx.device.copy_from_host(value)


def _reduce_what(ctx) -> str:
    merge, final = ctx.attrs["merge_op"], ctx.attrs["final_op"]
    merge = merge.decode() if isinstance(merge, bytes) else merge
    final = final.decode() if isinstance(final, bytes) else final
    return f"reduce:{merge}:{final}"


@CollectiveReduce.kernel()
async def _collective_reduce(ctx, x):
    a = ctx.attrs
    value = await _host(ctx, x)
    result = await _collectives(ctx).run(
        ctx, _reduce_what(ctx), a["group_size"], a["group_key"], a["instance_key"], value
    )
    return await _to_device(ctx, result, a["T"])


@CollectiveReduceV2.kernel(host_memory=_V2_HOST)
async def _collective_reduce_v2(ctx, x, size, group, instance, *tokens):
    value = await _host(ctx, x)
    result = await _collectives(ctx).run(
        ctx, _reduce_what(ctx), int(size), int(group), int(instance), value
    )
    return await _to_device(ctx, result, ctx.attrs["T"])


@CollectiveGather.kernel()
async def _collective_gather(ctx, x):
    a = ctx.attrs
    value = await _host(ctx, x)
    result = await _collectives(ctx).run(
        ctx, "gather", a["group_size"], a["group_key"], a["instance_key"], value
    )
    return await _to_device(ctx, result, a["T"])


@CollectiveGatherV2.kernel(host_memory=_V2_HOST)
async def _collective_gather_v2(ctx, x, size, group, instance, *tokens):
    value = await _host(ctx, x)
    result = await _collectives(ctx).run(
        ctx, "gather", int(size), int(group), int(instance), value
    )
    return await _to_device(ctx, result, ctx.attrs["T"])


def _full_shape(shape) -> list:
    """Raises InvalidArgumentError: a shape with unknown dimensions."""
    shape = tensor_shape.as_shape(shape)
    if not shape.is_fully_defined():
        dims = ",".join("?" if d is None else str(d) for d in shape.as_list())
        raise errors.InvalidArgumentError(None, None, f"Shape [{dims}] is not fully defined")
    return shape.as_list()


@CollectiveBcastSend.kernel()
async def _collective_bcast_send(ctx, x):
    a = ctx.attrs
    if list(np.shape(x)) != _full_shape(a["shape"]):
        raise errors.InternalError(
            None, None, f"Shape mismatch: attr shape {a['shape']} but input {list(np.shape(x))}"
        )
    value = await _host(ctx, x)
    await _collectives(ctx).run(
        ctx, "bcast_send", a["group_size"], a["group_key"], a["instance_key"], value
    )
    return x


@CollectiveBcastRecv.kernel()
async def _collective_bcast_recv(ctx):
    a = ctx.attrs
    shape = _full_shape(a["shape"])
    result = await _collectives(ctx).run(
        ctx, "bcast_recv", a["group_size"], a["group_key"], a["instance_key"], np.zeros(0)
    )
    return await _to_device(ctx, np.reshape(result, shape), a["T"])


@CollectiveBcastSendV2.kernel(host_memory=_V2_HOST)
async def _collective_bcast_send_v2(ctx, x, size, group, instance):
    value = await _host(ctx, x)
    await _collectives(ctx).run(ctx, "bcast_send", int(size), int(group), int(instance), value)
    return x


@CollectiveBcastRecvV2.kernel(host_memory=(*_V2_HOST, "shape"))
async def _collective_bcast_recv_v2(ctx, size, group, instance, shape):
    target = [int(d) for d in np.reshape(np.asarray(shape), [-1])]
    result = await _collectives(ctx).run(
        ctx, "bcast_recv", int(size), int(group), int(instance), np.zeros(0)
    )
    return await _to_device(ctx, np.reshape(result, target), ctx.attrs["T"])


# -- the newer forms: all-to-all, reduce-scatter, group assignment, communicators --------

_V2_INPUTS = [
    "input: T",
    "group_size: int32",
    "group_key: int32",
    "instance_key: int32",
    "ordering_token: Nordering_token * resource",
]
_V2_ATTRS = {**_COMMON, "is_stateless": False, "Nordering_token": 0}

CollectiveAllToAllV2 = register_op(
    "CollectiveAllToAllV2",
    inputs=_V2_INPUTS,
    outputs=["data: T"],
    attrs={"T": _REDUCE_TYPES, **_V2_ATTRS},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
    is_async=True,
)


def _reduce_scatter_shape(op):
    _check_choice(op, "merge_op", _MERGE_OPS)
    _check_choice(op, "final_op", _FINAL_OPS)
    return _v2_gather_shape(op)


CollectiveReduceScatterV2 = register_op(
    "CollectiveReduceScatterV2",
    inputs=_V2_INPUTS,
    outputs=["data: T"],
    attrs={
        "T": _REDUCE_TYPES,
        "merge_op": REQUIRED,
        "final_op": REQUIRED,
        **_V2_ATTRS,
        "max_subdivs_per_device": -1,
    },
    shape_fn=_reduce_scatter_shape,
    stateful=True,
    is_async=True,
)
CollectiveAssignGroupV2 = register_op(
    "CollectiveAssignGroupV2",
    inputs=["group_assignment: int32", "device_index: int32", "base_key: int32"],
    outputs=["group_size: int32", "group_key: int32"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])] * 2,
    stateful=True,
)
CollectiveInitializeCommunicator = register_op(
    "CollectiveInitializeCommunicator",
    inputs=["group_key: int32", "rank: int32", "group_size: int32"],
    outputs=["communicator: resource"],
    attrs=dict(_COMMON),
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)


def _v3_reduce_shape(op):
    _check_choice(op, "reduction", _MERGE_OPS)
    return [op.inputs[0].shape]


CollectiveReduceV3 = register_op(
    "CollectiveReduceV3",
    inputs=["input: T", "communicator: resource", "group_assignment: int32"],
    outputs=["data: T"],
    attrs={"T": _REDUCE_TYPES, "reduction": REQUIRED, "timeout_seconds": 0.0},
    shape_fn=_v3_reduce_shape,
    stateful=True,
    is_async=True,
)
CollectiveAllToAllV3 = register_op(
    "CollectiveAllToAllV3",
    inputs=["input: T", "communicator: resource", "group_assignment: int32"],
    outputs=["data: T"],
    attrs={"T": _REDUCE_TYPES, "timeout_seconds": 0.0},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
    is_async=True,
)
for _name in (
    "CollectiveAllToAllV2",
    "CollectiveReduceScatterV2",
    "CollectiveAssignGroupV2",
    "CollectiveInitializeCommunicator",
    "CollectiveReduceV3",
    "CollectiveAllToAllV3",
):
    NotDifferentiable(_name)


def _check_all_to_all_rows(value, size: int) -> None:
    """Raises InvalidArgumentError: the input's first dimension is not the group size
    (member r sends its row r to member r)."""
    rows = np.shape(value)[0] if np.ndim(value) else 0
    if rows != size:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"input to all-to-all first dimension size ({rows}) must be the same as the "
            f"group size ({size})",
        )


@CollectiveAllToAllV2.kernel(host_memory=_V2_HOST)
async def _collective_all_to_all_v2(ctx, x, size, group, instance, *tokens):
    value = await _host(ctx, x)
    _check_all_to_all_rows(value, int(size))
    result = await _collectives(ctx).run(
        ctx, "alltoall", int(size), int(group), int(instance), value
    )
    return await _to_device(ctx, result, ctx.attrs["T"])


@CollectiveReduceScatterV2.kernel(host_memory=_V2_HOST)
async def _collective_reduce_scatter_v2(ctx, x, size, group, instance, *tokens):
    if ctx.device.device_type == "CPU":
        # TF 2.21 implements reduce-scatter with NCCL only: on CPUs the collective
        # registry has no implementation for it.
        raise errors.InternalError(
            None, None, "CollectiveRegistry::Lookup did not find collective implementation undef"
        )
    value = await _host(ctx, x)
    what = "reduce_scatter:" + _reduce_what(ctx).split(":", 1)[1]
    result = await _collectives(ctx).run(ctx, what, int(size), int(group), int(instance), value)
    return await _to_device(ctx, result, ctx.attrs["T"])


def _summarize(values: np.ndarray, limit: int = 3) -> str:
    """A 2-D tensor's values as TF's Tensor::DebugString shows them: rows in brackets,
    the first `limit` values, "..." where it stops."""
    out, count = [], 0
    for row in values:
        if count >= limit:
            break
        shown = []
        for v in row:
            if count >= limit:
                shown.append("...")
                break
            shown.append(("" if not shown else " ") + str(v))
            count += 1
        out.append("[" + "".join(shown) + "]")
    if count < values.size:
        out.append("...")
    return "".join(out)


def _debug_string(values: np.ndarray) -> str:
    dims = ",".join(str(d) for d in values.shape)
    return f"Tensor<type: int32 shape: [{dims}] values: {_summarize(values)}>"


@CollectiveAssignGroupV2.kernel(
    host_memory=("group_assignment", "device_index", "base_key", "group_size", "group_key")
)
async def _collective_assign_group_v2(ctx, assignment, device_index, base_key):
    # (host memory, whatever the device)
    assignment, index, base = np.asarray(assignment), int(device_index), int(base_key)
    if assignment.ndim != 2:
        dims = ",".join(str(d) for d in assignment.shape)
        raise errors.InvalidArgumentError(
            None, None,
            f"group_assignment must be a 2-d Tensor, but received tensor of shape: [{dims}]",
        )  # fmt: skip
    rows = np.nonzero((assignment == index).any(axis=1))[0]
    if rows.size == 0:
        if not ((assignment >= 0) & (assignment < assignment.size)).all():
            raise errors.InvalidArgumentError(
                None, None,
                f"Not all items in group_assignment {_debug_string(assignment)} is within "
                "[0, number of devices)",
            )  # fmt: skip
        raise errors.InvalidArgumentError(
            None, None,
            f"device_index {index} is not found in group_assignment {_debug_string(assignment)}",
        )  # fmt: skip
    group_id = int(rows[0])
    key = base + group_id
    if key == 0:
        raise errors.InvalidArgumentError(
            None, None,
            f"Using the reserved group_key = 0 is not allowed: group_id = {group_id}, "
            f"base_key = {base}",
        )  # fmt: skip
    return np.int32(assignment.shape[1]), np.int32(key)


class Communicator:
    """A CollectiveInitializeCommunicator's resource: this member's rank in the group
    `group_key` of `group_size` members.  The V3 ops run on it in order: the k-th
    execution on a communicator meets the k-th on every other member's."""

    def __init__(self, group_key: int, rank: int, group_size: int, timeout: float):
        self.group_key, self.rank, self.group_size = group_key, rank, group_size
        self.timeout = timeout


@CollectiveInitializeCommunicator.kernel(
    host_memory=("group_key", "rank", "group_size", "communicator")
)
async def _collective_initialize_communicator(ctx, group_key, rank, group_size):
    key, rank, size = int(group_key), int(rank), int(group_size)
    if size <= 0:
        raise errors.InvalidArgumentError(
            None, None, f"group_size must be positive integer but got {size}"
        )
    if rank >= size:
        raise errors.InvalidArgumentError(
            None, None, f"rank must be less than group size but got {rank} >= {size}"
        )
    if rank < 0:
        raise errors.InvalidArgumentError(None, None, f"rank must be non-negative but got {rank}")
    handle = np.empty((), dtype=object)
    handle[()] = Communicator(key, rank, size, float(ctx.attrs["timeout_seconds"] or 0))
    return handle


def _communicator(handle) -> Communicator:
    c = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(c, Communicator):
        raise errors.InvalidArgumentError(
            None, None, f"Expected a collective communicator, got {type(c).__name__}"
        )
    return c


async def _run_v3(ctx, what: str, x, handle, group_assignment):
    """One V3 execution on the communicator: its result, on the op's device.

    Raises:
      UnimplementedError: a non-empty group assignment (TF 2.21 has none either).
    """
    comm = _communicator(handle)
    if np.size(group_assignment):  # (host memory)
        raise errors.UnimplementedError(None, None, "Group assignments are not supported yet.")
    value = await _host(ctx, x)
    if what == "alltoall":
        _check_all_to_all_rows(value, comm.group_size)
    result = await _collectives(ctx).run(
        ctx, f"{what}#{comm.rank}", comm.group_size, comm.group_key, "v3", value
    )
    return await _to_device(ctx, result, ctx.attrs["T"])


@CollectiveReduceV3.kernel(host_memory=("communicator", "group_assignment"))
async def _collective_reduce_v3(ctx, x, handle, group_assignment):
    reduction = ctx.attrs["reduction"]
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    return await _run_v3(ctx, f"reduce:{reduction}:Id", x, handle, group_assignment)


@CollectiveAllToAllV3.kernel(host_memory=("communicator", "group_assignment"))
async def _collective_all_to_all_v3(ctx, x, handle, group_assignment):
    return await _run_v3(ctx, "alltoall", x, handle, group_assignment)


for _op in (
    CollectiveReduce, CollectiveReduceV2, CollectiveGather, CollectiveGatherV2,
    CollectiveBcastSend, CollectiveBcastRecv, CollectiveBcastSendV2, CollectiveBcastRecvV2,
    CollectiveAllToAllV2, CollectiveReduceScatterV2, CollectiveReduceV3, CollectiveAllToAllV3,
):  # fmt: skip
    _op.step_watch = _watch_step
