"""TF Serving's in-graph batching ops: BatchFunction, Batch, Unbatch, UnbatchGrad.

These ops batch tensors across concurrent steps of one session (TF's DirectSession:
concurrent `Session.run` calls; here `arun` coroutines on the session's loop, or `run`
from several threads, whose steps all run on that loop).  A step's rows wait in a
batching queue until the batch is full or `batch_timeout_micros` passed since its
first rows came; then the batch runs once, padded to the next of `allowed_batch_sizes`,
and each step gets its own rows back.  The queue is asyncflow/batching.py's Batcher,
the REST server's too (timers on the loop, no threads, exactly-once delivery to each
request), one per resource: (`container`, `shared_name` or the node's name,
`batching_queue`) in the session's resource manager.

- BatchFunction runs its function `f` on the batch.  `f` is traced into the same graph
  behind placeholders, as tf.data's functions are (attrs `f_inputs`, `f_outputs`,
  `f_captures`; a GraphDef written here holds TF's FunctionDef and `f` attr, and a TF
  GraphDef's `f` is read back into this form: asyncflow/dataset_functions.py), and a
  batch runs it as a nested step of the session.  `captured_tensors` feed the
  function's last arguments (the last caller's values, as TF's kernel takes them).  An
  error of the function reaches every caller of that batch.
- Batch hands the whole batch to the step whose rows came last, with `batch_index`
  (id, start, end) rows for every step in it; the others get empty tensors and their
  own `id`.  Unbatch (same `shared_name` in every step) gives each step its rows of a
  batched result: the step holding the batch splits it, a step waiting for its rows
  gets them (or DeadlineExceededError after `timeout_micros`).  UnbatchGrad is the
  reverse: the step holding `batch_index` waits until every step of its batch gave its
  gradient and returns them joined.

TF 2.21 registers no gradient for any of the four (tf.gradients raises LookupError).
Accepted and not acted on: `num_batch_threads` beyond how many batches run at once,
the low-priority attrs, `mixed_priority_policy`, and a `batch_padding_policy` other
than PAD_UP (batches are always padded up).  Steps whose inputs differ after dim 0 are
batched apart (TF puts them in one batch, whose concatenation then fails).

Invariants: each step's rows are delivered to it exactly once, or it gets an error;
stored rows for a step that never asks are dropped after the timeout.
"""

from __future__ import annotations

import asyncio
import random

import numpy as np

from asyncflow import dtypes, errors, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.batching import Batcher
from asyncflow.ops import array_ops
from asyncflow.ops.dataset_ops import external_placeholders
from asyncflow.raw_op_functions import register_builder
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__ = ["batch_function"]

_LIST = TypeConstraint(None, is_list=True)
_NEEDS_LIST = TypeConstraint(None, is_list=True)
_BATCHING = {
    "num_batch_threads": REQUIRED,
    "max_batch_size": REQUIRED,
    "batch_timeout_micros": REQUIRED,
    "max_enqueued_batches": 10,
    "allowed_batch_sizes": [],
    "container": "",
    "shared_name": "",
    "batching_queue": "",
}


def _unknown_shapes(op):
    return [None] * len(op.outputs)


def _batch_shape(op):
    return [*(_unknown_rows(t.shape) for t in op.inputs), [None, 3], []]


def _unbatch_shape(op):
    return [_unknown_rows(op.inputs[0].shape)]


def _unbatch_grad_shape(op):
    n = op.inputs[2].shape.ndims
    return [None if n is None else [None] * n]


BatchFunction = register_op(
    "BatchFunction",
    inputs=["in_tensors: Tin", "captured_tensors: Tcaptured"],
    outputs=["out_tensors: Tout"],
    attrs={
        "f_inputs": [],
        "f_outputs": [],
        "f_captures": [],
        **_BATCHING,
        "low_priority_max_batch_size": 0,
        "low_priority_batch_timeout_micros": 0,
        "low_priority_allowed_batch_sizes": [],
        "low_priority_max_enqueued_batches": 0,
        "mixed_priority_policy": "low_priority_padding_with_max_batch_size",
        "batch_padding_policy": "PAD_UP",
        "Tin": _NEEDS_LIST,
        "Tcaptured": _LIST,
        "Tout": _NEEDS_LIST,
        "enable_large_batch_splitting": False,
    },
    shape_fn=_unknown_shapes,
    stateful=True,
    is_async=True,
)
Batch = register_op(
    "Batch",
    inputs=["in_tensors: T"],
    outputs=["batched_tensors: T", "batch_index: int64", "id: int64"],
    attrs={**_BATCHING, "grad_timeout_micros": REQUIRED, "T": _NEEDS_LIST},
    shape_fn=_batch_shape,
    stateful=True,
    is_async=True,
)
Unbatch = register_op(
    "Unbatch",
    inputs=["batched_tensor: T", "batch_index: int64", "id: int64"],
    outputs=["unbatched_tensor: T"],
    attrs={"timeout_micros": REQUIRED, "container": "", "shared_name": "", "T": TypeConstraint()},
    shape_fn=_unbatch_shape,
    stateful=True,
    is_async=True,
)
UnbatchGrad = register_op(
    "UnbatchGrad",
    inputs=["original_input: T", "batch_index: int64", "grad: T", "id: int64"],
    outputs=["batched_grad: T"],
    attrs={"container": "", "shared_name": "", "T": TypeConstraint()},
    shape_fn=_unbatch_grad_shape,
    stateful=True,
    is_async=True,
)


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


