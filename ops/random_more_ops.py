"""More random ops: RandomGamma, RandomPoissonV2 (TF1's `tf.random_gamma`,
`tf.random_poisson`) and the stateless draws (StatelessRandomUniform / Normal /
TruncatedNormal / UniformInt: `tf.random.stateless_*`).

The stateful ops keep TF's Philox generator per op (its seed attrs), reserve TF's 256
samples per output each run and draw as the stateless kernels do from there
(ops/stateless_random_dists.py: Marsaglia-Tsang gamma, Knuth / PTRS Poisson), so a
seeded op gives TF's numbers run after run.  The stateless ops are
ops/stateless_random_ops.py's: TF's Philox stream for the `seed` input, so the same
(shape, seed) gives TF's numbers.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops import philox_random
from asyncflow.ops import stateless_random_dists as dists
from asyncflow.ops.random_ops import (
    _SEEDS,
    _float_dtype,
    _host,
    _make_shape,
    _seed_attrs,
    _shape_tensor,
    _tf_generator,
    _to_device,
)
from asyncflow.registry import INDEX, NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "random_gamma",
    "random_poisson",
    "stateless_random_uniform",
    "stateless_random_normal",
    "stateless_truncated_normal",
]

_GAMMA_T = TypeConstraint(["float16", "float32", "float64"])
_POISSON_R = TypeConstraint(["float16", "float32", "float64", "int32", "int64"])
_POISSON_OUT = TypeConstraint(["float16", "float32", "float64", "int32", "int64"], "int64")


def _prefix_shape(op):
    """shape ++ the parameter's shape (TF's RandomGamma/RandomPoisson shape function)."""
    head = ops.constant_shape(op.inputs[0])
    return [head.concatenate(op.inputs[1].shape)]


# -- RandomGamma -------------------------------------------------------------------------

RandomGamma = register_op(
    "RandomGamma",
    inputs=["shape: S", "alpha: T"],
    outputs=["output: T"],
    attrs={**_SEEDS, "S": INDEX, "T": _GAMMA_T},
    shape_fn=_prefix_shape,
    stateful=True,
)


async def _stateful_draw(ctx, draw, shape, param, dtype):
    """`draw(key, counter, out_shape, np dtype, param)` (ops/stateless_random_dists.py, the
    same per-output streams as the stateless ops) at this op's next reservation of
    TF's 256 samples per output; on the host, copied to the op's device."""
    out_shape = shape + param.shape
    n = int(np.prod(out_shape))
    ctx.device.check_alloc(n, dtype)
    np_dtype = dtype.as_numpy_dtype
    if n == 0:
        return await _to_device(ctx, np.empty(out_shape, np_dtype))
    gen = _tf_generator(ctx)
    counter = gen.reserve(n)
    out = await ctx.device.compute(
        lambda: draw(gen.key, counter, out_shape, np_dtype, param), cost=64 * n
    )
    return await _to_device(ctx, out)


@RandomGamma.kernel(host_memory=("shape",))
async def _random_gamma(ctx, shape, alpha):
    # (TF's raw op can return 0 or subnormals for a small alpha; tf.random_gamma takes the
    # maximum with the dtype's tiny, as the builder below does)
    return await _stateful_draw(ctx, dists.gamma, _make_shape(shape), _host(alpha), ctx.attrs["T"])


# -- RandomPoissonV2 ---------------------------------------------------------------------

RandomPoissonV2 = register_op(
    "RandomPoissonV2",
    inputs=["shape: S", "rate: R"],
    outputs=["output: dtype"],
    attrs={**_SEEDS, "S": INDEX, "R": _POISSON_R, "dtype": _POISSON_OUT},
    shape_fn=_prefix_shape,
    stateful=True,
)


@RandomPoissonV2.kernel(host_memory=("shape",))
async def _random_poisson(ctx, shape, rate):
    return await _stateful_draw(
        ctx, dists.poisson, _make_shape(shape), _host(rate), ctx.attrs["dtype"]
    )


NotDifferentiable("RandomPoissonV2")


@RandomGamma.gradient
def _random_gamma_grad(op, grad):
    # As TF: alpha gets RandomGammaGrad(alpha, sample) (alpha with a leading unit axis per
    # sample dimension) times grad, summed over the sample dimensions; shape gets none.
    alpha, sample = op.inputs[1], op.outputs[0]
    with ops.control_dependencies([grad]):
        n = sample.shape.ndims - alpha.shape.ndims
        alpha_b = alpha
        for _ in range(n):
            alpha_b = _g.apply("ExpandDims", alpha_b, _g.constant(0, dtypes.int32))
        partial_a = _g.apply("RandomGammaGrad", alpha_b, sample)
        return [None, _g.reduce_sum(_g.mul(grad, partial_a), list(range(n)))]


# The stateless draws' ops (StatelessRandomUniform, ...) are ops/stateless_random_ops.py's,
# with TF's numbers; the builders below apply them by name.


# -- builders ----------------------------------------------------------------------------


def random_gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None, name=None):
    """Samples of Gamma(alpha, beta), shape `shape + broadcast(alpha, beta).shape`
    (`tf.random_gamma`)."""
    dtype = dtypes.as_dtype(dtype)
    with ops.name_scope(name, "random_gamma", [shape, alpha, beta]):
        shape = _shape_tensor(shape)
        alpha = ops.convert_to_tensor(alpha, dtype=dtype, name="alpha")
        from asyncflow.ops import math_ops

        if beta is not None:
            beta = ops.convert_to_tensor(beta, dtype=dtype, name="beta")
            alpha = math_ops.add(alpha, math_ops.multiply(beta, _zeros_like(beta)))
        sample = ops.apply_op("RandomGamma", [shape, alpha], _seed_attrs(seed)).outputs[0]
        tiny = np.finfo(dtype.as_numpy_dtype).tiny
        if beta is not None:
            sample = math_ops.realdiv(sample, beta)
        return math_ops.maximum(tiny, sample)


def _zeros_like(t):
    from asyncflow.ops import array_ops

    return array_ops.zeros_like(t)


def random_poisson(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """Samples of Poisson(lam), shape `shape + lam.shape` (TF1's `tf.random_poisson`;
    note the argument order, `lam` first)."""
    with ops.name_scope(name, "random_poisson", [lam, shape]):
        shape = _shape_tensor(shape)
        lam = ops.convert_to_tensor(lam, name="lam", dtype=None)
        attrs = {**_seed_attrs(seed), "dtype": dtypes.as_dtype(dtype)}
        return ops.apply_op("RandomPoissonV2", [shape, lam], attrs).outputs[0]


def _stateless(op_type, default_name, shape, seed, dtype, name, scale=None, shift=None):
    with ops.name_scope(name, default_name, [shape, seed]):
        shape = _shape_tensor(shape)
        seed = ops.convert_to_tensor(seed, name="seed")
        rnd = ops.apply_op(op_type, [shape, seed], {"dtype": dtype}).outputs[0]
        if "Normal" in op_type:
            philox_random.prepare()  # (the host's Box-Muller loops, compiled meanwhile)
        if scale is None:
            return rnd
        from asyncflow.ops import math_ops

        return math_ops.add(math_ops.multiply(rnd, scale), shift)


def stateless_random_uniform(
    shape, seed, minval=0, maxval=None, dtype=dtypes.float32, name=None, alg="auto_select"
):
    """Deterministic uniform values in [minval, maxval) for a [2] `seed`, TF's numbers
    (`tf.random.stateless_uniform`); an integer dtype with minval=maxval=None draws over
    its whole range.

    Raises:
      ValueError: an integer dtype with one bound only, or an unsigned one with bounds.
    """
    from asyncflow.ops import stateless_random_ops as srng

    srng.check_alg("auto_select" if alg is None else alg)
    dtype = dtypes.as_dtype(dtype)
    if dtype.is_integer:
        if (minval is None) != (maxval is None):
            raise ValueError(
                f"For integer `dtype` argument {dtype}, argument `minval` and `maxval` must "
                f"be both None or not None. Got `minval`={minval} and `maxval`={maxval}."
            )
        if minval is None:
            return srng.stateless_random_uniform_full_int(shape, seed, dtype, name)
        if dtype in (dtypes.uint32, dtypes.uint64):
            raise ValueError(
                f"Argument `dtype` got invalid value {dtype} when argument `minval` is not "
                "None. Please don't use unsigned integers in this case."
            )
        with ops.name_scope(name, "stateless_random_uniform", [shape, seed]):
            inputs = [
                _shape_tensor(shape),
                ops.convert_to_tensor(seed, name="seed"),
                ops.convert_to_tensor(minval, dtype=dtype, name="min"),
                ops.convert_to_tensor(maxval, dtype=dtype, name="max"),
            ]
            return ops.apply_op("StatelessRandomUniformInt", inputs, {"dtype": dtype}).outputs[0]
    dtype = _float_dtype(dtype)
    maxval = 1 if maxval is None else maxval
    minval_t = ops.convert_to_tensor(minval, dtype=dtype, name="min")
    maxval_t = ops.convert_to_tensor(maxval, dtype=dtype, name="max")
    from asyncflow.ops import math_ops

    return _stateless("StatelessRandomUniform", "stateless_random_uniform", shape, seed,
                      dtype, name, math_ops.subtract(maxval_t, minval_t), minval_t)  # fmt: skip


def stateless_random_normal(
    shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None, alg="auto_select"
):
    """Deterministic normal values for a [2] `seed` (`tf.random.stateless_normal`)."""
    from asyncflow.ops import stateless_random_ops as srng

    srng.check_alg("auto_select" if alg is None else alg)
    dtype = _float_dtype(dtype)
    mean = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
    stddev = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
    return _stateless("StatelessRandomNormal", "stateless_random_normal", shape, seed, dtype,
                      name, stddev, mean)  # fmt: skip


def stateless_truncated_normal(
    shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None, alg="auto_select"
):
    """Deterministic truncated-normal values for a [2] `seed`
    (`tf.random.stateless_truncated_normal`)."""
    from asyncflow.ops import stateless_random_ops as srng

    srng.check_alg("auto_select" if alg is None else alg)
    dtype = _float_dtype(dtype)
    mean = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
    stddev = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
    return _stateless("StatelessTruncatedNormal", "stateless_truncated_normal", shape, seed,
                      dtype, name, stddev, mean)  # fmt: skip
