"""Barrier ops (Barrier ... BarrierIncompleteSize) and TF1's `Barrier` class.

A barrier is a map from string keys to tuples of values, one value per component.
`insert_many` sets one component for a batch of keys; a key whose every component is
set becomes *ready* and leaves the incomplete map.  `take_many(n)` returns n ready
elements: those whose first component was inserted earliest come first (TF orders by
the insertion index; ties break by completion order here).

The resource (`BarrierResource`) is a synchronous state machine, as the queues are
(asyncflow/queues.py): `insert_many` never waits (a barrier is unbounded), a take is a
`take_nowait` fast path plus an async `take` that suspends on a future registered as a
waiter; every state change calls `_pump`, which serves waiting takes in arrival order.

Exactly-once delivery:
- Ready elements leave the barrier only in the synchronous section that completes a
  take: either the caller receives them at once or the waiter's future does, together
  with an `on_take` notification that registers an undo with the step
  (`kernel_api.current_step().on_failure`); if the step fails, is cancelled or times out,
  the elements go back with their original order keys.
- A take is served whole or not at all (no progressive filling), so a cancelled or
  timed-out take holds nothing: withdrawing its waiter is enough.

Where this departs from TF's kernel (barrier_ops.cc), on purpose:
- `insert_many` is atomic: every key is validated (closed, duplicate component, shape)
  before any is inserted.  TF inserts key by key, so a failing batch leaves earlier
  keys inserted and can drop a completed element on a late shape error.
- Value shapes are checked at insertion, not when the element completes.
- A take waiting with allow_small_batch when the barrier closes is served as a take
  issued then would be (TF's documented TODO: it blocks forever).
- A waiting take fails with OutOfRangeError as soon as ready + incomplete elements can
  no longer reach its count once closed (TF checks this only when the take starts).
- `take_many(timeout=ms)` is honoured (TF rejects any timeout): DeadlineExceededError.

Invariants:
- `_ready` is a heap of `(index, seq, key, values)`; `seq` is unique, so entries never
  compare their keys or values, and restored entries return to their old places.
- Waiting takes are served strictly in arrival order: a take that must wait blocks the
  ones behind it.
- A key is in `_incomplete` iff some but not all of its components are set.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Callable

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.kernel_api import PASS_RESOURCE_OPS, current_step, kernel_resource
from asyncflow.ops.queue_ops import _as_shape_list, _as_type_list
from asyncflow.registry import ANY, REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = ["Barrier"]

_FIRST_INDEX = -(2**63)  # TF's first insertion index (int64 min)
_MISSING = object()  # a component not inserted yet
_TYPES = TypeConstraint(None, is_list=True)
_SCALAR = tensor_shape.TensorShape([])


def _shape_str(shape) -> str:
    return "[" + ",".join("-1" if d is None else str(d) for d in shape) + "]"


class _Taker:
    __slots__ = ("n", "allow_small", "fut", "on_take", "timer")

    def __init__(self, n, allow_small, fut, on_take):
        self.n = n
        self.allow_small = allow_small
        self.fut = fut
        self.on_take = on_take
        self.timer = None


class BarrierResource:
    """The barrier's state: incomplete elements by key, ready elements by index."""

    def __init__(self, name: str, dtypes, shapes=None):
        self.name = name
        self.dtypes = list(dtypes)
        self.shapes = None if not shapes else [tensor_shape.as_shape(s) for s in shapes]
        self.dims = None if self.shapes is None else [tuple(s.as_list()) for s in self.shapes]
        self._incomplete: dict[bytes, list] = {}  # key -> [index, [value | _MISSING, ...]]
        self._ready: list = []  # heap of (index, seq, key, values)
        self._index = _FIRST_INDEX  # the index the next insert_many's new keys get
        self._seq = 0
        self._closed = False
        self._cancelled = False  # closed with cancel_pending_enqueues
        self._takers: deque[_Taker] = deque()
        handle = np.empty((), dtype=object)
        handle[()] = self
        self.handle = handle  # what the Barrier op outputs (a 0-d object tensor)

    def __repr__(self) -> str:
        return (
            f"<Barrier {self.name!r} ready={self.ready_size()} "
            f"incomplete={self.incomplete_size()} closed={self._closed}>"
        )

    # -- introspection
    def ready_size(self) -> int:
        return len(self._ready)

    def incomplete_size(self) -> int:
        return len(self._incomplete)

    def is_closed(self) -> bool:
        return self._closed

    def num_waiting(self) -> int:
        """Pending takes, for tests and diagnostics."""
        return sum(1 for t in self._takers if not t.fut.done())

    # -- insert
    def insert_many(self, component_index: int, keys, values) -> None:
        """Set component `component_index` of each key to the matching row of `values`.

        All or nothing: the batch is validated before anything is inserted.
        Raises: errors.InvalidArgumentError for a bad component index, dtype or shape, or
        a component already set for a key; errors.CancelledError when the barrier is
        closed and a key is new (or it was closed with cancel_pending_enqueues).
        """
        keys, values = self._check_insert(component_index, keys, values)
        n = len(keys)
        if self._closed and (self._cancelled or (n and not self._incomplete)):
            raise errors.CancelledError(
                None,
                None,
                f"Barrier {self.name} is closed.  Pending enqueues cancelled: "
                f"{int(self._cancelled)}.  Number of new insertions: {n}.  Number of "
                f"incomplete keys: {len(self._incomplete)}.",
            )
        seen = set()
        for i, key in enumerate(keys):
            element = self._incomplete.get(key)
            if element is None and self._closed:
                raise errors.CancelledError(
                    None,
                    None,
                    f"Barrier {self.name} is closed, but attempted to insert a brand new "
                    f"key: {key.decode(errors='replace')}.  Pending enqueues cancelled: 0."
                    f"  Insertion index: {i}.  Number of incomplete keys: "
                    f"{len(self._incomplete)}.",
                )
            if key in seen or (
                element is not None and element[1][component_index] is not _MISSING
            ):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Key {key.decode(errors='replace')} already has a value for component "
                    f"{component_index} in barrier {self.name}",
                )
            seen.add(key)
        new_keys = False
        for key, value in zip(keys, values):
            element = self._incomplete.get(key)
            if element is None:
                element = self._incomplete[key] = [self._index, [_MISSING] * len(self.dtypes)]
                new_keys = True
            element[1][component_index] = value
            if all(v is not _MISSING for v in element[1]):
                del self._incomplete[key]
                self._seq += 1
                heapq.heappush(self._ready, (element[0], self._seq, key, tuple(element[1])))
        if new_keys:
            self._index += 1
        self._pump()

    def _check_insert(self, component_index, keys, values):
        if not 0 <= component_index < len(self.dtypes):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"The component ID is out of range {component_index} > num_components "
                f"(= {len(self.dtypes)})",
            )
        want = self.dtypes[component_index]
        values = np.asarray(values)
        if values.dtype != np.dtype(want.as_numpy_dtype):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Signature mismatch, have: string_ref, string, {values.dtype}-> expected: "
                f"string_ref, string, {want.name}-> (component {component_index} of barrier "
                f"{self.name})",
            )
        keys = np.asarray(keys)
        if keys.ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"keys must be a vector, but received shape {_shape_str(keys.shape)}"
            )
        if values.ndim == 0 or values.shape[0] != keys.shape[0]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"values must have one row per key: {keys.shape[0]} keys, values of shape "
                f"{_shape_str(values.shape)}",
            )
        if keys.size and values.size == 0:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Tensors with no elements are not supported {self.name}: received shape "
                f"{_shape_str(values.shape)}",
            )
        if self.dims is not None and values.shape[1:] != self.dims[component_index]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape mismatch in value component {component_index} of barrier "
                f"{self.name}. Expected {_shape_str(self.dims[component_index])}, got "
                f"{_shape_str(values.shape[1:])}",
            )
        keys = [k if isinstance(k, bytes) else str(k).encode() for k in keys.tolist()]
        rows = [np.array(values[i], dtype=values.dtype) for i in range(len(keys))]  # copies
        return keys, rows

    # -- take
    def take_nowait(self, n: int, allow_small: bool = False) -> tuple[list, list]:
        """Remove and return `(items, [indices, keys, *values])` now, or raise WouldBlock.

        Raises: errors.OutOfRangeError when closed with too few elements (allow_small:
        none ready); errors.InvalidArgumentError if the values cannot be stacked.
        """
        if self._takers:
            raise WouldBlock
        out = self._serve(n, allow_small)
        if out is None:
            raise WouldBlock
        if isinstance(out, errors.OpError):
            raise out
        return out

    async def take(
        self,
        n: int,
        allow_small: bool = False,
        on_take: Callable | None = None,
        timeout_s: float | None = None,
    ) -> tuple[list, list]:
        """Remove n ready elements, suspending until there are that many.

        allow_small: once closed, return what is ready (at least one) instead of failing.
        `on_take(items)` runs in the synchronous section that removes them.  A cancelled
        or timed-out wait withdraws the take; nothing is lost.
        Raises: errors.OutOfRangeError when closed and ready plus incomplete elements
        cannot make n (allow_small: none ready); errors.DeadlineExceededError after
        `timeout_s`.
        """
        try:
            items, out = self.take_nowait(n, allow_small)
        except WouldBlock:
            pass
        else:
            if on_take is not None:
                on_take(items)
            return items, out
        loop = asyncio.get_running_loop()
        t = _Taker(n, allow_small, loop.create_future(), on_take)
        self._takers.append(t)
        if timeout_s is not None:
            t.timer = loop.call_later(timeout_s, self._timed_out, t)
        try:
            return await t.fut
        except asyncio.CancelledError:
            if not t.fut.done() or t.fut.cancelled():
                self._withdraw(t)
            elif t.fut.exception() is None and on_take is None:
                self.restore(t.fut.result()[0])  # served, but nobody will see it
            raise
        finally:
            if t.timer is not None:
                t.timer.cancel()

    def _withdraw(self, t: _Taker) -> None:
        try:
            self._takers.remove(t)
        except ValueError:
            return
        self._pump()  # takes behind it may be servable now

    def _timed_out(self, t: _Taker) -> None:
        t.timer = None
        if t.fut.done():
            return
        self._withdraw(t)
        t.fut.set_exception(
            errors.DeadlineExceededError(
                None, None, f"Timed out waiting for {t.n} elements of barrier '{self.name}'"
            )
        )

    def restore(self, items: list) -> None:
        """Give back elements taken by a take whose step failed."""
        for item in items:
            heapq.heappush(self._ready, item)
        if items:
            self._pump()

    def _serve(self, n: int, allow_small: bool):
        """The elements a take gets now: (items, outputs), an OpError, or None (wait)."""
        ready = len(self._ready)
        if self._closed:
            # TF's rule: once closed, incomplete keys may still complete (unless
            # cancelled), so they count toward a full take but not a small batch.
            k = min(n, ready) if allow_small else n
            available = ready if allow_small else ready + len(self._incomplete)
            if available < max(k, 1):
                return errors.OutOfRangeError(
                    None,
                    None,
                    f"Barrier '{self.name}' is closed and has insufficient elements "
                    f"(requested {k}, total size {available})",
                )
        else:
            k = n
        if ready < k:
            return None
        items = heapq.nsmallest(k, self._ready)
        try:
            out = self._stack(items)
        except ValueError as exc:  # unconstrained shapes that differ
            return errors.InvalidArgumentError(
                None, None, f"Cannot batch elements of barrier '{self.name}': {exc}"
            )
        for _ in range(k):
            heapq.heappop(self._ready)
        return items, out

    def _stack(self, items: list) -> list:
        indices = np.array([it[0] for it in items], dtype=np.int64)
        keys = np.empty(len(items), dtype=object)
        keys[:] = [it[2] for it in items]
        out = [indices, keys]
        for c, dt in enumerate(self.dtypes):
            np_dt = dt.as_numpy_dtype
            if items:
                out.append(np.stack([it[3][c] for it in items]).astype(np_dt, copy=False))
            else:
                shape = (0, *self.dims[c]) if self.dims is not None else (0,)
                out.append(np.empty(shape, dtype=np_dt))
        return out

    # -- close
    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Refuse new keys; with cancel_pending_enqueues, also drop incomplete elements.

        Raises: errors.CancelledError when already closed (a second close may only add
        cancel_pending_enqueues), as TF.
        """
        if self._closed and (self._cancelled or not cancel_pending_enqueues):
            raise errors.CancelledError(None, None, f"Barrier '{self.name}' is already closed.")
        self._closed = True
        self._cancelled = bool(cancel_pending_enqueues)
        if self._cancelled:
            self._incomplete.clear()
        self._pump()

    # -- the state machine
    def _pump(self) -> None:
        """Serve waiting takes in arrival order until the first that must wait."""
        takers = self._takers
        while takers:
            t = takers[0]
            if t.fut.done():  # cancelled or timed out; its kernel has not cleaned up yet
                takers.popleft()
                continue
            out = self._serve(t.n, t.allow_small)
            if out is None:
                return
            takers.popleft()
            if isinstance(out, errors.OpError):
                t.fut.set_exception(out)
                continue
            t.fut.set_result(out)
            if t.on_take is not None:
                t.on_take(out[0])


class WouldBlock(Exception):
    """Raised by `take_nowait` when the take would have to wait."""


# -- the ops ------------------------------------------------------------------------------


def _scalar_shape(op):
    return [_SCALAR]


def _no_outputs(op):
    return []


def _insert_many_shape(op):
    keys, values = op.inputs[1].shape, op.inputs[2].shape
    if keys.ndims is not None and keys.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {keys.ndims} (keys)")
    if values.ndims == 0:
        raise ValueError("Shape must be at least rank 1 but is rank 0 (values)")
    n_keys = keys[0].value if keys.ndims else None
    n_values = values[0].value if values.ndims else None
    if n_keys is not None and n_values is not None and n_keys != n_values:
        raise ValueError(
            f"Dimension 0 in both shapes must be equal, but are {n_keys} and {n_values}"
        )
    return []


def _take_many_shape(op):
    return [[None], [None]] + [None] * (len(op.outputs) - 2)


BarrierOp = register_op(
    "Barrier",
    outputs=["handle: string"],
    attrs={
        "component_types": _TYPES,
        "shapes": [],
        "capacity": -1,
        "container": "",
        "shared_name": "",
    },
    shape_fn=_scalar_shape,
    stateful=True,
)
PASS_RESOURCE_OPS.add("Barrier")
BarrierInsertMany = register_op(
    "BarrierInsertMany",
    inputs=["handle: string", "keys: string", "values: T"],
    attrs={"T": ANY, "component_index": REQUIRED},
    shape_fn=_insert_many_shape,
    stateful=True,
)
BarrierTakeMany = register_op(
    "BarrierTakeMany",
    inputs=["handle: string", "num_elements: int32"],
    outputs=["indices: int64", "keys: string", "values: component_types"],
    attrs={
        "component_types": _TYPES,
        "allow_small_batch": False,
        "wait_for_incomplete": False,
        "timeout_ms": -1,
    },
    shape_fn=_take_many_shape,
    stateful=True,
    is_async=True,
)
BarrierClose = register_op(
    "BarrierClose",
    inputs=["handle: string"],
    attrs={"cancel_pending_enqueues": False},
    shape_fn=_no_outputs,
    stateful=True,
)
BarrierReadySize = register_op(
    "BarrierReadySize",
    inputs=["handle: string"],
    outputs=["size: int32"],
    shape_fn=_scalar_shape,
    stateful=True,
)
BarrierIncompleteSize = register_op(
    "BarrierIncompleteSize",
    inputs=["handle: string"],
    outputs=["size: int32"],
    shape_fn=_scalar_shape,
    stateful=True,
)
for _t in (
    "Barrier",
    "BarrierInsertMany",
    "BarrierTakeMany",
    "BarrierClose",
    "BarrierReadySize",
    "BarrierIncompleteSize",
):
    NotDifferentiable(_t)


# Barriers are host objects (TF registers their kernels on CPU only).
@BarrierOp.kernel("CPU")
async def _barrier(ctx):
    a = ctx.attrs
    if a["capacity"] != -1:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Barrier only accepts capacity=-1.  Feed the inputs to your Barrier through a "
            "queue to enforce a limited capacity.",
        )
    name = a["shared_name"] or ctx.op.name
    container = a["container"]
    shapes = list(a["shapes"]) or None
    b = kernel_resource(
        ctx, container, name, lambda: BarrierResource(name, a["component_types"], shapes)
    )
    if ctx.kernel_state.get("checked") is b:  # validated once per (session, op)
        return b.handle
    want_types = list(a["component_types"])
    if b.dtypes != want_types:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shared barrier '{name}' has component types "
            f"{', '.join(d.name for d in b.dtypes)} but requested component types were "
            f"{', '.join(d.name for d in want_types)}",
        )
    want_dims = (
        None if shapes is None else [tuple(tensor_shape.as_shape(s).as_list()) for s in shapes]
    )
    if b.dims != want_dims:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shared barrier '{name}' has component shapes {b.dims} but requested "
            f"component shapes were {want_dims}",
        )
    ctx.kernel_state["checked"] = b
    return b.handle


def _barrier_of(handle) -> BarrierResource:
    b = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(b, BarrierResource):
        raise errors.InvalidArgumentError(
            None, None, f"Expected a barrier handle, got {type(b).__name__}"
        )
    return b


class _Undo:
    """Gives a failed step's taken elements back to the barrier."""

    __slots__ = ("barrier", "items", "active", "op")

    def __init__(self, barrier, items, op=None):
        # `op` lets an enqueue of the taken elements in the same step disarm this undo
        # (see queue_ops._on_commit), so nothing is both given back and kept.
        self.barrier, self.items, self.active, self.op = barrier, items, True, op

    def __call__(self, error) -> None:
        if self.active:
            self.active = False
            self.barrier.restore(self.items)