# -- the batcher resource ---------------------------------------------------------------


def _check_options(a, splitting: bool) -> None:
    """TF's checks of the batching attrs (its messages), when a step first runs."""
    if a["max_batch_size"] < 1:
        raise _invalid(f"input_batch_size_limit must be positive; was {a['max_batch_size']}")
    if a["batch_timeout_micros"] < 0:
        raise _invalid(
            f"batch_timeout_micros must be non-negative; was {a['batch_timeout_micros']}"
        )
    sizes = list(a["allowed_batch_sizes"])
    if any(b <= p for p, b in zip(sizes, sizes[1:])) or (sizes and sizes[0] < 1):
        raise _invalid("allowed_batch_sizes entries must be monotonically increasing")
    if sizes and not splitting and sizes[-1] != a["max_batch_size"]:
        raise _invalid(
            "final entry in allowed_batch_sizes must equal max_batch_size when "
            "enable_large_batch_splitting is False"
        )
    if sizes and splitting and sizes[-1] > a["max_batch_size"]:
        raise _invalid(
            "When enable_large_batch_splitting is true, input_batch_size_limit must be "
            "greater than or equal to max_execution_batch_size."
        )


def _batcher(ctx, kind: str, fn) -> Batcher:
    """This op's batcher: one per (container, shared_name or node name, batching_queue)
    in the session's resource manager, bound to the loop the session's steps run on
    (a session that moved to another loop gets a fresh one)."""
    a = ctx.attrs
    container = a["container"]
    key = f"{kind}:{a['shared_name'] or ctx.op.name}:{a['batching_queue']}"
    mgr = ctx.resource_mgr(container)
    loop = asyncio.get_running_loop()
    held = mgr.get(container, key)
    if held is not None and held.loop in (None, loop):
        return held
    splitting = bool(a.get("enable_large_batch_splitting", False))
    _check_options(a, splitting)
    made = Batcher(
        fn,
        max_batch_size=a["max_batch_size"],
        batch_timeout_micros=a["batch_timeout_micros"],
        max_enqueued_batches=max(1, a["max_enqueued_batches"]),
        max_concurrent_batches=max(1, a["num_batch_threads"]),
        allowed_batch_sizes=list(a["allowed_batch_sizes"]) or None,
        enable_large_batch_splitting=splitting,
        pass_contexts=True,
    )
    if held is None:
        return mgr.lookup_or_create(container, key, lambda: made)
    mgr.delete(container, key)
    return mgr.lookup_or_create(container, key, lambda: made)


def _check_batchable(arrays) -> int:
    """Rows of one step's inputs (TF's checks and messages)."""
    if any(np.ndim(x) == 0 for x in arrays):
        raise _invalid("Batching input tensors must have at least one dimension.")
    rows = {np.shape(x)[0] for x in arrays}
    if len(rows) != 1:
        raise _invalid(
            "Batching input tensors supplied in a given op invocation must have equal "
            "0th-dimension size."
        )
    return rows.pop()


def _inputs(arrays) -> dict:
    return {str(i): np.asarray(x) for i, x in enumerate(arrays)}


def _rows_back(outputs: dict, n: int) -> list:
    return [outputs[str(i)] for i in range(n)]


# -- BatchFunction ----------------------------------------------------------------------


def _function_of(ctx):
    """The function's (argument count, runner), resolved once per (session, op)."""
    fn = ctx.kernel_state.get("fn")
    if fn is None:
        if ctx.session is None:
            raise errors.UnimplementedError(
                None, None, "BatchFunction runs its function as a nested step of a local "
                "session; this worker has none",
            )  # fmt: skip
        get = ctx.op.graph.get_tensor_by_name
        a = ctx.attrs
        inputs = [get(n) for n in a["f_inputs"]]
        captures = [get(n) for n in a["f_captures"]]
        outputs = [get(n) for n in a["f_outputs"]]
        runner = _function_runner(ctx.session, inputs, outputs, captures)
        fn = ctx.kernel_state["fn"] = (len(inputs) + len(captures), runner)
    return fn


