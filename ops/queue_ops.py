"""Queue ops (FIFOQueueV2 ... QueueIsClosedV2) and TF1's queue classes.

A queue op (FIFOQueueV2, PaddingFIFOQueueV2, RandomShuffleQueueV2, PriorityQueueV2)
looks up or creates its queue resource (asyncflow/queues.py) in the step's resource
container, keyed by `shared_name` or else the op's name, and outputs a handle: a 0-d
object tensor holding the resource (declared `string` until the runtime has a
`resource` dtype).  The other ops take that handle.

Blocking ops (enqueue, dequeue*) are `is_async` and suspend on the queue's waiter
futures.  Exactly-once delivery across step failures:
- a dequeue registers an undo with its step (`kernel_api.current_step().on_failure`) in
  the synchronous section that takes its elements; if the step fails, is cancelled or
  times out, the undo gives them back in order -- unless an op computing on them failed
  (`queues.poisoned_by`): a poison element fails that one step and is gone, as in TF;
- an enqueue that commits elements derived from dequeues of the same step (a queue
  runner's `q2.enqueue(q1.dequeue())`) disarms those dequeues' undos: the elements now
  live in q2, so giving them back to q1 would duplicate them.
"""

from __future__ import annotations

import hashlib

import numpy as np

from asyncflow import dtypes as _dtypes
from asyncflow import errors, queues, random_seed, tensor_shape
from asyncflow import graph as ops
from asyncflow.kernel_api import PASS_RESOURCE_OPS, current_step, kernel_resource
from asyncflow.ops import philox_random
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "QueueBase",
    "FIFOQueue",
    "GPUCompatibleFIFOQueue",
    "PaddingFIFOQueue",
    "RandomShuffleQueue",
    "PriorityQueue",
]

_TYPES = TypeConstraint(None, is_list=True)
_HANDLE_SHAPE = tensor_shape.TensorShape([])


def _scalar_shape(op):
    return [_HANDLE_SHAPE]


def _no_outputs(op):
    return []


def _unknown_outputs(op):
    return [None] * len(op.outputs)


# -- the queue ops ------------------------------------------------------------------------


def _check_shuffle_queue(name, q, a) -> None:
    """TF's RandomShuffleQueue::MatchesNodeDef beyond types, capacity and shapes: the
    same min_after_dequeue.  (TF also compares requested seeds; not here yet: the
    graph-seed derivation of TF's test harness differs from the kernel-test shim's.)"""
    if q.min_after_dequeue != a["min_after_dequeue"]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shared queue '{name}' has min_after_dequeue {q.min_after_dequeue} but "
            f"requested min_after_dequeue of {a['min_after_dequeue']}",
        )


def _register_queue_op(op_type, extra_attrs, factory):
    attrs = {
        "component_types": _TYPES,
        "shapes": [],
        "capacity": -1,
        "container": "",
        "shared_name": "",
    }
    attrs.update(extra_attrs)
    op_def = register_op(
        op_type, outputs=["handle: string"], attrs=attrs, shape_fn=_scalar_shape, stateful=True
    )
    NotDifferentiable(op_type)
    PASS_RESOURCE_OPS.add(op_type)

    # Queues are host objects (TF registers its queue kernels on CPU only).
    @op_def.kernel("CPU")
    async def _queue_kernel(ctx):
        a = ctx.attrs
        name = a["shared_name"] or ctx.op.name
        container = a["container"]
        q = kernel_resource(ctx, container, name, lambda: factory(name, a, ctx.op))
        if ctx.kernel_state.get("checked") is q:  # validated once per (session, op)
            return q.handle
        want = list(a["component_types"])
        if op_def.name == "PriorityQueueV2":
            want.insert(0, _dtypes.int64)
        if q.kind != op_def.name[:-2] or q.dtypes != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shared queue '{name}' is a {q.kind} with component types "
                f"{[d.name for d in q.dtypes]} but requested a {op_def.name[:-2]} with "
                f"component types {[d.name for d in want]}",
            )
        if q.capacity != a["capacity"]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shared queue '{name}' has capacity {q.capacity} but requested capacity "
                f"{a['capacity']}",
            )
        if op_def.name == "RandomShuffleQueueV2":
            _check_shuffle_queue(name, q, a)
        if _shapes_str(q.shapes, op_def.name) != _shapes_str(_shapes_attr(a), None):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shared queue '{name}' has component shapes "
                f"{_shapes_str(q.shapes, op_def.name)} but requested component shapes were "
                f"{_shapes_str(_shapes_attr(a), None)}",
            )
        ctx.kernel_state["checked"] = q
        return q.handle

    return op_def


