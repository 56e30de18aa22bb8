"""Random ops: uniform, normal, truncated normal, integers, shuffle, multinomial.

Every op here is stateful and carries int attrs `seed` and `seed2` (0 = unset), filled
in by `random_seed.get_seed`.  RandomUniform, RandomStandardNormal, TruncatedNormal
and RandomUniformInt give TF's numbers: each op keeps TF's Philox generator for its
(seed, seed2) in `kernel_api.random_state(ctx)` (both drawn from the OS when both are
0): the session's for the op, or inside a dataset function the pass's, as TF makes a
function's kernels anew for each iterator and each run of `reduce`.  Each run reserves
256 counter values per output, as TF's kernels do (ops/philox_random.py).  Their
output is a function of the counter alone, so a GPU computes it on its compute stream
with `ctx.xp` and gets the CPU's numbers; the truncated normal (a variable number of
draws per output, found by reading the draws) is drawn on the host and copied
asynchronously.  RandomShuffle (TF's swaps, one word each) and Multinomial (TF's
reservation, then the stateless kernel's draws, ops/stateless_random_dists.py) give TF's
numbers too, drawn on the host.  Successive runs of one op continue its stream, so they
differ.  Shape, minval and maxval stay in host memory.

The float builders scale and shift the raw op with math ops, as TF does, so the raw
op is `<name>/RandomUniform` and the returned tensor is `<name>:0`.
"""

from __future__ import annotations

import asyncio

import numpy as np

from asyncflow import dtypes, errors, random_seed, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import philox_random
from asyncflow.ops import stateless_random_dists as dists
from asyncflow.ops.control_flow_ordering import _take_scope_name
from asyncflow.registry import ANY, INDEX, REAL, NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "random_uniform",
    "random_normal",
    "truncated_normal",
    "random_shuffle",
    "multinomial",
]

_FLOAT_OUT = TypeConstraint(["float16", "bfloat16", "float32", "float64"])
_INT_OUT = TypeConstraint(["int32", "int64"])
_SEEDS = {"seed": 0, "seed2": 0}


# -- helpers shared by the kernels -----------------------------------------------------


def _host(x):
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def _make_shape(shape) -> tuple[int, ...]:
    """The output shape from a shape input; InvalidArgumentError as TF's MakeShape."""
    shape = _host(shape)
    if shape.ndim != 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"shape must be a vector of {{int32,int64}}, got shape {_shape_str(shape.shape)}",
        )
    dims = tuple(int(d) for d in shape)
    for d in dims:
        if d < 0:
            raise errors.InvalidArgumentError(None, None, f"Dimension {d} must be >= 0")
    return dims


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


async def _to_device(ctx, value):
    """A host draw in the kernel's device memory: on a device with memory of its own
    through the device's asynchronous copy (pinned staging, a copy stream), never a
    copy that would hold the event loop until the device is idle."""
    if ctx.xp is np:
        return value
    copy = getattr(ctx.device, "copy_from_host", None)
    return await copy(value) if copy is not None else ctx.xp.asarray(value)


# A host draw for a device with memory of its own is made off the event loop from this
# many bytes on (the device's own workers run its kernels' device work, not host work).
_DRAW_OFF_LOOP_BYTES = 1 << 20


_tf_generator = philox_random.tf_generator  # (this op's TF generator, made on first use)


async def _draw_tf(ctx, fill, shape, dtype, on_device=True):
    """`fill(xp, key, counter, n, numpy dtype)` (ops/philox_random.py) reshaped to
    `shape`: on the kernel's device (its `xp`), or when `on_device` is False on the
    host, copied to the device asynchronously.  The counter is reserved before the
    first await, so the op's runs take their stretches of the stream in run order."""
    n = int(np.prod(shape))
    ctx.device.check_alloc(n, dtype)
    gen, np_dtype = _tf_generator(ctx), dtype.as_numpy_dtype
    counter = gen.reserve(n)
    cost = n * dtype.size * 8

    def make(xp):
        out = fill(xp, gen.key, counter, n, np_dtype)
        if xp is np and out.base is None:
            out.shape = shape  # (in place: the array stays its own, so consumers may
            return out  # write into it, where a reshaped view could not be)
        return out.reshape(shape)

    if ctx.xp is np or on_device:
        xp = ctx.xp
        return await ctx.device.compute(lambda: make(xp), cost=cost)
    if n * dtype.size >= _DRAW_OFF_LOOP_BYTES:
        out = await asyncio.get_running_loop().run_in_executor(None, make, np)
    else:
        out = make(np)
    return await _to_device(ctx, out)


def _random_shape(op):
    op.inputs[0].shape.with_rank(1)
    return [ops.constant_shape(op.inputs[0])]