def _function_runner(session, inputs, outputs, captures):
    async def run(merged: dict, contexts: list) -> dict:
        padded = len(next(iter(merged.values())))
        feeds = {p: merged[str(i)] for i, p in enumerate(inputs)}
        feeds.update(zip(captures, contexts[-1][0]))  # (the last caller's captures, as TF)
        values = await session.arun(outputs, feeds)
        rows = sum(c[1] for c in contexts)
        for v in values:
            if np.ndim(v) == 0 or np.shape(v)[0] != padded:
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    "Batched output tensor's 0th dimension does not equal the sum of the 0th "
                    "dimension sizes of the input tensors. 0th dimension size: "
                    f"{np.shape(v)[0] if np.ndim(v) else 0}; batch size: {rows}; unbatched "
                    f"tasks size: 0; padding size: {padded - rows}",
                )
        return {str(k): v for k, v in enumerate(values)}

    return run


@BatchFunction.kernel("CPU")
async def _batch_function(ctx, *args):
    a = ctx.attrs
    n_in = len(a["Tin"])
    in_tensors, captured = args[:n_in], args[n_in:]
    n_params, runner = _function_of(ctx)
    if n_params != len(args):
        raise _invalid(
            f"Function takes {n_params} argument(s) but {len(args)} argument(s) were passed"
        )
    batcher = _batcher(ctx, "BatchFunction", runner)
    rows = _check_batchable(in_tensors)
    if rows == 0:  # (TF runs nothing and answers empty tensors)
        out = [np.zeros((0,), t.as_numpy_dtype) for t in a["Tout"]]
    else:
        got = await batcher.submit(_inputs(in_tensors), context=(captured, rows))
        out = _rows_back(got, len(a["Tout"]))
    return out[0] if len(out) == 1 else tuple(out)


def batch_function(
    in_tensors,
    captured_tensors,
    f,
    num_batch_threads,
    max_batch_size,
    batch_timeout_micros,
    Tout,  # noqa: N803 - TF's names
    max_enqueued_batches=10,
    allowed_batch_sizes=(),
    container="",
    shared_name="",
    batching_queue="",
    low_priority_max_batch_size=0,
    low_priority_batch_timeout_micros=0,
    low_priority_allowed_batch_sizes=(),
    low_priority_max_enqueued_batches=0,
    mixed_priority_policy="low_priority_padding_with_max_batch_size",
    batch_padding_policy="PAD_UP",
    enable_large_batch_splitting=False,
    name=None,
    scope="computation",
    arg_names=None,
    structured=False,
):
    """A BatchFunction op running `f` (a traced function or any callable of tensors) on
    batches of `in_tensors`, with `captured_tensors` as its last arguments; its results.

    `f` is built into this graph under `scope` on placeholders (one per argument, named
    by `arg_names`, dim 0 unknown); placeholders of the graph that its results read are
    captured too (fed from the step, they reach the function as captured tensors).
    `Tout` None takes the results' dtypes; `structured` returns the results in `f`'s
    structure (TF's decorator), else as a list (the op's outputs).

    Raises:
      ValueError: `f`'s results are not tensors of the `Tout` dtypes.
    """
    in_tensors = [ops.convert_to_tensor(t) for t in in_tensors]
    captured_tensors = [ops.convert_to_tensor(t) for t in captured_tensors]
    args = in_tensors + captured_tensors
    # A traced function's own argument signature (TF checks the count when it runs);
    # else one argument per tensor, any number of rows.
    params = getattr(f, "_arg_placeholders", None)
    if params is None:
        params = [(t.dtype, _unknown_rows(t.shape)) for t in args]
    else:
        params = [(p.dtype, p.shape) for p in params]
    names = arg_names or [f"arg{i}" for i in range(len(params))]
    with ops.name_scope(scope), ops.control_dependencies(None):
        placeholders = [
            array_ops.placeholder(dtype, shape, name=names[i])
            for i, (dtype, shape) in enumerate(params)
        ]
        results = f(*placeholders)
    flat = [ops.convert_to_tensor(t) for t in nest.flatten(results)]
    want = (
        [t.dtype.base_dtype for t in flat] if Tout is None else [dtypes.as_dtype(t) for t in Tout]
    )
    if [t.dtype.base_dtype for t in flat] != want:
        raise ValueError(
            f"BatchFunction: f returns {[t.dtype.name for t in flat]}, Tout is "
            f"{[t.name for t in want]}"
        )
    outer = external_placeholders(flat, placeholders)
    n_in = min(len(in_tensors), len(placeholders))
    attrs = {
        "f_inputs": [t.name for t in placeholders[:n_in]],
        "f_outputs": [t.name for t in flat],
        "f_captures": [t.name for t in placeholders[n_in:] + outer],
        "num_batch_threads": num_batch_threads,
        "max_batch_size": max_batch_size,
        "batch_timeout_micros": batch_timeout_micros,
        "max_enqueued_batches": max_enqueued_batches,
        "allowed_batch_sizes": list(allowed_batch_sizes),
        "container": container,
        "shared_name": shared_name,
        "batching_queue": batching_queue,
        "low_priority_max_batch_size": low_priority_max_batch_size,
        "low_priority_batch_timeout_micros": low_priority_batch_timeout_micros,
        "low_priority_allowed_batch_sizes": list(low_priority_allowed_batch_sizes),
        "low_priority_max_enqueued_batches": low_priority_max_enqueued_batches,
        "mixed_priority_policy": mixed_priority_policy,
        "batch_padding_policy": batch_padding_policy,
        "Tout": want,
        "enable_large_batch_splitting": enable_large_batch_splitting,
    }
    op = ops.apply_op("BatchFunction", [in_tensors, captured_tensors + outer], attrs, name=name)
    if structured:
        return nest.pack_sequence_as(results, list(op.outputs))
    return list(op.outputs)


