"""`tf.random.Generator`: a random-number generator whose state is a variable, drawing
TF's numbers.

The state is an int64 [3] resource variable ("random_generator/StateVar"): the Philox
counter (two words) and key.  Each draw is TF's graph: `RngReadAndSkip` returns the
state and moves the counter 256 blocks per value drawn, then a stateless V2 op draws
from that (key, counter) (ops/stateless_random_ops.py).  So a Generator made from a
seed gives, draw after draw, the numbers TF 2.21 gives for that seed, and its state
reads as TF's.  Only Philox (and AUTO_SELECT, which is Philox on CPU) draws.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    manip_ops,
    math_ops,
    math_special_ops,
    philox_random,
    reduction_ops,
    slicing_ops,
)
from asyncflow.ops import stateless_random_ops as srng
from asyncflow.resource_variable import ResourceVariable
from asyncflow.variables import Variable

__all__ = ["Generator", "get_global_generator", "set_global_generator"]

_STATE_SIZE = 3


class Generator:
    """`tf.random.Generator` (TF1 graph mode): `from_seed(seed)`, `normal`, `uniform`,
    `truncated_normal`, `uniform_full_int`, `binomial`, `make_seeds`, `skip`, `state`.

    Raises:
      ValueError: an algorithm other than Philox / AUTO_SELECT, or a state of the wrong
        shape.
    """

    def __init__(self, copy_from=None, state=None, alg=None):
        if copy_from is not None:
            if state is not None or alg is not None:
                raise ValueError("copy_from excludes state and alg")
            self._state_var = self._create_variable(copy_from.state.read_value())
            self._alg = copy_from.algorithm
            return
        if state is None or alg is None:
            raise ValueError("Generator needs copy_from, or both state and alg")
        alg = srng.convert_alg_to_int(alg)
        srng.check_alg(alg)
        if isinstance(state, Variable):
            state.shape.assert_is_compatible_with([_STATE_SIZE])
            self._state_var = state
        else:
            state = ops.convert_to_tensor(state, dtype=dtypes.int64)
            state.shape.assert_is_compatible_with([_STATE_SIZE])
            self._state_var = self._create_variable(state)
        self._alg = alg

    @staticmethod
    def _create_variable(initial):
        with ops.name_scope("random_generator"):
            return ResourceVariable(initial, dtype=dtypes.int64, trainable=False, name="StateVar")

    @classmethod
    def from_seed(cls, seed, alg=None) -> Generator:
        """A generator whose state is `create_rng_state(seed, alg)` (Philox by default)."""
        alg = srng.Algorithm.PHILOX.value if alg is None else alg
        return cls(state=srng.create_rng_state(seed, alg), alg=alg)

    @classmethod
    def from_state(cls, state, alg) -> Generator:
        return cls(state=state, alg=alg)

    @classmethod
    def from_key_counter(cls, key, counter, alg) -> Generator:
        counter = ops.convert_to_tensor(counter, dtype=dtypes.int64)
        key = ops.convert_to_tensor(key, dtype=dtypes.int64)
        state = manip_ops.concat([counter, array_ops.reshape(key, [1])], 0)
        return cls(state=state, alg=alg)

    @classmethod
    def from_non_deterministic_state(cls, alg=None) -> Generator:
        """A generator seeded from the operating system's entropy."""
        alg = srng.Algorithm.PHILOX.value if alg is None else alg
        words = np.random.SeedSequence().generate_state(_STATE_SIZE, np.uint64)
        return cls(state=words.view(np.int64), alg=alg)

    # -- state -------------------------------------------------------------------------
    @property
    def state(self):
        """The int64 [3] state variable: counter (low, high) and key."""
        return self._state_var

    @property
    def algorithm(self) -> int:
        return self._alg

    @property
    def key(self):
        return self._state_var.read_value()[-1]

    def reset(self, state):
        return self._state_var.assign(ops.convert_to_tensor(state, dtype=dtypes.int64))

    def reset_from_seed(self, seed):
        return self.reset(srng.create_rng_state(seed, self._alg))

    def skip(self, delta):
        """The state before, as a tensor; running it moves the counter past `delta`
        values (op RngReadAndSkip)."""
        alg = ops.convert_to_tensor(self._alg, dtype=dtypes.int32)
        delta = math_ops.cast(delta, dtypes.uint64)
        return ops.apply_op("RngReadAndSkip", [self._state_var.handle, alg, delta], {}).outputs[0]

    def _key_counter(self, shape):
        state = self.skip(reduction_ops.reduce_prod(shape))
        counter = slicing_ops.strided_slice(state, [0], [2])
        key = slicing_ops.strided_slice(state, [2], [3])
        counter = math_special_ops.bitcast(counter, dtypes.uint64)
        return math_special_ops.bitcast(key, dtypes.uint64), counter

    def _draw(self, op_type, shape, dtype, extra=(), name=None):
        key, counter = self._key_counter(shape)
        alg = ops.convert_to_tensor(self._alg, dtype=dtypes.int32)
        if "Normal" in op_type:
            philox_random.prepare()  # (the host's Box-Muller loops, compiled meanwhile)
        return ops.apply_op(
            op_type,
            [shape, key, counter, alg, *extra],
            {"dtype": dtypes.as_dtype(dtype), "Tshape": shape.dtype},
            name=name,
        ).outputs[0]

    # -- draws -----------------------------------------------------------------------
    def normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        with ops.name_scope(name, "stateful_normal", [shape, mean, stddev]):
            shape = srng.shape_tensor(shape)
            mean = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
            stddev = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
            rnd = self._draw("StatelessRandomNormalV2", shape, dtype)
            return math_ops.add(rnd * stddev, mean)

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        with ops.name_scope(name, "truncated_normal", [shape, mean, stddev]):
            shape = srng.shape_tensor(shape)
            mean = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
            stddev = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
            rnd = self._draw("StatelessTruncatedNormalV2", shape, dtype)
            return math_ops.add(rnd * stddev, mean)

    def uniform(self, shape, minval=0, maxval=None, dtype=dtypes.float32, name=None):
        """Values in [minval, maxval); an integer dtype needs both bounds, or neither
        (the full range).

        Raises:
          ValueError: an integer dtype with only one bound.
        """
        dtype = dtypes.as_dtype(dtype)
        if dtype.is_integer:
            if (minval is None) != (maxval is None):
                raise ValueError(
                    f"For integer dtype {dtype}, minval and maxval must be both `None` or "
                    f"both non-`None`; got minval={minval} and maxval={maxval}"
                )
        elif maxval is None:
            maxval = 1
        with ops.name_scope(name, "stateful_uniform", [shape, minval, maxval]):
            shape = srng.shape_tensor(shape)
            if dtype.is_integer and minval is None:
                return self._draw("StatelessRandomUniformFullIntV2", shape, dtype)
            lo = ops.convert_to_tensor(minval, dtype=dtype, name="min")
            hi = ops.convert_to_tensor(maxval, dtype=dtype, name="max")
            if dtype.is_integer:
                return self._draw("StatelessRandomUniformIntV2", shape, dtype, (lo, hi))
            rnd = self._draw("StatelessRandomUniformV2", shape, dtype)
            return math_ops.add(rnd * (hi - lo), lo)

    def uniform_full_int(self, shape, dtype=dtypes.uint64, name=None):
        with ops.name_scope(name, "stateful_uniform_full_int", [shape]):
            shape = srng.shape_tensor(shape)
            return self._draw("StatelessRandomUniformFullIntV2", shape, dtype)

    def binomial(self, shape, counts, probs, dtype=dtypes.int32, name=None):
        """Binomial(counts, probs) draws, `shape` ending with their broadcast shape (op
        StatefulRandomBinomial: TF's numbers, the state moved as TF moves it)."""
        with ops.name_scope(name, "binomial", [shape, counts, probs]):
            counts = ops.convert_to_tensor(counts, name="counts")
            probs = ops.convert_to_tensor(probs, name="probs")
            shape = srng.shape_tensor(shape)
            alg = ops.convert_to_tensor(self._alg, dtype=dtypes.int64)
            return ops.apply_op(
                "StatefulRandomBinomial",
                [self._state_var.handle, alg, shape, counts, probs],
                {"S": shape.dtype, "T": counts.dtype, "dtype": dtypes.as_dtype(dtype)},
            ).outputs[0]

    def make_seeds(self, count=1):
        """[2, count] int64 seeds for stateless ops: full-range keys over zeros."""
        keys = self.uniform_full_int([count], dtype=dtypes.int64)
        return manip_ops.stack([keys, keys * 0])

    def split(self, count=1) -> list:
        """TF 2.21 in graph mode raises NotImplementedError here (its new generators'
        variables would be initialized from a tensor of this one's draws); so does this.

        Raises:
          NotImplementedError: always (graph mode).
        """
        raise NotImplementedError(
            "tf.random.Generator.split is not available in graph mode (TF 2.21 raises "
            "NotImplementedError too); use make_seeds() with the stateless ops."
        )


_GLOBAL: list = [None]


def get_global_generator() -> Generator:
    """The process's generator, made from non-deterministic state on first use."""
    if _GLOBAL[0] is None:
        _GLOBAL[0] = Generator.from_non_deterministic_state()
    return _GLOBAL[0]


def set_global_generator(generator: Generator) -> None:
    """Replace the global generator (TF: existing references keep the old one)."""
    _GLOBAL[0] = generator
