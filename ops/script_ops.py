"""Python functions as ops: PyFunc / PyFuncStateless (`py_func`, `numpy_function`).

The graph holds a token ("pyfunc_3"); the function itself lives in a process-wide
registry (TF's FuncRegistry), kept alive by the graph that uses it.  The kernel calls
it on a worker thread of the loop's default executor, never on the event loop: a
Python function may block, sleep or take long, and the loop must keep serving other
steps meanwhile.

Results are checked as TF does: as many values as `Tout`, each `np.asarray(value)` of
exactly the declared dtype ("0-th value returned by pyfunc_0 is double, but expects
float").  Python exceptions become TF's error classes by TF's table (ValueError and
TypeError -> InvalidArgument, StopIteration -> OutOfRange,
NotImplementedError -> Unimplemented, MemoryError -> ResourceExhausted, any other ->
Unknown), the message carrying the exception's type and text.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, eager_tensor
from asyncflow.ops.eager_tensor import EagerTensor, convert_eager, tf_type_name
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = ["py_func", "numpy_function", "py_function", "eager_py_func"]

_LIST = TypeConstraint(None, is_list=True)

_FUNCS: dict[str, object] = {}
_FUNCS_LOCK = threading.Lock()
_TOKENS = itertools.count()

# TF's py_func.cc mapping of Python exceptions to status codes (an IndexError is
# Unknown: TF 2.21 gives "UnknownError: IndexError: list index out of range").
_ERROR_CLASSES = (
    ((StopIteration,), errors.OutOfRangeError),
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
        raised, outcome = await loop.run_in_executor(None, _call, fn, args)
        if raised:
            raise _as_op_error(outcome)
        return _check_results(token, outcome, ctx.attrs["Tout"])

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _call(fn, args):
    """Run on the worker thread; returns (False, the result) or (True, the exception
    raised), so a function that returns an exception object is told apart."""
    try:
        return False, fn(*args)
    except Exception as exc:  # noqa: BLE001 - every error of user code becomes an OpError
        return True, exc


def _as_op_error(exc: BaseException) -> errors.OpError:
    cls = errors.UnknownError
    for kinds, error_class in _ERROR_CLASSES:
        if isinstance(exc, kinds):
            cls = error_class
            break
    text = str(exc)
    err = cls(None, None, f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
    err.__cause__ = exc
    return err


def _as_array(value) -> np.ndarray:
    if isinstance(value, bytes | str):
        return np.array(value.encode() if isinstance(value, str) else value, dtype=object)
    arr = np.asarray(value)
    if arr.dtype.kind in "SU":
        arr = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(arr)
    elif arr.dtype == object:  # only strings may come back as Python objects (TF's check)
        for item in arr.flat:
            if not isinstance(item, bytes | str):
                raise errors.InternalError(
                    None, None, f"Unsupported object type {type(item).__name__}"
                )
        arr = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(arr)
    return arr


def _check_results(token: str, result, tout):
    # TF: None is no values at all; a list or tuple is one value per item
    if result is None:
        values = []
    else:
        values = list(result) if isinstance(result, list | tuple) else [result]
    if not tout and not values:
        return None
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
                None, None, f"{i}-th value returned by {token} is {tf_type_name(got)}, but "
                f"expects {tf_type_name(dtype)}"
            )  # fmt: skip
        out.append(arr)
    return out[0] if len(out) == 1 else tuple(out)


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


# -- EagerPyFunc (`tf.py_function`) -------------------------------------------------------

EagerPyFunc = register_op(
    "EagerPyFunc",
    inputs=["input: Tin"],
    outputs=["output: Tout"],
    attrs={"token": REQUIRED, "is_async": False, "Tin": _LIST, "Tout": _LIST},
    shape_fn=_out_shapes,
    stateful=True,
    is_async=True,
)


@EagerPyFunc.kernel("CPU")
async def _eager_py_func_kernel(ctx, *args):
    token = ctx.attrs["token"]
    fn = _FUNCS.get(token)
    if fn is None:
        raise errors.InvalidArgumentError(
            None, None, f"Unable to find the function {token} in the registry"
        )
    taped = token in _TAPED  # (its gradient is built: record the call, as TF's tape)
    tensors = [
        EagerTensor(np.array(a), t, taped and (t.is_floating or t.is_complex))
        for a, t in zip(args, ctx.attrs["Tin"], strict=True)
    ]
    tout = ctx.attrs["Tout"]
    loop = asyncio.get_running_loop()
    outcome = await loop.run_in_executor(None, _call_eager, fn, tensors, tout, taped and token)
    if isinstance(outcome, BaseException):
        raise _as_op_error(outcome)
    if len(outcome) != len(tout):
        raise errors.InvalidArgumentError(
            None, None, f"{token} returns {len(outcome)} values, but expects to see "
            f"{len(tout)} values."
        )  # fmt: skip
    if not tout:
        return None
    return outcome[0] if len(outcome) == 1 else tuple(outcome)


def _call_eager(fn, tensors, tout, tape_token=None):
    """On the worker thread: the function's results converted to `tout` as TF's EagerFunc
    converts them (inside the call, so conversion errors map like the function's own).
    The function runs under a graph of its own: TF ops it calls (asyncflow has no eager
    execution) build there, never in the user's graph while a step runs it."""
    try:
        with ops.Graph().as_default():
            result = fn(*tensors)
        if isinstance(result, list | tuple):  # zipped with Tout: extra values are dropped
            values = [convert_eager(v, d) for v, d in zip(result, tout, strict=False)]
        elif result is None:
            values = []
        else:
            values = [convert_eager(result, tout[0])]  # IndexError for Tout=[]: as TF
        if tape_token:
            outs = result if isinstance(result, list | tuple) else [result]
            with _FUNCS_LOCK:
                _TAPE_CACHE[tape_token] = (tensors, list(outs)[: len(tout)])
        # A value may be one the function keeps (an EagerTensor of its own): copy.
        return [np.array(v) for v in values]
    except Exception as exc:  # noqa: BLE001 - every error of user code becomes an OpError
        return exc


# Tokens whose gradient was built (their calls are recorded), and the last recorded call
# of each: (input EagerTensors, results), taken by the gradient's call (TF's tape_cache).
_TAPED: set[str] = set()
_TAPE_CACHE: dict[str, tuple] = {}


@EagerPyFunc.gradient
def _eager_py_func_grad(op, *grads):
    """TF's _EagerPyFuncGrad: an EagerPyFunc, run after the op, differentiating what the
    function's operators recorded on its EagerTensors (NumPy work is not recorded: no
    gradient through it, as in TF); zeros where nothing connects (TF: a scalar 0.0, which
    an integer input refuses, as here)."""
    token = op.get_attr("token")
    token = token.decode() if isinstance(token, bytes) else token
    _TAPED.add(token)
    in_dtypes = [t.dtype for t in op.inputs]

    def eagerly_executed_grad(*dy):
        with _FUNCS_LOCK:
            entry = _TAPE_CACHE.pop(token, None)
        if entry is None:
            raise ValueError(f"no recorded call of {token} to differentiate")
        inputs, outputs = entry
        dy = [d.numpy() for d in dy] + [None] * (len(outputs) - len(dy))
        found = eager_tensor.gradients(outputs, inputs, dy[: len(outputs)])
        # TF: constant(0.0, dtype) where nothing connects, an error for an integer input;
        # a scalar there although the gradient's static shape is the input's: zeros of
        # that shape here (the same numbers, broadcast).
        return [
            g if g is not None
            else np.zeros_like(t.numpy()) if t.dtype.is_floating or t.dtype.is_complex
            else 0.0
            for g, t in zip(found, inputs, strict=True)
        ]  # fmt: skip

    dys = [
        ops.convert_to_tensor(g) if g is not None else array_ops.zeros_like(t)
        for g, t in zip(grads, op.outputs, strict=True)
    ]
    with ops.control_dependencies(list(op.outputs)):
        return py_function(eagerly_executed_grad, dys, in_dtypes)


def py_function(func=None, inp=None, Tout=None, name=None):  # noqa: N803 - TF's name
    """`tf.py_function`: call `func` when the op runs, on a worker thread (never the event
    loop), with an `EagerTensor` per input (`.numpy()`, `.shape`, `.dtype`, NumPy
    arithmetic, indexing: see ops/eager_tensor.py).

    `Tout` one dtype gives a tensor, a list gives a list, `[]` the Operation.  Gradients
    go through what the function computes with the arguments' operators (TF's tape; not
    through NumPy, as in TF).  Results
    (EagerTensors, NumPy or Python values) are converted to `Tout` as TF converts them:
    NumPy values are cast, a Python value the dtype cannot hold is refused.  With
    `func=None` it is a decorator (`@tf.py_function(Tout=tf.float32)`).

    Raises:
      TypeError: `Tout` missing; `inp` missing, or given to the decorator form.
      ValueError: `func` not callable.
      When run: InvalidArgumentError for a wrong number of results or a value `Tout`
        cannot hold, and the error class TF maps the function's exception to.
    """
    if Tout is None:
        raise TypeError(
            "Missing required argument: 'Tout'\n  If using tf.py_function as a decorator, "
            "set `Tout`\n  **by name** above the function:\n  `@tf.py_function(Tout=tout)`"
        )
    if func is None:
        if inp is not None:
            raise TypeError(
                "Don't set the `inp` argument when using tf.py_function as a decorator "
                "(`func=None`)."
            )

        def decorator(fun):
            @functools.wraps(fun)
            def wrapper(*args):
                return py_function(fun, inp=args, Tout=Tout, name=name)

            return wrapper

        return decorator
    if inp is None:
        raise TypeError(
            "Missing argument `inp`:\n  You must set the `inp` argument (the list of arguments "
            "to the\n  function), unless you use `tf.py_function` as a decorator(`func=None`)."
        )
    if not callable(func):
        raise ValueError(
            f"Expected func to be callable. Received func={func} of type {type(func)}."
        )
    single = not isinstance(Tout, list | tuple)
    tout = [dtypes.as_dtype(Tout)] if single else [dtypes.as_dtype(t) for t in Tout]
    inputs = [ops.convert_to_tensor(x) for x in inp]
    graph = ops.get_default_graph()
    token = _register_func(func, graph)
    attrs = {"token": token, "is_async": False, "Tin": [t.dtype for t in inputs], "Tout": tout}
    op = ops.apply_op("EagerPyFunc", [inputs], attrs, name=name)
    if not tout:
        return op
    return op.outputs[0] if single else list(op.outputs)


eager_py_func = py_function
