"""State ops: variables (VariableV2) and the ops that update them in place.

A VariableV2 kernel returns a `VarRef`, the variable's resource object, kept in the
session's (or a named, process-wide) resource container.  Ops that declare a
`Ref(T)` input (Assign, AssignAdd, Scatter*, IsVariableInitialized) receive the
VarRef; every other consumer receives `VarRef.read()` from the executor.

Copy-on-write (DESIGN.md, "State"), by explicit bookkeeping of what was handed out:
- `read()` hands out the current buffer without copying it, as a read-only array on a
  lease: a small object of this buffer's lending that every array derived from it
  (views included: NumPy keeps a view's non-array base) holds.  The VarRef keeps only
  weak references to its leases.
- An update writes into the current buffer only when no lease of it is alive (the
  value each read handed out, and everything made from it, is gone), else it builds a
  new buffer and swaps it in.  A value fetched earlier, enqueued, held by a kernel of
  this or a concurrent step, therefore never changes under its holder, and a training
  loop whose reads are dropped before the next update pays no copy per step.  A lease
  that lives longer than it needs to (a collector that frees late) only costs a copy.
- A device (CuPy) buffer is lent the same way: `read()` hands out a new array over
  the buffer's memory whose owner is the lease (`cuda.UnownedMemory(ptr, size,
  lease)`), and every view of it, CuPy or not, holds that memory and so the lease.
  Work enqueued on the device's stream before the last lease died runs before any
  later in-place update (one stream, in order); work on another stream (a copy) holds
  the array it reads until it has run.
- A buffer that cannot be lent through a lease (object dtype, an array module
  without `cuda.UnownedMemory`) is marked shared once read: the next update copies it.
- `pin()` hands out the buffer itself to a caller that lets nothing derived from it
  outlive a synchronous stretch on its thread (a straight-line step's direct form,
  whose calls make new arrays): no lease and no array is made, and until `unpin()` the
  buffer is not exclusive, so an update meanwhile (from another thread) copies.

Invariants:
- `VarRef.value` is None (uninitialised) or an array of exactly the variable's dtype
  that owns its data and is read-only outside an update.  The read-only flag makes a
  consumer that mutates an input (or a user who mutates a fetched value) fail loudly
  instead of silently corrupting the variable.  Code outside this module hands the
  buffer out only through `read()`.
- Updates never await: the lease check and the write happen in one event-loop step,
  so no reader can take the buffer between the decision and the write.
"""

from __future__ import annotations

import weakref

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.kernel_api import current_step
from asyncflow.ops.math_helpers import merged_shapes, scatter_at
from asyncflow.ops.strided_slice_spec import (
    MASK_DEFAULTS,
    SliceError,
    basic_index,
    mask_attrs,
    slice_masks,
    strided_slice_spec,
)
from asyncflow.registry import (
    ANY,
    INDEX,
    NUMERIC,
    REAL,
    REQUIRED,
    NotDifferentiable,
    register_op,
)

__all__ = [
    "VarRef",
    "variable_op_v2",
    "variable_op",
    "temporary_variable",
    "destroy_temporary_variable",
    "assign",
    "assign_add",
    "assign_sub",
    "scatter_update",
    "scatter_add",
    "scatter_sub",
    "scatter_mul",
    "scatter_div",
    "scatter_min",
    "scatter_max",
    "is_variable_initialized",
    "count_up_to",
]


