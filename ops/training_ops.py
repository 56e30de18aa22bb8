"""Training ops: the fused, in-place variable updates optimizers emit (TF's training_ops).

Each algorithm is one NumPy update function written against the arrays it mutates
(`var` and its slots, updated in place) and the values it reads (hyper-parameters as
0-d values of the variable's dtype, the gradient).  Two ops are made from it:
  Apply<Alg>        the dense op, whose update function runs on the variables' buffers;
  SparseApply<Alg>  rows `indices` only: the rows are gathered, updated by the same
                    function and scattered back.  Duplicate indices are applied one
                    after another, as TF's CPU kernels do (optimizers deduplicate first,
                    summing the duplicates, with Unique + UnsortedSegmentSum as TF's do).
The formulas and their order of operations are TF's CPU functors
(tensorflow/core/kernels/training_ops.cc), so results agree to float rounding.

Invariants:
- Updates go through VarRef's copy-on-write protocol (`writable_target` / `commit`):
  in place when the variable's buffer is held by nothing else, else on a copy swapped
  in, so a value read earlier never changes under its holder.
- An update never awaits: validation, the writes and the commits happen in one
  event-loop step, so no concurrent reader sees a half-updated variable.
- Every input is validated (shapes, scalars, index range, initialised slots) before the
  first write, so bad input raises `InvalidArgumentError` / `FailedPreconditionError`
  and leaves every variable unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.devices import cpu_budget
from asyncflow.kernel_api import QUIET_STEP
from asyncflow.ops import blas, fused_updates
from asyncflow.ops.math_helpers import quiet_errstate
from asyncflow.ops.matmul_ops import DeferredProduct, matmul_deferred, plain_context
from asyncflow.ops.state_ops import commit_targets, writable_targets_now, writable_targets_on
from asyncflow.registry import (
    INDEX,
    NUMERIC,
    REQUIRED,
    NotDifferentiable,
    get_op_def,
    register_op,
)

__all__ = [
    "apply_gradient_descent",
    "apply_momentum",
    "sparse_apply_momentum",
    "apply_adagrad",
    "sparse_apply_adagrad",
    "apply_adadelta",
    "sparse_apply_adadelta",
    "apply_rms_prop",
    "sparse_apply_rms_prop",
    "apply_centered_rms_prop",
    "sparse_apply_centered_rms_prop",
    "apply_adam",
    "apply_adam_with_amsgrad",
    "apply_ftrl",
    "apply_ftrl_v2",
    "sparse_apply_ftrl",
    "sparse_apply_ftrl_v2",
    "apply_proximal_gradient_descent",
    "sparse_apply_proximal_gradient_descent",
    "apply_proximal_adagrad",
    "sparse_apply_proximal_adagrad",
    "apply_adagrad_da",
    "sparse_apply_adagrad_da",
    "deduplicate_indexed_slices",
    "sdca_shrink_l1",
]


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- update functions: TF's CPU functors, mutating var and slots in place ------------------
# Arguments: attrs, then the op's inputs in TF order without `indices`; refs arrive as
# writable arrays, everything else as read-only values.


# The dense updates with a GPU kernel are ufuncs, in-place operators and scalar constants
# of T only: on a GPU each runs as one fused kernel (`xp.fuse`), which holds nothing else.
# The four updates most programs use (GradientDescent, Momentum, RMSProp, Adam) write
# their temporaries into at most two buffers, operation for operation in TF's order
# (so results are bitwise those of the plain NumPy formulas), and `_dense_update` runs
# every dense update over blocks of _BLOCK elements: a block's temporaries stay in the
# core's L2 cache, and blocks are shared among the threads the CPU budget allows.
# Where numba is installed, those four (float32/float64, not Nesterov) run as compiled
# loops instead (ops/fused_updates.py): one pass over memory, the same bits.


def _gradient_descent(xp, attrs, var, alpha, delta):
    t = xp.multiply(delta, alpha)
    var -= t


def _gradient_descent_scratch(xp, attrs, var, alpha, delta):  # delta is ours to overwrite
    delta *= alpha
    var -= delta


def _momentum(xp, attrs, var, accum, lr, grad, momentum):
    accum *= momentum
    accum += grad
    if attrs["use_nesterov"]:
        var -= grad * lr + accum * momentum * lr
    else:
        t = xp.multiply(accum, lr)
        var -= t


def _adagrad(xp, attrs, var, accum, lr, grad):
    if attrs["update_slots"]:
        accum += grad * grad
    var -= grad * lr * (accum.dtype.type(1) / xp.sqrt(accum))


def _adadelta(xp, attrs, var, accum, accum_update, lr, rho, epsilon, grad):
    one = accum.dtype.type(1)
    accum *= rho
    accum += grad * grad * (one - rho)
    update = xp.sqrt(accum_update + epsilon) / xp.sqrt(accum + epsilon) * grad
    var -= update * lr
    accum_update *= rho
    accum_update += update * update * (one - rho)


def _rms_prop(xp, attrs, var, ms, mom, lr, rho, momentum, epsilon, grad):
    # ms += (grad * grad - ms) * (1 - rho); mom = mom * momentum + grad * lr / sqrt(ms + eps)
    one = ms.dtype.type(1)
    t = xp.multiply(grad, grad)
    t -= ms
    t *= one - rho
    ms += t
    xp.add(ms, epsilon, out=t)
    xp.sqrt(t, out=t)
    u = xp.multiply(grad, lr)
    xp.divide(u, t, out=u)
    mom *= momentum
    mom += u
    var -= mom


def _centered_rms_prop(xp, attrs, var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
    one = ms.dtype.type(1)
    ms += (grad * grad - ms) * (one - rho)
    mg += (grad - mg) * (one - rho)
    denom = ms - mg * mg + epsilon
    mom *= momentum
    mom += grad * lr / xp.sqrt(denom)
    var -= mom


def _adam(xp, attrs, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
    one = var.dtype.type(1)
    alpha = lr * xp.sqrt(one - beta2_power) / (one - beta1_power)
    t = xp.subtract(grad, m)  # m += (grad - m) * (1 - beta1)
    t *= one - beta1
    m += t
    xp.multiply(grad, grad, out=t)  # v += (grad * grad - v) * (1 - beta2)
    t -= v
    t *= one - beta2
    v += t
    xp.sqrt(v, out=t)  # t = sqrt(v) + epsilon
    t += epsilon
    if attrs["use_nesterov"]:
        u = (grad * (one - beta1) + beta1 * m) * alpha
    else:
        u = xp.multiply(m, alpha)
    xp.divide(u, t, out=u)
    var -= u


def _adam_with_amsgrad(xp, attrs, var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2,
                       epsilon, grad):  # fmt: skip
    # Adam whose denominator uses the running maximum of v (vhat), never decreasing.
    one = var.dtype.type(1)
    alpha = lr * xp.sqrt(one - beta2_power) / (one - beta1_power)
    m += (grad - m) * (one - beta1)
    v += (grad * grad - v) * (one - beta2)
    xp.maximum(vhat, v, out=vhat)
    var -= m * alpha / (xp.sqrt(vhat) + epsilon)


def _ftrl_core(xp, attrs, var, accum, linear, grad, grad_shrunk, lr, l1, l2, lr_power):
    new_accum = accum + grad * grad
    if lr_power == -0.5:
        new_pow, old_pow = xp.sqrt(new_accum), xp.sqrt(accum)
    else:
        new_pow, old_pow = new_accum ** (-lr_power), accum ** (-lr_power)
    if attrs["multiply_linear_by_lr"]:
        linear += grad_shrunk * lr - (new_pow - old_pow) * var
        quadratic = new_pow + 2 * l2 * lr
        l1 = l1 * lr
    else:
        linear += grad_shrunk - (new_pow - old_pow) / lr * var
        quadratic = new_pow / lr + 2 * l2
    pre_shrink = (xp.sign(linear) * l1 - linear) / quadratic
    var[...] = xp.where(xp.abs(linear) > l1, pre_shrink, xp.zeros((), var.dtype))
    accum[...] = new_accum


def _ftrl(xp, attrs, var, accum, linear, grad, lr, l1, l2, lr_power):
    _ftrl_core(xp, attrs, var, accum, linear, grad, grad, lr, l1, l2, lr_power)


def _ftrl_v2(xp, attrs, var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power):
    shrunk = grad + 2 * l2_shrinkage * var
    _ftrl_core(xp, attrs, var, accum, linear, grad, shrunk, lr, l1, l2, lr_power)


def _proximal_step(xp, var, prox, step, l1, l2):
    """var = prox shrunk by step*l1 toward zero, over 1 + step*l2 (TF's proximal functors)."""
    one = xp.ones((), var.dtype)
    if l1 > 0:
        shrunk = xp.maximum(xp.abs(prox) - step * l1, 0)
        var[...] = xp.sign(prox) * shrunk / (one + step * l2)
    else:
        var[...] = prox / (one + step * l2)


def _proximal_gradient_descent(xp, attrs, var, alpha, l1, l2, delta):
    _proximal_step(xp, var, var - delta * alpha, alpha, l1, l2)


def _proximal_adagrad(xp, attrs, var, accum, lr, l1, l2, grad):
    accum += grad * grad
    step = lr / xp.sqrt(accum)
    _proximal_step(xp, var, var - grad * step, step, l1, l2)


def _adagrad_da(xp, attrs, var, g_acc, gg_acc, grad, lr, l1, l2, global_step):
    g_acc += grad
    gg_acc += grad * grad
    gs = xp.asarray(global_step, var.dtype)
    denom = l2 * (gs * lr) + xp.sqrt(gg_acc)
    if l1 > 0:
        var[...] = -lr * xp.sign(g_acc) * xp.maximum(xp.abs(g_acc) - gs * l1, 0) / denom
    else:
        var[...] = -lr * g_acc / denom


# Updates that branch on a hyper-parameter's value in Python (TF's functors do so on the
# host): no GPU kernel, so such a variable and its updates stay on a CPU.
_HOST_BRANCHES = frozenset(
    [_ftrl, _ftrl_v2, _proximal_gradient_descent, _proximal_adagrad, _adagrad_da]
)


# -- validation ---------------------------------------------------------------------------


def _check_dense(names, n_refs, scalar_pos, grad_pos, values) -> None:
    var = values[0]
    for k in range(1, n_refs):
        if values[k].shape != var.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"var and {names[k]} do not have the same shape"
                f"{_shape_str(var.shape)} {_shape_str(values[k].shape)}",
            )
    for k in scalar_pos:
        if values[k].ndim != 0:
            raise errors.InvalidArgumentError(
                None, None, f"{names[k]} is not a scalar: {_shape_str(values[k].shape)}"
            )
    if grad_pos is not None and values[grad_pos].shape != var.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"var and {names[grad_pos]} do not have the same shape"
            f"{_shape_str(var.shape)} {_shape_str(values[grad_pos].shape)}",
        )


