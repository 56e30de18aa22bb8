"""`tf.nn.experimental`: dropout with a caller-chosen random source.

`stateless_dropout` draws its mask with `stateless_random_uniform` from a [2] seed (the
same seed gives the same mask in every run and step); `general_dropout` takes any
`uniform_sampler(shape, dtype)`.  Both scale and mask as TF's shared helper does, which
differs from `tf.nn.dropout`'s graph: the kept values are `x * (1 / (1 - rate))` (or
`x / (1 - rate)` for a tensor rate) selected by `where(uniform >= rate, ., 0)`.
"""

from __future__ import annotations

import functools

from asyncflow.ops.nn_impl import _dropout
from asyncflow.ops.random_more_ops import stateless_random_uniform

__all__ = ["general_dropout", "stateless_dropout"]


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
