"""Input pipelines on queues (TF1's `tf.train` input functions).

Producers (`string_input_producer`, `input_producer`, `range_input_producer`,
`slice_input_producer`) fill a FIFOQueue from a tensor, epoch after epoch, through a
QueueRunner; `num_epochs` is a local variable counted up by CountUpTo, whose
OutOfRangeError after the last epoch makes the runner close the queue, so consumers
drain what is left and then see OutOfRangeError themselves.

Batching (`batch`, `shuffle_batch`, `batch_join`, `shuffle_batch_join` and the
`maybe_*` variants) enqueues single examples (or many, with `enqueue_many`) into a
FIFOQueue, PaddingFIFOQueue (`dynamic_pad`) or RandomShuffleQueue, with `num_threads`
enqueue ops that the QueueRunner runs as concurrent tasks on the session's loop, and
dequeues `batch_size` at a time (`dequeue_up_to` with `allow_smaller_final_batch`).
SparseTensor inputs travel as int64 handles into sparse-tensor maps and come out as one
batched SparseTensor (input_sparse.py), as TF1's.

The queue classes and QueueRunner are imported lazily from their own modules.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.graph import GraphKeys
from asyncflow.sparse_tensor import SparseTensor
from asyncflow.train import input_sparse

__all__ = [
    "match_filenames_once",
    "limit_epochs",
    "input_producer",
    "string_input_producer",
    "range_input_producer",
    "slice_input_producer",
    "batch",
    "maybe_batch",
    "batch_join",
    "maybe_batch_join",
    "shuffle_batch",
    "maybe_shuffle_batch",
    "shuffle_batch_join",
    "maybe_shuffle_batch_join",
]


def _queues():
    try:
        from asyncflow.ops import data_flow_ops as m
    except ImportError:  # pragma: no cover - whichever name the queue module has
        from asyncflow.ops import queue_ops as m
    return m


def _af():
    import asyncflow

    return asyncflow


def _queue_runner():
    from asyncflow.train import queue_runner

    return queue_runner


from asyncflow.ops.state_ops import count_up_to  # noqa: E402 - num_epochs counts with it

# -- producers -----------------------------------------------------------------------------


def _local_variable(initial_value, name, validate_shape=True):
    from asyncflow.variables import Variable

    return Variable(
        initial_value,
        name=name,
        trainable=False,
        validate_shape=validate_shape,
        collections=[GraphKeys.LOCAL_VARIABLES],
    )


def match_filenames_once(pattern, name=None):
    """Save the list of files matching pattern, so it is only computed once.

    The result is a local variable: run `af.local_variables_initializer()` first.
    """
    from asyncflow.ops import reader_ops

    with ops.name_scope(name, "matching_filenames", [pattern]) as scope:
        return _local_variable(
            reader_ops.matching_files(pattern), name=scope, validate_shape=False
        )


def limit_epochs(tensor, num_epochs=None, name=None):
    """Returns tensor `num_epochs` times and then raises an OutOfRange error.

    Raises:
      ValueError: num_epochs is not positive.
    """
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    af = _af()
    with ops.name_scope(name, "limit_epochs", [tensor]) as scope:
        zero64 = ops.convert_to_tensor(np.int64(0))
        epochs = _local_variable(zero64, name="epochs")
        counter = count_up_to(epochs, num_epochs)
        with ops.control_dependencies([counter]):
            return af.identity(tensor, name=scope)


def input_producer(
    input_tensor,
    element_shape=None,
    num_epochs=None,
    shuffle=True,
    seed=None,
    capacity=32,
    shared_name=None,
    summary_name=None,
    name=None,
    cancel_op=None,
):
    """Output the rows of `input_tensor` to a queue for an input pipeline.

    Returns the FIFOQueue; a QueueRunner filling it is added to the graph's
    QUEUE_RUNNERS collection.

    Raises:
      ValueError: the row shape is not fully defined and no element_shape is given.
    """
    with ops.name_scope(name, "input_producer", [input_tensor]):
        input_tensor = ops.convert_to_tensor(input_tensor, name="input_tensor")
        element_shape = input_tensor.shape[1:].merge_with(
            tensor_shape.as_shape(element_shape) if element_shape is not None else None
        )
        if not element_shape.is_fully_defined():
            raise ValueError(
                "Either `input_tensor` must have a fully defined shape or `element_shape` "
                "must be specified"
            )
        if shuffle:
            input_tensor = _af().random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = _queues().FIFOQueue(
            capacity=capacity,
            dtypes=[input_tensor.dtype],
            shapes=[element_shape],
            shared_name=shared_name,
            name=name,
        )
        enq = q.enqueue_many([input_tensor])
        qr = _queue_runner()
        qr.add_queue_runner(qr.QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _fill_summary(summary_name, q.size(), capacity)
        return q


def _fill_summary(name, size, capacity, over=0):
    """TF1's queue summaries: the fraction of the queue filled (above `over` elements,
    what a shuffling queue keeps), as the scalar `name` in SUMMARIES."""
    af = _af()
    if over:
        size = af.maximum(0, size - over)
    af.summary.scalar(name, af.cast(size, dtypes.float32) * (1.0 / capacity))


def _merge_shape(shape, more):
    return shape if more is None else shape.merge_with(tensor_shape.as_shape(more))


def string_input_producer(
    string_tensor,
    num_epochs=None,
    shuffle=True,
    seed=None,
    capacity=32,
    shared_name=None,
    name=None,
    cancel_op=None,
):
    """Output strings (e.g. filenames) to a queue for an input pipeline.

    Raises:
      ValueError: `string_tensor` is an empty list.
      InvalidArgumentError (when run): `string_tensor` is empty.
    """
    af = _af()
    not_null_err = "string_input_producer requires a non-null input tensor"
    if isinstance(string_tensor, (list, tuple)) and not string_tensor:  # (TF's check)
        raise ValueError(not_null_err)
    with ops.name_scope(name, "input_producer", [string_tensor]) as scope:
        string_tensor = ops.convert_to_tensor(string_tensor, dtype=dtypes.string)
        assert_op = af.Assert(af.greater(af.size(string_tensor), 0), [not_null_err])
        with ops.control_dependencies([assert_op]):
            string_tensor = af.identity(string_tensor)
        return input_producer(
            input_tensor=string_tensor,
            element_shape=[],
            num_epochs=num_epochs,
            shuffle=shuffle,
            seed=seed,
            capacity=capacity,
            shared_name=shared_name,
            summary_name=f"fraction_of_{capacity}_full",
            name=scope,
            cancel_op=cancel_op,
        )


def range_input_producer(
    limit,
    num_epochs=None,
    shuffle=True,
    seed=None,
    capacity=32,
    shared_name=None,
    name=None,
    cancel_op=None,
):
    """Produces the integers from 0 to limit-1 in a queue."""
    with ops.name_scope(name, "input_producer", [limit]) as scope:
        range_tensor = _af().range(limit)
        return input_producer(
            range_tensor, [], num_epochs, shuffle, seed, capacity, shared_name,
            f"fraction_of_{capacity}_full", scope, cancel_op,
        )  # fmt: skip


def slice_input_producer(
    tensor_list,
    num_epochs=None,
    shuffle=True,
    seed=None,
    capacity=32,
    shared_name=None,
    name=None,
):
    """Produces a slice of each Tensor in `tensor_list` (rows taken together).

    Raises:
      ValueError: `tensor_list` is empty or its tensors have different first dimensions.
    """
    af = _af()
    with ops.name_scope(name, "input_producer", tensor_list):
        tensor_list = [ops.convert_to_tensor(t) for t in tensor_list]
        if not tensor_list:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = af.shape(tensor_list[0], out_type=dtypes.int32)[0]
        dims = {t.shape.with_rank_at_least(1)[0].value for t in tensor_list} - {None}
        if len(dims) > 1:
            raise ValueError(f"All tensors must have the same first dimension, got {dims}")
        queue = range_input_producer(
            range_size,
            num_epochs=num_epochs,
            shuffle=shuffle,
            seed=seed,
            capacity=capacity,
            shared_name=shared_name,
        )
        index = queue.dequeue()
        return [af.gather(t, index) for t in tensor_list]


# -- batching ------------------------------------------------------------------------------


def _flatten(tensors):
    """(flat list of tensors, rebuild function) for a tensor, a list or a dict."""
    if isinstance(tensors, dict):
        keys = sorted(tensors)
        return [tensors[k] for k in keys], lambda out: dict(zip(keys, out))
    if isinstance(tensors, (list, tuple)):
        kind = type(tensors)
        return list(tensors), lambda out: list(out) if kind is list else tuple(out)
    return [tensors], lambda out: out[0]


def _as_tensor_list(tensors):
    flat, rebuild = _flatten(tensors)
    out = []
    for t in flat:  # (SparseTensors are stored in maps by _batch: input_sparse.py)
        out.append(t if isinstance(t, SparseTensor) else ops.convert_to_tensor(t))
    return out, rebuild


def _shapes(tensor_list_list, shapes, enqueue_many):
    if shapes is not None:
        return [tensor_shape.as_shape(s) for s in shapes]
    merged = None
    for tl in tensor_list_list:
        for t in tl:
            if t.shape.ndims is None:
                raise ValueError(f"Cannot infer Tensor's rank: {t}")
        cur = [t.shape[1:] if enqueue_many else t.shape for t in tl]
        if enqueue_many:
            for t in tl:
                t.shape.with_rank_at_least(1)
        merged = cur if merged is None else [a.merge_with(b) for a, b in zip(merged, cur)]
    return merged


def _dtypes(tensor_list_list):
    types = [t.dtype for t in tensor_list_list[0]]
    for tl in tensor_list_list[1:]:
        if [t.dtype for t in tl] != types:
            raise TypeError(
                "Expected types to be the same for every element of tensors_list: "
                f"{types} vs {[t.dtype for t in tl]}"
            )
    return types


def _validate_keep_input(keep_input, enqueue_many):
    keep_input = ops.convert_to_tensor(keep_input, dtype=dtypes.bool)
    ndims = keep_input.shape.ndims
    if ndims is None:
        raise ValueError("`keep_input` dimensions must be known at graph construction.")
    if not enqueue_many and ndims == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if ndims > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep_input


def _enqueue_op(queue, tensor_list, enqueue_many, keep_input):
    """TF1's enqueue of a batching queue: a vector `keep_input` selects the rows kept; a
    scalar one known when building enqueues or not, else decides each run (a cond)."""
    af = _af()
    enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
    if keep_input.shape.ndims == 1:
        select = af.cast(keep_input, dtypes.int32)
        return enqueue([af.dynamic_partition(t, select, num_partitions=2)[1] for t in tensor_list])
    known = ops.constant_value(keep_input)
    if known is not None:
        return enqueue(tensor_list) if bool(known) else af.no_op()
    return af.cond(keep_input, lambda: enqueue(tensor_list), af.no_op)


# (TF1's: a list of one tensor, or one SparseTensor, batches to that, not to a list)
_ONE_KINDS = (ops.Tensor, SparseTensor)


def _which_queue(dynamic_pad):
    q = _queues()
    return q.PaddingFIFOQueue if dynamic_pad else q.FIFOQueue


def _batch(
    tensor_list_list,
    rebuild,
    batch_size,
    capacity,
    enqueue_many,
    shapes,
    dynamic_pad,
    allow_smaller_final_batch,
    shared_name,
    name,
    keep_input,
    shuffle=None,
):
    """The shared body of every batching function, in the name scope `name` (ending in
    "/": the dequeue op is named by it); shuffle=(min_after_dequeue, seed).

    `tensor_list_list` holds one list per enqueue op; the same list repeated (a function's
    num_threads) is one op that that many queue-runner threads run, as TF's."""
    keep_input = _validate_keep_input(True if keep_input is None else keep_input, enqueue_many)
    tensor_list_list, sparse_info = input_sparse.store_sparse_tensor_lists(
        tensor_list_list, enqueue_many, keep_input
    )
    types = _dtypes(tensor_list_list)
    shapes = _shapes(tensor_list_list, shapes, enqueue_many)
    if not dynamic_pad:
        for s in shapes:
            if not s.is_fully_defined():
                raise ValueError(f"All shapes must be fully defined: {shapes}")
    qmod = _queues()
    if shuffle is not None:
        min_after_dequeue, seed = shuffle
        queue = qmod.RandomShuffleQueue(
            capacity=capacity,
            min_after_dequeue=min_after_dequeue,
            seed=seed,
            dtypes=types,
            shapes=shapes,
            shared_name=shared_name,
            name="random_shuffle_queue",
        )
    else:
        queue = _which_queue(dynamic_pad)(
            capacity=capacity,
            dtypes=types,
            shapes=shapes,
            shared_name=shared_name,
            name="padding_fifo_queue" if dynamic_pad else "fifo_queue",
        )
    made: dict[int, ops.Operation] = {}
    for tl in tensor_list_list:
        if id(tl) not in made:
            made[id(tl)] = _enqueue_op(queue, tl, enqueue_many, keep_input)
    enqueue_ops = [made[id(tl)] for tl in tensor_list_list]
    qr = _queue_runner()
    qr.add_queue_runner(qr.QueueRunner(queue, enqueue_ops))
    if shuffle is None:
        _fill_summary(f"fraction_of_{capacity}_full", queue.size(), capacity)
    else:
        kept = capacity - shuffle[0]
        _fill_summary(f"fraction_over_{shuffle[0]}_of_{kept}_full", queue.size(), kept, shuffle[0])
    if allow_smaller_final_batch:
        dequeued = queue.dequeue_up_to(batch_size, name=name)
    else:
        dequeued = queue.dequeue_many(batch_size, name=name)
    if isinstance(dequeued, ops.Tensor):
        dequeued = [dequeued]
    out = rebuild(input_sparse.restore_sparse_tensors(list(dequeued), sparse_info))
    if isinstance(out, list | tuple) and len(out) == 1 and isinstance(out[0], _ONE_KINDS):
        return out[0]  # TF1's: a list of one tensor batches to that tensor, not a list
    return out