def _shapes_str(shapes, op_type) -> str:
    """TF's rendering of a queue's component shapes ("[[], [2]]"); a priority queue's
    own int64 priority component is left out."""
    shapes = list(shapes or [])
    if op_type == "PriorityQueueV2" and shapes:
        shapes = shapes[1:]
    return "[" + ", ".join(_shape_str(tensor_shape.as_shape(s).as_list()) for s in shapes) + "]"


def _shapes_attr(a):
    return list(a["shapes"]) or None


_register_queue_op(
    "FIFOQueueV2",
    {},
    lambda name, a, op: queues.FIFOQueueResource(
        name, a["capacity"], a["component_types"], _shapes_attr(a)
    ),
)
_register_queue_op(
    "PaddingFIFOQueueV2",
    {},
    lambda name, a, op: queues.PaddingFIFOQueueResource(
        name, a["capacity"], a["component_types"], _shapes_attr(a)
    ),
)


def _shuffle_draws(seed: int, seed2: int):
    """TF's RandomShuffleQueue generator: SingleSampleAdapter<PhiloxRandom>(seed, seed2),
    random seeds where both are 0."""
    if not (seed or seed2):
        seed, seed2 = (int(v) for v in np.random.default_rng().integers(1, 2**63, 2))
    return philox_random.PhiloxStream(int(seed), int(seed2))


_register_queue_op(
    "RandomShuffleQueueV2",
    {"min_after_dequeue": 0, "seed": 0, "seed2": 0},
    lambda name, a, op: queues.RandomShuffleQueueResource(
        name,
        a["capacity"],
        a["component_types"],
        _shapes_attr(a),
        a["min_after_dequeue"],
        _shuffle_draws(a["seed"], a["seed2"]),
    ),
)
_register_queue_op(
    "PriorityQueueV2",
    {},
    lambda name, a, op: queues.PriorityQueueResource(
        name, a["capacity"], [_dtypes.int64, *a["component_types"]], _prio_shapes(a)
    ),
)


def _prio_shapes(a):
    shapes = _shapes_attr(a)
    return None if shapes is None else [tensor_shape.TensorShape([]), *shapes]


def _queue(handle) -> queues.QueueBase:
    q = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(q, queues.QueueBase):
        raise errors.InvalidArgumentError(
            None, None, f"Expected a queue handle, got {type(q).__name__}"
        )
    return q


# -- exactly-once bookkeeping ---------------------------------------------------------------


class _Undo:
    """Gives a failed step's dequeued elements back; disarmed once they were re-enqueued."""

    __slots__ = ("queue", "items", "op", "active")

    def __init__(self, queue, items, op):
        self.queue, self.items, self.op, self.active = queue, items, op, True

    def __call__(self, error) -> None:
        if self.active:
            self.active = False
            if not queues.poisoned_by(error, self.op):
                self.queue.restore(self.items)


def _on_take(ctx, q):
    sctx = current_step()
    if sctx is None:
        return None
    op = ctx.op
    return lambda items: sctx.on_failure(_Undo(q, items, op))


_DEQUEUE_TYPES = frozenset(
    ("QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2", "BarrierTakeMany")
)


def _upstream_dequeues(ctx) -> frozenset:
    """Dequeue ops whose outputs (or control) reach this op; computed once per session."""
    st = ctx.kernel_state
    found = st.get("upstream_dequeues")
    if found is None:
        seen, stack, hits = set(), [ctx.op], set()
        while stack:
            op = stack.pop()
            for dep in [t.op for t in op.inputs] + list(op.control_inputs):
                if dep not in seen:
                    seen.add(dep)
                    if dep.type in _DEQUEUE_TYPES:
                        hits.add(dep)
                    stack.append(dep)
        found = st["upstream_dequeues"] = frozenset(hits)
    return found