def _check_sparse(var, grad, indices) -> None:
    if var.ndim < 1:
        raise errors.InvalidArgumentError(None, None, "var must be at least 1 dimensional")
    if indices.ndim != 1:
        raise errors.InvalidArgumentError(None, None, "indices must be one-dimensional")
    if grad.ndim != var.ndim or grad.shape[1:] != var.shape[1:]:
        raise errors.InvalidArgumentError(
            None,
            None,
            "var and grad must match in every dimension but the first: "
            f"{_shape_str(var.shape)} {_shape_str(grad.shape)}",
        )
    if grad.shape[0] != indices.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            "grad must be the same size as indices in the first dimension: "
            f"{grad.shape[0]} vs {indices.shape[0]}",
        )
    bad = np.flatnonzero((indices < 0) | (indices >= var.shape[0]))
    if bad.size:
        i = int(bad[0])
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Index {int(indices[i])} at offset {i} in indices is out of range "
            f"[0, {var.shape[0]})",
        )


# -- op factory ---------------------------------------------------------------------------


def _dense_shape(n_refs: int, scalar_pos, grad_pos, names):
    def shape_fn(op):
        shape = op.inputs[0].shape
        for k in range(1, n_refs):
            shape = shape.merge_with(op.inputs[k].shape)
        for k in scalar_pos:
            s = op.inputs[k].shape
            if s.ndims is not None and s.ndims != 0:
                raise ValueError(f"Shape must be rank 0 but is rank {s.ndims} for '{names[k]}'")
        if grad_pos is not None:
            shape = shape.merge_with(op.inputs[grad_pos].shape)
        return [shape]

    return shape_fn


