"""`tf.random.experimental.index_shuffle` and `stateless_shuffle`: TF 2.21's wrappers
over the RandomIndexShuffle and StatelessShuffle ops, built as TF builds them in a graph
(so the same seed gives TF's permutation).

- index_shuffle takes a [2] seed and pads it in front, with a PadV2 op, to the [3]
  seed the op reads; the pad value is the constant TF uses (498247692), so TF's
  permutation comes out. max_index takes the index's dtype; the op uses 4 rounds.
- stateless_shuffle turns the seed into the op's (key, counter) with
  StatelessRandomGetKeyCounter for "auto_select" and "philox" (on a CPU TF's Philox
  scrambling gives the same key and counter; TF's graph for "philox" spells it out in
  bit ops). "threefry" gets a [1] counter, which the op rejects when run, as in TF.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    bitwise_ops,
    cast_ops,
    manip_ops,
    slicing_ops,
    stateless_random_ops,
)
from asyncflow.ops import index_shuffle_ops as _index_shuffle_ops  # noqa: F401 - the op

__all__ = ["index_shuffle", "stateless_shuffle"]

# What TF 2.21 pads a [2] seed with (recorded from its graph).
_SEED_PAD = 498247692


def index_shuffle(index, seed, max_index):
    """The position of `index` (a scalar or vector of int32/int64/uint32/uint64) in the
    pseudo-random permutation of [0, max_index] that the [2] `seed` picks: TF's bits.

    Raises:
      TypeError: `index` is not one of those integer types.
      ValueError: `seed` does not have shape [2] (TF's message about the padded [3]).
      InvalidArgumentError (when run): max_index < 0, or an index above max_index.
    """
    seed = ops.convert_to_tensor(seed)
    if seed.shape.ndims is not None and seed.shape.ndims != 1:
        raise ValueError(f"Seed must have shape [3] or [n, 3] but got {seed.shape}.")
    padded = manip_ops.pad(seed, [[1, 0]], constant_values=_SEED_PAD)
    if padded.shape.ndims == 1 and padded.shape[0] not in (None, 3):
        raise ValueError(
            f"Seed must have shape [3] or [n, 3] but got [{padded.shape[0]}]. for "
            f"'RandomIndexShuffle' (op: 'RandomIndexShuffle')"
        )
    with ops.name_scope(None, "RandomIndexShuffle") as scope:
        index = ops.convert_to_tensor(index, name="index")
        allowed = (dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
        if index.dtype.base_dtype not in allowed:
            raise TypeError(
                f"Value passed to parameter 'index' has DataType {index.dtype.name} not in "
                "list of allowed values: int32, uint32, int64, uint64"
            )
        if index.shape.ndims is not None and index.shape.ndims > 1:
            raise ValueError(
                f"Shape must be at most rank 1 but is rank {index.shape.ndims} for "
                "'RandomIndexShuffle' (op: 'RandomIndexShuffle')"
            )
        max_index = ops.convert_to_tensor(max_index, dtype=index.dtype, name="max_index")
        return _index_shuffle_ops.random_index_shuffle(index, padded, max_index, name=scope)


def _threefry_key_counter(seed):
    """TF's ThreeFry (key, counter) of a [2] seed: one uint64 key, a [1] counter."""
    words = cast_ops.cast(seed, dtypes.uint64)
    low = slicing_ops.strided_slice(words, [0], [1], [1], shrink_axis_mask=1)
    high = slicing_ops.strided_slice(words, [1], [2], [1], shrink_axis_mask=1)
    key = bitwise_ops.bitwise_or(
        low, bitwise_ops.left_shift(high, cast_ops.cast(32, dtypes.uint64))
    )
    counter = ops.convert_to_tensor([0], dtype=dtypes.uint64)
    return array_ops.reshape(key, [1]), counter


def stateless_shuffle(value, seed, alg="auto_select", name=None):
    """`value` shuffled along its first dimension by the permutation the [2] `seed`
    picks (a scalar or a length-0/1 first dimension comes back unchanged): TF's order.

    Raises:
      ValueError: `seed` does not have shape [2], or `alg` is not an algorithm.
      InvalidArgumentError (when run): alg "threefry", as in TF 2.21.
    """
    with ops.name_scope(name, "stateless_shuffle", [value, seed]):
        value = ops.convert_to_tensor(value, name="value")
        alg_id = stateless_random_ops.convert_alg_to_int(alg)
        seed = ops.convert_to_tensor(seed, name="seed")
        if alg_id == stateless_random_ops.Algorithm.THREEFRY.value:
            key, counter = _threefry_key_counter(seed)
        else:
            if seed.shape.ndims == 1 and seed.shape[0] not in (None, 2):
                raise ValueError(
                    f"Dimension must be 2 but is {seed.shape[0]} for "
                    "'StatelessRandomGetKeyCounter' (op: 'StatelessRandomGetKeyCounter')"
                )
            key, counter = ops.apply_op(
                "StatelessRandomGetKeyCounter", [seed], {"Tseed": seed.dtype}
            ).outputs
        alg_t = ops.convert_to_tensor(alg_id, dtype=dtypes.int32, name="alg")
        return ops.apply_op(
            "StatelessShuffle", [value, key, counter, alg_t], {"T": value.dtype}
        ).outputs[0]