def _shape_str(shape) -> str:
    """TF's TensorShape::DebugString: "[2,3]", "[]"."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def _set_writeable(buf, flag: bool) -> None:
    if isinstance(buf, np.ndarray):  # device arrays (CuPy) have no writeable flag
        buf.setflags(write=flag)  # (the flags object's setter, without making the object)


def _writable_copy(value):
    buf = value.copy()
    _set_writeable(buf, True)
    return buf


async def writable_targets_on(refs, device) -> list:
    """`VarRef.writable_target_on` of each of `refs`; all or none (a failed copy
    abandons the targets taken before it)."""
    targets = writable_targets_now(refs)
    if targets is not None:
        return targets
    targets = []
    try:
        for r in refs:
            targets.append(await r.writable_target_on(device))
    except BaseException:
        for r, t in zip(refs, targets):
            r.abandon(t)
        raise
    return targets


def writable_targets_now(refs) -> list | None:
    """`writable_targets_on(refs, ...)` where every one of `refs` is exclusive (its
    own buffer, no copy to make): the buffers, taken now; else None, nothing taken.
    (An optimizer's update takes three or more per step: no coroutine each, and
    `_exclusive` and `_set_writeable` written out.)"""
    for r in refs:
        lendings = r._lendings
        if r.value is None or lendings.live or lendings.shared or lendings.pins:
            return None
    targets = []
    for r in refs:
        r._writers += 1
        buf = r.value
        if isinstance(buf, np.ndarray):  # (device arrays have no writeable flag)
            buf.setflags(write=True)
        targets.append(buf)
    return targets


def commit_targets(refs, targets: list) -> None:
    """`r.commit(t)` for each of `refs` and its target from `writable_targets_*`, the
    usual case (updated in place, no other writer) written out."""
    for r, buf in zip(refs, targets):
        r._writers -= 1
        if buf is r.value:
            if not r._writers and isinstance(buf, np.ndarray):
                buf.setflags(write=False)  # (all that _install does for it)
            continue
        r._writers += 1
        r.commit(buf)


class _Lease:
    """One lending of a variable's buffer: the base of the array `read()` hands out,
    hence held by every array derived from it.  Holds the buffer, so a lent value
    outlives a swap."""

    __slots__ = ("__array_interface__", "buffer", "__weakref__")


class _Lendings:
    """The live leases of one buffer (weak references, dropped as the leases die)."""

    __slots__ = ("live", "shared", "pins")

    def __init__(self):
        self.live: set = set()
        self.shared = False  # handed out without a lease: never exclusive again
        self.pins = 0  # pin()s of this buffer not yet unpinned

    def add(self, lease) -> None:
        self.live.add(weakref.ref(lease, self.live.discard))

    def unpin(self) -> None:
        self.pins -= 1


class VarRef:
    """A variable's state: its current buffer (None until the first Assign)."""

    __slots__ = ("value", "dtype", "shape", "name", "_iface", "_xp", "_lendings", "_writers")

    def __init__(self, dtype, shape=None, name: str = ""):
        self.value = None
        self.dtype = dtypes.as_dtype(dtype)
        self.shape = tensor_shape.as_shape(shape)  # (a shape attr may be a plain list)
        self.name = name
        self._iface = None
        self._xp = None  # the array module of a device buffer that is lent by lease
        self._lendings = _Lendings()
        # Updates between writable_target and commit/abandon: an update may run off the
        # loop, and two unlocked updates of one variable may overlap (TF's use_locking=
        # False); the buffer is protected again only when the last of them is done.
        self._writers = 0

    def __repr__(self) -> str:
        state = "uninitialised" if self.value is None else f"shape={self.value.shape}"
        return f"<VarRef {self.name} {self.dtype.name} {state}>"

    def read(self):
        """The current buffer, not a copy: a read-only array lent on a lease.

        Raises:
          FailedPreconditionError: the variable has not been assigned yet.
        """
        value = self.value
        if value is None:
            raise self._uninitialized_error()
        iface = self._iface
        if iface is None:
            if self._xp is not None:
                return self._lend_device(value)
            self._lendings.shared = True
            return value
        lease = _Lease()
        lease.__array_interface__ = iface
        lease.buffer = value
        self._lendings.add(lease)
        out = np.asarray(lease)
        # The array interface carries only a typestr: an extension dtype (ml_dtypes'
        # bfloat16, typestr "<V2") comes back as raw void and is viewed as itself again.
        return out if out.dtype == value.dtype else out.view(value.dtype)

    def pin(self):
        """`(buffer, lendings)`: the current host buffer itself, not exclusive until
        `lendings.unpin()`; None where it has none to pin (uninitialised: `read()`
        raises; a device or object buffer: `read()` lends it).  For a caller that lets
        nothing derived from the buffer outlive one synchronous stretch on its thread
        (no await in it); the buffer is read-only, as every read's."""
        value = self.value
        if value is None or self._iface is None:
            return None
        lendings = self._lendings
        lendings.pins += 1
        return value, lendings

    def _lend_device(self, value):
        """A device array over `value`'s memory whose owner is a new lease."""
        xp = self._xp
        lease = _Lease()
        lease.buffer = value
        self._lendings.add(lease)
        mem = xp.cuda.UnownedMemory(value.data.ptr, value.nbytes, lease, value.device.id)
        return xp.ndarray(value.shape, value.dtype, xp.cuda.MemoryPointer(mem, 0), value.strides)

    def is_initialized(self) -> bool:
        return self.value is not None

    # -- copy-on-write -----------------------------------------------------------------

    def _exclusive(self) -> bool:
        """True when nothing a read handed out is still alive (no fetch, view, reader)."""
        lendings = self._lendings
        return not lendings.live and not lendings.shared and not lendings.pins

    def _install(self, buf, xp=None) -> None:
        """Make `buf` the current buffer; `xp`: its array module when it is a device
        array (None keeps the module of the buffer it replaces)."""
        _set_writeable(buf, False)
        if buf is self.value:  # updated in place: no lease of it was alive
            return
        self.value = buf
        self._lendings = _Lendings()
        if type(buf) is np.ndarray:
            self._xp = None
            self._iface = None if buf.dtype.hasobject else buf.__array_interface__
            return
        self._iface = None
        if xp is not None and xp is not np:
            cuda = getattr(xp, "cuda", None)
            self._xp = xp if hasattr(cuda, "UnownedMemory") else None
        if self._xp is not None and not buf.flags.c_contiguous:
            # A read lends the buffer as a (pointer, size) window, which a strided one
            # (a transposed initial value) is not: keep a contiguous copy, made here on
            # the assigning kernel's stream, after its inputs.
            buf = buf.copy()
            _set_writeable(buf, False)
            self.value = buf

    def assign(self, value, validate_shape: bool, xp=np) -> None:
        """Set the variable to a copy of `value` (TF's Assign: the input is never aliased).
        `xp` is the array module of the device the variable lives on.

        Raises:
          InvalidArgumentError: validate_shape and the shapes differ.
        """
        value = xp.asarray(value)
        lhs_shape = self._current_shape()
        if validate_shape and lhs_shape is not None and tuple(lhs_shape) != value.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Assign requires shapes of both tensors to match. lhs shape= "
                f"{_shape_str(lhs_shape)} rhs shape= {_shape_str(value.shape)}",
            )
        if (
            self.value is not None
            and self.value.shape == value.shape
            and type(self.value) is type(value)
            and self._exclusive()
        ):
            buf = self.value
            _set_writeable(buf, True)
            xp.copyto(buf, value)
            _set_writeable(buf, False)
            return
        # Always copy: the input may be a Const's shared value or another op's output.
        self._install(xp.array(value, dtype=self.dtype.as_numpy_dtype, copy=True), xp)

    def _uninitialized_error(self) -> errors.OpError:
        return errors.FailedPreconditionError(
            None, None, f"Attempting to use uninitialized value {self.name}"
        )

    def _current(self):
        """The current buffer, for a check within this event-loop step (not handed out).

        Raises:
          FailedPreconditionError: the variable has not been assigned yet.
        """
        if self.value is None:
            self.read()  # raises
        return self.value

    def _current_shape(self):
        if self.value is not None:
            return self.value.shape
        if self.shape.is_fully_defined():
            return tuple(self.shape.as_list())
        return None

    def apply_ufunc(self, ufunc, operand, xp=np, ref_op=False) -> None:
        """self = ufunc(self, operand), in place when the buffer is exclusively ours
        (`ufunc` names one of `xp`'s, the array module of the variable's device).

        Raises:
          FailedPreconditionError: uninitialised.
          InvalidArgumentError: shapes differ (worded as TF's ref op AssignAdd/AssignSub
            when `ref_op`, else as its resource AssignAddVariableOp).
        """
        shape = self._current().shape
        operand = xp.asarray(operand)
        ufunc = getattr(xp, ufunc) if isinstance(ufunc, str) else ufunc
        if shape != operand.shape:
            if ref_op:
                raise errors.InvalidArgumentError(
                    None, None, "Parameters and update must be the same size"
                )
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Cannot update variable with shape {_shape_str(shape)} using a "
                f"Tensor with shape {_shape_str(operand.shape)}, shapes must be equal.",
            )
        if self._exclusive():
            buf = self.value
            _set_writeable(buf, True)
            ufunc(buf, operand, out=buf)
            _set_writeable(buf, False)
        else:
            old = self.value
            self._install(ufunc(old, operand, out=xp.empty_like(old)), xp)

    def writable_target(self):
        """The buffer to update in place: the current one if exclusive, else a copy.

        The caller writes into it and passes it to `commit`.
        """
        self._writers += 1
        if self._exclusive():
            buf = self.value
            _set_writeable(buf, True)
            return buf
        buf = self.value.copy()
        _set_writeable(buf, True)
        return buf

    async def writable_target_on(self, device):
        """`writable_target`, its copy (when a lease is alive) computed as `device`'s
        work: a large variable's copy leaves the loop like any heavy kernel (a LeNet
        dense layer's 12.8 MB weight held the loop 1.5 ms per step)."""
        self._writers += 1
        if self._exclusive():
            buf = self.value
            _set_writeable(buf, True)
            return buf
        try:
            buf = await device.compute(_writable_copy, self.value)
        except BaseException:
            self._writers -= 1
            raise
        return buf

    def commit(self, buf) -> None:
        """Install `buf` (from writable_target), written."""
        self._writers -= 1
        if self._writers and buf is self.value:
            return  # another update still writes into this buffer: it stays writable
        self._install(buf)

    def abandon(self, buf) -> None:
        """An update that took `buf` from writable_target failed before committing."""
        self._writers -= 1
        if not self._writers and buf is self.value:
            _set_writeable(buf, False)