def _sparse_shape(n_refs: int, scalar_pos, grad_pos, idx_pos, names):
    def shape_fn(op):
        shape = op.inputs[0].shape
        for k in range(1, n_refs):
            shape = shape.merge_with(op.inputs[k].shape)
        for k in scalar_pos:
            s = op.inputs[k].shape
            if s.ndims is not None and s.ndims != 0:
                raise ValueError(f"Shape must be rank 0 but is rank {s.ndims} for '{names[k]}'")
        idx = op.inputs[idx_pos].shape.with_rank(1)
        grad = op.inputs[grad_pos].shape
        if grad.ndims is not None:
            grad[:1].merge_with(idx)
            if shape.ndims is not None:
                grad[1:].merge_with(shape[1:])
        return [shape]

    return shape_fn


def _register(
    op_type: str,
    inputs: list[str],
    n_refs: int,
    update: Callable,
    attrs: dict | None = None,
    sparse: bool = False,
    scratch: Callable | None = None,
):
    """Register `op_type`: its first `n_refs` inputs are refs, "grad"/"delta" the gradient.

    `scratch` is `update` for a gradient it may overwrite: used when nothing but this
    kernel holds the gradient (`ctx.may_forward`), to save a temporary."""
    names = [s.split(":")[0].strip() for s in inputs]
    grad_pos = names.index("grad") if "grad" in names else names.index("delta")
    idx_pos = names.index("indices") if sparse else None
    scalar_pos = [k for k in range(n_refs, len(names)) if k not in (grad_pos, idx_pos)]
    all_attrs = {"T": NUMERIC, "use_locking": False, **(attrs or {})}
    if sparse:
        all_attrs["Tindices"] = INDEX
        shape_fn = _sparse_shape(n_refs, scalar_pos, grad_pos, idx_pos, names)
    else:
        shape_fn = _dense_shape(n_refs, scalar_pos, grad_pos, names)
    op_def = register_op(
        op_type,
        inputs=inputs,
        outputs=["out: Ref(T)"],
        attrs=all_attrs,
        shape_fn=shape_fn,
        stateful=True,
    )
    NotDifferentiable(op_type)

    # Inputs whose shape must equal var's (the slots, the gradient), and the scalars.
    same_shape = (*range(1, n_refs), grad_pos)
    ndarray = np.ndarray

    @op_def.kernel("CPU")
    async def _kernel(ctx, *args):
        if sparse:
            return await _sparse_kernel(ctx, *args)
        # Dense: every optimizer step runs one per variable, so the usual case (valid
        # inputs, buffers no read holds) is written out flat, with no call a check
        # could do without (a training step's updates were a quarter of its Python
        # calls); any other case takes the general calls, which raise the errors.
        fn = update
        if scratch is not None and ctx.may_forward(grad_pos, args[grad_pos]):
            fn = scratch
        refs = args[:n_refs]
        values = []
        for r in refs:
            v = r.value
            if v is None:
                r.read()  # FailedPreconditionError: uninitialised
            values.append(v)
        for a in args[n_refs:]:
            values.append(a if type(a) is ndarray else np.asarray(a))
        shape = values[0].shape
        for k in same_shape:
            if values[k].shape != shape:
                _check_dense(names, n_refs, scalar_pos, grad_pos, values)  # (raises)
        for k in scalar_pos:
            if values[k].ndim:
                _check_dense(names, n_refs, scalar_pos, grad_pos, values)  # (raises)
        del values[:n_refs]
        targets = writable_targets_now(refs)
        if targets is None:  # a read still holds a buffer: copies, as the device runs them
            targets = await writable_targets_on(refs, ctx.device)
        # The update's cost decides where it runs (a large model's update would hold
        # the loop for many milliseconds): inline when cheap, else on a device worker.
        try:
            await ctx.compute(_apply_dense, fn, ctx.attrs, targets, values)
        except BaseException:
            for r, t in zip(refs, targets):
                r.abandon(t)
            raise
        commit_targets(refs, targets)
        return refs[0]

    async def _sparse_kernel(ctx, *args):
        refs = args[:n_refs]
        values = [r._current() for r in refs]
        values.extend(np.asarray(a) for a in args[n_refs:])
        _check_dense(names, n_refs, scalar_pos, None, values)
        indices = values[idx_pos]
        _check_sparse(values[0], values[grad_pos], indices)
        del values[idx_pos]
        del values[:n_refs]
        targets = await writable_targets_on(refs, ctx.device)
        # The update's cost decides where it runs, as the dense update's.
        work = ctx.compute(_apply_rows, update, ctx.attrs, targets, values, indices)
        await _write_through(refs, targets, work)
        return refs[0]

    if not sparse and update not in _HOST_BRANCHES:

        @op_def.kernel("GPU")
        async def _device_kernel(ctx, *args):
            """The dense update on a device that enqueues its work (a GPU stream): the
            same update function through the device's array module, compiled into one
            kernel (`xp.fuse`, per node: the function branches on the node's attrs)."""
            xp = ctx.xp
            fused = ctx.kernel_state.get("fused_update")
            if fused is None:
                attrs = ctx.attrs

                def apply(*arrays):
                    update(xp, attrs, *arrays)

                fused = xp.fuse(kernel_name=f"asyncflow_{op_type}")(apply)
                ctx.kernel_state["fused_update"] = fused
            refs = args[:n_refs]
            values = [r._current() for r in refs]
            values.extend(xp.asarray(a) for a in args[n_refs:])
            _check_dense(names, n_refs, scalar_pos, grad_pos, values)
            del values[:n_refs]
            targets = [r.writable_target() for r in refs]
            work = ctx.device.compute(fused, *targets, *values)
            await _write_through(refs, targets, work)
            return refs[0]

    if sparse:

        @op_def.kernel("GPU", host_memory=tuple(names[k] for k in (*scalar_pos, idx_pos)))
        async def _sparse_device_kernel(ctx, *args):
            """The rows update on a device: indices and hyper-parameters in host memory
            (checked there, as the CPU kernel checks them), the rows gathered, updated
            and written back on the device."""
            xp = ctx.xp
            refs = args[:n_refs]
            values = [r._current() for r in refs]
            for k in range(n_refs, len(args)):
                host = k in scalar_pos or k == idx_pos
                values.append(np.asarray(args[k]) if host else xp.asarray(args[k]))
            _check_dense(names, n_refs, scalar_pos, None, values)
            indices = values[idx_pos]
            _check_sparse(values[0], values[grad_pos], indices)
            del values[idx_pos]
            del values[:n_refs]
            values = [v[()] if isinstance(v, np.ndarray) else v for v in values]
            targets = [r.writable_target() for r in refs]
            work = ctx.device.compute(
                _device_rows, xp, update, ctx.attrs, targets, values, indices
            )
            await _write_through(refs, targets, work)
            return refs[0]

    if not sparse and update in _HOST_BRANCHES:

        @op_def.kernel("GPU", host_memory=tuple(names[k] for k in scalar_pos))
        async def _branching_device_kernel(ctx, *args):
            """An update that branches on its hyper-parameters: they stay in host
            memory (as TF's GPU functors read them on the host), the arrays on the
            device; not fused, since the branch is taken here in Python."""
            xp = ctx.xp
            refs = args[:n_refs]
            values = [r._current() for r in refs]
            for k in range(n_refs, len(args)):
                values.append(np.asarray(args[k]) if k in scalar_pos else xp.asarray(args[k]))
            _check_dense(names, n_refs, scalar_pos, grad_pos, values)
            del values[:n_refs]
            # 0-d host arrays as NumPy scalars of their dtype: what a device array
            # takes in arithmetic, with the same promotion as the CPU kernel's.
            values = [v[()] if isinstance(v, np.ndarray) else v for v in values]
            attrs = ctx.attrs
            targets = [r.writable_target() for r in refs]
            work = ctx.device.compute(update, xp, attrs, *targets, *values)
            await _write_through(refs, targets, work)
            return refs[0]

    return op_def


