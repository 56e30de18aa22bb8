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
