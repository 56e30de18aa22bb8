"""Synchronisation ops: gradient accumulators and a mutex (whitepaper Table 1).

- `ConditionalAccumulator` (ResourceConditionalAccumulator and its ops): apply_grad sums
  gradients whose local_step is not older than the accumulator's global step (stale
  ones are dropped); take_grad(num_required) suspends until that many were applied,
  then returns their mean (or sum), resets, and advances the global step.
- `SparseConditionalAccumulator` (SparseConditionalAccumulator and its ops): the same
  for IndexedSlices-like gradients, averaged per index.
- `MutexV2` / `MutexLock` / `ConsumeMutexLock`: a mutex resource whose lock is held
  by the tensor MutexLock outputs; it is released when ConsumeMutexLock runs, when the
  tensor is dropped (TF's rule), or when the step that acquired it fails.

Exactly once (issue 6): a take_grad whose step fails, is cancelled or times out after
the take gives its gradients back: the step's failure callback (`current_step().
on_failure`, registered in the synchronous section that takes) accumulates the taken sum
and count again, together with any gradients applied since, and puts the global step
back unless a later take or set_global_step moved it.  A take_grad still waiting when
its step ends withdraws and leaves the accumulator untouched.  (A step that already
applied the taken gradient to variables before failing is not undone there: variable
updates are not transactional.)

Invariants: state changes happen in synchronous sections (no await between a check and
its update); a waiter that is cancelled withdraws itself; a waiter handed a result
after its step was cancelled gives it back (the gradients, the lock) before re-raising.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections import deque

import numpy as np

from asyncflow import dtypes as _dtypes
from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.kernel_api import PASS_RESOURCE_OPS, current_step, kernel_resource
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__ = [
    "ConditionalAccumulatorBase",
    "ConditionalAccumulator",
    "SparseConditionalAccumulator",
    "mutex_v2",
    "mutex_lock",
    "consume_mutex_lock",
]

logger = logging.getLogger("asyncflow")

_SCALAR = tensor_shape.TensorShape([])


def _obj0(x) -> np.ndarray:
    a = np.empty((), dtype=object)
    a[()] = x
    return a


def _resource(handle, kind):
    r = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(r, kind):
        raise errors.InvalidArgumentError(
            None, None, f"Expected a {kind.__name__} handle, got {type(r).__name__}"
        )
    return r


def _lookup(ctx, factory):
    a = ctx.attrs
    name = a["shared_name"] or ctx.op.name
    container = a["container"]
    return kernel_resource(ctx, container, name, factory)


# -- accumulator state ------------------------------------------------------------------------


class _Accumulator:
    """Shared by the dense and sparse accumulators: counter, global step, takers."""

    def __init__(self, name, dtype, shape, reduction_type):
        if reduction_type not in ("MEAN", "SUM"):
            raise errors.InvalidArgumentError(
                None, None, f"Unsupported reduction_type {reduction_type!r}"
            )
        self.name = name
        self.dtype = dtype
        self.shape = tensor_shape.as_shape(shape)
        self.mean = reduction_type == "MEAN"
        self.global_step = 0
        self.count = 0
        self._version = 0  # bumped by every take and set_global_step
        self._takers: deque = deque()  # (num_required, future, on_take)
        self.handle = _obj0(self)

    def set_global_step(self, step: int) -> None:
        if step < self.global_step:
            logger.warning("Attempt to set global step of %s to a lower value", self.name)
        self.global_step = int(step)
        self._version += 1

    def _stale(self, local_step: int) -> bool:
        return local_step < self.global_step

    async def take(self, num_required: int, on_take=None):
        """The reduced gradient once num_required were applied (suspends until then).

        `on_take(taken)` runs in the synchronous section that takes the gradients (the
        kernel registers an undo with its step there); `taken` is what `restore` needs to
        put them back.  A cancelled wait withdraws; a take served but cancelled before it
        resumed, with no `on_take` to undo it, is restored here.
        """
        if num_required < 1:
            raise errors.InvalidArgumentError(
                None, None, f"Argument num_required must be positive, but was {num_required}"
            )
        if not self._takers and self.count >= num_required:
            out, taken = self._take_now()
            if on_take is not None:
                on_take(taken)
            return out
        fut = asyncio.get_running_loop().create_future()
        entry = (num_required, fut, on_take)
        self._takers.append(entry)
        try:
            return (await fut)[0]
        except asyncio.CancelledError:
            if not fut.done() or fut.cancelled():
                try:
                    self._takers.remove(entry)
                except ValueError:
                    pass
                self._pump()
            elif fut.exception() is None and on_take is None:
                self.restore(fut.result()[1])  # served, but nobody will see it
            raise

    def _pump(self) -> None:
        takers = self._takers
        while takers:
            n, fut, on_take = takers[0]
            if fut.done():
                takers.popleft()
                continue
            if self.count < n:
                return
            takers.popleft()
            out, taken = self._take_now()
            fut.set_result((out, taken))
            if on_take is not None:
                on_take(taken)  # may restore at once (its step already failed)

    def _take_now(self):
        """(the reduced gradient, what `restore` needs to undo the take)."""
        out = self._result()
        taken = _Taken(self._state(), self.count, self.global_step, self._version + 1)
        self._reset()
        self.count = 0
        self.global_step += 1
        self._version += 1
        return out, taken

    def restore(self, taken: _Taken) -> None:
        """Undo a take whose step failed: its gradients are accumulated again (with any
        applied since), and the global step goes back unless it was moved since by a
        take or set_global_step."""
        if not self._merge(taken.state):
            logger.warning(
                "%s: the gradients of a failed take_grad could not be given back: gradients "
                "of another shape were applied since",
                self.name,
            )
            return
        self.count += taken.count
        if self._version == taken.version:
            self.global_step = taken.global_step
            self._version += 1
        self._pump()


class _Taken:
    """What a take removed from an accumulator, to put back if its step fails."""

    __slots__ = ("state", "count", "global_step", "version")

    def __init__(self, state, count, global_step, version):
        self.state, self.count = state, count
        self.global_step, self.version = global_step, version


class _Undo:
    """A step-failure callback giving a take's gradients back (once)."""

    __slots__ = ("acc", "taken", "active")

    def __init__(self, acc, taken):
        self.acc, self.taken, self.active = acc, taken, True

    def __call__(self, error) -> None:
        if self.active:
            self.active = False
            self.acc.restore(self.taken)