def _floats(draw, gen, shape, np_dtype):
    """`draw(gen, shape, dtype)` in float32/64, cast to half precision when asked."""
    wide = np_dtype if np_dtype in (np.float32, np.float64) else np.float32
    return draw(gen, shape, wide).astype(np_dtype, copy=False)


# -- RandomUniform -----------------------------------------------------------------------

RandomUniform = register_op(
    "RandomUniform",
    inputs=["shape: T"],
    outputs=["output: dtype"],
    attrs={**_SEEDS, "dtype": _FLOAT_OUT, "T": INDEX},
    shape_fn=_random_shape,
    stateful=True,
)


def _draw_uniform(gen, shape, np_dtype):
    out = _floats(lambda g, s, d: g.random(s, dtype=d), gen, shape, np_dtype)
    # Rounding to a narrower float may reach 1.0; the range is [0, 1).
    return np.minimum(out, np.nextafter(np_dtype(1), np_dtype(0)))


@RandomUniform.kernel(host_memory=("shape",))
async def _random_uniform(ctx, shape):
    shape = _make_shape(shape)
    return await _draw_tf(ctx, philox_random.uniform, shape, ctx.attrs["dtype"])


# -- RandomStandardNormal ----------------------------------------------------------------

RandomStandardNormal = register_op(
    "RandomStandardNormal",
    inputs=["shape: T"],
    outputs=["output: dtype"],
    attrs={**_SEEDS, "dtype": _FLOAT_OUT, "T": INDEX},
    shape_fn=_random_shape,
    stateful=True,
)


def _draw_normal(gen, shape, np_dtype):
    return _floats(lambda g, s, d: g.standard_normal(s, dtype=d), gen, shape, np_dtype)


@RandomStandardNormal.kernel(host_memory=("shape",))
async def _random_standard_normal(ctx, shape):
    shape = _make_shape(shape)
    return await _draw_tf(ctx, philox_random.normal, shape, ctx.attrs["dtype"])


# -- TruncatedNormal ---------------------------------------------------------------------

TruncatedNormal = register_op(
    "TruncatedNormal",
    inputs=["shape: T"],
    outputs=["output: dtype"],
    attrs={**_SEEDS, "dtype": _FLOAT_OUT, "T": INDEX},
    shape_fn=_random_shape,
    stateful=True,
)


def _draw_truncated(gen, shape, np_dtype):
    out = gen.standard_normal(shape)
    flat = out.reshape(-1)
    bad = np.flatnonzero(np.abs(flat) > 2.0)
    while bad.size:  # resample everything beyond two standard deviations
        flat[bad] = gen.standard_normal(bad.size)
        bad = bad[np.abs(flat[bad]) > 2.0]
    return out.astype(np_dtype)


@TruncatedNormal.kernel(host_memory=("shape",))
async def _truncated_normal(ctx, shape):
    shape = _make_shape(shape)
    return await _draw_tf(
        ctx, philox_random.truncated_normal, shape, ctx.attrs["dtype"], on_device=False
    )


# -- RandomUniformInt --------------------------------------------------------------------


def _random_uniform_int_shape(op):
    for t, what in ((op.inputs[1], "minval"), (op.inputs[2], "maxval")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims} ({what})")
    return _random_shape(op)


RandomUniformInt = register_op(
    "RandomUniformInt",
    inputs=["shape: T", "minval: Tout", "maxval: Tout"],
    outputs=["output: Tout"],
    attrs={**_SEEDS, "Tout": _INT_OUT, "T": INDEX},
    shape_fn=_random_uniform_int_shape,
    stateful=True,
)


@RandomUniformInt.kernel(host_memory=("shape", "minval", "maxval"))
async def _random_uniform_int(ctx, shape, minval, maxval):
    shape = _make_shape(shape)
    minval, maxval = _host(minval), _host(maxval)
    for value, what in ((minval, "minval"), (maxval, "maxval")):
        if value.ndim != 0:
            raise errors.InvalidArgumentError(
                None, None, f"{what} must be 0-D, got shape {_shape_str(value.shape)}"
            )
    dtype = ctx.attrs["Tout"]
    n = int(np.prod(shape))
    if n == 0:  # as TF: an empty output needs no valid range
        return await _to_device(ctx, np.zeros(shape, dtype.as_numpy_dtype))
    lo, hi = int(minval), int(maxval)
    if lo >= hi:
        raise errors.InvalidArgumentError(None, None, f"Need minval < maxval, got {lo} >= {hi}")

    def fill(xp, key, counter, n, np_dtype):
        return philox_random.uniform_int(xp, key, counter, n, lo, hi, np_dtype)

    return await _draw_tf(ctx, fill, shape, dtype)


# -- RandomShuffle -----------------------------------------------------------------------