def _raw_batch_function(
    *,
    in_tensors,
    captured_tensors,
    f,
    num_batch_threads,
    max_batch_size,
    batch_timeout_micros,
    Tout,
    name=None,
    **attrs,
):  # noqa: N803
    """TF's raw op BatchFunction (keyword-only): `f` is traced into this graph."""
    unknown = set(attrs) - set(_RAW_OPTIONAL)
    if unknown:
        raise TypeError(f"batch_function got unexpected keyword arguments {sorted(unknown)}")
    return batch_function(
        in_tensors, captured_tensors, f, num_batch_threads, max_batch_size,
        batch_timeout_micros, Tout, name=name, scope=f"{name or 'BatchFunction'}_f", **attrs,
    )  # fmt: skip


_RAW_OPTIONAL = (
    "max_enqueued_batches", "allowed_batch_sizes", "container", "shared_name",
    "batching_queue", "low_priority_max_batch_size", "low_priority_batch_timeout_micros",
    "low_priority_allowed_batch_sizes", "low_priority_max_enqueued_batches",
    "mixed_priority_policy", "batch_padding_policy", "enable_large_batch_splitting",
)  # fmt: skip
_raw_batch_function.__name__ = _raw_batch_function.__qualname__ = "BatchFunction"
register_builder("BatchFunction", _raw_batch_function)


def _unknown_rows(shape):
    if shape.ndims is None or shape.ndims == 0:
        return shape
    return tensor_shape.TensorShape([None]).concatenate(shape[1:])


# -- Batch ------------------------------------------------------------------------------


class _Task:
    """One Batch step in a batch: its id, its rows, and what the batch gives it."""

    __slots__ = ("id", "rows", "result")

    def __init__(self, task_id: int, rows: int):
        self.id, self.rows, self.result = task_id, rows, None


async def _emit(merged: dict, tasks: list) -> dict:
    """Batch's "function": the whole batch to the last step, empty tensors to the
    others; every step gets its (empty) share of the rows back from the batcher."""
    padded = len(next(iter(merged.values())))
    index = np.zeros((len(tasks), 3), np.int64)
    start = 0
    for k, t in enumerate(tasks):
        index[k] = (t.id, start, start + t.rows)
        start += t.rows
    names = sorted(merged, key=int)
    for t in tasks[:-1]:
        empty = [np.zeros((0, *merged[n].shape[1:]), merged[n].dtype) for n in names]
        t.result = (empty, np.zeros((0, 3), np.int64))
    tasks[-1].result = ([merged[n] for n in names], index)
    return {"_": np.zeros((padded, 0), np.int8)}


@Batch.kernel("CPU")
async def _batch(ctx, *in_tensors):
    batcher = _batcher(ctx, "Batch", _emit)
    rows = _check_batchable(in_tensors)
    task = _Task(random.getrandbits(63), rows)
    if rows == 0:
        empty = [np.asarray(x) for x in in_tensors]
        return (*empty, np.zeros((0, 3), np.int64), np.int64(task.id))
    await batcher.submit(_inputs(in_tensors), context=task)
    batched, index = task.result
    return (*batched, index, np.int64(task.id))


