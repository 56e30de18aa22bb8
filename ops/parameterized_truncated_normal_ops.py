"""StatelessParameterizedTruncatedNormal (`tf.random.stateless_parameterized_truncated_normal`)
with TF 2.21's numbers: normals of mean / stddev kept inside [minval, maxval].

TF's kernel (TruncatedNormalFunctorV2) picks one of three rejection samplers per batch
member from where the bounds lie: normal draws when at least 1.3 stddevs fit on one
side of the mean, uniform proposals on a narrow interval, else an exponential proposal
offset to the near bound; all arithmetic in the output dtype.  Batch members (the
parameters' broadcast shape, which `shape` ends with) draw their samples in turn from
one stream of the seed's (key, counter) (ops/stateless_random_ops.py): as TF's kernel
in one shard (TF splits a large output over threads at offsets of its thread pool).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import philox_random as pr
from asyncflow.ops.stateless_random_ops import (
    check_ends_with,
    key_counter_of_seed,
    make_shape,
    shape_tensor,
)
from asyncflow.registry import INDEX, NotDifferentiable, TypeConstraint, register_op

__all__ = ["stateless_parameterized_truncated_normal"]

_MAX_ITERATIONS = 1000
_RANDN_BOUND = 1.3  # TF: normal draws when this many stddevs fit on one side


class _Blocks:
    """The stream from (key, counter) on, one block per call, read as the dtype's
    UniformDistribution or NormalDistribution (4 values a block; 2 for float64)."""

    __slots__ = ("key", "counter", "np_dtype", "per", "uniforms", "normals", "pos")

    def __init__(self, key, counter: int, np_dtype):
        self.key, self.counter, self.np_dtype = key, counter, np.dtype(np_dtype)
        self.per = 2 if self.np_dtype == np.float64 else 4
        self.pos = self.uniforms = self.normals = None

    def _next(self) -> int:
        if self.pos is None or self.pos >= len(self.uniforms):
            n = 64 * self.per  # 64 blocks at a time, read both ways
            self.uniforms = pr.uniform(np, self.key, self.counter, n, self.np_dtype)
            self.normals = pr.normal(np, self.key, self.counter, n, self.np_dtype)
            self.counter += 64
            self.pos = 0
        at, self.pos = self.pos, self.pos + self.per
        return at

    def uniform(self):
        at = self._next()
        return self.uniforms[at : at + self.per]

    def normal(self):
        at = self._next()
        return self.normals[at : at + self.per]


def _internal(what: str):
    return errors.InternalError(
        None, None, f"TruncatedNormal {what} rejection sampler failed to accept a sample."
    )


def _randn_sampler(blocks, norm_min, norm_max, stddev, mean, n, out):
    misses = 0
    while len(out) < n:
        for x in blocks.normal():
            if norm_min <= x <= norm_max:
                out.append(x * stddev + mean)
                if len(out) >= n:
                    break
                misses = 0
            else:
                misses += 1
                if misses > _MAX_ITERATIONS:
                    raise _internal("randn")


def _uniform_sampler(blocks, t, norm_min, diff, stddev, mean, n, out):
    plus = t(0) if norm_min < t(0) else norm_min * norm_min
    misses = 0
    while len(out) < n:
        z = blocks.uniform() * diff + norm_min
        g = (plus - z * z) / t(2)
        u = blocks.uniform()
        for i in range(len(z)):
            if u[i] <= np.exp(g[i]):
                out.append(z[i] * stddev + mean)
                if len(out) >= n:
                    break
                misses = 0
            elif misses + 1 >= _MAX_ITERATIONS:
                raise _internal("uniform")
            else:
                misses += 1


def _exponential_sampler(blocks, t, norm_min, norm_max, stddev, mean, n, out):
    alpha = (norm_min + np.sqrt(norm_min * norm_min + t(4))) / t(2)
    misses = 0
    while len(out) < n:
        r = blocks.uniform()
        for i in range(0, len(r), 2):
            z = -np.log(r[i]) / alpha + norm_min
            x = alpha - z if norm_min < alpha else norm_min - alpha
            if r[i + 1] <= np.exp(-x * x / t(2)) and z < norm_max:
                out.append(z * stddev + mean)
                if len(out) >= n:
                    break
                misses = 0
            elif misses + 1 >= _MAX_ITERATIONS:
                raise _internal("exponential distribution")
            else:
                misses += 1


def _batch_member(blocks, t, mean, stddev, lo, hi, n: int) -> list:
    """n samples for one set of parameters, in the dtype's arithmetic (TF's)."""
    if not (stddev > 0 and lo < hi and (np.isfinite(lo) or np.isfinite(hi))):
        raise errors.InvalidArgumentError(None, None, "Invalid parameters")
    if (np.isinf(lo) and lo < 0) or hi < mean:  # the one-sided bound below the mean
        lo, hi, stddev = hi, lo, -stddev
    norm_min = (lo - mean) / stddev
    norm_max = (hi - mean) / stddev
    root = np.sqrt(norm_min * norm_min + t(4))
    cutoff = t(2) * np.exp(t(0.5) + (norm_min * (norm_min - root)) / t(4)) / (norm_min + root)
    bound = t(_RANDN_BOUND)
    out: list = []
    if (norm_min < -bound and norm_max >= t(0)) or (norm_max > bound and norm_min <= t(0)):
        _randn_sampler(blocks, norm_min, norm_max, stddev, mean, n, out)
    elif norm_max - norm_min < cutoff:
        _uniform_sampler(blocks, t, norm_min, norm_max - norm_min, stddev, mean, n, out)
    else:
        _exponential_sampler(blocks, t, norm_min, norm_max, stddev, mean, n, out)
    return out


def _draw(key, counter, shape, np_dtype, params):
    params = [np.asarray(p) for p in params]
    try:
        batch = np.broadcast_shapes(*(p.shape for p in params))
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, "means, stddevs, minvals and maxvals must have compatible batch "
            f"dimensions: {', '.join(str(list(p.shape)) for p in params)}"
        ) from None  # fmt: skip
    check_ends_with(shape, batch)
    flat = [np.broadcast_to(p, batch).reshape(-1) for p in params]
    members, total = int(np.prod(batch)), int(np.prod(shape))
    per = total // members if members else 0
    t = np.dtype(np_dtype).type
    blocks = _Blocks(key, counter, np_dtype)
    out = np.empty((per, members), np_dtype)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for b in range(members if per else 0):
            mean, stddev, lo, hi = (t(p[b]) for p in flat)
            out[:, b] = _batch_member(blocks, t, mean, stddev, lo, hi, per)
    return out.reshape(shape)


def _shape_fn(op):
    op.inputs[0].shape.with_rank(1)
    op.inputs[1].shape.merge_with(tensor_shape.TensorShape([2]))
    return [ops.constant_shape(op.inputs[0])]


StatelessParameterizedTruncatedNormal = register_op(
    "StatelessParameterizedTruncatedNormal",
    inputs=["shape: S", "seed: Tseed", "means: dtype", "stddevs: dtype", "minvals: dtype",
            "maxvals: dtype"],
    outputs=["output: dtype"],
    attrs={"S": INDEX, "Tseed": TypeConstraint(["int32", "int64"], "int64"),
           "dtype": TypeConstraint(["float16", "float32", "float64"])},
    shape_fn=_shape_fn,
)  # fmt: skip
NotDifferentiable("StatelessParameterizedTruncatedNormal")


@StatelessParameterizedTruncatedNormal.kernel("CPU")
async def _ptn_kernel(ctx, shape, seed, means, stddevs, minvals, maxvals):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    np_dtype = ctx.attrs["dtype"].as_numpy_dtype
    params = (means, stddevs, minvals, maxvals)
    return await ctx.device.compute(
        lambda: _draw(key, counter, dims, np_dtype, params), cost=64 * max(int(np.prod(dims)), 1)
    )


def stateless_parameterized_truncated_normal(
    shape, seed, means=0.0, stddevs=1.0, minvals=-2.0, maxvals=2.0, name=None
):
    """`tf.random.stateless_parameterized_truncated_normal`: normals of `means` and
    `stddevs` inside [minvals, maxvals] (broadcast; `shape` ends with their shape), TF's
    numbers for a [2] seed.

    Raises (when run): InvalidArgumentError "Invalid parameters" for stddev <= 0,
    minval >= maxval or two infinite bounds.
    """
    with ops.name_scope(
        name, "stateless_parameterized_truncated_normal", [shape, means, stddevs, minvals, maxvals]
    ):
        shape = shape_tensor(shape)
        means = ops.convert_to_tensor(means, name="means")
        stddevs = ops.convert_to_tensor(stddevs, name="stddevs")
        minvals = ops.convert_to_tensor(minvals, name="minvals")
        maxvals = ops.convert_to_tensor(maxvals, name="maxvals")
        seed = ops.convert_to_tensor(seed, name="seed")
        attrs = {"S": shape.dtype, "Tseed": seed.dtype, "dtype": dtypes.as_dtype(means.dtype)}
        return ops.apply_op(
            "StatelessParameterizedTruncatedNormal",
            [shape, seed, means, stddevs, minvals, maxvals],
            attrs,
        ).outputs[0]


# -- ParameterizedTruncatedNormal: the stateful op (tf.random.truncated_normal's
# parameterized form in TF 1.x graphs) ------------------------------------------------------
#
# TF's TruncatedNormalFunctor: output [shape[0], prod(shape[1:])], row b drawn with row b's
# parameters (or the single ones), the rows in turn from the op's reserved counter, as
# TF's kernel in one shard (a large output TF splits over its thread pool, each shard
# skipping to its first row's offset: that split depends on the machine, and is not
# reproduced).  With all four parameters scalars the flat output is drawn as rows of
# 100 (TF's kDesiredBatchSize).  The op reserves 2 * kMaxIterations * (row + 3) / 4
# blocks a row.

_DESIRED_BATCH = 100


def _layout(shape, params) -> tuple[int, int, int]:
    """(rows, samples per row, blocks to reserve) as TF's kernel lays the draw out."""
    batches = int(shape[0])
    per = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    if all(np.ndim(p) == 0 for p in params):
        batches, per = -(-(batches * per) // _DESIRED_BATCH), _DESIRED_BATCH
    return batches, per, batches * 2 * _MAX_ITERATIONS * (per + 3) // 4


def _stateful_draw(key, counter: int, shape, np_dtype, params):
    total = int(np.prod(shape, dtype=np.int64))
    batches, per, _ = _layout(shape, params)
    flat = [np.asarray(p).reshape(-1) for p in params]
    t = np.dtype(np_dtype).type
    out = np.empty(total, np_dtype)
    blocks = _Blocks(key, counter, np_dtype)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for b in range(batches):
            start, stop = b * per, min((b + 1) * per, total)
            if start >= stop:
                break
            mean, stddev, lo, hi = (t(p[0 if p.size == 1 else b]) for p in flat)
            out[start:stop] = _batch_member(blocks, t, mean, stddev, lo, hi, stop - start)
    return out.reshape(shape)


def _stateful_shape(op):
    op.inputs[0].shape.with_rank(1)
    return [ops.constant_shape(op.inputs[0])]


ParameterizedTruncatedNormal = register_op(
    "ParameterizedTruncatedNormal",
    inputs=["shape: T", "means: dtype", "stdevs: dtype", "minvals: dtype", "maxvals: dtype"],
    outputs=["output: dtype"],
    attrs={
        "seed": 0,
        "seed2": 0,
        "dtype": TypeConstraint(["float16", "bfloat16", "float32", "float64"]),
        "T": INDEX,
    },
    shape_fn=_stateful_shape,
    stateful=True,
)
NotDifferentiable("ParameterizedTruncatedNormal")


@ParameterizedTruncatedNormal.kernel("CPU", host_memory=("shape",))
async def _parameterized_truncated_normal(ctx, shape, means, stdevs, minvals, maxvals):
    shape = np.asarray(shape)
    if shape.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Input shape should be a vector, got shape: {list(shape.shape)}"
        )
    if shape.size == 0:
        raise errors.InvalidArgumentError(
            None, None, f"Shape tensor must not be empty, got {shape.tolist()}"
        )
    shape = [int(d) for d in shape]
    params = [np.asarray(p) for p in (means, stdevs, minvals, maxvals)]
    for name, p in zip(("means", "stddevs", "minvals", "maxvals"), params):
        if p.ndim > 1:
            raise errors.InvalidArgumentError(
                None, None, f"Input {name} should be a scalar or vector, got shape: "
                f"{list(p.shape)}"
            )  # fmt: skip
        if p.ndim == 1 and p.shape[0] not in (1, shape[0]):
            raise errors.InvalidArgumentError(
                None, None, f"Input {name} should have length 1 or shape[0], got shape: "
                f"{list(p.shape)}"
            )  # fmt: skip
    gen = pr.tf_generator(ctx)
    counter = gen.reserve_blocks(_layout(shape, params)[2])  # (TF's ReserveSamples128)
    np_dtype = ctx.attrs["dtype"].as_numpy_dtype
    return await ctx.device.compute(_stateful_draw, gen.key, counter, shape, np_dtype, params)