def _on_take(b, op=None):
    sctx = current_step()
    if sctx is None:
        return None
    return lambda items: sctx.on_failure(_Undo(b, items, op))


@BarrierInsertMany.kernel("CPU")
async def _insert_many(ctx, handle, keys, values):
    _barrier_of(handle).insert_many(ctx.attrs["component_index"], keys, values)


@BarrierTakeMany.kernel("CPU")
async def _take_many(ctx, handle, num_elements):
    b = _barrier_of(handle)
    a = ctx.attrs
    want = list(a["component_types"])
    if want != b.dtypes:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected component types {[d.name for d in want]} but barrier '{b.name}' "
            f"holds {[d.name for d in b.dtypes]}",
        )
    if np.ndim(num_elements) != 0:
        raise errors.InvalidArgumentError(None, None, "num_elements must be a scalar.")
    n = int(num_elements)
    if n < 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_elements must be >= 0, got {n} (barrier '{b.name}')"
        )
    timeout_ms = a["timeout_ms"]
    timeout_s = None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000.0
    _, out = await b.take(n, a["allow_small_batch"], _on_take(b, ctx.op), timeout_s)
    return tuple(out)


@BarrierClose.kernel("CPU")
async def _close(ctx, handle):
    _barrier_of(handle).close(ctx.attrs["cancel_pending_enqueues"])