def _on_take(acc):
    sctx = current_step()
    if sctx is None:
        return None
    return lambda taken: sctx.on_failure(_Undo(acc, taken))


class DenseAccumulator(_Accumulator):
    def __init__(self, name, dtype, shape, reduction_type):
        super().__init__(name, dtype, shape, reduction_type)
        self._sum = None

    def apply(self, grad: np.ndarray, local_step: int) -> None:
        # TF drops a stale gradient before it looks at its shape.
        if self._stale(local_step):
            return
        if not self.shape.is_compatible_with(grad.shape) or (
            self._sum is not None and self._sum.shape != grad.shape
        ):
            want = self._sum.shape if self._sum is not None else self.shape
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape mismatch: expected shape {want} for the accumulated gradient, got "
                f"{list(grad.shape)}",
            )
        self._sum = grad.astype(grad.dtype, copy=True) if self._sum is None else self._sum + grad
        self.count += 1
        self._pump()

    def _result(self):
        out = self._sum / self.count if self.mean else self._sum
        return np.asarray(out, dtype=self.dtype.as_numpy_dtype)

    def _reset(self):
        self._sum = None

    def _state(self):
        return self._sum

    def _merge(self, state) -> bool:
        if state is None:
            return True
        if self._sum is None:
            self._sum = state
        elif self._sum.shape != state.shape:
            return False
        else:
            self._sum = state + self._sum
        return True


