"""Helpers shared by the math-family op modules: builder name scopes, dtype-exact
results, warning-free NumPy calls, shape strings, binary-operand conversion.

`math_ops`, `cast_ops` and `matmul_ops` import them from here; other families (nn_ops,
reduction_ops, conv_ops, nn_impl) import them through `math_ops`, which re-exports them.
This module registers no ops and imports no op family, so any family can import it
without an import cycle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.kernel_api import QUIET_STEP


@contextlib.contextmanager
def _builder_scope(name: str | None, default: str, values=()):
    """TF's `with ops.name_scope(name, default, values) as name:` for a single-op builder.

    Helper ops (converted constants, casts) are named `<op>/...`, and the op the builder
    finally creates (outside this block) takes the scope's own name, as in TF.  Yields
    the name to pass to that op.
    """
    graph = ops._graph_from_values([v for v in values if isinstance(v, ops.Tensor)])
    with graph.as_default():
        if name and name.endswith("/"):  # an operator's scope ("ops/add/"): reuse it exactly
            with graph.name_scope(name):
                yield name
            return
        op_name = graph.unique_name(name or default, mark_as_used=False)
        base = op_name.rsplit("/", 1)[-1]
        with graph.name_scope(op_name + "/"):
            yield base


def _as_dtype(xp, value, dtype: dtypes.DType):
    """`value` as an array of exactly `dtype` (kernels must not leak NumPy's upcasts)."""
    return xp.asarray(value, dtype=dtype.as_numpy_dtype)


def quiet_errstate():
    """`np.errstate(all="ignore")`, or nothing when the step already runs inside one."""
    return contextlib.nullcontext() if QUIET_STEP.get() else np.errstate(all="ignore")


def _quiet(xp, fn: Callable, *args):
    """Run `fn` without NumPy's floating-point warnings (TF yields inf/nan silently)."""
    if xp is np and QUIET_STEP.get():
        return fn(*args)
    errstate = getattr(xp, "errstate", None)
    if errstate is None:
        return fn(*args)
    with errstate(all="ignore"):
        return fn(*args)


def to_host(xp, value):
    """An explicit device -> host read of a (small) device array, for kernel checks that
    need its values on the host (index bounds, division by zero); the array itself on
    the CPU.  On a GPU it waits for the value, so kernels use it only where TF's kernel
    reads the value on the host too."""
    return value if xp is np else xp.asnumpy(value)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _unary_shape(op):
    return [op.inputs[0].shape]


def _convert_pair(x, y, op_name: str):
    """Converts x and y to tensors of one dtype, as TF's binary operators do."""
    if not isinstance(x, ops.Tensor) and isinstance(y, ops.Tensor):
        x = ops.convert_to_tensor(x, dtype=y.dtype, name="x")
    else:
        x = ops.convert_to_tensor(x, name="x")
    if isinstance(y, ops.Tensor):
        if y.dtype != x.dtype:
            raise TypeError(
                f"x and y must have the same dtype, got {x.dtype.name!r} != {y.dtype.name!r}"
                f" in {op_name}"
            )
    else:
        y = ops.convert_to_tensor(y, dtype=x.dtype, name="y")
    return x, y
