"""`tf.nn.experimental`: dropout with a caller-chosen random source.

`stateless_dropout` draws its mask with `stateless_random_uniform` from a [2] seed (the
same seed gives the same mask in every run and step); `general_dropout` takes any
`uniform_sampler(shape, dtype)`.  Both scale and mask as TF's shared helper does, which
differs from `tf.nn.dropout`'s graph: the kept values are `x * (1 / (1 - rate))` (or
`x / (1 - rate)` for a tensor rate) selected by `where(uniform >= rate, ., 0)`.
"""

from __future__ import annotations

import functools
import numbers

from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow.math_composites import where_v2
from asyncflow.ops import array_ops, math_ops
from asyncflow.ops.random_more_ops import stateless_random_uniform

__all__ = ["general_dropout", "stateless_dropout"]


def _noise_shape(x, noise_shape):
    """`noise_shape` with its unknown dimensions taken from x's where x knows them."""
    if noise_shape is None:
        return array_ops.shape(x)
    try:
        given = tensor_shape.as_shape(noise_shape)
    except (TypeError, ValueError):
        return noise_shape
    if x.shape.dims is not None and given.dims is not None and len(x.shape.dims) == len(given):
        return tensor_shape.TensorShape(
            [
                xd if nd is None and xd is not None else nd
                for xd, nd in zip(x.shape.as_list(), given.as_list())
            ]
        )
    return noise_shape


def _dropout(x, rate, noise_shape, uniform_sampler, name, default_name):
    with ops.name_scope(name, default_name, [x]):
        is_number = isinstance(rate, numbers.Real)
        if is_number and not 0 <= rate < 1:
            raise ValueError(
                f"`rate` must be a scalar tensor or a float in the range [0, 1). Received: "
                f"rate={rate}"
            )
        x = ops.convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(
                "`x.dtype` must be a floating point tensor as `x` will be scaled. Received: "
                f"x_dtype={x.dtype}"
            )
        if is_number and rate == 0:
            return x
        if not isinstance(rate, ops.Tensor):
            if not is_number:
                raise ValueError(
                    f"`rate` must be a scalar or scalar tensor. Received: rate={rate}"
                )
            scale = ops.convert_to_tensor(1 / (1 - rate), dtype=x.dtype)
            kept = math_ops.multiply(x, scale)
        else:
            rate.shape.assert_has_rank(0)
            if rate.dtype != x.dtype:
                if not rate.dtype.is_compatible_with(x.dtype):
                    raise ValueError(
                        "`x.dtype` must be compatible with `rate.dtype`. Received: "
                        f"x.dtype={x.dtype} and rate.dtype={rate.dtype}"
                    )
                rate = math_ops.cast(rate, x.dtype, name="rate")
            one = ops.convert_to_tensor(1, dtype=x.dtype)
            kept = math_ops.realdiv(x, math_ops.subtract(one, rate))
        uniform = uniform_sampler(shape=_noise_shape(x, noise_shape), dtype=x.dtype)
        keep = math_ops.greater_equal(uniform, rate)
        zero = ops.convert_to_tensor(0, dtype=x.dtype)
        out = where_v2(keep, kept, zero)
        out.set_shape(x.shape)
        return out


def stateless_dropout(x, rate, seed, rng_alg=None, noise_shape=None, name=None):
    """Dropout whose mask is `stateless_random_uniform(noise_shape, seed, alg=rng_alg)`.

    Raises:
      ValueError: a rate outside [0, 1), a non-floating x, or a rate tensor of another
        dtype family.
    """
    sampler = functools.partial(stateless_random_uniform, seed=seed, alg=rng_alg)
    return _dropout(x, rate, noise_shape, sampler, name, "stateless_dropout")


def general_dropout(x, rate, uniform_sampler, noise_shape=None, name=None):
    """Dropout whose mask comes from `uniform_sampler(shape=..., dtype=...)`, values in
    [0, 1)."""
    return _dropout(x, rate, noise_shape, uniform_sampler, name, "general_dropout")