class SparseAccumulator(_Accumulator):
    def __init__(self, name, dtype, shape, reduction_type):
        super().__init__(name, dtype, shape, reduction_type)
        self._rows: dict[int, list] = {}  # index -> [sum of rows, count]; first-seen order
        self._grad_shape = None
        self._row_shape = None

    def apply(self, indices, values, shape, has_known_shape, local_step) -> None:
        indices = np.asarray(indices).reshape(-1)
        values = np.asarray(values)
        if values.ndim < 1 or values.shape[0] != indices.shape[0]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape mismatch: {indices.shape[0]} indices but values have shape "
                f"{list(values.shape)}",
            )
        if has_known_shape:
            shape = [int(d) for d in np.asarray(shape).reshape(-1)]
            if not self.shape.is_compatible_with(shape) or list(values.shape[1:]) != shape[1:]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Shape mismatch: accumulator shape {self.shape}, gradient shape {shape}, "
                    f"values shape {list(values.shape)}",
                )
        row_shape = values.shape[1:]
        if self._row_shape is not None and row_shape != self._row_shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape mismatch: accumulated rows have shape {list(self._row_shape)}, got "
                f"{list(row_shape)}",
            )
        if self.shape.ndims is not None and tuple(self.shape.as_list()[1:]) != row_shape:
            if not tensor_shape.TensorShape(self.shape[1:]).is_compatible_with(row_shape):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Shape mismatch: accumulator shape {self.shape}, values shape "
                    f"{list(values.shape)}",
                )
        if self._stale(local_step):
            return
        rows = self._rows
        for i, idx in enumerate(indices.tolist()):
            entry = rows.get(idx)
            if entry is None:
                rows[idx] = [values[i].astype(values.dtype, copy=True), 1]
            else:
                entry[0] = entry[0] + values[i]
                entry[1] += 1
        self._row_shape = row_shape
        if has_known_shape:
            self._grad_shape = shape
        self.count += 1
        self._pump()

    def _result(self):
        np_dt = self.dtype.as_numpy_dtype
        idx = np.fromiter(self._rows.keys(), dtype=np.int64, count=len(self._rows))
        if self._rows:
            vals = np.stack([s / c if self.mean else s for s, c in self._rows.values()])
        else:
            vals = np.zeros((0, *(self._row_shape or ())), dtype=np_dt)
        if self._grad_shape is not None:
            shape = self._grad_shape
        elif self.shape.is_fully_defined():
            shape = self.shape.as_list()
        else:
            shape = [-1, *(self._row_shape or ())]
        return idx, np.asarray(vals, dtype=np_dt), np.asarray(shape, dtype=np.int64)

    def _reset(self):
        self._rows = {}
        self._grad_shape = None
        self._row_shape = None

    def _state(self):
        return self._rows, self._grad_shape, self._row_shape

    def _merge(self, state) -> bool:
        rows, grad_shape, row_shape = state
        if not rows and row_shape is None:
            return True
        if self._row_shape is not None and row_shape is not None and row_shape != self._row_shape:
            return False
        merged = {}  # the taken indices were seen first: they come first, as before
        for idx, (total, n) in rows.items():
            cur = self._rows.get(idx)
            merged[idx] = [total, n] if cur is None else [total + cur[0], n + cur[1]]
        for idx, entry in self._rows.items():
            if idx not in merged:
                merged[idx] = entry
        self._rows = merged
        if self._row_shape is None:
            self._row_shape = row_shape
        if self._grad_shape is None:
            self._grad_shape = grad_shape
        return True


# -- accumulator ops --------------------------------------------------------------------------

_ACC_ATTRS = {
    "dtype": ANY,
    "shape": None,
    "container": "",
    "shared_name": "",
    "reduction_type": "MEAN",
}


def _acc_shape(a):
    s = a["shape"]
    return tensor_shape.unknown_shape() if s is None else tensor_shape.as_shape(s)


def _make_acc_op(op_type, cls):
    op_def = register_op(
        op_type,
        outputs=["handle: string"],
        attrs=dict(_ACC_ATTRS),
        shape_fn=lambda op: [_SCALAR],
        stateful=True,
    )
    NotDifferentiable(op_type)
    PASS_RESOURCE_OPS.add(op_type)

    # Accumulators and mutexes are host objects: CPU kernels only.
    @op_def.kernel("CPU")
    async def _acc_kernel(ctx):
        a = ctx.attrs
        name = a["shared_name"] or ctx.op.name
        acc = _lookup(ctx, lambda: cls(name, a["dtype"], _acc_shape(a), a["reduction_type"]))
        if not isinstance(acc, cls) or acc.dtype != a["dtype"]:
            raise errors.InvalidArgumentError(
                None, None, f"Shared accumulator '{name}' has a different kind or dtype"
            )
        return acc.handle


