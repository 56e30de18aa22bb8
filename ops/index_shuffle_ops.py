"""TF's RandomIndexShuffle op (`tf.random_index_shuffle`): the position of `index` in a
pseudorandom permutation of [0, max_index] chosen by a 3-word `seed`, with TF's bits.

How TF makes the permutation (tensorflow/core/kernels/random_index_shuffle.cc, restated):
a block cipher on B-bit blocks, B the bits max_index needs rounded up to even and at
least 16, split into two W = B/2 bit halves (left = the high half).  The round keys
are the three seed words (each cut to W bits) followed by
`c ^ (z & 1) ^ k[i-3] ^ rotr(k[i-1], 3) ^ rotr(k[i-1], 4)` for i = 3 .. rounds-1, where
c = 0xfffffffc and z starts at 0x7369f885192c0ef5 (both cut to W bits) and shifts right
by one per key.  Each pair of keys (k1, k2) is one double round:
`left ^= f(right) ^ k1; right ^= f(left) ^ k2` with f(x) = (rotl(x, 1) & rotl(x, 8)) ^
rotl(x, 2), rotations within W bits.  The cipher permutes [0, 2^B); applying it again
until the value is at most max_index ("cycle walking") permutes [0, max_index].

The kernel works on all elements at once (NumPy uint64), one group per block size.
An index above max_index is refused (InvalidArgumentError), where TF may walk forever.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["random_index_shuffle"]

_INTS = TypeConstraint(["int32", "int64", "uint32", "uint64"])
_C = 0xFFFFFFFC
_Z = 0x7369F885192C0EF5


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shuffle_shape(op):
    index, seed, max_index = (t.shape for t in op.inputs)
    if index.rank == 0 and seed.rank == 1 and max_index.rank == 0:
        return [tensor_shape.TensorShape([])]
    n = None
    for s in (index, max_index):
        if s.rank == 1 and s[0].value is not None:
            n = s[0].value
    if seed.rank == 2 and seed[0].value is not None:
        n = seed[0].value
    return [tensor_shape.TensorShape([n])]


RandomIndexShuffle = register_op(
    "RandomIndexShuffle",
    inputs=["index: dtype", "seed: Tseed", "max_index: dtype"],
    outputs=["output: dtype"],
    attrs={"rounds": 4, "dtype": _INTS, "Tseed": _INTS},
    shape_fn=_shuffle_shape,
)
NotDifferentiable("RandomIndexShuffle")


def _block_bits(max_index: int) -> int:
    bits = math.ceil(math.log2(float(max_index)))  # (TF: log2 of the value as a double)
    return min(max(bits + bits % 2, 16), 64)


def _rotl(x, r: int, w: int, mask):
    return ((x << np.uint64(r)) & mask) | (x >> np.uint64(w - r))


def _rotr(x, r: int, w: int, mask):
    return (x >> np.uint64(r)) | ((x << np.uint64(w - r)) & mask)


def _round_keys(seeds: np.ndarray, w: int, rounds: int) -> list:
    mask = np.uint64((1 << w) - 1)
    keys = [seeds[:, i] & mask for i in range(3)]
    c, z = np.uint64(_C & int(mask)), _Z & int(mask)
    for i in range(3, rounds):
        prev = keys[i - 1]
        keys.append(
            c ^ np.uint64(z & 1) ^ keys[i - 3] ^ _rotr(prev, 3, w, mask) ^ _rotr(prev, 4, w, mask)
        )
        z >>= 1
    return keys


def _encrypt(v: np.ndarray, keys: list, w: int) -> np.ndarray:
    mask = np.uint64((1 << w) - 1)
    left, right = (v >> np.uint64(w)) & mask, v & mask

    def f(x):
        return (_rotl(x, 1, w, mask) & _rotl(x, 8, w, mask)) ^ _rotl(x, 2, w, mask)

    for k1, k2 in zip(keys[0::2], keys[1::2], strict=False):
        left = left ^ f(right) ^ k1
        right = right ^ f(left) ^ k2
    return (left << np.uint64(w)) | right


def index_shuffle(index: np.ndarray, seeds: np.ndarray, max_index: np.ndarray, rounds: int):
    """TF's index_shuffle, elementwise over uint64 arrays (`seeds`: [n, 3] uint32 words)."""
    out = np.zeros(index.shape, np.uint64)
    bits = np.array([0 if m == 0 else _block_bits(int(m)) for m in max_index], np.int64)
    for b in np.unique(bits[bits > 0]):
        rows = np.nonzero(bits == b)[0]
        w = int(b) // 2
        keys = _round_keys(seeds[rows], w, rounds)
        v, top = index[rows], max_index[rows]
        pending = np.ones(len(rows), bool)
        while pending.any():
            step = _encrypt(v[pending], [k[pending] for k in keys], w)
            v[pending] = step
            pending[pending] = step > top[pending]
        out[rows] = v
    return out


@RandomIndexShuffle.kernel("CPU")
async def _random_index_shuffle(ctx, index, seed, max_index):
    rounds = int(ctx.attrs["rounds"])
    if rounds < 4 or rounds % 2:
        raise _invalid(f"rounds must be an even integer >= 4, got {rounds}")
    index, seed, max_index = np.asarray(index), np.asarray(seed), np.asarray(max_index)
    n = max(index.size, max_index.size, seed.size // 3)
    if not (index.ndim == 0 or (index.ndim == 1 and index.shape[0] == n)):
        raise _invalid("Index bust be a scalar or vector.")
    if not (seed.shape == (3,) or (seed.ndim == 2 and seed.shape == (n, 3))):
        raise _invalid(
            f"Seed must be a vector of size [3] or a matrix of size [{n}, 3] but got "
            f"{list(seed.shape)}."
        )
    if not (max_index.ndim == 0 or (max_index.ndim == 1 and max_index.shape[0] == n)):
        raise _invalid(
            "Maxval must be a scalar or a vector of the same size as index but got "
            f"{list(max_index.shape)}"
        )
    dtype = index.dtype
    idx = np.broadcast_to(index.astype(np.uint64), (n,)).copy()
    top = np.broadcast_to(max_index.astype(np.uint64), (n,)).copy()
    words = np.broadcast_to(seed.reshape(-1, 3), (n, 3)).astype(np.uint32).astype(np.uint64)
    # TF's checks, in TF's order, on the values as given (before the unsigned casts)
    flat_max = np.ravel(max_index)
    if flat_max.dtype.kind == "i" and np.any(flat_max < 0):
        raise _invalid(f"max_index must be >= 0 but was {int(flat_max[flat_max < 0][0])}")
    if np.any(idx > top):
        k = int(np.argmax(idx > top))
        raise _invalid(f"max_index must be >= index, but {int(top[k])} < {int(idx[k])}")
    out = await ctx.device.compute(index_shuffle, idx, words, top, rounds)
    out = out.astype(dtype)
    all_scalar = index.ndim == 0 and seed.ndim == 1 and max_index.ndim == 0
    return out.reshape(()) if all_scalar else out


def random_index_shuffle(index, seed, max_index, rounds=4, name=None):
    """`tf.random_index_shuffle(index, seed, max_index, rounds=4)`: where `index` lands in
    the permutation of [0, max_index] that `seed` (3 integers, or one row of 3 per index)
    picks; TF's bits.

    Raises (when run):
      InvalidArgumentError: shapes that do not fit, rounds odd or under 4, or an index
        above max_index.
    """
    return ops.apply_op(
        "RandomIndexShuffle", [index, seed, max_index], {"rounds": rounds},
        name=name or "RandomIndexShuffle",
    ).outputs[0]  # fmt: skip
