"""Boosted trees' weighted quantile sketches and bucketization (TF's quantile ops).

A stream summarises weighted float values as sorted entries (value, weight, min rank,
max rank) whose rank bounds stay within epsilon * total weight: values are buffered,
the buffer sorted (equal values merged) into a summary, and summaries merged and
compressed up a ladder of levels so memory stays O(1/eps log^2(eps n)) -- the scheme of
TF's WeightedQuantilesStream.  MakeQuantileSummaries sketches one batch;
a QuantileStreamResource holds one stream per feature, fed summaries
(AddSummaries) and flushed into bucket boundaries (Flush) or back into summaries
(FlushQuantileSummaries).  Bucketize maps values to the first boundary >= them.

Invariant: weights and ranks are float32 and merged/compressed in TF's order, so
summaries and boundaries carry TF's bits.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops.boosted_trees_ops import handle_op, is_initialized_op, slot_of
from asyncflow.ops.boosted_trees_stats_ops import dim, merge_dims
from asyncflow.registry import REQUIRED, register_op

__all__: list[str] = []

_F = np.float32


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


class _Summary:
    """Sorted entries as four parallel lists: value, weight, min rank, max rank
    (float32 scalars)."""

    __slots__ = ("v", "w", "lo", "hi")

    def __init__(self, v=(), w=(), lo=(), hi=()):
        self.v, self.w, self.lo, self.hi = list(v), list(w), list(lo), list(hi)

    def __len__(self) -> int:
        return len(self.v)

    def copy(self) -> _Summary:
        return _Summary(self.v, self.w, self.lo, self.hi)

    @classmethod
    def from_buffer(cls, values: list, weights: list) -> _Summary:
        s, cum = cls(), _F(0)
        for v, w in zip(values, weights, strict=True):
            s.v.append(v)
            s.w.append(w)
            s.lo.append(cum)
            s.hi.append(cum + w)
            cum = cum + w
        return s

    def total_weight(self):
        return self.hi[-1] if self.hi else _F(0)

    def merge(self, other: _Summary) -> None:
        """Merge `other` in, keeping each entry's rank bounds valid for the union."""
        if not other:
            return
        if not self:
            self.v, self.w, self.lo, self.hi = (
                list(other.v),
                list(other.w),
                list(other.lo),
                list(other.hi),
            )
            return
        a, b = self.copy(), other
        out = _Summary()
        i = j = 0
        next1 = next2 = _F(0)  # the min rank after the last entry taken from each side
        while i < len(a) and j < len(b):
            if a.v[i] < b.v[j]:
                out._add(a.v[i], a.w[i], a.lo[i] + next2, a.hi[i] + (b.hi[j] - b.w[j]))
                next1 = a.lo[i] + a.w[i]
                i += 1
            elif b.v[j] < a.v[i]:
                out._add(b.v[j], b.w[j], b.lo[j] + next1, b.hi[j] + (a.hi[i] - a.w[i]))
                next2 = b.lo[j] + b.w[j]
                j += 1
            else:
                out._add(a.v[i], a.w[i] + b.w[j], a.lo[i] + b.lo[j], a.hi[i] + b.hi[j])
                next1, next2 = a.lo[i] + a.w[i], b.lo[j] + b.w[j]
                i += 1
                j += 1
        for k in range(i, len(a)):
            out._add(a.v[k], a.w[k], a.lo[k] + next2, a.hi[k] + b.hi[-1])
        for k in range(j, len(b)):
            out._add(b.v[k], b.w[k], b.lo[k] + next1, b.hi[k] + a.hi[-1])
        self.v, self.w, self.lo, self.hi = out.v, out.w, out.lo, out.hi

    def _add(self, v, w, lo, hi) -> None:
        self.v.append(v)
        self.w.append(w)
        self.lo.append(lo)
        self.hi.append(hi)

    def compress(self, size_hint: int, min_eps: float = 0.0) -> None:
        """Keep about `size_hint` entries (always the first and last) while the error
        grows by at most max(1 / size_hint, min_eps) of the total weight."""
        size_hint = max(int(size_hint), 2)
        n = len(self)
        if n <= size_hint:
            return
        eps_delta = float(self.total_weight()) * max(1.0 / size_hint, min_eps)
        keep: list[int] = []
        acc, step = 0, n
        read, last = 0, 0
        while read + 1 != n:
            nxt = read + 1
            while (
                nxt != n
                and acc < step
                and float((self.hi[nxt] - self.w[nxt]) - (self.lo[read] + self.w[read]))
                <= eps_delta
            ):
                acc += size_hint
                nxt += 1
            read = read + 1 if read == nxt - 1 else nxt - 1
            keep.append(read)
            last = read
            acc -= step
        idx = [0, *keep]
        if last + 1 != n:
            idx.append(n - 1)
        self.v = [self.v[k] for k in idx]
        self.w = [self.w[k] for k in idx]
        self.lo = [self.lo[k] for k in idx]
        self.hi = [self.hi[k] for k in idx]

    def approximation_error(self) -> float:
        if not self:
            return 0.0
        gap = _F(0)
        for k in range(1, len(self)):
            gap = max(
                gap,
                (self.hi[k] - self.lo[k]) - self.w[k],
                (self.hi[k] - self.w[k]) - (self.lo[k - 1] + self.w[k - 1]),
            )
        return float(gap) / float(self.total_weight())

    def boundaries(self, num_boundaries: int) -> list:
        if not self:
            return []
        s = self.copy()
        eps = float(_F(self.approximation_error() + 1.0 / num_boundaries))
        s.compress(num_boundaries, eps)
        # At most num_boundaries values (TF 2.x; TF 1.15 kept the compressed summary
        # whole): drop, one at a time, the inner entry whose removal leaves the smallest
        # rank gap between its neighbours (the first such).
        keep = list(range(len(s)))
        while len(keep) > num_boundaries:
            drop, smallest = None, s.total_weight()
            for j in range(1, len(keep) - 1):
                prev, nxt = keep[j - 1], keep[j + 1]
                gap = (s.hi[nxt] - s.w[nxt]) - (s.lo[prev] + s.w[prev])
                if gap < smallest:
                    drop, smallest = j, gap
            if drop is None:
                break
            del keep[drop]
        return [s.v[k] for k in keep]

    def quantiles(self, num_quantiles: int) -> list:
        if not self:
            return []
        num_quantiles = max(int(num_quantiles), 2)
        out, cur, n = [], 0, len(self)
        top = self.hi[-1]
        for rank in range(num_quantiles + 1):
            d2 = _F(2) * ((_F(rank) * top) / _F(num_quantiles))
            nxt = cur + 1
            while nxt < n and d2 >= self.lo[nxt] + self.hi[nxt]:
                nxt += 1
            cur = nxt - 1
            if nxt == n or d2 < (self.lo[cur] + self.w[cur]) + (self.hi[nxt] - self.w[nxt]):
                out.append(self.v[cur])
            else:
                out.append(self.v[nxt])
        return out

    def rows(self) -> np.ndarray:
        return np.array([self.v, self.w, self.lo, self.hi], np.float32).T.reshape(-1, 4)