def _threads(tensors, num_threads, enqueue_many):
    tensor_list, rebuild = _as_tensor_list(tensors)
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    return [tensor_list] * num_threads, rebuild


def _join(tensors_list):
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors in tensors_list.")
    lists, rebuild = [], None
    for tensors in tensors_list:
        tl, rb = _as_tensor_list(tensors)
        lists.append(tl)
        rebuild = rebuild or rb
    if len({len(tl) for tl in lists}) != 1:
        raise ValueError("Expected the same number of tensors in every element of tensors_list")
    return lists, rebuild


def batch(
    tensors,
    batch_size,
    num_threads=1,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Creates batches of tensors in `tensors` (a tensor, list or dict).

    `num_threads` enqueue ops run concurrently (tasks on the session's loop).

    Raises:
      ValueError: shapes cannot be inferred (and not dynamic_pad).
      OutOfRangeError (when run): the input ended and fewer than batch_size elements
        remain (with allow_smaller_final_batch, the last smaller batch comes first).
    """
    with ops.name_scope(name, "batch", None) as scope:
        lists, rebuild = _threads(tensors, num_threads, enqueue_many)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
            allow_smaller_final_batch, shared_name, scope, None,
        )  # fmt: skip


def maybe_batch(
    tensors,
    keep_input,
    batch_size,
    num_threads=1,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Conditionally creates batches of tensors based on `keep_input`."""
    with ops.name_scope(name, "batch", None) as scope:  # (TF names it as batch)
        lists, rebuild = _threads(tensors, num_threads, enqueue_many)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
            allow_smaller_final_batch, shared_name, scope,
            keep_input,
        )  # fmt: skip


def batch_join(
    tensors_list,
    batch_size,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Runs a list of tensors to fill a queue to create batches of examples.

    One enqueue op (one concurrent task) per element of `tensors_list`.
    """
    with ops.name_scope(name, "batch_join", None) as scope:
        lists, rebuild = _join(tensors_list)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
            allow_smaller_final_batch, shared_name, scope, None,
        )  # fmt: skip


def maybe_batch_join(
    tensors_list,
    keep_input,
    batch_size,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Runs a list of tensors to conditionally fill a queue to create batches."""
    with ops.name_scope(name, "batch_join", None) as scope:  # (as batch_join)
        lists, rebuild = _join(tensors_list)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
            allow_smaller_final_batch, shared_name, scope,
            keep_input,
        )  # fmt: skip


def _check_shuffle(capacity, min_after_dequeue):
    # TF1 checks this in shuffle_batch and maybe_shuffle_batch only: the *_join ones
    # build, and their queue fails when it is first run (or, capacity equal to
    # min_after_dequeue, the fill summary divides by zero while building).
    if capacity <= min_after_dequeue:
        raise ValueError(
            f"capacity {capacity} must be bigger than min_after_dequeue {min_after_dequeue}."
        )


def shuffle_batch(
    tensors,
    batch_size,
    capacity,
    min_after_dequeue,
    num_threads=1,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Creates batches by randomly shuffling tensors (a RandomShuffleQueue).

    Raises:
      ValueError: capacity <= min_after_dequeue, or shapes cannot be inferred.
    """
    _check_shuffle(capacity, min_after_dequeue)
    with ops.name_scope(name, "shuffle_batch", None) as scope:
        lists, rebuild = _threads(tensors, num_threads, enqueue_many)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, False,
            allow_smaller_final_batch, shared_name, scope, None,
            shuffle=(min_after_dequeue, seed),
        )  # fmt: skip


def maybe_shuffle_batch(
    tensors,
    batch_size,
    capacity,
    min_after_dequeue,
    keep_input,
    num_threads=1,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Creates batches by randomly shuffling conditionally-enqueued tensors."""
    _check_shuffle(capacity, min_after_dequeue)
    with ops.name_scope(name, "shuffle_batch", None) as scope:
        lists, rebuild = _threads(tensors, num_threads, enqueue_many)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, False,
            allow_smaller_final_batch, shared_name, scope,
            keep_input, shuffle=(min_after_dequeue, seed),
        )  # fmt: skip


def shuffle_batch_join(
    tensors_list,
    batch_size,
    capacity,
    min_after_dequeue,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Create batches by randomly shuffling tensors from several enqueue ops."""
    with ops.name_scope(name, "shuffle_batch_join", None) as scope:
        lists, rebuild = _join(tensors_list)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, False,
            allow_smaller_final_batch, shared_name, scope, None,
            shuffle=(min_after_dequeue, seed),
        )  # fmt: skip


def maybe_shuffle_batch_join(
    tensors_list,
    batch_size,
    capacity,
    min_after_dequeue,
    keep_input,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Create batches by randomly shuffling conditionally-enqueued tensors."""
    with ops.name_scope(name, "shuffle_batch_join", None) as scope:
        lists, rebuild = _join(tensors_list)
        return _batch(
            lists, rebuild, batch_size, capacity, enqueue_many, shapes, False,
            allow_smaller_final_batch, shared_name, scope,
            keep_input, shuffle=(min_after_dequeue, seed),
        )  # fmt: skip
