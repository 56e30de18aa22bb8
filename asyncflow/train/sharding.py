"""`tf.train.experimental`'s checkpoint sharding policies: `ShardingCallback` (the
interface), `ShardableTensor` (what a policy is given), `ShardByTaskPolicy` and
`MaxShardSizePolicy`.

A policy maps the tensors a checkpoint would save to shards, each a dict
{checkpoint key: {slice spec: tensor}}.  `tf.train.CheckpointOptions` accepts one as
`experimental_sharding_callback`; as in TF's graph mode, a graph-mode Checkpoint still
writes one data file, so the policies matter when called directly.

MaxShardSizePolicy, as TF's: each tensor (a slice of a partitioned variable counts from
its offset) goes into the current shard while it fits; otherwise it is cut along the
axis that needs the fewest pieces to fill the room left, a piece at a time, each piece a
`slice` of the tensor named by its SaveSliceInfo spec ("<full shape> <offset,len:...>",
even when the tensor is not cut).  Scalars are never cut: one larger than a shard gets
a shard of its own, at the end.  The object graph and variant tensors count as empty,
and so do strings when no default session can measure them.  A tensor whose single
element is larger than a shard raises ValueError (TF opens empty shards forever).
"""

from __future__ import annotations

import abc
import dataclasses
import math

from asyncflow import dtypes, tensor_shape, tf_logging
from asyncflow import graph as ops
from asyncflow.ops import array_ops, string_ops
from asyncflow.partitioned_variables import SaveSliceInfo

__all__ = ["MaxShardSizePolicy", "ShardByTaskPolicy", "ShardableTensor", "ShardingCallback"]

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