def _specs(eps: float, max_elements: int) -> tuple[int, int]:
    """(levels, block size) for a stream of at most `max_elements` with error `eps`."""
    if eps <= np.finfo(np.float64).eps:
        return 1, max(max_elements, 2)
    level, block = 1, 2
    while (1 << level) * block < max_elements:
        block = int(math.ceil(level / eps)) + 1
        level += 1
    return level, max(block, 2)


class QuantileStream:
    """TF's WeightedQuantilesStream<float, float>."""

    def __init__(self, eps: float, max_elements: int):
        self.eps = float(eps)
        self.levels_max, self.block = _specs(self.eps, int(max_elements))
        self.buffer_max = min(self.block << 1, int(max_elements))
        self.buf_v: list = []
        self.buf_w: list = []
        self.local = _Summary()
        self.levels: list[_Summary] = []
        self.finalized = False

    def push_entry(self, value, weight) -> None:
        if weight <= 0:  # zero and negative weights are ignored
            return
        self.buf_v.append(_F(value))
        self.buf_w.append(_F(weight))
        if len(self.buf_v) >= self.buffer_max:
            self._push_buffer()

    def _push_buffer(self) -> None:
        order = sorted(range(len(self.buf_v)), key=lambda k: self.buf_v[k])
        values, weights = [], []
        for k in order:  # equal values become one entry of their summed weight
            if values and self.buf_v[k] == values[-1]:
                weights[-1] = weights[-1] + self.buf_w[k]
            else:
                values.append(self.buf_v[k])
                weights.append(self.buf_w[k])
        self.buf_v, self.buf_w = [], []
        self.local = _Summary.from_buffer(values, weights)
        self.local.compress(self.block, self.eps)
        self._propagate()

    def push_summary(self, summary: _Summary) -> None:
        self.local = summary.copy()
        self.local.compress(self.block, self.eps)
        self._propagate()

    def _propagate(self) -> None:
        if not self.local:
            return
        level = 0
        while True:
            if len(self.levels) <= level:
                self.levels.append(_Summary())
            current = self.levels[level]
            self.local.merge(current)
            if not current or len(self.local) <= self.block + 1:
                self.levels[level], self.local = self.local, _Summary()
                return
            self.local.compress(self.block, self.eps)
            self.levels[level] = _Summary()
            level += 1

    def finalize(self) -> _Summary:
        self._push_buffer()
        self.local = _Summary()
        for s in self.levels:
            self.local.merge(s)
        self.levels = []
        self.finalized = True
        return self.local