def _on_commit(ctx, n_elems: int = 1):
    """The commit hook of an enqueue of `n_elems` elements: disarms the undos of the
    dequeues of this step that its inputs derive from (None when there are none)."""
    sctx = current_step()
    pending = sctx.failure_callbacks() if sctx is not None else None
    if not pending:
        return None
    upstream = _upstream_dequeues(ctx)
    if not upstream:
        return None

    # Any take's undo (queue or barrier) that names its op and can be disarmed.
    undos = [cb for cb in pending if getattr(cb, "op", None) in upstream and hasattr(cb, "active")]
    if not undos:
        return None

    taken = list(undos[0].items) if len(undos) == 1 and isinstance(undos[0], _Undo) else None

    def commit(inserted=None):
        if inserted is not None and taken is not None and len(taken) == n_elems:
            # A transfer larger than the queue's capacity goes in progressively: its
            # first `inserted` elements map row for row onto the one dequeue they came
            # from, whose undo now gives back only the others if the step fails.
            undos[0].items = taken[inserted:]
            return
        for cb in undos:
            cb.active = False

    return commit


def _watchdog(ctx):
    """Fail a dequeue that waits on a queue whose QueueRunners were never started."""
    queue_op = ctx.op.inputs[0].op
    session = ctx.session
    if not ctx.op.graph.get_collection("queue_runners"):
        return None
    if not queues.unstarted_runners(session, queue_op):
        return None

    def check():
        runners = queues.unstarted_runners(session, queue_op)
        if not runners:
            return None
        return errors.FailedPreconditionError(
            None,
            None,
            f"Dequeue from queue '{queue_op.name}' waited {queues.unstarted_runner_timeout()} s "
            f"for elements, but the {len(runners)} QueueRunner(s) that fill it were never "
            "started for this session. Call tf.train.start_queue_runners(sess=sess, "
            "coord=coord) before running ops that dequeue from it (timeout: "
            "asyncflow.queues.set_unstarted_runner_timeout or "
            "ASYNCFLOW_QUEUE_RUNNER_TIMEOUT).",
        )

    return (queues.unstarted_runner_timeout(), check)


# -- element checks -------------------------------------------------------------------------


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _check_components(q, components, batch: bool) -> list:
    if len(components) != len(q.dtypes):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{q.kind} '{q.name}' expects {len(q.dtypes)} components, got {len(components)}",
        )
    out = []
    for k, (c, dt) in enumerate(zip(components, q.dtypes)):
        c = np.array(c, copy=True)  # the caller may reuse its buffer after enqueueing
        if c.dtype != np.dtype(dt.as_numpy_dtype):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Type mismatch in tuple component {k}. Expected {dt.name}, got {c.dtype}",
            )
        if batch and c.ndim == 0:
            raise errors.InvalidArgumentError(
                None, None, f"Tuple component {k} of EnqueueMany must have rank at least 1"
            )
        if q.dims is not None:
            want = q.dims[k]
            got = c.shape[1:] if batch else c.shape
            if want != got and (
                len(want) != len(got) or any(w is not None and w != d for w, d in zip(want, got))
            ):
                exp = (c.shape[:1] + want) if batch else want
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Shape mismatch in tuple component {k}. Expected "
                    f"{_shape_str(d if d is not None else '?' for d in exp)}, got "
                    f"{_shape_str(c.shape)}",
                )
        out.append(c)
    if batch and len({c.shape[0] for c in out}) > 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            "EnqueueMany requires all components to have the same first dimension, got "
            + ", ".join(str(c.shape[0]) for c in out),
        )
    return out


def _split(c: np.ndarray) -> list:
    if c.dtype == object and c.ndim == 1:
        out = []
        for x in c:
            a = np.empty((), dtype=object)
            a[()] = x
            out.append(a)
        return out
    return list(c)


# -- enqueue / dequeue / close / size ops -------------------------------------------------