# -- VariableV2 ---------------------------------------------------------------------------

VariableV2 = register_op(
    "VariableV2",
    outputs=["ref: Ref(dtype)"],
    attrs={"shape": REQUIRED, "dtype": ANY, "container": "", "shared_name": ""},
    shape_fn=lambda op: [op._attr("shape")],
    stateful=True,
)
NotDifferentiable("VariableV2")


# TF1's first variable op ("Variable", `state_ops.variable_op`): VariableV2 by another name.
VariableV1 = register_op(
    "Variable",
    outputs=["ref: Ref(dtype)"],
    attrs={"shape": REQUIRED, "dtype": ANY, "container": "", "shared_name": ""},
    shape_fn=lambda op: [op._attr("shape")],
    stateful=True,
)
NotDifferentiable("Variable")


# Variable kernels run on every device: VarRef keeps the buffer in the memory of the
# device the variable is placed on (NumPy on a CPU, CuPy on a GPU), and the ops that take
# the variable by reference are colocated with it (the placer).  A variable whose
# colocated ops include one without a GPU kernel (Scatter*, CountUpTo) stays on a CPU.
@VariableV1.kernel()
@VariableV2.kernel()
async def _variable_v2(ctx):
    attrs = ctx.attrs
    container = attrs["container"]
    op_name = ctx.node_name  # (op.name, kept on the context: a step reads every variable)
    return ctx.resource_mgr(container).lookup_or_create(
        container,
        attrs["shared_name"] or op_name,
        lambda: VarRef(attrs["dtype"], attrs["shape"], op_name),
    )


