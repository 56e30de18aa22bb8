"""An iterator's state for a tf.train.Saver (`make_saveable_from_iterator`): the ops
SerializeIterator and DeserializeIterator.

TF serializes every stage's internal state into a variant; here a pass is an async
generator, which cannot be pickled or copied, so the state is the number of elements
the iterator's current pass has given.  Restoring rewinds the stages' reshuffling seed
generators to where they were when the pass started, starts the pass again and skips
that many elements: for a deterministic pipeline (seeded shuffles included) the next
element is the one TF's restored iterator gives.  (In another process the generators
rewind to that process's pass, so an iterator re-initialized several times before the
save replays its first pass's order there.)  The state is a
string scalar (TF writes a variant, so the checkpoints of the two do not mix).
"""

from __future__ import annotations

import copy

import numpy as np

from asyncflow import errors
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.registry import NotDifferentiable, register_op

__all__: list[str] = []

_PREFIX = b"asyncflow-iterator-position:"
_MAX_SKIP = 1 << 40


def _iterator(handle) -> dso.IteratorResource:
    return dso._unwrap(handle, dso.IteratorResource, "iterator")


SerializeIterator = register_op(
    "SerializeIterator",
    inputs=["resource_handle: string"],
    outputs=["serialized: string"],
    attrs={"external_state_policy": 0},
    shape_fn=lambda op: [dso._HANDLE],
    stateful=True,
)
NotDifferentiable("SerializeIterator")


@SerializeIterator.kernel("CPU")
async def _serialize(ctx, handle):
    it = _iterator(handle)
    if it.value is None:
        raise errors.FailedPreconditionError(
            None, None, "Cannot save the state of an iterator that was never initialized."
        )
    return np.array(_PREFIX + str(it.position).encode(), dtype=object)


DeserializeIterator = register_op(
    "DeserializeIterator",
    inputs=["resource_handle: string", "serialized: string"],
    shape_fn=lambda op: [],
    stateful=True,
    is_async=True,
)
NotDifferentiable("DeserializeIterator")


@DeserializeIterator.kernel("CPU")
async def _deserialize(ctx, handle, serialized):
    it = _iterator(handle)
    raw = serialized[()] if isinstance(serialized, np.ndarray) else serialized
    raw = raw if isinstance(raw, bytes) else str(raw).encode()
    if not raw.startswith(_PREFIX) or not raw[len(_PREFIX) :].isdigit():
        raise errors.InvalidArgumentError(None, None, "Not an iterator state saved here.")
    n = int(raw[len(_PREFIX) :])
    if n > _MAX_SKIP:
        raise errors.InvalidArgumentError(None, None, f"Iterator state position {n} too large")
    if it.value is None:
        raise errors.FailedPreconditionError(
            None,
            None,
            "Restoring an iterator needs its dataset: run the iterator's initializer first.",
        )
    for gen, state in it.seed_states:  # the pass's reshuffles as they were at its start
        gen._stream = copy.deepcopy(state)
    await it.start(it.value, pl.Env(ctx.session))
    for _ in range(n):
        try:
            await it.get_next()
        except errors.OutOfRangeError:
            break
        except errors.OpError:  # an element that failed when first given: consumed too
            continue
    return None