QueueEnqueueV2 = register_op(
    "QueueEnqueueV2",
    inputs=["handle: string", "components: Tcomponents"],
    attrs={"Tcomponents": _TYPES, "timeout_ms": -1},
    shape_fn=_no_outputs,
    stateful=True,
    is_async=True,
)
QueueEnqueueManyV2 = register_op(
    "QueueEnqueueManyV2",
    inputs=["handle: string", "components: Tcomponents"],
    attrs={"Tcomponents": _TYPES, "timeout_ms": -1},
    shape_fn=_no_outputs,
    stateful=True,
    is_async=True,
)


def _type_string(dtype) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double", float16 "half"."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name, dtype.name)


def _check_signature(ctx, q) -> None:
    # TF's enqueue kernels match their input types against the queue's before anything
    # else (OpKernelContext::MatchSignature), so a short tuple fails with this message.
    have = list(ctx.attrs["Tcomponents"])
    if have != list(q.dtypes):
        raise errors.InvalidArgumentError(
            None,
            None,
            "Signature mismatch, have: "
            + ", ".join(["resource", *map(_type_string, have)])
            + "-> expected: "
            + ", ".join(["resource", *map(_type_string, q.dtypes)])
            + "->",
        )


@QueueEnqueueV2.kernel("CPU")
async def _enqueue(ctx, handle, *components):
    q = _queue(handle)
    _check_signature(ctx, q)
    elem = tuple(_check_components(q, components, batch=False))
    await q.put([elem], _on_commit(ctx))


@QueueEnqueueManyV2.kernel("CPU")
async def _enqueue_many(ctx, handle, *components):
    q = _queue(handle)
    _check_signature(ctx, q)
    comps = _check_components(q, components, batch=True)
    elems = list(zip(*[_split(c) for c in comps])) if comps[0].shape[0] else []
    if elems:
        await q.put(elems, _on_commit(ctx, len(elems)))
    elif q._closing:  # noqa: SLF001 - TF rejects even an empty enqueue on a closed queue
        raise q._closed_error()  # noqa: SLF001


QueueDequeueV2 = register_op(
    "QueueDequeueV2",
    inputs=["handle: string"],
    outputs=["components: component_types"],
    attrs={"component_types": _TYPES, "timeout_ms": -1},
    shape_fn=_unknown_outputs,
    stateful=True,
    is_async=True,
)
QueueDequeueManyV2 = register_op(
    "QueueDequeueManyV2",
    inputs=["handle: string", "n: int32"],
    outputs=["components: component_types"],
    attrs={"component_types": _TYPES, "timeout_ms": -1},
    shape_fn=_unknown_outputs,
    stateful=True,
    is_async=True,
)
QueueDequeueUpToV2 = register_op(
    "QueueDequeueUpToV2",
    inputs=["handle: string", "n: int32"],
    outputs=["components: component_types"],
    attrs={"component_types": _TYPES, "timeout_ms": -1},
    shape_fn=_unknown_outputs,
    stateful=True,
    is_async=True,
)


def _check_outputs(ctx, q):
    want = ctx.attrs["component_types"]
    if len(want) != len(q.dtypes) or any(a != b for a, b in zip(want, q.dtypes)):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected component types {[d.name for d in want]} but {q.kind} '{q.name}' "
            f"holds {[d.name for d in q.dtypes]}",
        )


@QueueDequeueV2.kernel("CPU")
async def _dequeue(ctx, handle):
    q = _queue(handle)
    if len(ctx.attrs["component_types"]) != len(q.dtypes):
        _check_outputs(ctx, q)
    items = await q.get(1, False, _on_take(ctx, q), _watchdog_lazy(ctx))
    elem = items[0][1]
    return elem[0] if len(elem) == 1 else elem


def _watchdog_lazy(ctx):
    wd = ctx.kernel_state.get("watchdog")
    if wd is None:
        wd = ctx.kernel_state["watchdog"] = _LazyWatchdog(ctx)
    return wd


class _LazyWatchdog:
    """Evaluated by the queue only when the dequeue is about to suspend."""

    __slots__ = ("ctx",)

    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self):
        return _watchdog(self.ctx)