@BarrierReadySize.kernel("CPU")
async def _ready_size(ctx, handle):
    return np.int32(_barrier_of(handle).ready_size())


@BarrierIncompleteSize.kernel("CPU")
async def _incomplete_size(ctx, handle):
    return np.int32(_barrier_of(handle).incomplete_size())


# -- the Python class (TF1's tf.Barrier, data_flow_ops.Barrier) ----------------------------


class Barrier:
    """A key-value map that persists across steps (TF1's `Barrier`).

    Each key holds a tuple of values, one per component.  An element is *incomplete*
    until every component was inserted (`insert_many`); it is then *ready*, and
    `take_many` returns ready elements, those whose first component was inserted
    earliest first, suspending (without holding a thread) until enough are ready.
    """

    def __init__(self, types, shapes=None, shared_name=None, name="barrier"):
        """Create the barrier op.

        Args:
          types: a dtype or a list of dtypes, one per value component.
          shapes: None (unconstrained) or one fully defined shape per component.
          shared_name: if set, the barrier is shared under this name across sessions
            that share its container.
          name: the op's name.

        Raises:
          ValueError: a shape is not fully defined, has no elements, or the number of
            shapes differs from the number of types.
        """
        self._types = _as_type_list(types)
        if shapes is not None:
            shapes = _as_shape_list(shapes)
            if len(shapes) != len(self._types):
                raise ValueError(
                    f"Barrier needs one shape per component: {len(self._types)} types, "
                    f"{len(shapes)} shapes"
                )
            for i, shape in enumerate(shapes):
                if shape.num_elements() == 0:
                    raise ValueError(
                        "Empty tensors are not supported, but received shape "
                        f"'{tuple(shape.as_list())}' at index {i}"
                    )
            self._shapes = shapes
        else:
            self._shapes = [tensor_shape.unknown_shape() for _ in self._types]
        g = ops.get_default_graph()
        attrs = {
            "component_types": self._types,
            "shapes": list(shapes or []),
            "capacity": -1,
            "container": getattr(g, "_container", "") or "",
            "shared_name": shared_name or "",
        }
        self._barrier_ref = ops.apply_op("Barrier", [], attrs, name=name).outputs[0]
        self._name = self._barrier_ref.op.name.split("/")[-1]

    @property
    def barrier_ref(self):
        """The barrier's handle tensor."""
        return self._barrier_ref

    @property
    def name(self) -> str:
        """The barrier op's name."""
        return self._barrier_ref.op.name

    @property
    def component_types(self):
        return list(self._types)

    @property
    def shapes(self):
        return list(self._shapes)

    def insert_many(self, component_index, keys, values, name=None):
        """For each key, set component `component_index` to the matching row of values.

        Args:
          component_index: the component being set (a Python int).
          keys: a string vector of length n.
          values: a tensor whose first dimension is n.

        Raises:
          ValueError: (build time) keys is not a vector or its length differs from
            values' first dimension.
          At run time: errors.InvalidArgumentError if the component is already set for
          a key, or for a bad component index, dtype or shape (nothing is inserted);
          errors.CancelledError if the barrier is closed and a key is new, or it was
          closed with cancel_pending_enqueues.
        """
        if name is None:
            name = f"{self._name}_BarrierInsertMany"
        component_index = int(component_index)
        with ops.name_scope(name, values=[keys, values]) as scope:
            keys = ops.convert_to_tensor(keys, dtype="string", name="keys")
            if not isinstance(values, ops.Tensor) and 0 <= component_index < len(self._types):
                # Python values take the component's dtype (TF infers it, then fails at
                # run time on e.g. int literals for an int64 component).
                values = ops.convert_to_tensor(
                    values, dtype=self._types[component_index], name="values"
                )
            return ops.apply_op(
                "BarrierInsertMany",
                [self._barrier_ref, keys, values],
                {"component_index": component_index},
                name=scope,
            )

    def take_many(self, num_elements, allow_small_batch=False, timeout=None, name=None):
        """Take `num_elements` ready elements, suspending until there are that many.

        Elements whose first component was inserted earliest come first.

        Args:
          num_elements: how many elements to take (int32 scalar).
          allow_small_batch: once the barrier is closed, return the ready elements (at
            least one) instead of failing when fewer than num_elements are ready.
          timeout: milliseconds to wait before failing with DeadlineExceededError
            (None: wait as long as the step allows).

        Returns:
          `(indices, keys, values)`: indices is an int64 vector, the index of the
          insert_many call that first inserted each element's key (counting from
          -2**63, one per call that added new keys); keys a string vector; values a
          list with one tensor per component, batched along dimension 0.

        Raises:
          ValueError: (build time) a negative constant num_elements.
          At run time: errors.OutOfRangeError if the barrier is closed and its ready
          plus incomplete elements cannot make num_elements (with allow_small_batch:
          none is ready); errors.DeadlineExceededError after the timeout or the step's
          deadline; errors.InvalidArgumentError for a negative num_elements.
        """
        if name is None:
            name = f"{self._name}_BarrierTakeMany"
        n_val = (
            ops.constant_value(num_elements)
            if isinstance(num_elements, ops.Tensor)
            else (num_elements)
        )
        if n_val is not None and int(n_val) < 0:
            raise ValueError(f"Dimension {int(n_val)} must be >= 0")
        op = ops.apply_op(
            "BarrierTakeMany",
            [self._barrier_ref, ops.convert_to_tensor(num_elements, dtype="int32")],
            {
                "component_types": self._types,
                "allow_small_batch": bool(allow_small_batch),
                "timeout_ms": -1 if timeout is None else int(timeout),
            },
            name=name,
        )
        batch_dim = None if allow_small_batch or n_val is None else int(n_val)
        batch = tensor_shape.TensorShape([batch_dim])
        op.outputs[0].set_shape(batch)
        op.outputs[1].set_shape(batch)
        for t, shape in zip(op.outputs[2:], self._shapes):
            t.set_shape(batch.concatenate(shape))
        return op.outputs[0], op.outputs[1], list(op.outputs[2:])

    def close(self, cancel_pending_enqueues=False, name=None):
        """Close the barrier: new keys are refused; existing keys may still complete.

        With cancel_pending_enqueues, incomplete elements are dropped and no insert is
        accepted.  Takes that can no longer be served fail with OutOfRangeError.

        Raises (at run time): errors.CancelledError if already closed (a second close
        may only add cancel_pending_enqueues).
        """
        if name is None:
            name = f"{self._name}_BarrierClose"
        return ops.apply_op(
            "BarrierClose",
            [self._barrier_ref],
            {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
            name=name,
        )

    def ready_size(self, name=None):
        """The number of ready (complete) elements, an int32 scalar."""
        if name is None:
            name = f"{self._name}_BarrierReadySize"
        return ops.apply_op("BarrierReadySize", [self._barrier_ref], name=name).outputs[0]

    def incomplete_size(self, name=None):
        """The number of incomplete elements, an int32 scalar."""
        if name is None:
            name = f"{self._name}_BarrierIncompleteSize"
        return ops.apply_op("BarrierIncompleteSize", [self._barrier_ref], name=name).outputs[0]