class QuantileStreamResource:
    KIND = "BoostedTreesQuantileStreamResource"

    def __init__(self, eps, max_elements: int, num_streams: int):
        self.eps, self.max_elements, self.num_streams = eps, max_elements, num_streams
        self.boundaries: list[list] = [[] for _ in range(num_streams)]
        self.buckets_ready = False
        self.reset_streams()

    def reset_streams(self) -> None:
        self.streams = [
            QuantileStream(self.eps, self.max_elements) for _ in range(self.num_streams)
        ]


def _resource(handle) -> QuantileStreamResource:
    return slot_of(handle, QuantileStreamResource.KIND).lookup()


def _scalar(x, what: str):
    x = np.asarray(x)
    if x.ndim != 0:
        raise _invalid(f"{what} must be a scalar, got a tensor of shape {list(x.shape)}")
    return x[()]


_HANDLE = "quantile_stream_resource_handle: resource"

BoostedTreesQuantileStreamResourceHandleOp = handle_op(
    "BoostedTreesQuantileStreamResourceHandleOp", QuantileStreamResource.KIND
)
IsBoostedTreesQuantileStreamResourceInitialized = is_initialized_op(
    "IsBoostedTreesQuantileStreamResourceInitialized",
    "quantile_stream_resource_handle",
    QuantileStreamResource.KIND,
)


def _no_outputs(op):
    return []


def _ranks(*ranks):
    """A shape function checking the leading inputs' ranks (None: any)."""

    def fn(op):
        for t, r in zip(op.inputs, ranks, strict=False):
            s = tensor_shape.as_shape(t.shape)
            if r is not None and s.ndims not in (None, r):
                raise ValueError(f"Shape must be rank {r} but is rank {s.ndims}")
        return []

    return fn


def _register(op_type, inputs, outputs=(), attrs=None, shape_fn=_no_outputs, stateful=True):
    op_def = register_op(
        op_type,
        inputs=inputs,
        outputs=list(outputs),
        attrs=attrs or {},
        shape_fn=shape_fn,
        stateful=stateful,
    )
    return op_def


BoostedTreesCreateQuantileStreamResource = _register(
    "BoostedTreesCreateQuantileStreamResource",
    [_HANDLE, "epsilon: float32", "num_streams: int64"],
    attrs={"max_elements": 1099511627776},
    shape_fn=_ranks(0, 0, 0),
)