def _variable_inline(ctx):
    """The kernel's inline form (kernel_api): the same lookup, its arguments bound once."""
    attrs = ctx.attrs
    container = attrs["container"]
    name = attrs["shared_name"] or ctx.op.name
    op_name = ctx.op.name
    lookup_or_create = ctx.resource_mgr(container).lookup_or_create

    def factory():
        return VarRef(attrs["dtype"], attrs["shape"], op_name)

    return lambda: lookup_or_create(container, name, factory)


_variable_v2.inline = _variable_inline


def variable_op_v2(shape, dtype, name="Variable", container="", shared_name=""):
    """Create a VariableV2 op; returns its ref Tensor (TF's `state_ops.variable_op_v2`)."""
    op = ops.apply_op(
        "VariableV2",
        [],
        {
            "shape": tensor_shape.as_shape(shape),
            "dtype": dtypes.as_dtype(dtype),
            "container": container,
            "shared_name": shared_name,
        },
        name=name,
    )
    return op.outputs[0]


def variable_op(shape, dtype, name="Variable", set_shape=True, container="", shared_name=""):
    """Create a "Variable" op (TF1's deprecated `state_ops.variable_op`); returns its ref
    Tensor, of unknown shape unless `set_shape`."""
    shape = tensor_shape.as_shape(shape) if set_shape else tensor_shape.unknown_shape()
    attrs = {
        "shape": shape,
        "dtype": dtypes.as_dtype(dtype),
        "container": container,
        "shared_name": shared_name,
    }
    return ops.apply_op("Variable", [], attrs, name=name).outputs[0]


# -- TemporaryVariable / DestroyTemporaryVariable --------------------------------------
# TF1's step-scoped ref variables: a TemporaryVariable lives in its step's container under
# `var_name` (the op's name when empty) until DestroyTemporaryVariable hands back its value
# or the step ends.


def _step_temporaries(op_type: str) -> dict:
    sctx = current_step()
    if sctx is None:
        raise errors.InternalError(None, None, f"{op_type} runs only inside a step")
    if sctx.temporaries is None:
        sctx.temporaries = {}
    return sctx.temporaries


def _temporary_path(name: str) -> str:
    """The name TF's messages give a temporary variable (its step container's)."""
    return f"__per_step_{current_step().step_id}/{name}/frame:0/iter:0/TemporaryVariable"


TemporaryVariable = register_op(
    "TemporaryVariable",
    outputs=["ref: Ref(dtype)"],
    attrs={"shape": REQUIRED, "dtype": ANY, "var_name": ""},
    shape_fn=lambda op: [tensor_shape.as_shape(op._attr("shape"))],
    stateful=True,
)
NotDifferentiable("TemporaryVariable")


@TemporaryVariable.kernel()
async def _temporary_variable(ctx):
    attrs = ctx.attrs
    name = attrs["var_name"] or ctx.op.name
    temps = _step_temporaries("TemporaryVariable")
    if name in temps:
        raise errors.AlreadyExistsError(
            None, None, f"Resource {_temporary_path(name)} already exists."
        )
    shape = tensor_shape.as_shape(attrs["shape"])
    if not shape.is_fully_defined():
        raise errors.InvalidArgumentError(
            None, None, f"TemporaryVariable {name} needs a fully defined shape, got {shape}"
        )
    # TF allocates the buffer uninitialised; reading it before an Assign is allowed.
    dtype = dtypes.as_dtype(attrs["dtype"])
    ref = VarRef(dtype, shape, name)
    ref.assign(ctx.xp.zeros(shape.as_list(), dtype.as_numpy_dtype), False, ctx.xp)
    temps[name] = ref
    return ref


def _destroy_temporary_shape(op):
    if not op._attr("var_name"):
        raise ValueError("DestroyTemporaryVariable: var_name must not be empty")
    return [op.inputs[0].shape]