_make_acc_op("ResourceConditionalAccumulator", DenseAccumulator)
_make_acc_op("SparseConditionalAccumulator", SparseAccumulator)


def _reg(name, inputs, outputs=(), attrs=None, shape_fn=None, is_async=False):
    op_def = register_op(
        name,
        inputs=inputs,
        outputs=outputs,
        attrs=attrs or {},
        shape_fn=shape_fn or (lambda op: [None] * len(op.outputs)),
        stateful=True,
        is_async=is_async,
    )
    NotDifferentiable(name)
    return op_def


ApplyDense = _reg(
    "ResourceAccumulatorApplyGradient",
    ["handle: string", "local_step: int64", "gradient: dtype"],
    attrs={"dtype": ANY},
)
TakeDense = _reg(
    "ResourceAccumulatorTakeGradient",
    ["handle: string", "num_required: int32"],
    ["average: dtype"],
    {"dtype": ANY},
    is_async=True,
)
NumAcc = _reg(
    "ResourceAccumulatorNumAccumulated",
    ["handle: string"],
    ["num_accumulated: int32"],
    shape_fn=lambda op: [_SCALAR],
)
SetStep = _reg("ResourceAccumulatorSetGlobalStep", ["handle: string", "new_global_step: int64"])
ApplySparse = _reg(
    "SparseAccumulatorApplyGradient",
    [
        "handle: string",
        "local_step: int64",
        "gradient_indices: int64",
        "gradient_values: dtype",
        "gradient_shape: int64",
    ],
    attrs={"dtype": ANY, "has_known_shape": False},
)
TakeSparse = _reg(
    "SparseAccumulatorTakeGradient",
    ["handle: string", "num_required: int32"],
    ["indices: int64", "values: dtype", "shape: int64"],
    {"dtype": ANY},
    is_async=True,
)
NumAccSparse = _reg(
    "AccumulatorNumAccumulated",
    ["handle: string"],
    ["num_accumulated: int32"],
    shape_fn=lambda op: [_SCALAR],
)
SetStepSparse = _reg("AccumulatorSetGlobalStep", ["handle: string", "new_global_step: int64"])


@ApplyDense.kernel("CPU")
async def _apply_dense(ctx, handle, local_step, grad):
    _resource(handle, DenseAccumulator).apply(np.asarray(grad), int(local_step))


@TakeDense.kernel("CPU")
async def _take_dense(ctx, handle, num_required):
    acc = _resource(handle, DenseAccumulator)
    return await acc.take(int(num_required), _on_take(acc))


@NumAcc.kernel("CPU")
@NumAccSparse.kernel("CPU")
async def _num_accumulated(ctx, handle):
    return np.int32(_resource(handle, _Accumulator).count)


@SetStep.kernel("CPU")
@SetStepSparse.kernel("CPU")
async def _set_global_step(ctx, handle, step):
    _resource(handle, _Accumulator).set_global_step(int(step))


@ApplySparse.kernel("CPU")
async def _apply_sparse(ctx, handle, local_step, indices, values, shape):
    acc = _resource(handle, SparseAccumulator)
    acc.apply(indices, values, shape, ctx.attrs["has_known_shape"], int(local_step))


@TakeSparse.kernel("CPU")
async def _take_sparse(ctx, handle, num_required):
    acc = _resource(handle, SparseAccumulator)
    return await acc.take(int(num_required), _on_take(acc))


# -- accumulator classes ----------------------------------------------------------------------


def _int64(x):
    from asyncflow.ops.math_ops import cast

    t = ops.convert_to_tensor(x)
    return t if t.dtype == _dtypes.int64 else cast(t, _dtypes.int64)