async def _write_through(refs, targets: list, work) -> None:
    """Await `work` (which writes `targets`, from `writable_target`) and commit each
    target to its variable, or abandon them all if it fails."""
    try:
        await work
    except BaseException:
        for r, t in zip(refs, targets):
            r.abandon(t)
        raise
    for r, t in zip(refs, targets):
        r.commit(t)


def _apply_dense(fn: Callable, attrs, targets: list, values: list) -> None:
    if QUIET_STEP.get():  # (a step's thread: inside np.errstate(all="ignore") already)
        _dense_update(fn, attrs, targets, values)
        return
    with np.errstate(all="ignore"):  # TF yields inf/nan silently
        _dense_update(fn, attrs, targets, values)


def _apply_rows(update: Callable, attrs, targets: list, values: list, indices) -> None:
    with quiet_errstate():
        _update_rows(attrs, update, targets, values, indices)


_BLOCK = 1 << 16  # elements per block: 256 KiB of float32, temporaries stay in L2


def _dense_update(fn: Callable, attrs, targets: list, values: list) -> None:
    """`fn(np, attrs, *targets, *values)` block by block over the flattened arrays, the
    blocks shared by the threads the CPU budget allows (every dense update is
    element-wise: scalars broadcast, the gradient has var's shape)."""
    if fused_updates.apply(fn, attrs, targets, values):  # one compiled pass, same bits
        return
    if targets[0].ndim == 0:
        # NumPy gives a scalar, not an array, for arithmetic on 0-d arrays, and the
        # update functions write into such temporaries (out=): run them on 1-element
        # views (writing through to the variable's 0-d buffers), every value 1-element.
        targets = [t.reshape(1) for t in targets]
        values = [np.asarray(v).reshape(1) for v in values]
    n = targets[0].size
    if n < 2 * _BLOCK or not all(t.flags.c_contiguous for t in targets):
        fn(np, attrs, *targets, *values)
        return
    flat_t = [t.reshape(-1) for t in targets]
    flat_v = [np.ascontiguousarray(v).reshape(-1) if v.ndim else v for v in values]

    def run(start: int, stop: int) -> None:
        with np.errstate(all="ignore"):  # (per thread: helpers do not inherit the caller's)
            for s in range(start, stop, _BLOCK):
                e = min(s + _BLOCK, stop)
                parts = (v[s:e] if v.ndim else v for v in flat_v)
                fn(np, attrs, *(t[s:e] for t in flat_t), *parts)

    cpu_budget.parallel_for(n, run, min_block=_BLOCK)