DestroyTemporaryVariable = register_op(
    "DestroyTemporaryVariable",
    inputs=["ref: Ref(T)"],
    outputs=["value: T"],
    attrs={"T": ANY, "var_name": REQUIRED},
    shape_fn=_destroy_temporary_shape,
    stateful=True,
)
NotDifferentiable("DestroyTemporaryVariable")


@DestroyTemporaryVariable.kernel()
async def _destroy_temporary_variable(ctx, ref):
    name = ctx.attrs["var_name"]
    temps = _step_temporaries("DestroyTemporaryVariable")
    if temps.pop(name, None) is None:
        raise errors.NotFoundError(None, None, f"Resource {_temporary_path(name)} does not exist.")
    return ref.read().copy()


def temporary_variable(shape, dtype, var_name="", name=None):
    """A step-scoped ref variable (TF's `gen_state_ops.temporary_variable`)."""
    attrs = {"shape": tensor_shape.as_shape(shape), "dtype": dtypes.as_dtype(dtype)}
    attrs["var_name"] = var_name
    return ops.apply_op("TemporaryVariable", [], attrs, name=name).outputs[0]


def destroy_temporary_variable(ref, var_name, name=None):
    """The value of temporary variable `var_name`, which ends it (TF's
    `gen_state_ops.destroy_temporary_variable`).

    Raises (when run):
      NotFoundError: no temporary variable of that name in this step.
    """
    attrs = {"var_name": var_name}
    return ops.apply_op("DestroyTemporaryVariable", [ref], attrs, name=name).outputs[0]


# -- Assign -----------------------------------------------------------------------------


def _assign_shape(op):
    # TF: validate_shape merges both shapes (a variable of known shape assigned a value
    # of unknown shape keeps its shape); without it, the value's shape.
    ref, value = op.inputs[0].shape, op.inputs[1].shape
    if op._attr("validate_shape"):
        return [merged_shapes(ref, value)]
    return [value]


Assign = register_op(
    "Assign",
    inputs=["ref: Ref(T)", "value: T"],
    outputs=["output_ref: T"],
    attrs={"T": ANY, "validate_shape": True, "use_locking": True},
    shape_fn=_assign_shape,
    stateful=True,
)
NotDifferentiable("Assign")


def require_ref(ref, method: str) -> None:
    """TF1's update builders call a method of a `ref` that is not a ref tensor (a
    resource variable's `assign`, `_lazy_read`, `handle`): a plain Tensor or a Python
    value has none, so they fail with that AttributeError, not a TypeError.

    Raises:
      AttributeError: `ref` is a Tensor that is not a ref, or has no dtype.
    """
    if isinstance(ref, ops.Tensor):
        if not ref._is_ref:
            raise AttributeError(f"'Tensor' object has no attribute '{method}'")
    elif not hasattr(ref, "dtype"):
        raise AttributeError(f"'{type(ref).__name__}' object has no attribute 'dtype'")


def _is_resource(ref) -> bool:
    """A resource variable: TF1's assign builders call its own methods (AssignVariableOp
    and the like, returning what they return) instead of the ref ops."""
    return not isinstance(ref, ops.Tensor) and getattr(ref, "_handle", None) is not None


@Assign.kernel()
async def _assign(ctx, ref, value):
    ref.assign(value, ctx.attrs["validate_shape"], ctx.xp)
    return ref.read()


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """Update `ref` by assigning `value`; returns the new value.

    Raises (when run):
      InvalidArgumentError: validate_shape (the default) and the shapes differ.
    """
    require_ref(ref, "assign")
    if _is_resource(ref):
        return ref.assign(value, name=name)
    attrs = {"validate_shape": validate_shape, "use_locking": use_locking}
    return ops.apply_op("Assign", [ref, value], attrs, name=name).outputs[0]


# -- StridedSliceAssign (TF1's `v[...].assign(value)`) ----------------------------------


def slice_assign(var, begin, end, strides, value, masks, xp=np) -> None:
    """`var[begin:end:strides] = value` as TF's StridedSliceAssign (also the resource
    variables' kernel): `value` broadcasts to the slice's final shape; an empty slice
    writes nothing.

    Raises:
      InvalidArgumentError: a bad slice spec for the variable's shape, or a value that
        does not broadcast to the slice.
      FailedPreconditionError: the variable is not initialized.
    """
    params = var._current()
    begin, end, strides = np.asarray(begin), np.asarray(end), np.asarray(strides)
    if not (begin.ndim == end.ndim == strides.ndim == 1) or not (
        begin.shape == end.shape == strides.shape
    ):
        raise errors.InvalidArgumentError(
            None,
            None,
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            f"{_shape_str(begin.shape)}, {_shape_str(end.shape)}, and "
            f"{_shape_str(strides.shape)} instead.",
        )
    try:
        final, canon = strided_slice_spec(list(params.shape), begin, end, strides, masks)
    except SliceError as e:
        raise errors.InvalidArgumentError(None, None, str(e)) from None
    if not all(final):  # (nothing to write: TF checks nothing more either)
        return
    value = xp.asarray(value)
    try:
        value = xp.broadcast_to(value, tuple(final))
    except ValueError:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Cannot broadcast input shape {_shape_str(value.shape)} into final shape "
            f"{_shape_str(final)}",
        ) from None
    target = var.writable_target()
    try:
        view = target[basic_index(canon)]
        view[...] = value.reshape(view.shape)
    except BaseException:
        var.abandon(target)
        raise
    var.commit(target)