@BoostedTreesCreateQuantileStreamResource.kernel("CPU")
async def _create_quantile_stream(ctx, handle, epsilon, num_streams):
    eps = float(_F(_scalar(epsilon, "epsilon")))
    if not eps > 0:
        raise _invalid("An epsilon value of zero is not allowed.")
    n = int(_scalar(num_streams, "num_streams"))
    if n < 0:
        raise _invalid("Num_streams input cannot be a negative integer")
    slot = slot_of(handle, QuantileStreamResource.KIND)
    if slot.resource is None:  # an existing resource is kept, as TF's
        slot.resource = QuantileStreamResource(eps, ctx.attrs["max_elements"], n)


def _summaries_shape(op):
    return [[None, 4]] * op.get_attr("num_features")


def _make_summaries_shape(op):
    n = op.get_attr("num_features")
    _ranks(*([1] * n), 1, 0)(op)
    return _summaries_shape(op)


BoostedTreesMakeQuantileSummaries = _register(
    "BoostedTreesMakeQuantileSummaries",
    ["float_values: num_features * float32", "example_weights: float32", "epsilon: float32"],
    ["summaries: num_features * float32"],
    attrs={"num_features": REQUIRED},
    shape_fn=_make_summaries_shape,
    stateful=False,
)


@BoostedTreesMakeQuantileSummaries.kernel("CPU")
async def _make_quantile_summaries(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_make_quantile_summaries_value, ctx, *args)


def _make_quantile_summaries_value(ctx, *args):
    n = ctx.attrs["num_features"]
    values = [np.asarray(v, np.float32).reshape(-1) for v in args[:n]]
    weights = np.asarray(args[n], np.float32).reshape(-1)
    eps = float(_F(np.asarray(args[n + 1]).reshape(-1)[0]))
    batch = values[0].shape[0] if values else 0
    if weights.shape[0] not in (1, batch):
        raise _invalid("Weights should be a single value or same size as features.")
    out = []
    for v in values:
        stream = QuantileStream(eps, batch + 1)
        for j in range(batch):
            stream.push_entry(v[j], weights[j] if weights.shape[0] > 1 else weights[0])
        out.append(stream.finalize().rows())
    return out[0] if len(out) == 1 else tuple(out)


BoostedTreesQuantileStreamResourceAddSummaries = _register(
    "BoostedTreesQuantileStreamResourceAddSummaries",
    [_HANDLE, "summaries: num_features * float32"],
    attrs={"num_features": REQUIRED},
    shape_fn=lambda op: _ranks(0, *([2] * op.get_attr("num_features")))(op),
)


@BoostedTreesQuantileStreamResourceAddSummaries.kernel("CPU")
async def _add_summaries(ctx, handle, *summaries):
    res = _resource(handle)
    if len(summaries) != res.num_streams:
        raise _invalid(
            f"Got {len(summaries)} summaries for a resource of {res.num_streams} streams"
        )
    for stream, rows in zip(res.streams, summaries, strict=True):
        if stream.finalized:
            continue
        rows = np.asarray(rows, np.float32)
        if rows.ndim != 2 or rows.shape[1] != 4:
            raise _invalid(f"Each summary must be of shape [entries, 4], got {list(rows.shape)}")
        stream.push_summary(_Summary(*(list(rows[:, k]) for k in range(4))))


BoostedTreesQuantileStreamResourceFlush = _register(
    "BoostedTreesQuantileStreamResourceFlush",
    [_HANDLE, "num_buckets: int64"],
    attrs={"generate_quantiles": False},
    shape_fn=_ranks(0, 0),
)


@BoostedTreesQuantileStreamResourceFlush.kernel("CPU")
async def _flush(ctx, handle, num_buckets):
    res = _resource(handle)
    nb = int(_scalar(num_buckets, "num_buckets"))
    for k, stream in enumerate(res.streams):
        summary = stream.finalize()
        if ctx.attrs["generate_quantiles"]:
            q = summary.quantiles(nb - 1)
            if len(q) != nb:
                raise _invalid(f"Generated {len(q)} quantiles for {nb} buckets")
            res.boundaries[k] = q
        else:
            b = summary.boundaries(nb)
            res.boundaries[k] = [x for i, x in enumerate(b) if i == 0 or x != b[i - 1]]
    res.reset_streams()
    res.buckets_ready = True