def _container():
    return getattr(ops.get_default_graph(), "_container", "") or ""


class ConditionalAccumulatorBase:
    """Shared API of the accumulators (TF1's `tf.ConditionalAccumulatorBase`)."""

    _num_op, _step_op = "ResourceAccumulatorNumAccumulated", "ResourceAccumulatorSetGlobalStep"

    def __init__(self, dtype, shape, accumulator_ref):
        self._dtype = _dtypes.as_dtype(dtype)
        self._shape = (
            tensor_shape.as_shape(shape) if shape is not None else tensor_shape.unknown_shape()
        )
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name.split("/")[-1]

    @property
    def accumulator_ref(self):
        return self._accumulator_ref

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    def num_accumulated(self, name=None):
        """Number of gradients accumulated since the last take."""
        if name is None:
            name = f"{self._name}_NumAccumulated"
        return ops.apply_op(self._num_op, [self._accumulator_ref], name=name).outputs[0]

    def set_global_step(self, new_global_step, name=None):
        """Set the step below which applied gradients are dropped as stale."""
        return ops.apply_op(
            self._step_op, [self._accumulator_ref, _int64(new_global_step)], name=name
        )

    @staticmethod
    def _make_ref(op_type, dtype, shape, shared_name, name, reduction_type):
        if reduction_type not in ("MEAN", "SUM"):
            raise ValueError(
                f"Attr 'reduction_type' of '{op_type}' Op passed string {reduction_type!r} "
                'not in: "MEAN", "SUM".'
            )
        attrs = {
            "dtype": _dtypes.as_dtype(dtype),
            "shape": None if shape is None else tensor_shape.as_shape(shape),
            "container": _container(),
            "shared_name": shared_name or "",
            "reduction_type": reduction_type,
        }
        return ops.apply_op(op_type, [], attrs, name=name).outputs[0]


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """Aggregates gradients; take_grad waits for num_required of them (TF1's)."""

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name=None,
        name="conditional_accumulator",
        reduction_type="MEAN",
    ):
        ref = self._make_ref(
            "ResourceConditionalAccumulator", dtype, shape, shared_name, name, reduction_type
        )
        super().__init__(dtype, shape, ref)

    def apply_grad(self, grad, local_step=0, name=None):
        """Add `grad` unless local_step is older than the global step (then it is dropped).

        Raises: ValueError at build time, InvalidArgumentError at run time, for shapes
        that do not match the accumulator's.
        """
        grad = ops.convert_to_tensor(grad, self._dtype)
        grad.shape.assert_is_compatible_with(self._shape)
        return ops.apply_op(
            "ResourceAccumulatorApplyGradient",
            [self._accumulator_ref, _int64(local_step), grad],
            name=name,
        )

    def take_grad(self, num_required, name=None):
        """Wait for num_required gradients, return their mean (or sum), reset, and
        advance the global step.

        Raises (at run time): InvalidArgumentError if num_required < 1.
        """
        op = ops.apply_op(
            "ResourceAccumulatorTakeGradient",
            [self._accumulator_ref, num_required],
            {"dtype": self._dtype},
            name=name,
        )
        out = op.outputs[0]
        out.set_shape(self._shape)
        return out


SparseAccumulatorTakeGradient = collections.namedtuple(
    "SparseAccumulatorTakeGradient", ["indices", "values", "shape"]
)


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """Aggregates sparse gradients (indices, values, shape), averaged per index."""

    _num_op, _step_op = "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep"

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name=None,
        name="sparse_conditional_accumulator",
        reduction_type="MEAN",
    ):
        ref = self._make_ref(
            "SparseConditionalAccumulator", dtype, shape, shared_name, name, reduction_type
        )
        super().__init__(dtype, shape, ref)

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None):
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step, name)

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0, name=None):
        """Add a sparse gradient; dropped if local_step is older than the global step."""
        values = ops.convert_to_tensor(grad_values, self._dtype)
        shape = _int64([] if grad_shape is None else grad_shape)
        return ops.apply_op(
            "SparseAccumulatorApplyGradient",
            [self._accumulator_ref, _int64(local_step), _int64(grad_indices), values, shape],
            {"has_known_shape": grad_shape is not None},
            name=name,
        )

    def take_grad(self, num_required, name=None):
        """Returns (indices, values, shape): per-index means (or sums)."""
        op = ops.apply_op(
            "SparseAccumulatorTakeGradient",
            [self._accumulator_ref, num_required],
            {"dtype": self._dtype},
            name=name,
        )
        return SparseAccumulatorTakeGradient(*op.outputs)

    def take_indexed_slices_grad(self, num_required, name=None):
        from asyncflow.indexed_slices import IndexedSlices

        r = self.take_grad(num_required, name=name)
        return IndexedSlices(indices=r.indices, values=r.values, dense_shape=r.shape)