StridedSliceAssign = register_op(
    "StridedSliceAssign",
    inputs=["ref: Ref(T)", "begin: Index", "end: Index", "strides: Index", "value: T"],
    outputs=["output_ref: T"],
    attrs={"T": ANY, "Index": INDEX, **MASK_DEFAULTS},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
)
NotDifferentiable("StridedSliceAssign")


@StridedSliceAssign.kernel(host_memory=("begin", "end", "strides"))
async def _strided_slice_assign(ctx, ref, begin, end, strides, value):
    slice_assign(ref, begin, end, strides, value, slice_masks(ctx.attrs), ctx.xp)
    return ref.read()


def strided_slice_assign(
    ref,
    begin,
    end,
    strides,
    value,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
    name=None,
):
    """TF's `gen_array_ops.strided_slice_assign`: `ref[slice] = value`; the new value."""
    attrs = mask_attrs(begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    return ops.apply_op(
        "StridedSliceAssign", [ref, begin, end, strides, value], attrs, name=name
    ).outputs[0]


# -- AssignAdd / AssignSub --------------------------------------------------------------


def _merge_both_shape(op):
    return [merged_shapes(op.inputs[0].shape, op.inputs[1].shape)]


def _register_assign_update(op_type: str, ufunc):
    op_def = register_op(
        op_type,
        inputs=["ref: Ref(T)", "value: T"],
        outputs=["output_ref: T"],
        attrs={"T": NUMERIC, "use_locking": False},
        shape_fn=_merge_both_shape,
        stateful=True,
    )
    NotDifferentiable(op_type)

    @op_def.kernel()
    async def _kernel(ctx, ref, value):
        # A large variable's update would hold the loop: its cost decides where it runs.
        await ctx.compute(ref.apply_ufunc, ufunc, value, ctx.xp, True)
        return ref.read()

    return op_def


AssignAdd = _register_assign_update("AssignAdd", "add")
AssignSub = _register_assign_update("AssignSub", "subtract")


def assign_add(ref, value, use_locking=None, name=None):
    """Update `ref` by adding `value`; returns the new value.

    Raises (when run):
      FailedPreconditionError: `ref` is uninitialised.
      InvalidArgumentError: shapes differ.
    """
    require_ref(ref, "assign_add")
    if _is_resource(ref):
        return ref.assign_add(value)  # (TF drops `name` here)
    attrs = {"use_locking": use_locking}
    return ops.apply_op("AssignAdd", [ref, value], attrs, name=name).outputs[0]


def assign_sub(ref, value, use_locking=None, name=None):
    """Update `ref` by subtracting `value`; returns the new value.

    Raises (when run):
      FailedPreconditionError: `ref` is uninitialised.
      InvalidArgumentError: shapes differ.
    """
    require_ref(ref, "assign_sub")
    if _is_resource(ref):
        return ref.assign_sub(value)
    attrs = {"use_locking": use_locking}
    return ops.apply_op("AssignSub", [ref, value], attrs, name=name).outputs[0]


# -- Scatter* -----------------------------------------------------------------------------


def _scatter_shape(op):
    var, indices, updates = (t.shape for t in op.inputs)
    if updates.ndims != 0:
        if var.ndims is None or indices.ndims is None:
            expected = tensor_shape.unknown_shape()
        else:
            expected = indices.concatenate(var[1:])
        updates.merge_with(expected)
    return [var]


def _scatter_check(params, indices, updates) -> None:
    if params.ndim < 1:
        raise errors.InvalidArgumentError(
            None, None, f"params must be at least 1-D, got shape {_shape_str(params.shape)}"
        )
    if updates.ndim != 0 and updates.shape != indices.shape + params.shape[1:]:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = "
            f"[], got updates.shape {_shape_str(updates.shape)}, indices.shape "
            f"{_shape_str(indices.shape)}, params.shape {_shape_str(params.shape)}",
        )
    limit = params.shape[0]
    flat = indices.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= limit))
    if bad.size:
        i = int(bad[0])
        where = ",".join(str(int(k)) for k in np.unravel_index(i, indices.shape))
        where = f"[{where}]" if indices.ndim else ""
        raise errors.InvalidArgumentError(
            None, None, f"indices{where} = {flat[i]} is not in [0, {limit})"
        )


def _scatter_assign(target, idx, upd):
    target[idx] = upd  # duplicates: one of them wins, unspecified which (as TF)