async def _dequeue_n(ctx, handle, n, allow_small, op_name):
    q = _queue(handle)
    _check_outputs(ctx, q)
    n = int(n)
    if n < 0:
        raise errors.InvalidArgumentError(None, None, f"{op_name} requested {n} < 0 elements")
    if q.shapes is None or not all(s.is_fully_defined() for s in q.shapes):
        if q.kind != "PaddingFIFOQueue":
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{q.kind}'s DequeueMany and DequeueUpTo require the components to have "
                "specified shapes.",
            )
    if n == 0:
        out = q.stack([])
    else:
        items = await q.get(n, allow_small, _on_take(ctx, q), _watchdog_lazy(ctx))
        out = q.stack(items)
    return out[0] if len(out) == 1 else tuple(out)


@QueueDequeueManyV2.kernel("CPU")
async def _dequeue_many(ctx, handle, n):
    return await _dequeue_n(ctx, handle, n, False, "DequeueManyOp")


@QueueDequeueUpToV2.kernel("CPU")
async def _dequeue_up_to(ctx, handle, n):
    return await _dequeue_n(ctx, handle, n, True, "DequeueUpToOp")


QueueCloseV2 = register_op(
    "QueueCloseV2",
    inputs=["handle: string"],
    attrs={"cancel_pending_enqueues": False},
    shape_fn=_no_outputs,
    stateful=True,
)
QueueSizeV2 = register_op(
    "QueueSizeV2",
    inputs=["handle: string"],
    outputs=["size: int32"],
    shape_fn=_scalar_shape,
    stateful=True,
)
QueueIsClosedV2 = register_op(
    "QueueIsClosedV2",
    inputs=["handle: string"],
    outputs=["is_closed: bool"],
    shape_fn=_scalar_shape,
    stateful=True,
)
for _t in (
    "QueueEnqueueV2",
    "QueueEnqueueManyV2",
    "QueueDequeueV2",
    "QueueDequeueManyV2",
    "QueueDequeueUpToV2",
    "QueueCloseV2",
    "QueueSizeV2",
    "QueueIsClosedV2",
):
    NotDifferentiable(_t)


@QueueCloseV2.kernel("CPU")
async def _close(ctx, handle):
    _queue(handle).close(ctx.attrs["cancel_pending_enqueues"])


@QueueSizeV2.kernel("CPU")
async def _size(ctx, handle):
    return np.int32(_queue(handle).size())


@QueueIsClosedV2.kernel("CPU")
async def _is_closed(ctx, handle):
    return np.bool_(_queue(handle).is_closed())


# -- the Python classes (TF1's tf.QueueBase and friends) -------------------------------------


def _as_type_list(dtypes_):
    if not isinstance(dtypes_, (list, tuple)):
        return [_dtypes.as_dtype(dtypes_)]
    return [_dtypes.as_dtype(d) for d in dtypes_]


def _as_shape_list(shapes, unknown_dim_allowed=False):
    if unknown_dim_allowed and (
        not isinstance(shapes, (list, tuple))
        or not shapes
        or any(s is None or isinstance(s, int) for s in shapes)
    ):
        raise ValueError("When providing partial shapes, a list of shapes must be provided.")
    if shapes is None:
        return None
    if isinstance(shapes, tensor_shape.TensorShape):
        shapes = [shapes]
    if not isinstance(shapes, (list, tuple)):
        raise TypeError(
            "Shapes must be a TensorShape or a list or tuple of TensorShapes, got "
            f"{type(shapes)} instead."
        )
    if all(s is None or isinstance(s, int) for s in shapes):
        shapes = [shapes]  # a single shape
    shapes = [tensor_shape.as_shape(s) for s in shapes]
    if not unknown_dim_allowed and any(not s.is_fully_defined() for s in shapes):
        raise ValueError(f"All shapes must be fully defined: {shapes}")
    if any(s.ndims is None for s in shapes):
        raise ValueError(f"All shapes must have a defined rank: {shapes}")
    return shapes


def _as_name_list(names, dtypes_):
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    if len(names) != len(dtypes_):
        raise ValueError("List of names must have the same length as the list of dtypes")
    return list(names)