# -- Unbatch / UnbatchGrad --------------------------------------------------------------


class _Unbatcher:
    """Rows of a batched result waiting for their step, and steps waiting for rows.

    Invariant: an id is in at most one of `_ready` and `_waiting`."""

    def __init__(self):
        self._ready: dict[int, tuple] = {}  # id -> (rows, expiry timer)
        self._waiting: dict[int, asyncio.Future] = {}

    def deliver(self, task_id: int, rows, timeout_s: float) -> None:
        fut = self._waiting.pop(task_id, None)
        if fut is not None and not fut.done():
            fut.set_result(rows)
            return
        old = self._ready.pop(task_id, None)
        if old is not None:
            old[1].cancel()
        timer = asyncio.get_running_loop().call_later(timeout_s, self._ready.pop, task_id, None)
        self._ready[task_id] = (rows, timer)

    async def take(self, task_id: int, timeout_s: float):
        held = self._ready.pop(task_id, None)
        if held is not None:
            held[1].cancel()
            return held[0]
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._waiting[task_id] = fut
        # (a timer, not asyncio.timeout: a step's kernel need not run in a Task of its own)
        timer = loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            if self._waiting.get(task_id) is fut:
                del self._waiting[task_id]


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(
            errors.DeadlineExceededError(
                None, None, "Batched data did not arrive within timeout window."
            )
        )


def _index_rows(batch_index, n_rows: int) -> list:
    index = np.asarray(batch_index)
    if index.ndim != 2 or index.shape[1] != 3:
        raise _invalid(f"batch_index must be a matrix with 3 columns, got shape {index.shape}")
    rows = [(int(i), int(s), int(e)) for i, s, e in index]
    if (
        any(s < 0 or e < s for _, s, e in rows)
        or sum(e - s for _, s, e in rows) > n_rows
        or any(e > n_rows for _, _, e in rows)
    ):
        raise _invalid("Sum of split sizes must not exceed dim0-size of input tensor")
    return rows


def _resource(ctx, kind: str, factory):
    a = ctx.attrs
    container = a["container"]
    key = f"{kind}:{a['shared_name'] or ctx.op.name}"
    return ctx.resource_mgr(container).lookup_or_create(container, key, factory)


@Unbatch.kernel("CPU")
async def _unbatch(ctx, batched_tensor, batch_index, task_id):
    unbatcher = _resource(ctx, "Unbatch", _Unbatcher)
    timeout_s = max(ctx.attrs["timeout_micros"], 0) / 1e6
    me = int(task_id)
    batched = np.asarray(batched_tensor)
    own = None
    for tid, start, end in _index_rows(batch_index, batched.shape[0] if batched.ndim else 0):
        rows = np.array(batched[start:end], copy=True)
        if tid == me:
            own = rows
        else:
            unbatcher.deliver(tid, rows, timeout_s)
    if own is not None:
        return own
    return await unbatcher.take(me, timeout_s)


class _GradGatherer:
    """Gradients of the steps of a batch, until the step holding its index joins them."""

    def __init__(self):
        self._grads: dict[int, np.ndarray] = {}
        self._pending: list[tuple[list, asyncio.Future]] = []

    def add(self, task_id: int, grad) -> None:
        self._grads[task_id] = grad
        for entry in list(self._pending):
            self._try(entry)

    def _try(self, entry) -> bool:
        ids, fut = entry
        if fut.done():
            self._pending.remove(entry)
            return True
        if all(i in self._grads for i in ids):
            self._pending.remove(entry)
            fut.set_result(np.concatenate([self._grads.pop(i) for i in ids]))
            return True
        return False

    async def gather(self, ids: list):
        entry = (ids, asyncio.get_running_loop().create_future())
        self._pending.append(entry)
        if self._try(entry):
            return entry[1].result()
        try:
            return await entry[1]
        finally:
            if entry in self._pending:
                self._pending.remove(entry)


@UnbatchGrad.kernel("CPU")
async def _unbatch_grad(ctx, original_input, batch_index, grad, task_id):
    gatherer = _resource(ctx, "UnbatchGrad", _GradGatherer)
    grad = np.asarray(grad)
    if grad.ndim == 0:
        raise _invalid("grad must have at least one dimension")
    index = np.asarray(batch_index)
    gatherer.add(int(task_id), np.array(grad, copy=True))
    if index.size == 0:
        return np.zeros((0, *grad.shape[1:]), grad.dtype)
    ids = [int(i) for i in index.reshape(-1, 3)[:, 0]]
    return await gatherer.gather(ids)