def _scatter_div(target, idx, upd):
    if target.dtype.kind not in "iu":
        np.divide.at(target, idx, upd)
        return
    # C++ integer `/` truncates toward zero; apply duplicates one after another.
    upd = np.broadcast_to(upd, idx.shape + target.shape[1:])
    for i, row in enumerate(idx.tolist()):
        q = np.abs(target[row]) // np.abs(upd[i])
        target[row] = np.where((target[row] < 0) != (upd[i] < 0), -q, q)


def _device_div(xp, a, b):
    if a.dtype.kind not in "iu":
        return a / b
    q = xp.abs(a) // xp.abs(b)  # C++ integer `/`: truncated toward zero
    return xp.where((a < 0) != (b < 0), -q, q)


# Scatters a device's array module has no `.at` for: applied in rounds (below).
_IN_ROUNDS = {"multiply": lambda xp, a, b: a * b, "divide": _device_div}


def _scatter_in_rounds(xp, fn, target, flat_idx, updates) -> None:
    """`target[i] = fn(target[i], u)` for each (i, u), duplicates in order: round r
    applies each index's r-th occurrence, so no round writes one row twice.  The
    indices are on the host (the kernel's host-memory input)."""
    n = flat_idx.size
    if not n:
        return
    order = np.argsort(flat_idx, kind="stable")
    ranked = flat_idx[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    for r in range(int(rank.max()) + 1):
        sel = np.flatnonzero(rank == r)
        rows = xp.asarray(flat_idx[sel])
        upd = updates[xp.asarray(sel)] if updates.ndim else updates
        target[rows] = fn(xp, target[rows], upd)


def _register_scatter(op_type: str, apply, numeric: bool, allowed=None, device_op=None):
    """`device_op`: the scatter on a device's array module (math_helpers.scatter_at's
    name, or "update"); None registers a CPU kernel only."""
    op_def = register_op(
        op_type,
        inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
        outputs=["output_ref: T"],
        attrs={
            "T": allowed or (NUMERIC if numeric else ANY),
            "Tindices": INDEX,
            "use_locking": True,
        },
        shape_fn=_scatter_shape,
        stateful=True,
    )
    NotDifferentiable(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx, ref, indices, updates):
        params = ref._current()
        indices, updates = np.asarray(indices), np.asarray(updates)
        _scatter_check(params, indices, updates)
        flat_idx = indices.reshape(-1)
        if updates.ndim:
            updates = updates.reshape((flat_idx.size,) + params.shape[1:])
        target = ref.writable_target()
        apply(target, flat_idx, updates)
        ref.commit(target)
        return ref.read()

    if device_op is not None:

        @op_def.kernel("GPU", host_memory=("indices",))
        async def _device_kernel(ctx, ref, indices, updates):
            xp = ctx.xp
            params = ref._current()
            indices, updates = np.asarray(indices), xp.asarray(updates)
            _scatter_check(params, indices, updates)  # (on the host: indices live there)
            flat_idx = indices.reshape(-1)
            if updates.ndim:
                updates = updates.reshape((flat_idx.size,) + params.shape[1:])
            target = ref.writable_target()
            try:
                idx = xp.asarray(flat_idx)
                if device_op == "update":
                    target[idx] = updates
                elif device_op in _IN_ROUNDS:
                    _scatter_in_rounds(xp, _IN_ROUNDS[device_op], target, flat_idx, updates)
                else:
                    scatter_at(xp, device_op, target, idx, updates)
            except BaseException:
                ref.abandon(target)
                raise
            ref.commit(target)
            return ref.read()

    return op_def


ScatterUpdate = _register_scatter("ScatterUpdate", _scatter_assign, False, device_op="update")
ScatterAdd = _register_scatter("ScatterAdd", np.add.at, True, device_op="add")
ScatterSub = _register_scatter("ScatterSub", np.subtract.at, True, device_op="subtract")
ScatterMul = _register_scatter("ScatterMul", np.multiply.at, True, device_op="multiply")
ScatterDiv = _register_scatter("ScatterDiv", _scatter_div, True, device_op="divide")
ScatterMin = _register_scatter("ScatterMin", np.minimum.at, True, REAL, device_op="minimum")
ScatterMax = _register_scatter("ScatterMax", np.maximum.at, True, REAL, device_op="maximum")


def _scatter_builder(op_type: str, verb: str):
    # TF1's defaults: only the Update builders lock unless asked not to.
    locking = op_type.endswith("Update")

    def builder(ref, indices, updates, use_locking=locking, name=None):
        require_ref(ref, "_lazy_read")
        if _is_resource(ref):
            return ref._resource_scatter(op_type, indices, updates, name)
        attrs = {"use_locking": use_locking}
        return ops.apply_op(op_type, [ref, indices, updates], attrs, name=name).outputs[0]

    builder.op_type = op_type  # (a resource variable's methods build its Resource twin)
    builder.__doc__ = f"""{verb} `updates` into rows `indices` of `ref`; returns the new value.

    Raises (when run):
      FailedPreconditionError: `ref` is uninitialised.
      InvalidArgumentError: an index is outside [0, ref.shape[0]) or shapes mismatch.
    """
    return builder


scatter_update = _scatter_builder("ScatterUpdate", "Assign")
scatter_update.__name__ = "scatter_update"
scatter_add = _scatter_builder("ScatterAdd", "Add (duplicates accumulate)")
scatter_add.__name__ = "scatter_add"
scatter_sub = _scatter_builder("ScatterSub", "Subtract (duplicates accumulate)")
scatter_sub.__name__ = "scatter_sub"
scatter_mul = _scatter_builder("ScatterMul", "Multiply (duplicates multiply in turn)")
scatter_mul.__name__ = "scatter_mul"
scatter_div = _scatter_builder("ScatterDiv", "Divide by (duplicates divide in turn)")
scatter_div.__name__ = "scatter_div"
scatter_min = _scatter_builder("ScatterMin", "Take the minimum with")
scatter_min.__name__ = "scatter_min"
scatter_max = _scatter_builder("ScatterMax", "Take the maximum with")
scatter_max.__name__ = "scatter_max"


# -- IsVariableInitialized ----------------------------------------------------------------

IsVariableInitialized = register_op(
    "IsVariableInitialized",
    inputs=["ref: Ref(dtype)"],
    outputs=["is_initialized: bool"],
    attrs={"dtype": ANY},
    shape_fn=lambda op: [tensor_shape.scalar()],
    stateful=True,
)
NotDifferentiable("IsVariableInitialized")


@IsVariableInitialized.kernel(host_memory=("is_initialized",))
async def _is_variable_initialized(ctx, ref):
    return np.bool_(ref.value is not None)


def is_variable_initialized(variable, name=None):
    """A bool scalar: whether `variable` (a Variable or ref tensor) has been assigned; a
    resource variable answers with its own VarIsInitializedOp, as TF1's."""
    if getattr(variable, "_handle", None) is not None:
        return variable.is_initialized(name=name)
    return ops.apply_op("IsVariableInitialized", [variable], name=name).outputs[0]


# -- helpers for asyncflow.variables ---------------------------------------------------

# The value of a variable if initialised, else its initial value: TF1 builds
# `cond(is_variable_initialized(v), v.read_value, lambda: v.initial_value)`.  One op
# gives the same result without cond; both inputs are computed, which is harmless as
# `initial` is the very tensor the variable's initializer consumes in the same step.
VariableInitializedValue = register_op(
    "VariableInitializedValue",
    inputs=["ref: Ref(T)", "initial: T"],
    outputs=["value: T"],
    attrs={"T": ANY},
    shape_fn=_merge_both_shape,
    stateful=True,
)
NotDifferentiable("VariableInitializedValue")


@VariableInitializedValue.kernel()
async def _variable_initialized_value(ctx, ref, initial):
    return initial if ref.value is None else ref.read()


# Names of the variables whose flag is False (TF1 builds stack + logical_not +
# boolean_mask); with raise_error, fail as reading the first of them would.
ReportUninitialized = register_op(
    "ReportUninitialized",
    inputs=["flags: N * bool"],
    outputs=["names: string"],
    attrs={"N": REQUIRED, "names": REQUIRED, "raise_error": False},
    shape_fn=lambda op: [tensor_shape.TensorShape([None])],
    stateful=True,
)
NotDifferentiable("ReportUninitialized")


@ReportUninitialized.kernel("CPU")
async def _report_uninitialized(ctx, *flags):
    names = [n for n, ok in zip(ctx.attrs["names"], flags, strict=True) if not ok]
    if names and ctx.attrs["raise_error"]:
        raise errors.FailedPreconditionError(
            None, None, f"Attempting to use uninitialized value {names[0]}"
        )
    out = np.empty(len(names), dtype=object)
    out[:] = [n.encode() for n in names]
    return out


# -- CountUpTo ---------------------------------------------------------------------------

CountUpTo = register_op(
    "CountUpTo",
    inputs=["ref: Ref(T)"],
    outputs=["output: T"],
    attrs={"T": INDEX, "limit": 0},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
)
NotDifferentiable("CountUpTo")


@CountUpTo.kernel("CPU")
async def _count_up_to(ctx, ref):
    old = np.array(ref._current())  # a copy: the update may happen in place
    limit = ctx.attrs["limit"]
    if old >= limit:
        raise errors.OutOfRangeError(None, None, f"Reached limit of {limit}")
    ref.assign(old + 1, True)
    return old


def count_up_to(ref, limit, name=None):
    """Increments `ref` until it reaches `limit`; returns the value before the increment.

    Raises (when run):
      OutOfRangeError: the variable already holds `limit`.
    """
    require_ref(ref, "handle")
    ref = getattr(ref, "_ref", lambda: ref)()
    return ops.apply_op("CountUpTo", [ref], {"limit": int(limit)}, name=name).outputs[0]