RandomShuffle = register_op(
    "RandomShuffle",
    inputs=["value: T"],
    outputs=["output: T"],
    attrs={**_SEEDS, "T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
)


def _shuffle_permutation(key, counter: int, size: int) -> np.ndarray:
    """TF's RandomShuffle: i from 0 to size-2 swaps with i + word % (size - i), one word
    of the stream each (`single() % n`, modulo bias and all)."""
    words = philox_random.philox_words(np, key, counter, -(-(size - 1) // 4))
    words = words.reshape(-1)[: size - 1].astype(np.int64)
    picks = (np.arange(size - 1) + words % np.arange(size, 1, -1)).tolist()
    perm = list(range(size))
    for i, j in enumerate(picks):
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, np.int64)


@RandomShuffle.kernel()
async def _random_shuffle(ctx, value):
    value = ctx.xp.asarray(value)
    if value.ndim == 0 or value.shape[0] <= 1 or value.size <= 1:
        return value
    size = value.shape[0]
    gen = _tf_generator(ctx)
    counter = gen.reserve_blocks((size - 1 + 3) // 4)  # (ReserveSamples32(size - 1))
    perm = await ctx.device.compute(
        lambda: _shuffle_permutation(gen.key, counter, size), cost=64 * size
    )
    perm = await _to_device(ctx, perm)
    return await ctx.device.compute(lambda: value[perm], cost=value.nbytes)


# -- Multinomial -------------------------------------------------------------------------


def _multinomial_shape(op):
    logits = op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(0)
    num_samples = ops.constant_value(op.inputs[1])
    n = None if num_samples is None else int(num_samples)
    return [tensor_shape.TensorShape([logits[0], n])]


Multinomial = register_op(
    "Multinomial",
    inputs=["logits: T", "num_samples: int32"],
    outputs=["output: output_dtype"],
    attrs={**_SEEDS, "T": REAL, "output_dtype": TypeConstraint(["int32", "int64"], "int64")},
    shape_fn=_multinomial_shape,
    stateful=True,
)


@Multinomial.kernel("CPU")
async def _multinomial(ctx, logits, num_samples):
    logits, num_samples = np.asarray(logits), np.asarray(num_samples)
    if logits.ndim != 2:
        raise errors.InvalidArgumentError(
            None, None, f"logits should be a matrix, got shape {_shape_str(logits.shape)}"
        )
    if num_samples.ndim != 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"num_samples should be a scalar, got shape {_shape_str(num_samples.shape)}",
        )
    n = int(num_samples)
    if n < 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_samples should be nonnegative, got {n}"
        )
    if logits.shape[1] <= 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_classes should be positive, got {logits.shape[1]}"
        )
    dtype = ctx.attrs["output_dtype"]
    rows = logits.shape[0]
    ctx.device.check_alloc(rows * n, dtype)
    if rows * n == 0:
        return np.empty((rows, n), dtype.as_numpy_dtype)
    # TF's reservation: rows * ceil4(num_samples) * 2 outputs (a double is two words)
    gen = _tf_generator(ctx)
    counter = gen.reserve(rows * ((n + 3) // 4 * 4) * 2)
    return await ctx.device.compute(
        lambda: dists.multinomial(gen.key, counter, logits, n, dtype.as_numpy_dtype),
        cost=logits.nbytes + rows * n * 64,
    )


# -- builders ----------------------------------------------------------------------------


def _shape_tensor(shape) -> ops.Tensor:
    """TF's `tensor_util.shape_tensor`: a list, TensorShape or Tensor as a 1-D tensor."""
    if isinstance(shape, tensor_shape.TensorShape):
        shape = shape.as_list()
    dtype = None
    if isinstance(shape, (tuple, list)):
        if not shape:
            dtype = dtypes.int32
        else:
            shape = [tensor_shape.dimension_value(d) for d in shape]
    return ops.convert_to_tensor(shape, dtype=dtype, name="shape")


def _seed_attrs(seed) -> dict:
    seed1, seed2 = random_seed.get_seed(seed)
    return {"seed": seed1 or 0, "seed2": seed2 or 0}


def _float_dtype(dtype) -> dtypes.DType:
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Invalid dtype {dtype!r}")
    return dtype


def random_uniform(
    shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None, name=None
) -> ops.Tensor:
    """Values drawn uniformly from `[minval, maxval)` (`tf.random_uniform`).

    For integer dtypes (int32, int64) `maxval` is required and the draw is unbiased.

    Raises:
      ValueError: for an unsupported dtype, or an integer dtype without `maxval`.
      InvalidArgumentError: at run time, for an integer draw with `minval >= maxval`.
    """
    dtype = dtypes.as_dtype(dtype)
    if dtype not in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64,
                     dtypes.int32, dtypes.int64):  # fmt: skip
        raise ValueError(f"Invalid dtype {dtype!r}")
    if maxval is None:
        if dtype.is_integer:
            raise ValueError(f"Must specify maxval for integer dtype {dtype!r}")
        maxval = 1
    with ops.name_scope(name, "random_uniform", [shape, minval, maxval]) as scope:
        shape = _shape_tensor(shape)
        # TF 2's graph: Python-int bounds 0 and 1 leave the draw as it is (no bound
        # constants, no arithmetic), a 0 lower bound only scales it.
        minval_is_zero = isinstance(minval, int) and not isinstance(minval, bool) and minval == 0
        maxval_is_one = isinstance(maxval, int) and not isinstance(maxval, bool) and maxval == 1
        if not (minval_is_zero and maxval_is_one) or dtype.is_integer:
            minval = ops.convert_to_tensor(minval, dtype=dtype, name="min")
            maxval = ops.convert_to_tensor(maxval, dtype=dtype, name="max")
        seeds = _seed_attrs(seed)
        if dtype.is_integer:
            op = ops.apply_op("RandomUniformInt", [shape, minval, maxval], seeds)
            return _take_scope_name(op, scope).outputs[0]
        from asyncflow.ops import math_ops

        rnd = ops.apply_op("RandomUniform", [shape], {**seeds, "dtype": dtype}).outputs[0]
        if minval_is_zero:
            return rnd if maxval_is_one else math_ops.multiply(rnd, maxval)
        # TF writes `rnd * (maxval - minval) + minval`: the operators' "mul", "sub".
        scaled = math_ops.multiply(rnd, math_ops.subtract(maxval, minval, name="sub"), name="mul")
        out = math_ops.add(scaled, minval)
        _take_scope_name(out.op, scope)
        return out


def _normal(op_type, default_name, shape, mean, stddev, dtype, seed, name) -> ops.Tensor:
    with ops.name_scope(name, default_name, [shape, mean, stddev]) as scope:
        shape_t = _shape_tensor(shape)
        mean = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
        attrs = {**_seed_attrs(seed), "dtype": dtype}
        rnd = ops.apply_op(op_type, [shape_t], attrs).outputs[0]
        philox_random.prepare()  # (the host's Box-Muller loops, compiled meanwhile)
        from asyncflow.ops import math_ops

        out = math_ops.add(math_ops.multiply(rnd, stddev, name="mul"), mean)  # TF's "mul"
        _take_scope_name(out.op, scope)
        return out


def random_normal(
    shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None
) -> ops.Tensor:
    """Values drawn from a normal distribution (`tf.random_normal`).

    Raises:
      ValueError: for a non-floating dtype.
    """
    dtype = _float_dtype(dtype)
    return _normal("RandomStandardNormal", "random_normal", shape, mean, stddev, dtype, seed,
                   name)  # fmt: skip


def truncated_normal(
    shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None
) -> ops.Tensor:
    """Normal values, redrawn when more than 2 stddevs from the mean (`tf.truncated_normal`).

    Raises:
      ValueError: for a non-floating dtype.
    """
    dtype = _float_dtype(dtype)
    return _normal("TruncatedNormal", "truncated_normal", shape, mean, stddev, dtype, seed,
                   name)  # fmt: skip


def random_shuffle(value, seed=None, name=None) -> ops.Tensor:
    """`value` with its first dimension randomly permuted (`tf.random_shuffle`)."""
    return ops.apply_op("RandomShuffle", [value], _seed_attrs(seed), name=name).outputs[0]


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None) -> ops.Tensor:
    """Class indices drawn from the categorical distributions `logits` [batch, classes].

    Returns an int64 (or `output_dtype`) tensor of shape [batch, num_samples].

    Raises:
      InvalidArgumentError: at run time, for non-matrix logits or a bad `num_samples`.
    """
    with ops.name_scope(name, "multinomial", [logits]):
        return _categorical(logits, num_samples, output_dtype, seed)


def categorical(logits, num_samples, dtype=None, seed=None, name=None) -> ops.Tensor:
    """`tf.random.categorical`: `multinomial` with the argument order of TF2."""
    with ops.name_scope(name, "categorical", [logits]):
        return _categorical(logits, num_samples, dtype, seed)


def _categorical(logits, num_samples, dtype, seed) -> ops.Tensor:
    logits = ops.convert_to_tensor(logits, name="logits")
    attrs = _seed_attrs(seed)
    if dtype is not None:
        attrs["output_dtype"] = dtypes.as_dtype(dtype)
    return ops.apply_op("Multinomial", [logits, num_samples], attrs).outputs[0]


# Random values do not depend differentiably on their (shape, seed) inputs.
for _op_type in (
    "RandomUniform",
    "RandomStandardNormal",
    "TruncatedNormal",
    "RandomUniformInt",
    "RandomShuffle",
    "Multinomial",
):
    NotDifferentiable(_op_type)