def _update_rows(attrs, update: Callable, targets: list, values: list, indices) -> None:
    """Apply `update` to rows `indices` of every target (sequentially for duplicates)."""
    if indices.size == 0:
        return
    if np.unique(indices).size == indices.size:
        groups = [(indices, values)]
    else:  # TF's CPU kernels apply duplicate rows one after another
        groups = [
            (indices[i : i + 1], [v[i : i + 1] if np.ndim(v) else v for v in values])
            for i in range(indices.size)
        ]
    for idx, vals in groups:
        rows = [t[idx] for t in targets]  # fancy indexing: copies
        update(np, attrs, *rows, *vals)
        for t, r in zip(targets, rows):
            t[idx] = r


def _device_rows(xp, update: Callable, attrs, targets: list, values: list, indices) -> None:
    """`_update_rows` on a device: `indices` (host) in rounds, round r updating each
    index's r-th occurrence, so duplicates apply one after another as on the CPU and no
    round writes one row twice."""
    n = indices.size
    if not n:
        return
    order = np.argsort(indices, kind="stable")
    ranked = indices[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    for r in range(int(rank.max()) + 1):
        sel = np.flatnonzero(rank == r)
        idx = xp.asarray(indices[sel])
        pick = xp.asarray(sel)
        rows = [t[idx] for t in targets]  # (fancy indexing: copies)
        update(xp, attrs, *rows, *(v[pick] if getattr(v, "ndim", 0) else v for v in values))
        for t, row in zip(targets, rows):
            t[idx] = row


def _builder(op_type: str, n_inputs: int, extra_attrs: tuple = ()):
    def builder(*args, use_locking=False, name=None, **kwargs):
        if len(args) != n_inputs:
            raise TypeError(f"{op_type} takes {n_inputs} inputs, got {len(args)}")
        attrs = {"use_locking": use_locking}
        for k in extra_attrs:
            if k in kwargs:
                attrs[k] = kwargs.pop(k)
        if kwargs:
            raise TypeError(f"{op_type}: unexpected arguments {sorted(kwargs)}")
        return ops.apply_op(op_type, list(args), attrs, name=name).outputs[0]

    builder.__doc__ = f"""Build a {op_type} op (TF's gen_training_ops); returns the var ref.

    Raises (when run):
      FailedPreconditionError: the variable or a slot is uninitialised.
      InvalidArgumentError: shapes differ, a hyper-parameter is not a scalar, or an
        index is out of range.
    """
    return builder


ApplyGradientDescent = _register(
    "ApplyGradientDescent",
    ["var: Ref(T)", "alpha: T", "delta: T"],
    1,
    _gradient_descent,
    scratch=_gradient_descent_scratch,
)
ApplyMomentum = _register(
    "ApplyMomentum",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T", "momentum: T"],
    2,
    _momentum,
    {"use_nesterov": False},
)
SparseApplyMomentum = _register(
    "SparseApplyMomentum",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T", "indices: Tindices", "momentum: T"],
    2,
    _momentum,
    {"use_nesterov": False},
    sparse=True,
)
ApplyAdagrad = _register(
    "ApplyAdagrad",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T"],
    2,
    _adagrad,
    {"update_slots": True},
)
SparseApplyAdagrad = _register(
    "SparseApplyAdagrad",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T", "indices: Tindices"],
    2,
    _adagrad,
    {"update_slots": True},
    sparse=True,
)
_ADADELTA = ["var: Ref(T)", "accum: Ref(T)", "accum_update: Ref(T)", "lr: T", "rho: T"]
ApplyAdadelta = _register("ApplyAdadelta", _ADADELTA + ["epsilon: T", "grad: T"], 3, _adadelta)
SparseApplyAdadelta = _register(
    "SparseApplyAdadelta",
    _ADADELTA + ["epsilon: T", "grad: T", "indices: Tindices"],
    3,
    _adadelta,
    sparse=True,
)
_RMS = ["lr: T", "rho: T", "momentum: T", "epsilon: T", "grad: T"]
ApplyRMSProp = _register(
    "ApplyRMSProp", ["var: Ref(T)", "ms: Ref(T)", "mom: Ref(T)"] + _RMS, 3, _rms_prop
)
SparseApplyRMSProp = _register(
    "SparseApplyRMSProp",
    ["var: Ref(T)", "ms: Ref(T)", "mom: Ref(T)"] + _RMS + ["indices: Tindices"],
    3,
    _rms_prop,
    sparse=True,
)
ApplyCenteredRMSProp = _register(
    "ApplyCenteredRMSProp",
    ["var: Ref(T)", "mg: Ref(T)", "ms: Ref(T)", "mom: Ref(T)"] + _RMS,
    4,
    _centered_rms_prop,
)
SparseApplyCenteredRMSProp = _register(
    "SparseApplyCenteredRMSProp",
    ["var: Ref(T)", "mg: Ref(T)", "ms: Ref(T)", "mom: Ref(T)"] + _RMS + ["indices: Tindices"],
    4,
    _centered_rms_prop,
    sparse=True,
)
ApplyAdam = _register(
    "ApplyAdam",
    [
        "var: Ref(T)",
        "m: Ref(T)",
        "v: Ref(T)",
        "beta1_power: T",
        "beta2_power: T",
        "lr: T",
        "beta1: T",
        "beta2: T",
        "epsilon: T",
        "grad: T",
    ],
    3,
    _adam,
    {"use_nesterov": False},
)
ApplyAdamWithAmsgrad = _register(
    "ApplyAdamWithAmsgrad",
    ["var: Ref(T)", "m: Ref(T)", "v: Ref(T)", "vhat: Ref(T)", "beta1_power: T",
     "beta2_power: T", "lr: T", "beta1: T", "beta2: T", "epsilon: T", "grad: T"],
    4,
    _adam_with_amsgrad,
)  # fmt: skip
_FTRL_REFS = ["var: Ref(T)", "accum: Ref(T)", "linear: Ref(T)", "grad: T"]
ApplyFtrl = _register(
    "ApplyFtrl",
    _FTRL_REFS + ["lr: T", "l1: T", "l2: T", "lr_power: T"],
    3,
    _ftrl,
    {"multiply_linear_by_lr": False},
)
ApplyFtrlV2 = _register(
    "ApplyFtrlV2",
    _FTRL_REFS + ["lr: T", "l1: T", "l2: T", "l2_shrinkage: T", "lr_power: T"],
    3,
    _ftrl_v2,
    {"multiply_linear_by_lr": False},
)
SparseApplyFtrl = _register(
    "SparseApplyFtrl",
    _FTRL_REFS + ["indices: Tindices", "lr: T", "l1: T", "l2: T", "lr_power: T"],
    3,
    _ftrl,
    {"multiply_linear_by_lr": False},
    sparse=True,
)
SparseApplyFtrlV2 = _register(
    "SparseApplyFtrlV2",
    _FTRL_REFS
    + ["indices: Tindices", "lr: T", "l1: T", "l2: T", "l2_shrinkage: T", "lr_power: T"],
    3,
    _ftrl_v2,
    {"multiply_linear_by_lr": False},
    sparse=True,
)

_PGD = ["var: Ref(T)", "alpha: T", "l1: T", "l2: T", "delta: T"]
ApplyProximalGradientDescent = _register(
    "ApplyProximalGradientDescent", _PGD, 1, _proximal_gradient_descent
)
SparseApplyProximalGradientDescent = _register(
    "SparseApplyProximalGradientDescent",
    _PGD + ["indices: Tindices"],
    1,
    _proximal_gradient_descent,
    sparse=True,
)
_PADAGRAD = ["var: Ref(T)", "accum: Ref(T)", "lr: T", "l1: T", "l2: T", "grad: T"]
ApplyProximalAdagrad = _register("ApplyProximalAdagrad", _PADAGRAD, 2, _proximal_adagrad)
SparseApplyProximalAdagrad = _register(
    "SparseApplyProximalAdagrad",
    _PADAGRAD + ["indices: Tindices"],
    2,
    _proximal_adagrad,
    sparse=True,
)
_ADAGRAD_DA = ["var: Ref(T)", "gradient_accumulator: Ref(T)",
               "gradient_squared_accumulator: Ref(T)", "grad: T"]  # fmt: skip
ApplyAdagradDA = _register(
    "ApplyAdagradDA",
    _ADAGRAD_DA + ["lr: T", "l1: T", "l2: T", "global_step: int64"],
    3,
    _adagrad_da,
)
SparseApplyAdagradDA = _register(
    "SparseApplyAdagradDA",
    _ADAGRAD_DA + ["indices: Tindices", "lr: T", "l1: T", "l2: T", "global_step: int64"],
    3,
    _adagrad_da,
    sparse=True,
)

apply_gradient_descent = _builder("ApplyGradientDescent", 3)
apply_momentum = _builder("ApplyMomentum", 5, ("use_nesterov",))
sparse_apply_momentum = _builder("SparseApplyMomentum", 6, ("use_nesterov",))
apply_adagrad = _builder("ApplyAdagrad", 4, ("update_slots",))
sparse_apply_adagrad = _builder("SparseApplyAdagrad", 5, ("update_slots",))
apply_adadelta = _builder("ApplyAdadelta", 7)
sparse_apply_adadelta = _builder("SparseApplyAdadelta", 8)
apply_rms_prop = _builder("ApplyRMSProp", 8)
sparse_apply_rms_prop = _builder("SparseApplyRMSProp", 9)
apply_centered_rms_prop = _builder("ApplyCenteredRMSProp", 9)
sparse_apply_centered_rms_prop = _builder("SparseApplyCenteredRMSProp", 10)
apply_adam = _builder("ApplyAdam", 10, ("use_nesterov",))
apply_adam_with_amsgrad = _builder("ApplyAdamWithAmsgrad", 11)
apply_ftrl = _builder("ApplyFtrl", 8, ("multiply_linear_by_lr",))
apply_ftrl_v2 = _builder("ApplyFtrlV2", 9, ("multiply_linear_by_lr",))
sparse_apply_ftrl = _builder("SparseApplyFtrl", 9, ("multiply_linear_by_lr",))
sparse_apply_ftrl_v2 = _builder("SparseApplyFtrlV2", 10, ("multiply_linear_by_lr",))
apply_proximal_gradient_descent = _builder("ApplyProximalGradientDescent", 5)
sparse_apply_proximal_gradient_descent = _builder("SparseApplyProximalGradientDescent", 6)
apply_proximal_adagrad = _builder("ApplyProximalAdagrad", 6)
sparse_apply_proximal_adagrad = _builder("SparseApplyProximalAdagrad", 7)
apply_adagrad_da = _builder("ApplyAdagradDA", 8)
sparse_apply_adagrad_da = _builder("SparseApplyAdagradDA", 9)
for _name in __all__[: __all__.index("deduplicate_indexed_slices")]:  # the _builder ones
    globals()[_name].__name__ = _name


# -- SdcaShrinkL1 ---------------------------------------------------------------------------

SdcaShrinkL1 = register_op(
    "SdcaShrinkL1",
    inputs=["weights: num_features * Ref(float32)"],
    outputs=[],
    attrs={"num_features": 0, "l1": REQUIRED, "l2": REQUIRED},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("SdcaShrinkL1")


@SdcaShrinkL1.kernel("CPU")
async def _sdca_shrink_l1(ctx, *refs):
    # SDCA's regulariser: w <- sign(w) * max(|w| - l1 / l2, 0), on every weight in place
    shrinkage = np.float32(ctx.attrs["l1"]) / np.float32(ctx.attrs["l2"])
    targets = [r.writable_target() for r in refs]
    for t in targets:
        t[...] = np.sign(t) * np.maximum(np.abs(t) - shrinkage, 0)
    for r, t in zip(refs, targets):
        r.commit(t)


def sdca_shrink_l1(weights, l1, l2, name=None):
    """`tf.train.sdca_shrink_l1`: apply SDCA's L1 shrink step, sign(w) * max(|w| - l1/l2, 0),
    to every float32 variable of `weights` in place (op SdcaShrinkL1; returns the op).

    Raises:
      TypeError: a weight is not a float32 variable.
    """
    attrs = {"num_features": len(weights), "l1": float(l1), "l2": float(l2)}
    return ops.apply_op("SdcaShrinkL1", [list(weights)], attrs, name=name)


# -- deduplication of IndexedSlices (what TF builds from Unique + UnsortedSegmentSum) ----


def _dedup_shape(op):
    values, indices = op.inputs[0].shape, op.inputs[1].shape.with_rank(1)
    if values.ndims is None:
        return [tensor_shape.unknown_shape(), indices]
    return [tensor_shape.TensorShape([None]).concatenate(values[1:]), [None]]


DeduplicateIndexedSlices = register_op(
    "_DeduplicateIndexedSlices",
    inputs=["values: T", "indices: Tindices"],
    outputs=["summed_values: T", "unique_indices: Tindices"],
    attrs={"T": NUMERIC, "Tindices": INDEX},
    shape_fn=_dedup_shape,
)
NotDifferentiable("_DeduplicateIndexedSlices")


@DeduplicateIndexedSlices.kernel("CPU")
async def _deduplicate(ctx, values, indices):
    values, indices = np.asarray(values), np.asarray(indices)
    if indices.ndim != 1 or values.ndim < 1 or values.shape[0] != indices.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            "values.shape[0] must equal indices.shape[0] and indices must be 1-D: "
            f"{_shape_str(values.shape)} {_shape_str(indices.shape)}",
        )
    # Unique keeps first-occurrence order, as TF's Unique does.
    uniq, first, inverse = np.unique(indices, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    summed = np.zeros((uniq.size,) + values.shape[1:], values.dtype)
    np.add.at(summed, rank[inverse.reshape(-1)], values)
    return summed, uniq[order].astype(indices.dtype, copy=False)


def deduplicate_indexed_slices(values, indices, name=None):
    """(summed_values, unique_indices): `values` rows with equal `indices` summed.

    Unique indices keep the order of their first occurrence (TF's Unique).

    Raises (when run):
      InvalidArgumentError: indices not 1-D or not as long as values' first dimension.
    """
    # TF1's graph (so a MetaGraph of ours loads in TF): Unique, then UnsortedSegmentSum
    # over its first-occurrence positions, as many segments as unique indices.
    with ops.name_scope(name, "DeduplicateIndexedSlices", [values, indices]):
        values = ops.convert_to_tensor(values, name="values")
        indices = ops.convert_to_tensor(indices, name="indices")
        uniq = ops.apply_op("Unique", [indices], {"out_idx": indices.dtype}).outputs
        count = ops.apply_op("Size", [uniq[0]], {"out_type": indices.dtype}).outputs[0]
        summed = ops.apply_op("UnsortedSegmentSum", [values, uniq[1], count]).outputs[0]
        return summed, uniq[0]


# -- graph pass: a gradient MatMul folded into the update of its variable ----------------
# `var -= alpha * (a @ b)` as one gemm writing into var (ops/blas.py): no product
# array, no scaled copy, one pass less over the variable.  Two forms: the optimizers'
# ApplyGradientDescent(var, alpha, MatMul), and the hand-written
# AssignSub/AssignAdd(var, Mul(scalar, MatMul)) (or without the Mul).  Applied when
# every node between the MatMul and the update has that chain as its only consumer,
# all on one CPU device, in float32/float64, with BLAS's gemm reachable; each kernel
# involved still takes ordinary values, so any other case runs as before.


def _fused_gd_kernel(plain):
    async def apply_gradient_descent_gemm(ctx, var, alpha, delta):
        if type(delta) is not DeferredProduct:
            return await plain(ctx, var, alpha, delta)
        _check_dense(["var", "alpha", "delta"], 1, [1], 2, [var._current(), alpha, delta])
        target = await var.writable_target_on(ctx.device)
        await ctx.compute(  # a GEMM: on a worker when long (devices/cpu.py)
            blas.gemm_into,
            target,
            delta.a,
            delta.b,
            delta.trans_a,
            delta.trans_b,
            -float(alpha) * delta.alpha,
            1.0,
        )
        var.commit(target)
        return var

    return apply_gradient_descent_gemm


def _fused_assign_kernel(plain, sign: float):
    async def assign_update_gemm(ctx, ref, value):
        if type(value) is not DeferredProduct:
            return await plain(ctx, ref, value)
        current = ref._current()
        if current.shape != value.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Cannot update variable with shape {_shape_str(current.shape)} using a "
                f"Tensor with shape {_shape_str(value.shape)}, shapes must be equal.",
            )
        target = await ref.writable_target_on(ctx.device)
        await ctx.compute(  # a GEMM: on a worker when long (devices/cpu.py)
            blas.gemm_into,
            target,
            value.a,
            value.b,
            value.trans_a,
            value.trans_b,
            sign * value.alpha,
            1.0,
        )
        ref.commit(target)
        return ref.read()

    return assign_update_gemm


def _scale_kernel(plain, pos: int):
    """Mul whose input `pos` may be a DeferredProduct: a scalar factor joins its alpha."""

    async def mul_deferred(ctx, x, y):
        p, factor = (x, y) if pos == 0 else (y, x)
        if type(p) is not DeferredProduct:
            return await plain(ctx, x, y)
        factor = np.asarray(factor)
        if factor.ndim == 0 and factor.dtype == p.dtype:
            return p.scaled(float(factor))
        prod = p.materialize()  # not a scalar factor: the plain kernel decides
        return await (plain(ctx, prod, factor) if pos == 0 else plain(ctx, factor, prod))

    return mul_deferred


FusedMatMulApplyGradientDescent = register_op(
    "_FusedMatMulApplyGradientDescent",
    inputs=["var: Ref(T)", "alpha: T", "a: T", "b: T"],
    outputs=["out: Ref(T)"],
    attrs={"T": NUMERIC, "use_locking": False, "transpose_a": False, "transpose_b": False},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
    stateful=True,
)
NotDifferentiable("_FusedMatMulApplyGradientDescent")


@FusedMatMulApplyGradientDescent.kernel("CPU")
async def _fused_matmul_apply_gd(ctx, var, alpha, a, b):
    kernel = _FUSED.get("ApplyGradientDescent")
    if kernel is None:
        plain = get_op_def("ApplyGradientDescent").kernel_for("CPU").fn
        kernel = _FUSED["ApplyGradientDescent"] = _fused_gd_kernel(plain)
    delta = await matmul_deferred(ctx, a, b)
    return await kernel(plain_context(ctx), var, alpha, delta)


FusedMatMulAssignUpdate = register_op(
    "_FusedMatMulAssignUpdate",
    inputs=["ref: Ref(T)", "a: T", "b: T", "factors: N * T"],
    outputs=["output_ref: T"],
    attrs={
        "T": NUMERIC,
        "N": 0,  # 0, or 1: a scalar factor of the product (the Mul it absorbed)
        "use_locking": False,
        "transpose_a": False,
        "transpose_b": False,
        "update_type": "AssignSub",  # or AssignAdd
        "factor_first": False,  # Mul(factor, product) rather than Mul(product, factor)
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
    stateful=True,
)
NotDifferentiable("_FusedMatMulAssignUpdate")
_FUSED: dict = {}


@FusedMatMulAssignUpdate.kernel("CPU")
async def _fused_matmul_assign_update(ctx, ref, a, b, *factors):
    attrs = ctx.attrs
    kind, first = attrs["update_type"], attrs["factor_first"]
    key = (kind, first)
    kernels = _FUSED.get(key)
    if kernels is None:
        plain = get_op_def(kind).kernel_for("CPU").fn
        mul = get_op_def("Mul").kernel_for("CPU").fn
        sign = -1.0 if kind == "AssignSub" else 1.0
        kernels = _FUSED[key] = (_fused_assign_kernel(plain, sign), _scale_kernel(mul, int(first)))
    pctx = plain_context(ctx)
    value = await matmul_deferred(ctx, a, b)
    if factors:
        f = factors[0]
        value = await (kernels[1](pctx, f, value) if first else kernels[1](pctx, value, f))
    return await kernels[0](pctx, ref, value)


def fuse_matmul_into_updates(view) -> None:
    """The gradient MatMul folded into the update of its variable (see above)."""
    for i, node in enumerate(view.nodes):
        op = node.op
        kind = op.type
        if kind not in ("ApplyGradientDescent", "AssignSub", "AssignAdd"):
            continue
        if node.device.device_type != "CPU" or view.reads_ref(i) or not view.available(i):
            continue
        if not blas.available(op._attr("T").np_dtype):
            continue
        found = view.chain_source(i, 2 if kind == "ApplyGradientDescent" else 1)
        if found is None:
            continue
        k, passed = found
        factor, first, absorbed = [], False, [k, *passed]
        if view.op(k).type == "Mul" and kind != "ApplyGradientDescent":
            mul = view.nodes[k]
            if view.reads_ref(k) or mul.device is not node.device:
                continue
            for pos in (0, 1):
                inner = view.chain_source(k, pos)
                if inner is not None and view.op(inner[0]).type == "MatMul":
                    factor, first = [mul.inputs[1 - pos]], pos == 1
                    absorbed += [inner[0], *inner[1]]
                    k = inner[0]
                    break
            else:
                continue
        mm = view.nodes[k]
        if mm.op.type != "MatMul" or mm.device is not node.device or view.reads_ref(k):
            continue
        if not view.available(*absorbed):
            continue
        attrs = {
            "T": op._attr("T"),
            "use_locking": op._attrs.get("use_locking", False),
            "transpose_a": mm.op._attr("transpose_a"),
            "transpose_b": mm.op._attr("transpose_b"),
        }
        if kind == "ApplyGradientDescent":
            inputs = [node.inputs[0], node.inputs[1], *mm.inputs]
            view.fuse(i, "_FusedMatMulApplyGradientDescent", attrs, inputs, absorbed)
        else:
            attrs.update(N=len(factor), update_type=kind, factor_first=first)
            inputs = [node.inputs[0], *mm.inputs, *factor]
            view.fuse(i, "_FusedMatMulAssignUpdate", attrs, inputs, absorbed)