BoostedTreesFlushQuantileSummaries = _register(
    "BoostedTreesFlushQuantileSummaries",
    [_HANDLE],
    ["summaries: num_features * float32"],
    attrs={"num_features": REQUIRED},
    shape_fn=_summaries_shape,
)


@BoostedTreesFlushQuantileSummaries.kernel("CPU")
async def _flush_summaries(ctx, handle):
    res = _resource(handle)
    n = ctx.attrs["num_features"]
    if n != res.num_streams:
        raise _invalid(f"num_features {n} differs from the resource's {res.num_streams} streams")
    out = [stream.finalize().rows() for stream in res.streams]
    res.reset_streams()
    return out[0] if len(out) == 1 else tuple(out)


BoostedTreesQuantileStreamResourceGetBucketBoundaries = _register(
    "BoostedTreesQuantileStreamResourceGetBucketBoundaries",
    [_HANDLE],
    ["bucket_boundaries: num_features * float32"],
    attrs={"num_features": REQUIRED},
    shape_fn=lambda op: [[None]] * op.get_attr("num_features"),
)


@BoostedTreesQuantileStreamResourceGetBucketBoundaries.kernel("CPU")
async def _get_bucket_boundaries(ctx, handle):
    res = _resource(handle)
    n = ctx.attrs["num_features"]
    if n != res.num_streams:
        raise _invalid(f"num_features {n} differs from the resource's {res.num_streams} streams")
    out = [np.array(b, np.float32) for b in res.boundaries]
    return out[0] if len(out) == 1 else tuple(out)


def _deserialize_shape(op):
    # TF's shape function wants the first boundaries input of rank 0 (though the kernel
    # reads a vector): only boundaries of unknown rank build.
    return _ranks(0, 0)(op)


BoostedTreesQuantileStreamResourceDeserialize = _register(
    "BoostedTreesQuantileStreamResourceDeserialize",
    [_HANDLE, "bucket_boundaries: num_streams * float32"],
    attrs={"num_streams": REQUIRED},
    shape_fn=_deserialize_shape,
)


@BoostedTreesQuantileStreamResourceDeserialize.kernel("CPU")
async def _deserialize(ctx, handle, *boundaries):
    res = _resource(handle)
    for k, b in enumerate(boundaries[: res.num_streams]):
        res.boundaries[k] = [_F(x) for x in np.asarray(b, np.float32).reshape(-1)]


def _bucketize_shape(op):
    n = op.get_attr("num_features")
    _ranks(*([1] * n))(op)
    for t in op.inputs[:n]:  # one batch for every feature
        merge_dims(dim(t, 0), dim(op.inputs[0], 0))
    return [[dim(op.inputs[0], 0)]] * n


BoostedTreesBucketize = _register(
    "BoostedTreesBucketize",
    ["float_values: num_features * float32", "bucket_boundaries: num_features * float32"],
    ["buckets: num_features * int32"],
    attrs={"num_features": REQUIRED},
    shape_fn=_bucketize_shape,
    stateful=False,
)


@BoostedTreesBucketize.kernel("CPU")
async def _bucketize(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_bucketize_value, ctx, *args)


def _bucketize_value(ctx, *args):
    n = ctx.attrs["num_features"]
    if n and np.ndim(args[n]) != 1:
        raise _invalid("Buckets should be flat vectors.")
    out = []
    for values, bounds in zip(args[:n], args[n:], strict=True):
        values = np.asarray(values, np.float32)
        bounds = np.asarray(bounds, np.float32).reshape(-1)
        if bounds.size == 0:
            out.append(np.zeros(values.shape[0], np.int32))
            continue
        # the first boundary >= the value (lower_bound), the last one past them all
        idx = np.array([bisect.bisect_left(bounds, v) for v in values.reshape(-1)], np.int64)
        out.append(np.minimum(idx, bounds.size - 1).astype(np.int32).reshape(values.shape[0]))
    return out[0] if len(out) == 1 else tuple(out)