class QueueBase:
    """Base class for queues (TF1's `tf.QueueBase`).

    A queue holds tuples of tensors ("elements"); `enqueue`/`dequeue` and their batch
    forms build ops that suspend, without holding a thread, while the queue is full or
    empty.
    """

    def __init__(self, dtypes, shapes, names, queue_ref):
        self._dtypes = list(dtypes)
        if shapes is not None:
            if len(shapes) != len(dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            self._shapes = [tensor_shape.as_shape(s) for s in shapes]
        else:
            self._shapes = [tensor_shape.unknown_shape() for _ in self._dtypes]
        if names is not None:
            if len(names) != len(dtypes):
                raise ValueError("Queue names must have the same length as dtypes")
            self._names = list(names)
        else:
            self._names = None
        self._queue_ref = queue_ref
        # TF names the queue's ops after its op's own name, not its scope: a queue made
        # in scope "a" is "a/fifo_queue" and its enqueue op, made at the top, is
        # "fifo_queue_enqueue".
        self._name = queue_ref.op.name.split("/")[-1]

    @staticmethod
    def from_list(index, queues):
        """A QueueBase whose ops act on `queues[index]` (`index` may be a tensor).

        Raises:
          TypeError: `queues` is not a non-empty list of queues, or their component
            dtypes or names differ.
        """
        if (
            not queues
            or not isinstance(queues, list)
            or not all(isinstance(q, QueueBase) for q in queues)
        ):
            raise TypeError("A list of queues expected")
        dtypes_ = queues[0].dtypes
        if not all(dtypes_ == q.dtypes for q in queues[1:]):
            raise TypeError("Queues do not have matching component dtypes.")
        names = queues[0].names
        if not all(names == q.names for q in queues[1:]):
            raise TypeError("Queues do not have matching component names.")
        shapes = [_common_shape(list(per_queue)) for per_queue in zip(*(q.shapes for q in queues))]
        refs = ops.apply_op("Pack", [[q.queue_ref for q in queues]], {"axis": 0}).outputs[0]
        selected = ops.apply_op("GatherV2", [refs, index, 0]).outputs[0]
        return QueueBase(dtypes=dtypes_, shapes=shapes, names=names, queue_ref=selected)

    @property
    def queue_ref(self):
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._queue_ref.op.name

    @property
    def dtypes(self):
        return self._dtypes

    @property
    def shapes(self):
        return self._shapes

    @property
    def names(self):
        return self._names

    def _check_enqueue_dtypes(self, vals):
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError(
                    "Keys in dictionary to enqueue do not match names of Queue.  Dictionary: "
                    f"{sorted(vals.keys(), key=str)},Queue: {sorted(self._names, key=str)}"
                )
            vals = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if not isinstance(vals, (list, tuple)):
                vals = [vals]
        # TF pairs the values with the queue's dtypes as zip does: extra values are
        # dropped (`[x, y]` into a one-component queue enqueues x), and too few build
        # an op that fails when run with "Signature mismatch".
        return [
            ops.convert_to_tensor(v, dtype=dt, name=f"component_{i}")
            for i, (v, dt) in enumerate(zip(vals, self._dtypes))
        ]

    def _scope_vals(self, vals):
        if isinstance(vals, (list, tuple)):
            return list(vals)
        if isinstance(vals, dict):
            return list(vals.values())
        return [vals]

    def enqueue(self, vals, name=None):
        """Enqueue one element; suspends while the queue is full.

        Raises (at run time): errors.CancelledError if the queue is closed (or closed with
        cancel_pending_enqueues while waiting); DeadlineExceededError after the step's
        timeout.
        """
        with ops.name_scope(name, f"{self._name}_enqueue", self._scope_vals(vals)) as scope:
            vals = self._check_enqueue_dtypes(vals)
            for v, shape in zip(vals, self._shapes):
                v.shape.assert_is_compatible_with(shape)
            return ops.apply_op("QueueEnqueueV2", [self._queue_ref, vals], name=scope)

    def enqueue_many(self, vals, name=None):
        """Enqueue the slices of `vals` along dimension 0 as separate elements.

        Raises (at run time): as `enqueue`.
        """
        with ops.name_scope(name, f"{self._name}_EnqueueMany", self._scope_vals(vals)) as scope:
            vals = self._check_enqueue_dtypes(vals)
            batch_dim = tensor_shape.Dimension(None)
            for v, shape in zip(vals, self._shapes):
                vs = v.shape.with_rank_at_least(1)
                batch_dim = batch_dim.merge_with(vs[0])
                vs[1:].assert_is_compatible_with(shape)
            return ops.apply_op("QueueEnqueueManyV2", [self._queue_ref, vals], name=scope)

    def _dequeue_return_value(self, tensors):
        if self._names:
            return dict(zip(self._names, tensors))
        if len(tensors) == 1:
            return tensors[0]
        return list(tensors)

    def dequeue(self, name=None):
        """Dequeue one element; suspends while the queue is empty.

        Raises (at run time): errors.OutOfRangeError if the queue is closed and empty;
        DeadlineExceededError after the step's timeout; CancelledError if the session
        is closed meanwhile.
        """
        if name is None:
            name = f"{self._name}_Dequeue"
        op = ops.apply_op(
            "QueueDequeueV2", [self._queue_ref], {"component_types": self._dtypes}, name=name
        )
        for t, shape in zip(op.outputs, self._shapes):
            t.set_shape(shape)
        return self._dequeue_return_value(list(op.outputs))

    def _dequeue_n(self, op_type, n, name, batch_dim):
        op = ops.apply_op(
            op_type, [self._queue_ref, n], {"component_types": self._dtypes}, name=name
        )
        for t, shape in zip(op.outputs, self._shapes):
            t.set_shape(tensor_shape.TensorShape([batch_dim]).concatenate(shape))
        return self._dequeue_return_value(list(op.outputs))

    def dequeue_many(self, n, name=None):
        """Dequeue n elements, stacked along a new dimension 0.

        Raises (at run time): errors.OutOfRangeError if the queue is closed with fewer
        than n elements left (they stay queued); InvalidArgumentError if n < 0 or the
        components' shapes are not fully defined.
        """
        if name is None:
            name = f"{self._name}_DequeueMany"
        n_val = ops.constant_value(n) if isinstance(n, ops.Tensor) else n
        batch_dim = None if n_val is None else int(n_val)
        return self._dequeue_n("QueueDequeueManyV2", n, name, batch_dim)

    def dequeue_up_to(self, n, name=None):
        """Like `dequeue_many`, but once the queue is closed returns what remains.

        Raises (at run time): errors.OutOfRangeError if the queue is closed and empty.
        """
        if name is None:
            name = f"{self._name}_DequeueUpTo"
        return self._dequeue_n("QueueDequeueUpToV2", n, name, None)

    def close(self, cancel_pending_enqueues=False, name=None):
        """Close the queue: later enqueues fail; dequeues drain what is left.

        Raises (at run time): errors.CancelledError if already closed (unless
        cancel_pending_enqueues).
        """
        if name is None:
            name = f"{self._name}_Close"
        return ops.apply_op(
            "QueueCloseV2",
            [self._queue_ref],
            {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
            name=name,
        )

    def is_closed(self, name=None):
        if name is None:
            name = f"{self._name}_Is_Closed"
        return ops.apply_op("QueueIsClosedV2", [self._queue_ref], name=name).outputs[0]

    def size(self, name=None):
        if name is None:
            name = f"{self._name}_Size"
        return ops.apply_op("QueueSizeV2", [self._queue_ref], name=name).outputs[0]


def _common_shape(shapes):
    """The most specific shape compatible with all of `shapes` (TF's `_shape_common`)."""
    first = shapes[0]
    for s in shapes[1:]:
        if first.ndims is None or s.ndims is None or first.ndims != s.ndims:
            return tensor_shape.unknown_shape()
        first = tensor_shape.TensorShape(
            [
                a.value if a.value == b.value else None
                for a, b in zip(first.dims, s.dims, strict=True)
            ]
        )
    return first


def _queue_op(op_type, attrs, name):
    g = ops.get_default_graph()
    attrs.setdefault("container", getattr(g, "_container", "") or "")
    return ops.apply_op(op_type, [], attrs, name=name).outputs[0]


def _common_attrs(capacity, dtypes_, shapes, shared_name):
    return {
        "component_types": dtypes_,
        "shapes": list(shapes or []),
        "capacity": int(capacity),
        "shared_name": shared_name or "",
    }


class FIFOQueue(QueueBase):
    """A queue that dequeues elements in first-in first-out order (`tf.FIFOQueue`)."""

    def __init__(
        self, capacity, dtypes, shapes=None, names=None, shared_name=None, name="fifo_queue"
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        # TF pins a FIFOQueue to the host ("/device:CPU:*" in its NodeDef).
        with ops.device("/device:CPU:*"):
            ref = _queue_op(
                "FIFOQueueV2", _common_attrs(capacity, dtypes, shapes, shared_name), name
            )
        # TF makes this class's op (not the other queues') under init_scope: one made in
        # a dataset function is the graph's, lasting the session (data/dataset.py
        # `_Traced`).
        ref.op._lifted = True
        super().__init__(dtypes, shapes, names, ref)


class GPUCompatibleFIFOQueue(QueueBase):
    """TF's `GPUCompatibleFIFOQueue`: a FIFOQueue left where the device scope puts it
    (not pinned to the host); TF does not implement its batch forms."""

    def __init__(
        self, capacity, dtypes, shapes=None, names=None, shared_name=None, name="fifo_queue"
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        ref = _queue_op("FIFOQueueV2", _common_attrs(capacity, dtypes, shapes, shared_name), name)
        super().__init__(dtypes, shapes, names, ref)

    def enqueue_many(self, vals, name=None):
        raise NotImplementedError(
            "GPUCompatibleFIFOQueue does not support enqueue_many or dequeue_many, "
            "only enqueue and dequeue."
        )

    def dequeue_many(self, n, name=None):
        raise NotImplementedError(
            "GPUCompatibleFIFOQueue does not support enqueue_many or dequeue_many, "
            "only enqueue and dequeue."
        )


class PaddingFIFOQueue(QueueBase):
    """A FIFOQueue whose dequeue_many pads variable-size components with zeros."""

    def __init__(
        self, capacity, dtypes, shapes, names=None, shared_name=None, name="padding_fifo_queue"
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, unknown_dim_allowed=True)
        names = _as_name_list(names, dtypes)
        if len(dtypes) != len(shapes):
            raise ValueError(
                "Shapes must be provided for all components, but received "
                f"{len(dtypes)} dtypes and {len(shapes)} shapes."
            )
        ref = _queue_op(
            "PaddingFIFOQueueV2", _common_attrs(capacity, dtypes, shapes, shared_name), name
        )
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues elements in a random order (`tf.RandomShuffleQueue`).

    Dequeues wait while the queue holds min_after_dequeue elements or fewer, until it is
    closed.
    """

    def __init__(
        self,
        capacity,
        min_after_dequeue,
        dtypes,
        shapes=None,
        names=None,
        seed=None,
        shared_name=None,
        name="random_shuffle_queue",
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        seed1, seed2 = random_seed.get_seed(seed)
        if seed1 is None and seed2 is None:
            seed1, seed2 = 0, 0
        elif seed is None and shared_name is not None:
            # Queues sharing a name must shuffle alike (TF derives seed2 from the name).
            digest = hashlib.md5(shared_name.encode(), usedforsecurity=False).hexdigest()
            seed2 = int(digest[:8], 16) & 0x7FFFFFFF
        attrs = _common_attrs(capacity, dtypes, shapes, shared_name)
        attrs.update(min_after_dequeue=int(min_after_dequeue), seed=seed1, seed2=seed2)
        ref = _queue_op("RandomShuffleQueueV2", attrs, name)
        super().__init__(dtypes, shapes, names, ref)


class PriorityQueue(QueueBase):
    """A queue that dequeues the element with the smallest int64 priority first.

    Elements are `(priority, *components)`; `dtypes` are `[int64] + types`.
    """

    def __init__(
        self, capacity, types, shapes=None, names=None, shared_name=None, name="priority_queue"
    ):
        types = _as_type_list(types)
        shapes = _as_shape_list(shapes)
        ref = _queue_op(
            "PriorityQueueV2", _common_attrs(capacity, types, shapes, shared_name), name
        )
        prio_dtypes = [_dtypes.int64, *types]
        prio_shapes = [tensor_shape.TensorShape([]), *shapes] if shapes else None
        super().__init__(prio_dtypes, prio_shapes, _as_name_list(names, prio_dtypes), ref)