# -- mutex ------------------------------------------------------------------------------------


class MutexResource:
    """A mutex whose holders are `_LockToken`s; waiters are served in arrival order."""

    def __init__(self, name):
        self.name = name
        self.locked = False
        self._waiters: deque = deque()
        self._loop = None
        self.handle = _obj0(self)

    async def acquire(self) -> _LockToken:
        self._loop = asyncio.get_running_loop()
        if not self.locked and not self._waiters:
            self.locked = True
            return _LockToken(self)
        fut = self._loop.create_future()
        self._waiters.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                fut.result().release()  # handed over, but this step will not use it
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
            raise

    def _release(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(_LockToken(self))  # stays locked: ownership moves
                return
        self.locked = False

    def _release_anywhere(self) -> None:
        loop = self._loop
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or here is loop:
            self._release()
        elif not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._release)
            except RuntimeError:  # closed meanwhile
                pass


class _LockToken:
    """Holds the mutex until released explicitly, by its step failing, or when dropped."""

    __slots__ = ("mutex", "released", "_lock")

    def __init__(self, mutex):
        self.mutex = mutex
        self.released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self.released:
                return
            self.released = True
        self.mutex._release_anywhere()

    def __call__(self, error) -> None:  # a step failure callback
        self.release()

    def __del__(self):
        if not self.released:
            self.released = True
            self.mutex._release_anywhere()


MutexV2 = register_op(
    "MutexV2",
    outputs=["resource: string"],
    attrs={"container": "", "shared_name": ""},
    shape_fn=lambda op: [_SCALAR],
    stateful=True,
)
MutexLock = _reg(
    "MutexLock",
    ["mutex: string"],
    ["mutex_lock: string"],
    shape_fn=lambda op: [_SCALAR],
    is_async=True,
)
ConsumeMutexLock = _reg("ConsumeMutexLock", ["mutex_lock: string"], shape_fn=lambda op: [])
NotDifferentiable("MutexV2")


@MutexV2.kernel("CPU")
async def _mutex_v2(ctx):
    name = ctx.attrs["shared_name"] or ctx.op.name
    return _lookup(ctx, lambda: MutexResource(name)).handle


@MutexLock.kernel("CPU")
async def _mutex_lock(ctx, handle):
    token = await _resource(handle, MutexResource).acquire()
    sctx = current_step()
    if sctx is not None:
        sctx.on_failure(token)
    return _obj0(token)


@ConsumeMutexLock.kernel("CPU")
async def _consume_mutex_lock(ctx, lock):
    _resource(lock, _LockToken).release()


def mutex_v2(container="", shared_name="", name=None):
    """A mutex resource (TF's raw MutexV2); returns its handle."""
    attrs = {"container": container or _container(), "shared_name": shared_name or ""}
    return ops.apply_op("MutexV2", [], attrs, name=name).outputs[0]


def mutex_lock(mutex, name=None):
    """Acquire `mutex` (suspends while it is held); returns the lock tensor.

    The lock is released by `consume_mutex_lock`, when the lock tensor is dropped, or
    when the step fails.
    """
    return ops.apply_op("MutexLock", [mutex], name=name).outputs[0]


def consume_mutex_lock(mutex_lock, name=None):
    """Release the lock held by `mutex_lock` (run it after the guarded ops)."""
    return ops.apply_op("ConsumeMutexLock", [mutex_lock], name=name)