@dataclasses.dataclass(frozen=True)
class ShardableTensor:
    """A tensor a checkpoint saves, with what a sharding policy needs to place it."""

    _tensor_save_spec: object
    tensor: object
    dtype: object
    device: object
    name: str
    shape: object
    slice_spec: str
    checkpoint_key: str
    trackable: object

    def __repr__(self) -> str:
        lines = [f"  {f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)]
        return "\n".join([f"{type(self).__name__}:", *lines])


class ShardingCallback(abc.ABC):
    """A checkpoint sharding policy: `description` and `__call__(shardable_tensors)`
    returning a list of shards ({checkpoint key: {slice spec: tensor}})."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """What the policy does, in a sentence."""

    @abc.abstractmethod
    def __call__(self, shardable_tensors):
        """The shards of `shardable_tensors`."""


class ShardByTaskPolicy(ShardingCallback):
    """One shard holding every tensor (a checkpoint's tensors are already grouped by
    task before a policy is called)."""

    @property
    def description(self) -> str:
        return "Split tensors into shards based on their device spec task."

    def __call__(self, shardable_tensors):
        shard: dict = {}
        for t in shardable_tensors:
            shard.setdefault(t.checkpoint_key, {})[t.slice_spec] = t.tensor
        return [shard]


class MaxShardSizePolicy(ShardingCallback):
    """Shards of at most `max_shard_size` bytes (module docstring); a scalar larger
    than that, or the object graph, may exceed it."""

    def __init__(self, max_shard_size: int):
        self.max_shard_size = max_shard_size

    @property
    def description(self) -> str:
        return "Split tensors into shards with a max shard size."

    def __call__(self, shardable_tensors):
        return _Partitioner(self.max_shard_size).shards(shardable_tensors)


class _Partitioner:
    """One MaxShardSizePolicy call: the shards filled so far and the room left."""

    def __init__(self, max_size: int):
        self.max = max_size
        self.filled: list = [{}]
        self.large: list = []
        self.room = max_size
        self.warned_strings = False

    def _new_shard(self) -> None:
        self.filled.append({})
        self.room = self.max

    def shards(self, shardable_tensors) -> list:
        for t in shardable_tensors:
            self._place(t)
        return (self.filled if self.filled[0] else []) + self.large

    def _sizes(self, t, tensor):
        """(the tensor, its bytes, bytes per element); strings measured in a session."""
        dtype = dtypes.as_dtype(t.dtype)
        if t.checkpoint_key == _OBJECT_GRAPH_KEY or dtype == dtypes.variant:
            return tensor, 0, 0
        if dtype == dtypes.string:
            sess = ops.get_default_session()
            if sess is None:
                if not self.warned_strings:
                    tf_logging.warning(
                        "The checkpoint sharding policy is being executed in a tf.function. "
                        "The size of the string/variant constant cannot be obtained."
                    )
                    self.warned_strings = True
                return tensor, 0, 0
            with ops.device(t.device):
                tensor = sess.run(tensor)
                scalar = getattr(tensor, "ndim", 0) == 0
                items = [tensor] if scalar else list(tensor)
                lengths = sess.run([string_ops.string_length(x, unit="BYTE") for x in items])
            return tensor, int(sum(lengths)), int(max(lengths))
        return tensor, None, dtype.size

    def _place(self, t) -> None:
        key, tensor = t.checkpoint_key, t.tensor
        if t.slice_spec:
            info = SaveSliceInfo.from_spec(t.slice_spec)
            full = tensor_shape.TensorShape(info.full_shape)
            root_shape = tensor_shape.TensorShape(info.var_shape)
            root_offset = list(info.var_offset)
        else:
            full = root_shape = tensor_shape.as_shape(t.shape)
            root_offset = [0] * (root_shape.rank or 0)
        tensor, total, item_size = self._sizes(t, tensor)
        if total is None:
            total = root_shape.num_elements() * item_size
        if not root_shape.rank:
            if total > self.max:
                tf_logging.warning(
                    "Tensor %s is a %s scalar of size %s bytes and cannot be partitioned into "
                    "a shard of max shard size %s bytes. It will be added as an individual "
                    "shard that exceeds the max shard size.",
                    key, t.dtype, total, self.max,
                )  # fmt: skip
                self.large.append({key: {t.slice_spec: tensor}})
                return
            if total > self.room:
                self._new_shard()
            self.filled[-1].setdefault(key, {})[t.slice_spec] = tensor
            self.room -= total
            return
        piece = _Piece(t, tensor, full, root_shape, root_offset, item_size)
        size = total
        while size > self.room:
            axis, length = piece.next_cut(self.room)
            if length == 0:
                if self.room == self.max:
                    # TF loops forever here; one element larger than a shard can't fit.
                    raise ValueError(
                        f"MaxShardSizePolicy: an element of {key} ({item_size} bytes) is "
                        f"larger than max_shard_size ({self.max} bytes)"
                    )
                self._new_shard()
            else:
                self._add_cut(piece, axis, length)
                size = piece.shape.num_elements() * item_size
        if piece.shape.num_elements() > 0:
            self.filled[-1].setdefault(key, {})[piece.spec(piece.shape.as_list())] = piece.rest()
        self.room -= size

    def _add_cut(self, piece, axis: int, length: int) -> None:
        key = piece.t.checkpoint_key
        tensor, shape = piece.cut(axis, length)
        spec = piece.spec(shape)
        size = math.prod(shape) * piece.item_size
        if size > self.max:
            tf_logging.warning(
                "Tensor %s's minimum slice %s has size %s bytes and cannot be partitioned into "
                "a shard of max shard size %s bytes. It will be added as an individual shard "
                "that exceeds the max shard size.",
                key, spec, size, self.max,
            )  # fmt: skip
            self.large.append({key: {spec: tensor}})
        elif size > self.room:
            raise RuntimeError(
                f"Slice size ({size} bytes) is larger than the remaining shard size "
                f"({self.room} bytes). This should have been caught in "
                "MaxShardSizePolicy._add_partition()."
            )
        else:
            self.filled[-1].setdefault(key, {})[spec] = tensor
            self.room -= size
            if self.room == 0:
                self._new_shard()
        piece.advance(axis, length)


class _Piece:
    """What is left of one tensor to place: it starts at `offset` (absolute, in the
    full variable) and has `shape`."""

    def __init__(self, t, tensor, full, root_shape, root_offset, item_size):
        self.t, self.tensor, self.full = t, tensor, full
        self.root_shape, self.root_offset = root_shape.as_list(), root_offset
        self.item_size = item_size
        self.offset = list(root_offset)
        self.shape = root_shape

    def _relative(self) -> list:
        return [o - r for o, r in zip(self.offset, self.root_offset, strict=True)]

    def next_cut(self, room: int) -> tuple[int, int]:
        """(axis, length) of the next piece: the axis needing the fewest pieces of at
        most `room` bytes; length 0 when not even one row fits."""
        dims = self.shape.as_list()
        count = math.prod(dims)

        def pieces(axis):
            per_row = count // dims[axis] * self.item_size
            rows = room // per_row if per_row else math.inf
            return math.inf if rows == 0 else math.ceil(dims[axis] / rows)

        best_axis, best = 0, pieces(0)
        for axis in range(1, len(dims)):
            n = pieces(axis)
            if n < best and count * self.item_size / n <= room:
                best_axis, best = axis, int(n)
        return best_axis, math.ceil(dims[best_axis] / best)

    def cut(self, axis: int, length: int):
        begin = self._relative()
        shape = [s - b for s, b in zip(self.root_shape, begin, strict=True)]
        shape[axis] = length
        with ops.device(self.t.device):
            return array_ops.slice(self.tensor, begin=begin, size=shape), shape

    def advance(self, axis: int, length: int) -> None:
        self.offset[axis] += length
        rel = self._relative()
        self.shape = tensor_shape.TensorShape(
            [s - b for s, b in zip(self.root_shape, rel, strict=True)]
        )

    def rest(self):
        with ops.device(self.t.device):
            return array_ops.slice(self.tensor, begin=self._relative(), size=self.shape.as_list())

    def spec(self, shape) -> str:
        info = SaveSliceInfo(
            full_name=self.t.checkpoint_key,
            full_shape=self.full.as_list(),
            var_offset=list(self.offset),
            var_shape=list(shape),
        )
        return info.spec.strip()
