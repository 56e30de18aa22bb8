"""Python functions as ops: PyFunc / PyFuncStateless (`py_func`, `numpy_function`).

The graph holds a token ("pyfunc_3"); the function itself lives in a process-wide
registry (TF's FuncRegistry), kept alive by the graph that uses it.  The kernel calls
it on a worker thread of the loop's default executor, never on the event loop: a
Python function may block, sleep or take long, and the loop must keep serving other
steps meanwhile.

Results are checked as TF does: as many values as `Tout`, each `np.asarray(value)` of
exactly the declared dtype ("0-th value returned by pyfunc_0 is double, but expects
float").  Python exceptions become TF's error classes by TF's table (ValueError and
TypeError -> InvalidArgument, StopIteration and IndexError -> OutOfRange,
NotImplementedError -> Unimplemented, MemoryError -> ResourceExhausted, any other ->
Unknown), the message carrying the exception's type and text.
"""

from __future__ import annotations

import asyncio
import itertools
import threading

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = ["py_func", "numpy_function"]

_LIST = TypeConstraint(None, is_list=True)

_FUNCS: dict[str, object] = {}
_FUNCS_LOCK = threading.Lock()
_TOKENS = itertools.count()

# TF's py_func.cc mapping of Python exceptions to status codes.
_ERROR_CLASSES = (
    ((StopIteration, IndexError), errors.OutOfRangeError),
    ((ValueError, TypeError), errors.InvalidArgumentError),
    ((NotImplementedError,), errors.UnimplementedError),
    ((MemoryError,), errors.ResourceExhaustedError),
)


def _register_func(fn, graph) -> str:
    token = f"pyfunc_{next(_TOKENS)}"
    with _FUNCS_LOCK:
        _FUNCS[token] = fn
    # The graph keeps its functions alive; the registry entry goes with the graph.
    used = graph.__dict__.setdefault("_py_funcs_used_in_graph", [])
    used.append(fn)
    return token


def _out_shapes(op):
    return [tensor_shape.unknown_shape() for _ in op.outputs]


def _py_func_op(op_type: str, stateful: bool):
    op_def = register_op(
        op_type,
        inputs=["input: Tin"],
        outputs=["output: Tout"],
        attrs={"token": REQUIRED, "Tin": _LIST, "Tout": _LIST},
        shape_fn=_out_shapes,
        stateful=stateful,
        is_async=True,
    )
    NotDifferentiable(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx, *args):
        token = ctx.attrs["token"]
        fn = _FUNCS.get(token)
        if fn is None:
            raise errors.InvalidArgumentError(
                None, None, f"Unable to find the function {token} in the registry"
            )
        # TF hands 0-d inputs over as NumPy scalars (np.float32(1.0), bytes).
        args = [a[()] if getattr(a, "ndim", 1) == 0 else a for a in args]
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(None, _call, fn, args)
        if isinstance(outcome, BaseException):
            raise _as_op_error(outcome)
        return _check_results(token, outcome, ctx.attrs["Tout"])

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _call(fn, args):
    """Run on the worker thread; returns the result or the exception raised."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every error of user code becomes an OpError
        return exc


def _as_op_error(exc: BaseException) -> errors.OpError:
    cls = errors.UnknownError
    for kinds, error_class in _ERROR_CLASSES:
        if isinstance(exc, kinds):
            cls = error_class
            break
    err = cls(None, None, f"{type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def _as_array(value) -> np.ndarray:
    if isinstance(value, bytes | str):
        return np.array(value.encode() if isinstance(value, str) else value, dtype=object)
    arr = np.asarray(value)
    if arr.dtype.kind in "SU":
        arr = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(arr)
    return arr


def _check_results(token: str, result, tout):
    if not tout:
        return None
    values = list(result) if isinstance(result, list | tuple) else [result]
    if len(values) != len(tout):
        raise errors.InvalidArgumentError(
            None, None, f"{token} returns {len(values)} values, but expects to see "
            f"{len(tout)} values."
        )  # fmt: skip
    out = []
    for i, (value, dtype) in enumerate(zip(values, tout, strict=True)):
        arr = _as_array(value)
        got = dtypes.as_dtype(arr.dtype) if arr.dtype != object else dtypes.string
        if got != dtype:
            raise errors.InvalidArgumentError(
                None, None, f"{i}-th value returned by {token} is {_tf_name(got)}, but expects "
                f"{_tf_name(dtype)}"
            )  # fmt: skip
        out.append(arr)
    return out[0] if len(out) == 1 else tuple(out)


def _tf_name(dtype: dtypes.DType) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double"."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name, dtype.name)


PyFunc = _py_func_op("PyFunc", stateful=True)
PyFuncStateless = _py_func_op("PyFuncStateless", stateful=False)


def py_func(func, inp, Tout, stateful=True, name=None):  # noqa: N803 - TF's name
    """`tf.py_func`: call `func` on the NumPy values of `inp` when the op runs (on a worker
    thread, never the event loop).

    Returns a tensor when `Tout` is one dtype, a list for a list, and the Operation when
    `Tout` is an empty list.  Shapes are unknown.

    Raises (when run): InvalidArgumentError for a wrong number or dtype of results, and
    the error class TF maps the function's exception to (see the module note).
    """
    single = not isinstance(Tout, list | tuple)
    tout = [dtypes.as_dtype(Tout)] if single else [dtypes.as_dtype(t) for t in Tout]
    inputs = [ops.convert_to_tensor(x) for x in inp]
    graph = inputs[0].graph if inputs else ops.get_default_graph()
    token = _register_func(func, graph)
    attrs = {"token": token, "Tin": [t.dtype for t in inputs], "Tout": tout}
    op_type = "PyFunc" if stateful else "PyFuncStateless"
    op = ops.apply_op(op_type, [inputs], attrs, name=name)
    if not tout:
        return op
    return op.outputs[0] if single else list(op.outputs)


def numpy_function(func, inp, Tout, stateful=True, name=None):  # noqa: N803 - TF's name
    """`tf.numpy_function`: `py_func` (the function sees NumPy arrays, returns NumPy values)."""
    return py_func(func, inp, Tout, stateful=stateful, name=name)
